#pragma once

#include <chrono>
#include <memory>
#include <tuple>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/scoped_actor.hpp>

#include <coalesce/actors/backfill_scheduler.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/node/deadline.hpp>
#include <coalesce/node/timeline_service.hpp>

namespace coalesce {

/// A remote pager (coalesce/actors/remote_pager.hpp) for the node at
/// `options.remote_pager`, connecting through the system's middleman (the
/// TLS one when the system loaded `caf::openssl::manager`) within the
/// pager timeout: a run cannot wait longer for its page anyway.
pager_actor spawn_node_remote_pager(caf::actor_system& sys,
                                    const backfill_scheduler_options& options);

/// The back-pagination scheduler as a node hosts it (an entry of
/// `hosted_services`, coalesce/node/service_list.hpp): paging through the
/// node's own timeline, or with `scheduler-remote-pager` set through the
/// timeline of that node (the own timeline service is hosted all the same);
/// stopped by cancelling every run (its callers are answered) before the
/// services after it wind down.
class backfill_scheduler_service {
public:
  /// The service it hosts (coalesce/messages/node_interface.hpp).
  using descriptor = backfill_scheduler_descriptor;

  template <class Options, class Earlier>
  void start(caf::actor_system& sys, const std::shared_ptr<storage::database>&,
             const Options& options, const Earlier& earlier) {
    pager_actor pager = std::get<timeline_service>(earlier).actor();
    if (!options.backfill_scheduler.remote_pager.empty())
      pager = remote_pager_ = spawn_node_remote_pager(sys, options.backfill_scheduler);
    actor_ = spawn_backfill_scheduler(sys, pager, options.backfill_scheduler);
  }

  void add_handles(service_handles& handles) const {
    handles.backfill_scheduler = actor_;
  }

  bool wind_down(caf::scoped_actor& self,
                 std::chrono::steady_clock::time_point deadline) const {
    self->request(actor_, until(deadline), shutdown_atom::value)
      .receive([](ok_atom) {}, [](caf::error&) {});
    return true;
  }

  std::vector<caf::actor> to_exit() const {
    std::vector<caf::actor> actors{caf::actor_cast<caf::actor>(actor_)};
    if (remote_pager_)
      actors.push_back(caf::actor_cast<caf::actor>(remote_pager_));
    return actors;
  }

  std::vector<caf::actor> to_wait_for() const {
    return to_exit();
  }

  /// The scheduler itself, for what only the process may send (a stop
  /// condition as code, its stats).
  const backfill_scheduler_actor& actor() const {
    return actor_;
  }

private:
  backfill_scheduler_actor actor_;
  /// Null unless the scheduler pages another node's timeline.
  pager_actor remote_pager_;
};

} // namespace coalesce
