#define CAF_SUITE storage.timeline
#include <caf/test/dsl.hpp>

#include <coalesce/storage/timeline.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <rocksdb/db.h>

#include <coalesce/actors/timeline_actors.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/families.hpp>
#include <coalesce/storage/timeline_codec.hpp>

#include "error_codes.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;

namespace {

/// A test event whose fields all derive from its id, so a page can be
/// compared field by field.
timeline_event event_of(const std::string& id, int64_t timestamp = 0) {
  return timeline_event{id, "m.room.message", timestamp, "body of " + id};
}

std::vector<timeline_event>
events_of(const std::vector<std::string>& event_ids) {
  std::vector<timeline_event> result;
  int64_t timestamp = 1000;
  for (const auto& id : event_ids)
    result.push_back(event_of(id, timestamp++));
  return result;
}

std::vector<std::string> ids_of(const timeline_page& page) {
  std::vector<std::string> result;
  for (const auto& event : page.events)
    result.push_back(event.event_id);
  return result;
}

using ids = std::vector<std::string>;

constexpr uint8_t invalid_request_code
  = static_cast<uint8_t>(errc::invalid_request);

struct timeline_fixture {
  temp_dir dir;
  std::shared_ptr<database> db;

  timeline_fixture() {
    reopen();
  }

  void reopen() {
    if (db)
      CAF_REQUIRE(!db->close());
    db.reset();
    auto opened = database::open({dir.sub("db"), durability::synced});
    if (!opened)
      CAF_FAIL("open failed: " << to_string(opened.error()));
    db = std::move(*opened);
  }

  void append(const std::string& room,
              const std::vector<std::string>& event_ids) {
    auto err = append_events(*db, room, events_of(event_ids));
    if (err)
      CAF_FAIL("append failed: " << to_string(err));
  }

  /// Reads the next page without committing it.
  timeline_page peek(const std::string& room, uint32_t max_events) {
    auto result = page_backwards(*db, room, max_events);
    if (!result)
      CAF_FAIL("page failed: " << to_string(result.error()));
    return std::move(*result);
  }

  /// Reads the next page and commits it, as the scheduler does once the
  /// page was delivered.
  timeline_page page(const std::string& room, uint32_t max_events) {
    auto result = peek(room, max_events);
    if (auto err = commit_page(*db, room, result.cursor))
      CAF_FAIL("commit failed: " << to_string(err));
    return result;
  }

