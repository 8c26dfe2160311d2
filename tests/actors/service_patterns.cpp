#define CAF_SUITE actors.service_patterns
#include <caf/test/dsl.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include <coalesce/actors/caller_monitor.hpp>
#include <coalesce/actors/durability_waiters.hpp>
#include <coalesce/actors/guarded_write.hpp>
#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/actors/retry_backoff.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>
#include <coalesce/storage/timeline.hpp>

#include "mailbox.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

using ids = std::vector<uint64_t>;
using time_point = durability_waiters::clock::time_point;

/// A service that parks every `get` and monitors its callers once: the
/// helpers as a real actor uses them.
struct parking_state {
  static inline const char* name = "parking_service";
  parked_requests<response_promise> parked{"the parking service"};
  caller_monitor callers;
  int downs = 0;
};

behavior parking_service(stateful_actor<parking_state>* self) {
  self->set_down_handler([self](down_msg& msg) {
    self->state.callers.forget(msg.source);
    self->state.downs += 1;
  });
  return {
    [self](get_atom) {
      // Before the promise: making it takes the sender out of the message.
      self->state.callers.watch(self,
                                actor_cast<actor_addr>(self->current_sender()));
      auto promise = self->make_response_promise();
      self->state.parked.park(promise);
      return promise;
    },
    [self](put_atom, uint64_t id) {
      return self->state.parked.answer(id, id);
    },
    [self](delete_atom) {
      self->state.parked.answer_all(make_error(errc::node_shutting_down));
    },
  };
}

struct patterns_fixture : test_coordinator_fixture<test_config> {
  actor service = sys.spawn(parking_service);

  /// A parked promise holds its service: stopped here, before the base
  /// fixture waits for every actor.
  ~patterns_fixture() {
    anon_send_exit(service, exit_reason::kill);
    sched.run();
  }

  parking_state& state() {
    return deref<stateful_actor<parking_state>>(service).state;
  }
};

/// A real database whose file system is the fault seam.
struct faulty_database {
  temp_dir dir;
  std::shared_ptr<fault_switches> faults = std::make_shared<fault_switches>();
  std::shared_ptr<database> db;

  faulty_database() {
    auto opened = database::open(
      {dir.sub("db"), durability::synced,
       make_fault_injecting_file_system(faults)});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
  }

  ~faulty_database() {
    faults->clear();
  }

  /// Appends one event through the guarded step, counting the attempts
  /// that reached the database.
  caf::error append(const std::string& id, int& attempts) {
    return guarded_write(*db, [&] {
      attempts += 1;
      return append_events(*db, "!room", {timeline_event{id, "m", 1, "b"}});
    });
  }
};

} // namespace

CAF_TEST(a backoff waits base first then doubles up to max) {
  retry_backoff backoff{10ms, 45ms};
  CAF_CHECK(!backoff.backing_off());
  CAF_CHECK_EQUAL(backoff.next(), timespan{10ms});
  CAF_CHECK_EQUAL(backoff.next(), timespan{20ms});
  CAF_CHECK_EQUAL(backoff.next(), timespan{40ms});
  CAF_CHECK_EQUAL(backoff.next(), timespan{45ms});
  CAF_CHECK_EQUAL(backoff.next(), timespan{45ms});
  CAF_CHECK(backoff.backing_off());
  CAF_CHECK_EQUAL(backoff.current(), timespan{45ms});
}

CAF_TEST(a success resets the backoff to base) {
  retry_backoff backoff{10ms, 1s};
  backoff.next();
  backoff.next();
  backoff.reset();
  CAF_CHECK(!backoff.backing_off());
  CAF_CHECK_EQUAL(backoff.current(), timespan{0});
  CAF_CHECK_EQUAL(backoff.next(), timespan{10ms});
}

CAF_TEST(a backoff base above its max waits max) {
  retry_backoff backoff{5s, 1s};
  CAF_CHECK_EQUAL(backoff.next(), timespan{1s});
  CAF_CHECK_EQUAL(backoff.next(), timespan{1s});
}

