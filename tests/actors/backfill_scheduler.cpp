#define CAF_SUITE actors.backfill_scheduler
#include <caf/test/dsl.hpp>

#include <coalesce/actors/backfill_scheduler.hpp>

#include <deque>
#include <map>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>

#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

/// Test seam standing in for a pager, whose outcomes cannot be chosen on a
/// real timeline (failures, delays): every request is held until the test
/// releases it with a scripted page or error, so the test sees exactly which
/// runs are at the pager at any moment.
struct scripted_pager_state {
  struct held_request {
    std::string room;
    uint32_t max_events;
    typed_response_promise<timeline_page> promise;
  };
  std::vector<held_request> held;
  /// Every request in arrival order: (room, max_events).
  std::vector<std::pair<std::string, uint32_t>> calls;
  /// Every commit in arrival order: (room, cursor.next).
  std::vector<std::pair<std::string, uint64_t>> commits;
};

using release_atom = atom_constant<atom("release")>;

/// The seam's own messages on top of the pager interface: answer the oldest
/// held request of a room with a page or an error. Promises must be
/// delivered from inside their actor, hence messages.
using scripted_pager_actor = pager_actor::extend<
  reacts_to<release_atom, std::string, timeline_page>,
  reacts_to<release_atom, std::string, error>>;

template <class Outcome>
void release_held(scripted_pager_state& st, const std::string& room,
                  Outcome& outcome) {
  auto i = std::find_if(st.held.begin(), st.held.end(),
                        [&](auto& x) { return x.room == room; });
  if (i == st.held.end())
    CAF_FAIL("no request of room " << room << " is at the pager");
  auto promise = i->promise;
  st.held.erase(i);
  promise.deliver(std::move(outcome));
}

scripted_pager_actor::behavior_type
scripted_pager(scripted_pager_actor::stateful_pointer<scripted_pager_state> self) {
  return {
    [self](page_atom, const std::string& room,
           uint32_t max_events) -> result<timeline_page> {
      auto& st = self->state;
      st.calls.emplace_back(room, max_events);
      auto promise = self->make_response_promise<timeline_page>();
      st.held.push_back({room, max_events, promise});
      return promise;
    },
    [self](commit_atom, const std::string& room, const page_cursor& cursor) {
      self->state.commits.emplace_back(room, cursor.next);
      return ok_atom::value;
    },
    [self](release_atom, const std::string& room, timeline_page& outcome) {
      release_held(self->state, room, outcome);
    },
    [self](release_atom, const std::string& room, error& outcome) {
      release_held(self->state, room, outcome);
    },
  };
}

timeline_event event(const std::string& id, int64_t timestamp = 100,
                     const std::string& type = "m.room.message") {
  return timeline_event{id, type, timestamp, "body of " + id};
}

timeline_page page(std::vector<timeline_event> events,
                   bool reached_start = false) {
  return timeline_page{std::move(events), reached_start, page_cursor{}};
}

backfill_request request_for(const std::string& room,
                             priority prio = priority::normal,
                             uint32_t max_batches = 0) {
  backfill_request x;
  x.room = room;
  x.prio = prio;
  x.max_batches = max_batches;
  return x;
}

/// What every suite here needs: a scheduler under the deterministic
/// coordinator and the requests a caller sends it.
struct scheduler_fixture_base : test_coordinator_fixture<test_config> {
  backfill_scheduler_actor scheduler;

  ~scheduler_fixture_base() override {
    // The scheduler answers its callers on exit.
    anon_send_exit(scheduler, exit_reason::kill);
    sched.run();
  }

  void start_with(pager_actor pager, backfill_scheduler_options options) {
    scheduler = spawn_backfill_scheduler(sys, std::move(pager), options);
    sched.run();
  }

  /// Lets `whom` handle exactly one message, ahead of every other actor.
  template <class Handle>
  void run_only(const Handle& whom) {
    CAF_REQUIRE(sched.prioritize(whom));
    sched.run_once();
  }

  template <class T, class... Ts>
  T ask(Ts... xs) {
    auto answer = self->request(scheduler, infinite, std::move(xs)...);
    sched.run();
    CAF_REQUIRE(!self->mailbox().empty());
    T result{};
    answer.receive([&](T& x) { result = std::move(x); },
                   [&](error& err) { CAF_FAIL(sys.render(err)); });
    return result;
  }

  template <class T, class... Ts>
  error ask_error(Ts... xs) {
    auto answer = self->request(scheduler, infinite, std::move(xs)...);
    sched.run();
    CAF_REQUIRE(!self->mailbox().empty());
    error result;
    answer.receive([](T&) { CAF_FAIL("expected an error"); },
                   [&](error& err) { result = std::move(err); });
    return result;
  }

  backfill_ticket enqueue(backfill_request request) {
    return ask<backfill_ticket>(enqueue_atom::value, std::move(request));
  }

  /// An await that stays parked: the answer is read later with `result_of`.
  struct parked_await {
    decltype(std::declval<scoped_actor&>()->request(
      std::declval<backfill_scheduler_actor&>(), infinite, await_atom::value,
      backfill_ticket{})) handle;
  };

  parked_await await(backfill_ticket ticket) {
    auto handle = self->request(scheduler, infinite, await_atom::value, ticket);
    sched.run();
    return parked_await{std::move(handle)};
  }

  backfill_result result_of(parked_await& x) {
    CAF_REQUIRE(!self->mailbox().empty());
    backfill_result result;
    x.handle.receive([&](backfill_result& r) { result = std::move(r); },
                     [&](error& err) { CAF_FAIL(sys.render(err)); });
    return result;
  }

  error error_of(parked_await& x) {
    CAF_REQUIRE(!self->mailbox().empty());
    error result;
    x.handle.receive([](backfill_result&) { CAF_FAIL("expected an error"); },
                     [&](error& err) { result = std::move(err); });
    return result;
  }

  backfill_result finished(backfill_ticket ticket) {
    return ask<backfill_result>(await_atom::value, ticket);
  }

