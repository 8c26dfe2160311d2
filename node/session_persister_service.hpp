#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/scoped_actor.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/session_persister.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/node/deadline.hpp>

namespace coalesce {

/// The session persister as a node hosts it (an entry of
/// `hosted_services`, coalesce/node/service_list.hpp): its I/O actors
/// detached over the database, stopped by `flush_all` within the shutdown
/// deadline, which writes every queued persist and retries the sessions
/// whose last write failed.
class session_persister_service {
public:
  /// The service it hosts (coalesce/messages/node_interface.hpp).
  using descriptor = session_persister_descriptor;

  template <class Options, class Earlier>
  void start(caf::actor_system& sys,
             const std::shared_ptr<storage::database>& db,
             const Options& options, const Earlier&) {
    actors_ = spawn_session_persister_actors(sys, db, options.session_persister);
  }

  void add_handles(service_handles& handles) const {
    handles.session_persister = actors_.persister;
  }

  /// Flushes everything; returns whether every session was written,
  /// logging how many were not.
  bool wind_down(caf::scoped_actor& self,
                 std::chrono::steady_clock::time_point deadline) const {
    auto& sys = self->system();
    // The persister answers by the limit; the request's own timeout is a
    // little later so that the answer, not the timeout, says what is left.
    auto limit = until(deadline);
    bool written = false;
    self
      ->request(actors_.persister, limit + std::chrono::seconds{1},
                flush_all_atom::value, limit)
      .receive(
        [&](uint64_t unwritten) {
          if (unwritten == 0) {
            spdlog::info("session persister flushed: every queued session "
                         "is durable");
            written = true;
          } else {
            spdlog::error("{} sessions could not be written", unwritten);
          }
        },
        [&](caf::error& err) {
          spdlog::error("the session persister does not answer; which "
                        "sessions are written is unknown: {}",
                        sys.render(err));
        });
    return written;
  }

  std::vector<caf::actor> to_exit() const {
    std::vector<caf::actor> result{
      caf::actor_cast<caf::actor>(actors_.persister)};
    for (const auto& io : actors_.io)
      result.push_back(caf::actor_cast<caf::actor>(io));
    return result;
  }

  std::vector<caf::actor> to_wait_for() const {
    return to_exit();
  }

  /// The persister and its I/O actors, for what only the process may send
  /// (its own stats).
  const session_persister_actors& actors() const {
    return actors_;
  }

private:
  session_persister_actors actors_;
};

} // namespace coalesce
