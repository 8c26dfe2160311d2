#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <coalesce/actors/run_queue.hpp>
#include <coalesce/messages/backfill.hpp>

/// The seed's scheduling strategy, as the baseline of scripts/bench
/// scheduler: one binary heap of (priority, seq, room) entries, highest
/// priority first and FIFO within one. A decision pops entries until the
/// concurrency budget is spent or the heap is empty, skips every entry whose
/// room is busy, and pushes the skipped ones back after the pass (the seed's
/// `next_runnable`). The seed has no per-priority caps; they are added the
/// obvious way, as one more reason to skip and push back.
///
/// Invariants: the same as run_queue's, minus `withdraw` (the seed cancels
/// queued runs lazily) and minus `max_queued`.
///
/// Complexity: `admit` and `finish` O(log n); `start_runnable` pops and
/// pushes back every queued run that cannot start, O(n log n) with a backlog
/// of capped or busy runs. That is the cost run_queue avoids.
namespace coalesce::bench {

class seed_run_queue {
public:
  explicit seed_run_queue(run_limits limits) : limits_(limits) {
    // nop
  }

  run_queue::admission admit(const std::string& room, priority prio) {
    // The seed's `try_coalesce`: one waiter list per key, queued or running.
    if (!known_.emplace(key_of(room, prio)).second) {
      auto i = running_rooms_.find(room);
      return i != running_rooms_.end() && i->second == prio
               ? run_queue::admission::joined_running
               : run_queue::admission::joined_queued;
    }
    heap_.push_back(entry{prio, next_seq_++, room});
    std::push_heap(heap_.begin(), heap_.end());
    return run_queue::admission::queued;
  }

  /// The seed's `next_runnable`, with the per-priority caps. The heap is a
  /// std::vector under std::push_heap/pop_heap (what std::priority_queue
  /// wraps) so an entry moves out on pop, as with Rust's BinaryHeap::pop.
  std::vector<run_key> start_runnable() {
    std::vector<run_key> picked;
    std::vector<entry> skipped;
    std::array<std::size_t, priority_count> picked_at{0, 0, 0};
    while (running_rooms_.size() + picked.size() < limits_.max_concurrent
           && !heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end());
      entry next = std::move(heap_.back());
      heap_.pop_back();
      auto p = static_cast<std::size_t>(next.prio);
      auto cap = limits_.max_per_priority[p];
      bool capped = cap != 0 && running_[p] + picked_at[p] >= cap;
      bool busy = running_rooms_.count(next.room) != 0
                  || std::any_of(picked.begin(), picked.end(),
                                 [&](const run_key& other) {
                                   return other.room == next.room;
                                 });
      if (capped || busy) {
        // Busy or capped: try it again next round.
        skipped.push_back(std::move(next));
        continue;
      }
      ++picked_at[p];
      picked.push_back(run_key{std::move(next.room), next.prio});
    }
    for (auto& x : skipped) {
      heap_.push_back(std::move(x));
      std::push_heap(heap_.begin(), heap_.end());
    }
    for (const auto& key : picked) {
      running_rooms_.emplace(key.room, key.prio);
      ++running_[static_cast<std::size_t>(key.prio)];
    }
    return picked;
  }

  void finish(const std::string& room, priority prio) {
    auto i = running_rooms_.find(room);
    if (i == running_rooms_.end() || i->second != prio)
      return;
    running_rooms_.erase(i);
    --running_[static_cast<std::size_t>(prio)];
    known_.erase(key_of(room, prio));
  }

  std::size_t queued_count() const {
    return heap_.size();
  }

  std::size_t running_count() const {
    return running_rooms_.size();
  }

private:
  struct entry {
    priority prio;
    uint64_t seq;
    std::string room;

    /// Max-heap order: higher priority first, then the earlier seq.
    friend bool operator<(const entry& x, const entry& y) {
      if (x.prio != y.prio)
        return x.prio < y.prio;
      return x.seq > y.seq;
    }
  };

  static std::string key_of(const std::string& room, priority prio) {
    return room + '\0' + static_cast<char>('0' + static_cast<int>(prio));
  }

  run_limits limits_;
  uint64_t next_seq_ = 0;
  std::vector<entry> heap_;
  /// The seed's `active_requests`: the running run's priority per room.
  std::unordered_map<std::string, priority> running_rooms_;
  /// The seed's `waiters` keys: every (room, priority) queued or running.
  std::unordered_set<std::string> known_;
  std::array<std::size_t, priority_count> running_{0, 0, 0};
};

} // namespace coalesce::bench
