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
/// Failures come back as the request's error: errc::invalid_request for a
/// malformed request (nothing stored), errc::storage_failed or
/// errc::corrupt_record from the database.
namespace coalesce {

// pager_actor and timeline_actor: coalesce/messages/timeline_interface.hpp.

timeline_actor::behavior_type
timeline_store(timeline_actor::pointer self,
               std::shared_ptr<storage::database> db);

} // namespace coalesce
