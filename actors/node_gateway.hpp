#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/node_interface.hpp>
#include <coalesce/messages/routing_key.hpp>

/// The one actor a node publishes: remote clients (the CLI, other nodes)
/// talk to the node's services through it, never to the services directly.
///
/// - It forwards each request to the service that owns it, with one generic
///   forwarder per request of every service of `all_services`; the service
///   answers the caller directly and sees the caller as the requester (so
///   the secret buffer monitors remote producers like local ones).
/// - `shutdown`, accepted only from the gateway's own node, switches it to
///   refusing: every later request is answered with `errc::node_shutting_down`,
///   while in-process producers keep the services' own shutdown paths (the
///   buffer's seal).
/// - In a cluster, it refuses a request for a key it does not keep (a chat
///   it is not a replica of, a session or room another node owns) with
///   `errc::not_replica`, naming the key and the nodes that keep it ("room R
///   belongs to 127.0.0.1:4302"), so that a client with an outdated list of
///   nodes is told rather than served by the wrong node; with `peers`, the
///   refusal carries the list this node serves under (`list_of_refusal`,
///   coalesce/messages/errc.hpp) for the client to adopt. A request with several keys
///   (a batch of secrets, a lookup of many keys) is refused whole, naming
///   the first key in it another node owns; nothing of it is done. A
///   request that carries no key (a flush, a backfill ticket, a session
///   lease) is served: a ticket or lease exists only on the node that
///   issued it.
/// - A message of no request it serves, or one the middleman could not
///   decode (a field over its limit: it arrives empty), is answered
///   `errc::invalid_request` saying which.
/// - `stats` gathers the counters of every service that has them (its
///   descriptor names its member of `node_stats`) into one `node_stats`;
///   each such service answers `stats` itself.
///
/// Nothing here names a service: they are listed in
/// coalesce/messages/node_interface.hpp, each by its descriptor.
namespace coalesce {

// node_actor: coalesce/messages/node_interface.hpp.

/// The address of the node that owns `key` when it is not this one; empty
/// when this node owns it.
using foreign_owner_fn = std::function<std::string(const routing_key& key)>;

/// What a clustered node knows of its peers, kept by its peer watch
/// (coalesce/node/peer_watch.hpp), its coordinators
/// (coalesce/node/replica_calls.hpp, secret_replicas.hpp) and their repairs
/// (coalesce/node/sync_rounds.hpp), read by the gateway into its stats.
struct peer_counters {
  /// What this node counts of one node of the cluster list.
  struct of_node {
    std::atomic<bool> down{false};
    std::atomic<uint64_t> replica_requests{0};
    std::atomic<uint64_t> replica_failures{0};
  };

  /// `cluster`: the cluster list's addresses, in its order (what the
  /// counters per node are indexed by); empty counts totals only.
  /// `cluster_version`: that list's version.
  explicit peer_counters(std::vector<std::string> cluster = {},
                         uint64_t cluster_version = 0)
    : cluster(std::move(cluster)),
      cluster_version(cluster_version),
      by_node(this->cluster.size()) {
    // nop
  }

  void request_sent(std::size_t node) {
    ++replica_requests;
    if (node < by_node.size())
      ++by_node[node].replica_requests;
  }

  void request_failed(std::size_t node) {
    ++replica_failures;
    if (node < by_node.size())
      ++by_node[node].replica_failures;
  }

  void went_down(std::size_t node) {
    ++down;
    ++losses;
    if (node < by_node.size())
      by_node[node].down = true;
  }

  void came_up(std::size_t node) {
    --down;
    if (node < by_node.size())
      by_node[node].down = false;
  }

  /// Before the first connect: every peer of `peers` (indices) counts
  /// down, no loss.
  void all_down(const std::vector<std::size_t>& peers) {
    down = peers.size();
    for (auto node : peers)
      if (node < by_node.size())
        by_node[node].down = true;
  }

  const std::vector<std::string> cluster;
  const uint64_t cluster_version;
  std::vector<of_node> by_node;
  std::atomic<uint64_t> down{0};
  std::atomic<uint64_t> losses{0};
  /// Peers whose last answer named another version of the cluster list.
  std::atomic<uint64_t> peers_on_other_lists{0};
  /// The lists the coordinators count majorities under (node_stats says).
  std::atomic<uint64_t> cluster_lists_counted{0};
  std::atomic<uint64_t> replica_requests{0};
  std::atomic<uint64_t> replica_failures{0};
  std::atomic<uint64_t> catching_up{0};
  std::atomic<uint64_t> sync_rounds{0};
  std::atomic<uint64_t> keys_repaired{0};
  std::atomic<uint64_t> keys_handed_off{0};
  /// Keys held here that this node no longer replicates, by kind (secrets,
  /// sessions, rooms), as the last release pass found them
  /// (coalesce/node/key_release.hpp), and those it dropped.
  std::array<std::atomic<uint64_t>, 3> keys_to_hand_off{};
  std::atomic<uint64_t> keys_dropped{0};
};

/// The actors a clustered node serves its peers' replica requests
/// through; a null one is a kind of replica this node keeps none of (its
/// requests are refused).
struct replica_endpoints {
  /// The repair of secrets (coalesce/node/secret_sync.hpp).
  secret_sync_requests secret_sync;
  /// Sessions' replica requests and their repair
  /// (coalesce/node/session_replicas.hpp, session_sync.hpp).
  session_replica_endpoint_actor session_replicas;
  session_listing_requests session_sync;
  /// Rooms' replica requests and their repair
  /// (coalesce/node/timeline_replicas.hpp, timeline_sync.hpp).
  room_replica_endpoint_actor room_replicas;
  room_listing_requests room_sync;
  /// The refusal of a replica request whose coordinator did not count
  /// every cluster list this node counts (its `list_stamp`), or none;
  /// null: none ever (a node alone).
  std::function<std::optional<caf::error>(const list_stamp&)> uncounted;
};

/// A gateway in front of the services `services` points at, which must be
/// the services themselves (their `stats` is asked for), not another node.
/// A null handle is a service this node does not host: its requests are
/// answered `errc::invalid_request`, its stats stay zero. A null
/// `foreign_owner` (a node alone) owns every key; null `peers`, no peers.
node_actor spawn_node_gateway(caf::actor_system& sys, service_handles services,
                              foreign_owner_fn foreign_owner = {},
                              std::shared_ptr<const peer_counters> peers = {},
                              replica_endpoints endpoints = {});

} // namespace coalesce
