// The cluster's settings: registration with CAF's config, validation, and
// the ownership test the gateway applies.

#include <coalesce/node/cluster_options.hpp>

#include <algorithm>

#include <caf/config_option_adder.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/make_config_option.hpp>

#include <coalesce/actors/option_text.hpp>

namespace coalesce {

void cluster_options::add_to(caf::config_option_adder& adder) {
  adder.add(cluster, "cluster",
            described("every node of the deployment as \"host:port\", this "
                      "one included (empty: a single node)",
                      cluster));
  adder.add(peer_timeout, "peer-timeout",
            described("how long another node of the cluster may leave a "
                      "ping unanswered before this one counts it down",
                      peer_timeout));
  adder.add(replicas, "replicas",
            described("on how many nodes of the cluster a chat's secrets "
                      "are kept (every node when there are fewer)",
                      replicas));
  adder.add(anti_entropy_interval, "anti-entropy-interval",
            described("how often a node compares its secrets with every "
                      "peer and repairs what differs (0s: never; a restart "
                      "after a crash always does once)",
                      anti_entropy_interval));
}

std::string cluster_options::validate(const std::string& group,
                                      const std::string& host,
                                      uint16_t port) const {
  if (peer_timeout.count() <= 0)
    return option_key(group, "peer-timeout") + " = "
           + caf::deep_to_string(peer_timeout) + " must be positive";
  if (anti_entropy_interval.count() < 0)
    return option_key(group, "anti-entropy-interval") + " = "
           + caf::deep_to_string(anti_entropy_interval)
           + " must not be negative";
  if (replicas == 0)
    return option_key(group, "replicas") + " = 0 must be at least 1";
  if (cluster.empty())
    return {};
  auto key = option_key(group, "cluster");
  cluster_map map;
  if (auto problem = cluster_map::parse(cluster, key, map))
    return *problem;
  if (map.size() > max_cluster_nodes)
    return key + " lists " + std::to_string(map.size())
           + " nodes; a cluster has at most "
           + std::to_string(max_cluster_nodes);
  if (!map.index_of(node_endpoint{host, port}))
    return key + " does not list this node, " + option_key(group, "host")
           + ":" + option_key(group, "port") + " = " + host + ":"
           + std::to_string(port) + " (every node's own entry is its host "
           "and fixed port)";
  return {};
}

foreign_owner_fn cluster_options::foreign_owner(const std::string& host,
                                                uint16_t port) const {
  if (cluster.empty())
    return {};
  return foreign_owner(map(), index_of(host, port));
}

foreign_owner_fn cluster_options::foreign_owner(const cluster_map& nodes,
                                                std::size_t self) const {
  if (nodes.empty())
    return {};
  auto copies = replicates_secrets() ? replicas : std::size_t{1};
  return [nodes, self, copies](const routing_key& key) {
    auto kept_by = nodes.replica_indices(key, copies);
    if (std::find(kept_by.begin(), kept_by.end(), self) != kept_by.end())
      return std::string{};
    std::string names;
    for (auto index : kept_by)
      names += (names.empty() ? "" : ", ") + nodes.nodes()[index].text();
    return names + " (cluster list version " + std::to_string(nodes.version())
           + ")";
  };
}

cluster_map cluster_options::map() const {
  cluster_map result;
  if (!cluster.empty())
    cluster_map::parse(cluster, "coalesce.cluster", result);
  return result;
}

std::size_t cluster_options::index_of(const std::string& host,
                                      uint16_t port) const {
  return *map().index_of(node_endpoint{host, port});
}

peer_watch_settings cluster_options::watch_settings() const {
  return {peer_timeout, std::max<caf::timespan>(peer_timeout / 3,
                                                std::chrono::milliseconds{10})};
}

caf::timespan cluster_options::max_peer_silence() const {
  return peer_timeout * 3;
}

caf::timespan cluster_options::sync_timeout() const {
  return std::max<caf::timespan>(peer_timeout * 10, std::chrono::seconds{30});
}

} // namespace coalesce
