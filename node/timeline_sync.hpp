#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/actors/timeline_actors.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/timeline_replica_interface.hpp>
#include <coalesce/node/key_release.hpp>
#include <coalesce/node/peer_watch.hpp>
#include <coalesce/node/secret_sync.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// The repair of a clustered node's rooms (anti-entropy), the rooms'
/// counterpart of session_sync.hpp. The exchange with one peer: ask the
/// peer what it holds of the rooms both are replicas of (each room's
/// version, `room_listing_requests`), compare with what this node holds,
/// and for every room where the peer holds a newer log, a higher promise
/// or a position further back, fetch the peer's log from where the two
/// part and install it here (a repair: a newer log is taken whole, the
/// promise and the position always, see
/// coalesce/storage/timeline_replica.hpp). Each node pulls; every node
/// running the pass makes them converge.
///
/// - **Catch-up.** A node without a clean-stop mark (it crashed, or its
///   data directory is new or was wiped), or whose cluster list lost a
///   node (it may have gained rooms), catches up from every peer
///   before its replica counts in any round: `catching_up` is set
///   meanwhile, so its coordinator and its endpoint count it out
///   (timeline_replicas.hpp), and a replica that lost what it held never
///   makes an older log look newest nor promises a ballot twice. Then it
///   logs what it repaired and tells `caught_up`. Exchanges that fail are
///   retried every `retry`.
/// - **Handoff.** A peer under another cluster list refuses the listing
///   (the asker's index names another node there); the asker asks again
///   naming its whole list, and the peer lists what it holds of the rooms
///   the asker is a replica of under it. This is how a node that joined,
///   or gained rooms when another left, gets them from nodes still under the
///   old list. Both the catch-up and the periodic repair do so.
/// - **Periodic repair.** Every `interval` (0: never) it runs the exchange
///   with every peer, counting the rooms it repaired, and a release pass
///   (key_release.hpp): a room this node holds but no longer replicates
///   (it lost it to a node that joined) is dropped once a majority of its
///   replicas holds a log that continues this one and a position at least
///   as far back.
/// - It serves its peers' exchanges, through the gateway.
///
/// It scans RocksDB itself, so it runs detached.
namespace coalesce {

using timeline_sync_actor = room_listing_requests::extend<
  caf::reacts_to<peer_up_atom, uint64_t, node_actor>,
  caf::reacts_to<peer_down_atom, uint64_t>,
  /// A release pass now (key_release.hpp): rooms dropped, still held.
  caf::replies_to<release_keys_atom>::with<uint64_t, uint64_t>>;

/// Spawns it detached over the node's database and its stored timeline
/// (installs go through it); `caught_up` receives `caught_up_atom` once
/// the catch-up completed (at once without one).
timeline_sync_actor
spawn_timeline_sync(caf::actor_system& sys,
                    std::shared_ptr<storage::database> db,
                    timeline_replica_store_actor local, caf::actor caught_up,
                    repair_settings settings);

} // namespace coalesce
