#pragma once

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

#include <coalesce/messages/named_fields.hpp>

namespace coalesce {

/// Counters of the secret buffer, answered to `stats`. Cumulative counters
/// start at 0 when the buffer starts; gauges describe the moment of the reply.
struct secret_buffer_stats {
  /// Distinct keys waiting to be written (gauge).
  uint64_t pending = 0;
  /// Producers whose `queue` is not answered yet because the buffer is full
  /// (gauge).
  uint64_t waiting_producers = 0;
  /// Entries the waiting producers still hold back for lack of capacity
  /// (gauge).
  uint64_t held_entries = 0;
  /// Batches RocksDB accepted.
  uint64_t batches_written = 0;
  /// Entries carried by the batches RocksDB accepted.
  uint64_t entries_written = 0;
  /// Batches RocksDB refused; their entries stayed pending and were retried.
  uint64_t failed_batches = 0;
  /// Entries in the last batch RocksDB accepted.
  uint64_t last_batch_entries = 0;
  /// How long the last accepted batch took, from sending it to the drain
  /// worker to its answer, in microseconds.
  uint64_t last_write_latency_us = 0;
  /// Entries admitted past the high-water mark because their producer died
  /// while waiting for capacity.
  uint64_t force_buffered = 0;
  /// Whether `seal` was received: every later `queue` is answered only once
  /// its entries are durable.
  bool sealed = false;
  /// Writes retried after a failure.
  uint64_t retries = 0;
  /// How long writes have been failing, 0 while they succeed (gauge).
  uint64_t failing_for_ms = 0;
  /// The last write error while writes fail, empty while they succeed.
  std::string last_error;
};

/// Its fields with their names, in wire order (see named_fields.hpp).
template <class F>
auto with_named_fields(secret_buffer_stats& x, F&& f) {
  return f(field("pending", x.pending),
           field("waiting_producers", x.waiting_producers),
           field("held_entries", x.held_entries),
           field("batches_written", x.batches_written),
           field("entries_written", x.entries_written),
           field("failed_batches", x.failed_batches),
           field("last_batch_entries", x.last_batch_entries),
           field("last_write_latency_us", x.last_write_latency_us),
           field("force_buffered", x.force_buffered),
           field("sealed", x.sealed), field("retries", x.retries),
           field("failing_for_ms", x.failing_for_ms),
           field("last_error", x.last_error));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, secret_buffer_stats& x) {
  return with_named_fields(x, [&](auto... fields) {
    return inspect_named_fields(
      f, caf::meta::type_name("secret_buffer_stats"), fields...);
  });
}

} // namespace coalesce
