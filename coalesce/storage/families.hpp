#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace rocksdb {
struct ColumnFamilyOptions;
} // namespace rocksdb

/// The column families this build knows, in one table: the database opens
/// each row's family with the row's options and keeps its handle in the
/// row's slot, and tests read the table instead of repeating the names. A
/// new family is one `family` value (with `family_count` one more) and one
/// row in `known_families()` (database.cpp); a missing or misplaced row
/// does not compile. A family found in the directory that is in no row
/// (written by a newer build) is opened with plain options and never
/// written.
namespace coalesce::storage {

/// A known family; its value is the slot of its handle in the database.
enum class family : uint8_t {
  /// RocksDB's "default" family: coalesce's own keys (the format version).
  meta,
  /// Message secrets (secret_store.hpp).
  secrets,
  /// Room timelines (timeline.hpp).
  timeline,
  /// Session blobs (session_store.hpp).
  sessions,
  /// Session update rows (session_store.hpp).
  session_updates,
};

constexpr std::size_t family_count = 5;

struct family_spec {
  family id;
  const char* name;
  /// The options the family is opened with (its merge operator, compaction
  /// filter...).
  rocksdb::ColumnFamilyOptions (*options)();
};

/// One row per value of `family`, in the order of the enum.
const std::array<family_spec, family_count>& known_families();

/// The name of `x` in the directory.
const char* family_name(family x);

} // namespace coalesce::storage
