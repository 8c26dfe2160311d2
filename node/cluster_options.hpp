#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <chrono>

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/node/peer_watch.hpp>

/// A node's place in a deployment of several: the list of every node, the
/// same on every node and in every client (`coalesce.cluster`; the list a
/// node serves under is the one it stored, coalesce/node/cluster_list.hpp).
namespace coalesce {

/// The most nodes a cluster lists: each has an id of its own, and a
/// capture's stamp holds the id of the node that admitted it in 10 bits,
/// one value of which names a client (coalesce/client/cluster_map.hpp).
constexpr std::size_t max_cluster_nodes = cluster_map::node_id_limit;

struct cluster_options {
  /// Every node as "host:port"; empty: a single node that owns every key.
  /// When set, it lists this node as its `coalesce.host`:`coalesce.port`.
  std::vector<std::string> cluster;
  /// How long a peer may leave a ping unanswered before this node counts
  /// it down; it is pinged three times as often.
  caf::timespan peer_timeout = std::chrono::seconds{3};
  /// On how many nodes a chat's secrets are kept (its first `replicas`
  /// nodes by rendezvous order; every node when the list is shorter).
  std::size_t replicas = 3;
  /// Between two anti-entropy passes over the secrets (each compares them
  /// with every peer and repairs the differences); 0 for none.
  caf::timespan anti_entropy_interval = std::chrono::seconds{60};

  void add_to(caf::config_option_adder& adder);

  /// A sentence naming the key, or empty. `host` and `port` are this
  /// node's own (`coalesce.host`, `coalesce.port`).
  std::string validate(const std::string& group, const std::string& host,
                       uint16_t port) const;

  /// What the gateway asks about each key: the addresses of its replicas
  /// and the list's version when this node (`self` of `nodes`) is none of
  /// them; null for a single node.
  foreign_owner_fn foreign_owner(const cluster_map& nodes,
                                 std::size_t self) const;

  /// The same under the configured list. The options must be valid.
  foreign_owner_fn foreign_owner(const std::string& host, uint16_t port) const;

  /// The configured list, version 1 (empty for a node alone). The options
  /// must be valid.
  cluster_map map() const;

  /// This node's index in `map()`. The options must be valid and the list
  /// not empty.
  std::size_t index_of(const std::string& host, uint16_t port) const;

  /// Whether a chat's secrets are kept on several nodes.
  bool replicates_secrets() const {
    return cluster.size() > 1 && replicas > 1;
  }

  /// Whether a session is kept on several nodes (as secrets are).
  bool replicates_sessions() const {
    return replicates_secrets();
  }

  /// Whether a room's timeline is kept on several nodes (as secrets are).
  bool replicates_rooms() const {
    return replicates_secrets();
  }

  peer_watch_settings watch_settings() const;

  /// How long a peer may go unheard before this node takes it that it was
  /// paused and its view of the lists in use is stale: three peer
  /// timeouts, where an ask of a peer ends within one ping interval and one
  /// peer timeout (serving_lists.hpp).
  caf::timespan max_peer_silence() const;

  /// How long a peer may take for one step of an anti-entropy exchange (it
  /// flushes and scans its secrets): ten peer timeouts, at least 30 s.
  caf::timespan sync_timeout() const;
};

} // namespace coalesce
