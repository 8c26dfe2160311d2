#define CAF_SUITE actors.backfill_runs
#include <caf/test/unit_test.hpp>

#include <coalesce/actors/backfill_runs.hpp>

#include <string>
#include <vector>

using namespace coalesce;

namespace {

using state = backfill_runs::ticket_state;
using ids = std::vector<backfill_runs::run_id>;

backfill_request request(const std::string& room, uint32_t max_batches = 0,
                         priority prio = priority::normal) {
  backfill_request x;
  x.room = room;
  x.prio = prio;
  x.batch_size = 2;
  x.max_batches = max_batches;
  return x;
}

backfill_request until_event(const std::string& room, std::string id) {
  auto x = request(room);
  x.stop.what = stop_condition::kind::until_event;
  x.stop.event_id = std::move(id);
  return x;
}

/// A page of events named `ids`, not the timeline's start.
timeline_page page_of(std::vector<std::string> ids) {
  timeline_page page;
  for (auto& id : ids)
    page.events.push_back(timeline_event{id, "m", 1, "body"});
  return page;
}

std::vector<std::string> ids_of(const backfill_result& result) {
  std::vector<std::string> out;
  for (const auto& event : result.events)
    out.push_back(event.event_id);
  return out;
}

using names = std::vector<std::string>;

run_limits limits(std::size_t max_concurrent = 3, std::size_t max_queued = 100) {
  run_limits x;
  x.max_concurrent = max_concurrent;
  x.max_queued = max_queued;
  return x;
}

/// Runs that ended for `reason`, from the counters.
uint64_t finished(const backfill_runs& runs, stop_reason reason) {
  return runs.stats().finished.at(static_cast<std::size_t>(reason));
}

uint64_t queued(const backfill_runs& runs, priority prio) {
  return runs.stats().queued.at(static_cast<std::size_t>(prio));
}

constexpr std::size_t plenty = std::size_t{1} << 30;

/// `page` for run `id` from a pager whose commit succeeds: the step, after
/// the commit it asked for was answered.
backfill_runs::page_step deliver(backfill_runs& runs, backfill_runs::run_id id,
                                 timeline_page& page) {
  auto step = runs.on_page(id, page);
  if (step.commit)
    step.next_page = runs.on_commit(id, true);
  return step;
}

/// One caller of "!a" whose enqueue answer may have been lost (unclaimed),
/// and its run after one page of "e1": the ticket, the run and the step.
struct unclaimed_run {
  backfill_runs::ticket_type ticket;
  backfill_runs::run_id id;
  backfill_runs::page_step step;
};

unclaimed_run one_page_unclaimed(backfill_runs& runs, uint32_t max_batches) {
  auto r = request("!a", max_batches);
  unclaimed_run x;
  x.ticket = runs.join(r, nullptr, {}, false);
  x.id = runs.start_runnable().at(0);
  auto p1 = page_of({"e1"});
  x.step = runs.on_page(x.id, p1);
  return x;
}

} // namespace

CAF_TEST(requests for one room and priority join one run) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a");
  auto r2 = request("!a");
  auto r3 = request("!a", 0, priority::high);
  auto first = runs.join(r1, nullptr, {});
  auto second = runs.join(r2, nullptr, {});
  auto other = runs.join(r3, nullptr, {});
  CAF_CHECK_NOT_EQUAL(first, second);
  // Two runs: (!a, normal) joined twice and (!a, high); one room runs one
  // run at a time, highest priority first.
  CAF_CHECK_EQUAL(runs.run_count(), 2u);
  CAF_CHECK_EQUAL(runs.stats().coalesced_joins, 1u);
  auto started = runs.start_runnable();
  CAF_REQUIRE_EQUAL(started.size(), 1u);
  auto page_request = runs.page_request(started[0]);
  CAF_REQUIRE(page_request);
  CAF_CHECK_EQUAL(page_request->first, "!a");
  CAF_CHECK(runs.state_of(other) == state::pending);
}

