#pragma once

#include <cstdint>

#include <caf/meta/type_name.hpp>

#include "coalesce/messages/backfill.hpp"
#include "coalesce/messages/secret_buffer_stats.hpp"

namespace coalesce {

/// What `stats` answers for a whole node: its own counters and those of each
/// service it hosts. Later services add their member here.
struct node_stats {
  /// Seconds since the node started serving.
  int64_t uptime_s = 0;
  /// Whether the node received SIGINT or SIGTERM and refuses new requests.
  bool shutting_down = false;
  /// Requests the node refused because it was shutting down.
  uint64_t refused_requests = 0;
  secret_buffer_stats secrets;
  scheduler_stats scheduler;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_stats& x) {
  return f(caf::meta::type_name("node_stats"), x.uptime_s, x.shutting_down,
           x.refused_requests, x.secrets, x.scheduler);
}

} // namespace coalesce
