#pragma once

#include <memory>

namespace rocksdb {
class Logger;
} // namespace rocksdb

/// RocksDB's info log, forwarded to spdlog.
///
/// RocksDB writes a `LOG` file of its own by default. On a full disk that
/// file fails an append, and the next line logged to it (the report of the
/// WAL's ENOSPC) reaches a `WritableFileWriter` in an error state, which
/// aborts the process in RocksDB 7.8 as Debian builds it (measured). With
/// this logger as `info_log`, RocksDB opens no log file at all, and its
/// messages land in the node's log, where an operator looks.
///
/// Levels map one to one (debug, info, warn, error, fatal to critical);
/// RocksDB's header lines (the options dump at open), its periodic
/// statistics dumps, its EVENT_LOG_v1 JSON lines and its MANIFEST edit
/// dumps go to debug, and so does a warning or error repeated within a
/// minute (a fault repeats the same ones at every retry). A message of
/// several lines is logged as one. Each message is prefixed `rocksdb:`.
/// The level is read from spdlog's default logger at every message, so the
/// node's `log-level` governs RocksDB's messages too, also when it changes
/// after the database opened.
///
/// Thread safety: RocksDB logs from its background threads; spdlog's
/// default logger is thread safe.
namespace coalesce::storage {

std::shared_ptr<rocksdb::Logger> make_rocksdb_logger();

} // namespace coalesce::storage
