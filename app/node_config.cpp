#include "node_config.hpp"

#include <arpa/inet.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include <caf/config_option_adder.hpp>
#include <caf/config_value.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/detail/parser/read_ini.hpp>
#include <caf/parser_state.hpp>

#include <coalesce/client/tls_files.hpp>
#include <coalesce/messages/registration.hpp>

namespace coalesce {

namespace {

constexpr char group[] = "coalesce";
/// CAF's own section for TLS; checked like ours, since CAF drops a wrongly
/// typed value there silently too, and a dropped file name turns TLS off.
constexpr char tls_group[] = "openssl";
/// CAF's section of the scheduler, whose policy a node sets (see the
/// constructor): checked like ours, since a policy in double quotes is
/// dropped silently and the node would run with CAF's default.
constexpr char scheduler_group[] = "scheduler";
constexpr const char* default_config_file = "caf-application.ini";

std::string in_quotes(const std::string& x) {
  return "\"" + x + "\"";
}

/// Checks one raw value of the config file against the option it sets.
std::string check_file_value(const node_config& cfg, const std::string& file,
                             const std::string& group, const std::string& key,
                             const caf::config_value& value) {
  auto name = group + "." + key;
  auto option = cfg.options().qualified_name_lookup(group, key);
  if (option == nullptr)
    return "unknown key " + name + " in " + file;
  if (caf::holds_alternative<caf::config_value::dictionary>(value))
    return name + " in " + file
           + " is a section; keys must sit directly under [" + group + "]";
  if (option->check(value))
    return name + " = " + caf::deep_to_string(value) + " in " + file
           + " is not a valid " + std::string(option->type_name().begin(), option->type_name().end());
  return {};
}

std::string check_file_section(const node_config& cfg, const std::string& file,
                               const caf::config_value::dictionary& raw,
                               const std::string& group) {
  auto section = raw.find(group);
  if (section == raw.end())
    return {};
  auto entries = caf::get_if<caf::config_value::dictionary>(&section->second);
  if (entries == nullptr)
    return group + " in " + file + " must be a section";
  for (const auto& [key, value] : *entries)
    if (auto problem = check_file_value(cfg, file, group, key, value);
        !problem.empty())
      return problem;
  return {};
}

/// A consumer of CAF's own INI reader that notes the first key set twice:
/// CAF keeps one of the two values and drops the other without a word.
/// Values inside lists are not keys; a list as a whole is its key's value.
class repeated_key_finder {
public:
  struct findings {
    std::vector<std::string> section_path;
    /// Per open container: whether keys inside it are not config keys.
    std::vector<bool> opaque;
    std::string pending_key;
    std::set<std::string> seen;
    std::string repeated;
  };

  explicit repeated_key_finder(findings& state) : state_(&state) {
  }

  void key(std::string name) {
    if (!inside_value())
      state_->pending_key = std::move(name);
  }

  template <class T>
  void value(T&&) {
    if (!inside_value())
      note(state_->pending_key);
  }

  /// The key whose value the reader is in, or "" between keys.
  std::string current_key() const {
    return state_->pending_key.empty() ? std::string{}
                                       : qualified(state_->pending_key);
  }

  repeated_key_finder begin_map() {
    auto opaque = inside_value();
    if (!opaque) {
      state_->section_path.push_back(state_->pending_key);
      state_->pending_key.clear();
    }
    state_->opaque.push_back(opaque);
    return *this;
  }

  void end_map() {
    if (!state_->opaque.back())
      state_->section_path.pop_back();
    state_->opaque.pop_back();
  }

  repeated_key_finder begin_list() {
    if (!inside_value())
      note(state_->pending_key);
    state_->opaque.push_back(true);
    return *this;
  }

  void end_list() {
    state_->opaque.pop_back();
    if (!inside_value())
      state_->pending_key.clear();
  }

private:
  bool inside_value() const {
    return !state_->opaque.empty() && state_->opaque.back();
  }

  std::string qualified(const std::string& key) const {
    std::string name;
    for (const auto& section : state_->section_path)
      name += section + ".";
    return name + key;
  }

  void note(const std::string& key) {
    auto name = qualified(key);
    if (!state_->seen.insert(name).second && state_->repeated.empty())
      state_->repeated = name;
    state_->pending_key.clear();
  }

