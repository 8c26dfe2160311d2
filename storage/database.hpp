#pragma once

#include <memory>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <coalesce/storage/durability.hpp>
#include <coalesce/storage/latency_recorder.hpp>

namespace rocksdb {
class FileSystem;
} // namespace rocksdb

/// The node's one RocksDB instance.
///
/// Only storage/ opens the database, tests and tools included: a database
/// opened once without coalesce's merge operator cannot read rows that exist
/// only as merge operands, and a compaction run by such an instance would
/// lose them.
///
/// On open it lists the column families already in the directory, opens them
/// all, and creates the ones this build knows (`known_families()`,
/// storage/families.hpp) but the directory lacks, so a newer build adds its
/// services' families to an existing database. A format
/// version key refuses databases written by a newer, incompatible build.
///
/// It is the one owner of the RocksDB handle for every service: `recover`
/// clears RocksDB's background-error state after a failed write without a
/// process restart, by closing and reopening the database while callers
/// wait; while a reopen fails (a disk still full), a read-only instance
/// serves reads. Every storage call notes the instance (its generation) on
/// which RocksDB failed it, and `recover` checks again under its exclusive
/// lock: writers that failed on one instance reopen it once, the others
/// find it replaced. RocksDB's own recovery is not waited for: after a full
/// disk it needs 64 MiB free, which a small disk never has (measured).
/// Each transition is logged once, with the error. RocksDB's info log goes
/// to spdlog (storage/rocksdb_logger.hpp): it writes no LOG file, whose
/// failed appends on a full disk aborted the process (measured).
///
/// Durability is chosen per write: every write function takes an optional
/// `durability`, and `database_options::mode` is the default of the writes
/// that do not choose.
///
/// Thread safety: any number of threads may use the database at once
/// (RocksDB's own guarantee, behind a shared lock); a reopen takes the lock
/// exclusively, so requests wait for it rather than touch a closed handle.
/// All methods may block on disk I/O and belong on detached actors or plain
/// threads, never on CAF's scheduler threads. Errors come back as coalesce
/// errors; `rocksdb::Status` never leaves storage/.
namespace coalesce::storage {

struct database_options {
  database_options() = default;

  database_options(std::string path, durability mode = durability::synced,
                   std::shared_ptr<rocksdb::FileSystem> file_system = nullptr)
    : path(std::move(path)),
      mode(mode),
      file_system(std::move(file_system)) {
    // nop
  }

  /// Directory of the database; created when missing.
  std::string path;
  /// Whether a write batch that does not choose its own durability is
  /// fsynced (see `durability`).
  durability mode = durability::synced;
  /// Test seam only (storage/fault_injection.hpp): the file system RocksDB
  /// writes through. Null in production: the default file system.
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

/// What `recover` found the database in; logged on every change.
enum class health : uint8_t {
  healthy,
  /// A write failed: the database is being closed and reopened.
  reopening,
  /// Reopening failed; the next `recover` tries again.
  down,
};

/// What the database can say of its state at one moment (the metrics).
struct database_status {
  health state = health::healthy;
  /// What `healthy()` answers.
  bool writable = true;
  /// A read-only instance serves reads while reopening fails.
  bool read_only = false;
  uint64_t generation = 1;
  uint64_t reopens = 0;
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

  /// Records, durably, that the process stopped with everything written
  /// (the node's clean shutdown).
  caf::error mark_clean_stop();

  /// Whether the last stop was marked clean, removing the mark durably: a
  /// crash from now on finds none. A clustered node that finds none may
  /// have lost captures it had acknowledged from memory, and catches up
  /// from its peers before it answers reads (coalesce/node/secret_sync.hpp).
  caf::expected<bool> take_clean_stop_mark();

  /// The cluster list this node last agreed to, as
  /// coalesce/node/cluster_list.hpp encodes it; empty when none was stored
  /// (a new node, or one that never ran in a cluster).
  caf::expected<std::string> stored_cluster_list();

  /// Stores `encoded` as the cluster list, durably, before the node serves
  /// under it.
  caf::error store_cluster_list(const std::string& encoded);

  /// Syncs the WAL and closes the database; later calls fail.
  caf::error close();

  /// Whether the last `recover` (or none yet) left the database healthy and
  /// no operation has failed in RocksDB since. While not, writes and WAL
  /// syncs must go through `recover` first:
  /// RocksDB 7.8 as Debian builds it asserts when a WAL that failed an
  /// append is synced during its own recovery (measured: abort()).
  bool healthy() const;

  /// Before a write: none when the database is healthy, else what `recover`
  /// answers. Every actor that writes goes through this, so a fault seen by
  /// one service is cleared before any other writes again.
  caf::error ready_for_writes();

  /// After a failed write: asks for recovery when the failure came from
  /// RocksDB (not from a refused request), so the next write can succeed;
  /// no reopen when another caller replaced the instance the write failed
  /// on since.
  void recover_after(const caf::error& failure);

  /// After a failed operation: clears RocksDB's background error by closing
  /// and reopening the database (see `reopen` in database.cpp for why never
  /// by `Resume()`), unless a concurrent caller reopened it meanwhile.
  /// Returns none once writes may succeed again, or the error that still
  /// stands.
  caf::error recover();

  /// Which RocksDB instance serves: 1 when opened, one more with every
  /// reopen.
  uint64_t generation() const;

  /// Reopens attempted since `open` (stats and tests).
  uint64_t reopens() const;

  /// The state as `recover` left it; takes the shared lock, so it waits
  /// for a reopen in progress.
  database_status status() const;

  /// How long each write batch took in RocksDB (a synced one includes its
  /// WAL fsync), the format version's write excepted.
  const latency_recorder& write_latency() const;

  /// How long each file sync RocksDB made took (fsync or fdatasync of the
  /// WAL, of new table files and of the MANIFEST), as RocksDB's listener
  /// reports them.
  const latency_recorder& fsync_latency() const;

  /// The durability of writes that do not choose their own.
  durability mode() const;

  const std::string& path() const;

  /// For storage/ only: the RocksDB handles.
  impl& internals();

private:
  /// `recover`, unless the instance `failed_generation` was replaced
  /// meanwhile; `why` for the log line.
  caf::error reopen(uint64_t failed_generation, const std::string& why);

  std::unique_ptr<impl> impl_;
};

/// The format version this build writes and understands.
constexpr int database_format_version = 1;

} // namespace coalesce::storage
