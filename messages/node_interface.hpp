#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/backfill_scheduler_interface.hpp>
#include <coalesce/messages/named_fields.hpp>
#include <coalesce/messages/secret_buffer_interface.hpp>
#include <coalesce/messages/secret_sync_interface.hpp>
#include <coalesce/messages/service_descriptor.hpp>
#include <coalesce/messages/session_persister_interface.hpp>
#include <coalesce/messages/session_replica_interface.hpp>
#include <coalesce/messages/timeline_interface.hpp>
#include <coalesce/messages/timeline_replica_interface.hpp>

/// What a node shows the world: the services it hosts, each named here once,
/// in `all_services`, by its descriptor (at the end of its
/// `NAME_interface.hpp`; coalesce/messages/service_descriptor.hpp says what a
/// descriptor holds). Everything below is derived from that list: the
/// handles (`service_handles`), the node's stats (`node_stats`), the
/// gateway's interface (`node_actor`), the message types registered
/// (`for_each_message_type`), the requests a shutting-down node serves
/// (`served_while_shutting_down`); and from these, the gateway's forwarders
/// and stats, `connect_services`, a cluster's routing (routing_key.hpp,
/// coalesce/client/cluster_client.cpp), the metrics' gauges and counters,
/// the CLI's stats JSON and the node's stats line.
namespace coalesce {

/// The services, in the order of `node_stats` on the wire and of
/// `node_actor`'s requests.
using all_services
  = type_list<secret_buffer_descriptor, timeline_descriptor,
              backfill_scheduler_descriptor, session_persister_descriptor>;

/// Calls `f(Service{})` with the descriptor of every service, in order.
template <class F>
void for_each_service(F&& f) {
  for_each_type(all_services{}, f);
}

// -- handles -------------------------------------------------------------------

template <class... Services>
struct handle_members : Services::handle_member... {};

/// The typed handles of the services, a member each (`secret_buffer`,
/// `timeline`, ...: each descriptor's `handle_member`). In process they
/// point at the services themselves, remotely at the node's gateway, which
/// forwards.
struct service_handles : all_services::apply<handle_members> {};

// -- stats ---------------------------------------------------------------------

template <class Service>
struct has_stats_t : std::bool_constant<has_stats<Service>> {};

/// The services with stats of their own, in order.
using services_with_stats = filter_t<has_stats_t, all_services>;

template <class... Services>
struct stats_members : Services::stats_member... {};

/// What `stats` answers for a whole node: its own counters and those of each
/// service it hosts (a member each: `secret_buffer`, `backfill_scheduler`,
/// ...: each descriptor's `stats_member`).
struct node_stats : services_with_stats::apply<stats_members> {
  /// Seconds since the node started serving.
  int64_t uptime_s = 0;
  /// Whether the node received SIGINT or SIGTERM and refuses new requests.
  bool shutting_down = false;
  /// Requests the node refused because it was shutting down.
  uint64_t refused_requests = 0;
  /// Other nodes of `coalesce.cluster` this node cannot reach or that do not
  /// answer its pings now (0 for a node alone).
  uint64_t peers_down = 0;
  /// Times a peer this node had reached went down (lost or silent).
  uint64_t peer_losses = 0;
  /// Replica requests this node, coordinating a chat's secrets, a session
  /// or a room, sent to other replicas (copies, lookups, flushes, claims,
  /// writes, reads, appends), and how many of them failed (no answer in
  /// time, no connection, an error).
  uint64_t replica_requests = 0;
  uint64_t replica_failures = 0;
  /// How many of this node's replicas (secrets, sessions) are catching up
  /// from every peer after a start without a clean stop (or with an empty
  /// data directory): each answers no read meanwhile; 0 once all caught up.
  uint64_t catching_up = 0;
  /// Anti-entropy exchanges with a peer that completed, and the keys they
  /// found different and repaired (here or there).
  uint64_t sync_rounds = 0;
  uint64_t keys_repaired = 0;
  /// Keys this node handed off: sent to a peer under another cluster list
  /// that is one of their replicas there (a node that joined, or gained
  /// them when another left; each pull of a key counts it).
  uint64_t keys_handed_off = 0;
  /// Keys (chats, sessions, rooms) this node holds but no longer
  /// replicates under its cluster list
  /// (it lost them to a node that joined), as its last release pass found
  /// them: each is dropped once a majority of its replicas holds it at
  /// least as new, which waits until every peer serves under this node's
  /// list. 0 once the handoff of a change is complete here.
  uint64_t keys_to_hand_off = 0;
  /// Keys (chats, sessions, rooms) this node dropped because their
  /// replicas under its list hold them.
  uint64_t keys_dropped = 0;
  /// The nodes of the cluster list this node serves under, in its order
  /// (empty for a node alone): what the fields per peer below are indexed
  /// by, this node's own entry staying 0.
  std::vector<std::string> cluster;
  /// The version of the cluster list this node serves under: 1 for the
  /// first list a node stored, one more with every change (0 for a node
  /// alone). Nodes serve under one list when they show the same version
  /// and nodes (a node that joined later can
  /// show another version for the same list, or the same version for
  /// another list: each counts its versions itself).
  uint64_t cluster_version = 0;
  /// Peers whose last answer to this node's ping named another list (its
  /// version or its nodes; each is logged): 0 once every reachable node
  /// agrees.
  uint64_t peers_on_other_lists = 0;
  /// The cluster lists this node's coordinators count a majority of each
  /// key's replicas under: 1 (its own), 2 or more while a peer serves
  /// under another list (joint quorums during a change of the list), 0
  /// while it has not yet heard from every peer which list it serves
  /// under (it coordinates nothing then) and for a node alone.
  uint64_t cluster_lists_counted = 0;
  /// Per node: 1 while this node counts it down (as in `peers_down`).
  std::vector<uint64_t> peer_down;
  /// Per node: `replica_requests` and `replica_failures` sent to it (copies,
  /// lookups, flushes, sessions' and rooms' replica requests).
  std::vector<uint64_t> replica_requests_by_peer;
  std::vector<uint64_t> replica_failures_by_peer;
};

template <class F, class... Services>
auto with_named_fields(node_stats& x, F&& f, type_list<Services...>) {
  return f(field("uptime_s", x.uptime_s),
           field("shutting_down", x.shutting_down),
           field("refused_requests", x.refused_requests),
           field("peers_down", x.peers_down),
           field("peer_losses", x.peer_losses),
           field("replica_requests", x.replica_requests),
           field("replica_failures", x.replica_failures),
           field("catching_up", x.catching_up),
           field("sync_rounds", x.sync_rounds),
           field("keys_repaired", x.keys_repaired),
           field("keys_handed_off", x.keys_handed_off),
           field("keys_to_hand_off", x.keys_to_hand_off),
           field("keys_dropped", x.keys_dropped),
           field("cluster", x.cluster),
           field("cluster_version", x.cluster_version),
           field("peers_on_other_lists", x.peers_on_other_lists),
           field("cluster_lists_counted", x.cluster_lists_counted),
           named_indices_field("peer_down", x.peer_down, "peer", x.cluster),
           named_indices_field("replica_requests_by_peer",
                               x.replica_requests_by_peer, "peer", x.cluster),
           named_indices_field("replica_failures_by_peer",
                               x.replica_failures_by_peer, "peer", x.cluster),
           field(Services::stats_name, x.*Services::stats)...);
}

/// Its fields with their names, in wire order (see named_fields.hpp): its
/// own, then each service's stats under the descriptor's `stats_name`
/// ("secrets", "scheduler", "sessions").
template <class F>
auto with_named_fields(node_stats& x, F&& f) {
  return with_named_fields(x, f, services_with_stats{});
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_stats& x) {
  return with_named_fields(x, [&](auto... fields) {
    return inspect_named_fields(f, caf::meta::type_name("node_stats"),
                                fields...);
  });
}

/// Which of node_stats' own number fields are gauges and which counters,
/// as a descriptor says for its stats.
struct node_own_stats {
  using gauges = members<&node_stats::uptime_s, &node_stats::peers_down,
                         &node_stats::catching_up, &node_stats::peer_down,
                         &node_stats::cluster_version,
                         &node_stats::peers_on_other_lists,
                         &node_stats::cluster_lists_counted,
                         &node_stats::keys_to_hand_off>;
  using counters
    = members<&node_stats::refused_requests, &node_stats::peer_losses,
              &node_stats::replica_requests, &node_stats::replica_failures,
              &node_stats::sync_rounds, &node_stats::keys_repaired,
              &node_stats::keys_handed_off, &node_stats::keys_dropped,
              &node_stats::replica_requests_by_peer,
              &node_stats::replica_failures_by_peer>;
};

/// What lists the gauges and counters of `Stats`: `node_own_stats` for
/// `node_stats`, else the descriptor of the service whose stats it is.
template <class Stats>
struct classified_by {
  template <class Service>
  struct stats_are : std::is_same<stats_type_of<Service>, Stats> {};

