#include <coalesce/storage/secret_codec.hpp>

#include <coalesce/storage/byte_codec.hpp>

#include <cstdint>

namespace coalesce::storage {

namespace {

using namespace bytes;

/// Format 1 had no stamps; such a row reads as unstamped (0).
constexpr uint8_t unstamped_format = 1;
constexpr uint8_t value_format = 2;

} // namespace

std::string encode_secret_key(const std::string& chat,
                              const std::string& sender,
                              const std::string& msg_id) {
  std::string out;
  out.reserve(12 + chat.size() + sender.size() + msg_id.size());
  for (const auto* part : {&chat, &sender, &msg_id})
    put_string(out, *part);
  return out;
}

std::optional<secret_key> decode_secret_key(std::string_view bytes) {
  reader in{bytes};
  secret_key key;
  for (auto* part : {&key.chat, &key.sender, &key.msg_id})
    if (!in.string(*part))
      return std::nullopt;
  if (!in.at_end())
    return std::nullopt;
  return key;
}

std::string encode_secret_value(const secret_write& row) {
  std::string out;
  out.reserve(2 + row.entry.secret.size() + 40);
  out.push_back(static_cast<char>(value_format));
  out.push_back(static_cast<char>(row.entry.secret.size()));
  out.append(row.entry.secret.begin(), row.entry.secret.end());
  put_i64_le(out, row.entry.expires_at);
  put_i64_le(out, row.entry.message_ts);
  put_i64_le(out, row.captured_at);
  put_i64_le(out, static_cast<int64_t>(row.entry.stamp));
  put_i64_le(out, static_cast<int64_t>(row.entry.ts_stamp));
  return out;
}

std::optional<secret_write> decode_secret_value(std::string_view bytes) {
  reader in{bytes};
  secret_write row;
  uint8_t format = 0;
  uint8_t secret_len = 0;
  if (!in.u8(format)
      || (format != value_format && format != unstamped_format)
      || !in.u8(secret_len) || !in.bytes(secret_len, row.entry.secret)
      || !in.i64_le(row.entry.expires_at) || !in.i64_le(row.entry.message_ts)
      || !in.i64_le(row.captured_at))
    return std::nullopt;
  if (format == value_format) {
    int64_t stamp = 0;
    int64_t ts_stamp = 0;
    if (!in.i64_le(stamp) || !in.i64_le(ts_stamp))
      return std::nullopt;
    row.entry.stamp = static_cast<uint64_t>(stamp);
    row.entry.ts_stamp = static_cast<uint64_t>(ts_stamp);
  }
  if (!in.at_end())
    return std::nullopt;
  return row;
}

} // namespace coalesce::storage