  backfill_scheduler_stats stats() {
    return ask<backfill_scheduler_stats>(stats_atom::value);
  }

  /// By value: a check must not hold a reference into a temporary.
  uint64_t queued_at(std::size_t prio) {
    return stats().queued.at(prio);
  }

  uint64_t running() {
    return stats().running;
  }
};

struct scheduler_fixture : scheduler_fixture_base {
  scripted_pager_actor pager;

  scheduler_fixture() {
    pager = sys.spawn(scripted_pager);
    sched.run();
  }

  ~scheduler_fixture() override {
    // The scheduler first, so that it does not see its pager go down; the
    // pager's held promises die with it.
    anon_send_exit(scheduler, exit_reason::kill);
    anon_send_exit(pager, exit_reason::kill);
    sched.run();
  }

  void start(run_limits limits = run_limits{},
             caf::timespan pager_timeout = std::chrono::seconds{30}) {
    backfill_scheduler_options options;
    options.limits = limits;
    options.pager_timeout = pager_timeout;
    start_with(pager, options);
  }

  scripted_pager_state& pager_state() {
    return deref<scripted_pager_actor::stateful_base<scripted_pager_state>>(
             pager)
      .state;
  }

  /// Rooms at the pager right now, in the order they asked.
  std::vector<std::string> at_pager() {
    std::vector<std::string> rooms;
    for (auto& x : pager_state().held)
      rooms.push_back(x.room);
    return rooms;
  }

  std::vector<std::string> called_rooms() {
    std::vector<std::string> rooms;
    for (auto& x : pager_state().calls)
      rooms.push_back(x.first);
    return rooms;
  }

  /// Answers the oldest held request for `room`, then runs every actor.
  template <class Outcome>
  void release(const std::string& room, Outcome outcome) {
    anon_send(pager, release_atom::value, room, std::move(outcome));
    sched.run();
  }
};

