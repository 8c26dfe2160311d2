// coalesce-cli: talks to a coalesce node over CAF's middleman. This file
// builds the command line and dispatches; each command group lives in its
// own app/cli_*.cpp.
//
// Exit codes: 0 success, 1 not found, 2 usage error, 3 the node cannot be
// reached or does not answer within the timeout, 4 the node answered with an
// error. Errors go to stderr as one plain sentence.

#include <string>

#include <CLI/CLI.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/manager.hpp>

#include "cli_command.hpp"
#include <coalesce/client/tls_files.hpp>
#include <coalesce/client/cluster_client.hpp>
#include <coalesce/messages/registration.hpp>

using namespace coalesce;

namespace {

struct cli_config : caf::actor_system_config {
  cli_config() {
    register_message_types(*this);
    load<caf::io::middleman>();
    // A client needs few threads; CAF's default of at least four is for
    // servers.
    set("scheduler.max-threads", 2);
    // Idle workers wait instead of polling (app/node_config.cpp says why).
    set("scheduler.policy", caf::atom("sharing"));
  }
};

/// The command CLI11 selected: the one whose own subcommand was given.
const cli_command* selected(const cli_commands& commands) {
  for (const auto& command : commands)
    if (command.selector->parsed())
      return &command;
  return nullptr;
}

/// The node's `openssl.*` settings as global flags; any of them turns on
/// mutual TLS.
void add_tls_flags(CLI::App& app, tls_files& tls) {
  app.add_option("--openssl-certificate", tls.certificate,
                 "PEM certificate chain of this client (mutual TLS)");
  app.add_option("--openssl-key", tls.key, "PEM private key of the certificate");
  app.add_option("--openssl-passphrase", tls.passphrase,
                 "passphrase of an encrypted --openssl-key");
  app.add_option("--openssl-cafile", tls.cafile,
                 "PEM file of the CA that signed the nodes' certificates");
}

} // namespace

namespace coalesce {

std::vector<command_group>& command_groups() {
  static std::vector<command_group> groups;
  return groups;
}

bool register_command_group(command_group group) {
  command_groups().push_back(group);
  return true;
}

} // namespace coalesce

int main(int argc, char** argv) {
  node_address address;
  std::string timeout_text = "5s";
  CLI::App app{"coalesce-cli: talk to a coalesce node.\n\nExit codes: 0 "
               "success, 1 not found, 2 usage error, 3 node unreachable or "
               "silent within the timeout, 4 the node answered with an error."};
  app.add_option("--host", address.host, "address of the node")
    ->capture_default_str();
  app.add_option("--port", address.port, "port of the node")
    ->capture_default_str();
  app.add_option("--timeout", timeout_text,
                 "bound on each exchange with the node, as durations in the "
                 "config file: 500ms, 5s, 1min, 1h")
    ->capture_default_str();
  tls_files tls;
  add_tls_flags(app, tls);
  app.add_option("--nodes", address.nodes,
                 "every node of a cluster as host:port,host:port,...: each "
                 "request goes to its key's owner (--host/--port unused)");
  app.add_option("--replicas", address.replicas,
                 "the nodes' coalesce.replicas: a chat's secret requests go to "
                 "its first live replica")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  app.require_subcommand(1);
  cli_commands commands;
  for (auto group : command_groups())
    group(app, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    auto code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage;
  }
  auto timeout = parse_duration(timeout_text);
  if (!timeout)
    return usage("--timeout \"" + timeout_text
                 + "\" is not a positive duration as in the config file, "
                   "such as 500ms, 5s or 1min");
  address.timeout = *timeout;
  auto command = selected(commands);
  if (command == nullptr)
    return usage("no command given; see --help");

  // CAF aborts on TLS files it cannot use, so they are checked first.
  if (auto problem = check_tls_files(tls, "--openssl-"); !problem.empty())
    return usage(problem);

  cli_config cfg;
  if (tls.any_set()) {
    set_tls_files(cfg, tls);
    cfg.load<caf::openssl::manager>();
  }
  caf::actor_system sys{cfg};
  session s{sys, address};
  if (!address.nodes.empty()) {
    cluster_map nodes;
    if (auto problem = cluster_map::parse_list(address.nodes, "--nodes", nodes))
      return usage(*problem);
    // Connected on each node's first request. The cluster client bounds each
    // exchange with --timeout and names a silent node; the CLI waits a
    // second longer for its answer.
    s.node = spawn_cluster_client(sys, std::move(nodes), *timeout,
                                  address.replicas);
    s.address.timeout = *timeout + std::chrono::seconds{1};
    auto code = command->run(s);
    caf::anon_send_exit(s.node, caf::exit_reason::user_shutdown);
    return code;
  }
  if (auto failed = connect_node(sys, address.host, address.port,
                                 address.timeout, s.node))
    return fail(*failed);
  return command->run(s);
}
