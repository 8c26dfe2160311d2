#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <coalesce/actors/timeline_actors.hpp>
#include <coalesce/messages/node_interface.hpp>

namespace coalesce {

/// The room timeline as a node hosts it (an entry of `hosted_services`,
/// coalesce/node/service_list.hpp): one detached actor over the database,
/// the scheduler's default pager. It holds nothing unwritten: every append
/// is answered once written.
class timeline_service {
public:
  /// The service it hosts (coalesce/messages/node_interface.hpp).
  using descriptor = timeline_descriptor;

  template <class Options, class Earlier>
  void start(caf::actor_system& sys,
             const std::shared_ptr<storage::database>& db, const Options&,
             const Earlier&) {
    actor_ = sys.spawn<caf::detached>(timeline_store, db);
  }

  void add_handles(service_handles& handles) const {
    handles.timeline = actor_;
  }

  bool wind_down(caf::scoped_actor&,
                 std::chrono::steady_clock::time_point) const {
    return true;
  }

  std::vector<caf::actor> to_exit() const {
    return {caf::actor_cast<caf::actor>(actor_)};
  }

  std::vector<caf::actor> to_wait_for() const {
    return to_exit();
  }

  /// The timeline with its pager messages (a scheduler's pager).
  timeline_actor actor() const {
    return actor_;
  }

  /// The timeline as the node's replica of its rooms.
  const timeline_replica_store_actor& replica_store() const {
    return actor_;
  }

private:
  timeline_replica_store_actor actor_;
};

} // namespace coalesce
