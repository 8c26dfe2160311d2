#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/actors/secret_buffer.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/node/peer_watch.hpp>
#include <coalesce/node/secret_sync.hpp>
#include <coalesce/node/serving_lists.hpp>

/// The coordinator of a clustered node's secrets (`coalesce.replicas` above
/// 1): the gateway hands it the secret requests the local buffer would get,
/// and it keeps each chat's captures on the chat's replicas (its first
/// `replicas` nodes by rendezvous order, this node among them; the gateway
/// refuses a chat it does not replicate).
///
/// - `queue` refuses a bad entry whole (`errc::invalid_secret_entry`), then
///   sends each replica its part (this node's buffer one of them; a peer
///   gets one message at a time, the parts of the queues that wait
///   meanwhile together, each alone while the lists change) and is
///   answered `ok` once a majority of every chat's replicas
///   hold its entries in memory: each replica's buffer writes them behind
///   into its own RocksDB, so a crash of any one node loses no answered
///   secret, with no fsync on the path. A replica that does not answer
///   within `timeout` holds up no answer a majority already gives; when no
///   majority can answer, `errc::no_quorum` names the replicas that failed.
/// - `lookup` asks every replica and answers once a majority of each chat's
///   replicas answered, merged: a found capture over none; of two, the
///   later message time, and of two different secrets the greater bytes
///   (every replica and coordinator picks alike). So a lookup sees every
///   capture whose `queue` was answered before it was sent: the majorities
///   of the two meet in one replica.
/// - Every capture it admits gets a stamp (microseconds, made unique by the
///   node's index in the low bits): of two captures of a key with
///   different secrets, the greater stamp wins on every replica, whatever
///   order they arrive in.
/// - While this node catches up after a start without a clean stop
///   (secret_sync.hpp), its own replica answers no read: a lookup it
///   coordinates counts it as failed, and a peer's `replica` lookup is
///   answered `errc::catching_up`. It still takes copies.
/// - `flush` flushes every node of the cluster and is answered `ok` once
///   all but at most ⌊(r-1)/2⌋ of them (r = `replicas`) made durable what
///   they held when it reached them (a peer's copies that wait for it
///   leave before the flush): every chat then has a majority of
///   replicas that flushed, and everything queued before the flush that a
///   majority acknowledged is durable on at least one of them, on a
///   majority when every replica received its copy (catch-up and the
///   anti-entropy pass complete the rest). Otherwise `no_quorum` names the
///   nodes that failed.
/// - The `replica` requests (a coordinator's copies, lookups and flushes
///   for this node alone), `seal` and `stats` go to this node's buffer.
/// - Peers are reached through their gateways, as the peer watch reports
///   them (`peer_up`, `peer_down`); one not known is connected to on
///   demand, through CAF's middleman actor (which answers at once for a
///   node it is connected to).
namespace coalesce {

/// The buffer's interface plus what the peer watch tells it, by the peer's
/// index in the cluster list.
using secret_replicas_actor = secret_buffer_interface::extend<
  caf::reacts_to<peer_up_atom, uint64_t, node_actor>,
  caf::reacts_to<peer_down_atom, uint64_t>,
  /// This node's secrets caught up from its peers (secret_sync.hpp).
  caf::reacts_to<caught_up_atom>>;

struct secret_replica_settings {
  cluster_map map;
  /// This node's index in `map`.
  std::size_t self = 0;
  std::size_t replicas = 3;
  /// How long a replica may take to answer.
  caf::timespan timeout;
  /// Where it counts the requests it sends other replicas and their
  /// failures (the node's stats).
  std::shared_ptr<peer_counters> counters;
  /// Whether this node's own replica starts out of reads until
  /// `caught_up_atom` (secret_sync.hpp says when).
  bool catching_up = false;
  /// How long a peer may take to flush (it may hold much more than one
  /// request's worth).
  caf::timespan flush_timeout = std::chrono::seconds{30};
  /// The other lists peers serve under, whose majorities count too while
  /// the list changes (coalesce/node/serving_lists.hpp); null for this
  /// node's list alone.
  std::shared_ptr<serving_lists> lists;
};

secret_replicas_actor spawn_secret_replicas(caf::actor_system& sys,
                                            secret_buffer_actor local,
                                            secret_replica_settings settings);

} // namespace coalesce