  using found = filter_t<stats_are, services_with_stats>;
  static_assert(found::size == 1, "no service (or two) has these stats");
  using type = front_t<found>;
};

template <>
struct classified_by<node_stats> {
  using type = node_own_stats;
};

template <class Stats>
using classified_by_t = typename classified_by<Stats>::type;

// -- the node's interface ------------------------------------------------------

template <class First, class... Rest>
struct composed_requests {
  using type = typename First::requests::template extend_with<
    typename Rest::requests...>;
};

/// The interface of the one actor a node publishes (its gateway, see
/// coalesce/actors/node_gateway.hpp): every service's requests, plus the
/// node's own stats and shutdown, the replicas' repair of secrets and the
/// sessions' replica requests.
using node_actor = typename all_services::apply<composed_requests>::type::
  template extend<caf::replies_to<stats_atom>::with<node_stats>,
                  /// Accepted only from the node itself: refuse later
                  /// requests.
                  caf::replies_to<shutdown_atom>::with<ok_atom>>::
    template extend_with<secret_sync_requests, session_replica_endpoint_actor,
                       session_listing_requests, room_replica_endpoint_actor,
                       room_listing_requests>;

/// Whether a shutting-down node still serves `Service`'s requests with verb
/// `Atom` (its descriptor's `served_while_shutting_down`: work already
/// admitted). Every other request is refused.
template <class Service, class Atom>
constexpr bool served_while_shutting_down
  = contains_v<typename Service::served_while_shutting_down, Atom>;

template <class... Services>
struct issues_of {
  using type = concat_t<typename Services::issues...>;
};

/// What the services' requests hand out that later requests bring back to
/// the node that issued it (every descriptor's `issues`).
using all_issued = typename all_services::apply<issues_of>::type;

// -- message types -------------------------------------------------------------

/// Calls `f(message_type<T>{name})` for every type the services' messages
/// carry, each descriptor's `message_types` in turn, then `node_stats` and
/// the replicas' repair (registration.cpp registers them; `std::vector<T>` comes along).
template <class F>
void for_each_message_type(F&& f) {
  for_each_service(
    [&](auto service) { decltype(service)::message_types.for_each(f); });
  f(message_type<node_stats>{"coalesce.node_stats"});
  f(message_type<secret_digest>{"coalesce.secret_digest"});
  f(message_type<secret_buckets>{"coalesce.secret_buckets"});
  f(message_type<session_version>{"coalesce.session_version"});
  f(message_type<session_delta>{"coalesce.session_delta"});
  f(message_type<session_image>{"coalesce.session_image"});
  f(message_type<replica_answer>{"coalesce.replica_answer"});
  f(message_type<session_listing>{"coalesce.session_listing"});
  f(message_type<timeline_segment>{"coalesce.timeline_segment"});
  f(message_type<room_version>{"coalesce.room_version"});
  f(message_type<room_suffix>{"coalesce.room_suffix"});
  f(message_type<room_answer>{"coalesce.room_answer"});
  f(message_type<room_listing>{"coalesce.room_listing"});
  f(message_type<handoff_asker>{"coalesce.handoff_asker"});
}

} // namespace coalesce
