#include "secret_lines.hpp"

#include <cerrno>
#include <cstdlib>

namespace coalesce {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

} // namespace

std::optional<std::vector<uint8_t>> parse_hex(const std::string& text) {
  if (text.size() % 2 != 0)
    return std::nullopt;
  std::vector<uint8_t> bytes;
  bytes.reserve(text.size() / 2);
  for (std::size_t i = 0; i < text.size(); i += 2) {
    auto hi = hex_digit(text[i]);
    auto lo = hex_digit(text[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    bytes.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return bytes;
}

std::string to_hex(const std::vector<uint8_t>& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (auto byte : bytes) {
    text.push_back(digits[byte >> 4]);
    text.push_back(digits[byte & 0x0F]);
  }
  return text;
}

std::optional<int64_t> parse_int64(const std::string& text) {
  if (text.empty())
    return std::nullopt;
  errno = 0;
  char* end = nullptr;
  auto value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size())
    return std::nullopt;
  return static_cast<int64_t>(value);
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::string current;
  for (char c : line) {
    if (c == ' ' || c == '\t' || c == '\r') {
      if (!current.empty())
        fields.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty())
    fields.push_back(std::move(current));
  return fields;
}

std::optional<secret_entry> parse_entry(const std::vector<std::string>& fields,
                                        std::string& error) {
  if (fields.size() < 4 || fields.size() > 6) {
    error = "expected CHAT SENDER MSG_ID SECRET_HEX [EXPIRES_AT [MESSAGE_TS]], "
            "got "
            + std::to_string(fields.size()) + " fields";
    return std::nullopt;
  }
  secret_entry entry;
  entry.chat = fields[0];
  entry.sender = fields[1];
  entry.msg_id = fields[2];
  auto secret = parse_hex(fields[3]);
  if (!secret) {
    error = "SECRET_HEX \"" + fields[3]
            + "\" is not hexadecimal (two digits per byte)";
    return std::nullopt;
  }
  entry.secret = std::move(*secret);
  if (fields.size() > 4) {
    auto expires_at = parse_int64(fields[4]);
    if (!expires_at) {
      error = "EXPIRES_AT \"" + fields[4] + "\" is not a whole number";
      return std::nullopt;
    }
    entry.expires_at = *expires_at;
  }
  if (fields.size() > 5) {
    auto message_ts = parse_int64(fields[5]);
    if (!message_ts) {
      error = "MESSAGE_TS \"" + fields[5] + "\" is not a whole number";
      return std::nullopt;
    }
    entry.message_ts = *message_ts;
  }
  return entry;
}

std::optional<secret_key> parse_key(const std::vector<std::string>& fields,
                                    std::string& error) {
  if (fields.size() != 3) {
    error = "expected CHAT SENDER MSG_ID, got " + std::to_string(fields.size())
            + " fields";
    return std::nullopt;
  }
  return secret_key{fields[0], fields[1], fields[2]};
}

} // namespace coalesce
