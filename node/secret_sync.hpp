#pragma once

#include <cstddef>
#include <memory>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/actors/secret_buffer.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/secret_sync_interface.hpp>
#include <coalesce/node/key_release.hpp>
#include <coalesce/node/peer_watch.hpp>
#include <coalesce/node/sync_rounds.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// The repair of a clustered node's secrets (anti-entropy): it compares
/// what this node holds with what each peer holds of the chats both are
/// replicas of, and gives each side the rows it lacks or holds older
/// (the secrets' merge is commutative and idempotent, so sending a row
/// twice or both ways is harmless). The exchange, for one peer:
///
/// 1. ask the peer's digests (`digest_atom, self`): the peer flushes its
///    buffer, so what it acknowledged from memory counts, and digests its
///    rows by bucket;
/// 2. flush this node's buffer and digest its own rows alike;
/// 3. for the buckets that differ, ask the peer's rows, read its own, and
///    queue each side's newer or missing rows on the other as a
///    coordinator's copies (`replica_atom`).
///
/// - **Catch-up.** A node that finds no clean-stop mark (it crashed, or its
///   data directory is new or was wiped) may have lost captures it had
///   acknowledged from memory; a node whose cluster list lost a node may
///   have gained chats. It starts catching up: its coordinator
///   counts it out of every read (secret_replicas.hpp) until an exchange
///   with every peer has completed; it then tells the coordinator
///   (`caught_up_atom`) and logs what it repaired ("refilled" for an empty
///   directory). Exchanges that fail are retried every `retry`.
/// - **Handoff.** A peer under another cluster list refuses step 1 (the
///   asker's index names another node there). The asker then pulls
///   instead, naming its whole list: the peer's digests of the chats the
///   asker is a replica of under it, then the rows of the buckets where the
///   asker's own rows of its chats differ; the asker queues those it lacks
///   or holds differently. This is how a node that joined, or gained chats
///   when another left, gets them from nodes still under the old list.
/// - **Periodic repair.** Every `interval` (0: never) it runs the exchange
///   with every peer, counting the keys it repaired, and a release pass
///   (key_release.hpp): a chat this node holds but no longer replicates
///   (it lost it to a node that joined) is dropped once a majority of its
///   replicas holds every row of it at least as new (merging this node's
///   row into theirs changes nothing); the drop goes through the buffer's
///   drain worker, the family's one writer, and keeps a row that changed.
/// - It serves its peers' exchanges (`secret_sync_requests`, through the
///   gateway).
///
/// It reads RocksDB itself (a full scan per exchange), so it runs detached.
namespace coalesce {

using secret_sync_actor = secret_sync_requests::extend<
  caf::reacts_to<peer_up_atom, uint64_t, node_actor>,
  caf::reacts_to<peer_down_atom, uint64_t>,
  /// A release pass now (key_release.hpp): chats dropped, still held.
  caf::replies_to<release_keys_atom>::with<uint64_t, uint64_t>>;

/// Spawns it detached; `caught_up` (the coordinator) receives
/// `caught_up_atom` once the catch-up completed (at once without one).
secret_sync_actor spawn_secret_sync(caf::actor_system& sys,
                                    std::shared_ptr<storage::database> db,
                                    secret_buffer_actor local,
                                    caf::actor caught_up,
                                    repair_settings settings);

} // namespace coalesce
