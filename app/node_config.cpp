#include "app/node_config.hpp"

#include <fstream>

#include <caf/config_option_adder.hpp>
#include <caf/config_value.hpp>
#include <caf/deep_to_string.hpp>

#include "coalesce/messages/registration.hpp"

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

} // namespace

node_config::node_config() {
  register_message_types(*this);
  caf::config_option_adder adder{custom_options_, group};
  settings.add_to(adder);
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
  return cfg.settings.validate(group);
}

} // namespace coalesce