CAF_TEST(durability waiters are answered in one pass once durable past their mark) {
  durability_waiters waiters;
  waiters.wait(1, 5);
  waiters.wait(2, 3);
  waiters.wait(3, 9);
  waiters.wait(4, 3);
  CAF_CHECK(!waiters.any_durable_below(3));
  CAF_CHECK(waiters.take_durable(3).empty());
  CAF_CHECK(waiters.any_durable_below(6));
  // Marks 3, 3 and 5 are below 6: taken lowest mark first, 9 stays.
  auto done = waiters.take_durable(6);
  CAF_CHECK_EQUAL(done.size(), 3u);
  CAF_CHECK_EQUAL(done.back(), 1u);
  CAF_CHECK_EQUAL(waiters.size(), 1u);
  CAF_CHECK(waiters.waiting(3));
  CAF_CHECK(!waiters.waiting(1));
  CAF_CHECK_EQUAL(waiters.take_durable(100), (ids{3}));
  CAF_CHECK(waiters.empty());
}

/// The sealed buffer parks one waiter per queue and answers them as each
/// write syncs: a pass that rescanned the waiters still waiting would make
/// that quadratic in the waiters (the review's finding), a pass over what
/// it takes keeps it linear.
CAF_TEST(answering waiters over many passes visits each waiter once) {
  durability_waiters waiters;
  constexpr uint64_t n = 10'000;
  for (uint64_t i = 0; i < n; ++i)
    waiters.wait(i, i, i % 3 == 0 ? std::optional<time_point>{time_point::max()}
                                  : std::nullopt);
  std::size_t answered = 0;
  for (uint64_t durable = 1; durable <= n; ++durable)
    answered += waiters.take_durable(durable).size();
  CAF_CHECK_EQUAL(answered, n);
  CAF_CHECK_EQUAL(waiters.examined(), n);
  waiters.wait(n, n);
  CAF_CHECK(waiters.remove(n));
  CAF_CHECK(!waiters.remove(n));
  CAF_CHECK_EQUAL(waiters.examined(), n + 1);
}

CAF_TEST(durability waiters expire at their deadline however far their writes are) {
  durability_waiters waiters;
  auto t0 = time_point{} + 1h;
  waiters.wait(1, 5, t0 + 50ms);
  waiters.wait(2, 5); // No deadline: never expires.
  waiters.wait(3, 2, t0 + 10ms);
  CAF_CHECK(waiters.take_expired(t0 + 9ms).empty());
  CAF_CHECK_EQUAL(waiters.take_expired(t0 + 10ms), (ids{3}));
  CAF_CHECK_EQUAL(waiters.take_expired(t0 + 1h), (ids{1}));
  CAF_CHECK_EQUAL(waiters.size(), 1u);
  CAF_CHECK(waiters.waiting(2));
  // The expired ones are gone: durability answers only the one left.
  CAF_CHECK_EQUAL(waiters.take_durable(100), (ids{2}));
}

CAF_TEST(a durable waiter no longer expires and a removed one is not answered) {
  durability_waiters waiters;
  auto t0 = time_point{} + 1h;
  waiters.wait(1, 1, t0 + 10ms);
  waiters.wait(2, 1, t0 + 10ms);
  waiters.wait(3, 1, t0 + 10ms);
  CAF_CHECK(waiters.remove(2));
  CAF_CHECK(!waiters.remove(2));
  CAF_CHECK_EQUAL(waiters.take_durable(2), (ids{1, 3}));
  CAF_CHECK(waiters.take_expired(t0 + 1h).empty());
  CAF_CHECK(waiters.empty());
}

CAF_TEST_FIXTURE_SCOPE(service_pattern_actor_tests, patterns_fixture)

CAF_TEST(a parked request is answered by whoever takes it and only once) {
  self->request(service, infinite, get_atom::value);
  sched.run();
  CAF_CHECK(self->mailbox().empty());
  CAF_CHECK_EQUAL(state().parked.size(), 1u);
  scoped_actor other{sys};
  other->request(service, infinite, put_atom::value, uint64_t{1});
  sched.run();
  auto reply = next_message(self);
  CAF_REQUIRE(reply.match_elements<uint64_t>());
  CAF_CHECK_EQUAL(reply.get_as<uint64_t>(0), 1u);
  CAF_CHECK(next_message(other).get_as<bool>(0));
  other->request(service, infinite, put_atom::value, uint64_t{1});
  sched.run();
  CAF_CHECK(!next_message(other).get_as<bool>(0));
  CAF_CHECK(self->mailbox().empty());
}

