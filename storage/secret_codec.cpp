#include "storage/secret_codec.hpp"

#include <cstdint>

namespace coalesce::storage {

namespace {

constexpr uint8_t value_format = 1;

void put_u32_be(std::string& out, uint32_t x) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((x >> shift) & 0xFF));
}

void put_i64_le(std::string& out, int64_t x) {
  auto u = static_cast<uint64_t>(x);
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((u >> (8 * i)) & 0xFF));
}

/// Reads fixed-width fields from a byte string; every read checks bounds.
class reader {
public:
  explicit reader(std::string_view bytes) : bytes_(bytes) {
    // nop
  }

  bool u8(uint8_t& x) {
    if (bytes_.size() - pos_ < 1)
      return false;
    x = static_cast<uint8_t>(bytes_[pos_++]);
    return true;
  }

  bool u32_be(uint32_t& x) {
    if (bytes_.size() - pos_ < 4)
      return false;
    x = 0;
    for (int i = 0; i < 4; ++i)
      x = (x << 8) | static_cast<uint8_t>(bytes_[pos_++]);
    return true;
  }

  bool i64_le(int64_t& x) {
    if (bytes_.size() - pos_ < 8)
      return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i)
      u |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[pos_++]))
           << (8 * i);
    x = static_cast<int64_t>(u);
    return true;
  }

  template <class Container>
  bool bytes(std::size_t n, Container& out) {
    if (bytes_.size() - pos_ < n)
      return false;
    out.assign(bytes_.begin() + pos_, bytes_.begin() + pos_ + n);
    pos_ += n;
    return true;
  }

  bool at_end() const {
    return pos_ == bytes_.size();
  }

private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

} // namespace

std::string encode_secret_key(const std::string& chat,
                              const std::string& sender,
                              const std::string& msg_id) {
  std::string out;
  out.reserve(12 + chat.size() + sender.size() + msg_id.size());
  for (const auto* part : {&chat, &sender, &msg_id}) {
    put_u32_be(out, static_cast<uint32_t>(part->size()));
    out += *part;
  }
  return out;
}

std::optional<secret_key> decode_secret_key(std::string_view bytes) {
  reader in{bytes};
  secret_key key;
  for (auto* part : {&key.chat, &key.sender, &key.msg_id}) {
    uint32_t size = 0;
    if (!in.u32_be(size) || !in.bytes(size, *part))
      return std::nullopt;
  }
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
