#define CAF_SUITE node.settings
#include <caf/test/unit_test.hpp>

#include <fstream>
#include <chrono>
#include <map>
#include <regex>
#include <string>

#include <caf/actor_system_config.hpp>
#include <caf/config_option_adder.hpp>
#include <caf/config_option_set.hpp>
#include <caf/config_value.hpp>

#include <coalesce/node/settings.hpp>

using namespace coalesce;

namespace {

/// Every `coalesce` key a node registers, with its default.
std::map<std::string, caf::config_value> registered_defaults() {
  static node_settings settings;
  caf::config_option_set options;
  caf::config_option_adder adder{options, "coalesce"};
  settings.add_to(adder);
  std::map<std::string, caf::config_value> result;
  for (const auto& option : options) {
    auto value = option.get();
    CAF_REQUIRE(value);
    result.emplace(std::string{option.long_name().begin(),
                               option.long_name().end()},
                   *value);
  }
  return result;
}

std::string source_file(const std::string& name) {
  return std::string{COALESCE_SOURCE_DIR} + "/" + name;
}

} // namespace

CAF_TEST(the ini file sets every key to the settings default) {
  auto defaults = registered_defaults();
  auto parsed = caf::actor_system_config::parse_config_file(
    source_file("config/coalesce.ini").c_str());
  CAF_REQUIRE(parsed);
  auto section = parsed->find("coalesce");
  CAF_REQUIRE(section != parsed->end());
  auto entries = caf::get_if<caf::config_value::dictionary>(&section->second);
  CAF_REQUIRE(entries != nullptr);
  for (const auto& [key, value] : defaults) {
    auto in_file = entries->find(key);
    if (in_file == entries->end()) {
      CAF_FAIL("config/coalesce.ini lacks " << key);
      continue;
    }
    CAF_CHECK_EQUAL(caf::to_string(in_file->second), caf::to_string(value));
  }
  for (const auto& [key, value] : *entries)
    CAF_CHECK(defaults.count(key) == 1);
}

// The table's rows begin `| `KEY` | `DEFAULT` |`; further columns (the
// range, the meaning) are free text.
CAF_TEST(the configuration page shows every key with the settings default) {
  auto defaults = registered_defaults();
  std::ifstream page{source_file("docs/configuration.md")};
  CAF_REQUIRE(page.good());
  std::map<std::string, std::string> table;
  std::regex row{"^\\| `([a-z-]+)` \\| `([^`]*)` \\|"};
  std::smatch match;
  for (std::string line; std::getline(page, line);)
    if (std::regex_search(line, match, row))
      table.emplace(match[1], match[2]);
  for (const auto& [key, value] : defaults) {
    auto shown = table.find(key);
    if (shown == table.end()) {
      CAF_FAIL("docs/configuration.md's table lacks " << key);
      continue;
    }
    CAF_CHECK_EQUAL(shown->second, caf::to_string(value));
  }
}

CAF_TEST(every invalid value is refused with a sentence naming its key) {
  auto refused = [](auto change, const std::string& key) {
    node_settings settings;
    change(settings);
    auto problem = settings.validate();
    CAF_CHECK_NOT_EQUAL(problem.find("coalesce." + key), std::string::npos);
  };
  CAF_CHECK_EQUAL(node_settings{}.validate(), "");
  refused([](node_settings& x) { x.services.db_path.clear(); }, "db-path");
  refused([](node_settings& x) { x.cluster.cluster = {"127.0.0.1"}; },
          "cluster");
  // A list that does not name this node (its host:port is 127.0.0.1:4300).
  refused([](node_settings& x) { x.cluster.cluster = {"127.0.0.1:4301"}; },
          "cluster");
  refused(
    [](node_settings& x) {
      x.cluster.anti_entropy_interval = -std::chrono::seconds{1};
    },
    "anti-entropy-interval");
  refused([](node_settings& x) { x.services.durability = "fast"; },
          "durability");
  refused([](node_settings& x) { x.services.secret_buffer.pending_limit = 0; },
          "secrets-pending-limit");
  refused([](node_settings& x) { x.services.secret_buffer.retry_base = {}; },
          "secrets-retry-base");
  refused(
    [](node_settings& x) {
      x.services.secret_buffer.retry_max = std::chrono::seconds{6};
    },
    "secrets-retry-max");
  refused(
    [](node_settings& x) { x.services.backfill_scheduler.limits.max_concurrent = 0; },
    "scheduler-max-concurrent");
  refused([](node_settings& x) { x.services.backfill_scheduler.limits.max_queued = 0; },
          "scheduler-max-queued");
  refused([](node_settings& x) { x.services.backfill_scheduler.results_memory = 0; },
          "scheduler-results-memory");
  refused([](node_settings& x) { x.services.backfill_scheduler.pager_timeout = {}; },
          "scheduler-pager-timeout");
  refused([](node_settings& x) { x.log_level = "loud"; }, "log-level");
  refused([](node_settings& x) { x.host.clear(); }, "host");
  refused([](node_settings& x) { x.shutdown_timeout = {}; },
          "shutdown-timeout");
  refused(
    [](node_settings& x) { x.stats_interval = -std::chrono::seconds{1}; },
    "stats-interval");
  refused([](node_settings& x) { x.metrics.port = x.port; }, "metrics-port");
}

CAF_TEST(a refused negative duration is shown with its sign) {
  node_settings settings;
  settings.stats_interval = -std::chrono::milliseconds{1500};
  auto problem = settings.validate();
  CAF_CHECK_NOT_EQUAL(problem.find("coalesce.stats-interval = -1500ms"),
                      std::string::npos);
  settings = node_settings{};
  settings.services.secret_buffer.retry_base = -std::chrono::seconds{2};
  problem = settings.validate();
  CAF_CHECK_NOT_EQUAL(problem.find("coalesce.secrets-retry-base = -2s"),
                      std::string::npos);
}
