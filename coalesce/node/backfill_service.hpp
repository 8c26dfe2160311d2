#pragma once

#include <chrono>
#include <memory>
#include <tuple>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/scoped_actor.hpp>

#include "coalesce/actors/backfill_scheduler.hpp"
#include "coalesce/messages/node_interface.hpp"
#include "coalesce/node/deadline.hpp"
#include "coalesce/node/timeline_service.hpp"

namespace coalesce {

/// The back-pagination scheduler as a node hosts it (an entry of
/// `hosted_services`, coalesce/node/service_list.hpp): paging through the
/// node's own timeline, stopped by cancelling every run (its callers are
/// answered) before the services after it wind down.
class backfill_service {
public:
  template <class Options, class Earlier>
  void start(caf::actor_system& sys, const std::shared_ptr<storage::database>&,
             const Options& options, const Earlier& earlier) {
    const auto& timeline = std::get<timeline_service>(earlier).actor();
    actor_ = spawn_backfill_scheduler(sys, timeline, options.scheduler);
  }

  void add_handles(service_handles& handles) const {
    handles.backfill = actor_;
  }

  bool wind_down(caf::scoped_actor& self,
                 std::chrono::steady_clock::time_point deadline) const {
    self->request(actor_, until(deadline), shutdown_atom::value)
      .receive([](ok_atom) {}, [](caf::error&) {});
    return true;
  }

  std::vector<caf::actor> to_exit() const {
    return {caf::actor_cast<caf::actor>(actor_)};
  }

  std::vector<caf::actor> to_wait_for() const {
    return to_exit();
  }

  /// The scheduler itself, for what only the process may send (a stop
  /// condition as code, its stats).
  const scheduler_actor& actor() const {
    return actor_;
  }

private:
  scheduler_actor actor_;
};

} // namespace coalesce
