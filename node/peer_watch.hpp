#pragma once

#include <memory>
#include <vector>

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/node/serving_lists.hpp>

/// A clustered node's watch over the other nodes of `coalesce.cluster`:
/// whether each is up as seen from here, logged when it changes and counted
/// in the node's stats (`peer_counters`).
///
/// - It connects through CAF's middleman actor (the TLS one for a TLS
///   node), which blocks on the connect itself, so the watch and every
///   request go on meanwhile.
/// - It monitors each reached peer's gateway: a lost connection (a killed
///   process) kills CAF's proxies of that node, a down message; it then
///   dials again every `ping_interval` until the peer is back.
/// - It pings each reached peer every `ping_interval` (the peer's `stats`): a
///   stopped or hung process keeps its socket open and only a timeout shows
///   it, so a peer that does not answer within `peer_timeout` is down until
///   it answers again.
/// - Every peer counts as down until first reached.
/// - Each answer to a ping names the list the peer serves under: a peer
///   under another list than this node's (another version, or other nodes
///   under one version) is logged once per list and counted
///   (`peers_on_other_lists`) until it agrees again.
/// - Each of `subscribers` (the secrets' coordinator, secret_replicas.hpp,
///   and their repair, secret_sync.hpp) is told each change: `peer_up_atom, INDEX, gateway` and `peer_down_atom,
///   INDEX`, by the peer's index in the cluster list.
/// - What each peer serves under goes to `serving_lists`, which the
///   coordinators count majorities by: a peer is pinged as soon as it is
///   reached, and one that cannot be reached counts as asked.
namespace coalesce {

using peer_up_atom = caf::atom_constant<caf::atom("peerup")>;
using peer_down_atom = caf::atom_constant<caf::atom("peerdown")>;

struct peer_watch_settings {
  caf::timespan peer_timeout;
  caf::timespan ping_interval;
};

/// Watches every node of `map` but the one at `self`, telling `lists`
/// (made for `map.size() - 1` peers, in list order without this node)
/// the list each peer serves under.
caf::actor spawn_peer_watch(caf::actor_system& sys, const cluster_map& map,
                            std::size_t self, peer_watch_settings settings,
                            std::shared_ptr<peer_counters> counters,
                            std::vector<caf::actor> subscribers = {},
                            std::shared_ptr<serving_lists> lists = nullptr);

} // namespace coalesce
