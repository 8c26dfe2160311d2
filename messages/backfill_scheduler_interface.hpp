#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/backfill.hpp>

/// The back-pagination scheduler's interface for clients, in process or on
/// another node (the contract: coalesce/actors/backfill_scheduler.hpp).
namespace coalesce {

/// The requests a node's gateway forwards to the scheduler.
using backfill_scheduler_requests = caf::typed_actor<
  caf::replies_to<enqueue_atom, backfill_request>::with<backfill_ticket>,
  caf::replies_to<await_atom, backfill_ticket>::with<backfill_result>,
  caf::replies_to<cancel_atom, backfill_ticket>::with<ok_atom>,
  caf::replies_to<detach_atom, backfill_ticket>::with<ok_atom>>;

/// Everything a client may send the scheduler itself.
using backfill_scheduler_interface = backfill_scheduler_requests::extend<
  caf::replies_to<stats_atom>::with<backfill_scheduler_stats>>;

} // namespace coalesce
