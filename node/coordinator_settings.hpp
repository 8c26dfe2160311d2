#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include <caf/timespan.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/node/serving_lists.hpp>

namespace coalesce {

/// How the coordinator of a replicated key is set up, for sessions
/// (session_replicas.hpp) and rooms (timeline_replicas.hpp) alike.
struct coordinator_settings {
  cluster_map map;
  /// This node's index in `map`.
  std::size_t self = 0;
  std::size_t replicas = 3;
  /// How long a replica may take to answer.
  caf::timespan timeout;
  /// Where it counts the requests it sends other replicas and their
  /// failures (the node's stats).
  std::shared_ptr<peer_counters> counters;
  /// Set while this node's replica catches up from its peers
  /// (session_sync.hpp, timeline_sync.hpp): it then answers no read,
  /// neither of its coordinators nor of its peers'; null for never.
  std::shared_ptr<const std::atomic<bool>> catching_up;
  /// The other lists peers serve under, whose majorities count too while
  /// the list changes (serving_lists.hpp); null for this node's list
  /// alone.
  std::shared_ptr<serving_lists> lists;
};

} // namespace coalesce
