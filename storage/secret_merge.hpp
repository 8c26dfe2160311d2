#pragma once

#include <cstdint>

#include <coalesce/messages/secret_entry.hpp>

/// How captures of one secret combine: the single definition shared by the
/// RocksDB merge operator, the buffer's coalescing of duplicates, and the
/// buffer's answers to lookups, so the three can never disagree.
///
/// A capture applied on an existing row keeps the capture's secret unless
/// the row's stamp is greater, and merges retention metadata:
/// - never-expire (0) wins over any expiry, otherwise the later expiry wins;
/// - a known `message_ts` is never replaced by an unknown (0) one, and
///   between two known values the one of the greater `ts_stamp` wins (of
///   equal stamps, the capture's).
/// Of two different values under one nonzero stamp (two clients stamped
/// alike) the greater wins. So for stamped captures (a cluster stamps every
/// capture) the result does not depend on the order they arrive in, and
/// replicas that receive the same captures converge; unstamped captures (a
/// node alone) merge as sequential writes: the later one's secret and
/// message time.
/// An existing row that had already expired when the capture was made counts
/// as absent, so the result does not depend on whether a compaction purged
/// that row before the capture was merged.
///
/// Applying the same capture twice gives the same row as applying it once,
/// which makes a retried batch harmless.
namespace coalesce::storage {

int64_t merge_expiry(int64_t existing, int64_t incoming);

int64_t merge_message_ts(int64_t existing, int64_t incoming);

/// Gives `result` the message time (and its stamp) of `existing` where it
/// wins by the rule above.
void merge_message_time(const secret_entry& existing, secret_entry& result);

/// True when `row` may no longer be read at `now` (unix seconds).
bool is_expired(const secret_write& row, int64_t now);

/// The row that `capture` leaves when applied on `existing` (nullptr when no
/// row exists): what the merge operator does with each operand.
secret_write apply_capture(const secret_write* existing,
                           const secret_write& capture);

/// One capture standing for `earlier` followed by `later`, as the buffer
/// keeps duplicates: applied on any row, it leaves what the two applied in
/// turn leave, with one exception. When `earlier` had expired by the time
/// `later` was made, applying them in turn onto no row (or onto a row that
/// had expired by then) forgets `earlier`'s message time if `later`'s is
/// unknown; the coalesced capture keeps the latest known one. That case
/// cannot be made equal: the coalesced capture would then differ from
/// itself applied twice, and a retried batch relies on it not doing so.
/// Its capture time is the later of the two where `earlier` had expired,
/// so that an older row counts only if it was still live for both.
secret_write coalesce_captures(const secret_write& earlier,
                               const secret_write& later);

/// Unix seconds from the system clock.
int64_t unix_now();

} // namespace coalesce::storage
