#pragma once

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

namespace coalesce {

/// Where the node exposes its Prometheus metrics (coalesce/node/metrics.hpp).
struct metrics_options {
  /// HTTP port of `/metrics` on the node's host; 0: no metrics.
  uint16_t port = 0;

  void add_to(caf::config_option_adder& adder);
  /// `node_port`: the node's own port, which the metrics may not share.
  std::string validate(const std::string& group, uint16_t node_port) const;
};

} // namespace coalesce
