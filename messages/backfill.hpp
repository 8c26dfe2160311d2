#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include <coalesce/messages/named_fields.hpp>

/// The back-pagination scheduler's messages: requests to load older history
/// of a room, the events pagers answer with, and how runs end. Stop
/// conditions are data so that they cross nodes.
namespace coalesce {

/// Scheduling priority: a higher one runs first; FIFO within one.
enum class priority : uint8_t {
  low = 0,
  normal = 1,
  high = 2,
};

constexpr std::size_t priority_count = 3;

std::string to_string(priority x);

/// One event of a room's timeline.
struct timeline_event {
  std::string event_id;
  std::string type;
  /// Origin server timestamp, milliseconds or seconds as the caller uses.
  int64_t timestamp = 0;
  std::string body;

  friend bool operator==(const timeline_event& x, const timeline_event& y) {
    return x.event_id == y.event_id && x.type == y.type
           && x.timestamp == y.timestamp && x.body == y.body;
  }
};

/// What one event costs the scheduler to hold: the struct and the bytes of
/// its strings (allocator overhead left out), the unit of
/// `scheduler-results-memory` and of the held-bytes counters.
inline std::size_t held_bytes(const timeline_event& x) {
  return sizeof(timeline_event) + x.event_id.size() + x.type.size()
         + x.body.size();
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, timeline_event& x) {
  return f(caf::meta::type_name("timeline_event"), x.event_id, x.type,
           x.timestamp, x.body);
}

/// Where a page was read in its room and where the next older page starts,
/// in the pager's own numbering (the RocksDB store: sequence numbers). A
/// pager moves the room's position only when the page is committed, so a
/// page nobody received is loaded again.
struct page_cursor {
  /// The room's position the page was read at.
  uint64_t read_at = 0;
  /// The position once the page is committed: past its oldest event.
  uint64_t next = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, page_cursor& x) {
  return f(caf::meta::type_name("page_cursor"), x.read_at, x.next);
}

/// One batch a pager loaded: events newest first, whether the start of the
/// room's timeline was reached (a last batch may still carry events), and
/// the cursor that commits it.
struct timeline_page {
  std::vector<timeline_event> events;
  bool reached_start = false;
  page_cursor cursor;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, timeline_page& x) {
  return f(caf::meta::type_name("timeline_page"), x.events, x.reached_start,
           x.cursor);
}

/// When a caller has what it wants from a run.
struct stop_condition {
  enum class kind : uint8_t {
    /// Never: the run is bounded by max_batches, the timeline start, an
    /// empty batch or cancellation.
    never = 0,
    /// Once the event with id `event_id` was loaded.
    until_event = 1,
    /// Once an event with a timestamp older than `timestamp` was loaded.
    older_than = 2,
    /// Once an event of type `event_type` was loaded.
    until_type = 3,
  };

  kind what = kind::never;
  std::string event_id;
  int64_t timestamp = 0;
  std::string event_type;

  /// Whether `page` satisfies the condition.
  bool met_by(const timeline_page& page) const {
    for (const auto& event : page.events) {
      switch (what) {
        case kind::never:
          return false;
        case kind::until_event:
          if (event.event_id == event_id)
            return true;
          break;
        case kind::older_than:
          if (event.timestamp < timestamp)
            return true;
          break;
        case kind::until_type:
          if (event.type == event_type)
            return true;
          break;
      }
    }
    return false;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stop_condition& x) {
  return f(caf::meta::type_name("stop_condition"), x.what, x.event_id,
           x.timestamp, x.event_type);
}

/// Why a caller's part of a run ended. Not errors: a run that could not load
/// ends `failed`, and the caller decides whether to retry.
enum class stop_reason : uint8_t {
  /// The caller's stop condition saw what it waited for.
  stop_condition_met = 0,
  /// The start of the room's timeline was reached; nothing more to load.
  reached_timeline_start = 1,
  /// A batch came back empty: nothing to load right now.
  no_data_available = 2,
  /// The caller's max_batches was reached; more history likely remains.
  batch_limit_reached = 3,
  /// The pager failed, is down, or did not answer in time.
  failed = 4,
  /// The caller cancelled, died, or the scheduler shut down.
  cancelled = 5,
};

std::string to_string(stop_reason x);

/// "Load older history of `room`, at `prio`, until `stop`."
struct backfill_request {
  std::string room;
  priority prio = priority::normal;
  stop_condition stop;
  /// Events per batch; a run keeps the batch size of the caller that
  /// started it. Must be positive.
  uint32_t batch_size = 30;
  /// Batches this caller needs at most, counted from when it joined; 0 means
  /// unbounded.
  uint32_t max_batches = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backfill_request& x) {
  return f(caf::meta::type_name("backfill_request"), x.room, x.prio, x.stop,
           x.batch_size, x.max_batches);
}

/// Names one caller's interest in a run.
struct backfill_ticket {
  uint64_t id = 0;

