// coalesce-cli's cluster commands: `owner KIND KEY`, which nodes of --nodes
// keep a key, by the same rendezvous hashing the cluster client routes with
// (asks no node); `cluster status`, which list each node serves under and
// how its handoff stands.

#include <map>
#include <set>
#include <string>
#include <vector>

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

std::string joined(const std::vector<std::string>& xs) {
  std::string result;
  for (const auto& x : xs)
    result += (result.empty() ? "" : ", ") + x;
  return result;
}

/// What a node's repairs say of a change of the list: whether it still
/// catches up (the keys it gained, or what it missed), the keys it took
/// and handed off since it started, those it still holds for their new
/// replicas and those it dropped once they held them.
std::string handoff_line(const node_stats& stats) {
  std::string result;
  if (stats.catching_up > 0)
    result = "catching up (" + std::to_string(stats.catching_up)
             + " of its repairs still wait for a peer)";
  else
    result = "caught up";
  result += "; keys repaired " + std::to_string(stats.keys_repaired)
            + ", handed off " + std::to_string(stats.keys_handed_off)
            + ", to hand off " + std::to_string(stats.keys_to_hand_off)
            + ", dropped " + std::to_string(stats.keys_dropped);
  if (stats.cluster_lists_counted > 1)
    result += "; counts majorities under "
              + std::to_string(stats.cluster_lists_counted)
              + " lists (joint quorums while the list changes)";
  else if (stats.cluster_lists_counted == 0 && !stats.cluster.empty())
    result += "; has not yet heard every peer's list (coordinates nothing)";
  return result;
}

/// `[#####.....]`: `done` of `all`, 20 marks wide.
std::string progress_bar(std::size_t done, std::size_t all) {
  constexpr std::size_t width = 20;
  auto marks = all == 0 ? width : done * width / all;
  return "[" + std::string(marks, '#') + std::string(width - marks, '.')
         + "]";
}

/// Per node of --nodes: the version and nodes of the list it serves under
/// and how its handoff stands, or why it did not answer; a progress bar
/// while nodes catch up; then whether they all agree (list the
/// same nodes in the same order: each node counts its versions itself).
/// Exit 0 when every node answered under one list, else the first
/// failure's code, or 4 when they answered under different lists.
int cluster_status(session& s) {
  cluster_map nodes;
  if (s.address.nodes.empty())
    return usage("cluster status needs --nodes");
  if (auto problem = cluster_map::parse_list(s.address.nodes, "--nodes", nodes))
    return usage(*problem);
  std::map<std::vector<std::string>, std::set<uint64_t>> lists;
  int code = exit_ok;
  std::size_t answered = 0;
  std::size_t caught_up = 0;
  uint64_t to_hand_off = 0;
  uint64_t dropped = 0;
  for (const auto& node : nodes.nodes()) {
    node_stats stats;
    if (auto failed = stats_of_node(s, node.host, node.port, stats)) {
      std::cout << node.text() << ": " << failed->sentence << '\n';
      if (code == exit_ok)
        code = failed->code;
      continue;
    }
    std::cout << node.text() << ": version " << stats.cluster_version << ": "
              << joined(stats.cluster) << '\n';
    std::cout << "  " << handoff_line(stats) << '\n';
    lists[stats.cluster].insert(stats.cluster_version);
    ++answered;
    if (stats.catching_up == 0)
      ++caught_up;
    to_hand_off += stats.keys_to_hand_off;
    dropped += stats.keys_dropped;
  }
  if (answered > 0 && caught_up < answered)
    std::cout << progress_bar(caught_up, answered) << ' ' << caught_up
              << " of " << answered << " nodes caught up\n";
  if (to_hand_off > 0)
    std::cout << progress_bar(dropped, dropped + to_hand_off) << ' '
              << to_hand_off << " keys still held by nodes that no longer "
              << "replicate them, " << dropped << " dropped\n";
  if (lists.size() > 1) {
    std::cout << "the nodes serve under " << lists.size()
              << " different lists\n";
    return code == exit_ok ? exit_node_error : code;
  }
  if (lists.size() == 1 && code == exit_ok) {
    const auto& versions = lists.begin()->second;
    if (versions.size() == 1)
      std::cout << "every node serves under version " << *versions.begin()
                << '\n';
    else
      std::cout << "every node serves under the same list (versions "
                << *versions.begin() << " to " << *versions.rbegin()
                << ": each node counts its own)\n";
  }
  return code;
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
  auto cluster = app.add_subcommand(
    "cluster", "the cluster list the nodes of --nodes serve under");
  cluster->require_subcommand(1);
  auto status = cluster->add_subcommand(
    "status", "print each node's list (its version and nodes) and how its "
              "handoff stands, progress bars while nodes catch up and while "
              "old replicas still hold keys, and whether they agree (exit 4 "
              "when they do not)");
  commands.push_back({status, [](session& s) { return cluster_status(s); }});
}

} // namespace

const bool registered = register_command_group(add_cluster_commands);

} // namespace coalesce
