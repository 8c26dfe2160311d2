#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <coalesce/messages/timeline_replica_interface.hpp>
#include <coalesce/storage/database.hpp>

/// What a replica of a room does with its copy (the protocol:
/// coalesce/messages/timeline_replica_interface.hpp; its coordinator:
/// coalesce/node/timeline_replicas.hpp). Beside the room's events, head and
/// position (timeline.hpp) a replica keeps the promised ballot and the
/// log's segments (the 'r' key, timeline_codec.hpp).
///
/// Every function that changes anything writes one WriteBatch, in the
/// database's durability: events, head, position, promise and segments
/// change together or not at all. A position only ever moves back (to
/// older events): a replica keeps the furthest position it was sent, so
/// any majority holds the furthest one a majority took. Not safe for
/// concurrent callers on one room (the timeline's one actor serializes
/// them). Failures: errc::invalid_request for a malformed room or event,
/// errc::corrupt_record, errc::storage_failed.
namespace coalesce::storage {

/// What this replica holds of `room`.
caf::expected<room_version> room_replica_version(database& db,
                                                 const std::string& room);

/// Promises `ballot`, unless a higher one was promised (`preempted`).
caf::expected<room_answer> room_replica_prepare(database& db,
                                                const std::string& room,
                                                uint64_t ballot);

/// Takes `part` under `ballot` (see `room_suffix`): `preempted` below the
/// promised ballot; `out_of_sync` when this log does not hold the first
/// `part.from` events of `part`'s log (nothing changes); else `applied`:
/// the log then holds every event of `part`'s log (events past a point
/// where the two differ are replaced, events beyond that this log holds
/// under the same segments are kept), the promise is at least `ballot`,
/// and the position is the further back of the two.
caf::expected<room_answer> room_replica_append(database& db, uint64_t ballot,
                                               const room_suffix& part);

/// This replica's log of `room` from `from` on (from its head when `from`
/// lies beyond), with its segments and position.
caf::expected<room_suffix> room_replica_image(database& db,
                                              const std::string& room,
                                              uint64_t from);

/// A repair (no coordinator behind it): takes `part` when its log is newer
/// than this one's (`newer_log`) and holds this one's first `part.from`
/// events; raises the promise to `promised` and moves the position back to
/// `part`'s in any case. `out_of_sync` (nothing changes) when its log is
/// newer but does not build on what is here, else `applied`, with what the
/// replica holds after.
caf::expected<room_answer> room_replica_repair(database& db,
                                               const room_suffix& part,
                                               uint64_t promised);

/// Forgets `room` here, every event and what the replica keeps beside,
/// when what it holds is still exactly `expected`: whether it did. For a
/// node that no longer replicates the room, once its replicas hold it
/// (coalesce/node/key_release.hpp); anything that changed since (an
/// append, a promise, a position) keeps it.
caf::expected<bool> room_replica_drop(database& db, const std::string& room,
                                      const room_version& expected);

/// Calls `visit` with every room stored, and what is held of it.
caf::error
scan_room_versions(database& db,
                   const std::function<void(room_listing&&)>& visit);

} // namespace coalesce::storage