CAF_TEST(a caller joining a running run gets the events loaded since it joined) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a", 2);
  auto first = runs.join(r1, nullptr, {});
  auto id = runs.start_runnable().at(0);
  auto p1 = page_of({"e1", "e2"});
  auto step = runs.on_page(id, p1);
  CAF_CHECK(step.commit);
  CAF_CHECK(step.next_page);
  auto r2 = request("!a", 1);
  auto second = runs.join(r2, nullptr, {});
  CAF_CHECK(runs.on_commit(id, true));
  auto p2 = page_of({"e3", "e4"});
  step = runs.on_page(id, p2);
  // Both are done: the first after its two batches, the second after one.
  CAF_CHECK(step.commit);
  CAF_CHECK(!step.next_page);
  CAF_CHECK(!runs.on_commit(id, true));
  CAF_CHECK(runs.state_of(first) == state::done);
  CAF_CHECK_EQUAL(ids_of(runs.result(first)), (names{"e1", "e2", "e3", "e4"}));
  CAF_CHECK_EQUAL(ids_of(runs.result(second)), (names{"e3", "e4"}));
  CAF_CHECK(runs.result(second).reason == stop_reason::batch_limit_reached);
  CAF_CHECK_EQUAL(runs.run_count(), 0u);
}

CAF_TEST(each caller stops at its own condition while the run goes on) {
  backfill_runs runs{limits(), plenty};
  auto r1 = until_event("!a", "e2");
  auto r2 = request("!a");
  auto stops_early = runs.join(r1, nullptr, {});
  auto local_seen = 0;
  auto stops_locally = runs.join(
    r2,
    [&](const timeline_page& page) {
      local_seen += 1;
      return page.events.front().event_id == "e3";
    },
    {});
  auto r3 = request("!a");
  auto goes_on = runs.join(r3, nullptr, {});
  auto id = runs.start_runnable().at(0);
  auto p1 = page_of({"e1", "e2"});
  auto step = deliver(runs, id, p1);
  CAF_CHECK(step.next_page);
  CAF_CHECK(runs.state_of(stops_early) == state::done);
  CAF_CHECK(runs.result(stops_early).reason
            == stop_reason::stop_condition_met);
  CAF_CHECK(runs.state_of(stops_locally) == state::pending);
  auto p2 = page_of({"e3"});
  deliver(runs, id, p2);
  CAF_CHECK(runs.result(stops_locally).reason
            == stop_reason::stop_condition_met);
  CAF_CHECK_EQUAL(local_seen, 2);
  CAF_CHECK(runs.state_of(goes_on) == state::pending);
  timeline_page start;
  start.reached_start = true;
  auto step_end = runs.on_page(id, start);
  CAF_CHECK(!step_end.commit); // Nothing loaded: nothing to commit.
  CAF_CHECK(!step_end.next_page);
  CAF_CHECK(runs.result(goes_on).reason == stop_reason::reached_timeline_start);
  CAF_CHECK_EQUAL(ids_of(runs.result(goes_on)), (names{"e1", "e2", "e3"}));
}

CAF_TEST(a queued run whose last caller leaves ends without paging) {
  backfill_runs runs{limits(1), plenty};
  auto busy = request("!busy");
  runs.join(busy, nullptr, {});
  CAF_CHECK_EQUAL(runs.start_runnable().size(), 1u);
  auto r1 = request("!a");
  auto r2 = request("!a");
  auto first = runs.join(r1, nullptr, {});
  auto second = runs.join(r2, nullptr, {});
  CAF_CHECK(runs.withdraw(first));
  CAF_CHECK_EQUAL(runs.run_count(), 2u); // The second still needs it.
  CAF_CHECK(runs.withdraw(second));
  CAF_CHECK_EQUAL(runs.run_count(), 1u);
  CAF_CHECK(runs.result(second).reason == stop_reason::cancelled);
  CAF_CHECK_EQUAL(finished(runs, stop_reason::cancelled), 1u);
  CAF_CHECK_EQUAL(queued(runs, priority::normal), 0u);
}