  findings* state_;
};

/// Reads the file with CAF's own INI reader. Returns "" or a sentence: where
/// the reader stopped (line, column and the key whose value it was in,
/// which CAF's own error leaves out), or the first key set twice.
std::string read_problem(const std::string& file) {
  std::ifstream in{file};
  using iterator = std::istreambuf_iterator<char>;
  caf::parser_state<iterator, iterator> reader{iterator{in}, iterator{}};
  repeated_key_finder::findings findings;
  repeated_key_finder finder{findings};
  caf::detail::parser::read_ini(reader, finder);
  if (reader.code != caf::pec::success) {
    auto key = finder.current_key();
    return "cannot parse the config file " + file + " at line "
           + std::to_string(reader.line) + ", column "
           + std::to_string(reader.column)
           + (key.empty() ? std::string{} : " (the value of " + key + ")")
           + ": " + caf::to_string(reader.code);
  }
  if (!findings.repeated.empty())
    return findings.repeated + " is set twice in " + file;
  return {};
}

/// CAF skips a wrongly typed value in the file without a word, so the raw
/// file is read and every `coalesce` and `openssl` key checked against its
/// option.
std::string check_config_file(const node_config& cfg, const std::string& file,
                              bool must_exist) {
  std::error_code ignored;
  if (!std::filesystem::exists(file, ignored))
    return must_exist ? "cannot read the config file " + file : "";
  // A directory opens as a stream and throws at the first read.
  if (!std::filesystem::is_regular_file(file, ignored)
      || !std::ifstream{file}.good())
    return "cannot read the config file " + file + ": not a regular file";
  if (auto problem = read_problem(file); !problem.empty())
    return problem;
  auto raw = caf::actor_system_config::parse_config_file(file.c_str());
  if (!raw)
    return "cannot parse the config file " + file + ": "
           + caf::to_string(raw.error());
  for (auto section : {group, tls_group, scheduler_group})
    if (auto problem = check_file_section(cfg, file, *raw, section);
        !problem.empty())
      return problem;
  return {};
}

/// Literal loopback addresses only: a name other than localhost may
/// resolve anywhere.
bool is_loopback(const std::string& host) {
  if (host == "localhost")
    return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1
         && IN6_IS_ADDR_LOOPBACK(&v6);
}

/// CAF falls back to work stealing, with a line on stderr, for a policy it
/// does not know: a node refuses to start instead.
std::string check_scheduler_policy(const node_config& cfg) {
  const auto* value = caf::get_if(&cfg.content, "scheduler.policy");
  if (value == nullptr)
    return {};
  if (auto policy = caf::get_if<caf::atom_value>(value);
      policy != nullptr
      && (*policy == caf::atom("sharing") || *policy == caf::atom("stealing")))
    return {};
  return "scheduler.policy = " + caf::to_string(*value)
         + " is neither 'sharing' nor 'stealing' (in the file, in single "
           "quotes)";
}

/// TLS files that CAF would abort on are refused here; without TLS the
/// node stays on loopback (the plain port trusts whatever a peer sends).
std::string check_transport(const node_config& cfg) {
  auto files = tls_files_of(cfg);
  if (files.any_set())
    return check_tls_files(files, std::string{tls_group} + ".");
  if (!is_loopback(cfg.settings.host))
    return std::string{group} + ".host = " + in_quotes(cfg.settings.host)
           + " is not a loopback address, and a node listens beyond "
             "loopback only with mutual TLS (set openssl.certificate, "
             "openssl.key and openssl.cafile)";
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
  // CAF's default, work stealing, polls for work every 50 us for 25 ms
  // whenever a worker runs dry, which a node serving requests one by one
  // does all the time: on the two-core machine of docs/results.md that
  // polling took a third of the CPU and halved the throughput of three
  // replicas. Work sharing parks idle workers on a condition variable;
  // --scheduler.policy=stealing (or [scheduler] in the file) brings it back.
  set("scheduler.policy", caf::atom("sharing"));
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
    return "unexpected argument " + in_quotes(cfg.remainder.front());
  if (auto problem = cfg.settings.validate(group); !problem.empty())
    return problem;
  if (auto problem = check_scheduler_policy(cfg); !problem.empty())
    return problem;
  return check_transport(cfg);
}

bool uses_tls(const node_config& cfg) {
  return tls_files_of(cfg).any_set();
}

} // namespace coalesce
