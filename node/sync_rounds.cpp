#include <coalesce/node/sync_rounds.hpp>

#include <algorithm>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>

namespace coalesce {

sync_rounds::sync_rounds(std::string kind, std::string unit,
                         std::shared_ptr<peer_counters> counters,
                         exchange_fn exchange,
                         std::function<std::string(std::size_t)> name_of,
                         std::function<std::string(const caf::error&)> render,
                         std::function<void(std::size_t)> completed)
  : kind_(std::move(kind)),
    unit_(std::move(unit)),
    counters_(std::move(counters)),
    exchange_(std::move(exchange)),
    name_of_(std::move(name_of)),
    render_(std::move(render)),
    completed_(std::move(completed)) {
  // nop
}

void sync_rounds::start_catch_up(
  std::vector<std::size_t> peers,
  std::function<void(uint64_t, std::chrono::milliseconds)> caught_up,
  int passes) {
  catching_up_ = true;
  catch_up_started_ = std::chrono::steady_clock::now();
  caught_up_ = std::move(caught_up);
  missing_.insert(peers.begin(), peers.end());
  catch_up_peers_ = std::move(peers);
  passes_left_ = passes - 1;
  ++counters_->catching_up;
}

void sync_rounds::retry_catch_up() {
  if (!catching_up_)
    return;
  // A peer that came up during a round is tried once the round ends, not
  // at the next retry timer.
  if (exchanging_)
    retry_after_round_ = true;
  else
    start_round({missing_.begin(), missing_.end()});
}

void sync_rounds::start_round(std::vector<std::size_t> peers) {
  if (exchanging_)
    return;
  round_.assign(peers.begin(), peers.end());
  next_exchange();
}

void sync_rounds::peer_down(std::size_t peer) {
  if (abort_exchange_ && exchange_peer_ == peer) {
    auto abort = std::move(abort_exchange_);
    abort();
  }
}

void sync_rounds::next_exchange() {
  if (round_.empty()) {
    exchanging_ = false;
    if (retry_after_round_) {
      retry_after_round_ = false;
      retry_catch_up();
    }
    return;
  }
  exchanging_ = true;
  auto peer = round_.front();
  round_.pop_front();
  // Decided once: by the exchange, or by the peer going down meanwhile.
  auto decided = std::make_shared<bool>(false);
  auto done = [this, peer, decided](caf::expected<uint64_t> repaired) {
    if (*decided)
      return;
    *decided = true;
    finish(peer, std::move(repaired));
  };
  exchange_peer_ = peer;
  abort_exchange_ = [done]() mutable {
    done(make_error(errc::node_unreachable,
                    "the peer went down during the exchange"));
  };
  exchange_(peer, done);
}

void sync_rounds::finish(std::size_t peer, caf::expected<uint64_t> repaired) {
  abort_exchange_ = nullptr;
  const auto where = name_of_(peer);
  if (repaired) {
    ++counters_->sync_rounds;
    counters_->keys_repaired += *repaired;
    if (failing_.erase(peer) > 0 || *repaired > 0)
      spdlog::info("{}: compared with peer {}: {} {} repaired", kind_, where,
                   *repaired, unit_);
    if (completed_)
      completed_(peer);
    if (catching_up_) {
      caught_up_repaired_ += *repaired;
      missing_.erase(peer);
      if (missing_.empty() && passes_left_ > 0) {
        // The next pass starts as this round ends.
        --passes_left_;
        spdlog::info("{}: compared with every peer, which now knows this "
                     "node's cluster list; comparing with each once more",
                     kind_);
        missing_.insert(catch_up_peers_.begin(), catch_up_peers_.end());
        retry_after_round_ = true;
      } else if (missing_.empty()) {
        catching_up_ = false;
        --counters_->catching_up;
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - catch_up_started_);
        if (caught_up_)
          caught_up_(caught_up_repaired_, took);
      }
    }
  } else if (failing_.insert(peer).second) {
    spdlog::warn("{}: comparing with peer {} failed: {}{}", kind_, where,
                 render_(repaired.error()),
                 catching_up_ ? " (still catching up; retrying)" : "");
  }
  next_exchange();
}

std::optional<caf::error> refuse_asker(const cluster_map& map,
                                       std::size_t self, uint64_t asked_under,
                                       uint64_t asker) {
  if (asked_under != map.fingerprint()) {
    std::vector<std::string> nodes;
    for (const auto& node : map.nodes())
      nodes.push_back(node.text());
    return make_not_replica("asked under another cluster list than this "
                            "node's, "
                              + map.text(),
                            {map.version(), std::move(nodes)});
  }
  if (asker >= map.size() || asker == self)
    return make_error(errc::invalid_request,
                      "no peer of this node has index "
                        + std::to_string(asker));
  return std::nullopt;
}

handoff_asker handoff_asker_of(const cluster_map& map, std::size_t self,
                               std::size_t replicas) {
  handoff_asker result;
  result.version = map.version();
  for (const auto& node : map.nodes())
    result.nodes.push_back(node.text());
  result.asker = self;
  result.replicas = replicas;
  return result;
}

caf::expected<cluster_map> list_of_asker(const handoff_asker& asker) {
  auto refuse = [](const std::string& why) {
    return make_error(errc::invalid_request, "a handoff's asker " + why);
  };
  if (asker.nodes.empty() || asker.nodes.size() > cluster_map::node_id_limit)
    return refuse("names " + std::to_string(asker.nodes.size())
                  + " nodes (1 to "
                  + std::to_string(cluster_map::node_id_limit) + ")");
  if (asker.asker >= asker.nodes.size())
    return refuse("is index " + std::to_string(asker.asker) + " of "
                  + std::to_string(asker.nodes.size()) + " nodes");
  if (asker.replicas == 0)
    return refuse("keeps 0 replicas of a key");
  cluster_map list;
  if (auto problem = cluster_map::parse(asker.nodes, "list", list))
    return make_error(errc::invalid_request, "a handoff's asker's " + *problem);
  return list;
}

bool replica_of(const cluster_map& map, std::size_t replicas,
                const routing_key& key, std::size_t node) {
  auto nodes = map.replica_indices(key, replicas);
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

void learn_asker_list(serving_lists* lists, const cluster_map& map,
                      std::size_t self, const handoff_asker& asker) {
  if (lists == nullptr || asker.asker >= asker.nodes.size())
    return;
  const auto& where = asker.nodes[asker.asker];
  std::size_t index = 0;
  for (; index < map.size(); ++index)
    if (map.nodes()[index].text() == where)
      break;
  if (index == map.size() || index == self)
    return;
  std::vector<std::string> own;
  for (const auto& node : map.nodes())
    own.push_back(node.text());
  // The peers are numbered in list order without this node.
  auto peer = index < self ? index : index - 1;
  lists->peer_serves(peer, asker.nodes, asker.nodes != own);
}

bool refused_for_list(const caf::error& err) {
  return list_of_refusal(err).has_value();
}

void note_handed_off(peer_counters& counters, const char* kind,
                     const char* unit, const handoff_asker& asker,
                     uint64_t keys) {
  if (keys == 0)
    return;
  counters.keys_handed_off += keys;
  spdlog::info("{}: handed off {} {} to {}, a replica of them under its "
               "cluster list (version {}, {} nodes)",
               kind, keys, unit, asker.nodes[asker.asker], asker.version,
               asker.nodes.size());
}

std::vector<std::size_t> every_peer(std::size_t nodes, std::size_t self) {
  std::vector<std::size_t> result;
  for (std::size_t i = 0; i < nodes; ++i)
    if (i != self)
      result.push_back(i);
  return result;
}

} // namespace coalesce
