#pragma once

#include <coalesce/node/settings.hpp>

/// How coalesce-node's log lines look on its stdout (spdlog's default
/// logger; RocksDB's lines go through it too):
/// - `log-format = "json"`: one object per line, `{"time": ISO 8601 with
///   microseconds and offset, "level": spdlog's name, "message": ...}`, for
///   log shippers;
/// - otherwise, when stdout is the systemd journal (JOURNAL_STREAM names
///   it): the message after a syslog priority prefix (`<3>` for errors, ...),
///   which journald turns into the entry's priority and strips, so that
///   `journalctl -p err` finds critical and error lines; the journal adds
///   its own time;
/// - otherwise `[time] [level] message`.
namespace coalesce {

void configure_logging(const node_settings& settings);

} // namespace coalesce
