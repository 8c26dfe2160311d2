#pragma once

#include <algorithm>
#include <chrono>

#include <caf/timespan.hpp>

namespace coalesce {

/// Time left until `deadline`, at least one millisecond: a request made
/// after the deadline still gets a (short) timeout rather than none.
inline caf::timespan until(std::chrono::steady_clock::time_point deadline) {
  auto left = deadline - std::chrono::steady_clock::now();
  return std::max<caf::timespan>(
    std::chrono::duration_cast<caf::timespan>(left),
    std::chrono::milliseconds{1});
}

} // namespace coalesce
