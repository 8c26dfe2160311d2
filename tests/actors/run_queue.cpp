#define CAF_SUITE actors.run_queue
#include <caf/test/unit_test.hpp>

#include <coalesce/actors/run_queue.hpp>

#include <string>
#include <vector>

using namespace coalesce;

namespace {

using admission = run_queue::admission;

/// "room/priority" per started run, in start order: one comparable value.
std::vector<std::string> names(const std::vector<run_key>& keys) {
  std::vector<std::string> result;
  for (const auto& key : keys)
    result.push_back(key.room + "/" + to_string(key.prio));
  return result;
}

using strings = std::vector<std::string>;

run_limits unlimited(std::size_t max_concurrent = 10) {
  run_limits limits;
  limits.max_concurrent = max_concurrent;
  return limits;
}

} // namespace

CAF_TEST(runs start by priority then fifo within a priority) {
  run_queue q{unlimited()};
  CAF_CHECK(q.admit("a", priority::low) == admission::queued);
  CAF_CHECK(q.admit("b", priority::high) == admission::queued);
  CAF_CHECK(q.admit("c", priority::normal) == admission::queued);
  CAF_CHECK(q.admit("d", priority::high) == admission::queued);
  CAF_CHECK_EQUAL(names(q.start_runnable()),
                  (strings{"b/high", "d/high", "c/normal", "a/low"}));
  CAF_CHECK_EQUAL(q.running_count(), 4u);
  CAF_CHECK_EQUAL(q.queued_count(), 0u);
  CAF_CHECK(q.start_runnable().empty());
}

CAF_TEST(at most max_concurrent runs run at once) {
  run_queue q{unlimited(2)};
  q.admit("a", priority::normal);
  q.admit("b", priority::normal);
  q.admit("c", priority::normal);
  CAF_CHECK_EQUAL(names(q.start_runnable()),
                  (strings{"a/normal", "b/normal"}));
  CAF_CHECK_EQUAL(q.queued_count(), 1u);
  CAF_CHECK(q.start_runnable().empty());
  q.finish("b", priority::normal);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"c/normal"}));
  CAF_CHECK_EQUAL(q.running_count(), 2u);
}

CAF_TEST(a busy room waits while other rooms proceed whatever their priority) {
  run_queue q{unlimited()};
  q.admit("a", priority::low);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/low"}));
  q.admit("a", priority::high);
  q.admit("a", priority::normal);
  q.admit("b", priority::low);
  // Room a runs, so neither of its queued runs starts, not even the high
  // one; b's low run does.
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"b/low"}));
  CAF_CHECK(q.queued("a", priority::high));
  CAF_CHECK(q.queued("a", priority::normal));
  CAF_CHECK_EQUAL(q.queued_count(), 2u);
  // Room a frees: its waiting runs start one at a time, in priority order.
  q.finish("a", priority::low);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/high"}));
  CAF_CHECK(q.start_runnable().empty());
  q.finish("a", priority::high);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/normal"}));
}

CAF_TEST(two queued runs of one room never start in the same decision) {
  run_queue q{unlimited()};
  q.admit("a", priority::high);
  q.admit("a", priority::low);
  q.admit("b", priority::normal);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/high", "b/normal"}));
  CAF_CHECK(q.queued("a", priority::low));
  CAF_CHECK_EQUAL(q.running_count(), 2u);
}

CAF_TEST(requests for one room and priority coalesce into one run) {
  run_queue q{unlimited()};
  CAF_CHECK(q.admit("a", priority::normal) == admission::queued);
  CAF_CHECK(q.admit("a", priority::normal) == admission::joined_queued);
  // A different priority for the same room is a separate run.
  CAF_CHECK(q.admit("a", priority::high) == admission::queued);
  CAF_CHECK_EQUAL(q.queued_count(), 2u);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/high"}));
  CAF_CHECK(q.admit("a", priority::high) == admission::joined_running);
  CAF_CHECK(q.admit("a", priority::normal) == admission::joined_queued);
  CAF_CHECK_EQUAL(q.queued_count(), 1u);
  CAF_CHECK_EQUAL(q.running_count(), 1u);
  // Once the run ended, the key starts afresh.
  q.finish("a", priority::high);
  CAF_CHECK(q.admit("a", priority::high) == admission::queued);
}

CAF_TEST(a running run is never preempted by a higher priority) {
  run_queue q{unlimited(1)};
  q.admit("a", priority::low);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/low"}));
  q.admit("b", priority::high);
  CAF_CHECK(q.start_runnable().empty());
  CAF_CHECK(q.running("a", priority::low));
  CAF_CHECK(q.queued("b", priority::high));
  q.finish("a", priority::low);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"b/high"}));
}

