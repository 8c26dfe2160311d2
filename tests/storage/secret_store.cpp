#define CAF_SUITE storage.secret_store
#include <caf/test/unit_test.hpp>

#include <coalesce/storage/secret_store.hpp>

#include <algorithm>
#include <memory>

#include <rocksdb/db.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/families.hpp>
#include <coalesce/storage/secret_merge.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;

namespace {

struct store_fixture {
  temp_dir dir;
  std::shared_ptr<database> db;

  store_fixture() {
    reopen();
  }

  void reopen(durability mode = durability::synced) {
    if (db)
      CAF_REQUIRE(!db->close());
    db.reset();
    auto opened = database::open({dir.sub("db"), mode});
    if (!opened)
      CAF_FAIL("open failed: " << to_string(opened.error()));
    db = std::move(*opened);
  }

  void write(std::vector<secret_write> writes) {
    auto err = write_secrets(*db, writes);
    CAF_REQUIRE(!err);
  }

  stored_secret read(const std::string& msg_id) {
    auto rows = read_secrets(*db, {key_of(msg_id)});
    CAF_REQUIRE(rows.engaged());
    return rows->front();
  }

  uint64_t rows() {
    auto n = count_secret_rows(*db);
    CAF_REQUIRE(n.engaged());
    return *n;
  }
};

secret_entry with_meta(secret_entry entry, int64_t expires_at,
                       int64_t message_ts) {
  entry.expires_at = expires_at;
  entry.message_ts = message_ts;
  return entry;
}

/// Opens the directory with plain RocksDB, as another build of coalesce
/// would. Only families and the meta key are touched: no secret row is read
/// or compacted without the merge operator.
void with_raw_rocksdb(const std::string& path,
                      const std::vector<std::string>& families,
                      const std::function<void(rocksdb::DB&)>& f) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& name : families)
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions{});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto status = rocksdb::DB::Open(options, path, descriptors, &handles, &raw);
  CAF_REQUIRE(status.ok());
  f(*raw);
  for (auto* handle : handles)
    CAF_REQUIRE(raw->DestroyColumnFamilyHandle(handle).ok());
  CAF_REQUIRE(raw->Close().ok());
  delete raw;
}

