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
// seed's decision pops and pushes back the whole backlog, O(N log N).
//
// The actor part: with a pager that answers at once, requests per second
// through the scheduler actor (enqueue, then await, many in flight, each for
// its own room), and the per-request overhead: the closed-loop round trip of
// one request through the scheduler minus one request to the pager itself.
// The last line is one JSON object.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <coalesce/actors/backfill_scheduler.hpp>
#include <coalesce/actors/run_queue.hpp>
#include <coalesce/messages/registration.hpp>
#include "scheduler_decision.hpp"

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

/// A pager that answers every request at once with one event at the start
/// of the timeline, so a run is one batch (and its commit) and costs only
/// the scheduler.
pager_actor::behavior_type instant_pager() {
  return {
    [](page_atom, const std::string& room, uint32_t) {
      return timeline_page{{timeline_event{"$" + room, "m.room.create", 1, ""}},
                           true,
                           page_cursor{1, 0}};
    },
    [](commit_atom, const std::string&, const page_cursor&) {
      return ok_atom::value;
    },
  };
}

struct driver_report {
  std::vector<double> latencies_us;
  std::size_t failures = 0;
};

/// Sends `total` backfills (enqueue, then await), `window` at a time, each
/// for its own room, recording each one's round trip.
caf::behavior backfill_driver(caf::event_based_actor* self,
                              backfill_scheduler_actor scheduler, std::size_t total,
                              std::size_t window,
                              std::shared_ptr<driver_report> report) {
  auto next = std::make_shared<std::size_t>(0);
  auto send_next = std::make_shared<std::function<void()>>();
  *send_next = [=] {
    if (*next == total)
      return;
    backfill_request request;
    request.room = room_id("r", (*next)++);
    auto started = clock_type::now();
    auto done = [=](bool ok) {
      if (ok)
        report->latencies_us.push_back(
          std::chrono::duration<double, std::micro>(clock_type::now()
                                                    - started)
            .count());
      else
        report->failures += 1;
      if (report->latencies_us.size() + report->failures == total) {
        // The callback holds itself: release it, or it leaks.
        *send_next = nullptr;
        self->quit();
      } else {
        (*send_next)();
      }
    };
    self->request(scheduler, caf::infinite, enqueue_atom::value, request)
      .then(
        [=](backfill_ticket ticket) {
          self->request(scheduler, caf::infinite, await_atom::value, ticket)
            .then([=](backfill_result&) { done(true); },
                  [=](caf::error&) { done(false); });
        },
        [=](caf::error&) { done(false); });
  };
  for (std::size_t i = 0; i < window; ++i)
    (*send_next)();
  return {[](caf::unit_t) {}};
}

/// One page request at a time straight to the pager: the baseline round trip.
caf::behavior pager_driver(caf::event_based_actor* self, pager_actor pager,
                           std::size_t total,
                           std::shared_ptr<driver_report> report) {
  auto next = std::make_shared<std::function<void()>>();
  *next = [=] {
    auto started = clock_type::now();
    self->request(pager, caf::infinite, page_atom::value, std::string{"!r"},
                  uint32_t{30})
      .then([=](timeline_page&) {
        report->latencies_us.push_back(
          std::chrono::duration<double, std::micro>(clock_type::now()
                                                    - started)
            .count());
        if (report->latencies_us.size() == total) {
          *next = nullptr;
          self->quit();
        } else {
          (*next)();
        }
      });
  };
  (*next)();
  return {[](caf::unit_t) {}};
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0 : xs[xs.size() / 2];
}

struct actor_figures {
  double requests_per_s;
  double overhead_us;
};

actor_figures measure_actor_path() {
  struct config : caf::actor_system_config {
    config() {
      register_message_types(*this);
    }
  } cfg;
  caf::actor_system sys{cfg};
  auto pager = sys.spawn(instant_pager);
  backfill_scheduler_options options;
  options.limits.max_concurrent = 64;
  options.limits.max_queued = 100'000;
  auto scheduler = spawn_backfill_scheduler(sys, pager, options);
  caf::scoped_actor self{sys};
  constexpr std::size_t throughput_requests = 100'000;
  auto bulk = std::make_shared<driver_report>();
  auto started = clock_type::now();
  self->wait_for(sys.spawn(backfill_driver, scheduler, throughput_requests,
                           std::size_t{256}, bulk));
  auto seconds = std::chrono::duration<double>(clock_type::now() - started)
                   .count();
  if (bulk->failures > 0)
    fail(std::to_string(bulk->failures) + " backfills failed");
  constexpr std::size_t closed_loop = 5'000;
  auto through_scheduler = std::make_shared<driver_report>();
  self->wait_for(sys.spawn(backfill_driver, scheduler, closed_loop,
                           std::size_t{1}, through_scheduler));
  auto direct = std::make_shared<driver_report>();
  self->wait_for(sys.spawn(pager_driver, pager, closed_loop, direct));
  auto scheduler_us = median(through_scheduler->latencies_us);
  auto pager_us = median(direct->latencies_us);
  std::printf("through the scheduler: %.0f backfills/s (%zu, 256 in flight); "
              "closed loop: %.1f us per backfill, %.1f us per direct pager "
              "request, overhead %.1f us\n",
              throughput_requests / seconds, throughput_requests, scheduler_us,
              pager_us, scheduler_us - pager_us);
  self->send_exit(scheduler, caf::exit_reason::user_shutdown);
  self->send_exit(pager, caf::exit_reason::user_shutdown);
  return {throughput_requests / seconds, scheduler_us - pager_us};
}

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
  auto figures = measure_actor_path();

  auto round_to = [](double x, double scale) {
    return std::round(x * scale) / scale;
  };
  nlohmann::ordered_json result{
    {"bench", "scheduler"},
    {"requests_per_s", std::round(figures.requests_per_s)},
    {"overhead_us", round_to(figures.overhead_us, 10)},
    {"seed_us_per_decision_100k", round_to(seed_100k, 1000)},
    {"ours_us_per_decision_1k", round_to(ours_1k, 1000)},
    {"ours_us_per_decision_100k", round_to(ours_100k, 1000)},
    {"speedup_100k", round_to(seed_100k / ours_100k, 10)},
    {"flatness", round_to(ours_100k / ours_1k, 100)},
  };
  std::cout << result.dump() << std::endl;
  return EXIT_SUCCESS;
}