uint64_t finished_count(const backfill_scheduler_stats& st, stop_reason reason) {
  return st.finished[static_cast<std::size_t>(reason)];
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(backfill_scheduler_tests, scheduler_fixture)

// -- scheduling -----------------------------------------------------------------

/// High before normal before low, FIFO within a priority; the running run
/// is not preempted by the high ones queued behind it.
CAF_TEST(runs start by priority then in arrival order) {
  run_limits limits;
  limits.max_concurrent = 1;
  start(limits);
  enqueue(request_for("!a", priority::low));
  for (auto& [room, prio] : std::vector<std::pair<std::string, priority>>{
         {"!b", priority::normal},
         {"!c", priority::high},
         {"!d", priority::high},
         {"!e", priority::low}})
    enqueue(request_for(room, prio));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  for (auto room : {"!a", "!c", "!d", "!b", "!e"})
    release(room, page({}, true));
  CAF_CHECK_EQUAL(called_rooms(),
                  (std::vector<std::string>{"!a", "!c", "!d", "!b", "!e"}));
}

CAF_TEST(at most max concurrent runs at once) {
  run_limits limits;
  limits.max_concurrent = 2;
  start(limits);
  for (auto room : {"!a", "!b", "!c", "!d"})
    enqueue(request_for(room));
  CAF_CHECK_EQUAL(at_pager(), (std::vector<std::string>{"!a", "!b"}));
  CAF_CHECK_EQUAL(stats().running, 2u);
  release("!a", page({}, true));
  CAF_CHECK_EQUAL(at_pager(), (std::vector<std::string>{"!b", "!c"}));
}

/// A busy room's request waits, whatever its priority, while other rooms
/// proceed; it starts once the room is free.
CAF_TEST(never two runs for one room at once) {
  start();
  enqueue(request_for("!a", priority::low));
  enqueue(request_for("!a", priority::high));
  enqueue(request_for("!b", priority::low));
  CAF_CHECK_EQUAL(at_pager(), (std::vector<std::string>{"!a", "!b"}));
  release("!a", page({event("e1")}));
  // The low run of !a goes on; its high run still waits for the room.
  CAF_CHECK_EQUAL(at_pager(), (std::vector<std::string>{"!b", "!a"}));
  CAF_CHECK_EQUAL(queued_at(2), 1u);
  release("!a", page({}, true));
  CAF_CHECK_EQUAL(at_pager(), (std::vector<std::string>{"!b", "!a"}));
  CAF_CHECK_EQUAL(queued_at(2), 0u);
}

// -- coalescing -------------------------------------------------------------------

/// Same room and priority: one run, one pagination, every caller answered.
/// A different priority for the room is a separate run.
CAF_TEST(requests for one room and priority share one run) {
  start();
  auto first = enqueue(request_for("!a"));
  auto second = enqueue(request_for("!a"));
  auto other = enqueue(request_for("!a", priority::high));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  release("!a", page({event("e1"), event("e2")}, true));
  auto r1 = finished(first);
  auto r2 = finished(second);
  CAF_CHECK_EQUAL(r1.reason, stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(r2.reason, stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(r1.events.size(), 2u);
  CAF_CHECK(r1.events == r2.events);
  // The high-priority run is separate: it pages on its own.
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  release("!a", page({}, true));
  CAF_CHECK_EQUAL(finished(other).reason, stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(pager_state().calls.size(), 2u);
  CAF_CHECK_EQUAL(stats().coalesced_joins, 1u);
}

/// A caller joining a running run gets the batches loaded after it joined,
/// and the run keeps the batch size of the caller that started it.
CAF_TEST(a caller that joins a running run gets the events from then on) {
  start();
  auto first = enqueue(request_for("!a"));
  auto late_request = request_for("!a");
  late_request.batch_size = 5;
  release("!a", page({event("e1")}));
  auto late = enqueue(late_request);
  release("!a", page({event("e2")}, true));
  CAF_CHECK_EQUAL(finished(first).events.size(), 2u);
  auto r = finished(late);
  CAF_REQUIRE_EQUAL(r.events.size(), 1u);
  CAF_CHECK_EQUAL(r.events[0].event_id, "e2");
  CAF_CHECK_EQUAL(r.batches, 1u);
  for (auto& call : pager_state().calls)
    CAF_CHECK_EQUAL(call.second, 30u);
}

// -- cancellation -------------------------------------------------------------------

/// One caller leaving never cancels a run others still wait on; its own
/// await is answered cancelled at once.
CAF_TEST(a run is cancelled only when every caller left) {
  start();
  auto first = enqueue(request_for("!a"));
  auto second = enqueue(request_for("!a"));
  auto first_await = await(first);
  CAF_CHECK(ask<ok_atom>(cancel_atom::value, first) == ok_atom::value);
  auto r = result_of(first_await);
  CAF_CHECK_EQUAL(r.reason, stop_reason::cancelled);
  release("!a", page({event("e1")}));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  release("!a", page({event("e2")}, true));
  CAF_CHECK_EQUAL(finished(second).reason, stop_reason::reached_timeline_start);
}

CAF_TEST(a run cancelled while queued never paginates) {
  run_limits limits;
  limits.max_concurrent = 1;
  start(limits);
  enqueue(request_for("!busy"));
  auto queued = enqueue(request_for("!a"));
  auto queued_await = await(queued);
  ask<ok_atom>(cancel_atom::value, queued);
  CAF_CHECK_EQUAL(result_of(queued_await).reason, stop_reason::cancelled);
  release("!busy", page({}, true));
  CAF_CHECK_EQUAL(called_rooms(), std::vector<std::string>{"!busy"});
  CAF_CHECK_EQUAL(finished_count(stats(), stop_reason::cancelled), 1u);
}

/// Cancelled at the pager, the run stops before its next batch; a new
/// request for the key then starts a fresh run instead of joining it.
CAF_TEST(a run cancelled while running stops before its next batch) {
  start();
  auto ticket = enqueue(request_for("!a"));
  ask<ok_atom>(cancel_atom::value, ticket);
  auto fresh = enqueue(request_for("!a"));
  release("!a", page({event("e1")}));
  // The cancelled run ended; the fresh one asks for its own first batch.
  CAF_CHECK_EQUAL(pager_state().calls.size(), 2u);
  release("!a", page({event("e9")}, true));
  auto r = finished(fresh);
  CAF_CHECK_EQUAL(r.reason, stop_reason::reached_timeline_start);
  CAF_REQUIRE_EQUAL(r.events.size(), 1u);
  CAF_CHECK_EQUAL(r.events[0].event_id, "e9");
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::cancelled);
  // Only the page delivered to a caller was committed.
  CAF_CHECK_EQUAL(pager_state().commits.size(), 1u);
}

CAF_TEST(a detached caller keeps the run going to completion) {
  start();
  auto detached = enqueue(request_for("!a"));
  auto other = enqueue(request_for("!a"));
  ask<ok_atom>(detach_atom::value, detached);
  ask<ok_atom>(cancel_atom::value, other);
  ask<ok_atom>(cancel_atom::value, detached);
  release("!a", page({event("e1")}));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  release("!a", page({event("e2")}, true));
  CAF_CHECK_EQUAL(finished(detached).reason,
                  stop_reason::reached_timeline_start);
}

/// Callers are monitored, here and on other nodes: a dead caller's tickets
/// are cancelled, and its run with them when it was the last.
CAF_TEST(a dead caller cancels its tickets) {
  run_limits limits;
  limits.max_concurrent = 1;
  start(limits);
  enqueue(request_for("!busy"));
  {
    scoped_actor doomed{sys};
    doomed->request(scheduler, infinite, enqueue_atom::value,
                    request_for("!a"));
    sched.run();
  }
  sched.run();
  release("!busy", page({}, true));
  CAF_CHECK_EQUAL(called_rooms(), std::vector<std::string>{"!busy"});
  CAF_CHECK_EQUAL(finished_count(stats(), stop_reason::cancelled), 1u);
}

// -- how runs end -------------------------------------------------------------------

/// The stop condition sees every batch, the one reaching the start included.
CAF_TEST(the stop condition is checked before the timeline start) {
  start();
  auto request = request_for("!a");
  request.stop.what = stop_condition::kind::until_event;
  request.stop.event_id = "first";
  auto ticket = enqueue(request);
  release("!a", page({event("first")}, true));
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::stop_condition_met);
}

CAF_TEST(each stop condition kind ends the run) {
  start();
  auto by_type = request_for("!type");
  by_type.stop.what = stop_condition::kind::until_type;
  by_type.stop.event_type = "m.room.create";
  auto by_age = request_for("!age");
  by_age.stop.what = stop_condition::kind::older_than;
  by_age.stop.timestamp = 50;
  auto t1 = enqueue(by_type);
  auto t2 = enqueue(by_age);
  release("!type", page({event("x")}));
  release("!type", page({event("y", 1, "m.room.create")}));
  release("!age", page({event("x", 60)}));
  release("!age", page({event("y", 49)}));
  auto r1 = finished(t1);
  CAF_CHECK_EQUAL(r1.reason, stop_reason::stop_condition_met);
  CAF_CHECK_EQUAL(r1.batches, 2u);
  CAF_CHECK_EQUAL(finished(t2).reason, stop_reason::stop_condition_met);
}

CAF_TEST(an empty batch ends the run with no data available) {
  start();
  auto ticket = enqueue(request_for("!a"));
  release("!a", page({}));
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::no_data_available);
}

CAF_TEST(max batches ends the run with batch limit reached) {
  start();
  auto ticket = enqueue(request_for("!a", priority::normal, 2));
  release("!a", page({event("e1")}));
  release("!a", page({event("e2")}));
  auto r = finished(ticket);
  CAF_CHECK_EQUAL(r.reason, stop_reason::batch_limit_reached);
  CAF_CHECK_EQUAL(r.batches, 2u);
  CAF_CHECK(at_pager().empty());
}

CAF_TEST(a pager error fails the run) {
  start();
  auto ticket = enqueue(request_for("!a"));
  release("!a", make_error(errc::storage_failed, "scripted failure"));
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::failed);
}

