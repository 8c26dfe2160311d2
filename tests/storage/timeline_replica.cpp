#define CAF_SUITE storage.timeline_replica
#include <caf/test/unit_test.hpp>

#include <coalesce/storage/timeline_replica.hpp>

#include <memory>
#include <string>
#include <vector>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/timeline.hpp>

#include "error_codes.hpp"
#include "temp_dir.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;

namespace {

constexpr auto applied = replica_outcome::applied;
constexpr auto out_of_sync = replica_outcome::out_of_sync;
constexpr auto preempted = replica_outcome::preempted;

timeline_event event(const std::string& id) {
  return timeline_event{id, "m.room.message", 1, "body of " + id};
}

std::vector<timeline_event> events(const std::string& prefix, int n) {
  std::vector<timeline_event> result;
  for (int i = 0; i < n; ++i)
    result.push_back(event(prefix + std::to_string(i)));
  return result;
}

/// The part a coordinator of `ballot` sends when it appends `xs` to a log
/// of `segments` and `from` events.
room_suffix part(std::vector<timeline_segment> segments, uint64_t from,
                 std::vector<timeline_event> xs, uint64_t ballot) {
  if (!xs.empty() && last_ballot(segments) != ballot)
    segments.push_back(timeline_segment{ballot, from});
  room_suffix result;
  result.room = "!r";
  result.segments = std::move(segments);
  result.from = from;
  result.events = std::move(xs);
  return result;
}

struct fixture {
  temp_dir dir;
  std::shared_ptr<database> db;

  fixture() {
    auto opened = database::open({dir.sub("db"), durability::synced});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
  }

  room_answer prepare(uint64_t ballot) {
    auto answer = room_replica_prepare(*db, "!r", ballot);
    CAF_REQUIRE(answer.engaged());
    return *answer;
  }

  room_answer append(uint64_t ballot, const room_suffix& x) {
    auto answer = room_replica_append(*db, ballot, x);
    CAF_REQUIRE(answer.engaged());
    return *answer;
  }

  room_suffix image(uint64_t from) {
    auto x = room_replica_image(*db, "!r", from);
    CAF_REQUIRE(x.engaged());
    return *x;
  }

  std::vector<std::string> ids() {
    std::vector<std::string> result;
    for (const auto& x : image(0).events)
      result.push_back(x.event_id);
    return result;
  }
};

} // namespace

CAF_TEST(shared_prefix_ends_where_two_logs_segments_part) {
  std::vector<timeline_segment> a{{0, 0}, {5, 10}};
  std::vector<timeline_segment> b{{0, 0}, {7, 10}};
  std::vector<timeline_segment> c{{0, 0}, {5, 10}, {9, 14}};
  CAF_CHECK_EQUAL(shared_prefix(a, 12, b, 12), 10u);
  CAF_CHECK_EQUAL(shared_prefix(a, 12, a, 15), 12u);
  CAF_CHECK_EQUAL(shared_prefix(a, 16, c, 20), 14u);
  CAF_CHECK_EQUAL(shared_prefix({}, 0, a, 12), 0u);
  CAF_CHECK_EQUAL(shared_prefix({{1, 0}}, 3, {{2, 0}}, 3), 0u);
  CAF_CHECK(newer_log(b, 11, a, 12));
  CAF_CHECK(newer_log(a, 13, a, 12));
  CAF_CHECK(!newer_log(a, 12, a, 12));
}

CAF_TEST_FIXTURE_SCOPE(timeline_replica_tests, fixture)

CAF_TEST(a_prepare_promises_and_refuses_a_lower_ballot) {
  CAF_CHECK(outcome_of(prepare(10)) == applied);
  CAF_CHECK_EQUAL(prepare(10).version.promised, 10u);
  auto refused = prepare(9);
  CAF_CHECK(outcome_of(refused) == preempted);
  CAF_CHECK_EQUAL(refused.version.promised, 10u);
  auto below = append(9, part({}, 0, events("e", 2), 9));
  CAF_CHECK(outcome_of(below) == preempted);
  CAF_CHECK_EQUAL(below.version.head, 0u);
}

