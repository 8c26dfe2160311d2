#define CAF_SUITE storage.session_store
#include <caf/test/unit_test.hpp>

#include <coalesce/storage/session_store.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>

#include "error_codes.hpp"
#include "session_fixtures.hpp"
#include "temp_dir.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;

namespace {

struct store_fixture {
  temp_dir dir;
  std::shared_ptr<fault_switches> faults = std::make_shared<fault_switches>();
  std::shared_ptr<database> db;

  store_fixture() {
    auto opened = database::open({dir.sub("db"), durability::synced,
                                  make_fault_injecting_file_system(faults)});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
  }

  void save(session_write write) {
    auto err = save_session(*db, write);
    CAF_REQUIRE(!err);
  }

  /// The generation storage holds for `session` (none: nothing).
  std::optional<uint64_t> generation_in_storage(const std::string& session) {
    auto stored = storage::stored_generation(*db, session);
    CAF_REQUIRE(stored.engaged());
    std::optional<uint64_t> result = *stored;
    return result;
  }

  session_record load(const std::string& session) {
    auto record = load_session(*db, session);
    CAF_REQUIRE(record.engaged());
    return std::move(*record);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(session_store_tests, store_fixture)

CAF_TEST(a saved session loads with its blob and rows) {
  save({"s1", "blob one", {row("u1", 10), row("u2", 20)}, {}});
  auto record = load("s1");
  CAF_CHECK_EQUAL(record.blob, "blob one");
  CAF_REQUIRE_EQUAL(record.updates.size(), 2u);
  CAF_CHECK(record.updates[0] == row("u1", 10));
  CAF_CHECK(record.updates[1] == row("u2", 20));
}

CAF_TEST(a later save replaces the blob and adds rows) {
  save({"s1", "v1", {row("u1", 10)}, {}});
  save({"s1", "v2", {row("u2", 20)}, {}});
  auto record = load("s1");
  CAF_CHECK_EQUAL(record.blob, "v2");
  CAF_CHECK_EQUAL(ids_of(record), (ids{"u1", "u2"}));
}

CAF_TEST(rows load ordered by timestamp then id) {
  save({"s1", "b", {row("c", 5), row("a", 7), row("b", 5), row("z", 1)}, {}});
  CAF_CHECK_EQUAL(ids_of(load("s1")), (ids{"z", "b", "c", "a"}));
}

CAF_TEST(a save removes the rows it names) {
  save({"s1", "v1", {row("u1", 1), row("u2", 2), row("u3", 3)}, {}});
  save({"s1", "v2", {row("u4", 4)}, {"u2", "u3"}});
  CAF_CHECK_EQUAL(ids_of(load("s1")), (ids{"u1", "u4"}));
}

CAF_TEST(a row written and removed by one save ends removed) {
  save({"s1", "v1", {row("u1", 1), row("u2", 2)}, {"u2"}});
  CAF_CHECK_EQUAL(ids_of(load("s1")), (ids{"u1"}));
}

CAF_TEST(loading an unknown session answers not found) {
  auto record = load_session(*db, "nobody");
  CAF_REQUIRE(!record);
  CAF_CHECK_EQUAL(code_of(record.error()),
                  static_cast<uint8_t>(errc::not_found));
}

CAF_TEST(erase removes the blob and every row) {
  save({"s1", "v1", {row("u1", 1), row("u2", 2)}, {}});
  CAF_REQUIRE(!erase_session(*db, "s1"));
  auto record = load_session(*db, "s1");
  CAF_CHECK(!record);
  // A session re-created under the same id starts without the old rows.
  save({"s1", "fresh", {row("u9", 9)}, {}});
  CAF_CHECK_EQUAL(ids_of(load("s1")), (ids{"u9"}));
  CAF_CHECK(!erase_session(*db, "never-saved"));
}

/// "a" is a byte prefix of "a\x01b" and of "a\xff": without the length
/// prefix the range of "a" would contain their keys.
CAF_TEST(erasing a session leaves sessions whose ids it prefixes) {
  std::string second{"a\x01" "b"};
  std::string third{"a\xff"};
  std::string fourth{"a\x00", 2};
  save({"a", "blob a", {row("u1", 1)}, {}});
  save({second, "blob second", {row("u1", 1), row("u2", 2)}, {}});
  save({third, "blob third", {row("u3", 3)}, {}});
  save({fourth, "blob fourth", {row("u4", 4)}, {}});
  CAF_CHECK_EQUAL(ids_of(load("a")), (ids{"u1"}));
  CAF_REQUIRE(!erase_session(*db, "a"));
  CAF_CHECK(!load_session(*db, "a"));
  CAF_CHECK_EQUAL(load(second).blob, "blob second");
  CAF_CHECK_EQUAL(ids_of(load(second)), (ids{"u1", "u2"}));
  CAF_CHECK_EQUAL(ids_of(load(third)), (ids{"u3"}));
  CAF_CHECK_EQUAL(ids_of(load(fourth)), (ids{"u4"}));
  CAF_REQUIRE(!erase_session(*db, second));
  CAF_CHECK_EQUAL(ids_of(load(third)), (ids{"u3"}));
  CAF_CHECK_EQUAL(ids_of(load(fourth)), (ids{"u4"}));
}

CAF_TEST(a save whose write fails leaves nothing of it) {
  save({"s1", "v1", {row("u1", 1)}, {}});
  faults->wal_append = true;
  auto err = save_session(*db, {"s1", "v2", {row("u2", 2)}, {"u1"}});
  CAF_CHECK(err);
  faults->clear();
  CAF_REQUIRE(!db->recover());
  auto record = load("s1");
  CAF_CHECK_EQUAL(record.blob, "v1");
  CAF_CHECK_EQUAL(ids_of(record), (ids{"u1"}));
}

CAF_TEST(invalid session ids and rows are refused and nothing is written) {
  auto invalid = static_cast<uint8_t>(errc::invalid_request);
  CAF_CHECK_EQUAL(code_of(save_session(*db, {"", "b", {}, {}})), invalid);
  CAF_CHECK_EQUAL(code_of(save_session(*db, {std::string(256, 'x'), "b", {},
                                             {}})),
                  invalid);
  CAF_CHECK_EQUAL(code_of(save_session(*db, {"s1", "b", {row("", 1)}, {}})),
                  invalid);
  CAF_CHECK(!load_session(*db, "s1"));
  save({std::string(255, 'x'), "longest", {}, {}});
  CAF_CHECK_EQUAL(load(std::string(255, 'x')).blob, "longest");
}

// -- store-side fencing ------------------------------------------------------

CAF_TEST(a forced stale write is refused in storage) {
  save({"s1", "gen 3", {row("u1", 1)}, {}, 3});
  auto err = save_session(*db, {"s1", "stale", {row("u2", 2)}, {"u1"}, 2});
  CAF_CHECK_EQUAL(code_of(err), static_cast<uint8_t>(errc::stale_generation));
  auto record = load("s1");
  CAF_CHECK_EQUAL(record.blob, "gen 3");
  CAF_CHECK_EQUAL(ids_of(record), (ids{"u1"}));
  // An equal generation passes (a retry), a higher one too.
  save({"s1", "gen 3 again", {}, {}, 3});
  save({"s1", "gen 4", {}, {}, 4});
  CAF_CHECK_EQUAL(load("s1").blob, "gen 4");
  CAF_CHECK(generation_in_storage("s1") == std::optional<uint64_t>{4});
}

CAF_TEST(a delete then a stale write is refused) {
  save({"s1", "before", {row("u1", 1)}, {}, 1});
  CAF_REQUIRE(!erase_session(*db, "s1", 2));
  auto err = save_session(*db, {"s1", "from before the delete", {}, {}, 1});
  CAF_CHECK_EQUAL(code_of(err), static_cast<uint8_t>(errc::stale_generation));
  // With the check broken the load succeeds: the test fails here and goes
  // on, rather than reading an error that is not there.
  auto erased = load_session(*db, "s1");
  CAF_CHECK(!erased);
  if (!erased)
    CAF_CHECK_EQUAL(code_of(erased.error()),
                    static_cast<uint8_t>(errc::not_found));
  CAF_CHECK(generation_in_storage("s1") == std::optional<uint64_t>{2});
  // A tombstone never lowers the stored generation.
  save({"s2", "b", {}, {}, 7});
  CAF_REQUIRE(!erase_session(*db, "s2", 3));
  CAF_CHECK(generation_in_storage("s2") == std::optional<uint64_t>{7});
  // The session re-created after the delete writes.
  save({"s1", "after", {row("u2", 2)}, {}, 2});
  CAF_CHECK_EQUAL(load("s1").blob, "after");
  CAF_CHECK_EQUAL(ids_of(load("s1")), (ids{"u2"}));
  CAF_CHECK(generation_in_storage("never") == std::optional<uint64_t>{});
}

CAF_TEST(an erase without a tombstone leaves nothing and a purge removes only a tombstone) {
  save({"s1", "b", {row("u1", 1)}, {}, 3});
  CAF_REQUIRE(!erase_session(*db, "s1", std::nullopt));
  CAF_CHECK(generation_in_storage("s1") == std::optional<uint64_t>{});
  CAF_CHECK(!load_session(*db, "s1"));
  // A purge leaves a blob and a newer tombstone alone.
  save({"s2", "b", {}, {}, 2});
  auto kept = purge_tombstone(*db, "s2", 5);
  CAF_REQUIRE(kept.engaged());
  CAF_CHECK(!*kept);
  CAF_CHECK_EQUAL(load("s2").blob, "b");
  CAF_REQUIRE(!erase_session(*db, "s2", 4));
  auto newer = purge_tombstone(*db, "s2", 3);
  CAF_REQUIRE(newer.engaged());
  CAF_CHECK(!*newer);
  CAF_CHECK(generation_in_storage("s2") == std::optional<uint64_t>{4});
  auto purged = purge_tombstone(*db, "s2", 4);
  CAF_REQUIRE(purged.engaged());
  CAF_CHECK(*purged);
  CAF_CHECK(generation_in_storage("s2") == std::optional<uint64_t>{});
}

CAF_TEST(a write without a generation of its own takes the stored one) {
  session_write stray{"s1", "stray", {}, {}, 0, true};
  save(stray);
  CAF_CHECK(generation_in_storage("s1") == std::optional<uint64_t>{0});
  save({"s1", "gen 6", {}, {}, 6});
  stray.blob = "stray again";
  save(stray);
  CAF_CHECK_EQUAL(load("s1").blob, "stray again");
  CAF_CHECK(generation_in_storage("s1") == std::optional<uint64_t>{6});
}

CAF_TEST(a group checks known generations instead of reading and records what it wrote) {
  known_generations known;
  auto first = save_session_group(*db, {{"s1", "gen 3", {}, {}, 3}},
                                   std::nullopt, &known);
  CAF_REQUIRE(!first.failure);
  CAF_CHECK(known == (known_generations{{"s1", 3}}));
  // What the caller knows decides, not what storage holds.
  known["s1"] = 9;
  auto refused = save_session_group(*db, {{"s1", "gen 5", {}, {}, 5}},
                                    std::nullopt, &known);
  CAF_REQUIRE_EQUAL(refused.refused.size(), 1u);
  CAF_CHECK_EQUAL(code_of(refused.refused[0]),
                  static_cast<uint8_t>(errc::stale_generation));
  CAF_CHECK_EQUAL(load("s1").blob, "gen 3");
  // A failed batch forgets its sessions: they are read again.
  faults->wal_append = true;
  auto failed = save_session_group(*db, {{"s1", "gen 10", {}, {}, 10}},
                                   std::nullopt, &known);
  faults->clear();
  CAF_REQUIRE(!db->recover());
  CAF_CHECK(failed.failure);
  CAF_CHECK_EQUAL(known.count("s1"), 0u);
}

CAF_TEST(a group refuses a stale session alone and commits the others in one batch) {
  save({"old", "gen 5", {}, {}, 5});
  auto syncs = faults->wal_syncs.load();
  auto result = save_session_group(*db, {{"a", "blob a", {row("u1", 1)}, {}, 0},
                                         {"old", "stale", {}, {}, 4},
                                         {"b", "blob b", {}, {}, 0},
                                         {"a", "second write of a", {}, {}, 0},
                                         {"", "invalid", {}, {}, 0}});
  CAF_REQUIRE(!result.failure);
  CAF_CHECK(result.written);
  CAF_REQUIRE_EQUAL(result.refused.size(), 5u);
  CAF_CHECK(!result.refused[0]);
  CAF_CHECK_EQUAL(code_of(result.refused[1]),
                  static_cast<uint8_t>(errc::stale_generation));
  CAF_CHECK(!result.refused[2]);
  CAF_CHECK(!result.refused[3]); // equal generation within the group passes
  CAF_CHECK_EQUAL(code_of(result.refused[4]),
                  static_cast<uint8_t>(errc::invalid_request));
  CAF_CHECK_EQUAL(faults->wal_syncs.load() - syncs, 1);
  CAF_CHECK_EQUAL(load("a").blob, "second write of a");
  CAF_CHECK_EQUAL(load("b").blob, "blob b");
  CAF_CHECK_EQUAL(load("old").blob, "gen 5");
}

CAF_TEST_FIXTURE_SCOPE_END()
