#define CAF_SUITE node.serving_lists
#include <caf/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <coalesce/messages/errc.hpp>
#include <coalesce/node/key_release.hpp>
#include <coalesce/node/pause_watch.hpp>
#include <coalesce/node/serving_lists.hpp>

using namespace coalesce;
using namespace std::chrono_literals;

namespace {

using clock_type = serving_lists::clock;

const std::vector<std::string> own_list{"127.0.0.1:4301", "127.0.0.1:4302",
                                        "127.0.0.1:4303"};
/// `own_list` with a fourth node: the list after one joined.
const std::vector<std::string> grown_list{"127.0.0.1:4301", "127.0.0.1:4302",
                                          "127.0.0.1:4303", "127.0.0.1:4304"};

cluster_map parsed(const std::vector<std::string>& nodes) {
  cluster_map result;
  CAF_REQUIRE(!cluster_map::parse(nodes, "test", result));
  return result;
}

/// A view over two peers that tells time by `now`, which the test moves.
struct fixture {
  clock_type::time_point now = clock_type::now();
  serving_lists lists{2, 10s, [this] { return now; }};

  void both_answer() {
    lists.peer_serves(0, own_list, false);
    lists.peer_serves(1, own_list, false);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(serving_lists_tests, fixture)

CAF_TEST(a view goes stale once a peer went unasked longer than it allows) {
  both_answer();
  now += 10s;
  CAF_CHECK(!lists.stale());
  now += 1s;
  CAF_CHECK(lists.stale());
  // Every peer must be asked again, not one.
  lists.peer_serves(0, own_list, false);
  CAF_CHECK(lists.stale());
  lists.peer_serves(1, own_list, false);
  CAF_CHECK(!lists.stale());
}

CAF_TEST(an answer to an ask made before a pause leaves the view stale) {
  // Its peer answered before this node paused; the answer is read on
  // waking, when the lists may have changed.
  both_answer();
  auto asked_at = now;
  now += 1h;
  lists.peer_serves(0, own_list, false, asked_at);
  lists.peer_unanswered(1, asked_at);
  CAF_CHECK(lists.stale());
}

CAF_TEST(an answer ending after a later one keeps the later ask) {
  both_answer();
  auto early = now;
  now += 8s;
  lists.peer_serves(0, own_list, false);
  lists.peer_serves(1, own_list, false);
  lists.peer_serves(0, own_list, false, early);
  now += 5s;
  CAF_CHECK(!lists.stale());
}

CAF_TEST(a peer whose pings keep failing keeps the view fresh) {
  // A peer that is down tells nothing of its list, but that this node
  // asked it, and was running to see the ask fail.
  lists.peer_serves(0, own_list, false);
  lists.peer_unanswered(1);
  now += 20s;
  lists.peer_serves(0, own_list, false);
  lists.peer_unanswered(1);
  CAF_CHECK(!lists.stale());
}

CAF_TEST(a lost connection makes the view no fresher) {
  // Noticed on waking, a peer's restart under another list looks the
  // same.
  both_answer();
  now += 1h;
  lists.peer_lost(0);
  lists.peer_lost(1);
  CAF_CHECK(lists.stale());
}

// What waits for the view to settle or to be fresh again (the peer
// watch's tests) is told of every recorded end of an ask, after the view
// changed and outside its lock, so that it can read the view.
CAF_TEST(each recorded end of an ask is told after the view changed) {
  std::vector<bool> settled_when_told;
  lists.on_heard([&] {
    settled_when_told.push_back(lists.current()->settled);
  });
  lists.peer_unanswered(0);
  lists.peer_serves(1, own_list, false);
  lists.peer_lost(0);
  // A peer past the view's count is no ask of it.
  lists.peer_serves(2, own_list, false);
  CAF_CHECK_EQUAL(settled_when_told, (std::vector<bool>{false, true, true}));
}

CAF_TEST(a peer asked again under the same list changes no generation) {
  // Every ping answers; were each a new generation, every request under
  // way would be answered no_quorum.
  both_answer();
  auto generation = lists.current()->generation;
  now += 1s;
  lists.peer_serves(0, own_list, false);
  lists.peer_unanswered(1);
  CAF_CHECK_EQUAL(lists.current()->generation, generation);
}

CAF_TEST(a node that woke is stale until every peer was asked since however short its pause) {
  // Its peers may have changed lists in a pause shorter than the silence
  // the view allows: only asks made after waking tell what they serve now.
  both_answer();
  auto asked_before = now;
  now += 1s;
  lists.woke(now);
  CAF_CHECK(lists.stale());
  CAF_CHECK_EQUAL(lists.staleness(), "was paused and has not heard from "
                                     "every peer since it woke");
  lists.peer_serves(0, own_list, false, asked_before);
  lists.peer_unanswered(1, asked_before);
  CAF_CHECK(lists.stale());
  lists.peer_serves(0, own_list, false, now);
  CAF_CHECK(lists.stale());
  lists.peer_unanswered(1, now);
  CAF_CHECK(!lists.stale());
}

CAF_TEST(a silence longer than the view allows says how long) {
  both_answer();
  now += 11s;
  CAF_CHECK_EQUAL(lists.staleness(), "has not heard from every peer within "
                                     "10s (was it paused?)");
}

CAF_TEST(a continued process makes the view stale at once) {
  both_answer();
  pause_watch pauses{std::shared_ptr<serving_lists>(&lists, [](auto*) {}),
                     now};
  now += 100ms;
  pauses.continued(now);
  CAF_CHECK(lists.stale());
  both_answer();
  CAF_CHECK(!lists.stale());
}

CAF_TEST(a gap of more than a second between two ticks of the main loop makes the view stale) {
  both_answer();
  pause_watch pauses{std::shared_ptr<serving_lists>(&lists, [](auto*) {}),
                     now};
  for (int i = 0; i < 8; ++i) {
    now += pause_watch::tick_interval;
    pauses.tick(now);
  }
  now += 1s;
  pauses.tick(now);
  CAF_CHECK(!lists.stale());
  now += 1s + 1ms;
  pauses.tick(now);
  CAF_CHECK(lists.stale());
  both_answer();
  CAF_CHECK(!lists.stale());
}

CAF_TEST(a node whose main loop has not run for over a second is stale before the loop can tell) {
  // Its coordinators may run before its main loop does after a pause: the
  // loop's silence alone makes the view stale.
  both_answer();
  pause_watch pauses{std::shared_ptr<serving_lists>(&lists, [](auto*) {}),
                     now};
  now += pause_watch::longest_stall;
  CAF_CHECK(!lists.stale());
  now += 1ms;
  CAF_CHECK(lists.stale());
  CAF_CHECK_EQUAL(lists.staleness(), "has not run its main loop for over "
                                     "1000 ms (was it paused?)");
  // The loop's next tick tells it that it woke: stale until the peers
  // answered again.
  pauses.tick(now);
  CAF_CHECK(lists.stale());
  both_answer();
  CAF_CHECK(!lists.stale());
}

CAF_TEST(a paused node drops no key it lost until it hears its peers again) {
  // Its peers may have moved on to another list while it slept: the keys
  // it lost may not be held by their new replicas yet.
  both_answer();
  CAF_CHECK(may_release(false, &lists));
  now += 1h;
  CAF_CHECK(!may_release(false, &lists));
  both_answer();
  CAF_CHECK(may_release(false, &lists));
}

CAF_TEST(a list a refusal named is counted until refusals stop naming it) {
  both_answer();
  auto before = lists.current()->generation;
  auto added = lists.lists_named({grown_list});
  CAF_CHECK_EQUAL(added.size(), 1u);
  auto view = lists.current();
  CAF_CHECK_EQUAL(view->generation, before + 1);
  CAF_REQUIRE_EQUAL(view->others.size(), 1u);
  CAF_CHECK(view->others[0].nodes() == parsed(grown_list).nodes());
  // Named, not served: this node refuses no coordinator for it.
  CAF_CHECK(view->served.empty());
  // Named again, it counts from then on, and is no new list.
  now += 8s;
  CAF_CHECK(lists.lists_named({grown_list}).empty());
  CAF_CHECK_EQUAL(lists.current()->generation, before + 1);
  now += 8s;
  CAF_CHECK_EQUAL(lists.current()->others.size(), 1u);
  now += 3s;
  view = lists.current();
  CAF_CHECK(view->others.empty());
  CAF_CHECK_EQUAL(view->generation, before + 2);
}

CAF_TEST(a list a peer serves is one a replica refuses coordinators for) {
  both_answer();
  lists.lists_named({grown_list});
  auto generation = lists.current()->generation;
  // The named list is served now: counted as before, refused from now on.
  lists.peer_serves(0, grown_list, true);
  auto view = lists.current();
  CAF_CHECK_EQUAL(view->generation, generation);
  CAF_CHECK_EQUAL(view->others.size(), 1u);
  CAF_REQUIRE_EQUAL(view->served.size(), 1u);
  auto own = parsed(own_list);
  auto grown = parsed(grown_list);
  auto refusal = refuse_uncounted(own, own.fingerprint(), *view,
                                  list_stamp{{own.fingerprint()}});
  CAF_REQUIRE(refusal);
  CAF_CHECK_EQUAL(refusal->code(),
                  static_cast<uint8_t>(errc::lists_not_counted));
  auto named = uncounted_lists_of(*refusal);
  CAF_REQUIRE(named);
  CAF_CHECK(*named == (std::vector<std::vector<std::string>>{own_list,
                                                              grown_list}));
  // The stamp of a coordinator that counted both, in any order, passes;
  // one that lacks this node's own list does not.
  CAF_CHECK(!refuse_uncounted(
    own, own.fingerprint(), *view,
    list_stamp{{grown.fingerprint(), own.fingerprint()}}));
  CAF_CHECK(refuse_uncounted(own, own.fingerprint(), *view,
                             list_stamp{{grown.fingerprint()}}));
  // What a coordinator of this node stamps: both.
  auto stamp = stamp_of(own, view.get());
  CAF_CHECK(!refuse_uncounted(own, own.fingerprint(), *view, stamp));
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST(a view made without a silence limit never goes stale) {
  auto now = clock_type::now();
  serving_lists lists{2, clock_type::duration::zero(), [&] { return now; }};
  lists.peer_serves(0, own_list, false);
  lists.peer_serves(1, own_list, false);
  now += 1000h;
  CAF_CHECK(!lists.stale());
}