CAF_TEST(a pager that does not answer in time fails the run) {
  start(run_limits{}, 2s);
  auto ticket = enqueue(request_for("!a"));
  auto waiting = await(ticket);
  CAF_CHECK(self->mailbox().empty());
  sched.advance_time(2s);
  sched.run();
  CAF_CHECK_EQUAL(result_of(waiting).reason, stop_reason::failed);
}

CAF_TEST(a pager that is down fails the run) {
  start();
  auto ticket = enqueue(request_for("!a"));
  anon_send_exit(pager, exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::failed);
  CAF_CHECK_EQUAL(finished_count(stats(), stop_reason::failed), 1u);
}

/// Beyond the seed: each caller's own condition and batch budget, counted
/// from its join; the run goes on while anyone still needs more.
CAF_TEST(each caller is answered by its own stop condition and batch budget) {
  start();
  auto early = request_for("!a");
  early.stop.what = stop_condition::kind::until_event;
  early.stop.event_id = "e2";
  auto t_early = enqueue(early);
  release("!a", page({event("e1")}));
  auto t_budget = enqueue(request_for("!a", priority::normal, 3));
  auto budget_await = await(t_budget);
  release("!a", page({event("e2")}));
  CAF_CHECK_EQUAL(finished(t_early).reason, stop_reason::stop_condition_met);
  CAF_CHECK(self->mailbox().empty());
  release("!a", page({event("e3")}));
  release("!a", page({event("e4")}));
  auto r = result_of(budget_await);
  CAF_CHECK_EQUAL(r.reason, stop_reason::batch_limit_reached);
  CAF_CHECK_EQUAL(r.batches, 3u);
  CAF_CHECK_EQUAL(r.events.size(), 3u);
  CAF_CHECK(at_pager().empty());
}

CAF_TEST(an in process caller may pass a local predicate) {
  start();
  auto ticket = ask<backfill_ticket>(
    enqueue_atom::value, request_for("!a"),
    local_stop{[](const timeline_page& p) { return p.events.size() > 1; }});
  release("!a", page({event("e1")}));
  release("!a", page({event("e2"), event("e3")}));
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::stop_condition_met);
}

// -- limits, errors and shutdown ----------------------------------------------------

CAF_TEST(past max queued an enqueue is refused with queue full) {
  run_limits limits;
  limits.max_concurrent = 1;
  limits.max_queued = 2;
  start(limits);
  enqueue(request_for("!running"));
  enqueue(request_for("!q1"));
  enqueue(request_for("!q2"));
  auto err = ask_error<backfill_ticket>(enqueue_atom::value, request_for("!q3"));
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::queue_full));
  CAF_MESSAGE(sys.render(err));
  // Joining a queued run needs no new place.
  enqueue(request_for("!q1"));
}

/// A flood of low-priority backfills cannot take every slot.
CAF_TEST(per priority caps bound the runs of one priority) {
  run_limits limits;
  limits.max_concurrent = 3;
  limits.max_per_priority = {1, 0, 0};
  start(limits);
  for (auto room : {"!l1", "!l2", "!l3"})
    enqueue(request_for(room, priority::low));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!l1"});
  enqueue(request_for("!h1", priority::high));
  enqueue(request_for("!h2", priority::high));
  CAF_CHECK_EQUAL(at_pager(),
                  (std::vector<std::string>{"!l1", "!h1", "!h2"}));
  CAF_CHECK_EQUAL(queued_at(0), 2u);
}

CAF_TEST(invalid requests and unknown tickets are answered with errors) {
  start();
  auto no_room = request_for("");
  CAF_CHECK_EQUAL(ask_error<backfill_ticket>(enqueue_atom::value, no_room).code(),
                  static_cast<uint8_t>(errc::invalid_request));
  auto no_batch = request_for("!a");
  no_batch.batch_size = 0;
  CAF_CHECK_EQUAL(ask_error<backfill_ticket>(enqueue_atom::value, no_batch).code(),
                  static_cast<uint8_t>(errc::invalid_request));
  CAF_CHECK_EQUAL(ask_error<backfill_result>(await_atom::value, backfill_ticket{999}).code(),
                  static_cast<uint8_t>(errc::unknown_ticket));
  CAF_CHECK(at_pager().empty());
}

/// An await may be sent again, e.g. after one timed out.
CAF_TEST(an await can be repeated and answers the same result) {
  start();
  auto ticket = enqueue(request_for("!a"));
  release("!a", page({event("e1")}, true));
  auto first = finished(ticket);
  auto again = finished(ticket);
  CAF_CHECK_EQUAL(first.reason, again.reason);
  CAF_CHECK(first.events == again.events);
}

CAF_TEST(shutdown cancels every run and refuses later requests) {
  run_limits limits;
  limits.max_concurrent = 1;
  start(limits);
  auto running = enqueue(request_for("!a"));
  auto queued = enqueue(request_for("!b"));
  auto running_await = await(running);
  CAF_CHECK(ask<ok_atom>(shutdown_atom::value) == ok_atom::value);
  CAF_CHECK_EQUAL(result_of(running_await).reason, stop_reason::cancelled);
  CAF_CHECK_EQUAL(finished(queued).reason, stop_reason::cancelled);
  auto err = ask_error<backfill_ticket>(enqueue_atom::value, request_for("!c"));
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::closed_to_new_requests));
  // A late answer of the pager changes nothing.
  release("!a", page({event("late")}));
  CAF_CHECK(at_pager().empty());
}