CAF_TEST(a detached caller keeps its run although it is withdrawn) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a", 1);
  auto ticket = runs.join(r1, nullptr, {});
  CAF_CHECK(runs.detach(ticket));
  runs.withdraw(ticket);
  CAF_CHECK(runs.state_of(ticket) == state::pending);
  auto id = runs.start_runnable().at(0);
  auto p1 = page_of({"e1"});
  deliver(runs, id, p1);
  CAF_CHECK(runs.result(ticket).reason == stop_reason::batch_limit_reached);
}

CAF_TEST(a running run whose callers all left ends with its page uncommitted and a fresh run waits behind it) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a");
  auto first = runs.join(r1, nullptr, {});
  auto id = runs.start_runnable().at(0);
  runs.withdraw(first);
  CAF_CHECK_EQUAL(runs.run_count(), 1u); // At the pager: ends with its page.
  auto r2 = request("!a");
  auto r3 = request("!a");
  auto later = runs.join(r2, nullptr, {});
  auto joins_fresh = runs.join(r3, nullptr, {});
  CAF_CHECK_EQUAL(runs.run_count(), 2u);
  CAF_CHECK(runs.start_runnable().empty()); // Deferred behind the cancelled.
  auto p1 = page_of({"e1"});
  auto step = runs.on_page(id, p1);
  CAF_CHECK(!step.commit);
  CAF_CHECK(!step.next_page);
  auto fresh = runs.start_runnable();
  CAF_REQUIRE_EQUAL(fresh.size(), 1u);
  CAF_CHECK_NOT_EQUAL(fresh[0], id);
  auto p2 = page_of({"e1"});
  runs.on_page(fresh[0], p2);
  CAF_CHECK(runs.state_of(later) == state::pending);
  CAF_CHECK(runs.state_of(joins_fresh) == state::pending);
  CAF_CHECK_EQUAL(finished(runs, stop_reason::cancelled), 1u);
}

CAF_TEST(a queue full of runs refuses a new run but not a join) {
  backfill_runs runs{limits(0, 1), plenty};
  auto r1 = request("!a");
  auto r2 = request("!b");
  auto r3 = request("!a");
  CAF_CHECK_NOT_EQUAL(runs.join(r1, nullptr, {}), 0u);
  CAF_CHECK_EQUAL(runs.join(r2, nullptr, {}), 0u);
  CAF_CHECK_NOT_EQUAL(runs.join(r3, nullptr, {}), 0u);
}

CAF_TEST(a failed page or commit fails the run for every caller) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a");
  auto r2 = request("!b");
  auto a = runs.join(r1, nullptr, {});
  auto b = runs.join(r2, nullptr, {});
  auto started = runs.start_runnable();
  CAF_REQUIRE_EQUAL(started.size(), 2u);
  runs.on_page_failed(started[0]);
  auto p1 = page_of({"e1"});
  CAF_CHECK(runs.on_page(started[1], p1).next_page);
  CAF_CHECK(!runs.on_commit(started[1], false));
  CAF_CHECK(runs.result(a).reason == stop_reason::failed);
  CAF_CHECK(runs.result(b).reason == stop_reason::failed);
  CAF_CHECK_EQUAL(finished(runs, stop_reason::failed), 2u);
}

