#define CAF_SUITE actors.secret_buffer_faults
#include <caf/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <memory>

#include <caf/all.hpp>

#include <coalesce/actors/secret_buffer.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>
#include <coalesce/storage/secret_store.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

/// The production wiring (detached drain worker and reader, real threads,
/// real time) over a real RocksDB whose file system is the fault seam: the
/// faults are injected, everything else is real. Every wait has a generous
/// deadline and ends on a real event.
struct fault_fixture {
  test_config cfg;
  actor_system sys{cfg};
  temp_dir dir;
  std::shared_ptr<fault_switches> faults = std::make_shared<fault_switches>();
  std::shared_ptr<database> db;
  secret_buffer_actors service;
  scoped_actor self{sys};

  fault_fixture() {
    auto opened = database::open(
      {dir.sub("db"), durability::synced,
       make_fault_injecting_file_system(faults)});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
    secret_buffer_options options;
    options.retry_base = 10ms;
    options.retry_max = 200ms;
    service = spawn_secret_buffer_actors(sys, db, options);
  }

  ~fault_fixture() {
    faults->clear();
    self->send_exit(service.buffer, exit_reason::user_shutdown);
    self->wait_for(service.buffer, service.drain, service.reader);
  }

  std::vector<secret_entry> entries(const std::string& prefix, int n) {
    std::vector<secret_entry> result;
    for (int i = 0; i < n; ++i)
      result.push_back(make_entry(prefix + std::to_string(i),
                                  static_cast<uint8_t>(i)));
    return result;
  }

  void queue(std::vector<secret_entry> xs) {
    bool ok = false;
    self->request(service.buffer, 30s, queue_atom::value, std::move(xs))
      .receive([&](ok_atom) { ok = true; },
               [&](error& err) { CAF_FAIL(sys.render(err)); });
    CAF_REQUIRE(ok);
  }

  error flush(timespan deadline) {
    error result;
    self->request(service.buffer, 60s, flush_atom::value, deadline)
      .receive([](ok_atom) {}, [&](error& err) { result = std::move(err); });
    return result;
  }

  secret_buffer_stats stats() {
    secret_buffer_stats result;
    self->request(service.buffer, 30s, stats_atom::value)
      .receive([&](secret_buffer_stats& x) { result = std::move(x); },
               [&](error& err) { CAF_FAIL(sys.render(err)); });
    return result;
  }

  /// Waits until a batch failed, up to 30 s.
  void wait_for_failure() {
    auto deadline = steady::now() + 30s;
    while (stats().failed_batches == 0) {
      if (steady::now() > deadline)
        CAF_FAIL("no write failed within 30s of the fault");
      self->receive(after(10ms) >> [] {});
    }
  }

  /// Every key answered by the buffer's lookup, in one message.
  bool all_readable(const std::vector<secret_entry>& xs) {
    std::vector<secret_key> keys;
    for (auto& x : xs)
      keys.push_back(x.key());
    bool all = false;
    self->request(service.buffer, 30s, lookup_atom::value, keys)
      .receive(
        [&](std::vector<secret_lookup>& answers) {
          all = answers.size() == xs.size();
          for (std::size_t i = 0; all && i < xs.size(); ++i)
            all = answers[i].found && answers[i].secret == xs[i].secret;
        },
        [&](error& err) { CAF_FAIL(sys.render(err)); });
    return all;
  }

  static bool all_stored(database& store, const std::vector<secret_entry>& xs) {
    std::vector<secret_key> keys;
    for (auto& x : xs)
      keys.push_back(x.key());
    auto rows = read_secrets(store, keys);
    if (!rows)
      return false;
    for (std::size_t i = 0; i < xs.size(); ++i)
      if (!(*rows)[i].found || (*rows)[i].row.entry.secret != xs[i].secret)
        return false;
    return true;
  }

  /// Queues `n` entries in requests of 500, and waits until they are durable.
  void queue_durably(const std::string& prefix, int n) {
    auto xs = entries(prefix, n);
    for (std::size_t i = 0; i < xs.size(); i += 500)
      queue({xs.begin() + static_cast<std::ptrdiff_t>(i),
             xs.begin()
               + static_cast<std::ptrdiff_t>(std::min(xs.size(), i + 500))});
    CAF_REQUIRE(!flush(30s));
  }

  /// Bytes of the database's SST files.
  uint64_t sst_bytes() {
    uint64_t total = 0;
    for (auto& file : std::filesystem::directory_iterator(dir.sub("db")))
      if (file.path().extension() == ".sst")
        total += file.file_size();
    return total;
  }

