#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <coalesce/messages/backfill.hpp>
#include <coalesce/storage/database.hpp>

/// Room timelines in RocksDB (column family "timeline"; byte layout in
/// timeline_codec.hpp).
///
/// Each room's events carry per-room sequence numbers, 0 for its first event
/// and one more for each later one, in the order they were appended (oldest
/// first). Events are never removed. Beside its events a room stores its
/// head (the next sequence number) and its back-pagination position.
///
/// Back-pagination works like Matrix history: the position starts just after
/// the newest event present when a room is first paged, and every committed
/// page moves it past the oldest event it returned. Paging is a two-step
/// commit: `page_backwards` reads from the position without moving it, and
/// `commit_page` moves it once the page was delivered, so a page that
/// nobody received is returned again by the next page, also after a
/// restart. Events appended after the first commit are newer than the
/// position and are never returned by paging backwards; they reach readers
/// by other means (sync), not by back-pagination. `reset_position` starts
/// over from the newest event.
///
/// Each call that changes anything writes exactly one WriteBatch, with the
/// durability its `mode` names (by default the database's): an append writes its events and the new head
/// together, a commit writes the new position, so a crash leaves either all
/// of a call's changes or none, and the position survives restarts.
///
/// Not safe for concurrent writers of one database: appends read, then
/// rewrite the head, and commits read, then rewrite the position. Callers
/// serialize them (one actor owns the timeline, see timeline_actors.hpp).
///
/// Failures: a malformed request (an empty room name, an event without an
/// id, a field longer than 4 GiB, a page of 0 events) is refused with
/// errc::invalid_request before anything is written; a stored value that
/// does not decode gives errc::corrupt_record; RocksDB's own failures give
/// errc::storage_failed (or corrupt_record) through to_error. All calls block
/// on disk I/O.
namespace coalesce::storage {

/// Appends `events` to `room` in order (the last is the newest). Appending
/// nothing writes nothing.
caf::error append_events(database& db, const std::string& room,
                         const std::vector<timeline_event>& events,
                         std::optional<durability> mode = std::nullopt);

/// Loads the next older batch of `room`: at most `max_events` events older
/// than the position, newest first. Writes nothing: the page's cursor holds
/// the position it was read at and the one past its oldest event, for
/// `commit_page`. `reached_start` is set when the batch holds the room's
/// first event or nothing older is left (the batch is then empty, and its
/// cursor does not move).
caf::expected<timeline_page>
page_backwards(database& db, const std::string& room, uint32_t max_events);

/// Moves the position of `room` to `cursor.next`, if it is still at
/// `cursor.read_at` or was never stored (the room's first page). A stale
/// cursor (the position moved meanwhile) writes nothing and is no error, so
/// a repeated commit is harmless. A cursor whose `next` lies after its
/// `read_at`, or whose `read_at` lies beyond the room's head (no page was
/// read there: a forged cursor), is refused with errc::invalid_request.
caf::error commit_page(database& db, const std::string& room,
                       const page_cursor& cursor,
                       std::optional<durability> mode = std::nullopt);

/// Events stored for `room` (tests and tools).
caf::expected<uint64_t> count_events(database& db, const std::string& room);

/// Forgets the position of `room`: its next page starts again just after
/// the newest event present at that moment.
caf::error reset_position(database& db, const std::string& room,
                          std::optional<durability> mode = std::nullopt);

} // namespace coalesce::storage