CAF_TEST(a parked await gets its answer when the part ends) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a", 1);
  auto r2 = request("!a", 1);
  auto awaited = runs.join(r1, nullptr, {});
  auto not_awaited = runs.join(r2, nullptr, {});
  runs.await_parked(awaited);
  auto id = runs.start_runnable().at(0);
  CAF_CHECK(runs.take_answers().empty());
  auto p1 = page_of({"e1"});
  deliver(runs, id, p1);
  auto answers = runs.take_answers();
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK_EQUAL(answers[0].first, awaited);
  CAF_CHECK_EQUAL(ids_of(answers[0].second), (names{"e1"}));
  CAF_CHECK(runs.take_answers().empty());
  CAF_CHECK(runs.state_of(not_awaited) == state::done);
  auto ended = runs.take_ended();
  CAF_REQUIRE_EQUAL(ended.size(), 1u);
  CAF_CHECK(ended[0].reason == stop_reason::batch_limit_reached);
}

CAF_TEST(a part that ends with a delivered page is answered once its commit is) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a", 1);
  auto r2 = request("!a", 2);
  auto ends = runs.join(r1, nullptr, {});
  auto goes_on = runs.join(r2, nullptr, {});
  runs.await_parked(ends);
  auto id = runs.start_runnable().at(0);
  auto p1 = page_of({"e1"});
  auto step = runs.on_page(id, p1);
  CAF_CHECK(step.commit);
  CAF_CHECK(step.next_page);
  // Its position is not durable yet: no answer, still pending, and a
  // withdraw (cancel, death) cannot change how it ends.
  CAF_CHECK(runs.take_answers().empty());
  CAF_CHECK(runs.state_of(ends) == state::pending);
  CAF_CHECK(runs.withdraw(ends));
  CAF_CHECK(runs.on_commit(id, true));
  auto answers = runs.take_answers();
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK_EQUAL(answers[0].first, ends);
  CAF_CHECK(answers[0].second.reason == stop_reason::batch_limit_reached);
  CAF_CHECK_EQUAL(ids_of(answers[0].second), (names{"e1"}));
  CAF_CHECK(runs.state_of(goes_on) == state::pending);
}

CAF_TEST(a part that ends with a page whose commit fails ends failed) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a", 1);
  auto ticket = runs.join(r1, nullptr, {});
  auto id = runs.start_runnable().at(0);
  auto p1 = page_of({"e1"});
  auto step = runs.on_page(id, p1);
  CAF_CHECK(step.commit);
  CAF_CHECK(!step.next_page);
  CAF_CHECK(runs.state_of(ticket) == state::pending);
  CAF_CHECK(!runs.on_commit(id, false));
  CAF_CHECK(runs.result(ticket).reason == stop_reason::failed);
}

CAF_TEST(shutting down answers the parts that wait for a commit cancelled) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a", 1);
  auto ticket = runs.join(r1, nullptr, {});
  runs.await_parked(ticket);
  auto id = runs.start_runnable().at(0);
  auto p1 = page_of({"e1"});
  runs.on_page(id, p1);
  runs.shut_down();
  auto answers = runs.take_answers();
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK(answers[0].second.reason == stop_reason::cancelled);
}

CAF_TEST(kept results stay within their byte budget and the oldest go first) {
  auto event_bytes = held_bytes(timeline_event{"e1", "m", 1, "body"});
  // Room for two results of one event each, not three.
  auto budget = 2 * (event_bytes + result_bookkeeping_bytes) + 1;
  backfill_runs runs{limits(), budget};
  std::vector<uint64_t> tickets;
  for (auto room : {"!a", "!b", "!c"}) {
    auto r = request(room, 1);
    auto ticket = runs.join(r, nullptr, {});
    tickets.push_back(ticket);
    auto id = runs.start_runnable().at(0);
    auto p = page_of({"e1"});
    deliver(runs, id, p);
  }
  CAF_CHECK(runs.state_of(tickets[0]) == state::forgotten);
  CAF_CHECK(runs.state_of(tickets[1]) == state::done);
  CAF_CHECK(runs.state_of(tickets[2]) == state::done);
  CAF_CHECK(runs.state_of(999) == state::never_issued);
  CAF_CHECK_EQUAL(runs.results_kept(), 2u);
  CAF_CHECK_EQUAL(runs.results_bytes(),
                  2 * (event_bytes + result_bookkeeping_bytes));
  CAF_CHECK_EQUAL(runs.stats().results_forgotten, 1u);
  CAF_CHECK_EQUAL(runs.stats().events_bytes_held, 2 * event_bytes);
}

