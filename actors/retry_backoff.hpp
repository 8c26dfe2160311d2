#pragma once

#include <algorithm>

#include <caf/timespan.hpp>

/// The delay before retrying something that failed: `base` after the first
/// failure, doubling with each further one up to `max`, back to `base` after
/// a success (`reset`). A plain value: the actor owns the timer, this only
/// says how long to wait.
///
/// Invariants: `next()` returns `base` first after construction or `reset`,
/// then `min(previous * 2, max)`; never more than `max` (a `base` above
/// `max` is capped to `max`), never zero while `base` is positive.
namespace coalesce {

class retry_backoff {
public:
  retry_backoff(caf::timespan base, caf::timespan max)
    : base_(std::min(base, max)), max_(max) {
    // nop
  }

  /// Another failure: the delay to wait before the next attempt.
  caf::timespan next() {
    current_ = current_.count() == 0 ? base_ : std::min(current_ * 2, max_);
    return current_;
  }

  /// A success: the next failure waits `base` again.
  void reset() {
    current_ = caf::timespan{0};
  }

  /// The delay `next()` returned last; zero after a success.
  caf::timespan current() const {
    return current_;
  }

  /// Whether failures have happened since the last success.
  bool backing_off() const {
    return current_.count() != 0;
  }

private:
  caf::timespan base_;
  caf::timespan max_;
  caf::timespan current_{0};
};

} // namespace coalesce
