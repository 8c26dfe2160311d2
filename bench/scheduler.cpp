// scripts/bench scheduler: the cost of one scheduling decision of the
// back-pagination scheduler with a large capped backlog, for run_queue
// (ours) and the seed's pop-skip-push-back heap (bench/scheduler_decision.hpp).
//
// Setup, per backlog size N (1,000, 10,000, 100,000): max_concurrent 3, a
// low-priority cap of 1, N low-priority requests for N distinct rooms. One
// low run starts and never finishes, so it holds the low slot and the
// backlog stays N - 1 capped runs. Then a closed loop: admit one high
// request for a fresh room, start_runnable (it must start exactly that high
// run), finish it. Only the start_runnable call is timed.
//
// Ours should be flat in N (a capped priority is skipped in O(1)); the
// seed's decision pops and pushes back the whole backlog, O(N log N). The
// actor part of this benchmark (requests_per_s, overhead_us) is measured
// elsewhere and left null here. The last line is one JSON object.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/run_queue.hpp"
#include "bench/scheduler_decision.hpp"

using namespace coalesce;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t low_cap = 1;

run_limits bench_limits(std::size_t backlog) {
  run_limits limits;
  limits.max_concurrent = 3;
  limits.max_queued = backlog + 16;
  limits.max_per_priority[static_cast<std::size_t>(priority::low)] = low_cap;
  return limits;
}

/// Room ids shaped like Matrix ones, longer than the small-string buffer, as
/// real room ids are.
std::string room_id(const char* prefix, std::size_t i) {
  return "!" + std::string{prefix} + std::to_string(i) + ":example.org";
}

void fail(const std::string& what) {
  std::cerr << "scheduler bench: " << what << '\n';
  std::exit(EXIT_FAILURE);
}

/// Microseconds per decision of `Queue` over `iterations` closed-loop
/// rounds against a backlog of `backlog` low requests, after `warmup`
/// untimed rounds.
template <class Queue>
double us_per_decision(std::size_t backlog, std::size_t iterations,
                       std::size_t warmup) {
  Queue q{bench_limits(backlog)};
  for (std::size_t i = 0; i < backlog; ++i)
    if (q.admit(room_id("low", i), priority::low)
        != run_queue::admission::queued)
      fail("a backlog request was not queued");
  auto first = q.start_runnable();
  if (first.size() != 1 || first.front().prio != priority::low)
    fail("the backlog did not start exactly one low run");
  std::vector<std::string> rooms;
  rooms.reserve(warmup + iterations);
  for (std::size_t i = 0; i < warmup + iterations; ++i)
    rooms.push_back(room_id("high", i));
  clock_type::duration total{0};
  for (std::size_t i = 0; i < warmup + iterations; ++i) {
    const auto& room = rooms[i];
    q.admit(room, priority::high);
    auto start = clock_type::now();
    auto started = q.start_runnable();
    auto elapsed = clock_type::now() - start;
    if (started.size() != 1 || started.front().room != room
        || started.front().prio != priority::high)
      fail("a decision did not start exactly the high run");
    q.finish(room, priority::high);
    if (i >= warmup)
      total += elapsed;
  }
  if (q.running_count() != 1 || q.queued_count() != backlog - 1)
    fail("the backlog changed during the loop");
  return std::chrono::duration<double, std::micro>(total).count()
         / static_cast<double>(iterations);
}

/// The best of `rounds` measurements: each round builds a fresh queue, and
/// the minimum filters out rounds disturbed by other work on shared cores.
template <class Queue>
double best_of(std::size_t rounds, std::size_t backlog, std::size_t iterations,
               std::size_t warmup) {
  double best = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    auto x = us_per_decision<Queue>(backlog, iterations, warmup);
    best = round == 0 ? x : std::min(best, x);
  }
  return best;
}

} // namespace

int main(int argc, char**) {
  if (argc > 1) {
    std::cerr << "usage: coalesce-bench-scheduler (no options)\n";
    return 2;
  }
  struct size_case {
    std::size_t backlog;
    std::size_t seed_iterations;
  };
  const std::vector<size_case> cases{{1'000, 2'000},
                                     {10'000, 200},
                                     {100'000, 50}};
  constexpr std::size_t ours_iterations = 2'000;
  constexpr std::size_t ours_rounds = 5;
  double ours_1k = 0;
  double ours_100k = 0;
  double seed_100k = 0;
  for (const auto& c : cases) {
    auto ours = best_of<run_queue>(ours_rounds, c.backlog, ours_iterations,
                                   100);
    auto seed = best_of<bench::seed_run_queue>(1, c.backlog,
                                               c.seed_iterations, 5);
    std::printf("backlog %zu capped low runs: ours %.3f us per decision "
                "(best of %zu x %zu), seed %.3f us per decision (%zu), "
                "speedup %.1fx\n",
                c.backlog - 1, ours, ours_rounds, ours_iterations, seed,
                c.seed_iterations, seed / ours);
    if (c.backlog == 1'000)
      ours_1k = ours;
    if (c.backlog == 100'000) {
      ours_100k = ours;
      seed_100k = seed;
    }
  }
  std::printf("flatness (ours at 100k / ours at 1k): %.2f\n",
              ours_100k / ours_1k);

  auto round_to = [](double x, double scale) {
    return std::round(x * scale) / scale;
  };
  nlohmann::ordered_json result{
    {"bench", "scheduler"},
    {"requests_per_s", nullptr},
    {"overhead_us", nullptr},
    {"seed_us_per_decision_100k", round_to(seed_100k, 1000)},
    {"ours_us_per_decision_1k", round_to(ours_1k, 1000)},
    {"ours_us_per_decision_100k", round_to(ours_100k, 1000)},
    {"speedup_100k", round_to(seed_100k / ours_100k, 10)},
    {"flatness", round_to(ours_100k / ours_1k, 100)},
  };
  std::cout << result.dump() << std::endl;
  return EXIT_SUCCESS;
}
