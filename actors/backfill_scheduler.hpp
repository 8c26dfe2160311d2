#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/backfill_runs.hpp>
#include <coalesce/actors/run_queue.hpp>
#include <coalesce/actors/timeline_actors.hpp>
#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/backfill_scheduler_interface.hpp>

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
///   key starts a fresh run, queued behind the cancelled one until it ends.
/// - At most `max_queued` distinct runs wait, fresh runs behind cancelled
///   ones included; past that `enqueue` is refused with `errc::queue_full`.
/// - Every event the room's position has passed over was delivered to at
///   least one caller: a page is committed to the pager (which then moves
///   the position) only after its events went into the callers' results. A
///   page answered for a cancelled run, after `pager_timeout` or after
///   shutdown is never committed, so the room's next run loads it again.
///   Mid-run, the next page is requested once the commit is answered; a
///   failed commit fails the run (those events come again: at least once).
/// - A caller on another node claims its ticket by awaiting or detaching
///   it: the answer to its enqueue may have been lost (its client gave up
///   on this node and asked another replica). A loaded page is committed
///   only once one of the callers whose part holds it has claimed; until
///   then the run waits (its room's place held), and a page nobody claims
///   within `pager_timeout`, or whose callers all left, is not committed:
///   those parts and the run end `cancelled` and the next run loads the
///   page again. So the position never moves for a run whose callers never
///   learned their tickets. Callers in this process hold their tickets for
///   sure and are not waited for.
/// - Memory: each loaded page is held once, shared by the run and the
///   results of its callers; a finished caller leaves its run, and the run
///   drops pages no remaining caller needs. Finished results are kept
///   within `results_memory` bytes (shared pages counted once, plus
///   `result_bookkeeping_bytes` each), oldest forgotten first; an await for
///   a forgotten ticket answers `errc::unknown_ticket` saying so.
/// - Every request is answered: `await` once the caller's part is done. It
///   may be sent again; one that timed out cancels nothing, and a ticket has
///   one parked await: a re-sent await replaces the earlier one, which is
///   answered `errc::await_replaced` at once. `enqueue` after shutdown is
///   refused with `errc::closed_to_new_requests`, and on shutdown every waiting caller is
///   answered `cancelled`.
/// - A malformed `enqueue` (an empty room, batch size 0, an unknown priority
///   or stop condition, an until_event or until_type condition with an
///   empty event id or type) is refused with `errc::invalid_request`; a
///   ticket it never issued, or whose result it forgot, with
///   `errc::unknown_ticket`.
///
/// A run asks its pager for one batch at a time, with `pager_timeout` for
/// the page and for its commit; an error, a dead pager or no answer in time
/// ends it `failed`.
namespace coalesce {

/// A stop condition that cannot cross nodes: in-process callers may pass one
/// in addition to the data condition; either one ends their part.
struct local_stop {
  std::function<bool(const timeline_page&)> met_by;
};

} // namespace coalesce

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(coalesce::local_stop)

namespace coalesce {

/// The scheduler's own timer: a run's held page waited `pager_timeout` for
/// a claim.
using claim_deadline_atom = caf::atom_constant<caf::atom("claimdue")>;

/// The client interface (coalesce/messages/backfill_scheduler_interface.hpp) plus
/// what only the scheduler's own process may send.
using backfill_scheduler_actor = backfill_scheduler_interface::extend<
  /// A stop condition as code, for callers in the same process.
  caf::replies_to<enqueue_atom, backfill_request, local_stop>::with<
    backfill_ticket>,
  /// Cancels every run and refuses later requests (node shutdown).
  caf::replies_to<shutdown_atom>::with<ok_atom>,
  /// (run, hold): sent to itself when a held page was not claimed in time.
  caf::reacts_to<claim_deadline_atom, uint64_t, uint64_t>>;

// result_bookkeeping_bytes, what a kept result costs besides its events:
// coalesce/actors/backfill_runs.hpp, which keeps the results.

struct backfill_scheduler_options {
  run_limits limits;
  /// How long a pager may take for one batch before the run fails.
  caf::timespan pager_timeout = std::chrono::seconds{30};
  /// Bytes of finished results kept so that a later `await` still gets its
  /// answer (events shared by several results count once, plus
  /// `result_bookkeeping_bytes` per result); the oldest are forgotten
  /// first.
  std::size_t results_memory = std::size_t{64} << 20;
  /// "host:port" of the node whose timeline the scheduler pages (through
  /// coalesce/actors/remote_pager.hpp); empty: the node's own timeline. The
  /// node reads it when it picks the scheduler's pager.
  std::string remote_pager;
  /// Whether callers in this process, too, claim their tickets (by awaiting
  /// or detaching them) before a page of theirs is committed, as callers on
  /// other nodes always do: a replicated room's scheduler sets it (a
  /// cluster client in its process fails over too), and tests replay a
  /// lost enqueue answer in one process with it. Not a setting.
  bool local_callers_claim = false;

  /// Registers the settings under a config group (`scheduler-max-concurrent`,
  /// `scheduler-max-queued`, `scheduler-max-concurrent-{low,normal,high}`,
  /// `scheduler-pager-timeout`, `scheduler-results-memory`,
  /// `scheduler-remote-pager`), each described
  /// with its default; parsing the config then writes into this object.
  void add_to(caf::config_option_adder& adder);

  /// Empty when the settings are valid, else one sentence naming the key
  /// (as `GROUP.KEY`) and what is wrong with its value.
  std::string validate(const std::string& group = "coalesce") const;
};

backfill_scheduler_actor spawn_backfill_scheduler(caf::actor_system& sys,
                                         pager_actor pager,
                                         backfill_scheduler_options options);

} // namespace coalesce