  uint64_t count(const std::string& room) {
    auto n = count_events(*db, room);
    CAF_REQUIRE(n.engaged());
    return *n;
  }
};

/// Opens the directory with plain RocksDB to damage a stored value, as a
/// failing disk or a buggy tool would.
void with_raw_rocksdb(const std::string& path,
                      const std::function<void(rocksdb::DB&,
                                               rocksdb::ColumnFamilyHandle&)>& f) {
  rocksdb::Options options;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& row : known_families())
    descriptors.emplace_back(row.name, rocksdb::ColumnFamilyOptions{});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto status = rocksdb::DB::Open(options, path, descriptors, &handles, &raw);
  CAF_REQUIRE(status.ok());
  auto timeline = static_cast<std::size_t>(family::timeline);
  f(*raw, *handles.at(timeline));
  for (auto* handle : handles)
    CAF_REQUIRE(raw->DestroyColumnFamilyHandle(handle).ok());
  CAF_REQUIRE(raw->Close().ok());
  delete raw;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(timeline_tests, timeline_fixture)

CAF_TEST(pages come newest first in batches) {
  append("!r", {"e1", "e2", "e3"});
  append("!r", {"e4", "e5"});
  CAF_CHECK_EQUAL(count("!r"), 5u);
  auto first = page("!r", 2);
  CAF_CHECK_EQUAL(ids_of(first), (ids{"e5", "e4"}));
  CAF_CHECK(!first.reached_start);
  CAF_REQUIRE_EQUAL(first.events.size(), 2u);
  CAF_CHECK(first.events[0] == event_of("e5", 1001));
  auto second = page("!r", 2);
  CAF_CHECK_EQUAL(ids_of(second), (ids{"e3", "e2"}));
  CAF_CHECK(!second.reached_start);
  auto last = page("!r", 2);
  CAF_CHECK_EQUAL(ids_of(last), (ids{"e1"}));
  CAF_CHECK(last.reached_start);
  CAF_CHECK(last.events[0] == event_of("e1", 1000));
}

CAF_TEST(the position survives a reopen) {
  append("!r", {"e1", "e2", "e3", "e4", "e5"});
  CAF_CHECK_EQUAL(ids_of(page("!r", 2)), (ids{"e5", "e4"}));
  reopen();
  CAF_CHECK_EQUAL(ids_of(page("!r", 2)), (ids{"e3", "e2"}));
  reopen();
  CAF_CHECK_EQUAL(ids_of(page("!r", 2)), (ids{"e1"}));
}

/// The batch that ends exactly on the first event already says so: a caller
/// need not ask once more to learn that nothing is left.
CAF_TEST(reached_start is set on the batch holding the first event) {
  append("!r", {"e1", "e2", "e3", "e4"});
  CAF_CHECK(!page("!r", 2).reached_start);
  auto last = page("!r", 2);
  CAF_CHECK_EQUAL(ids_of(last), (ids{"e2", "e1"}));
  CAF_CHECK(last.reached_start);
}

CAF_TEST(reached_start is set with no events on an exhausted room) {
  append("!r", {"e1", "e2"});
  CAF_CHECK(page("!r", 5).reached_start);
  for (int i = 0; i < 2; ++i) {
    auto exhausted = page("!r", 5);
    CAF_CHECK(exhausted.events.empty());
    CAF_CHECK(exhausted.reached_start);
  }
  reopen();
  CAF_CHECK(page("!r", 5).events.empty());
}

/// An unknown room is answered without a write, so its first events are
/// paged as in any other room once they arrive.
CAF_TEST(an unknown room answers an empty page at its start) {
  auto empty = page("!nowhere", 10);
  CAF_CHECK(empty.events.empty());
  CAF_CHECK(empty.reached_start);
  CAF_CHECK_EQUAL(count("!nowhere"), 0u);
  append("!nowhere", {"e1"});
  CAF_CHECK_EQUAL(ids_of(page("!nowhere", 10)), (ids{"e1"}));
}

/// Rooms whose names are prefixes of each other share no keys: the
/// length-prefixed room name keeps them apart.
CAF_TEST(rooms are independent) {
  append("!a", {"a1", "a2", "a3"});
  append("!ab", {"b1"});
  append("!a", {"a4"});
  append("!ab", {"b2", "b3"});
  CAF_CHECK_EQUAL(count("!a"), 4u);
  CAF_CHECK_EQUAL(count("!ab"), 3u);
  CAF_CHECK_EQUAL(ids_of(page("!a", 10)), (ids{"a4", "a3", "a2", "a1"}));
  CAF_CHECK(page("!a", 10).events.empty());
  auto b = page("!ab", 2);
  CAF_CHECK_EQUAL(ids_of(b), (ids{"b3", "b2"}));
  CAF_CHECK(!b.reached_start);
  CAF_REQUIRE(!reset_position(*db, "!a"));
  CAF_CHECK_EQUAL(ids_of(page("!ab", 2)), (ids{"b1"}));
}

/// The two-step commit: a page moves the position only once committed, so a
/// page that was read but never delivered is read again, across a reopen
/// too.
CAF_TEST(a page that is not committed is read again) {
  append("!r", {"e1", "e2", "e3", "e4", "e5"});
  auto read = peek("!r", 2);
  CAF_CHECK_EQUAL(ids_of(read), (ids{"e5", "e4"}));
  CAF_CHECK_EQUAL(read.cursor.read_at, 5u);
  CAF_CHECK_EQUAL(read.cursor.next, 3u);
  CAF_CHECK_EQUAL(ids_of(peek("!r", 2)), (ids{"e5", "e4"}));
  reopen();
  CAF_CHECK_EQUAL(ids_of(page("!r", 2)), (ids{"e5", "e4"}));
  auto uncommitted = peek("!r", 2);
  CAF_CHECK_EQUAL(ids_of(uncommitted), (ids{"e3", "e2"}));
  reopen();
  auto again = page("!r", 2);
  CAF_CHECK_EQUAL(ids_of(again), (ids{"e3", "e2"}));
  CAF_CHECK_EQUAL(ids_of(page("!r", 2)), (ids{"e1"}));
}

/// A commit applies only at the position its page was read at: a repeated
/// or late commit of an older page cannot move the position again.
CAF_TEST(a stale commit changes nothing) {
  append("!r", {"e1", "e2", "e3", "e4", "e5"});
  auto first = peek("!r", 2);
  CAF_REQUIRE(!commit_page(*db, "!r", first.cursor));
  auto second = peek("!r", 2);
  CAF_CHECK_EQUAL(ids_of(second), (ids{"e3", "e2"}));
  // The same page committed twice: the position stays past e4.
  CAF_CHECK(!commit_page(*db, "!r", first.cursor));
  CAF_CHECK_EQUAL(ids_of(peek("!r", 2)), (ids{"e3", "e2"}));
  CAF_REQUIRE(!commit_page(*db, "!r", second.cursor));
  // A late commit of the first page does not move it back to e3.
  CAF_CHECK(!commit_page(*db, "!r", first.cursor));
  CAF_CHECK_EQUAL(ids_of(peek("!r", 2)), (ids{"e1"}));
  // A cursor moving the position forwards is malformed.
  CAF_CHECK_EQUAL(code_of(commit_page(*db, "!r", page_cursor{1, 4})),
                  invalid_request_code);
  CAF_CHECK_EQUAL(code_of(commit_page(*db, "", first.cursor)),
                  invalid_request_code);
  CAF_CHECK_EQUAL(ids_of(peek("!r", 2)), (ids{"e1"}));
}

/// Like Matrix history: newer events arrive by sync, not back-pagination.
CAF_TEST(events appended after paging began are not returned) {
  append("!r", {"e1", "e2", "e3"});
  CAF_CHECK_EQUAL(ids_of(page("!r", 1)), (ids{"e3"}));
  append("!r", {"e4", "e5"});
  auto rest = page("!r", 10);
  CAF_CHECK_EQUAL(ids_of(rest), (ids{"e2", "e1"}));
  CAF_CHECK(rest.reached_start);
  append("!r", {"e6"});
  CAF_CHECK(page("!r", 10).events.empty());
  CAF_CHECK_EQUAL(count("!r"), 6u);
}

CAF_TEST(invalid requests are refused) {
  CAF_CHECK_EQUAL(code_of(append_events(*db, "", events_of({"e1"}))),
                  invalid_request_code);
  auto batch = events_of({"e1", "", "e3"});
  CAF_CHECK_EQUAL(code_of(append_events(*db, "!r", batch)),
                  invalid_request_code);
  CAF_CHECK_EQUAL(count("!r"), 0u); // Nothing of the refused batch.
  append("!r", {"e1"});
  auto zero = page_backwards(*db, "!r", 0);
  CAF_REQUIRE(!zero);
  CAF_CHECK_EQUAL(code_of(zero.error()), invalid_request_code);
  auto no_room = page_backwards(*db, "", 5);
  CAF_REQUIRE(!no_room);
  CAF_CHECK_EQUAL(code_of(no_room.error()), invalid_request_code);
  CAF_CHECK_EQUAL(code_of(reset_position(*db, "")), invalid_request_code);
  CAF_CHECK(!count_events(*db, ""));
  // The refused page moved nothing.
  CAF_CHECK_EQUAL(ids_of(page("!r", 5)), (ids{"e1"}));
}

CAF_TEST(reset_position starts again from the newest) {
  append("!r", {"e1", "e2", "e3"});
  CAF_CHECK_EQUAL(ids_of(page("!r", 2)), (ids{"e3", "e2"}));
  append("!r", {"e4"});
  CAF_REQUIRE(!reset_position(*db, "!r"));
  reopen();
  auto again = page("!r", 3);
  CAF_CHECK_EQUAL(ids_of(again), (ids{"e4", "e3", "e2"}));
  CAF_CHECK(!again.reached_start);
  // Resetting a room never paged (or unknown) is harmless.
  CAF_CHECK(!reset_position(*db, "!never"));
}

CAF_TEST(a damaged event is reported as a corrupt record) {
  append("!r", {"e1", "e2", "e3"});
  CAF_REQUIRE(!db->close());
  db.reset();
  with_raw_rocksdb(dir.sub("db"), [](rocksdb::DB& raw,
                                     rocksdb::ColumnFamilyHandle& timeline) {
    auto damaged = encode_event_value(event_of("e2"));
    damaged.pop_back();
    CAF_REQUIRE(raw.Put(rocksdb::WriteOptions{}, &timeline,
                        encode_event_key("!r", 1), damaged)
                  .ok());
  });
  reopen();
  CAF_CHECK_EQUAL(ids_of(page("!r", 1)), (ids{"e3"}));
  auto broken = page_backwards(*db, "!r", 1);
  CAF_REQUIRE(!broken);
  CAF_CHECK_EQUAL(code_of(broken.error()),
                  static_cast<uint8_t>(errc::corrupt_record));
}

CAF_TEST(the event codec round-trips and decodes strictly) {
  timeline_event event{"$id", "m.room.message", -42, std::string{"a\0b", 3}};
  auto bytes = encode_event_value(event);
  auto decoded = decode_event_value(bytes);
  CAF_REQUIRE(decoded);
  CAF_CHECK(*decoded == event);
  CAF_CHECK(decode_event_value(bytes + "x") == std::nullopt);
  CAF_CHECK(decode_event_value(bytes.substr(0, bytes.size() - 1))
            == std::nullopt);
  auto wrong_format = bytes;
  wrong_format[0] = 9;
  CAF_CHECK(decode_event_value(wrong_format) == std::nullopt);
  CAF_CHECK(decode_event_value("") == std::nullopt);
  CAF_CHECK(decode_event_key("!r", encode_event_key("!r", 7))
            == std::optional<uint64_t>{7});
  CAF_CHECK(decode_event_key("!r", encode_event_key("!rr", 7))
            == std::nullopt);
  CAF_CHECK(encode_event_key("!r", 255) < encode_event_key("!r", 256));
  CAF_CHECK(decode_counter(encode_counter(123)) == std::optional<uint64_t>{123});
  CAF_CHECK(decode_counter("1234567") == std::nullopt);
}

CAF_TEST_FIXTURE_SCOPE_END()

namespace {

/// timeline_store over RocksDB, scheduled by the test coordinator.
struct store_actor_fixture : test_coordinator_fixture<test_config> {
  temp_dir dir;
  std::shared_ptr<database> db;
  timeline_actor store;

