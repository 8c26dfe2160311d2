#pragma once

#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "node_client.hpp"
#include "secret_lines.hpp"

namespace CLI {
class App;
} // namespace CLI

/// How coalesce-cli's command groups plug into it: each group (one file
/// each, app/cli_*.cpp) registers itself, adds its subcommands to the CLI11
/// app and says what each does once the session is connected; cli_main.cpp
/// parses and dispatches.
namespace coalesce {

/// One command: the CLI11 subcommand that selects it, and what it does with
/// a connected session, returning the exit code.
struct cli_command {
  CLI::App* selector;
  std::function<int(session&)> run;
};

using cli_commands = std::vector<cli_command>;

/// A command group: adds its subcommands to the CLI11 app.
using command_group = void (*)(CLI::App& app, cli_commands& commands);

/// Every group linked into the CLI (app/cli_*.cpp), in registration order.
std::vector<command_group>& command_groups();

/// Registers `group` during static initialisation, so a new group is a new
/// file only: `const bool registered = register_command_group(add_x);` at
/// namespace scope in its file.
bool register_command_group(command_group group);

/// Entries per queue or lookup message when reading from stdin: large enough
/// to amortise a remote round trip, small enough to keep messages modest.
constexpr std::size_t stdin_batch = 512;

/// Reads stdin one item per non-blank line with `parse(line, error)`;
/// returns the usage sentence naming the first bad line, or nothing.
template <class T, class Parse>
std::optional<std::string> read_stdin_lines(std::vector<T>& out, Parse parse) {
  std::string line;
  std::string error;
  std::size_t number = 0;
  while (std::getline(std::cin, line)) {
    ++number;
    if (split_fields(line).empty())
      continue;
    auto item = parse(line, error);
    if (!item)
      return "line " + std::to_string(number) + ": " + error;
    out.push_back(std::move(*item));
  }
  return std::nullopt;
}

/// `xs` cut into consecutive batches of at most `size`, in order.
template <class T>
std::vector<std::vector<T>> in_batches(std::vector<T> xs, std::size_t size) {
  std::vector<std::vector<T>> batches;
  for (std::size_t i = 0; i < xs.size(); i += size)
    batches.emplace_back(
      std::make_move_iterator(xs.begin() + i),
      std::make_move_iterator(xs.begin() + std::min(xs.size(), i + size)));
  return batches;
}

} // namespace coalesce
