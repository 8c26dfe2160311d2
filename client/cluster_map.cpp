#include <coalesce/client/cluster_map.hpp>

#include <algorithm>

namespace coalesce {

namespace {

constexpr uint64_t fnv_offset = 0xcbf29ce484222325ULL;
constexpr uint64_t fnv_prime = 0x100000001b3ULL;

uint64_t fnv1a(uint64_t hash, std::string_view text) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= fnv_prime;
  }
  return hash;
}

/// FNV-1a's high bits barely depend on the last bytes; the weights compare
/// whole values, so every bit must depend on every byte (splitmix64's
/// finaliser).
uint64_t avalanche(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// The hash of a node's part of each weight (`node_seed`): the node and a
/// separator no host or port contains.
uint64_t node_seed(const node_endpoint& node) {
  return fnv1a(fnv1a(fnv_offset, node.text()), std::string_view{"\0", 1});
}

/// The weight of a node (its `node_seed`) for `key`: the node, the key's
/// kind and its value, so that a room and a chat of the same name are
/// routed independently.
uint64_t weight(uint64_t seed, const routing_key& key) {
  auto hash = fnv1a(seed, to_string(key.kind));
  hash = fnv1a(hash, std::string_view{"\0", 1});
  return avalanche(fnv1a(hash, key.value));
}

} // namespace

uint64_t stable_hash(std::string_view text) {
  return avalanche(fnv1a(fnv_offset, text));
}

std::optional<node_endpoint> parse_endpoint(const std::string& text,
                                            const std::string& name,
                                            std::string& problem) {
  auto bad = [&](const std::string& why) -> std::optional<node_endpoint> {
    problem = name + ": \"" + text + "\" " + why;
    return std::nullopt;
  };
  auto colon = text.rfind(':');
  if (colon == std::string::npos)
    return bad("must be host:port");
  node_endpoint result;
  result.host = text.substr(0, colon);
  auto port = text.substr(colon + 1);
  if (result.host.empty())
    return bad("has no host (host:port)");
  if (port.empty() || port.size() > 5
      || !std::all_of(port.begin(), port.end(),
                      [](char c) { return c >= '0' && c <= '9'; }))
    return bad("has no port number (host:port)");
  auto number = std::stoul(port);
  if (number == 0 || number > 65535)
    return bad("has a port outside 1..65535");
  result.port = static_cast<uint16_t>(number);
  return result;
}

cluster_map::cluster_map(std::vector<node_endpoint> nodes)
  : version_(nodes.empty() ? 0 : 1), nodes_(std::move(nodes)) {
  ids_.reserve(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    ids_.push_back(static_cast<uint32_t>(i));
  seed_nodes();
}

cluster_map::cluster_map(uint64_t version, std::vector<node_endpoint> nodes,
                         std::vector<uint32_t> ids)
  : version_(version), nodes_(std::move(nodes)), ids_(std::move(ids)) {
  seed_nodes();
}

void cluster_map::seed_nodes() {
  node_seeds_.clear();
  node_seeds_.reserve(nodes_.size());
  for (const auto& node : nodes_)
    node_seeds_.push_back(node_seed(node));
}

std::string cluster_map::text() const {
  std::string result = "version " + std::to_string(version_) + ":";
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    result += (i == 0 ? " " : ", ") + nodes_[i].text();
  return result;
}

uint64_t cluster_map::fingerprint() const {
  std::string nodes;
  for (const auto& node : nodes_)
    nodes += node.text() + ",";
  return stable_hash(nodes);
}

std::optional<std::string>
cluster_map::parse(const std::vector<std::string>& entries,
                   const std::string& name, cluster_map& out) {
  std::vector<node_endpoint> nodes;
  for (const auto& entry : entries) {
    std::string problem;
    auto node = parse_endpoint(entry, name, problem);
    if (!node)
      return problem;
    if (std::find(nodes.begin(), nodes.end(), *node) != nodes.end())
      return name + ": \"" + entry + "\" is listed twice";
    nodes.push_back(std::move(*node));
  }
  out = cluster_map{std::move(nodes)};
  return std::nullopt;
}

std::optional<std::string> cluster_map::parse_list(const std::string& entries,
                                                  const std::string& name,
                                                  cluster_map& out) {
  std::vector<std::string> split;
  std::string::size_type start = 0;
  for (;;) {
    auto comma = entries.find(',', start);
    split.push_back(entries.substr(start, comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return parse(split, name, out);
}

std::size_t cluster_map::owner_index(const routing_key& key) const {
  return replica_indices(key, 1).front();
}

std::vector<std::size_t> cluster_map::replica_indices(const routing_key& key,
                                                      std::size_t count) const {
  std::vector<std::pair<uint64_t, std::size_t>> ranked;
  ranked.reserve(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    ranked.emplace_back(weight(node_seeds_[i], key), i);
  // Ties (practically never) go to the smaller address, not the earlier
  // entry, so that the order of the list never matters.
  auto first = [this](const auto& x, const auto& y) {
    if (x.first != y.first)
      return x.first > y.first;
    return nodes_[x.second].text() < nodes_[y.second].text();
  };
  count = std::min(count, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + count, ranked.end(),
                    first);
  std::vector<std::size_t> result;
  result.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    result.push_back(ranked[i].second);
  return result;
}

std::optional<std::size_t>
cluster_map::index_of(const node_endpoint& node) const {
  auto i = std::find(nodes_.begin(), nodes_.end(), node);
  if (i == nodes_.end())
    return std::nullopt;
  return static_cast<std::size_t>(i - nodes_.begin());
}

} // namespace coalesce