CAF_TEST(results sharing a page count its bytes once) {
  auto event_bytes = held_bytes(timeline_event{"e1", "m", 1, "body"});
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a", 1);
  auto r2 = request("!a", 1);
  runs.join(r1, nullptr, {});
  runs.join(r2, nullptr, {});
  auto id = runs.start_runnable().at(0);
  auto p = page_of({"e1"});
  deliver(runs, id, p);
  CAF_CHECK_EQUAL(runs.results_kept(), 2u);
  CAF_CHECK_EQUAL(runs.results_bytes(),
                  event_bytes + 2 * result_bookkeeping_bytes);
}

CAF_TEST(a parked await is answered even when its result is forgotten at once) {
  backfill_runs runs{limits(), 0};
  auto r = request("!a", 1);
  auto ticket = runs.join(r, nullptr, {});
  runs.await_parked(ticket);
  auto id = runs.start_runnable().at(0);
  auto p = page_of({"e1"});
  deliver(runs, id, p);
  auto answers = runs.take_answers();
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK_EQUAL(ids_of(answers[0].second), (names{"e1"}));
  CAF_CHECK(runs.state_of(ticket) == state::forgotten);
}

CAF_TEST(shutting down cancels every caller and refuses later joins) {
  backfill_runs runs{limits(1), plenty};
  auto r1 = request("!a");
  auto r2 = request("!b");
  auto running = runs.join(r1, nullptr, {});
  auto queued = runs.join(r2, nullptr, {});
  auto id = runs.start_runnable().at(0);
  CAF_CHECK_EQUAL(runs.shut_down(), 2u);
  CAF_CHECK(runs.is_shut_down());
  CAF_CHECK(runs.result(running).reason == stop_reason::cancelled);
  CAF_CHECK(runs.result(queued).reason == stop_reason::cancelled);
  auto late = page_of({"e1"});
  auto step = runs.on_page(id, late);
  CAF_CHECK(!step.commit); // Never delivered, so never committed.
  auto r3 = request("!c");
  CAF_CHECK_EQUAL(runs.join(r3, nullptr, {}), 0u);
  CAF_CHECK_EQUAL(runs.stats().running, 0u);
}

CAF_TEST(a dead caller withdraws every ticket it holds) {
  backfill_runs runs{limits(), plenty};
  // Real addresses need actors; an address-less caller stands for "all the
  // tickets of one source" just as well.
  auto r1 = request("!a");
  auto r2 = request("!b");
  auto a = runs.join(r1, nullptr, {});
  auto b = runs.join(r2, nullptr, {});
  runs.withdraw_all_of(caf::actor_addr{});
  CAF_CHECK(runs.result(a).reason == stop_reason::cancelled);
  CAF_CHECK(runs.result(b).reason == stop_reason::cancelled);
  CAF_CHECK_EQUAL(runs.run_count(), 0u);
}

// -- claims: callers whose enqueue answer may have been lost -------------------

CAF_TEST(a page no caller claimed is held until one of its callers claims) {
  backfill_runs runs{limits(), plenty};
  auto [ticket, id, step] = one_page_unclaimed(runs, 1);
  CAF_CHECK(step.held);
  CAF_CHECK(!step.commit);
  CAF_CHECK(!step.next_page);
  CAF_CHECK(runs.state_of(ticket) == state::pending);
  auto claimed = runs.claim(ticket);
  CAF_REQUIRE(claimed.has_value());
  CAF_CHECK_EQUAL(*claimed, id);
  CAF_CHECK(!runs.claim(ticket)); // Once.
  CAF_CHECK(!runs.on_commit(id, true));
  CAF_CHECK(runs.result(ticket).reason == stop_reason::batch_limit_reached);
  CAF_CHECK_EQUAL(ids_of(runs.result(ticket)), (names{"e1"}));
}

