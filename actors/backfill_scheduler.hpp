#pragma once

#include <chrono>
#include <functional>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include "actors/run_queue.hpp"
#include "actors/timeline_actors.hpp"
#include "messages/atoms.hpp"
#include "messages/backfill.hpp"

/// The back-pagination scheduler: one actor runs "load older history of room
/// R" for many callers.
///
/// Guarantees (the seed's, then ours):
/// - Priority: high before normal before low, FIFO within a priority. A
///   running run is never preempted.
/// - At most `max_concurrent` runs at once, at most `max_per_priority[p]` at
///   priority p (0: no cap), never two runs for one room at once.
/// - Requests for the same (room, priority) while a run is queued or running
///   join it; each caller gets the events loaded since it joined.
/// - Each caller is answered when its own stop condition or its own
///   `max_batches` (counted from when it joined) is met, or when the run
///   ends for everyone (timeline start, empty batch, pager failure). The run
///   goes on while any caller still needs more. A run keeps the batch size of
///   the caller that started it.
/// - A run is cancelled only when every caller has cancelled or died and
///   none detached; cancelled while queued it never paginates, cancelled
///   while running it stops before its next batch. A later request for that
///   key starts a fresh run.
/// - At most `max_queued` distinct runs wait; past that `enqueue` is refused
///   with `errc::queue_full`.
/// - Every request is answered: `await` once the caller's part is done (it
///   may be sent again; one that timed out cancels nothing), `enqueue` after
///   shutdown with `errc::shut_down`, and on shutdown every waiting caller
///   with `cancelled`.
///
/// A run asks its pager for one batch at a time, with `pager_timeout`; an
/// error, a dead pager or no answer in time ends it `failed`.
namespace coalesce {

/// A stop condition that cannot cross nodes: in-process callers may pass one
/// in addition to the data condition; either one ends their part.
struct local_stop {
  std::function<bool(const timeline_page&)> met_by;
};

} // namespace coalesce

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(coalesce::local_stop)

namespace coalesce {

using scheduler_actor = caf::typed_actor<
  caf::replies_to<enqueue_atom, backfill_request>::with<backfill_ticket>,
  caf::replies_to<enqueue_atom, backfill_request, local_stop>::with<
    backfill_ticket>,
  caf::replies_to<await_atom, backfill_ticket>::with<backfill_result>,
  caf::replies_to<cancel_atom, backfill_ticket>::with<ok_atom>,
  caf::replies_to<detach_atom, backfill_ticket>::with<ok_atom>,
  caf::replies_to<stats_atom>::with<scheduler_stats>,
  /// Cancels every run and refuses later requests (node shutdown).
  caf::replies_to<shutdown_atom>::with<ok_atom>>;

/// What a kept result costs besides its events, in `results_memory`: its
/// record (reason, counters, page references) at a fixed estimate, so that
/// results without events are bounded too.
constexpr std::size_t result_bookkeeping_bytes = 256;

struct scheduler_options {
  run_limits limits;
  /// How long a pager may take for one batch before the run fails.
  caf::timespan pager_timeout = std::chrono::seconds{30};
  /// Finished tickets kept so that a repeated `await` still gets its
  /// answer; the oldest are forgotten first.
  std::size_t finished_tickets_kept = 10000;
  /// Bytes of finished results kept for a later await.
  std::size_t results_memory = std::size_t{64} << 20;
};

scheduler_actor spawn_backfill_scheduler(caf::actor_system& sys,
                                         pager_actor pager,
                                         scheduler_options options);

} // namespace coalesce
