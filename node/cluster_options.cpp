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
}

std::string cluster_options::validate(const std::string& group,
                                      const std::string& host,
                                      uint16_t port) const {
  if (peer_timeout.count() <= 0)
    return option_key(group, "peer-timeout") + " = "
           + caf::deep_to_string(peer_timeout) + " must be positive";
  if (cluster.empty())
    return {};
  auto key = option_key(group, "cluster");
  cluster_map map;
  if (auto problem = cluster_map::parse(cluster, key, map))
    return *problem;
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
  cluster_map map;
  cluster_map::parse(cluster, "coalesce.cluster", map);
  auto self = *map.index_of(node_endpoint{host, port});
  return [map = std::move(map), self](const routing_key& key) {
    auto owner = map.owner_index(key);
    return owner == self ? std::string{} : map.nodes()[owner].text();
  };
}

std::vector<node_endpoint> cluster_options::peers(const std::string& host,
                                                  uint16_t port) const {
  std::vector<node_endpoint> result;
  if (cluster.empty())
    return result;
  cluster_map map;
  cluster_map::parse(cluster, "coalesce.cluster", map);
  for (const auto& node : map.nodes())
    if (!(node == node_endpoint{host, port}))
      result.push_back(node);
  return result;
}

peer_watch_settings cluster_options::watch_settings() const {
  return {peer_timeout, std::max<caf::timespan>(peer_timeout / 3,
                                                std::chrono::milliseconds{10})};
}

} // namespace coalesce
