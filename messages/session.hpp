#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include <coalesce/messages/named_fields.hpp>

/// The session persister's message types (its contract:
/// coalesce/actors/session_persister.hpp). Plain values: they cross nodes.
namespace coalesce {

/// One update row of a session: its own id (unique within the session), when
/// it happened (microseconds since the epoch), what kind of update it is and
/// its payload (at most `persister-max-update` bytes).
struct session_update {
  std::string id;
  int64_t timestamp = 0;
  std::string kind;
  std::string payload;
};

inline bool operator==(const session_update& x, const session_update& y) {
  return x.id == y.id && x.timestamp == y.timestamp && x.kind == y.kind
         && x.payload == y.payload;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_update& x) {
  return f(caf::meta::type_name("session_update"), x.id, x.timestamp, x.kind,
           x.payload);
}

/// A session's state at the moment a persist is sent, carried with it: the
/// write needs no snapshot request when it is the newest (at most
/// `persister-max-blob` bytes).
struct session_snapshot {
  std::string blob;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_snapshot& x) {
  return f(caf::meta::type_name("session_snapshot"), x.blob);
}

/// What `load` answers: the stored blob and the session's update rows,
/// ordered by timestamp, then id.
struct session_record {
  std::string blob;
  std::vector<session_update> updates;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_record& x) {
  return f(caf::meta::type_name("session_record"), x.blob, x.updates);
}

/// Answered to `exclusive`: while it is held, no write of its session runs.
/// Handed back with `release`.
struct session_lease {
  uint64_t id = 0;
};

inline bool operator==(const session_lease& x, const session_lease& y) {
  return x.id == y.id;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_lease& x) {
  return f(caf::meta::type_name("session_lease"), x.id);
}

/// Counters of the persister, answered to `stats`. Cumulative counters start
/// at 0 when the persister starts; gauges describe the moment of the reply.
struct session_persister_stats {
  /// Writer actors alive, one per session with work (gauge).
  uint64_t active_writers = 0;
  /// Persist requests not answered yet (gauge).
  uint64_t queued_requests = 0;
  /// Session writes storage accepted.
  uint64_t writes = 0;
  /// Update rows the accepted session writes carried.
  uint64_t rows_written = 0;
  /// Update rows the accepted session writes removed.
  uint64_t rows_removed = 0;
  /// Sessions whose last write failed (gauge).
  uint64_t failed_sessions = 0;
  /// Snapshot requests sent to handles.
  uint64_t snapshot_requests = 0;
  /// Writer actors alive without work, kept warm for their sessions' next
  /// requests (gauge; at most `persister-idle-writers`).
  uint64_t idle_writers = 0;
  /// Group commits: batches the I/O actors wrote, each carrying the writes
  /// of every session that reached the I/O stage while the previous one
  /// was written.
  uint64_t groups = 0;
  /// Synced batches (one fsync each): groups and deletes written with
  /// durability `synced`.
  uint64_t fsyncs = 0;
};

/// Its fields with their names, in wire order (see named_fields.hpp).
template <class F>
auto with_named_fields(session_persister_stats& x, F&& f) {
  return f(field("active_writers", x.active_writers),
           field("queued_requests", x.queued_requests),
           field("writes", x.writes), field("rows_written", x.rows_written),
           field("rows_removed", x.rows_removed),
           field("failed_sessions", x.failed_sessions),
           field("snapshot_requests", x.snapshot_requests),
           field("idle_writers", x.idle_writers),
           field("groups", x.groups), field("fsyncs", x.fsyncs));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_persister_stats& x) {
  return with_named_fields(x, [&](auto... fields) {
    return inspect_named_fields(f, caf::meta::type_name("persister_stats"),
                                fields...);
  });
}

} // namespace coalesce