CAF_TEST(appends_build_on_the_log_and_keep_their_order) {
  auto first = append(10, part({}, 0, events("a", 3), 10));
  CAF_REQUIRE(outcome_of(first) == applied);
  CAF_CHECK_EQUAL(first.version.head, 3u);
  CAF_CHECK_EQUAL(first.version.promised, 10u);
  auto second = append(10, part(first.version.segments, 3, events("b", 2), 10));
  CAF_REQUIRE(outcome_of(second) == applied);
  CAF_CHECK_EQUAL(second.version.segments.size(), 1u);
  CAF_CHECK_EQUAL(ids(), (std::vector<std::string>{"a0", "a1", "a2", "b0",
                                                    "b1"}));
  // The same part again (a copy that was retried) changes nothing.
  auto again = append(10, part(first.version.segments, 3, events("b", 2), 10));
  CAF_CHECK(outcome_of(again) == applied);
  CAF_CHECK_EQUAL(again.version.head, 5u);
  // An older copy of the first part does not cut off the later events.
  auto late = append(10, part({}, 0, events("a", 3), 10));
  CAF_CHECK(outcome_of(late) == applied);
  CAF_CHECK_EQUAL(ids().size(), 5u);
}

CAF_TEST(a_part_beyond_the_log_is_out_of_sync_and_changes_nothing) {
  append(10, part({}, 0, events("a", 2), 10));
  auto gap = append(10, part({{10, 0}}, 4, events("c", 1), 10));
  CAF_CHECK(outcome_of(gap) == out_of_sync);
  CAF_CHECK_EQUAL(gap.version.head, 2u);
  CAF_CHECK_EQUAL(ids().size(), 2u);
}

CAF_TEST(a_newer_coordinators_log_replaces_events_no_majority_took) {
  // Ballot 10 appended a0..a2, then a3 reached this replica only.
  append(10, part({}, 0, events("a", 3), 10));
  append(10, part({{10, 0}}, 3, {event("lost")}, 10));
  // Ballot 20 adopted a0..a2 from a majority and appended x0, x1.
  auto theirs = part({{10, 0}}, 3, events("x", 2), 20);
  auto answer = append(20, theirs);
  CAF_REQUIRE(outcome_of(answer) == applied);
  CAF_CHECK_EQUAL(ids(), (std::vector<std::string>{"a0", "a1", "a2", "x0",
                                                    "x1"}));
  CAF_CHECK_EQUAL(answer.version.head, 5u);
  CAF_CHECK_EQUAL(answer.version.segments.size(), 2u);
}

CAF_TEST(a_diverging_replica_is_out_of_sync_until_sent_the_part_it_lacks) {
  append(10, part({}, 0, events("a", 2), 10));
  append(10, part({{10, 0}}, 2, {event("lost")}, 10));
  // Ballot 20's log: a0, a1, y0 (from 2), then z0 at 3.
  std::vector<timeline_segment> theirs{{10, 0}, {20, 2}};
  auto next = part(theirs, 3, {event("z0")}, 20);
  CAF_CHECK(outcome_of(append(20, next)) == out_of_sync);
  auto from = shared_prefix(image(0).segments, 3, theirs, 4);
  CAF_CHECK_EQUAL(from, 2u);
  auto whole = part(theirs, from, {event("y0"), event("z0")}, 20);
  CAF_CHECK(outcome_of(append(20, whole)) == applied);
  CAF_CHECK_EQUAL(ids(), (std::vector<std::string>{"a0", "a1", "y0", "z0"}));
}

CAF_TEST(the_position_only_moves_back) {
  auto x = part({}, 0, events("a", 6), 10);
  x.positioned = true;
  x.position = 4;
  auto answer = append(10, x);
  CAF_CHECK(answer.version.positioned);
  CAF_CHECK_EQUAL(answer.version.position, 4u);
  auto later = part(answer.version.segments, 6, {}, 10);
  later.positioned = true;
  later.position = 5; // a commit that arrives after a further one
  CAF_CHECK_EQUAL(append(10, later).version.position, 4u);
  later.position = 2;
  CAF_CHECK_EQUAL(append(10, later).version.position, 2u);
  // The storage functions page from it.
  auto page = page_backwards(*db, "!r", 10);
  CAF_REQUIRE(page.engaged());
  CAF_CHECK_EQUAL(page->events.size(), 2u);
  CAF_CHECK_EQUAL(page->cursor.read_at, 2u);
}