  /// Waits until the buffer's last error mentions `what`, up to 30 s.
  void wait_for_error(const std::string& what) {
    auto deadline = steady::now() + 30s;
    while (stats().last_error.find(what) == std::string::npos) {
      if (steady::now() > deadline)
        CAF_FAIL("no error mentioning '" << what << "' within 30s, last: "
                                         << stats().last_error);
      self->receive(after(10ms) >> [] {});
    }
  }

  /// The whole story of one fault: entries queued before and during it stay
  /// readable, a flush with a deadline reports the failure, and once the
  /// fault clears everything is written, in RocksDB and after a reopen.
  /// `provoke` makes the fault bite (a write or a memtable flush);
  /// `while_failing` checks what the fault must have led to.
  template <class Provoke, class WhileFailing = void (*)()>
  void survive(const char* name, Provoke provoke,
               WhileFailing while_failing = [] {}) {
    auto before = entries("before-", 40);
    queue(before);
    CAF_REQUIRE(!flush(30s));
    provoke();
    auto during = entries("during-", 40);
    queue(during);
    wait_for_failure();
    while_failing();
    CAF_CHECK(all_readable(before));
    CAF_CHECK(all_readable(during));
    auto err = flush(300ms);
    CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::storage_failed));
    CAF_MESSAGE(name << ": a flush during the fault answers: "
                     << sys.render(err));
    auto st = stats();
    CAF_CHECK_GREATER(st.failing_for_ms + st.retries, 0u);
    CAF_CHECK(!st.last_error.empty());
    CAF_CHECK(all_readable(during));
    faults->clear();
    auto cleared = steady::now();
    CAF_REQUIRE(!flush(30s));
    auto recovery = std::chrono::duration_cast<std::chrono::milliseconds>(
      steady::now() - cleared);
    CAF_MESSAGE(name << ": recovered " << recovery.count()
                     << " ms after the fault cleared");
    CAF_CHECK_LESS(recovery, std::chrono::milliseconds{10000});
    CAF_CHECK(all_stored(*db, before));
    CAF_CHECK(all_stored(*db, during));
    CAF_CHECK(stats().last_error.empty());
    // After a reopen, without the seam.
    self->send_exit(service.buffer, exit_reason::user_shutdown);
    self->wait_for(service.buffer, service.drain, service.reader);
    static_cast<void>(db->close());
    auto reopened = database::open({dir.sub("db"), durability::synced});
    CAF_REQUIRE(reopened.engaged());
    CAF_CHECK(all_stored(**reopened, before));
    CAF_CHECK(all_stored(**reopened, during));
    service = spawn_secret_buffer_actors(sys, *reopened, secret_buffer_options{});
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(secret_buffer_fault_tests, fault_fixture)

/// Measured: EIO on a WAL append is fatal for RocksDB (Resume() fails), so
/// the database owner closes and reopens it.
CAF_TEST(nothing is lost when wal appends fail with eio) {
  survive("EIO on WAL append", [&] {
    faults->kind = static_cast<int>(fault_kind::eio);
    faults->wal_append = true;
  });
}

/// A write that reported failure may still have reached the WAL (measured):
/// the retry writes it again, harmlessly.
CAF_TEST(nothing is lost when wal syncs fail with eio) {
  survive("EIO on WAL sync", [&] {
    faults->kind = static_cast<int>(fault_kind::eio);
    faults->wal_sync = true;
  });
}

CAF_TEST(nothing is lost when a memtable flush fails) {
  survive("failed flush", [&] {
    faults->kind = static_cast<int>(fault_kind::eio);
    faults->sst_append = true;
    CAF_CHECK(compact_secrets(*db) != caf::none);
  });
}

/// ENOSPC is a hard error RocksDB recovers from by itself once space is back.
CAF_TEST(nothing is lost when the disk is full) {
  survive("ENOSPC on WAL append", [&] {
    faults->kind = static_cast<int>(fault_kind::enospc);
    faults->wal_append = true;
  });
}

/// A real full disk fails every file at once, not just the WAL: measured on
/// a filled tmpfs, RocksDB's own LOG file failed first and the process
/// aborted. The seam's `disk_full` plays that disk.
CAF_TEST(nothing is lost when every file of the disk is full) {
  survive("full disk", [&] { faults->disk_full = true; });
}

CAF_TEST(nothing is lost when the disk fills during a memtable flush) {
  survive("disk filled during a memtable flush", [&] {
    // About 1.5 MB of secrets in the memtable: the flush's SST outgrows
    // RocksDB's 1 MiB write buffer, so the disk fills between its appends.
    queue_durably("bulk-", 12000);
    faults->space_left = 64 * 1024;
    CAF_CHECK(compact_secrets(*db) != caf::none);
    CAF_CHECK(faults->disk_full.load());
  });
}

