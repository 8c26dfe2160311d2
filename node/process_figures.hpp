#pragma once

#include <optional>

/// The figures of this process that Prometheus' `process_*` metrics carry,
/// read from /proc (Linux).
namespace coalesce {

struct process_figures {
  /// User and system CPU time used, in seconds.
  double cpu_seconds = 0;
  /// Resident and virtual memory, in bytes.
  double resident_bytes = 0;
  double virtual_bytes = 0;
  /// File descriptors open, and the limit on them.
  double open_fds = 0;
  double max_fds = 0;
  /// When the process started, in seconds since the Unix epoch.
  double start_time_seconds = 0;
};

/// The moment's figures; nothing when /proc cannot be read.
std::optional<process_figures> read_process_figures();

} // namespace coalesce
