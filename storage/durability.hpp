#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace coalesce::storage {

/// How far a write has travelled when RocksDB acknowledges it.
enum class durability : uint8_t {
  /// The WAL is fsynced with every batch: an acknowledged batch survives a
  /// process crash and a power loss.
  synced,
  /// The WAL is written without fsync: an acknowledged batch survives a
  /// process crash (it is in the page cache), but a power loss or kernel
  /// crash may lose the newest batches. Recovery stops at the first damaged
  /// WAL record, so what survives is always a prefix of what was written.
  buffered,
};

std::string to_string(durability x);

/// Parses "synced" or "buffered".
std::optional<durability> parse_durability(const std::string& text);

} // namespace coalesce::storage
