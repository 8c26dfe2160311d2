#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>
#include <caf/timespan.hpp>

#include <coalesce/node/settings.hpp>

namespace coalesce {

/// coalesce-node's settings, all under the `coalesce` group: in the INI file
/// as `[coalesce]` keys, on the command line as `--coalesce.KEY=VALUE`.
/// Defaults live in the settings structs; config/coalesce.ini lists every
/// key with the same values (a test compares them).
struct node_config : caf::actor_system_config {
  node_config();

  /// Every `coalesce` key, with its default (coalesce/node/settings.hpp).
  node_settings settings;

  /// The options of the `coalesce` group (and CAF's own), for checking.
  const caf::config_option_set& options() const {
    return custom_options_;
  }
};

/// Parses the command line and the config file it names, refusing what CAF
/// alone would accept silently: a wrongly typed, negative, out-of-range or
/// unknown `coalesce` or `openssl` value in the file or on the command line,
/// TLS files that CAF would abort on (coalesce/client/tls_files.hpp), and a
/// non-loopback `coalesce.host` without TLS. Returns one sentence naming the
/// key and the value, or an empty string on success.
std::string load_node_config(node_config& cfg, int argc, char** argv);

/// Whether any `openssl.*` key is set: the node then loads
/// `caf::openssl::manager` and publishes through mutual TLS.
bool uses_tls(const node_config& cfg);

} // namespace coalesce
