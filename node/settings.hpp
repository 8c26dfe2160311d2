#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include <coalesce/node/metrics_options.hpp>
#include <coalesce/node/cluster_options.hpp>
#include <coalesce/node/service_list.hpp>

namespace rocksdb {
class FileSystem;
} // namespace rocksdb

/// Settings, one struct per level, each holding its defaults, registering
/// its keys with CAF's config (`add_to`) and validating itself with a
/// sentence that names the key (`validate`). The node reads them from its
/// config file and command line under the `coalesce` group; an application
/// that embeds coalesce fills `service_settings` in code, or registers it
/// under a group of its own config, and gets the same validation.
namespace coalesce {

/// What the services need to start: their database and each service's
/// settings (the members of `service_options`, coalesce/node/service_list.hpp).
struct service_settings : service_options {
  /// Directory of the RocksDB database; created when missing.
  std::string db_path = "data";
  /// "synced" (fsync per batch) or "buffered" (WAL without fsync).
  std::string durability = "synced";
  /// TEST SEAM only (coalesce/storage/fault_injection.hpp): the file system
  /// RocksDB writes through. Null: the real one. Not a config key.
  std::shared_ptr<rocksdb::FileSystem> file_system;

  void add_to(caf::config_option_adder& adder);
  std::string validate(const std::string& group = "coalesce") const;
};

/// A node process: its services plus where it listens, how it logs and
/// how long it may take to stop.
struct node_settings {
  service_settings services;
  /// spdlog level: trace, debug, info, warn, error, critical or off.
  std::string log_level = "info";
  /// "text" ([time] [level] message; under the systemd journal, a syslog
  /// priority prefix instead) or "json" (one object per line).
  std::string log_format = "text";
  /// Address the node accepts connections on.
  std::string host = "127.0.0.1";
  /// Port the node accepts connections on; 0 picks a free one.
  uint16_t port = 4300;
  /// How long a shutdown may take to seal and flush the services.
  caf::timespan shutdown_timeout = std::chrono::seconds{30};
  /// How often a stats line is logged; 0 turns it off.
  caf::timespan stats_interval = std::chrono::seconds{60};
  /// With TLS: the lowest protocol a handshake may use, "1.2" or "1.3".
  std::string tls_min_version = "1.2";
  /// With TLS: OpenSSL's cipher list for TLS 1.2 (TLS 1.3's suites all
  /// have forward secrecy); by default only suites with it.
  std::string tls_ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20";
  metrics_options metrics;
  cluster_options cluster;

  void add_to(caf::config_option_adder& adder);
  std::string validate(const std::string& group = "coalesce") const;
};

} // namespace coalesce
