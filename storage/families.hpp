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
/// row in `family_table` below, both here; a missing or misplaced row does
/// not compile. A family found in the directory that is in no row
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

/// Plain RocksDB options (database.cpp).
rocksdb::ColumnFamilyOptions plain_family_options();

/// The secrets' merge operator and compaction filter (secret_store.cpp).
rocksdb::ColumnFamilyOptions secrets_family_options();

/// Registers the secrets' merge operator and compaction filter with
/// RocksDB's object library under the names a directory's OPTIONS file
/// gives them, so that a tool loading that file (ldb) creates them instead
/// of falling back to others (secret_store.cpp).
void register_family_options_by_name();

/// One row per value of `family`, in the order of the enum.
inline constexpr std::array<family_spec, family_count> family_table{{
  // RocksDB's own name for the family every database has.
  {family::meta, "default", plain_family_options},
  {family::secrets, "secrets", secrets_family_options},
  {family::timeline, "timeline", plain_family_options},
  {family::sessions, "sessions", plain_family_options},
  {family::session_updates, "session_updates", plain_family_options},
}};

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < family_count; ++i)
    if (static_cast<std::size_t>(family_table[i].id) != i)
      return false;
  return true;
}

// `family_name` and the handle slots index the table by the enum.
static_assert(rows_in_enum_order(), "one row per family, in enum order");

inline const std::array<family_spec, family_count>& known_families() {
  return family_table;
}

/// The name of `x` in the directory.
const char* family_name(family x);

} // namespace coalesce::storage
