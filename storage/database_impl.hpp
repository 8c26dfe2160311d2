#pragma once

#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include "storage/database.hpp"

/// storage/'s internal view of the database: RocksDB types live only here
/// and in storage/*.cpp.
namespace coalesce::storage {

/// Names of the column families this build uses.
constexpr const char* meta_family = "default";
constexpr const char* secrets_family = "secrets";
constexpr const char* timeline_family = "timeline";

struct database::impl {
  database_options options;
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

} // namespace coalesce::storage
