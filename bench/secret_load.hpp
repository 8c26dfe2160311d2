#pragma once

// The load of the benchmarks that queue secrets into a node from outside
// (remote, replicas): batches of generated entries sent with a window of
// requests in flight, then one flush; its rate until the flush answered and
// the latency of each `queue`.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <coalesce/messages/node_interface.hpp>

#include "cpu_time.hpp"
#include "node_process.hpp"

namespace coalesce::bench {

/// The load's options, under `bench.` on the command line.
struct load_options {
  std::size_t entries;
  std::size_t batch = 256;
  std::size_t window = 16;
  std::size_t rounds;
  std::string dir = "/tmp";
  std::string node = own_directory() + "/coalesce-node";

  void add_to(caf::config_option_adder& adder) {
    adder.add(entries, "entries", "entries per measurement")
      .add(batch, "batch", "entries in one queue request")
      .add(window, "window", "queue requests in flight")
      .add(rounds, "rounds", "rounds of interleaved measurements (>= 1)")
      .add(dir, "dir", "where the fresh databases (and certificates) are made")
      .add(node, "node", "the coalesce-node binary");
  }

  /// Ends the benchmark `bench` unless every count is positive.
  void check(const char* bench) const {
    if (entries == 0 || batch == 0 || window == 0 || rounds == 0)
      fail_bench(bench, "--bench.entries, --bench.batch, --bench.window and "
                        "--bench.rounds must be positive");
  }
};

using load_clock = std::chrono::steady_clock;

inline double seconds_since(load_clock::time_point start) {
  return std::chrono::duration<double>(load_clock::now() - start).count();
}

/// Entry `i`: one of 997 chats, 8,191 senders, a message id of its own.
inline secret_entry make_entry(std::size_t i) {
  auto id = std::to_string(i);
  return secret_entry{"1203630" + std::to_string(i % 997) + "@g.us",
                      "55119876" + std::to_string(i % 8191) + "@s.whatsapp.net",
                      "3EB0" + id,
                      std::vector<uint8_t>(secret_size, static_cast<uint8_t>(i)),
                      0, 1'700'000'000};
}

inline std::vector<std::vector<secret_entry>>
make_batches(std::size_t entries, std::size_t batch) {
  std::vector<std::vector<secret_entry>> batches;
  for (std::size_t i = 0; i < entries; i += batch) {
    std::vector<secret_entry> part;
    for (auto j = i; j < std::min(entries, i + batch); ++j)
      part.push_back(make_entry(j));
    batches.push_back(std::move(part));
  }
  return batches;
}

/// Every remote request has a finite timeout; this one is generous, the
/// disk may be slow for seconds.
constexpr auto load_request_timeout = std::chrono::seconds{60};

struct producer_state {
  std::vector<std::vector<secret_entry>> batches;
  std::size_t next = 0;
  std::size_t answered = 0;
  /// Milliseconds each `queue` took to its answer, in answer order.
  std::shared_ptr<std::vector<double>> latencies_ms;
};

/// Sends the batches with at most `window` in flight, then one flush, and
/// quits when the flush was answered (with the error if anything failed).
inline caf::behavior
producer(caf::stateful_actor<producer_state>* self, caf::actor buffer,
         std::vector<std::vector<secret_entry>> batches, std::size_t window,
         std::shared_ptr<std::vector<double>> latencies_ms) {
  self->state.batches = std::move(batches);
  self->state.latencies_ms = std::move(latencies_ms);
  auto on_error = [self](caf::error& err) { self->quit(err); };
  auto flush = [self, buffer, on_error] {
    self->request(buffer, load_request_timeout, flush_atom::value)
      .then([self](ok_atom) { self->quit(); }, on_error);
  };
  auto send_next = std::make_shared<std::function<void()>>();
  *send_next = [self, buffer, send_next, flush, on_error] {
    auto& st = self->state;
    if (st.next == st.batches.size())
      return;
    auto sent = load_clock::now();
    self->request(buffer, load_request_timeout, queue_atom::value,
                  std::move(st.batches[st.next++]))
      .then(
        [self, send_next, flush, sent](ok_atom) {
          self->state.latencies_ms->push_back(seconds_since(sent) * 1000);
          if (++self->state.answered == self->state.batches.size()) {
            // The callback holds itself: release it, or it leaks.
            *send_next = nullptr;
            flush();
          } else {
            (*send_next)();
          }
        },
        [send_next, on_error](caf::error& err) {
          *send_next = nullptr;
          on_error(err);
        });
  };
  for (std::size_t i = 0; i < window; ++i)
    (*send_next)();
  if (self->state.batches.empty()) {
    *send_next = nullptr;
    flush();
  }
  return {[](caf::unit_t) {}};
}

struct load_result {
  double rows_per_s = 0;
  /// The 99th percentile of the `queue` latencies.
  double queue_p99_ms = 0;
};

/// The load of `entries` in batches of `batch` against `buffer` (a node, a
/// cluster client or the services in process); ends the benchmark `bench`
/// with the error if anything failed.
inline load_result drive_load(caf::actor_system& sys, const char* bench,
                              caf::actor buffer, std::size_t entries,
                              std::size_t batch, std::size_t window) {
  auto batches = make_batches(entries, batch);
  auto latencies = std::make_shared<std::vector<double>>();
  caf::scoped_actor self{sys};
  auto start = load_clock::now();
  auto load = sys.spawn(producer, std::move(buffer), std::move(batches),
                        window, latencies);
  caf::error failure;
  self->monitor(load);
  self->receive([&](caf::down_msg& down) { failure = down.reason; });
  auto elapsed = seconds_since(start);
  if (failure && failure != caf::exit_reason::normal)
    fail_bench(bench, "the load failed: " + sys.render(failure));
  load_result result;
  result.rows_per_s = entries / elapsed;
  if (!latencies->empty()) {
    std::sort(latencies->begin(), latencies->end());
    result.queue_p99_ms = (*latencies)[latencies->size() * 99 / 100];
  }
  return result;
}

} // namespace coalesce::bench
