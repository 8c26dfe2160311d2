#define CAF_SUITE actors.backfill_scheduler
#include <caf/test/dsl.hpp>

#include "actors/backfill_scheduler.hpp"

#include <deque>
#include <map>

#include "messages/errc.hpp"

#include "secret_fixtures.hpp"

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
  return timeline_page{std::move(events), reached_start};
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

struct scheduler_fixture : test_coordinator_fixture<test_config> {
  scripted_pager_actor pager;
  scheduler_actor scheduler;

  scheduler_fixture() {
    pager = sys.spawn(scripted_pager);
    sched.run();
  }

  ~scheduler_fixture() override {
    // The pager's held promises die with it; the scheduler answers its
    // callers on exit.
    anon_send_exit(scheduler, exit_reason::kill);
    anon_send_exit(pager, exit_reason::kill);
    sched.run();
  }

  void start(run_limits limits = run_limits{},
             caf::timespan pager_timeout = std::chrono::seconds{30}) {
    scheduler_options options;
    options.limits = limits;
    options.pager_timeout = pager_timeout;
    scheduler = spawn_backfill_scheduler(sys, pager, options);
    sched.run();
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
      std::declval<scheduler_actor&>(), infinite, await_atom::value,
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

  backfill_result finished(backfill_ticket ticket) {
    return ask<backfill_result>(await_atom::value, ticket);
  }

  scheduler_stats stats() {
    return ask<scheduler_stats>(stats_atom::value);
  }

  /// By value: a check must not hold a reference into a temporary.
  uint64_t queued_at(std::size_t prio) {
    return stats().queued.at(prio);
  }
};

uint64_t finished_count(const scheduler_stats& st, stop_reason reason) {
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
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::shut_down));
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

CAF_TEST_FIXTURE_SCOPE_END()
