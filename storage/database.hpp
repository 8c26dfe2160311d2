#pragma once

#include <memory>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "storage/durability.hpp"

/// The node's one RocksDB instance.
///
/// Only storage/ opens the database, tests and tools included: a database
/// opened once without coalesce's merge operator cannot read rows that exist
/// only as merge operands, and a compaction run by such an instance would
/// lose them.
///
/// On open it lists the column families already in the directory, opens them
/// all, and creates the ones this build knows but the directory lacks, so a
/// newer build adds its services' families to an existing database. A format
/// version key refuses databases written by a newer, incompatible build.
///
/// Thread safety: RocksDB's own. All methods may block on disk I/O and belong
/// on detached actors or plain threads, never on CAF's scheduler threads.
/// Errors come back as coalesce errors; `rocksdb::Status` never leaves
/// storage/.
namespace coalesce::storage {

struct database_options {
  /// Directory of the database; created when missing.
  std::string path;
  /// Whether each write batch is fsynced (see `durability`).
  durability mode = durability::synced;
};

class database {
public:
  struct impl;

  /// Opens (or creates) the database at `options.path`.
  static caf::expected<std::shared_ptr<database>>
  open(const database_options& options);

  explicit database(std::unique_ptr<impl> state);

  database(const database&) = delete;
  database& operator=(const database&) = delete;

  /// Closes the database if `close` was not called.
  ~database();

  /// Makes every write so far durable, whatever the durability mode.
  caf::error sync_wal();

  /// Syncs the WAL and closes the database; later calls fail.
  caf::error close();

  durability mode() const;

  const std::string& path() const;

  /// For storage/ only: the RocksDB handles.
  impl& internals();

private:
  std::unique_ptr<impl> impl_;
};

/// The format version this build writes and understands.
constexpr int database_format_version = 1;

} // namespace coalesce::storage
