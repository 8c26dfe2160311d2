#include <coalesce/storage/timeline_codec.hpp>

#include <coalesce/storage/byte_codec.hpp>

namespace coalesce::storage {

namespace {

using namespace bytes;

constexpr uint8_t value_format = 1;

constexpr char event_tag = 'e';
constexpr char head_tag = 'h';
constexpr char position_tag = 'p';

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
