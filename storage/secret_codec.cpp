#include <coalesce/storage/secret_codec.hpp>

#include <coalesce/storage/byte_codec.hpp>

#include <cstdint>

namespace coalesce::storage {

namespace {

using namespace bytes;

constexpr uint8_t value_format = 1;

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
  out.reserve(2 + row.entry.secret.size() + 24);
  out.push_back(static_cast<char>(value_format));
  out.push_back(static_cast<char>(row.entry.secret.size()));
  out.append(row.entry.secret.begin(), row.entry.secret.end());
  put_i64_le(out, row.entry.expires_at);
  put_i64_le(out, row.entry.message_ts);
  put_i64_le(out, row.captured_at);
  return out;
}

std::optional<secret_write> decode_secret_value(std::string_view bytes) {
  reader in{bytes};
  secret_write row;
  uint8_t format = 0;
  uint8_t secret_len = 0;
  if (!in.u8(format) || format != value_format || !in.u8(secret_len)
      || !in.bytes(secret_len, row.entry.secret)
      || !in.i64_le(row.entry.expires_at) || !in.i64_le(row.entry.message_ts)
      || !in.i64_le(row.captured_at) || !in.at_end())
    return std::nullopt;
  return row;
}

} // namespace coalesce::storage