  store_actor_fixture() {
    auto opened = database::open({dir.sub("db"), durability::synced});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
    store = sys.spawn(timeline_store, db);
    sched.run();
  }

  ~store_actor_fixture() override {
    caf::anon_send_exit(store, caf::exit_reason::kill);
    sched.run();
  }

  /// Sends a request, runs every actor, and returns the answer or error.
  template <class T, class... Ts>
  caf::expected<T> ask(Ts... xs) {
    auto answer = self->request(store, caf::infinite, std::move(xs)...);
    sched.run();
    caf::expected<T> result{make_error(errc::stopped_before_answer, "no answer")};
    answer.receive([&](T& x) { result = std::move(x); },
                   [&](caf::error& err) { result = std::move(err); });
    return result;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(timeline_store_tests, store_actor_fixture)

CAF_TEST(the timeline store appends and pages through its interface) {
  auto appended = ask<uint64_t>(append_atom::value, std::string{"!r"},
                                events_of({"e1", "e2", "e3"}));
  CAF_REQUIRE(appended);
  CAF_CHECK_EQUAL(*appended, 3u);
  // The scheduler sees the store only as a pager.
  pager_actor pager = store;
  auto answer = self->request(pager, caf::infinite, page_atom::value,
                              std::string{"!r"}, uint32_t{2});
  sched.run();
  timeline_page first;
  answer.receive([&](timeline_page& x) { first = std::move(x); },
                 [&](caf::error& err) { CAF_FAIL(sys.render(err)); });
  CAF_CHECK_EQUAL(ids_of(first), (ids{"e3", "e2"}));
  CAF_CHECK(!first.reached_start);
  // Not committed yet: the same page again.
  auto repeated = ask<timeline_page>(page_atom::value, std::string{"!r"},
                                     uint32_t{2});
  CAF_REQUIRE(repeated);
  CAF_CHECK_EQUAL(ids_of(*repeated), (ids{"e3", "e2"}));
  auto committed = ask<ok_atom>(commit_atom::value, std::string{"!r"},
                                first.cursor);
  CAF_CHECK(committed.engaged());
  auto last = ask<timeline_page>(page_atom::value, std::string{"!r"},
                                 uint32_t{2});
  CAF_REQUIRE(last);
  CAF_CHECK_EQUAL(ids_of(*last), (ids{"e1"}));
  CAF_CHECK(last->reached_start);
  auto forwards = ask<ok_atom>(commit_atom::value, std::string{"!r"},
                               page_cursor{0, 3});
  CAF_REQUIRE(!forwards);
  CAF_CHECK_EQUAL(code_of(forwards.error()), invalid_request_code);
  auto refused = ask<timeline_page>(page_atom::value, std::string{"!r"},
                                    uint32_t{0});
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), invalid_request_code);
  CAF_CHECK_EQUAL(sys.render(refused.error()),
                  "invalid request: a page must hold at least one event");
  auto bad_append = ask<uint64_t>(append_atom::value, std::string{},
                                  events_of({"e4"}));
  CAF_REQUIRE(!bad_append);
  CAF_CHECK_EQUAL(code_of(bad_append.error()), invalid_request_code);
}

CAF_TEST_FIXTURE_SCOPE_END()
