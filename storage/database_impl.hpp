#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/families.hpp>

/// storage/'s internal view of the database: RocksDB types live only here
/// and in storage/*.cpp.
namespace coalesce::storage {

struct database::impl {
  database_options options;
  /// Shared by every use of the handles, exclusive for close and reopen.
  std::shared_mutex mutex;
  /// The environment over `options.file_system`, when the seam is used.
  std::unique_ptr<rocksdb::Env> env;
  /// RocksDB's info log, forwarded to spdlog: RocksDB writes no LOG file
  /// (see storage/rocksdb_logger.hpp).
  std::shared_ptr<rocksdb::Logger> info_log;
  /// Set by `close`: the owner is done, so `recover` must not reopen.
  bool closed_by_owner = false;
  /// Opened read-only after a failed reopen: reads work, writes fail until
  /// `recover` manages a writable reopen.
  bool read_only = false;
  health current_health = health::healthy;
  /// When each kind of transition was last logged (see set_health).
  std::map<std::string, std::chrono::steady_clock::time_point> logged_shapes;

  /// Logs a change of health once.
  void set_health(health next, const std::string& detail);
  std::unique_ptr<rocksdb::DB> db;
  /// Every family open, known or not.
  std::vector<rocksdb::ColumnFamilyHandle*> families;
  /// The known families' handles, by `family` (see families.hpp).
  std::array<rocksdb::ColumnFamilyHandle*, family_count> known{};
  /// Which instance `db` is: one more with every reopen. Written under the
  /// exclusive lock only.
  uint64_t generation = 1;
  /// The instance on which an operation last failed in RocksDB, 0 for none:
  /// `recover` reopens only while it is still the current one, so writers
  /// that failed on one instance reopen it once.
  std::atomic<uint64_t> failed_generation{0};
  /// Reopens attempted since the database was opened.
  std::atomic<uint64_t> reopens{0};
  /// Written by every storage write (`write`) and by RocksDB's listener.
  latency_recorder write_latency;
  latency_recorder fsync_latency;
  /// Why the last reopen failed, none after one succeeded: the answer to
  /// writers whose failed instance was replaced by a failed reopen.
  caf::error last_reopen_error;

  /// Healthy, writable, and no operation failed on this instance: what
  /// `database::healthy` answers. Called under the lock.
  bool writable() const;

  /// What a caller whose failed instance was replaced is answered: none
  /// when the replacement is writable, else why not.
  caf::error outcome_of_last_reopen() const;

  rocksdb::ColumnFamilyHandle* handle(family x) const {
    return known[static_cast<std::size_t>(x)];
  }

  /// The WAL sync of one write batch: as `mode` says, else as the
  /// database's options say.
  rocksdb::WriteOptions write_options(std::optional<durability> mode) const {
    rocksdb::WriteOptions result;
    result.sync = mode.value_or(options.mode) == durability::synced;
    return result;
  }

  /// Writes `batch` as `mode` says and records how long RocksDB took.
  /// Called under the shared lock.
  rocksdb::Status write(std::optional<durability> mode,
                        rocksdb::WriteBatch* batch) {
    auto start = std::chrono::steady_clock::now();
    auto status = db->Write(write_options(mode), batch);
    write_latency.record(std::chrono::steady_clock::now() - start);
    return status;
  }

  /// Notes `failure` against the current instance when it came from
  /// RocksDB (see `failed_generation`). Called under the shared lock.
  void note_failure(const caf::error& failure);
};

/// Turns a RocksDB status into a coalesce error (none when ok).
caf::error to_error(const rocksdb::Status& status, const char* what);

/// The error for a use of a database that is closed or being reopened.
inline caf::error check_open(const database::impl& state) {
  if (!state.db)
    return make_error(errc::storage_failed, "the database is closed");
  return caf::none;
}

inline const caf::error& failure_of(const caf::error& result) {
  return result;
}

template <class T>
caf::error failure_of(const caf::expected<T>& result) {
  return result ? caf::error{} : result.error();
}

/// The opening of every storage function: takes the shared lock, refuses a
/// closed database, runs `use` on the open state and notes a RocksDB
/// failure against the instance it happened on (for `recover`). `use`
/// returns a caf::error or a caf::expected.
template <class Use>
auto with_open_database(database& db, Use&& use)
  -> decltype(use(db.internals())) {
  auto& state = db.internals();
  std::shared_lock<std::shared_mutex> in_use{state.mutex};
  if (auto err = check_open(state))
    return err;
  auto result = use(state);
  if (auto&& failure = failure_of(result))
    state.note_failure(failure);
  return result;
}

} // namespace coalesce::storage