CAF_TEST(stats count queued running joins and finished runs) {
  run_limits limits;
  limits.max_concurrent = 1;
  start(limits);
  enqueue(request_for("!a"));
  enqueue(request_for("!a"));
  enqueue(request_for("!b", priority::low));
  enqueue(request_for("!c", priority::high));
  auto st = stats();
  CAF_CHECK_EQUAL(st.running, 1u);
  CAF_CHECK_EQUAL(st.queued, (std::vector<uint64_t>{1, 0, 1}));
  CAF_CHECK_EQUAL(st.coalesced_joins, 1u);
  release("!a", page({}, true));
  release("!c", page({}));
  st = stats();
  CAF_CHECK_EQUAL(finished_count(st, stop_reason::reached_timeline_start), 1u);
  CAF_CHECK_EQUAL(finished_count(st, stop_reason::no_data_available), 1u);
}

// -- the guarantees of docs/backfill-scheduler.md, each where it can break ----

/// The batch limit is checked last: a last allowed batch that also meets the
/// stop condition, reaches the start or comes back empty ends with that.
CAF_TEST(the last allowed batch ends with its own reason before the batch limit) {
  start();
  auto stop = request_for("!stop", priority::normal, 1);
  stop.stop.what = stop_condition::kind::until_event;
  stop.stop.event_id = "e1";
  auto t_stop = enqueue(stop);
  auto t_start = enqueue(request_for("!start", priority::normal, 1));
  auto t_empty = enqueue(request_for("!empty", priority::normal, 1));
  auto t_limit = enqueue(request_for("!limit", priority::normal, 1));
  release("!stop", page({event("e1")}));
  release("!start", page({event("e1")}, true));
  release("!empty", page({}));
  release("!limit", page({event("e1")}));
  CAF_CHECK_EQUAL(finished(t_stop).reason, stop_reason::stop_condition_met);
  CAF_CHECK_EQUAL(finished(t_start).reason,
                  stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(finished(t_empty).reason, stop_reason::no_data_available);
  CAF_CHECK_EQUAL(finished(t_limit).reason, stop_reason::batch_limit_reached);
  CAF_CHECK(at_pager().empty());
}

CAF_TEST(a run shared by two callers is cancelled only after both left) {
  start();
  auto first = enqueue(request_for("!a"));
  auto second = enqueue(request_for("!a"));
  ask<ok_atom>(cancel_atom::value, first);
  release("!a", page({event("e1")}));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  ask<ok_atom>(cancel_atom::value, second);
  release("!a", page({event("e2")}));
  // Stopped before its next batch: two batches, no third request.
  CAF_CHECK(at_pager().empty());
  CAF_CHECK_EQUAL(pager_state().calls.size(), 2u);
  CAF_CHECK_EQUAL(finished(second).reason, stop_reason::cancelled);
  CAF_CHECK_EQUAL(finished_count(stats(), stop_reason::cancelled), 1u);
}

/// (room, high) and (room, normal) are different keys: cancelling one,
/// queued or running, leaves the other.
CAF_TEST(cancelling a room at high priority leaves its normal run) {
  start();
  auto normal = enqueue(request_for("!a", priority::normal));
  auto high = enqueue(request_for("!a", priority::high));
  ask<ok_atom>(cancel_atom::value, high);
  CAF_CHECK_EQUAL(queued_at(2), 0u);
  release("!a", page({event("e1")}));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  // And the other way round: the running high run cancelled, the queued
  // normal run still starts.
  auto high_running_normal = enqueue(request_for("!b", priority::high));
  auto queued_normal = enqueue(request_for("!b", priority::normal));
  ask<ok_atom>(cancel_atom::value, high_running_normal);
  release("!b", page({event("b1")}));
  CAF_CHECK_EQUAL(at_pager(), (std::vector<std::string>{"!a", "!b"}));
  release("!b", page({event("b0")}, true));
  auto b = finished(queued_normal);
  CAF_CHECK_EQUAL(b.reason, stop_reason::reached_timeline_start);
  CAF_REQUIRE_EQUAL(b.events.size(), 1u);
  CAF_CHECK_EQUAL(b.events[0].event_id, "b0");
  release("!a", page({event("e0")}, true));
  auto a = finished(normal);
  CAF_CHECK_EQUAL(a.reason, stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(a.events.size(), 2u);
  CAF_CHECK_EQUAL(finished(high).reason, stop_reason::cancelled);
}

/// The CLI's pattern: an await times out at the requester and is sent again.
CAF_TEST(an await that timed out cancels nothing) {
  start();
  auto ticket = enqueue(request_for("!a"));
  auto timed = self->request(scheduler, 1s, await_atom::value, ticket);
  sched.run();
  sched.advance_time(1s);
  sched.run();
  error timeout;
  timed.receive([](backfill_result&) { CAF_FAIL("expected a timeout"); },
                [&](error& err) { timeout = std::move(err); });
  CAF_CHECK_EQUAL(timeout.code(), static_cast<uint8_t>(sec::request_timeout));
  auto again = await(ticket);
  release("!a", page({event("e1")}));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  release("!a", page({event("e2")}, true));
  auto r = result_of(again);
  CAF_CHECK_EQUAL(r.reason, stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(r.events.size(), 2u);
}

/// backfill_scheduler_options{} as the node's defaults: 3 runs at once, 10,000 runs
/// waiting, 30 s for the pager.
CAF_TEST(the defaults are three runs ten thousand waiting and thirty seconds) {
  start_with(pager, backfill_scheduler_options{});
  for (int i = 0; i < 4; ++i)
    enqueue(request_for("!r" + std::to_string(i)));
  CAF_CHECK_EQUAL(at_pager().size(), 3u);
  for (int i = 4; i < 10003; ++i)
    enqueue(request_for("!r" + std::to_string(i)));
  CAF_CHECK_EQUAL(queued_at(1), 10000u);
  auto err = ask_error<backfill_ticket>(enqueue_atom::value,
                                        request_for("!one-too-many"));
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::queue_full));
  auto ticket = backfill_ticket{1};
  auto waiting = await(ticket);
  sched.advance_time(29s);
  sched.run();
  CAF_CHECK(self->mailbox().empty());
  sched.advance_time(1s);
  sched.run();
  CAF_CHECK_EQUAL(result_of(waiting).reason, stop_reason::failed);
}

CAF_TEST(a normal priority cap bounds the normal runs only) {
  run_limits limits;
  limits.max_concurrent = 3;
  limits.max_per_priority = {0, 1, 0};
  start(limits);
  enqueue(request_for("!n1"));
  enqueue(request_for("!n2"));
  enqueue(request_for("!l1", priority::low));
  CAF_CHECK_EQUAL(at_pager(), (std::vector<std::string>{"!n1", "!l1"}));
  CAF_CHECK_EQUAL(queued_at(1), 1u);
  enqueue(request_for("!h1", priority::high));
  CAF_CHECK_EQUAL(at_pager(),
                  (std::vector<std::string>{"!n1", "!l1", "!h1"}));
  release("!n1", page({}, true));
  CAF_CHECK_EQUAL(at_pager(),
                  (std::vector<std::string>{"!l1", "!h1", "!n2"}));
}

// -- a fresh run behind a cancelled one ---------------------------------------

/// A request for a key whose run was cancelled at the pager waits for that
/// run to end: it holds a place in the queue like any other waiting run.
CAF_TEST(a fresh run behind a cancelled running one is counted and bounded) {
  run_limits limits;
  limits.max_concurrent = 1;
  limits.max_queued = 1;
  start(limits);
  auto cancelled = enqueue(request_for("!a"));
  ask<ok_atom>(cancel_atom::value, cancelled);
  auto fresh = enqueue(request_for("!a"));
  CAF_CHECK_EQUAL(queued_at(1), 1u);
  auto err = ask_error<backfill_ticket>(enqueue_atom::value, request_for("!q"));
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::queue_full));
  release("!a", page({event("e1")}));
  CAF_CHECK_EQUAL(queued_at(1), 0u);
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!a"});
  release("!a", page({event("e0")}, true));
  CAF_CHECK_EQUAL(finished(fresh).reason, stop_reason::reached_timeline_start);
}

