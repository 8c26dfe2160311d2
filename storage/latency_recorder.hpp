#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

/// Latencies of the storage layer's disk operations, counted into fixed
/// buckets as they happen, for the node's metrics (coalesce/node/metrics.hpp)
/// to read at any time. Storage owns the recorders and knows neither
/// Prometheus nor who reads them; the metrics know no RocksDB.
namespace coalesce::storage {

/// A histogram of durations with fixed upper bounds, from 50 us to 10 s in
/// 1-2.5-5 steps (fsyncs on a fast SSD take tens of microseconds, on a
/// loaded disk tens of milliseconds). Thread safety: `record` and
/// `snapshot` may be called from any number of threads at once; both are
/// lock-free (relaxed atomics: a snapshot taken during a `record` may miss
/// that one observation, never count it twice in one bucket).
class latency_recorder {
public:
  using duration = std::chrono::nanoseconds;

  /// Upper bounds of the finite buckets, inclusive (Prometheus' `le`); the
  /// last bucket, above them all, is unbounded.
  static constexpr std::array<int64_t, 17> upper_bounds_ns{
    50'000,         100'000,       250'000,       500'000,     1'000'000,
    2'500'000,      5'000'000,     10'000'000,    25'000'000,  50'000'000,
    100'000'000,    250'000'000,   500'000'000,   1'000'000'000,
    2'500'000'000,  5'000'000'000, 10'000'000'000};

  static constexpr std::size_t bucket_count = upper_bounds_ns.size() + 1;

  /// Counts one operation that took `took` (negative counts as 0).
  void record(duration took) {
    auto ns = took.count() < 0 ? int64_t{0} : static_cast<int64_t>(took.count());
    std::size_t index = 0;
    while (index < upper_bounds_ns.size() && ns > upper_bounds_ns[index])
      ++index;
    buckets_[index].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }

  /// The recorder's counts at one moment.
  struct counts {
    /// Operations per bucket (not cumulative), the last one unbounded.
    std::array<uint64_t, bucket_count> per_bucket{};
    /// Their total duration.
    duration sum{0};

    uint64_t total() const {
      uint64_t result = 0;
      for (auto n : per_bucket)
        result += n;
      return result;
    }
  };

  counts snapshot() const {
    counts result;
    for (std::size_t i = 0; i < bucket_count; ++i)
      result.per_bucket[i] = buckets_[i].load(std::memory_order_relaxed);
    result.sum = duration{
      static_cast<int64_t>(sum_ns_.load(std::memory_order_relaxed))};
    return result;
  }

private:
  std::array<std::atomic<uint64_t>, bucket_count> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

} // namespace coalesce::storage