std::vector<std::string> known_family_names() {
  std::vector<std::string> result;
  for (const auto& row : known_families())
    result.emplace_back(row.name);
  return result;
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(secret_store_tests, store_fixture)

CAF_TEST(a written batch is readable after a reopen) {
  write({capture(make_entry("M1", 0x11), 10),
         capture(make_entry("M2", 0x22), 10)});
  reopen();
  auto m1 = read("M1");
  CAF_CHECK(m1.found);
  CAF_CHECK(m1.row.entry.secret == secret_of(0x11));
  CAF_CHECK_EQUAL(m1.row.entry.message_ts, 7);
  CAF_CHECK_EQUAL(m1.row.entry.msg_id, "M1");
  CAF_CHECK(read("M2").found);
  CAF_CHECK(!read("M3").found);
}

CAF_TEST(buffered durability still survives a clean reopen) {
  reopen(durability::buffered);
  write({capture(make_entry("M1", 0x11), 10)});
  reopen(durability::buffered);
  CAF_CHECK(read("M1").found);
}

/// Sequential writes of one key merge retention metadata in RocksDB with no
/// read per row: never-expire wins, a known message time survives.
CAF_TEST(sequential writes merge retention metadata) {
  write({capture(with_meta(make_entry("P", 0x11), 0, 50), 10)});
  write({capture(with_meta(make_entry("P", 0x22), 100, 0), 20)});
  auto merged = read("P");
  CAF_CHECK(merged.row.entry.secret == secret_of(0x22));
  CAF_CHECK_EQUAL(merged.row.entry.expires_at, 0);
  CAF_CHECK_EQUAL(merged.row.entry.message_ts, 50);
  reopen();
  CAF_CHECK_EQUAL(read("P").row.entry.message_ts, 50);
}

/// A batch that reported failure may have reached the WAL and is written
/// again by the retry: the second write must change nothing.
CAF_TEST(writing a batch twice leaves the same rows as writing it once) {
  write({capture(with_meta(make_entry("P", 0x11), 0, 50), 10)});
  std::vector<secret_write> batch{
    capture(with_meta(make_entry("P", 0x22), 100, 0), 20),
    capture(with_meta(make_entry("Q", 0x33), 300, 9), 20)};
  write(batch);
  auto p_once = read("P");
  auto q_once = read("Q");
  write(batch);
  CAF_CHECK(read("P").row.entry == p_once.row.entry);
  CAF_CHECK(read("Q").row.entry == q_once.row.entry);
  CAF_CHECK(compact_secrets(*db) == caf::none);
  CAF_CHECK(read("P").row.entry == p_once.row.entry);
}

/// The purge runs in compactions: the first turns the merge operand into a
/// full row, the second drops that row because it expired.
CAF_TEST(expired rows are purged by compaction and live rows stay) {
  auto now = unix_now();
  write({capture(with_meta(make_entry("OLD", 0x11), now - 100, 7), now),
         capture(with_meta(make_entry("LIVE", 0x22), now + 3600, 7), now),
         capture(make_entry("FOREVER", 0x33), now)});
  CAF_CHECK_EQUAL(rows(), 3u);
  CAF_REQUIRE(compact_secrets(*db) == caf::none);
  CAF_REQUIRE(compact_secrets(*db) == caf::none);
  CAF_CHECK_EQUAL(rows(), 2u);
  CAF_CHECK(!read("OLD").found);
  CAF_CHECK(read("LIVE").found);
  CAF_CHECK(read("FOREVER").found);
}

/// The purge decides only on full rows. Dropping the newer operand because
/// of its own (past) expiry would bring the older secret back.
CAF_TEST(compaction never resurrects an older secret) {
  auto now = unix_now();
  write({capture(make_entry("K", 0x11), now - 10)});
  CAF_REQUIRE(compact_secrets(*db) == caf::none);
  CAF_REQUIRE(compact_secrets(*db) == caf::none);
  write({capture(with_meta(make_entry("K", 0x22), now - 5, 0), now)});
  CAF_REQUIRE(compact_secrets(*db) == caf::none);
  CAF_REQUIRE(compact_secrets(*db) == caf::none);
  auto row = read("K");
  CAF_REQUIRE(row.found);
  CAF_CHECK(row.row.entry.secret == secret_of(0x22));
  CAF_CHECK_EQUAL(row.row.entry.expires_at, 0);
  CAF_CHECK_EQUAL(row.row.entry.message_ts, 7);
}

/// A capture made after the stored row expired ignores that row, so whether
/// a compaction purged it first cannot change the merged result.
CAF_TEST(the merge does not depend on whether a compaction purged first) {
  auto now = unix_now();
  auto expired = capture(with_meta(make_entry("K", 0x11), now - 50, 40),
                         now - 100);
  auto later = capture(with_meta(make_entry("K", 0x22), now + 3600, 0), now);
  write({expired});
  write({later});
  auto unpurged = read("K");
  temp_dir other_dir;
  auto other = database::open({other_dir.sub("db"), durability::synced});
  CAF_REQUIRE(other.engaged());
  CAF_REQUIRE(!write_secrets(**other, {expired}));
  CAF_REQUIRE(compact_secrets(**other) == caf::none);
  CAF_REQUIRE(compact_secrets(**other) == caf::none);
  CAF_REQUIRE(*count_secret_rows(**other) == 0u);
  CAF_REQUIRE(!write_secrets(**other, {later}));
  auto purged = read_secrets(**other, {key_of("K")});
  CAF_REQUIRE(purged.engaged());
  CAF_CHECK(unpurged.row.entry == purged->front().row.entry);
  CAF_CHECK_EQUAL(unpurged.row.entry.message_ts, 0);
}

/// A database from an older build lacks the families of newer services; one
/// from a newer build has families this build does not know. Both open, and
/// nothing of theirs is dropped.
CAF_TEST(opening creates missing column families and keeps unknown ones) {
  db->close();
  db.reset();
  temp_dir older;
  with_raw_rocksdb(older.sub("db"), {"default", "from_a_newer_build"},
                   [](rocksdb::DB& raw) {
                     CAF_REQUIRE(raw.Put(rocksdb::WriteOptions{},
                                         "coalesce/format-version", "1")
                                   .ok());
                   });
  {
    auto opened = database::open({older.sub("db"), durability::synced});
    CAF_REQUIRE(opened.engaged());
    CAF_REQUIRE(!write_secrets(**opened, {capture(make_entry("M", 1), 1)}));
    CAF_REQUIRE(!(*opened)->close());
  }
  std::vector<std::string> families;
  CAF_REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions{},
                                              older.sub("db"), &families)
                .ok());
  std::sort(families.begin(), families.end());
  auto expected = known_family_names();
  expected.push_back("from_a_newer_build");
  std::sort(expected.begin(), expected.end());
  CAF_CHECK_EQUAL(families, expected);
  auto reopened = database::open({older.sub("db"), durability::synced});
  CAF_REQUIRE(reopened.engaged());
  CAF_CHECK(read_secrets(**reopened, {key_of("M")})->front().found);
}

