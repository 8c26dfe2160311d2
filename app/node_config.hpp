#pragma once

#include <cstdint>
#include <string>

#include <caf/actor_system_config.hpp>

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
};

/// Checks the settings that CAF's parser cannot; returns a sentence naming
/// the key and the value, or an empty string when all are valid.
std::string validate(const node_config& cfg);

} // namespace coalesce
