#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <coalesce/messages/backfill.hpp>

/// The back-pagination scheduler's decisions, as a plain value: which
/// (room, priority) runs wait, which of them start now, and what a finished
/// run frees. No actors, logging or I/O: the scheduler actor routes requests
/// here and carries out what it decides (callers, pagers, results).
///
/// Invariants:
/// - A (room, priority) key has at most one queued run and at most one
///   running run; a request for a key that has one joins it (the queued one
///   first). A room therefore has at most one queued run per priority. Only
///   `queue_behind_running` queues a run for a key that is running.
/// - At most one run per room runs at once, whatever their priorities; at
///   most `max_concurrent` run in total and at most `max_per_priority[p]` at
///   priority p (0: no cap). A running run is never preempted.
/// - Runs start highest priority first, FIFO within a priority (by the
///   sequence number taken when the run was queued). This is the seed's
///   order: a runnable run is never passed over for a later or lower one,
///   except when its priority's cap is reached.
/// - Every queued run is in exactly one place: in its priority's runnable
///   queue when its room is idle, or parked in its room's record while that
///   room runs something. When the room's run finishes, its parked runs go
///   back to their runnable queues under their original sequence numbers, so
///   they keep their FIFO position.
/// - At most `max_queued` distinct keys are queued; joins never count.
///
/// Complexity (n queued runs, k runs started by one decision):
/// - `admit`, `withdraw`, `finish`: O(log n) (a hash lookup plus at most
///   `priority_count` ordered-map operations).
/// - `start_runnable`: O(priority_count + k log n). A priority whose cap is
///   reached is skipped in O(1), and a queued run whose room is busy is not
///   in any runnable queue, so a decision touches only the runs it starts.
///   The seed's single heap pops, skips and pushes back every busy or capped
///   run on every decision: O(n log n) with a capped backlog.
namespace coalesce {

/// Names one run: the room it loads and the priority it was requested at.
struct run_key {
  std::string room;
  priority prio;
};

struct run_limits {
  /// Runs at once, all priorities.
  std::size_t max_concurrent = 3;
  /// Distinct (room, priority) runs waiting.
  std::size_t max_queued = 10000;
  /// Runs at once per priority, indexed by the priority's value; 0 = no cap.
  std::array<std::size_t, priority_count> max_per_priority{0, 0, 0};
};

class run_queue {
public:
  explicit run_queue(run_limits limits);

  enum class admission { queued, joined_queued, joined_running, queue_full };

  /// A request for (room, prio): joins the run already queued or running for
  /// that exact key, else queues a new run (FIFO sequence number), else
  /// `queue_full` when `max_queued` queued runs exist.
  admission admit(const std::string& room, priority prio);

  /// Queues a run for (room, prio) although that key runs, parked until the
  /// running run has finished: the scheduler's fresh run behind one whose
  /// callers all left. Counted like any queued run, so `queue_full` past
  /// `max_queued`; `joined_queued` when the key already has a queued run.
  /// Admits like `admit` when the key does not run.
  admission queue_behind_running(const std::string& room, priority prio);

  /// Withdraws a queued (not running) run; returns whether it was queued.
  bool withdraw(const std::string& room, priority prio);

  /// Starts every run that may start now and returns them in start order:
  /// highest priority first, FIFO within a priority, at most `max_concurrent`
  /// running in total, at most `max_per_priority[p]` running at priority p
  /// (0 = no cap), never two runs for one room at once (whatever their
  /// priorities). A running run is never preempted. The returned runs are
  /// marked running.
  std::vector<run_key> start_runnable();

  /// A running run ended: frees its slot and its room. A no-op when that key
  /// is not running.
  void finish(const std::string& room, priority prio);

  bool queued(const std::string& room, priority prio) const;

  bool running(const std::string& room, priority prio) const;

  /// Queued runs at `prio`, runnable or parked.
  std::size_t queued_count(priority prio) const;

  std::size_t queued_count() const {
    return queued_total_;
  }

  std::size_t running_count() const {
    return running_total_;
  }

  std::size_t running_count(priority prio) const;

private:
  /// Sequence number 0 marks "no queued run" in a room record.
  static constexpr uint64_t none = 0;

  /// What one room has queued or running. A room without either has no
  /// record, so the map's size stays bounded by the live rooms.
  struct room_state {
    /// The priority of the room's running run, if one runs. While set, the
    /// room's queued runs are parked here rather than runnable.
    std::optional<priority> running;
    /// The sequence number of the room's queued run at each priority.
    std::array<uint64_t, priority_count> queued{none, none, none};

    bool empty() const {
      return !running && queued[0] == none && queued[1] == none
             && queued[2] == none;
    }
  };

  /// Runnable runs of one priority by sequence number: the front is the
  /// oldest. An ordered map rather than a deque because parked runs return
  /// in the middle, at their original position, and withdrawals erase there.
  using runnable_queue = std::map<uint64_t, std::string>;

  using room_map = std::unordered_map<std::string, room_state>;

  static std::size_t index(priority prio) {
    return static_cast<std::size_t>(prio);
  }

  bool at_cap(std::size_t p) const {
    auto cap = limits_.max_per_priority[p];
    return cap != 0 && running_[p] >= cap;
  }

  /// Queues a run for a key without a queued one: runnable when its room is
  /// idle, parked otherwise.
  admission queue_new(const std::string& room, priority prio);

  /// Marks the front of `runnable_[p]` running and parks its room's other
  /// queued runs.
  run_key start_front(std::size_t p);

  void erase_if_empty(room_map::iterator i);

  run_limits limits_;
  uint64_t next_sequence_ = 1;
  std::array<runnable_queue, priority_count> runnable_;
  room_map rooms_;
  std::array<std::size_t, priority_count> queued_{0, 0, 0};
  std::array<std::size_t, priority_count> running_{0, 0, 0};
  std::size_t queued_total_ = 0;
  std::size_t running_total_ = 0;
};

} // namespace coalesce
