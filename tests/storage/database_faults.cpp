#define CAF_SUITE storage.database_faults
#include <caf/test/unit_test.hpp>

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>
#include <coalesce/storage/secret_store.hpp>
#include <coalesce/storage/timeline.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;

namespace {

/// Captures what spdlog's default logger receives while it lives.
class captured_log {
public:
  explicit captured_log(spdlog::level::level_enum level)
    : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096)),
      previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("captured", sink_);
    logger->set_level(level);
    spdlog::set_default_logger(logger);
  }

  ~captured_log() {
    spdlog::set_default_logger(previous_);
  }

  std::vector<std::string> lines() {
    return sink_->last_formatted();
  }

  bool has(const std::string& text) {
    return count(text) > 0;
  }

  std::size_t count(const std::string& text) {
    std::size_t result = 0;
    for (auto& line : lines())
      if (line.find(text) != std::string::npos)
        ++result;
    return result;
  }

private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

bool has_log_file(const std::string& path) {
  for (auto& file : std::filesystem::directory_iterator(path))
    if (file.path().filename().string().rfind("LOG", 0) == 0)
      return true;
  return false;
}

std::vector<secret_write> round_of(int round) {
  std::vector<secret_write> result;
  for (int i = 0; i < 300; ++i)
    result.push_back(capture(make_entry("r" + std::to_string(round) + "-"
                                          + std::to_string(i),
                                        static_cast<uint8_t>(round + i)),
                             round));
  return result;
}

std::vector<timeline_event> events_of(int round) {
  std::vector<timeline_event> result;
  for (int i = 0; i < 20; ++i) {
    timeline_event event;
    event.event_id = "e" + std::to_string(round) + "-" + std::to_string(i);
    event.type = "m.room.message";
    event.timestamp = round * 100 + i;
    event.body = std::string(200, 'x');
    result.push_back(std::move(event));
  }
  return result;
}

/// Every capture of the acknowledged rounds is stored with its secret.
bool all_stored(database& db, const std::vector<int>& rounds) {
  for (int round : rounds) {
    auto writes = round_of(round);
    std::vector<secret_key> keys;
    for (auto& x : writes)
      keys.push_back(x.entry.key());
    auto rows = read_secrets(db, keys);
    if (!rows)
      return false;
    for (std::size_t i = 0; i < writes.size(); ++i)
      if (!(*rows)[i].found
          || (*rows)[i].row.entry.secret != writes[i].entry.secret)
        return false;
  }
  return true;
}

} // namespace

CAF_TEST(rocksdb writes no log file of its own and logs through spdlog) {
  temp_dir dir;
  {
    captured_log log{spdlog::level::info};
    auto db = database::open({dir.sub("db")});
    CAF_REQUIRE(db.engaged());
    CAF_CHECK(!(*db)->close());
    CAF_CHECK(log.has("rocksdb: "));
    // The options dump is RocksDB's header: debug, not info.
    CAF_CHECK(!log.has("Options.max_open_files"));
  }
  CAF_CHECK(!has_log_file(dir.sub("db")));
  {
    captured_log log{spdlog::level::debug};
    auto db = database::open({dir.sub("db")});
    CAF_REQUIRE(db.engaged());
    CAF_CHECK(!(*db)->close());
    CAF_CHECK(log.has("Options.max_open_files"));
  }
  {
    captured_log log{spdlog::level::warn};
    auto db = database::open({dir.sub("db")});
    CAF_REQUIRE(db.engaged());
    CAF_CHECK(!(*db)->close());
    CAF_CHECK(!log.has("rocksdb: "));
  }
  CAF_CHECK(!has_log_file(dir.sub("db")));
}

/// RocksDB logs an error for the directory of a database it is about to
/// create: on a node's first start that is no error.
CAF_TEST(creating a database logs no rocksdb error) {
  temp_dir dir;
  captured_log log{spdlog::level::info};
  auto db = database::open({dir.sub("db")});
  CAF_REQUIRE(db.engaged());
  CAF_CHECK(!(*db)->close());
  CAF_CHECK(log.has("rocksdb: "));
  CAF_CHECK(!log.has("[error] rocksdb:"));
}

/// While the disk stays full every retry fails the reopen again, and
/// RocksDB warns each time: the operator reads it once a minute.
CAF_TEST(a rocksdb warning repeated at every retry is logged once) {
  temp_dir dir;
  auto faults = std::make_shared<fault_switches>();
  auto opened = database::open({dir.sub("db"), durability::synced,
                                make_fault_injecting_file_system(faults)});
  CAF_REQUIRE(opened.engaged());
  auto db = std::move(*opened);
  captured_log log{spdlog::level::info};
  faults->disk_full = true;
  for (int attempt = 0; attempt < 3; ++attempt)
    CAF_CHECK_NOT_EQUAL(db->recover(), caf::none);
  CAF_CHECK_EQUAL(log.count("DB::Open() failed"), 1u);
  faults->clear();
  CAF_CHECK_EQUAL(db->recover(), caf::none);
}

