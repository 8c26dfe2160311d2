#pragma once

#include <type_traits>
#include <utility>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <coalesce/storage/database.hpp>

/// The one step every detached I/O actor takes for an operation that writes
/// (or syncs) the database: wait until the database is ready for writes,
/// do the write, and after a failure ask the database to recover, so that
/// the next write, of this service or any other, finds it recovered.
///
/// After a fault nothing touches RocksDB but recovery until it succeeds:
/// `ready_for_writes` answers recovery's error, and the operation is not
/// attempted (the caller keeps what it wanted written and retries). Only a
/// failure of the operation itself asks for recovery; `recover_after`
/// ignores refusals that did not come from RocksDB.
///
/// Blocking: call it from a detached actor, never on CAF's scheduler.
namespace coalesce {

/// Runs `write` (returning `caf::error` or `caf::expected<T>`) guarded as
/// above and returns its result, or the error that kept it from running.
template <class Write>
auto guarded_write(storage::database& db, Write&& write)
  -> decltype(std::forward<Write>(write)()) {
  using result_type = decltype(std::forward<Write>(write)());
  if (auto err = db.ready_for_writes())
    return result_type{std::move(err)};
  result_type result = std::forward<Write>(write)();
  if constexpr (std::is_same_v<result_type, caf::error>) {
    if (result)
      db.recover_after(result);
  } else {
    if (!result)
      db.recover_after(result.error());
  }
  return result;
}

/// Makes every write so far durable (`database::sync_wal`), guarded as
/// above.
inline caf::error guarded_sync(storage::database& db) {
  return guarded_write(db, [&] { return db.sync_wal(); });
}

} // namespace coalesce
