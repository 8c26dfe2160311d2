#include <coalesce/storage/timeline_codec.hpp>

#include <coalesce/storage/byte_codec.hpp>

namespace coalesce::storage {

namespace {

using namespace bytes;

constexpr uint8_t value_format = 1;

constexpr char event_tag = 'e';
constexpr char head_tag = 'h';
constexpr char position_tag = 'p';
constexpr char replica_tag = 'r';
/// Above every tag: the end of a room's keys.
constexpr char end_tag = 's';

std::string room_prefix(const std::string& room, char tag) {
  std::string out;
  out.reserve(4 + room.size() + 1 + 8);
  put_string(out, room);
  out.push_back(tag);
  return out;
}

} // namespace

std::string encode_event_key(const std::string& room, uint64_t seq) {
  auto out = room_prefix(room, event_tag);
  put_u64_be(out, seq);
  return out;
}

std::string encode_events_end_key(const std::string& room) {
  return room_prefix(room, static_cast<char>(event_tag + 1));
}

std::optional<uint64_t> decode_event_key(const std::string& room,
                                         std::string_view bytes) {
  auto prefix = room_prefix(room, event_tag);
  if (bytes.size() != prefix.size() + 8
      || bytes.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  reader in{bytes.substr(prefix.size())};
  uint64_t seq = 0;
  if (!in.u64_be(seq) || !in.at_end())
    return std::nullopt;
  return seq;
}

std::string encode_head_key(const std::string& room) {
  return room_prefix(room, head_tag);
}

std::string encode_position_key(const std::string& room) {
  return room_prefix(room, position_tag);
}

std::string encode_replica_key(const std::string& room) {
  return room_prefix(room, replica_tag);
}

std::string encode_room_start_key(const std::string& room) {
  std::string out;
  out.reserve(4 + room.size());
  put_string(out, room);
  return out;
}

std::string encode_room_end_key(const std::string& room) {
  return room_prefix(room, end_tag);
}

std::optional<std::string> decode_room_of_key(std::string_view bytes) {
  reader in{bytes};
  std::string room;
  uint8_t tag = 0;
  if (!in.string(room) || !in.u8(tag))
    return std::nullopt;
  return room;
}

std::string encode_replica_meta(const replica_meta& meta) {
  std::string out;
  out.reserve(1 + 8 + 4 + 16 * meta.segments.size());
  out.push_back(static_cast<char>(value_format));
  put_u64_be(out, meta.promised);
  put_u32_be(out, static_cast<uint32_t>(meta.segments.size()));
  for (const auto& x : meta.segments) {
    put_u64_be(out, x.ballot);
    put_u64_be(out, x.start);
  }
  return out;
}

std::optional<replica_meta> decode_replica_meta(std::string_view bytes) {
  reader in{bytes};
  replica_meta meta;
  uint8_t format = 0;
  uint32_t count = 0;
  if (!in.u8(format) || format != value_format || !in.u64_be(meta.promised)
      || !in.u32_be(count))
    return std::nullopt;
  for (uint32_t i = 0; i < count; ++i) {
    timeline_segment x;
    if (!in.u64_be(x.ballot) || !in.u64_be(x.start))
      return std::nullopt;
    meta.segments.push_back(x);
  }
  if (!in.at_end())
    return std::nullopt;
  return meta;
}

std::string encode_event_value(const timeline_event& event) {
  std::string out;
  out.reserve(1 + 12 + event.event_id.size() + event.type.size()
              + event.body.size() + 8);
  out.push_back(static_cast<char>(value_format));
  put_string(out, event.event_id);
  put_string(out, event.type);
  put_i64_le(out, event.timestamp);
  put_string(out, event.body);
  return out;
}

std::optional<timeline_event> decode_event_value(std::string_view bytes) {
  reader in{bytes};
  timeline_event event;
  uint8_t format = 0;
  if (!in.u8(format) || format != value_format || !in.string(event.event_id)
      || !in.string(event.type) || !in.i64_le(event.timestamp)
      || !in.string(event.body) || !in.at_end())
    return std::nullopt;
  return event;
}

std::string encode_counter(uint64_t x) {
  std::string out;
  put_u64_be(out, x);
  return out;
}

std::optional<uint64_t> decode_counter(std::string_view bytes) {
  reader in{bytes};
  uint64_t x = 0;
  if (!in.u64_be(x) || !in.at_end())
    return std::nullopt;
  return x;
}

} // namespace coalesce::storage