CAF_TEST(a run goes on past a held page only once it is claimed) {
  backfill_runs runs{limits(), plenty};
  auto [ticket, id, step] = one_page_unclaimed(runs, 2);
  CAF_CHECK(step.held);
  CAF_CHECK(step.next_page); // After the commit, which waits for the claim.
  CAF_CHECK_EQUAL(runs.stats().running, 1u);
  CAF_CHECK(runs.claim(ticket) == std::optional<uint64_t>{id});
  CAF_CHECK(runs.on_commit(id, true));
}

CAF_TEST(one claimed caller lets a shared page be committed) {
  backfill_runs runs{limits(), plenty};
  auto r1 = request("!a", 1);
  auto r2 = request("!a", 1);
  runs.join(r1, nullptr, {}, false);
  runs.join(r2, nullptr, {}, true);
  auto id = runs.start_runnable().at(0);
  auto p1 = page_of({"e1"});
  auto step = runs.on_page(id, p1);
  CAF_CHECK(step.commit);
  CAF_CHECK(!step.held);
}

CAF_TEST(a caller that joined after a held page cannot claim its commit) {
  backfill_runs runs{limits(), plenty};
  auto [first, id, step] = one_page_unclaimed(runs, 2);
  CAF_CHECK(step.held);
  auto r2 = request("!a", 1);
  auto later = runs.join(r2, nullptr, {}, false);
  CAF_CHECK(!runs.claim(later)); // Its part starts after e1.
  CAF_CHECK(runs.claim(first) == std::optional<uint64_t>{id});
}

CAF_TEST(a held page nobody claims in time is not committed and its parts end cancelled) {
  backfill_runs runs{limits(), plenty};
  auto [ticket, id, step] = one_page_unclaimed(runs, 1);
  CAF_CHECK(step.held);
  CAF_CHECK(runs.on_claim_deadline(id));
  CAF_CHECK(!runs.on_claim_deadline(id));
  CAF_CHECK(runs.result(ticket).reason == stop_reason::cancelled);
  CAF_CHECK_EQUAL(ids_of(runs.result(ticket)), (names{"e1"}));
  CAF_CHECK(!runs.claim(ticket)); // Too late: nothing is committed for it.
  CAF_CHECK_EQUAL(runs.run_count(), 0u);
  // The room is free for a run that loads e1 again.
  auto r2 = request("!a", 1);
  runs.join(r2, nullptr, {});
  CAF_CHECK_EQUAL(runs.start_runnable().size(), 1u);
}

CAF_TEST(a held run whose callers all left ends without its commit) {
  backfill_runs runs{limits(), plenty};
  auto [ticket, id, step] = one_page_unclaimed(runs, 2);
  CAF_CHECK(step.held);
  CAF_CHECK(runs.withdraw(ticket));
  CAF_CHECK(runs.result(ticket).reason == stop_reason::cancelled);
  CAF_CHECK_EQUAL(runs.run_count(), 0u);
  CAF_CHECK(!runs.on_claim_deadline(id));
  CAF_CHECK_EQUAL(finished(runs, stop_reason::cancelled), 1u);
}

CAF_TEST(a part that ended with a held page ends cancelled when its caller leaves) {
  backfill_runs runs{limits(), plenty};
  auto [ticket, id, step] = one_page_unclaimed(runs, 1);
  CAF_CHECK(step.held);
  CAF_CHECK(runs.state_of(ticket) == state::pending);
  CAF_CHECK(runs.withdraw(ticket));
  CAF_CHECK(runs.result(ticket).reason == stop_reason::cancelled);
  CAF_CHECK(!runs.on_claim_deadline(id));
}
