#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>
#include <caf/timespan.hpp>

namespace coalesce {

/// coalesce-node's settings, all under the `coalesce` group: in the INI file
/// as `[coalesce]` keys, on the command line as `--coalesce.KEY=VALUE`.
/// Defaults live here; config/coalesce.ini documents every key.
struct node_config : caf::actor_system_config {
  node_config();

  /// Directory of the node's RocksDB database.
  std::string db_path = "data";
  /// "synced" (fsync per batch) or "buffered" (WAL without fsync).
  std::string durability = "synced";
  /// Distinct pending secrets before producers wait; must be positive.
  std::size_t secrets_pending_limit = 4096;
  /// spdlog level: trace, debug, info, warn, error, critical or off.
  std::string log_level = "info";
  /// Address the node accepts connections on.
  std::string host = "127.0.0.1";
  /// Port the node accepts connections on; 0 picks a free one.
  uint16_t port = 4300;
  /// How long a shutdown may take to seal and flush the services.
  caf::timespan shutdown_timeout = std::chrono::seconds{30};
  /// How often a stats line is logged; 0 turns it off.
  caf::timespan stats_interval = std::chrono::seconds{60};
  /// First delay before a failed secrets batch is retried; doubles per
  /// failure up to `secrets_retry_max`.
  caf::timespan secrets_retry_base = std::chrono::milliseconds{10};
  /// Longest delay between retries of a failed batch; at most 5s.
  caf::timespan secrets_retry_max = std::chrono::seconds{2};
  /// Back-pagination runs at once, all priorities; must be positive.
  std::size_t scheduler_max_concurrent = 3;
  /// Distinct (room, priority) runs that may wait; must be positive.
  std::size_t scheduler_max_queued = 10000;
  /// Runs at once per priority; 0 means no cap.
  std::size_t scheduler_max_concurrent_low = 0;
  std::size_t scheduler_max_concurrent_normal = 0;
  std::size_t scheduler_max_concurrent_high = 0;
  /// How long the pager may take for one batch before a run fails.
  caf::timespan scheduler_pager_timeout = std::chrono::seconds{30};
  /// Bytes of finished back-pagination results kept for a later await;
  /// must be positive.
  std::size_t scheduler_results_memory = std::size_t{64} << 20;

  /// The options of the `coalesce` group (and CAF's own), for checking.
  const caf::config_option_set& options() const {
    return custom_options_;
  }
};

/// Parses the command line and the config file it names, refusing what CAF
/// alone would accept silently: a wrongly typed, negative, out-of-range or
/// unknown `coalesce` value in the file or on the command line. Returns one
/// sentence naming the key and the value, or an empty string on success.
std::string load_node_config(node_config& cfg, int argc, char** argv);

} // namespace coalesce