  friend bool operator==(const backfill_ticket& x, const backfill_ticket& y) {
    return x.id == y.id;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backfill_ticket& x) {
  return f(caf::meta::type_name("backfill_ticket"), x.id);
}

/// What `await` answers once the caller's part is done.
struct backfill_result {
  stop_reason reason = stop_reason::cancelled;
  /// Batches loaded since the caller joined.
  uint32_t batches = 0;
  /// The events loaded since the caller joined, in the order they were
  /// loaded (newest first).
  std::vector<timeline_event> events;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backfill_result& x) {
  return f(caf::meta::type_name("backfill_result"), x.reason, x.batches,
           x.events);
}

/// The scheduler's counters.
struct backfill_scheduler_stats {
  /// Distinct (room, priority) runs waiting, per priority (low, normal, high).
  std::vector<uint64_t> queued{0, 0, 0};
  /// Runs under way (their pages asked of the pager), at most the
  /// concurrency cap.
  uint64_t running = 0;
  /// Requests that joined a run already queued or running.
  uint64_t coalesced_joins = 0;
  /// Finished runs by stop_reason (indexed by its value).
  std::vector<uint64_t> finished{0, 0, 0, 0, 0, 0};
  /// Bytes of loaded events held for running runs and kept results
  /// (`held_bytes`); an event shared by many callers counts once.
  uint64_t events_bytes_held = 0;
  /// Awaits parked until their caller's part is done (at most one per
  /// ticket).
  uint64_t parked_awaits = 0;
  /// Finished results kept for a later await, and the bytes of the events
  /// they hold (each event once), at most `scheduler-results-memory`.
  uint64_t results_kept = 0;
  uint64_t results_bytes = 0;
  /// Finished results forgotten, oldest first, to stay within the budget.
  uint64_t results_forgotten = 0;
};

/// Names the index of a per-priority counter ("low", "normal", "high").
inline std::string priority_name(std::size_t index) {
  return to_string(static_cast<priority>(index));
}

/// Names the index of a per-stop_reason counter.
inline std::string stop_reason_name(std::size_t index) {
  return to_string(static_cast<stop_reason>(index));
}

/// Its fields with their names, in wire order (see named_fields.hpp).
template <class F>
auto with_named_fields(backfill_scheduler_stats& x, F&& f) {
  return f(indexed_field("queued", x.queued, "priority", priority_name),
           field("running", x.running),
           field("coalesced_joins", x.coalesced_joins),
           indexed_field("finished", x.finished, "reason",
                         stop_reason_name),
           field("events_bytes_held", x.events_bytes_held),
           field("parked_awaits", x.parked_awaits),
           field("results_kept", x.results_kept),
           field("results_bytes", x.results_bytes),
           field("results_forgotten", x.results_forgotten));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backfill_scheduler_stats& x) {
  return with_named_fields(x, [&](auto... fields) {
    return inspect_named_fields(f, caf::meta::type_name("scheduler_stats"),
                                fields...);
  });
}

} // namespace coalesce
