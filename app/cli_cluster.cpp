// coalesce-cli's `owner KIND KEY`: which nodes of --nodes keep a key, by the
// same rendezvous hashing the cluster client routes with; asks no node.

#include <string>

#include <CLI/CLI.hpp>

#include "cli_command.hpp"
#include <coalesce/client/cluster_map.hpp>

namespace coalesce {

namespace {

struct owner_options {
  std::string kind;
  std::string key;
};

std::optional<key_kind> parse_kind(const std::string& text) {
  if (text == "secret" || text == "chat")
    return key_kind::chat;
  if (text == "session")
    return key_kind::session;
  if (text == "room")
    return key_kind::room;
  return std::nullopt;
}

int owner(session& s, const owner_options& o) {
  auto kind = parse_kind(o.kind);
  if (!kind)
    return usage("owner: KIND \"" + o.kind
                 + "\" must be secret (or chat), session or room");
  if (s.address.nodes.empty())
    return usage("owner needs --nodes");
  cluster_map nodes;
  if (auto problem = cluster_map::parse_list(s.address.nodes, "--nodes", nodes))
    return usage(*problem);
  // Every key is kept on its replicas: one line per node, the first to be
  // asked first.
  auto copies = s.address.replicas;
  for (auto index : nodes.replica_indices({*kind, o.key}, copies))
    std::cout << nodes.nodes()[index].text() << '\n';
  return exit_ok;
}

void add_cluster_commands(CLI::App& app, cli_commands& commands) {
  auto o = std::make_shared<owner_options>();
  auto cmd = app.add_subcommand(
    "owner", "print which nodes of --nodes keep a key (on --replicas "
             "nodes), one a line, the first to be asked first (KIND: secret "
             "or chat, session, room)");
  cmd->add_option("KIND", o->kind, "secret, chat, session or room")
    ->required();
  cmd->add_option("KEY", o->key, "the chat, session id or room")->required();
  commands.push_back({cmd, [o](session& s) { return owner(s, *o); }});
}

} // namespace

const bool registered = register_command_group(add_cluster_commands);

} // namespace coalesce
