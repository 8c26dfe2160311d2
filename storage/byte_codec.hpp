#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

/// Fixed-width integers and length-prefixed strings in byte strings: the
/// pieces every storage codec (secrets, timeline) builds its keys and values
/// from. Big-endian where keys must sort by number, little-endian inside
/// values. Pure functions, no RocksDB.
namespace coalesce::storage::bytes {

inline void put_u32_be(std::string& out, uint32_t x) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((x >> shift) & 0xFF));
}

inline void put_u64_be(std::string& out, uint64_t x) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((x >> shift) & 0xFF));
}

inline void put_i64_le(std::string& out, int64_t x) {
  auto u = static_cast<uint64_t>(x);
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((u >> (8 * i)) & 0xFF));
}

inline void put_string(std::string& out, const std::string& x) {
  put_u32_be(out, static_cast<uint32_t>(x.size()));
  out += x;
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

  bool u64_be(uint64_t& x) {
    if (bytes_.size() - pos_ < 8)
      return false;
    x = 0;
    for (int i = 0; i < 8; ++i)
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

  bool string(std::string& out) {
    uint32_t size = 0;
    if (!u32_be(size) || bytes_.size() - pos_ < size)
      return false;
    out.assign(bytes_.data() + pos_, size);
    pos_ += size;
    return true;
  }

  bool at_end() const {
    return pos_ == bytes_.size();
  }

  /// How many bytes were read so far.
  std::size_t position() const {
    return pos_;
  }

private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

} // namespace coalesce::storage::bytes
