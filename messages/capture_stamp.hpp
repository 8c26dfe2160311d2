#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

/// The stamps that order captures of one secret in a cluster (see
/// `secret_entry::stamp`): microseconds of the wall clock, never below the
/// last stamp the same clock gave, with their source in the low bits: the
/// id of the node that admitted the capture (coalesce/client/cluster_map.hpp),
/// or `client_source` for a cluster client that stamped it before its first
/// attempt.
namespace coalesce {

class capture_clock {
public:
  /// Bits of a stamp that name its source: up to 1024 sources.
  static constexpr int source_bits = 10;
  static constexpr uint64_t client_source = (uint64_t{1} << source_bits) - 1;

  static uint64_t now_us() {
    using namespace std::chrono;
    return static_cast<uint64_t>(
      duration_cast<microseconds>(system_clock::now().time_since_epoch())
        .count());
  }

  /// A stamp later than every earlier one of this clock.
  uint64_t next(uint64_t source) {
    return next(source, now_us());
  }

  /// The same with the wall clock read once for a whole batch (`now_us`):
  /// its stamps still rise one by one.
  uint64_t next(uint64_t source, uint64_t now) {
    last_us_ = std::max(now, last_us_ + 1);
    return (last_us_ << source_bits) | (source & client_source);
  }

private:
  uint64_t last_us_ = 0;
};

} // namespace coalesce