/// The disk fills at a different point of every run: in a WAL append, an
/// SST of a memtable flush, a compaction's output, a MANIFEST or OPTIONS
/// write. The process must not abort (RocksDB 7.8 as Debian builds it
/// asserts on several error paths), reads go on while the disk is full,
/// and once space returns every acknowledged write is there, in the same
/// instance and after a reopen.
CAF_TEST(the database survives the disk filling anywhere) {
  for (long long budget : {0LL, 1LL, 100LL, 4096LL, 30000LL, 100000LL,
                           250000LL, 700000LL, 1500000LL, 3000000LL}) {
    CAF_MESSAGE("space left when the test starts: " << budget << " bytes");
    temp_dir dir;
    auto faults = std::make_shared<fault_switches>();
    auto opened = database::open({dir.sub("db"), durability::synced,
                                  make_fault_injecting_file_system(faults)});
    CAF_REQUIRE(opened.engaged());
    auto db = std::move(*opened);
    std::vector<int> acknowledged;
    uint64_t appended_events = 0;
    faults->space_left = budget;
    for (int round = 0; round < 400 && !faults->disk_full; ++round) {
      if (db->ready_for_writes())
        continue;
      auto failed = write_secrets(*db, round_of(round));
      if (!failed)
        acknowledged.push_back(round);
      else
        db->recover_after(failed);
      if (!append_events(*db, "!room:x", events_of(round)))
        appended_events += 20;
      if (round % 7 == 6)
        static_cast<void>(compact_secrets(*db));
    }
    CAF_REQUIRE(faults->disk_full.load());
    CAF_CHECK_NOT_EQUAL(db->recover(), caf::none);
    CAF_CHECK(all_stored(*db, acknowledged));
    faults->clear();
    CAF_REQUIRE_EQUAL(db->recover(), caf::none);
    CAF_CHECK_EQUAL(write_secrets(*db, round_of(1000)), caf::none);
    acknowledged.push_back(1000);
    CAF_CHECK(all_stored(*db, acknowledged));
    CAF_CHECK(!db->close());
    auto reopened = database::open({dir.sub("db"), durability::synced});
    CAF_REQUIRE(reopened.engaged());
    CAF_CHECK(all_stored(**reopened, acknowledged));
    auto events = count_events(**reopened, "!room:x");
    CAF_REQUIRE(events.engaged());
    CAF_CHECK_EQUAL(*events, appended_events);
  }
}

namespace {

/// A database behind the seam, in `mode`.
std::shared_ptr<database>
open_behind_seam(const temp_dir& dir, std::shared_ptr<fault_switches> faults,
                 durability mode = durability::synced) {
  auto opened = database::open(
    {dir.sub("db"), mode, make_fault_injecting_file_system(std::move(faults))});
  CAF_REQUIRE(opened.engaged());
  return std::move(*opened);
}

/// WAL syncs that `write` makes.
template <class Write>
int wal_syncs_of(const fault_switches& faults, Write&& write) {
  auto before = faults.wal_syncs.load();
  CAF_REQUIRE_EQUAL(write(), caf::none);
  return faults.wal_syncs.load() - before;
}

/// Lets `parties` threads wait until all of them have arrived.
class meeting_point {
public:
  explicit meeting_point(int parties) : waiting_(parties) {
    // nop
  }

  /// Blocks until every party arrived; the last one runs `last` first.
  void arrive_and_wait(const std::function<void()>& last = nullptr) {
    std::unique_lock<std::mutex> guard{mutex_};
    if (--waiting_ == 0) {
      if (last)
        last();
      all_arrived_.notify_all();
      return;
    }
    all_arrived_.wait(guard, [this] { return waiting_ == 0; });
  }

private:
  std::mutex mutex_;
  std::condition_variable all_arrived_;
  int waiting_;
};

} // namespace

CAF_TEST(each write may choose its own durability) {
  temp_dir dir;
  auto faults = std::make_shared<fault_switches>();
  auto db = open_behind_seam(dir, faults, durability::buffered);
  auto batch = [](const char* id) {
    return std::vector<secret_write>{capture(make_entry(id, 1), 1)};
  };
  CAF_CHECK_EQUAL(wal_syncs_of(*faults,
                               [&] { return write_secrets(*db, batch("A")); }),
                  0);
  CAF_CHECK(wal_syncs_of(*faults,
                            [&] {
                              return write_secrets(*db, batch("B"),
                                                   durability::synced);
                            }) > 0);
  CAF_CHECK(wal_syncs_of(*faults,
                            [&] {
                              return append_events(*db, "!r", events_of(1),
                                                   durability::synced);
                            }) > 0);
  CAF_CHECK_EQUAL(wal_syncs_of(*faults,
                               [&] {
                                 return append_events(*db, "!r",
                                                      events_of(2));
                               }),
                  0);
  CAF_REQUIRE(!db->close());
  temp_dir synced_dir;
  db = open_behind_seam(synced_dir, faults, durability::synced);
  CAF_CHECK(wal_syncs_of(*faults,
                            [&] { return write_secrets(*db, batch("C")); }) > 0);
  CAF_CHECK_EQUAL(wal_syncs_of(*faults,
                               [&] {
                                 return write_secrets(*db, batch("D"),
                                                      durability::buffered);
                               }),
                  0);
  auto page = page_backwards(*db, "!r", 1);
  CAF_REQUIRE(page.engaged());
  CAF_CHECK_EQUAL(wal_syncs_of(*faults,
                               [&] {
                                 return reset_position(*db, "!r",
                                                       durability::buffered);
                               }),
                  0);
  auto rows = read_secrets(*db, {key_of("C"), key_of("D")});
  CAF_REQUIRE(rows.engaged());
  CAF_CHECK((*rows)[0].found && (*rows)[1].found);
  CAF_CHECK(!db->close());
}

