#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <coalesce/messages/routing_key.hpp>

/// A deployment's list of nodes and which of them owns a key, by
/// rendezvous (highest-random-weight) hashing: every (node, key) pair gets a
/// weight from a stable 64-bit hash (FNV-1a, then a final mix), the same in
/// every process and build, and the node of highest weight owns the key.
/// Adding a node moves to it only the keys it now wins (about 1/N of them);
/// no key moves between the nodes that were there. Needs coalesce/messages
/// only, so that clients and the node's gateway share it.
///
/// A node's list also carries what stays true of it across changes of the
/// list (coalesce/node/cluster_list.hpp keeps it): a version, one more with
/// every change, and each node's id, which never changes and is never given
/// to another node. Ballots and capture stamps name their node by id, so
/// that they stay unique when nodes come and go.
namespace coalesce {

/// One node of the list, "host:port".
struct node_endpoint {
  std::string host;
  uint16_t port = 0;

  std::string text() const {
    return host + ":" + std::to_string(port);
  }

  friend bool operator==(const node_endpoint& x, const node_endpoint& y) {
    return x.host == y.host && x.port == y.port;
  }
};

/// Parses "host:port" (a non-empty host, a port 1..65535); on failure
/// leaves a sentence in `problem` that starts with `name` (the key or flag
/// the text came from).
std::optional<node_endpoint> parse_endpoint(const std::string& text,
                                            const std::string& name,
                                            std::string& problem);

/// The stable hash of the weights (FNV-1a 64 with a final avalanche mix).
uint64_t stable_hash(std::string_view text);

class cluster_map {
public:
  cluster_map() = default;

  /// The list in the given order; the order does not change any owner.
  /// Version 1, ids in list order from 0.
  explicit cluster_map(std::vector<node_endpoint> nodes);

  /// A list of a given version whose nodes have the ids `ids` (one each, in
  /// list order, all below `node_id_limit`).
  cluster_map(uint64_t version, std::vector<node_endpoint> nodes,
              std::vector<uint32_t> ids);

  /// Node ids are below this: the low bits of a capture stamp hold a node's
  /// id, and their highest value stands for a client
  /// (coalesce/messages/capture_stamp.hpp).
  static constexpr uint32_t node_id_limit = 1023;

  /// Parses every entry; a sentence starting with `name` naming the bad or
  /// repeated entry, or nothing.
  static std::optional<std::string> parse(const std::vector<std::string>& entries,
                                          const std::string& name,
                                          cluster_map& out);

  /// The same from one comma-separated list ("h:p,h:p"), as `--nodes`
  /// takes it.
  static std::optional<std::string> parse_list(const std::string& entries,
                                               const std::string& name,
                                               cluster_map& out);

  /// Empty: a single node that owns every key.
  bool empty() const {
    return nodes_.empty();
  }

  std::size_t size() const {
    return nodes_.size();
  }

  const std::vector<node_endpoint>& nodes() const {
    return nodes_;
  }

  /// The index of the node that owns `key`; the list must not be empty.
  std::size_t owner_index(const routing_key& key) const;

  const node_endpoint& owner(const routing_key& key) const {
    return nodes_[owner_index(key)];
  }

  /// The first `count` nodes of `key`'s rendezvous order (all of them when
  /// the list is shorter): its replicas, its owner first. Adding a node
  /// changes a key's replicas only by the new node taking a place.
  std::vector<std::size_t> replica_indices(const routing_key& key,
                                           std::size_t count) const;

  std::optional<std::size_t> index_of(const node_endpoint& node) const;

  /// One more with every change of the list; 0 for a node alone.
  uint64_t version() const {
    return version_;
  }

  /// The id of the node at `index`.
  uint32_t id_of(std::size_t index) const {
    return ids_[index];
  }

  const std::vector<uint32_t>& ids() const {
    return ids_;
  }

  /// "version N: host:port, host:port" (for logs and refusals).
  std::string text() const;

  /// A stable hash of the nodes in their order, not the version: what
  /// decides where keys live (the nodes) and what an index names (their
  /// order). Nodes count their versions apart (a node that joined later
  /// starts at 1), so two lists of one fingerprint route alike whatever
  /// their versions, and one version can name different lists.
  uint64_t fingerprint() const;

private:
  /// Hashes each node's part of its weights once, rather than per key.
  void seed_nodes();

  uint64_t version_ = 0;
  std::vector<node_endpoint> nodes_;
  std::vector<uint32_t> ids_;
  /// By index: the hash every weight of that node starts from.
  std::vector<uint64_t> node_seeds_;
};

} // namespace coalesce