CAF_TEST(nothing is lost when the disk fills during a compaction) {
  survive("disk filled during a compaction", [&] {
    queue_durably("bulk-", 12000);
    CAF_REQUIRE(!compact_secrets(*db));
    queue_durably("more-", 200);
    // Room for the small memtable flush, not for the compaction that
    // rewrites every row after it.
    faults->space_left = static_cast<long long>(sst_bytes() / 2);
    CAF_CHECK(compact_secrets(*db) != caf::none);
    CAF_CHECK(faults->disk_full.load());
  });
}

/// EIO on the WAL needs a reopen, and the reopen needs space for a new
/// MANIFEST, WAL and OPTIONS file: while the disk is full the read-only
/// instance serves reads, and the next recovery after space returns
/// reopens for writes.
CAF_TEST(nothing is lost when the reopen fails because the disk is full) {
  survive(
    "reopen on a full disk",
    [&] {
      faults->kind = static_cast<int>(fault_kind::eio);
      faults->wal_append = true;
      faults->disk_full = true;
    },
    [&] { wait_for_error("opening the database"); });
}

CAF_TEST(a retryable error is retried until it clears) {
  survive("retryable EIO on WAL append", [&] {
    faults->kind = static_cast<int>(fault_kind::retryable);
    faults->wal_append = true;
  });
}

CAF_TEST_FIXTURE_SCOPE_END()

namespace {

/// A database behind the seam in which A was written, then B failed with
/// EIO on the WAL, whose appends still fail.
std::shared_ptr<database>
with_a_failed_wal_write(const temp_dir& dir,
                        std::shared_ptr<fault_switches> faults) {
  auto opened = database::open(
    {dir.sub("db"), durability::synced, make_fault_injecting_file_system(faults)});
  CAF_REQUIRE(opened.engaged());
  auto db = std::move(*opened);
  CAF_REQUIRE(!write_secrets(*db, {capture(make_entry("A", 1), 1)}));
  faults->wal_append = true;
  CAF_CHECK(write_secrets(*db, {capture(make_entry("B", 2), 1)}) != caf::none);
  return db;
}

} // namespace

/// Measured: after EIO on the WAL, RocksDB's Close() itself reports the
/// error ("Seen error"); the owner reopens regardless, and the database
/// serves reads and, once the fault clears, writes again.
CAF_TEST(a close that fails after a fault does not stop the reopen) {
  temp_dir dir;
  auto faults = std::make_shared<fault_switches>();
  auto db = with_a_failed_wal_write(dir, faults);
  CAF_CHECK_EQUAL(db->recover(), caf::none);
  CAF_CHECK(db->healthy());
  auto rows = read_secrets(*db, {key_of("A")});
  CAF_REQUIRE(rows.engaged());
  CAF_CHECK(rows->front().found);
  faults->clear();
  CAF_CHECK_EQUAL(write_secrets(*db, {capture(make_entry("C", 3), 1)}),
                  caf::none);
  CAF_CHECK(!db->close());
}

CAF_TEST(a reopen refused by a full disk leaves reads served until space returns) {
  temp_dir dir;
  auto faults = std::make_shared<fault_switches>();
  auto db = with_a_failed_wal_write(dir, faults);
  faults->disk_full = true;
  auto refused = db->recover();
  CAF_CHECK_NOT_EQUAL(refused, caf::none);
  CAF_MESSAGE("the reopen on a full disk answers: " << to_string(refused));
  CAF_CHECK(!db->healthy());
  auto rows = read_secrets(*db, {key_of("A")});
  CAF_REQUIRE(rows.engaged());
  CAF_CHECK(rows->front().found);
  CAF_CHECK(write_secrets(*db, {capture(make_entry("C", 3), 1)}) != caf::none);
  faults->clear();
  CAF_CHECK_EQUAL(db->ready_for_writes(), caf::none);
  CAF_CHECK(db->healthy());
  CAF_CHECK_EQUAL(write_secrets(*db, {capture(make_entry("D", 4), 1)}),
                  caf::none);
  CAF_CHECK(!db->close());
  auto reopened = database::open({dir.sub("db"), durability::synced});
  CAF_REQUIRE(reopened.engaged());
  auto after_restart = read_secrets(**reopened, {key_of("A"), key_of("D")});
  CAF_REQUIRE(after_restart.engaged());
  CAF_CHECK((*after_restart)[0].found);
  CAF_CHECK((*after_restart)[1].found);
}
