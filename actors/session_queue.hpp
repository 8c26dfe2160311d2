#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include <coalesce/messages/session_persister_interface.hpp>

/// One session's queue, without actors: what the session's writer actor
/// runs, one job at a time, in arrival order. Waiters are ids; the writer
/// keeps the promises behind them (parked_requests).
///
/// - Persists that arrive while a job runs merge into the queued write at
///   the tail: the later request wins. Its source (with its generation and
///   the snapshot it carried) replaces the earlier one; its update rows are
///   appended, replacing a queued row of the same id; its removals cancel
///   a queued row of the same id and are passed on; a row it adds again
///   after an earlier removal is no longer removed.
/// - A failed write's rows are kept and merged into the next write that
///   starts, so a retry writes them.
/// - `drop_writes` (a delete) takes every queued write out; erase, lease
///   and barrier jobs keep their place.
/// - A barrier is answered with the result of the write before it.
namespace coalesce {

/// The rows and waiters of one write.
struct session_rows {
  /// Where the write asks for its snapshot, unless it carries one.
  std::optional<session_handle_actor> source;
  /// The generation the write carries; none: the one storage holds.
  std::optional<uint64_t> generation;
  /// The snapshot the newest persist carried from `source` itself: written
  /// as is, without asking the handle.
  std::optional<std::string> snapshot;
  std::vector<session_update> updates;
  std::vector<std::string> removed;
  std::vector<uint64_t> waiters;

  /// Merges `later` behind these rows (see above).
  void merge(session_rows later);
};

struct session_job {
  enum kind_type { write, erase, lease, barrier };
  kind_type kind = write;
  session_rows rows;
  /// The lease of a lease job.
  uint64_t lease_id = 0;
  /// The tombstone generation of an erase job.
  uint64_t generation = 0;
  /// Whether the erase leaves a tombstone.
  bool tombstone = true;
};

class session_queue {
public:
  void persist(session_rows rows);

  /// Takes every queued write out (a delete); returns their waiters. The
  /// rows of a failed write are dropped too.
  std::vector<uint64_t> drop_writes();

  /// Takes every queued write out (their source may not write); returns
  /// their waiters. The rows of a failed write stay kept.
  std::vector<uint64_t> refuse_queued_writes();

  /// Every queued write is written from `source` with `generation` now; a
  /// snapshot carried from another handle is dropped.
  void change_source(const session_handle_actor& source,
                     std::optional<uint64_t> generation);

  /// Whether a write is queued (not running).
  bool write_queued() const;

  void push(session_job job);

  /// Removes a queued lease job; returns its waiter, none if it is not
  /// queued.
  std::optional<uint64_t> remove_lease(uint64_t lease);

  /// The next job, if none runs: it runs until `finish`. A write carries
  /// the kept rows of a failed write before its own.
  std::optional<session_job> start_next();

  /// The running job ended with `result` (none for success).
  void finish(caf::error result);

  /// The running write failed: keep `rows` for the next one.
  void keep_failed(session_rows rows);

  bool running() const {
    return running_;
  }

  /// Nothing queued, nothing running, nothing kept.
  bool idle() const {
    return !running_ && jobs_.empty() && !kept_;
  }

  bool has_kept_rows() const {
    return kept_.has_value();
  }

  std::size_t queued() const {
    return jobs_.size();
  }

  const caf::error& last_result() const {
    return last_result_;
  }

private:
  std::deque<session_job> jobs_;
  std::optional<session_rows> kept_;
  bool running_ = false;
  caf::error last_result_;
};

} // namespace coalesce