CAF_TEST(every parked request is answered stopped_before_answer when the service stops) {
  scoped_actor first{sys};
  scoped_actor second{sys};
  first->request(service, infinite, get_atom::value);
  second->request(service, infinite, get_atom::value);
  second->request(service, infinite, get_atom::value);
  sched.run();
  CAF_CHECK_EQUAL(state().parked.size(), 3u);
  anon_send_exit(service, exit_reason::user_shutdown);
  sched.run();
  for (auto* who : {&first, &second, &second}) {
    auto err = next_error(*who);
    CAF_CHECK_EQUAL(err.category(), errc_category);
    CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::stopped_before_answer));
    CAF_CHECK_EQUAL(sys.render(err),
                    "the service stopped before answering: the parking service stopped");
  }
}

CAF_TEST(answering all parked requests answers each with that error) {
  scoped_actor first{sys};
  first->request(service, infinite, get_atom::value);
  self->request(service, infinite, get_atom::value);
  sched.run();
  anon_send(service, delete_atom::value);
  sched.run();
  for (auto* who : {&first, &self})
    CAF_CHECK_EQUAL(next_error(*who).code(),
                    static_cast<uint8_t>(errc::node_shutting_down));
  CAF_CHECK(state().parked.empty());
}

CAF_TEST(a caller that calls many times is monitored once and reported dead once) {
  auto svc = service;
  auto caller = sys.spawn([svc](event_based_actor* self) -> behavior {
    for (int i = 0; i < 3; ++i)
      self->request(svc, infinite, get_atom::value).then([](uint64_t) {});
    return {[](ok_atom) {}};
  });
  sched.run();
  CAF_CHECK_EQUAL(state().parked.size(), 3u);
  CAF_CHECK_EQUAL(state().callers.size(), 1u);
  anon_send_exit(caller, exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(state().downs, 1);
  CAF_CHECK_EQUAL(state().callers.size(), 0u);
}

CAF_TEST(a forgotten caller is monitored again and no actor is never monitored) {
  caller_monitor callers;
  auto me = actor_cast<actor_addr>(self);
  CAF_CHECK(callers.add(me));
  CAF_CHECK(!callers.add(me));
  CAF_CHECK(callers.watching(me));
  CAF_CHECK(callers.forget(me));
  CAF_CHECK(!callers.forget(me));
  CAF_CHECK(callers.add(me));
  CAF_CHECK(!callers.add(actor_addr{}));
  CAF_CHECK_EQUAL(callers.size(), 1u);
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST(a failed guarded write recovers the database for the next write) {
  faulty_database store;
  int attempts = 0;
  store.faults->kind = static_cast<int>(fault_kind::eio);
  store.faults->wal_append = true;
  CAF_CHECK(store.append("$1", attempts));
  store.faults->clear();
  CAF_CHECK_EQUAL(store.append("$2", attempts), caf::none);
  CAF_CHECK_EQUAL(attempts, 2);
  auto page = page_backwards(*store.db, "!room", 10);
  CAF_REQUIRE(page.engaged());
  CAF_REQUIRE_EQUAL(page->events.size(), 1u);
  CAF_CHECK_EQUAL(page->events.front().event_id, "$2");
}

CAF_TEST(a guarded write is not attempted while the database cannot recover) {
  faulty_database store;
  int attempts = 0;
  store.faults->disk_full = true;
  CAF_CHECK(store.append("$1", attempts));
  CAF_CHECK_EQUAL(attempts, 1);
  auto err = store.append("$2", attempts);
  CAF_CHECK(err);
  CAF_CHECK_EQUAL(attempts, 1);
  store.faults->clear();
  CAF_CHECK_EQUAL(store.append("$3", attempts), caf::none);
  CAF_CHECK_EQUAL(attempts, 2);
}

CAF_TEST(a guarded read passes its value or its error through) {
  faulty_database store;
  int attempts = 0;
  CAF_REQUIRE_EQUAL(store.append("$1", attempts), caf::none);
  auto page = guarded_write(
    *store.db, [&] { return page_backwards(*store.db, "!room", 10); });
  CAF_REQUIRE(page.engaged());
  CAF_CHECK_EQUAL(page->events.size(), 1u);
  auto refused = guarded_write(
    *store.db, [&] { return page_backwards(*store.db, "", 10); });
  CAF_REQUIRE(!refused.engaged());
  CAF_CHECK_EQUAL(refused.error().code(),
                  static_cast<uint8_t>(errc::invalid_request));
}
