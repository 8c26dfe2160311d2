#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <coalesce/messages/secret_entry.hpp>

/// The byte layout of secrets in RocksDB. Pure functions: no RocksDB here.
///
/// Key: for chat, sender and msg_id in turn, a 4-byte big-endian length and
/// the bytes, so no component can bleed into the next whatever it contains.
/// Value (full row and merge operand alike): a format byte (2), the secret's
/// length (1 byte) and bytes, then expires_at, message_ts, captured_at,
/// stamp and ts_stamp as 8-byte little-endian integers. Format 1, written
/// before stamps existed, lacks the last two and reads as unstamped.
namespace coalesce::storage {

std::string encode_secret_key(const std::string& chat,
                              const std::string& sender,
                              const std::string& msg_id);

inline std::string encode_secret_key(const secret_key& key) {
  return encode_secret_key(key.chat, key.sender, key.msg_id);
}

std::optional<secret_key> decode_secret_key(std::string_view bytes);

std::string encode_secret_value(const secret_write& row);

/// Decodes a value; the key fields of the returned entry stay empty.
std::optional<secret_write> decode_secret_value(std::string_view bytes);

} // namespace coalesce::storage