/// Two writers whose writes failed on one instance both ask for recovery:
/// the first reopens, the second finds the instance already replaced.
CAF_TEST(two writers that failed on one instance reopen it once) {
  temp_dir dir;
  auto faults = std::make_shared<fault_switches>();
  auto db = open_behind_seam(dir, faults);
  CAF_REQUIRE(!write_secrets(*db, round_of(1)));
  faults->wal_append = true;
  auto first = write_secrets(*db, round_of(2));
  auto second = append_events(*db, "!r", events_of(2));
  CAF_REQUIRE_NOT_EQUAL(first, caf::none);
  CAF_REQUIRE_NOT_EQUAL(second, caf::none);
  faults->clear();
  auto generation = db->generation();
  db->recover_after(first);
  db->recover_after(second);
  CAF_CHECK_EQUAL(db->reopens(), 1u);
  CAF_CHECK_EQUAL(db->generation(), generation + 1);
  CAF_CHECK_EQUAL(db->ready_for_writes(), caf::none);
  CAF_CHECK_EQUAL(db->reopens(), 1u);
  CAF_CHECK_EQUAL(write_secrets(*db, round_of(3)), caf::none);
  CAF_CHECK(all_stored(*db, {1, 3}));
  CAF_CHECK(!db->close());
}

CAF_TEST(two threads that hit one fault reopen the database once) {
  temp_dir dir;
  auto faults = std::make_shared<fault_switches>();
  auto db = open_behind_seam(dir, faults);
  faults->wal_append = true;
  meeting_point ready{2};
  meeting_point failed{2};
  auto writer = [&](int round, caf::error& outcome) {
    auto checked = db->ready_for_writes();
    // Both check before either fails, so neither recovers up front.
    ready.arrive_and_wait();
    auto err = checked ? checked : write_secrets(*db, round_of(round));
    failed.arrive_and_wait([&] { faults->clear(); });
    if (checked) {
      outcome = checked;
      return;
    }
    if (!err) {
      outcome = make_error(errc::invalid_request, "the write did not fail");
      return;
    }
    db->recover_after(err);
    outcome = db->ready_for_writes();
  };
  caf::error first;
  caf::error second;
  std::thread a{[&] { writer(1, first); }};
  std::thread b{[&] { writer(2, second); }};
  a.join();
  b.join();
  CAF_CHECK_EQUAL(first, caf::none);
  CAF_CHECK_EQUAL(second, caf::none);
  CAF_CHECK_EQUAL(db->reopens(), 1u);
  CAF_CHECK_EQUAL(write_secrets(*db, round_of(3)), caf::none);
  CAF_CHECK(all_stored(*db, {3}));
  CAF_CHECK(!db->close());
}

/// The first writer's reopen fails on a full disk: the second writer does
/// not reopen again for the same fault, and the next check before a write
/// retries.
CAF_TEST(a writer whose instance a failed reopen replaced does not reopen again) {
  temp_dir dir;
  auto faults = std::make_shared<fault_switches>();
  auto db = open_behind_seam(dir, faults);
  faults->wal_append = true;
  auto first = write_secrets(*db, round_of(1));
  auto second = write_secrets(*db, round_of(2));
  CAF_REQUIRE_NOT_EQUAL(first, caf::none);
  CAF_REQUIRE_NOT_EQUAL(second, caf::none);
  faults->disk_full = true;
  db->recover_after(first);
  CAF_CHECK_EQUAL(db->reopens(), 1u);
  CAF_CHECK(!db->healthy());
  db->recover_after(second);
  CAF_CHECK_EQUAL(db->reopens(), 1u);
  CAF_CHECK_NOT_EQUAL(db->ready_for_writes(), caf::none);
  CAF_CHECK_EQUAL(db->reopens(), 2u);
  faults->clear();
  CAF_CHECK_EQUAL(db->ready_for_writes(), caf::none);
  CAF_CHECK_EQUAL(db->reopens(), 3u);
  CAF_CHECK_EQUAL(write_secrets(*db, round_of(3)), caf::none);
  CAF_CHECK(all_stored(*db, {3}));
  CAF_CHECK(!db->close());
}