CAF_TEST(a flood of low runs cannot take every slot under a low cap) {
  run_limits limits;
  limits.max_concurrent = 3;
  limits.max_per_priority[static_cast<std::size_t>(priority::low)] = 1;
  run_queue q{limits};
  for (int i = 0; i < 5; ++i)
    q.admit("low" + std::to_string(i), priority::low);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"low0/low"}));
  CAF_CHECK_EQUAL(q.running_count(priority::low), 1u);
  CAF_CHECK_EQUAL(q.queued_count(priority::low), 4u);
  // The two free slots stay free for higher priorities.
  q.admit("h1", priority::high);
  q.admit("h2", priority::high);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"h1/high", "h2/high"}));
  CAF_CHECK_EQUAL(q.running_count(), 3u);
  // A finished low run lets the next low one in, in FIFO order.
  q.finish("low0", priority::low);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"low1/low"}));
}

CAF_TEST(a capped priority does not block lower ones) {
  run_limits limits;
  limits.max_concurrent = 3;
  limits.max_per_priority[static_cast<std::size_t>(priority::high)] = 1;
  run_queue q{limits};
  q.admit("h1", priority::high);
  q.admit("h2", priority::high);
  q.admit("n1", priority::normal);
  q.admit("l1", priority::low);
  // h2 waits for the high cap; normal and low take the remaining slots.
  CAF_CHECK_EQUAL(names(q.start_runnable()),
                  (strings{"h1/high", "n1/normal", "l1/low"}));
  CAF_CHECK(q.queued("h2", priority::high));
  q.finish("h1", priority::high);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"h2/high"}));
}

CAF_TEST(two high runs and one low run run together under a low cap of one) {
  run_limits limits;
  limits.max_concurrent = 3;
  limits.max_per_priority[static_cast<std::size_t>(priority::low)] = 1;
  run_queue q{limits};
  q.admit("l1", priority::low);
  q.admit("l2", priority::low);
  q.admit("l3", priority::low);
  q.admit("h1", priority::high);
  q.admit("h2", priority::high);
  CAF_CHECK_EQUAL(names(q.start_runnable()),
                  (strings{"h1/high", "h2/high", "l1/low"}));
  CAF_CHECK_EQUAL(q.running_count(priority::high), 2u);
  CAF_CHECK_EQUAL(q.running_count(priority::low), 1u);
  CAF_CHECK_EQUAL(q.running_count(), 3u);
  CAF_CHECK_EQUAL(q.queued_count(priority::low), 2u);
  // A freed high slot does not go to a second low run.
  q.finish("h1", priority::high);
  CAF_CHECK(q.start_runnable().empty());
  q.finish("l1", priority::low);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"l2/low"}));
}

CAF_TEST(max_queued refuses new keys and counts distinct queued keys only) {
  run_limits limits;
  limits.max_concurrent = 1;
  limits.max_queued = 2;
  run_queue q{limits};
  CAF_CHECK(q.admit("a", priority::low) == admission::queued);
  CAF_CHECK(q.admit("b", priority::low) == admission::queued);
  CAF_CHECK(q.admit("c", priority::low) == admission::queue_full);
  CAF_CHECK(!q.queued("c", priority::low));
  // Joins never count, and are admitted when the queue is full.
  CAF_CHECK(q.admit("a", priority::low) == admission::joined_queued);
  CAF_CHECK(q.admit("b", priority::low) == admission::joined_queued);
  CAF_CHECK_EQUAL(q.queued_count(), 2u);
  // A started run no longer counts as queued: its joins are free, and its
  // slot in the queue goes to a new key.
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/low"}));
  CAF_CHECK(q.admit("a", priority::low) == admission::joined_running);
  CAF_CHECK(q.admit("c", priority::low) == admission::queued);
  CAF_CHECK(q.admit("d", priority::low) == admission::queue_full);
  CAF_CHECK_EQUAL(q.queued_count(), 2u);
}

CAF_TEST(withdraw removes a queued run and a later admit queues a fresh one) {
  run_queue q{unlimited(1)};
  q.admit("a", priority::normal);
  q.admit("b", priority::normal);
  q.admit("c", priority::normal);
  CAF_CHECK(q.withdraw("a", priority::normal));
  CAF_CHECK(!q.queued("a", priority::normal));
  CAF_CHECK(!q.withdraw("a", priority::normal));
  CAF_CHECK_EQUAL(q.queued_count(), 2u);
  // The fresh run queues behind the others.
  CAF_CHECK(q.admit("a", priority::normal) == admission::queued);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"b/normal"}));
  // A running run cannot be withdrawn.
  CAF_CHECK(!q.withdraw("b", priority::normal));
  CAF_CHECK(q.running("b", priority::normal));
  q.finish("b", priority::normal);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"c/normal"}));
  q.finish("c", priority::normal);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/normal"}));
}

CAF_TEST(a withdrawn parked run does not start when its room frees) {
  run_queue q{unlimited()};
  q.admit("a", priority::low);
  q.start_runnable();
  q.admit("a", priority::high);
  CAF_CHECK(q.withdraw("a", priority::high));
  q.finish("a", priority::low);
  CAF_CHECK(q.start_runnable().empty());
  CAF_CHECK_EQUAL(q.queued_count(), 0u);
}

