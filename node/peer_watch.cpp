#include <coalesce/node/peer_watch.hpp>

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

struct peer {
  node_endpoint where;
  /// Its index in the cluster list.
  uint64_t index = 0;
  /// Null while no connection is known.
  node_actor gateway;
  bool up = false;
  bool dialing = false;
  /// The last reason it could not be reached, logged once per reason.
  std::string last_problem;
};

struct peer_watch_state {
  static inline const char* name = "peer_watch";
  std::vector<peer> peers;
  peer_watch_settings settings;
  std::shared_ptr<peer_counters> counters;
  std::vector<caf::actor> subscribers;
};

using watch_pointer = caf::stateful_actor<peer_watch_state>*;

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

void reached(watch_pointer self, std::size_t index, node_actor gateway) {
  auto& p = self->state.peers[index];
  p.gateway = std::move(gateway);
  self->monitor(p.gateway);
  mark_up(self, index);
}

void unreachable(watch_pointer self, std::size_t index, std::string why) {
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
  request_node(self, p.where.host, p.where.port,
               self->state.settings.peer_timeout,
               [self, index](caf::expected<node_actor> gateway) {
                 self->state.peers[index].dialing = false;
                 if (gateway)
                   reached(self, index, std::move(*gateway));
                 else
                   unreachable(self, index,
                               unreachable_sentence(self->system(),
                                                    gateway.error()));
               });
}

void ping(watch_pointer self) {
  for (std::size_t index = 0; index < self->state.peers.size(); ++index) {
    auto& p = self->state.peers[index];
    if (!p.gateway)
      continue;
    auto timeout = self->state.settings.peer_timeout;
    auto gateway = p.gateway;
    self->request(gateway, timeout, stats_atom::value)
      .then(
        [self, index, gateway](const node_stats&) {
          if (self->state.peers[index].gateway == gateway)
            mark_up(self, index);
        },
        [self, index, gateway, timeout](caf::error& err) {
          if (self->state.peers[index].gateway != gateway)
            return;
          mark_down(self, index,
                    err == caf::sec::request_timeout
                      ? "did not answer a ping within "
                          + caf::deep_to_string(timeout)
                      : "a ping failed: " + self->system().render(err));
        });
  }
  self->delayed_send(self, self->state.settings.ping_interval,
                     ping_atom::value);
}

caf::behavior peer_watch(watch_pointer self, cluster_map map, std::size_t own,
                         peer_watch_settings settings,
                         std::shared_ptr<peer_counters> counters,
                         std::vector<caf::actor> subscribers) {
  auto& st = self->state;
  st.settings = settings;
  st.counters = std::move(counters);
  st.subscribers = std::move(subscribers);
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
      mark_down(self, index,
                "its connection was lost: " + self->system().render(msg.reason));
      self->delayed_send(self, self->state.settings.ping_interval,
                         redial_atom::value, index);
    }
  });
  for (std::size_t index = 0; index < st.peers.size(); ++index)
    dial(self, index);
  self->delayed_send(self, settings.ping_interval, ping_atom::value);
  return {
    [self](redial_atom, std::size_t index) { dial(self, index); },
    [self](ping_atom) { ping(self); },
  };
}

} // namespace

caf::actor spawn_peer_watch(caf::actor_system& sys, const cluster_map& map,
                            std::size_t self, peer_watch_settings settings,
                            std::shared_ptr<peer_counters> counters,
                            std::vector<caf::actor> subscribers) {
  return sys.spawn(peer_watch, map, self, settings, std::move(counters),
                   std::move(subscribers));
}

} // namespace coalesce
