#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/actors/session_persister.hpp>
#include <coalesce/actors/session_persister_protocol.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/messages/session_replica_interface.hpp>
#include <coalesce/node/coordinator_settings.hpp>
#include <coalesce/node/peer_watch.hpp>
#include <coalesce/node/serving_lists.hpp>

/// A clustered node's sessions (`coalesce.replicas` above 1): every session
/// is kept on its replicas (its first `replicas` nodes by rendezvous
/// order). The node runs a persister of its own over one coordinator per
/// local I/O actor: to the persister each coordinator is that I/O actor
/// (`session_io_actor`), and it makes every call of a session a call to
/// the session's replicas (coalesce/messages/session_replica_interface.hpp
/// says what each keeps), this node's I/O actor one of them.
///
/// - A coordinator's first call of a session prepares it: it promises the
///   replicas a ballot above any they promised (unique: the node's index in
///   the low bits) and reads what a majority holds; the newest content
///   among them is installed here when this replica lacks it. From then on
///   a coordinator cut off from its clients, which a majority has promised
///   a newer ballot, gets no majority for anything.
/// - `write` and `erase` go to every replica as a delta on this replica's
///   version and are answered `ok` once a majority applied them: so a
///   persist is answered once its write is durable (in the node's
///   durability mode) on a majority. A replica behind (it missed writes)
///   answers `out_of_sync` and is sent the whole session instead. A
///   replica with a higher generation refuses the write: a majority that
///   refuses answers errc::stale_generation; too few answers,
///   errc::no_quorum naming the replicas and why.
/// - `claim` (a register) claims the generation at a majority, refused
///   errc::stale_generation when another handle claimed it.
/// - `load` asks every replica what it holds and answers the newest
///   content a majority shows (errc::not_found for none or a delete), from
///   this replica when it holds it, else from the one that does: the newest
///   write a majority acknowledged.
/// - `storedgen` prepares again and answers the highest generation of a
///   majority and its claimant (the persister's registry learns it).
/// - `purge` does nothing: a replica keeps a delete's tombstone, or a
///   replica that missed the delete would win a later read.
/// - While this node's replica catches up (`catching_up`), it counts as
///   failed in every `prepare` and `load` round: a replica that lost what
///   it held must not make an older write look like the newest.
/// - Calls of one session run one at a time, in arrival order; a replica
///   that does not answer within `timeout` counts as failed. Calls still
///   open when the coordinator stops are answered
///   errc::stopped_before_answer.
namespace coalesce {

/// One coordinator: the persister's view of an I/O actor, plus what the
/// peer watch tells it.
using session_coordinator_actor = session_io_actor::extend<
  caf::reacts_to<peer_up_atom, uint64_t, node_actor>,
  caf::reacts_to<peer_down_atom, uint64_t>>;

/// One coordinator in front of each local I/O actor, at the same index (the
/// persister spreads sessions over them as over its I/O actors).
std::vector<session_coordinator_actor>
spawn_session_coordinators(caf::actor_system& sys,
                           const std::vector<session_replica_io_actor>& local,
                           const coordinator_settings& settings);

/// A clustered node's sessions: a persister of its own over one
/// coordinator per local I/O actor, and the endpoint its peers reach the
/// local replicas through.
struct replicated_sessions {
  session_persister_actor persister;
  std::vector<session_coordinator_actor> coordinators;
  session_replica_endpoint_actor endpoint;

  /// What the peer watch reports to.
  std::vector<caf::actor> subscribers() const;

  /// Writes what is queued within `limit` (retrying failed sessions), then
  /// stops every actor; whether every session was written. Before the
  /// local I/O actors stop: its writes go through them.
  bool stop(caf::actor_system& sys, caf::timespan limit);
};

/// Spawns them over the local I/O actors, the persister with `options`
/// and `claim_generations`.
replicated_sessions
start_replicated_sessions(caf::actor_system& sys,
                          const std::vector<session_replica_io_actor>& local,
                          const coordinator_settings& settings,
                          session_persister_options options);

/// What the gateway hands the replica requests of other nodes'
/// coordinators: each goes to the local I/O actor of its session, the one
/// this node's own coordinator uses. While `catching_up` is set, `prepare`
/// and `version` (reads) are refused errc::catching_up.
session_replica_endpoint_actor
spawn_session_replica_endpoint(caf::actor_system& sys,
                               std::vector<session_replica_io_actor> local,
                               std::shared_ptr<const std::atomic<bool>>
                                 catching_up = nullptr);

} // namespace coalesce
