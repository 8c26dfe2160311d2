#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

/// Requests that wait until a service's writes are durable up to a mark
/// (the sequence number of their newest write), some of them with a
/// deadline. A plain value of ids: the promises stay in the service's
/// `parked_requests` under the same ids, the timers with the actor.
///
/// Invariants:
/// - A waiter is in the list from `wait` until it is taken, exactly once:
///   `take_durable` takes every waiter whose mark the durable point has
///   passed, in one pass and in mark order; `take_expired` takes every
///   waiter whose deadline is due, however far its durability is.
/// - A waiter without a deadline never expires.
/// - Nothing here is lost on a failed write: waiters stay until durable or
///   expired, so a failure is answered only by a deadline.
namespace coalesce {

class durability_waiters {
public:
  using waiter_id = uint64_t;
  using clock = std::chrono::steady_clock;

  /// `id` waits until every write with a sequence number up to and
  /// including `mark` is durable, or until `deadline` if it has one.
  void wait(waiter_id id, uint64_t mark,
            std::optional<clock::time_point> deadline = std::nullopt) {
    auto i = by_mark_.emplace(mark, id);
    if (deadline)
      by_deadline_.emplace(*deadline, i);
    entries_.emplace(id, entry{i, deadline});
  }

  /// Every write below `durable_below` is durable: takes the waiters whose
  /// mark is below it, lowest mark first.
  std::vector<waiter_id> take_durable(uint64_t durable_below) {
    std::vector<waiter_id> done;
    auto end = by_mark_.lower_bound(durable_below);
    for (auto i = by_mark_.begin(); i != end; ++i) {
      ++examined_;
      done.push_back(i->second);
      forget_deadline(i);
    }
    by_mark_.erase(by_mark_.begin(), end);
    return done;
  }

  /// Takes the waiters whose deadline is at or before `now`, earliest first.
  std::vector<waiter_id> take_expired(clock::time_point now) {
    std::vector<waiter_id> expired;
    auto end = by_deadline_.upper_bound(now);
    for (auto i = by_deadline_.begin(); i != end; ++i) {
      ++examined_;
      expired.push_back(i->second->second);
      entries_.erase(i->second->second);
      by_mark_.erase(i->second);
    }
    by_deadline_.erase(by_deadline_.begin(), end);
    return expired;
  }

  /// Takes one waiter out (its own timer fired); false if it was taken
  /// already.
  bool remove(waiter_id id) {
    auto e = entries_.find(id);
    if (e == entries_.end())
      return false;
    ++examined_;
    auto where = e->second.where;
    forget_deadline(where);
    by_mark_.erase(where);
    return true;
  }

  /// Whether some waiter's mark is below `durable_below`, i.e. whether
  /// making the writes below it durable would answer anyone.
  bool any_durable_below(uint64_t durable_below) const {
    return !by_mark_.empty() && by_mark_.begin()->first < durable_below;
  }

  bool waiting(waiter_id id) const {
    return entries_.count(id) > 0;
  }

  /// Waiters looked at by `take_durable`, `take_expired` and `remove` so
  /// far: each taken waiter once, never one that stays (so answering N
  /// waiters costs N visits however they are spread over the passes).
  uint64_t examined() const {
    return examined_;
  }

  std::size_t size() const {
    return by_mark_.size();
  }

  bool empty() const {
    return by_mark_.empty();
  }

private:
  using mark_map = std::multimap<uint64_t, waiter_id>;

  struct entry {
    mark_map::iterator where;
    std::optional<clock::time_point> deadline;
  };

  void forget_deadline(mark_map::iterator waiter) {
    auto d = entries_.find(waiter->second);
    if (d->second.deadline) {
      auto [first, last] = by_deadline_.equal_range(*d->second.deadline);
      for (auto j = first; j != last; ++j)
        if (j->second == waiter) {
          by_deadline_.erase(j);
          break;
        }
    }
    entries_.erase(d);
  }

  mark_map by_mark_;
  std::multimap<clock::time_point, mark_map::iterator> by_deadline_;
  /// Each waiting id's place in `by_mark_` and its deadline, if it has one.
  std::unordered_map<waiter_id, entry> entries_;
  uint64_t examined_ = 0;
};

} // namespace coalesce