CAF_TEST(a parked run returns at its original fifo position) {
  run_queue q{unlimited(2)};
  q.admit("a", priority::high);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/high"}));
  // a's normal run is queued first but parked behind a's high run.
  q.admit("a", priority::normal);
  q.admit("b", priority::normal);
  q.admit("c", priority::normal);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"b/normal"}));
  q.finish("b", priority::normal);
  q.finish("a", priority::high);
  // Both slots are free: a's normal run, queued before c's, starts first.
  CAF_CHECK_EQUAL(names(q.start_runnable()),
                  (strings{"a/normal", "c/normal"}));
}

CAF_TEST(counters follow queued and running runs per priority) {
  run_queue q{unlimited(2)};
  CAF_CHECK_EQUAL(q.queued_count(), 0u);
  CAF_CHECK_EQUAL(q.running_count(), 0u);
  q.admit("a", priority::high);
  q.admit("a", priority::low);
  q.admit("b", priority::normal);
  q.admit("c", priority::low);
  CAF_CHECK_EQUAL(q.queued_count(), 4u);
  CAF_CHECK_EQUAL(q.queued_count(priority::high), 1u);
  CAF_CHECK_EQUAL(q.queued_count(priority::normal), 1u);
  CAF_CHECK_EQUAL(q.queued_count(priority::low), 2u);
  q.start_runnable();
  CAF_CHECK_EQUAL(q.running_count(), 2u);
  CAF_CHECK_EQUAL(q.running_count(priority::high), 1u);
  CAF_CHECK_EQUAL(q.running_count(priority::normal), 1u);
  CAF_CHECK_EQUAL(q.running_count(priority::low), 0u);
  // a's low run is parked, still queued.
  CAF_CHECK_EQUAL(q.queued_count(priority::low), 2u);
  CAF_CHECK_EQUAL(q.queued_count(), 2u);
  q.finish("a", priority::high);
  q.finish("b", priority::normal);
  CAF_CHECK_EQUAL(q.running_count(), 0u);
  // A finish of a key that is not running changes nothing.
  q.finish("b", priority::normal);
  q.finish("c", priority::low);
  CAF_CHECK_EQUAL(q.running_count(), 0u);
  CAF_CHECK_EQUAL(q.queued_count(), 2u);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/low", "c/low"}));
  CAF_CHECK_EQUAL(q.queued_count(), 0u);
  CAF_CHECK_EQUAL(q.running_count(priority::low), 2u);
}

CAF_TEST(a high run starts at once behind ten thousand capped low runs) {
  run_limits limits;
  limits.max_concurrent = 3;
  limits.max_queued = 20000;
  limits.max_per_priority[static_cast<std::size_t>(priority::low)] = 1;
  run_queue q{limits};
  std::size_t admitted = 0;
  for (int i = 0; i < 10000; ++i)
    if (q.admit("room" + std::to_string(i), priority::low)
        == admission::queued)
      ++admitted;
  CAF_REQUIRE_EQUAL(admitted, 10000u);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"room0/low"}));
  CAF_CHECK_EQUAL(q.queued_count(priority::low), 9999u);
  // Each decision starts the one runnable high run; the capped backlog
  // neither blocks it nor starts alongside it.
  std::size_t exact = 0;
  for (int i = 0; i < 100; ++i) {
    auto room = "hot" + std::to_string(i);
    q.admit(room, priority::high);
    if (names(q.start_runnable()) == strings{room + "/high"})
      ++exact;
    q.finish(room, priority::high);
  }
  CAF_CHECK_EQUAL(exact, 100u);
  CAF_CHECK_EQUAL(q.queued_count(priority::low), 9999u);
  CAF_CHECK_EQUAL(q.running_count(), 1u);
  // The backlog still drains in FIFO order once the low run ends.
  q.finish("room0", priority::low);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"room1/low"}));
}

/// The scheduler's fresh run behind a cancelled running run of the same key:
/// parked while that one runs, counted as queued, bounded by max_queued.
CAF_TEST(a run queued behind its running key counts and starts after it) {
  run_limits limits;
  limits.max_concurrent = 2;
  limits.max_queued = 1;
  run_queue q{limits};
  q.admit("a", priority::normal);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/normal"}));
  CAF_CHECK(q.queue_behind_running("a", priority::normal)
            == admission::queued);
  CAF_CHECK_EQUAL(q.queued_count(priority::normal), 1u);
  CAF_CHECK(q.queued("a", priority::normal));
  // A request for the key now joins the queued run, not the running one.
  CAF_CHECK(q.admit("a", priority::normal) == admission::joined_queued);
  CAF_CHECK(q.queue_behind_running("a", priority::normal)
            == admission::joined_queued);
  // It holds the only place in the queue.
  CAF_CHECK(q.admit("b", priority::normal) == admission::queue_full);
  // Parked: a free slot does not start it while its key runs.
  CAF_CHECK(q.start_runnable().empty());
  q.finish("a", priority::normal);
  CAF_CHECK_EQUAL(names(q.start_runnable()), (strings{"a/normal"}));
  CAF_CHECK_EQUAL(q.queued_count(), 0u);
  CAF_CHECK(q.queue_behind_running("a", priority::normal)
            == admission::queued);
  CAF_CHECK(q.queue_behind_running("c", priority::normal)
            == admission::queue_full);
}
