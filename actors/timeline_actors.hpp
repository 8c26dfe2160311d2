#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/timeline_interface.hpp>
#include <coalesce/messages/timeline_replica_interface.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// The actors through which room timelines are paged and appended.
///
/// `pager_actor` is the interface the back-pagination scheduler loads
/// history through; anything that answers it can stand in (the RocksDB store
/// below, a remote homeserver client, a scripted pager in tests).
///
/// Paging is a two-step commit: `page` reads the next older batch from the
/// room's position without moving it, and `commit` moves the position past
/// a page once its events were delivered. A page that is never committed
/// (its run was cancelled, it came too late, the node stopped) is loaded
/// again by the next page of that room, also after a restart.
///
/// `timeline_store` is the one owner of the timeline in a database: the
/// storage functions read and rewrite a room's head and position, which is
/// safe only because this actor's mailbox serializes every call. It makes
/// blocking RocksDB calls, so production spawns it `caf::detached` (on its
/// own thread, never on CAF's scheduler); under the deterministic test
/// coordinator it is spawned as an ordinary scheduled actor.
///
/// It is also the node's replica of its rooms' logs, for the rooms'
/// coordinators (coalesce/node/timeline_replicas.hpp) and the repair
/// (coalesce/node/timeline_sync.hpp): the storage functions of
/// coalesce/storage/timeline_replica.hpp, each a request.
///
/// Failures come back as the request's error: errc::invalid_request for a
/// malformed request (nothing stored), errc::storage_failed or
/// errc::corrupt_record from the database.
namespace coalesce {

// pager_actor and timeline_actor: coalesce/messages/timeline_interface.hpp.

/// The stored timeline with its replica requests, the repair's install
/// (a peer's part of the log and its promise, taken when newer) and the
/// drop of a room this node no longer replicates.
using timeline_replica_store_actor
  = timeline_actor::extend_with<timeline_replica_requests>::extend<
    caf::replies_to<replica_atom, room_atom, install_atom, room_suffix,
                    uint64_t>::with<room_answer>,
    /// Forgets the room when it is still held as `room_version` says
    /// (coalesce/storage/timeline_replica.hpp, `room_replica_drop`).
    caf::replies_to<replica_atom, room_atom, drop_atom, std::string,
                    room_version>::with<bool>>;

timeline_replica_store_actor::behavior_type
timeline_store(timeline_replica_store_actor::pointer self,
               std::shared_ptr<storage::database> db);

} // namespace coalesce