CAF_TEST(a fresh run behind a cancelled running one is itself refused when full) {
  run_limits limits;
  limits.max_concurrent = 1;
  limits.max_queued = 1;
  start(limits);
  auto cancelled = enqueue(request_for("!a"));
  enqueue(request_for("!q"));
  ask<ok_atom>(cancel_atom::value, cancelled);
  auto err = ask_error<backfill_ticket>(enqueue_atom::value, request_for("!a"));
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::queue_full));
  CAF_MESSAGE(sys.render(err));
  release("!a", page({event("e1")}));
  CAF_CHECK_EQUAL(at_pager(), std::vector<std::string>{"!q"});
}

CAF_TEST(a fresh run cancelled before its room frees never paginates) {
  start();
  auto cancelled = enqueue(request_for("!a"));
  ask<ok_atom>(cancel_atom::value, cancelled);
  auto fresh = enqueue(request_for("!a"));
  ask<ok_atom>(cancel_atom::value, fresh);
  CAF_CHECK_EQUAL(queued_at(1), 0u);
  release("!a", page({event("e1")}));
  CAF_CHECK(at_pager().empty());
  CAF_CHECK_EQUAL(pager_state().calls.size(), 1u);
  // The key is free again.
  auto later = enqueue(request_for("!a"));
  release("!a", page({}, true));
  CAF_CHECK_EQUAL(finished(later).reason, stop_reason::reached_timeline_start);
}

// -- memory -------------------------------------------------------------------

std::size_t bytes_of(const std::vector<timeline_event>& events) {
  std::size_t result = 0;
  for (auto& e : events)
    result += held_bytes(e);
  return result;
}

/// Loaded events are held once per run, however many callers share it, and
/// finished callers leave the run.
CAF_TEST(a thousand callers of one run share one copy of its events) {
  start();
  std::vector<backfill_ticket> tickets;
  for (int i = 0; i < 1000; ++i)
    tickets.push_back(enqueue(request_for("!a")));
  std::vector<timeline_event> first{event("e9"), event("e8")};
  std::vector<timeline_event> second{event("e7")};
  release("!a", page(first));
  CAF_CHECK_EQUAL(stats().events_bytes_held, bytes_of(first));
  release("!a", page(second, true));
  auto st = stats();
  auto both = bytes_of(first) + bytes_of(second);
  CAF_CHECK_EQUAL(st.events_bytes_held, both);
  CAF_CHECK_EQUAL(st.results_kept, 1000u);
  CAF_CHECK_EQUAL(st.results_bytes, both + 1000 * result_bookkeeping_bytes);
  std::size_t complete = 0;
  for (auto& ticket : tickets)
    if (finished(ticket).events.size() == 3)
      ++complete;
  CAF_CHECK_EQUAL(complete, 1000u);
}

