#pragma once

#include <cstddef>

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/node_interface.hpp>

/// A client of a deployment of several nodes: one local actor with the
/// interface of a node (`node_actor`) that sends each request to the node
/// owning its key (cluster_map.hpp, routing_key.hpp), by the rule its
/// service's descriptor gives it (`routed_by`: one key, a batch of keys,
/// every node, or the node that issued what it carries; nothing here names
/// a service). The actor system must have loaded the middleman (and
/// `caf::openssl::manager` for TLS nodes).
///
/// - It connects to a node on the first request for one of its keys, and
///   again on the next request after the node died or stopped answering: a
///   restarted node is reconnected by itself.
/// - Every request is answered within `timeout` of its arrival (connecting
///   included): by the owner, or with `errc::node_unreachable` naming the
///   owner's address. A node's own refusals (`not_replica`, ...) pass through,
///   but one: a `not_replica` refusal that names a newer list than the
///   client's (the nodes' list changed, `cluster status`) makes the client
///   route by that list from then on and send the request again (requests
///   of replicated keys, within the same deadline).
/// - A batch of secrets or of lookups spanning several owners is split, one
///   request per owner sent at once; the batch is answered once every part
///   is (a lookup in key order), or with the first error; parts other
///   owners accepted stay accepted.
/// - `enqueue` and `exclusive` answer a ticket or lease of the client's own
///   numbering, which later requests carry back to the node that issued
///   the real one.
/// - `flush`, `flush_all` and `stats` go to every node: the answer once
///   all have answered (`flush_all`: the sum; `stats`: every counter
///   summed, uptime the longest), or the first error. `shutdown` is refused.
/// - It runs until sent an exit message (`caf::anon_send_exit`), which its
///   owner sends when done; it then answers every request still under way
///   with `errc::stopped_before_answer`.
namespace coalesce {

/// `replicas`: the nodes' `coalesce.replicas`. A chat's secret requests go
/// to the chat's first replica not recently failed (its coordinator) and,
/// when that one cannot be reached, does not answer within its share of
/// `timeout` (a third for three replicas) or is shutting down, to the next,
/// within `timeout`; a node that failed is passed over for 5 s. A batch of
/// secrets (queue, lookup) answered `no_quorum` is sent again after 200 ms
/// while `timeout` allows: twice is harmless, and a majority briefly down
/// (a rolling restart) is then waited out. Every other key's requests go
/// to its owner alone.
node_actor spawn_cluster_client(caf::actor_system& sys, cluster_map nodes,
                                caf::timespan timeout,
                                std::size_t replicas = 3);

} // namespace coalesce