CAF_TEST(a new database has every known family and no other) {
  CAF_REQUIRE(!db->close());
  std::vector<std::string> families;
  CAF_REQUIRE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions{},
                                              dir.sub("db"), &families)
                .ok());
  std::sort(families.begin(), families.end());
  auto expected = known_family_names();
  std::sort(expected.begin(), expected.end());
  CAF_CHECK_EQUAL(families, expected);
  for (std::size_t i = 0; i < family_count; ++i)
    CAF_CHECK_EQUAL(static_cast<std::size_t>(known_families()[i].id), i);
  CAF_CHECK_EQUAL(std::string{family_name(family::secrets)}, "secrets");
}

CAF_TEST(a database in a newer format is refused with a clear error) {
  db->close();
  db.reset();
  temp_dir newer;
  with_raw_rocksdb(newer.sub("db"), {"default"}, [](rocksdb::DB& raw) {
    CAF_REQUIRE(
      raw.Put(rocksdb::WriteOptions{}, "coalesce/format-version", "99").ok());
  });
  auto opened = database::open({newer.sub("db"), durability::synced});
  CAF_REQUIRE(!opened);
  CAF_CHECK(opened.error() == make_error(errc::unsupported_format));
  CAF_CHECK_EQUAL(opened.error().code(),
                  static_cast<uint8_t>(errc::unsupported_format));
}

/// The value layout could hold up to 255 bytes, but a secret is 32: storage
/// refuses a longer one exactly like a shorter one, with the message the
/// buffer answers, and writes nothing of that batch.
CAF_TEST(a secret that is not 32 bytes is refused and nothing of its batch is written) {
  for (std::size_t size : {std::size_t{3}, std::size_t{31}, std::size_t{33},
                           std::size_t{64}}) {
    auto bad = make_entry("BAD", 2);
    bad.secret.resize(size, 2);
    auto err = write_secrets(*db, {capture(make_entry("GOOD", 1), 1),
                                   capture(bad, 1)});
    CAF_REQUIRE(err != caf::none);
    CAF_CHECK_EQUAL(err.category(), errc_category);
    CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::invalid_secret_entry));
    CAF_REQUIRE(err.context().match_elements<std::string>());
    CAF_CHECK_EQUAL(err.context().get_as<std::string>(0),
                    "the secret must be 32 bytes, got " + std::to_string(size));
  }
  CAF_CHECK(!read("GOOD").found);
  CAF_CHECK(!read("BAD").found);
}

CAF_TEST(a closed database answers with an error instead of crashing) {
  CAF_REQUIRE(!db->close());
  auto err = write_secrets(*db, {capture(make_entry("M", 1), 1)});
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::storage_failed));
  CAF_CHECK(!read_secrets(*db, {key_of("M")}));
}

CAF_TEST_FIXTURE_SCOPE_END()
