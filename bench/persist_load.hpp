#pragma once

// The load of the benchmarks that persist sessions into a node from
// outside (replicas): `sessions` sessions, each registered once by a handle
// in this process, then persists spread over them, each carrying its
// snapshot and one new update row, with a window of requests in flight and
// at most one per session at a time (a client persists a session after its
// last answer); its rate and the latency of each persist.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <coalesce/messages/node_interface.hpp>

#include "secret_load.hpp"

namespace coalesce::bench {

/// A session handle that is never asked: every persist carries its
/// snapshot.
inline session_handle_actor::behavior_type bench_handle() {
  return {[](snapshot_atom) { return std::string{}; }};
}

struct persister_load_state {
  std::vector<std::string> sessions;
  std::vector<session_handle_actor> handles;
  /// Sessions free to persist, in turn.
  std::deque<std::size_t> idle;
  std::size_t persists = 0;
  std::size_t sent = 0;
  std::size_t answered = 0;
  std::shared_ptr<std::vector<double>> latencies_ms;
};

/// Registers every session, then sends `persists` persists with at most
/// `window` in flight; quits once all were answered (with the error if
/// anything failed).
inline caf::behavior
persister_load(caf::stateful_actor<persister_load_state>* self,
               caf::actor target, std::size_t sessions, std::size_t persists,
               std::size_t window,
               std::shared_ptr<std::vector<double>> latencies_ms) {
  auto& st = self->state;
  st.persists = persists;
  st.latencies_ms = std::move(latencies_ms);
  for (std::size_t i = 0; i < sessions; ++i) {
    st.sessions.push_back("bench-session-" + std::to_string(i));
    st.handles.push_back(self->spawn(bench_handle));
  }
  // The handles end with the load: the actor system waits for them.
  self->attach_functor([handles = st.handles] {
    for (const auto& handle : handles)
      caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  });
  auto on_error = [self](caf::error& err) { self->quit(err); };
  auto send_next = std::make_shared<std::function<void()>>();
  *send_next = [self, target, send_next, on_error] {
    auto& st = self->state;
    if (st.sent == st.persists || st.idle.empty())
      return;
    auto i = st.idle.front();
    st.idle.pop_front();
    auto n = st.sent++;
    std::vector<session_update> rows{
      session_update{"u" + std::to_string(n), static_cast<int64_t>(n), "note",
                     std::string(64, 'p')}};
    auto sent = load_clock::now();
    self
      ->request(target, load_request_timeout, persist_atom::value,
                st.sessions[i], st.handles[i],
                session_snapshot{std::string(256, 's')}, std::move(rows),
                std::vector<std::string>{})
      .then(
        [self, send_next, sent, i](ok_atom) {
          auto& st = self->state;
          st.latencies_ms->push_back(seconds_since(sent) * 1000);
          st.idle.push_back(i);
          if (++st.answered == st.persists) {
            *send_next = nullptr;
            self->quit();
          } else {
            (*send_next)();
          }
        },
        [send_next, on_error](caf::error& err) {
          *send_next = nullptr;
          on_error(err);
        });
  };
  auto registered = std::make_shared<std::size_t>(0);
  for (std::size_t i = 0; i < sessions; ++i)
    self
      ->request(target, load_request_timeout, register_atom::value,
                st.sessions[i], st.handles[i])
      .then(
        [self, i, registered, sessions, window, send_next](uint64_t) {
          self->state.idle.push_back(i);
          if (++*registered < sessions)
            return;
          for (std::size_t k = 0; k < window; ++k)
            (*send_next)();
        },
        on_error);
  return {[](caf::unit_t) {}};
}

struct persist_result {
  double persists_per_s = 0;
  double persist_p99_ms = 0;
};

/// The load against `target` (a node or a cluster client); ends the
/// benchmark `bench` with the error if anything failed. The rate counts
/// the registers' time too (one per session, a small share).
inline persist_result drive_persists(caf::actor_system& sys, const char* bench,
                                     caf::actor target, std::size_t sessions,
                                     std::size_t persists, std::size_t window) {
  auto latencies = std::make_shared<std::vector<double>>();
  caf::scoped_actor self{sys};
  auto start = load_clock::now();
  auto load = sys.spawn(persister_load, std::move(target), sessions, persists,
                        window, latencies);
  caf::error failure;
  self->monitor(load);
  self->receive([&](caf::down_msg& down) { failure = down.reason; });
  auto elapsed = seconds_since(start);
  if (failure && failure != caf::exit_reason::normal)
    fail_bench(bench, "the persist load failed: " + sys.render(failure));
  persist_result result;
  result.persists_per_s = persists / elapsed;
  if (!latencies->empty()) {
    std::sort(latencies->begin(), latencies->end());
    result.persist_p99_ms = (*latencies)[latencies->size() * 99 / 100];
  }
  return result;
}

} // namespace coalesce::bench
