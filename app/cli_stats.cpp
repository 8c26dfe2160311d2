// coalesce-cli's `stats`: the node's counters as one JSON object, written
// from the stats types' own lists of named fields (with_named_fields), so
// every counter a stats type has appears under the name it has there.

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_command.hpp"
#include <coalesce/client/cluster_map.hpp>

namespace coalesce {

namespace {

using json = nlohmann::ordered_json;

template <class T>
json to_json(T& x);

template <class T>
void add_field(json& object, const named_field<T>& field) {
  if constexpr (is_vector<T>::value) {
    if (field.names_indices()) {
      json by_name = json::object();
      for (std::size_t i = 0; i < field.value.size(); ++i)
        by_name[field.index_text(i)] = to_json(field.value[i]);
      object[field.name] = std::move(by_name);
      return;
    }
  }
  object[field.name] = to_json(field.value);
}

/// A stats type as an object of its named fields, in their order; vectors
/// as arrays (or objects, for vectors indexed by an enum); numbers, flags
/// and strings as themselves.
template <class T>
json to_json(T& x) {
  if constexpr (has_named_fields<T>::value) {
    json object = json::object();
    with_named_fields(x, [&object](const auto&... fields) {
      (add_field(object, fields), ...);
    });
    return object;
  } else if constexpr (is_vector<T>::value) {
    json array = json::array();
    for (auto& element : x)
      array.push_back(to_json(element));
    return array;
  } else {
    static_assert(std::is_arithmetic_v<T> || std::is_same_v<T, std::string>,
                  "a stats field must be a number, a flag, a string, a "
                  "vector or a type with named fields");
    return json(x);
  }
}

int stats(session& s) {
  node_stats result;
  if (auto failed = s.ask(result, stats_atom::value))
    return fail(*failed);
  std::cout << to_json(result).dump() << '\n';
  return exit_ok;
}

/// `stats --all`: every node of --nodes asked on its own, one object keyed
/// by node; a node that fails appears as {"error": SENTENCE} and makes the
/// exit code its failure's, the others still printed.
int stats_of_every_node(session& s) {
  cluster_map nodes;
  if (s.address.nodes.empty())
    return usage("stats --all needs --nodes");
  if (auto problem = cluster_map::parse_list(s.address.nodes, "--nodes", nodes))
    return usage(*problem);
  json all = json::object();
  int code = exit_ok;
  for (const auto& node : nodes.nodes()) {
    node_stats result;
    if (auto failed = stats_of_node(s, node.host, node.port, result)) {
      all[node.text()] = json{{"error", failed->sentence}};
      code = failed->code;
      continue;
    }
    all[node.text()] = to_json(result);
  }
  std::cout << all.dump() << '\n';
  return code;
}

void add_stats_command(CLI::App& app, cli_commands& commands) {
  auto cmd = app.add_subcommand("stats", "print the node's counters as JSON");
  auto every_node = std::make_shared<bool>(false);
  cmd->add_flag("--all", *every_node,
                "every node of --nodes, one object keyed by node");
  commands.push_back({cmd, [every_node](session& s) {
                        return *every_node ? stats_of_every_node(s) : stats(s);
                      }});
}

} // namespace

const bool registered = register_command_group(add_stats_command);

} // namespace coalesce
