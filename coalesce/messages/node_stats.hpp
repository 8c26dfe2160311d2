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

/// Its fields with their names, in wire order (see named_fields.hpp).
template <class F>
auto with_named_fields(node_stats& x, F&& f) {
  return f(field("uptime_s", x.uptime_s),
           field("shutting_down", x.shutting_down),
           field("refused_requests", x.refused_requests),
           field("secrets", x.secrets), field("scheduler", x.scheduler));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_stats& x) {
  return with_named_fields(x, [&](auto... fields) {
    return inspect_named_fields(f, caf::meta::type_name("node_stats"),
                                fields...);
  });
}

} // namespace coalesce
