// coalesce-cli's `stats`: the node's counters as one JSON object, written
// from the stats types' own lists of named fields (with_named_fields), so
// every counter a stats type has appears under the name it has there.

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli_command.hpp"

namespace coalesce {

namespace {

using json = nlohmann::ordered_json;

template <class T>
json to_json(T& x);

template <class T>
void add_field(json& object, const named_field<T>& field) {
  if constexpr (is_vector<T>::value) {
    if (field.index_name != nullptr) {
      json by_name = json::object();
      for (std::size_t i = 0; i < field.value.size(); ++i)
        by_name[field.index_name(i)] = to_json(field.value[i]);
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

void add_stats_command(CLI::App& app, cli_commands& commands) {
  auto cmd = app.add_subcommand("stats", "print the node's counters as JSON");
  commands.push_back({cmd, stats});
}

} // namespace

const bool registered = register_command_group(add_stats_command);

} // namespace coalesce
