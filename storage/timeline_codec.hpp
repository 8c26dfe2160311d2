#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <vector>

#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/timeline_replica_interface.hpp>

/// The byte layout of room timelines in RocksDB (column family "timeline").
/// Pure functions: no RocksDB here.
///
/// Key: the room as a 4-byte big-endian length and its bytes, so no room
/// name can bleed into another's keys, then a tag byte:
/// - 'e' and the event's sequence number (8 bytes, big-endian): one event.
///   Big-endian makes RocksDB's bytewise order the order of appending, so a
///   room's events are one contiguous, ordered key range.
/// - 'h': the room's head, the sequence number the next event gets.
/// - 'p': the room's back-pagination position, the sequence number of the
///   oldest event a committed page returned; older events come next.
/// - 'r': what a replica of the room keeps beside (timeline_replica.hpp):
///   a format byte (1), the promised ballot (8 bytes, big-endian), the
///   number of segments (4 bytes, big-endian) and each segment's ballot
///   and start (8 bytes each, big-endian). Absent on a node without
///   replicas; a room with events and none has one segment, (0, 0).
///
/// Event value: a format byte (1); event_id, type as a 4-byte big-endian
/// length and the bytes each; the timestamp as an 8-byte little-endian
/// integer; the body as a 4-byte big-endian length and its bytes. Head and
/// position values are 8-byte big-endian integers.
///
/// Decoding is strict: a wrong format byte, a length running past the end,
/// or bytes left over give nullopt, which callers report as
/// errc::corrupt_record.
namespace coalesce::storage {

std::string encode_event_key(const std::string& room, uint64_t seq);

/// The first key after every event key of `room`: the exclusive upper bound
/// of a scan over all its events.
std::string encode_events_end_key(const std::string& room);

/// The sequence number of an event key of `room`; nullopt for any other key.
std::optional<uint64_t> decode_event_key(const std::string& room,
                                         std::string_view bytes);

std::string encode_head_key(const std::string& room);

std::string encode_position_key(const std::string& room);

std::string encode_replica_key(const std::string& room);

/// The first key of `room`: every key of it lies at or after it.
std::string encode_room_start_key(const std::string& room);

/// The first key after every key of `room`.
std::string encode_room_end_key(const std::string& room);

/// The room whose key `bytes` is; nullopt for no timeline key.
std::optional<std::string> decode_room_of_key(std::string_view bytes);

/// What the 'r' value holds.
struct replica_meta {
  uint64_t promised = 0;
  std::vector<timeline_segment> segments;
};

std::string encode_replica_meta(const replica_meta& meta);

std::optional<replica_meta> decode_replica_meta(std::string_view bytes);

std::string encode_event_value(const timeline_event& event);

std::optional<timeline_event> decode_event_value(std::string_view bytes);

std::string encode_counter(uint64_t x);

std::optional<uint64_t> decode_counter(std::string_view bytes);

} // namespace coalesce::storage
