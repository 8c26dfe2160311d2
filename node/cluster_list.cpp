#include <coalesce/node/cluster_list.hpp>

#include <algorithm>
#include <sstream>
#include <vector>

#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

constexpr const char* record_header = "coalesce-cluster-list 1";

caf::error malformed(const std::string& why) {
  return make_error(errc::corrupt_record,
                    "the stored cluster list (meta key coalesce/cluster-list) "
                      + why);
}

bool same_nodes(const cluster_map& x, const cluster_map& y) {
  if (x.size() != y.size())
    return false;
  return std::all_of(x.nodes().begin(), x.nodes().end(),
                     [&](const node_endpoint& node) {
                       return y.index_of(node).has_value();
                     });
}

} // namespace

std::string encode_cluster_list(const cluster_list_record& record) {
  std::string result = record_header;
  result += "\nversion " + std::to_string(record.list.version());
  result += "\nnext-id " + std::to_string(record.next_id);
  for (std::size_t i = 0; i < record.list.size(); ++i)
    result += "\n" + std::to_string(record.list.id_of(i)) + " "
              + record.list.nodes()[i].text();
  return result + "\n";
}

caf::expected<cluster_list_record>
decode_cluster_list(const std::string& encoded) {
  std::istringstream in{encoded};
  std::string line;
  if (!std::getline(in, line) || line != record_header)
    return malformed("does not start with \"" + std::string{record_header}
                     + "\"");
  uint64_t version = 0;
  uint64_t next_id = 0;
  std::string word;
  if (!(in >> word >> version) || word != "version" || version == 0)
    return malformed("has no version");
  if (!(in >> word >> next_id) || word != "next-id"
      || next_id > cluster_map::node_id_limit)
    return malformed("has no next id");
  std::vector<node_endpoint> nodes;
  std::vector<uint32_t> ids;
  uint64_t id = 0;
  std::string address;
  while (in >> id >> address) {
    std::string problem;
    auto node = parse_endpoint(address, "an entry", problem);
    if (!node)
      return malformed(problem);
    if (id >= next_id
        || std::find(ids.begin(), ids.end(), id) != ids.end()
        || std::find(nodes.begin(), nodes.end(), *node) != nodes.end())
      return malformed("repeats a node or an id, or names an id not yet given: "
                       + std::to_string(id) + " " + address);
    nodes.push_back(std::move(*node));
    ids.push_back(static_cast<uint32_t>(id));
  }
  if (!in.eof() || nodes.empty())
    return malformed("has a malformed node entry or none");
  return cluster_list_record{
    cluster_map{version, std::move(nodes), std::move(ids)},
    static_cast<uint32_t>(next_id)};
}

caf::expected<settled_cluster_list>
settle_cluster_list(const cluster_map& configured, const std::string& stored) {
  settled_cluster_list result;
  if (stored.empty()) {
    result.record = {configured, static_cast<uint32_t>(configured.size())};
    result.changed = true;
    return result;
  }
  auto before = decode_cluster_list(stored);
  if (!before)
    return std::move(before.error());
  if (same_nodes(configured, before->list)) {
    result.record = std::move(*before);
    return result;
  }
  auto next_id = before->next_id;
  std::vector<uint32_t> ids;
  for (const auto& node : configured.nodes()) {
    if (auto kept = before->list.index_of(node)) {
      ids.push_back(before->list.id_of(*kept));
      continue;
    }
    if (next_id >= cluster_map::node_id_limit)
      return make_error(errc::invalid_request,
                        "coalesce.cluster adds " + node.text()
                          + ", but every one of the "
                          + std::to_string(cluster_map::node_id_limit)
                          + " node ids of this cluster was given already");
    ids.push_back(next_id++);
  }
  result.record = {cluster_map{before->list.version() + 1, configured.nodes(),
                               std::move(ids)},
                   next_id};
  result.changed = true;
  result.previous = before->list.text();
  for (const auto& node : before->list.nodes())
    if (!configured.index_of(node))
      result.dropped_nodes = true;
  return result;
}

int catch_up_passes(const settled_cluster_list& settled) {
  return settled.changed ? 2 : 1;
}

bool catches_up_after_change(const settled_cluster_list& settled) {
  return settled.changed && !settled.previous.empty();
}

} // namespace coalesce
