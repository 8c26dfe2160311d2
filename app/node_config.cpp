#include "app/node_config.hpp"

#include <fstream>

#include <caf/config_option_adder.hpp>
#include <caf/config_value.hpp>
#include <caf/deep_to_string.hpp>
#include <spdlog/common.h>

#include "coalesce/messages/registration.hpp"
#include "coalesce/storage/durability.hpp"

namespace coalesce {

namespace {

constexpr const char* group = "coalesce";
constexpr const char* default_config_file = "caf-application.ini";

std::string quoted(const std::string& x) {
  return "\"" + x + "\"";
}

/// Checks one raw value of the config file against the option it sets.
std::string check_file_value(const node_config& cfg, const std::string& file,
                             const std::string& key,
                             const caf::config_value& value) {
  auto name = std::string{group} + "." + key;
  auto option = cfg.options().qualified_name_lookup(group, key);
  if (option == nullptr)
    return "unknown key " + name + " in " + file;
  if (caf::holds_alternative<caf::config_value::dictionary>(value))
    return name + " in " + file
           + " is a section; keys must sit directly under [coalesce]";
  if (option->check(value))
    return name + " = " + caf::deep_to_string(value) + " in " + file
           + " is not a valid " + std::string(option->type_name().begin(), option->type_name().end());
  return {};
}

/// CAF skips a wrongly typed value in the file without a word, so the raw
/// file is read and every `coalesce` key checked against its option.
std::string check_config_file(const node_config& cfg, const std::string& file,
                              bool must_exist) {
  if (!std::ifstream{file}.good())
    return must_exist ? "cannot read the config file " + file : "";
  auto raw = caf::actor_system_config::parse_config_file(file.c_str());
  if (!raw)
    return "cannot parse the config file " + file + ": "
           + caf::to_string(raw.error());
  auto section = raw->find(group);
  if (section == raw->end())
    return {};
  auto entries = caf::get_if<caf::config_value::dictionary>(&section->second);
  if (entries == nullptr)
    return "coalesce in " + file + " must be a section";
  for (const auto& [key, value] : *entries)
    if (auto problem = check_file_value(cfg, file, key, value);
        !problem.empty())
      return problem;
  return {};
}

/// Checks each `--coalesce.KEY=VALUE` before CAF's parser, whose errors do
/// not name the key. Returns the config file named on the command line.
std::string check_command_line(node_config& cfg, int argc, char** argv,
                               std::string& config_file, bool& named) {
  const std::string prefix = std::string{"--"} + group + ".";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--config-file=", 0) == 0) {
      config_file = arg.substr(14);
      named = true;
      continue;
    }
    if (arg.rfind(prefix, 0) != 0)
      continue;
    auto eq = arg.find('=');
    auto key = arg.substr(prefix.size(), eq == std::string::npos
                                           ? std::string::npos
                                           : eq - prefix.size());
    auto name = std::string{group} + "." + key;
    auto option = cfg.options().qualified_name_lookup(group, key);
    if (option == nullptr)
      return "unknown option --" + name;
    if (eq == std::string::npos)
      return "--" + name + " needs a value: --" + name + "=VALUE";
    auto value = arg.substr(eq + 1);
    if (!option->parse(value))
      return "--" + name + "=" + value + " is not a valid "
             + std::string(option->type_name().begin(), option->type_name().end());
  }
  return {};
}