/// A finished caller leaves its run, and the run drops the pages that no
/// caller still in it needs: here the first caller's result is forgotten at
/// once (a budget of one byte), so only the page the second one needs is
/// held.
CAF_TEST(a run releases the pages its remaining callers do not need) {
  backfill_scheduler_options options;
  options.results_memory = 1;
  start_with(pager, options);
  auto first = enqueue(request_for("!a", priority::normal, 2));
  std::vector<timeline_event> old_page{event("e9"), event("e8")};
  std::vector<timeline_event> new_page{event("e7")};
  release("!a", page(old_page));
  auto second = enqueue(request_for("!a"));
  release("!a", page(new_page));
  CAF_CHECK_EQUAL(stats().events_bytes_held, bytes_of(new_page));
  CAF_CHECK_EQUAL(ask_error<backfill_result>(await_atom::value, first).code(),
                  static_cast<uint8_t>(errc::unknown_ticket));
  auto waiting = await(second);
  release("!a", page({event("e6")}, true));
  auto r = result_of(waiting);
  CAF_CHECK_EQUAL(r.reason, stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(r.events.size(), 2u);
  CAF_CHECK_EQUAL(stats().events_bytes_held, 0u);
}

/// A ticket has one parked await: a re-sent await replaces the earlier one,
/// which is answered at once (a requester that timed out drops the answer).
CAF_TEST(a re-sent await replaces the parked one) {
  start();
  auto ticket = enqueue(request_for("!a"));
  auto first = await(ticket);
  auto second = await(ticket);
  auto third = await(ticket);
  CAF_CHECK_EQUAL(stats().parked_awaits, 1u);
  CAF_CHECK_EQUAL(error_of(first).code(),
                  static_cast<uint8_t>(errc::await_replaced));
  CAF_CHECK_EQUAL(error_of(second).code(),
                  static_cast<uint8_t>(errc::await_replaced));
  CAF_CHECK(self->mailbox().empty());
  release("!a", page({event("e1")}, true));
  CAF_CHECK_EQUAL(result_of(third).events.size(), 1u);
  CAF_CHECK_EQUAL(stats().parked_awaits, 0u);
}

/// Finished results stay within `results_memory`, the oldest forgotten
/// first; an await for a forgotten one says so.
CAF_TEST(finished results beyond the budget are forgotten oldest first) {
  backfill_scheduler_options options;
  auto one_result = result_bookkeeping_bytes + held_bytes(event("x1"));
  options.results_memory = 2 * one_result;
  start_with(pager, options);
  std::vector<backfill_ticket> tickets;
  for (auto room : {"!a", "!b", "!c", "!d"}) {
    tickets.push_back(enqueue(request_for(room)));
    release(room, page({event("x1")}, true));
  }
  auto st = stats();
  CAF_CHECK_EQUAL(st.results_kept, 2u);
  CAF_CHECK_EQUAL(st.results_forgotten, 2u);
  CAF_CHECK_EQUAL(st.results_bytes, options.results_memory);
  CAF_CHECK_EQUAL(st.events_bytes_held, 2 * held_bytes(event("x1")));
  for (auto i : {0, 1}) {
    auto err = ask_error<backfill_result>(await_atom::value, tickets[i]);
    CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::unknown_ticket));
    CAF_CHECK(sys.render(err).find("forgotten") != std::string::npos);
    CAF_MESSAGE(sys.render(err));
  }
  for (auto i : {2, 3})
    CAF_CHECK_EQUAL(finished(tickets[i]).events.size(), 1u);
  // A ticket never issued is told apart from a forgotten one.
  auto never = ask_error<backfill_result>(await_atom::value,
                                          backfill_ticket{999});
  CAF_CHECK(sys.render(never).find("never issued") != std::string::npos);
}

CAF_TEST_FIXTURE_SCOPE_END()


// -- the room's position and the pages nobody received ------------------------

namespace {

/// The scheduler over the real RocksDB timeline store, which the test can
/// close and reopen; the store runs as a scheduled actor under the test
/// coordinator, so the test decides when it answers. RocksDB writes through
/// the fault seam, off unless a test flips a switch.
struct stored_timeline_fixture : scheduler_fixture_base {
  temp_dir dir;
  std::shared_ptr<storage::fault_switches> faults
    = std::make_shared<storage::fault_switches>();
  std::shared_ptr<storage::database> db;
  timeline_actor store;

  stored_timeline_fixture() {
    open(std::chrono::seconds{30});
  }

  ~stored_timeline_fixture() override {
    anon_send_exit(scheduler, exit_reason::kill);
    anon_send_exit(store, exit_reason::kill);
    sched.run();
  }

  void open(caf::timespan pager_timeout) {
    auto opened = storage::database::open(
      {dir.sub("db"), storage::durability::synced,
       storage::make_fault_injecting_file_system(faults)});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
    store = sys.spawn(timeline_store, db);
    backfill_scheduler_options options;
    options.pager_timeout = pager_timeout;
    start_with(store, options);
  }

  /// Stops both actors and the database, then opens everything again.
  void restart() {
    anon_send_exit(scheduler, exit_reason::kill);
    anon_send_exit(store, exit_reason::kill);
    sched.run();
    CAF_REQUIRE(!db->close());
    db.reset();
    open(std::chrono::seconds{30});
  }

  void append(const std::string& room, const std::vector<std::string>& ids) {
    std::vector<timeline_event> events;
    for (auto& id : ids)
      events.push_back(event(id));
    auto answer = self->request(store, infinite, append_atom::value, room,
                                events);
    sched.run();
    answer.receive([](uint64_t) {},
                   [&](error& err) { CAF_FAIL(sys.render(err)); });
  }

  /// Sends an enqueue of `room` in batches of 2 and lets only the scheduler
  /// handle it: its first page is then waiting at the store.
  backfill_ticket enqueue_page_pending(const std::string& room) {
    auto request = request_for(room);
    request.batch_size = 2;
    auto answer = self->request(scheduler, infinite, enqueue_atom::value,
                                request);
    run_only(scheduler);
    backfill_ticket ticket;
    answer.receive([&](backfill_ticket& x) { ticket = x; },
                   [&](error& err) { CAF_FAIL(sys.render(err)); });
    return ticket;
  }

  /// A new scheduler over the same store whose callers claim their
  /// tickets, as callers on other nodes do.
  void restart_claiming() {
    anon_send_exit(scheduler, exit_reason::kill);
    sched.run();
    backfill_scheduler_options options;
    options.local_callers_claim = true;
    start_with(store, options);
  }

  /// Event ids a fresh backfill of `room` loads, to the timeline start.
  std::vector<std::string> backfill_ids(const std::string& room,
                                        uint32_t max_batches = 0) {
    auto request = request_for(room, priority::normal, max_batches);
    request.batch_size = 2;
    return ids_of(finished(enqueue(request)));
  }

  static std::vector<std::string> ids_of(const backfill_result& result) {
    std::vector<std::string> ids;
    for (auto& e : result.events)
      ids.push_back(e.event_id);
    return ids;
  }
};

using ids = std::vector<std::string>;

} // namespace

