#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/scoped_actor.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/secret_buffer.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/node/deadline.hpp>

namespace coalesce {

/// The secret buffer as a node hosts it (an entry of `hosted_services`,
/// coalesce/node/service_list.hpp): started over the database with its
/// drain worker and reader detached, stopped by sealing and flushing.
class secret_buffer_service {
public:
  /// The service it hosts (coalesce/messages/node_interface.hpp).
  using descriptor = secret_buffer_descriptor;

  template <class Options, class Earlier>
  void start(caf::actor_system& sys,
             const std::shared_ptr<storage::database>& db,
             const Options& options, const Earlier&) {
    actors_ = spawn_secret_buffer_actors(sys, db, options.secret_buffer);
  }

  void add_handles(service_handles& handles) const {
    handles.secret_buffer = actors_.buffer;
  }

  /// Seals and flushes the buffer; returns whether everything was written,
  /// logging what was not.
  bool wind_down(caf::scoped_actor& self,
                 std::chrono::steady_clock::time_point deadline) const;

  std::vector<caf::actor> to_exit() const {
    return {caf::actor_cast<caf::actor>(actors_.buffer)};
  }

  std::vector<caf::actor> to_wait_for() const {
    return {caf::actor_cast<caf::actor>(actors_.buffer),
            caf::actor_cast<caf::actor>(actors_.drain),
            caf::actor_cast<caf::actor>(actors_.reader)};
  }

  /// The actors themselves, for what only the process may send (a seal,
  /// the buffer's own stats).
  const secret_buffer_actors& actors() const {
    return actors_;
  }

private:
  secret_buffer_actors actors_;
};

inline bool secret_buffer_service::wind_down(
  caf::scoped_actor& self,
  std::chrono::steady_clock::time_point deadline) const {
  auto& sys = self->system();
  const auto& buffer = actors_.buffer;
  self->request(buffer, until(deadline), seal_atom::value)
    .receive([](ok_atom) {}, [](caf::error&) {});
  bool written = false;
  self->request(buffer, until(deadline), flush_atom::value)
    .receive([&](ok_atom) { written = true; },
             [&](caf::error& err) {
               spdlog::error("flushing the secret buffer failed: {}",
                             sys.render(err));
             });
  if (written) {
    spdlog::info("secret buffer flushed: every queued secret is durable");
    return true;
  }
  self->request(buffer, std::chrono::seconds{5}, stats_atom::value)
    .receive(
      [](secret_buffer_stats& st) {
        spdlog::error("{} secrets could not be written ({} pending, {} held "
                      "by waiting producers)",
                      st.pending + st.held_entries, st.pending,
                      st.held_entries);
      },
      [&](caf::error& err) {
        spdlog::error("the secret buffer does not answer; what it held is "
                      "unknown: {}",
                      sys.render(err));
      });
  return false;
}

} // namespace coalesce
