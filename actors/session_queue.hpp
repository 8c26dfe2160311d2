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
///   the tail: its update rows are appended, the newest source wins, and a
///   removal cancels a queued row of the same id and is passed on.
/// - A failed write's rows are kept and merged into the next write that
///   starts, so a retry writes them.
/// - `drop_writes` (a delete) takes every queued write out; erase, lease
///   and barrier jobs keep their place.
/// - A barrier is answered with the result of the write before it.
namespace coalesce {

/// The rows and waiters of one write.
struct session_rows {
  std::optional<session_handle_actor> source;
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
};

class session_queue {
public:
  void persist(session_rows rows);

  /// Takes every queued write out (a delete); returns their waiters. The
  /// rows of a failed write are dropped too.
  std::vector<uint64_t> drop_writes();

  void push(session_job job);

  /// Removes a queued lease job; false if it is not queued.
  bool remove_lease(uint64_t lease);

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