/// What the types cannot say.
std::string check_values(const node_config& cfg) {
  if (cfg.db_path.empty())
    return "coalesce.db-path must not be empty";
  if (!storage::parse_durability(cfg.durability))
    return "coalesce.durability = " + quoted(cfg.durability)
           + " must be \"synced\" or \"buffered\"";
  if (cfg.secrets_pending_limit == 0)
    return "coalesce.secrets-pending-limit = 0 must be positive";
  if (spdlog::level::from_str(cfg.log_level) == spdlog::level::off
      && cfg.log_level != "off")
    return "coalesce.log-level = " + quoted(cfg.log_level)
           + " must be one of trace, debug, info, warn, error, critical, off";
  if (cfg.host.empty())
    return "coalesce.host must not be empty";
  if (cfg.shutdown_timeout.count() <= 0)
    return "coalesce.shutdown-timeout = "
           + caf::deep_to_string(cfg.shutdown_timeout) + " must be positive";
  if (cfg.secrets_retry_base.count() <= 0)
    return "coalesce.secrets-retry-base = "
           + caf::deep_to_string(cfg.secrets_retry_base) + " must be positive";
  if (cfg.secrets_retry_max < cfg.secrets_retry_base
      || cfg.secrets_retry_max > std::chrono::seconds{5})
    return "coalesce.secrets-retry-max = "
           + caf::deep_to_string(cfg.secrets_retry_max)
           + " must lie between coalesce.secrets-retry-base and 5s";
  if (cfg.scheduler_max_concurrent == 0)
    return "coalesce.scheduler-max-concurrent = 0 must be positive";
  if (cfg.scheduler_max_queued == 0)
    return "coalesce.scheduler-max-queued = 0 must be positive";
  if (cfg.scheduler_results_memory == 0)
    return "coalesce.scheduler-results-memory = 0 must be positive";
  if (cfg.scheduler_pager_timeout.count() <= 0)
    return "coalesce.scheduler-pager-timeout = "
           + caf::deep_to_string(cfg.scheduler_pager_timeout)
           + " must be positive";
  if (cfg.stats_interval.count() < 0)
    return "coalesce.stats-interval = "
           + caf::deep_to_string(cfg.stats_interval)
           + " must not be negative";
  return {};
}

} // namespace

node_config::node_config() {
  register_message_types(*this);
  opt_group{custom_options_, group}
    .add(db_path, "db-path", "directory of the RocksDB database")
    .add(durability, "durability",
         "\"synced\" (fsync per batch) or \"buffered\" (no fsync)")
    .add(secrets_pending_limit, "secrets-pending-limit",
         "distinct pending secrets before producers wait (> 0)")
    .add(log_level, "log-level",
         "trace, debug, info, warn, error, critical or off")
    .add(host, "host", "address to accept connections on")
    .add(port, "port", "port to accept connections on (0: any free port)")
    .add(shutdown_timeout, "shutdown-timeout",
         "how long sealing and flushing may take on shutdown (e.g. 30s)")
    .add(stats_interval, "stats-interval",
         "how often a stats line is logged (e.g. 60s; 0s: never)")
    .add(secrets_retry_base, "secrets-retry-base",
         "first delay before a failed write is retried (e.g. 10ms)")
    .add(secrets_retry_max, "secrets-retry-max",
         "longest delay between retries of a failed write (<= 5s)")
    .add(scheduler_max_concurrent, "scheduler-max-concurrent",
         "back-pagination runs at once (> 0)")
    .add(scheduler_max_queued, "scheduler-max-queued",
         "distinct back-pagination runs that may wait (> 0)")
    .add(scheduler_max_concurrent_low, "scheduler-max-concurrent-low",
         "low-priority runs at once (0: no cap)")
    .add(scheduler_max_concurrent_normal, "scheduler-max-concurrent-normal",
         "normal-priority runs at once (0: no cap)")
    .add(scheduler_max_concurrent_high, "scheduler-max-concurrent-high",
         "high-priority runs at once (0: no cap)")
    .add(scheduler_pager_timeout, "scheduler-pager-timeout",
         "how long one batch may take before a run fails (e.g. 30s)")
    .add(scheduler_results_memory, "scheduler-results-memory",
         "bytes of finished backfill results kept for a later await (> 0)");
}

std::string load_node_config(node_config& cfg, int argc, char** argv) {
  std::string config_file = default_config_file;
  bool named = false;
  if (auto problem = check_command_line(cfg, argc, argv, config_file, named);
      !problem.empty())
    return problem;
  if (auto problem = check_config_file(cfg, config_file, named);
      !problem.empty())
    return problem;
  if (auto err = cfg.parse(argc, argv))
    return caf::to_string(err);
  if (cfg.cli_helptext_printed)
    return {};
  if (!cfg.remainder.empty())
    return "unexpected argument " + quoted(cfg.remainder.front());
  return check_values(cfg);
}

} // namespace coalesce
