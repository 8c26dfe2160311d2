#pragma once


#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/service_descriptor.hpp>

/// The back-pagination scheduler's interface for clients, in process or on
/// another node (the contract: coalesce/actors/backfill_scheduler.hpp), and
/// its descriptor.
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

/// The scheduler as a node shows it (what each member is for:
/// coalesce/messages/service_descriptor.hpp).
struct backfill_scheduler_descriptor {
  using requests = backfill_scheduler_requests;

  struct handle_member {
    backfill_scheduler_requests backfill_scheduler;
  };
  static constexpr auto handle = &handle_member::backfill_scheduler;

  struct stats_member {
    backfill_scheduler_stats backfill_scheduler;
  };
  static constexpr auto stats = &stats_member::backfill_scheduler;
  static constexpr const char* stats_name = "scheduler";

  /// Queue lengths and what is held at the moment.
  using gauges = members<&backfill_scheduler_stats::queued,
                         &backfill_scheduler_stats::running,
                         &backfill_scheduler_stats::events_bytes_held,
                         &backfill_scheduler_stats::parked_awaits,
                         &backfill_scheduler_stats::results_kept,
                         &backfill_scheduler_stats::results_bytes>;
  using counters = members<&backfill_scheduler_stats::coalesced_joins,
                           &backfill_scheduler_stats::finished,
                           &backfill_scheduler_stats::results_forgotten>;

  static constexpr auto message_types = type_names(
    message_type<stop_condition>{"coalesce.stop_condition"},
    message_type<backfill_request>{"coalesce.backfill_request"},
    message_type<backfill_ticket>{"coalesce.backfill_ticket"},
    message_type<backfill_result>{"coalesce.backfill_result"},
    message_type<backfill_scheduler_stats>{"coalesce.scheduler_stats"});

  /// A room's backfills run on the replica of the room that the request
  /// reaches (its coordinator); a ticket names a run of the node that
  /// issued it.
  static one_key routed_by(enqueue_atom, const backfill_request& x) {
    return {key_kind::room, x.room};
  }

  static issuer routed_by(await_atom, const backfill_ticket&) {
    return {};
  }

  static issuer routed_by(cancel_atom, const backfill_ticket&) {
    return {};
  }

  static issuer routed_by(detach_atom, const backfill_ticket&) {
    return {};
  }

  using issues = type_list<backfill_ticket>;

  /// Awaiting, cancelling or leaving a run already admitted.
  using served_while_shutting_down
    = type_list<await_atom, cancel_atom, detach_atom>;
};

} // namespace coalesce
