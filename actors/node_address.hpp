#pragma once

#include <cstdint>
#include <optional>
#include <string>

/// The address of a node whose timeline a scheduler pages
/// (`coalesce.scheduler-remote-pager`), read from its "host:port" text.
namespace coalesce {

struct node_address {
  std::string host;
  uint16_t port = 0;
};

/// "host:port" with a non-empty host and a port in 1..65535 (the last colon
/// splits, so "[::1]:4300" keeps its brackets); nothing otherwise.
std::optional<node_address> parse_node_address(const std::string& text);

} // namespace coalesce