CAF_TEST(malformed_parts_are_refused_before_anything_is_written) {
  auto no_segments = part({}, 0, {}, 10);
  no_segments.events = events("a", 1);
  CAF_CHECK_EQUAL(code_of(room_replica_append(*db, 10, no_segments).error()),
                  code(errc::invalid_request));
  auto empty_segment = part({{10, 0}, {11, 1}}, 0, events("a", 1), 11);
  empty_segment.segments = {{10, 0}, {11, 1}};
  CAF_CHECK_EQUAL(code_of(room_replica_append(*db, 11, empty_segment).error()),
                  code(errc::invalid_request));
  auto far = part({}, 0, events("a", 1), 10);
  far.positioned = true;
  far.position = 9;
  CAF_CHECK_EQUAL(code_of(room_replica_append(*db, 10, far).error()),
                  code(errc::invalid_request));
  auto unnamed = part({}, 0, {event("")}, 10);
  CAF_CHECK_EQUAL(code_of(room_replica_append(*db, 10, unnamed).error()),
                  code(errc::invalid_request));
  CAF_CHECK_EQUAL(image(0).events.size(), 0u);
  CAF_CHECK_EQUAL(prepare(1).version.promised, 1u);
}

CAF_TEST(events_appended_without_replicas_form_one_segment) {
  CAF_REQUIRE(!append_events(*db, "!r", events("old", 3)));
  auto version = room_replica_version(*db, "!r");
  CAF_REQUIRE(version.engaged());
  CAF_CHECK_EQUAL(version->head, 3u);
  CAF_REQUIRE_EQUAL(version->segments.size(), 1u);
  CAF_CHECK_EQUAL(version->segments[0].ballot, 0u);
  auto next = part(version->segments, 3, events("new", 1), 10);
  CAF_CHECK(outcome_of(append(10, next)) == applied);
  CAF_CHECK_EQUAL(ids().size(), 4u);
}

CAF_TEST(a_repair_takes_only_a_newer_log_but_always_the_promise_and_position) {
  append(20, part({}, 0, events("a", 4), 20));
  // An older, longer log: not taken, but its promise and position are.
  auto older = part({{10, 0}}, 0, events("o", 6), 10);
  older.segments = {{10, 0}};
  older.positioned = true;
  older.position = 3;
  auto answer = room_replica_repair(*db, older, 30);
  CAF_REQUIRE(answer.engaged());
  CAF_CHECK(outcome_of(*answer) == applied);
  CAF_CHECK_EQUAL(answer->version.head, 4u);
  CAF_CHECK_EQUAL(answer->version.promised, 30u);
  CAF_CHECK_EQUAL(answer->version.position, 3u);
  auto kept = ids();
  CAF_CHECK_EQUAL(kept.front(), "a0");
  // A newer one is.
  auto newer = part({{20, 0}}, 4, events("n", 2), 25);
  auto taken = room_replica_repair(*db, newer, 0);
  CAF_REQUIRE(taken.engaged());
  CAF_CHECK_EQUAL(taken->version.head, 6u);
  CAF_CHECK_EQUAL(taken->version.promised, 30u);
  // A newer one that does not build on this log changes nothing.
  auto gap = part({{20, 0}, {25, 4}, {40, 6}}, 7, events("g", 1), 40);
  auto refused = room_replica_repair(*db, gap, 0);
  CAF_REQUIRE(refused.engaged());
  CAF_CHECK(outcome_of(*refused) == out_of_sync);
  CAF_CHECK_EQUAL(ids().size(), 6u);
}

CAF_TEST(the_replica_state_survives_a_reopen_and_a_scan_lists_every_room) {
  append(10, part({}, 0, events("a", 2), 10));
  CAF_REQUIRE(room_replica_prepare(*db, "!other", 7).engaged());
  auto path = dir.sub("db");
  db.reset();
  auto opened = database::open({path, durability::synced});
  CAF_REQUIRE(opened.engaged());
  db = std::move(*opened);
  std::vector<room_listing> rooms;
  CAF_REQUIRE(!scan_room_versions(*db, [&](room_listing&& x) {
    rooms.push_back(std::move(x));
  }));
  CAF_REQUIRE_EQUAL(rooms.size(), 2u);
  // Keys start with the room's length: the shorter name comes first.
  std::swap(rooms[0], rooms[1]);
  CAF_CHECK_EQUAL(rooms[0].room, "!other");
  CAF_CHECK_EQUAL(rooms[0].version.promised, 7u);
  CAF_CHECK_EQUAL(rooms[1].room, "!r");
  CAF_CHECK_EQUAL(rooms[1].version.head, 2u);
  CAF_CHECK_EQUAL(rooms[1].version.promised, 10u);
}

CAF_TEST_FIXTURE_SCOPE_END()
