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
#include <coalesce/actors/session_persister_protocol.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/session_replica_interface.hpp>
#include <coalesce/node/key_release.hpp>
#include <coalesce/node/peer_watch.hpp>
#include <coalesce/node/secret_sync.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// The repair of a clustered node's sessions (anti-entropy), the sessions'
/// counterpart of secret_sync.hpp. The exchange with one peer: ask the
/// peer what it holds of the sessions both are replicas of (each session's
/// version, `session_listing_requests`), compare with what this node holds,
/// and for every session the peer holds newer (content or generation)
/// fetch the peer's image and install it here (a repair: it copies what a
/// replica holds, checked by content version, see
/// coalesce/storage/session_store.hpp). Each node pulls; every node
/// running the pass makes them converge.
///
/// - **Catch-up.** A node without a clean-stop mark (it crashed, or its
///   data directory is new or was wiped), or whose cluster list lost a
///   node (it may have gained sessions), catches up from every peer
///   before its replica answers reads: `catching_up` is set meanwhile, so
///   its coordinators and its endpoint count it out of every read
///   (session_replicas.hpp), and a replica that lost what it held never
///   makes an older write look newest. Then it logs what it repaired and
///   tells `caught_up`. Exchanges that fail are retried every `retry`.
/// - **Handoff.** A peer under another cluster list refuses the listing
///   (the asker's index names another node there); the asker asks again
///   naming its whole list, and the peer lists what it holds of the sessions
///   the asker is a replica of under it. This is how a node that joined,
///   or gained sessions when another left, gets them from nodes still under the
///   old list. Both the catch-up and the periodic repair do so.
/// - **Periodic repair.** Every `interval` (0: never) it runs the exchange
///   with every peer, counting the sessions it repaired, and a release pass
///   (key_release.hpp): a session this node holds but no longer replicates
///   (it lost it to a node that joined) is dropped once a majority of its
///   replicas holds it at least as new (content version, and a generation
///   at least as high, claimed alike).
/// - It serves its peers' exchanges, through the gateway.
///
/// It scans RocksDB itself, so it runs detached.
namespace coalesce {

using session_sync_actor = session_listing_requests::extend<
  caf::reacts_to<peer_up_atom, uint64_t, node_actor>,
  caf::reacts_to<peer_down_atom, uint64_t>,
  /// A release pass now (key_release.hpp): sessions dropped, still held.
  caf::replies_to<release_keys_atom>::with<uint64_t, uint64_t>>;

/// Spawns it detached over the node's database and its session I/O
/// actors (installs go through the one of each session); `caught_up`
/// receives `caught_up_atom` once the catch-up completed (at once without
/// one).
session_sync_actor
spawn_session_sync(caf::actor_system& sys,
                   std::shared_ptr<storage::database> db,
                   std::vector<session_replica_io_actor> local,
                   caf::actor caught_up, repair_settings settings);

} // namespace coalesce
