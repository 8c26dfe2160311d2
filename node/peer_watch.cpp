#include <coalesce/node/peer_watch.hpp>

#include <chrono>
#include <string>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/atoms.hpp>

namespace coalesce {

namespace {

using redial_atom = caf::atom_constant<caf::atom("redial")>;
using ping_atom = caf::atom_constant<caf::atom("ping")>;
/// The lists a replica's refusal named changed what the coordinators count.
using named_atom = caf::atom_constant<caf::atom("named")>;

struct peer {
  node_endpoint where;
  /// Its index in the cluster list.
  uint64_t index = 0;
  /// Null while no connection is known.
  node_actor gateway;
  bool up = false;
  bool dialing = false;
  /// The cluster list its last answer to a ping named: version (0: none
  /// yet) and nodes.
  uint64_t list_version = 0;
  std::vector<std::string> list;
  /// The last reason it could not be reached, logged once per reason.
  std::string last_problem;
};

struct peer_watch_state {
  static inline const char* name = "peer_watch";
  std::vector<peer> peers;
  peer_watch_settings settings;
  std::shared_ptr<peer_counters> counters;
  std::vector<caf::actor> subscribers;
  /// The list this node serves under, and its nodes as a peer's stats
  /// name them.
  cluster_map list;
  std::vector<std::string> list_nodes;
  /// What the coordinators learn of the lists in use (by peer, as `peers`).
  std::shared_ptr<serving_lists> lists;
  /// The generation of `lists` last reported.
  uint64_t reported = 0;
  /// Whether the view's going stale (this node was paused) was logged.
  bool reported_stale = false;
};

using watch_pointer = caf::stateful_actor<peer_watch_state>*;

/// Logs when this node notices it went unheard of its peers for longer than
/// its view allows (it was paused), and when it heard every one again.
void report_silence(watch_pointer self) {
  auto& st = self->state;
  auto why = st.lists->staleness();
  auto stale = !why.empty();
  if (stale == st.reported_stale)
    return;
  st.reported_stale = stale;
  if (stale)
    spdlog::warn("this node {}: its coordinators take no request until every "
                 "peer answered again",
                 why);
  else
    spdlog::info("this node heard from every peer again: its coordinators "
                 "take requests");
}

/// Counts and logs what the coordinators count majorities under when it
/// changed: the start and the end of joint quorums.
void report_lists(watch_pointer self) {
  auto& st = self->state;
  report_silence(self);
  auto view = st.lists->current();
  if (view->generation == st.reported)
    return;
  st.reported = view->generation;
  if (!view->settled)
    return;
  auto counted = view->others.size() + 1;
  auto before = st.counters->cluster_lists_counted.exchange(counted);
  if (counted == before)
    return;
  if (counted == 1) {
    spdlog::info("coordinators count majorities under this node's cluster "
                 "list alone{}",
                 before == 0 ? "" : " again: every peer serves under it");
    return;
  }
  std::string others;
  for (const auto& list : view->others) {
    std::string nodes;
    for (const auto& node : list.nodes())
      nodes += (nodes.empty() ? "" : ", ") + node.text();
    others += (others.empty() ? "" : "; ") + nodes;
  }
  spdlog::warn("coordinators count a majority of each key's replicas under "
               "{} cluster lists while peers serve under another list "
               "(joint quorums): this node's {} and {}",
               counted, st.list.text(), others);
}

void mark_up(watch_pointer self, std::size_t index) {
  auto& p = self->state.peers[index];
  p.last_problem.clear();
  if (p.up)
    return;
  p.up = true;
  self->state.counters->came_up(p.index);
  spdlog::info("peer {} is up", p.where.text());
  for (const auto& subscriber : self->state.subscribers)
    self->send(subscriber, peer_up_atom::value, p.index, p.gateway);
}

void mark_down(watch_pointer self, std::size_t index, const std::string& why) {
  auto& p = self->state.peers[index];
  if (!p.up)
    return;
  p.up = false;
  self->state.counters->went_down(p.index);
  spdlog::warn("peer {} is down: {}", p.where.text(), why);
  for (const auto& subscriber : self->state.subscribers)
    self->send(subscriber, peer_down_atom::value, p.index);
}

void ping_one(watch_pointer self, std::size_t index);

void reached(watch_pointer self, std::size_t index, node_actor gateway) {
  auto& p = self->state.peers[index];
  p.gateway = std::move(gateway);
  self->monitor(p.gateway);
  mark_up(self, index);
  // The list it serves under decides what this node's coordinators count:
  // asked at once rather than at the next round of pings.
  ping_one(self, index);
}

void unreachable(watch_pointer self, std::size_t index, std::string why,
                 serving_lists::clock::time_point asked_at) {
  self->state.lists->peer_unanswered(index, asked_at);
  report_lists(self);
  auto& p = self->state.peers[index];
  if (p.last_problem != why) {
    spdlog::info("peer {} is unreachable: {}", p.where.text(), why);
    p.last_problem = std::move(why);
  }
  self->delayed_send(self, self->state.settings.ping_interval,
                     redial_atom::value, index);
}

/// Connects through CAF's middleman actor, which blocks on the connect
/// itself: this actor goes on serving meanwhile.
void dial(watch_pointer self, std::size_t index) {
  auto& p = self->state.peers[index];
  if (p.dialing || p.gateway)
    return;
  p.dialing = true;
  auto asked_at = self->state.lists->now();
  request_node(self, p.where.host, p.where.port,
               self->state.settings.peer_timeout,
               [self, index, asked_at](caf::expected<node_actor> gateway) {
                 self->state.peers[index].dialing = false;
                 if (gateway)
                   reached(self, index, std::move(*gateway));
                 else
                   unreachable(self, index,
                               unreachable_sentence(self->system(),
                                                    gateway.error()),
                               asked_at);
               });
}

/// Notes the list a peer's answer to a ping names: logged and counted
/// when it differs from this node's, and again when it agrees once more.
void note_list(watch_pointer self, std::size_t index, const node_stats& stats,
               serving_lists::clock::time_point asked_at) {
  auto& st = self->state;
  st.lists->peer_serves(index, stats.cluster, stats.cluster != st.list_nodes,
                        asked_at);
  report_lists(self);
  auto& p = st.peers[index];
  if (stats.cluster_version == p.list_version && stats.cluster == p.list)
    return;
  auto own = st.list.version();
  // Nodes count their versions apart (one that joined later starts at 1):
  // what routes keys, the nodes in their order, is compared.
  auto other_than_own = [&] { return p.list != st.list_nodes; };
  auto differed = p.list_version != 0 && other_than_own();
  p.list_version = stats.cluster_version;
  p.list = stats.cluster;
  auto differs = other_than_own();
  if (differs && !differed) {
    ++st.counters->peers_on_other_lists;
  } else if (!differs && differed) {
    --st.counters->peers_on_other_lists;
    spdlog::info("peer {} serves under this node's cluster list again "
                 "(its version {}, this node's {})",
                 p.where.text(), p.list_version, own);
    return;
  }
  if (differs) {
    std::string nodes;
    for (const auto& node : p.list)
      nodes += (nodes.empty() ? "" : ", ") + node;
    spdlog::warn("peer {} serves under cluster list version {}: {}; this "
                 "node under {}: nodes of different lists route keys "
                 "differently (coalesce-cli cluster status)",
                 p.where.text(), p.list_version, nodes, st.list.text());
  }
}

void ping_one(watch_pointer self, std::size_t index) {
  auto& p = self->state.peers[index];
  if (!p.gateway)
    return;
  auto timeout = self->state.settings.peer_timeout;
  auto gateway = p.gateway;
  // An answer tells what the peer served at some moment after the ask:
  // one that reaches a node waking from a pause is as old as its ask, and
  // leaves the view stale (serving_lists.hpp).
  auto asked_at = self->state.lists->now();
  self->request(gateway, timeout, stats_atom::value)
    .then(
      [self, index, gateway, asked_at](const node_stats& stats) {
        if (self->state.peers[index].gateway != gateway)
          return;
        mark_up(self, index);
        note_list(self, index, stats, asked_at);
      },
      [self, index, gateway, timeout, asked_at](caf::error& err) {
        if (self->state.peers[index].gateway != gateway)
          return;
        self->state.lists->peer_unanswered(index, asked_at);
        report_lists(self);
        mark_down(self, index,
                  err == caf::sec::request_timeout
                    ? "did not answer a ping within "
                        + caf::deep_to_string(timeout)
                    : "a ping failed: " + self->system().render(err));
      });
}

void ping(watch_pointer self) {
  // A ping round due long ago runs first after a pause: say so before the
  // answers come.
  report_silence(self);
  for (std::size_t index = 0; index < self->state.peers.size(); ++index)
    ping_one(self, index);
  self->delayed_send(self, self->state.settings.ping_interval,
                     ping_atom::value);
}

caf::behavior peer_watch(watch_pointer self, cluster_map map, std::size_t own,
                         peer_watch_settings settings,
                         std::shared_ptr<peer_counters> counters,
                         std::vector<caf::actor> subscribers,
                         std::shared_ptr<serving_lists> lists) {
  auto& st = self->state;
  st.lists = std::move(lists);
  st.settings = settings;
  st.counters = std::move(counters);
  st.subscribers = std::move(subscribers);
  st.list = map;
  for (const auto& node : map.nodes())
    st.list_nodes.push_back(node.text());
  for (std::size_t index = 0; index < map.size(); ++index)
    if (index != own) {
      st.peers.emplace_back();
      st.peers.back().where = map.nodes()[index];
      st.peers.back().index = index;
    }
  std::vector<std::size_t> indices;
  for (const auto& p : st.peers)
    indices.push_back(p.index);
  st.counters->all_down(indices);
  self->set_down_handler([self](caf::down_msg& msg) {
    for (std::size_t index = 0; index < self->state.peers.size(); ++index) {
      auto& p = self->state.peers[index];
      if (!p.gateway || p.gateway.address() != msg.source)
        continue;
      p.gateway = nullptr;
      self->state.lists->peer_lost(index);
      report_lists(self);
      mark_down(self, index,
                "its connection was lost: " + self->system().render(msg.reason));
      self->delayed_send(self, self->state.settings.ping_interval,
                         redial_atom::value, index);
    }
  });
  // Weak: the view lives as long as the coordinators that hold it.
  st.lists->on_named([watch = caf::actor_cast<caf::weak_actor_ptr>(self)] {
    if (auto strong = caf::actor_cast<caf::actor>(watch))
      caf::anon_send(strong, named_atom::value);
  });
  for (std::size_t index = 0; index < st.peers.size(); ++index)
    dial(self, index);
  self->delayed_send(self, settings.ping_interval, ping_atom::value);
  return {
    [self](redial_atom, std::size_t index) { dial(self, index); },
    [self](ping_atom) { ping(self); },
    [self](named_atom) { report_lists(self); },
  };
}

} // namespace

caf::actor spawn_peer_watch(caf::actor_system& sys, const cluster_map& map,
                            std::size_t self, peer_watch_settings settings,
                            std::shared_ptr<peer_counters> counters,
                            std::vector<caf::actor> subscribers,
                            std::shared_ptr<serving_lists> lists) {
  if (!lists)
    lists = std::make_shared<serving_lists>(map.size() - 1);
  return sys.spawn(peer_watch, map, self, settings, std::move(counters),
                   std::move(subscribers), std::move(lists));
}

} // namespace coalesce
