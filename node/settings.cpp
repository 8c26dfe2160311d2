#include <coalesce/node/settings.hpp>

#include <caf/config_option_adder.hpp>
#include <caf/make_config_option.hpp>
#include <caf/deep_to_string.hpp>
#include <openssl/ssl.h>
#include <spdlog/common.h>

#include <coalesce/actors/option_text.hpp>
#include <coalesce/storage/durability.hpp>

namespace coalesce {

namespace {

std::string quoted(const std::string& x) {
  return "\"" + x + "\"";
}

/// Whether OpenSSL's parser takes `list` for TLS 1.2: it fails a list that
/// selects no cipher.
bool valid_cipher_list(const std::string& list) {
  auto* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr)
    return false;
  auto valid = SSL_CTX_set_cipher_list(ctx, list.c_str()) == 1;
  SSL_CTX_free(ctx);
  return valid;
}

} // namespace

void service_settings::add_to(caf::config_option_adder& adder) {
  adder
    .add(db_path, "db-path",
         described("directory of the RocksDB database", db_path))
    .add(durability, "durability",
         described("\"synced\" (fsync per batch) or \"buffered\" (no fsync)",
                   durability));
  service_options::for_each(*this,
                            [&](auto& options) { options.add_to(adder); });
}

std::string service_settings::validate(const std::string& group) const {
  if (db_path.empty())
    return group + ".db-path must not be empty";
  if (!storage::parse_durability(durability))
    return group + ".durability = " + quoted(durability)
           + " must be \"synced\" or \"buffered\"";
  std::string problem;
  service_options::for_each(*this, [&](const auto& options) {
    if (problem.empty())
      problem = options.validate(group);
  });
  return problem;
}

void node_settings::add_to(caf::config_option_adder& adder) {
  services.add_to(adder);
  adder
    .add(log_level, "log-level",
         described("trace, debug, info, warn, error, critical or off",
                   log_level))
    .add(log_format, "log-format",
         described("text or json (one object per line)", log_format))
    .add(host, "host", described("address to accept connections on", host))
    .add(port, "port",
         described("port to accept connections on (0: any free port)", port))
    .add(shutdown_timeout, "shutdown-timeout",
         described("how long sealing and flushing may take on shutdown",
                   shutdown_timeout))
    .add(stats_interval, "stats-interval",
         described("how often a stats line is logged (0s: never)",
                   stats_interval))
    .add(tls_min_version, "tls-min-version",
         described("with TLS, the lowest protocol: 1.2 or 1.3",
                   tls_min_version))
    .add(tls_ciphers, "tls-ciphers",
         described("with TLS, OpenSSL's cipher list for TLS 1.2",
                   tls_ciphers));
  metrics.add_to(adder);
  cluster.add_to(adder);
}

std::string node_settings::validate(const std::string& group) const {
  if (auto problem = services.validate(group); !problem.empty())
    return problem;
  if (spdlog::level::from_str(log_level) == spdlog::level::off
      && log_level != "off")
    return group + ".log-level = " + quoted(log_level)
           + " must be one of trace, debug, info, warn, error, critical, off";
  if (log_format != "text" && log_format != "json")
    return group + ".log-format = " + quoted(log_format)
           + " must be \"text\" or \"json\"";
  if (host.empty())
    return group + ".host must not be empty";
  if (shutdown_timeout.count() <= 0)
    return group + ".shutdown-timeout = "
           + duration_text(shutdown_timeout) + " must be positive";
  if (stats_interval.count() < 0)
    return group + ".stats-interval = " + duration_text(stats_interval)
           + " must not be negative";
  if (tls_min_version != "1.2" && tls_min_version != "1.3")
    return group + ".tls-min-version = " + quoted(tls_min_version)
           + " must be \"1.2\" or \"1.3\"";
  if (!valid_cipher_list(tls_ciphers))
    return group + ".tls-ciphers = " + quoted(tls_ciphers)
           + " selects no TLS 1.2 cipher OpenSSL knows (see `openssl "
             "ciphers -v LIST`)";
  if (auto problem = metrics.validate(group, port); !problem.empty())
    return problem;
  if (auto problem = cluster.validate(group, host, port); !problem.empty())
    return problem;
  return {};
}

} // namespace coalesce