CAF_TEST_FIXTURE_SCOPE(stored_timeline_tests, stored_timeline_fixture)

CAF_TEST(delivered pages move the position for good across a restart) {
  append("!r", {"e1", "e2", "e3", "e4"});
  CAF_CHECK_EQUAL(backfill_ids("!r", 1), (ids{"e4", "e3"}));
  restart();
  CAF_CHECK_EQUAL(backfill_ids("!r"), (ids{"e2", "e1"}));
  CAF_CHECK_EQUAL(backfill_ids("!r"), ids{});
}

CAF_TEST(a page that arrives for a cancelled run is loaded again) {
  append("!r", {"e1", "e2", "e3", "e4"});
  auto ticket = enqueue_page_pending("!r");
  self->send(scheduler, cancel_atom::value, ticket);
  run_only(scheduler);
  sched.run(); // The store answers the cancelled run.
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::cancelled);
  CAF_CHECK_EQUAL(backfill_ids("!r"), (ids{"e4", "e3", "e2", "e1"}));
}

CAF_TEST(a page that arrives after the pager timeout is loaded again) {
  anon_send_exit(scheduler, exit_reason::kill);
  sched.run();
  start_with(store, [] {
    backfill_scheduler_options options;
    options.pager_timeout = std::chrono::seconds{2};
    return options;
  }());
  append("!r", {"e1", "e2", "e3", "e4"});
  auto ticket = enqueue_page_pending("!r");
  sched.advance_time(2s);
  run_only(scheduler); // The run fails before the store answers.
  sched.run();
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::failed);
  CAF_CHECK_EQUAL(backfill_ids("!r"), (ids{"e4", "e3", "e2", "e1"}));
}

CAF_TEST(a page that arrives after shutdown is loaded again after a restart) {
  append("!r", {"e1", "e2", "e3", "e4"});
  auto ticket = enqueue_page_pending("!r");
  auto down = self->request(scheduler, infinite, shutdown_atom::value);
  run_only(scheduler);
  sched.run(); // The store answers after the shutdown.
  down.receive([](ok_atom) {}, [&](error& err) { CAF_FAIL(sys.render(err)); });
  CAF_CHECK_EQUAL(finished(ticket).reason, stop_reason::cancelled);
  restart();
  CAF_CHECK_EQUAL(backfill_ids("!r"), (ids{"e4", "e3", "e2", "e1"}));
}

/// A caller on another node may never get its enqueue's answer: its
/// client timed out and asked another replica, whose run then must not
/// find the position moved past a page nobody received. Replayed here with
/// callers of this process made to claim like remote ones.
CAF_TEST(a page whose caller never learned its ticket is not committed) {
  restart_claiming();
  append("!r", {"e1", "e2", "e3", "e4"});
  auto request = request_for("!r", priority::normal, 1);
  request.batch_size = 2;
  // The first enqueue's answer is lost: nobody awaits its ticket.
  auto lost = enqueue(request);
  CAF_CHECK_EQUAL(finished_count(stats(), stop_reason::batch_limit_reached),
                  1u); // Its page was loaded.
  // The retry gets that page, and moves the position past it.
  auto retried = finished(enqueue(request));
  CAF_CHECK_EQUAL(ids_of(retried), (ids{"e4", "e3"}));
  // Claimed late, the lost ticket is answered with what it loaded.
  CAF_CHECK_EQUAL(ids_of(finished(lost)), (ids{"e4", "e3"}));
  CAF_CHECK_EQUAL(backfill_ids("!r"), (ids{"e2", "e1"}));
}

CAF_TEST(a page nobody claims within the pager timeout is loaded again) {
  restart_claiming();
  append("!r", {"e1", "e2", "e3", "e4"});
  auto request = request_for("!r", priority::normal, 2);
  request.batch_size = 2;
  auto lost = enqueue(request);
  // The run waits for a claim, its room's place held: nothing committed.
  CAF_CHECK_EQUAL(running(), 1u);
  sched.advance_time(30s);
  sched.run();
  CAF_CHECK_EQUAL(running(), 0u);
  auto r = finished(lost);
  CAF_CHECK_EQUAL(r.reason, stop_reason::cancelled);
  CAF_CHECK_EQUAL(ids_of(r), (ids{"e4", "e3"}));
  CAF_CHECK_EQUAL(backfill_ids("!r"), (ids{"e4", "e3", "e2", "e1"}));
}

CAF_TEST(a detach claims a ticket and its run goes on) {
  restart_claiming();
  append("!r", {"e1", "e2", "e3", "e4"});
  auto request = request_for("!r");
  request.batch_size = 2;
  auto ticket = enqueue(request);
  ask<ok_atom>(detach_atom::value, ticket);
  CAF_CHECK_EQUAL(ids_of(finished(ticket)), (ids{"e4", "e3", "e2", "e1"}));
  CAF_CHECK_EQUAL(backfill_ids("!r"), ids{});
}

/// The commit is the step that moves the position: when it fails, the run
/// ends `failed` with what it delivered, and those events come again.
CAF_TEST(a failed commit fails the run and its events are loaded again) {
  append("!r", {"e1", "e2", "e3", "e4"});
  // A plain I/O error on the WAL: the next write reopens the database
  // first, synchronously, once the fault is gone.
  faults->kind = static_cast<int>(storage::fault_kind::eio);
  faults->wal_append = true;
  auto request = request_for("!r");
  request.batch_size = 2;
  auto r = finished(enqueue(request));
  CAF_CHECK_EQUAL(r.reason, stop_reason::failed);
  CAF_REQUIRE_EQUAL(r.events.size(), 2u);
  CAF_CHECK_EQUAL(r.events[0].event_id, "e4");
  CAF_CHECK(faults->injected > 0);
  faults->clear();
  CAF_CHECK_EQUAL(backfill_ids("!r"), (ids{"e4", "e3", "e2", "e1"}));
}

CAF_TEST_FIXTURE_SCOPE_END()
