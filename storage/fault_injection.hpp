#pragma once

#include <atomic>
#include <memory>

namespace rocksdb {
class FileSystem;
} // namespace rocksdb

/// TEST SEAM, never linked into the shipped node: a file system that makes
/// RocksDB's writes fail on demand, for the faults that cannot be provoked
/// for real in a test (a failing disk). Everything above it is the real
/// RocksDB: open the database with `database_options::file_system =
/// make_fault_injecting_file_system(switches)` and flip the switches.
///
/// Faults hit WAL appends, WAL syncs, or SST appends (so memtable flushes
/// fail); each as EIO, as ENOSPC, or as an EIO that RocksDB is told is
/// retryable. `disk_full` plays a real full disk instead: every write-side
/// operation on every file fails with ENOSPC (creating, reopening or
/// reusing a file, append, positioned append, flush, sync, fsync, range
/// sync, allocate, rename, link, creating a directory; the WAL, SST files,
/// the MANIFEST, CURRENT, OPTIONS, temporary files and anything else), as
/// a filled tmpfs does, where the narrow switches fail one kind of file
/// only. Reads, deletes and truncations (which free space) still work.
/// The switches are atomics: any thread may flip them while the database
/// runs.
namespace coalesce::storage {

enum class fault_kind : int {
  /// A plain I/O error: fatal for RocksDB on the WAL (Resume() fails).
  eio = 0,
  /// No space left on the device: RocksDB recovers by itself once cleared.
  enospc = 1,
  /// An I/O error marked retryable: a soft error RocksDB retries.
  retryable = 2,
};

struct fault_switches {
  std::atomic<bool> wal_append{false};
  std::atomic<bool> wal_sync{false};
  std::atomic<bool> sst_append{false};
  /// Every write-side operation on every file fails with ENOSPC, whatever
  /// `kind` says (after the narrow switches above, which win when both hit).
  std::atomic<bool> disk_full{false};
  /// Bytes the disk can still take, or -1 for no limit: each append takes
  /// its size from it, and the append that does not fit fills the disk
  /// (sets `disk_full`) and fails, wherever RocksDB is at the time, say in
  /// the middle of a memtable flush or a compaction.
  std::atomic<long long> space_left{-1};
  std::atomic<int> kind{static_cast<int>(fault_kind::eio)};
  /// How many operations failed because of a switch.
  std::atomic<int> injected{0};
  /// How many WAL syncs (Sync or Fsync of a `.log` file) reached the disk
  /// and succeeded: lets a test observe that an operation synced the WAL.
  std::atomic<int> wal_syncs{0};

  void clear() {
    wal_append = false;
    wal_sync = false;
    sst_append = false;
    disk_full = false;
    space_left = -1;
  }
};

std::shared_ptr<rocksdb::FileSystem>
make_fault_injecting_file_system(std::shared_ptr<fault_switches> switches);

} // namespace coalesce::storage
