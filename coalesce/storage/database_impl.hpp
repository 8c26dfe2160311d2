#pragma once

#include <memory>
#include <chrono>
#include <map>
#include <shared_mutex>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>

#include "coalesce/messages/errc.hpp"
#include "coalesce/storage/database.hpp"

/// storage/'s internal view of the database: RocksDB types live only here
/// and in storage/*.cpp.
namespace coalesce::storage {

/// Names of the column families this build uses.
constexpr const char* meta_family = "default";
constexpr const char* secrets_family = "secrets";
constexpr const char* timeline_family = "timeline";

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
  std::vector<rocksdb::ColumnFamilyHandle*> families;
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  rocksdb::ColumnFamilyHandle* secrets = nullptr;
  rocksdb::ColumnFamilyHandle* timeline = nullptr;
  /// WAL sync per batch as `options.mode` says.
  rocksdb::WriteOptions write_options;
};

/// Options of the secrets column family: the merge operator and the
/// compaction filter that purges expired rows.
rocksdb::ColumnFamilyOptions secrets_family_options();

/// Turns a RocksDB status into a coalesce error (none when ok).
caf::error to_error(const rocksdb::Status& status, const char* what);

/// The error for a use of a database that is closed or being reopened.
inline caf::error check_open(const database::impl& state) {
  if (!state.db)
    return make_error(errc::storage_failed, "the database is closed");
  return caf::none;
}

/// Holds the shared lock for one use of the handles.
using database_use = std::shared_lock<std::shared_mutex>;

} // namespace coalesce::storage
