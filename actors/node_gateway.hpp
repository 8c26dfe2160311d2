#pragma once

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/backfill_scheduler.hpp"
#include "actors/secret_buffer.hpp"
#include "actors/timeline_actors.hpp"
#include "messages/atoms.hpp"
#include "messages/node_stats.hpp"
#include "messages/secret_entry.hpp"

/// The one actor a node publishes: remote clients (the CLI, other nodes)
/// talk to the node's services through it, never to the services directly.
///
/// - It forwards each request to the service that owns it; the service
///   answers the caller directly and sees the caller as the requester (so
///   the secret buffer monitors remote producers like local ones).
/// - `shutdown`, accepted only from the gateway's own node, switches it to
///   refusing: every later request is answered with `errc::shutting_down`,
///   while in-process producers keep the services' own shutdown paths (the
///   buffer's seal).
/// - `stats` gathers the counters of every service into one `node_stats`.
///
/// Later services add their messages to `node_actor`, one at a time.
namespace coalesce {

using node_actor = caf::typed_actor<
  caf::replies_to<queue_atom, std::vector<secret_entry>>::with<ok_atom>,
  caf::replies_to<lookup_atom, secret_key>::with<secret_lookup>,
  caf::replies_to<lookup_atom, std::vector<secret_key>>::with<
    std::vector<secret_lookup>>,
  caf::replies_to<flush_atom>::with<ok_atom>,
  caf::replies_to<flush_atom, caf::timespan>::with<ok_atom>,
  caf::replies_to<append_atom, std::string, std::vector<timeline_event>>::with<
    uint64_t>,
  caf::replies_to<enqueue_atom, backfill_request>::with<backfill_ticket>,
  caf::replies_to<await_atom, backfill_ticket>::with<backfill_result>,
  caf::replies_to<cancel_atom, backfill_ticket>::with<ok_atom>,
  caf::replies_to<detach_atom, backfill_ticket>::with<ok_atom>,
  caf::replies_to<stats_atom>::with<node_stats>,
  caf::replies_to<shutdown_atom>::with<ok_atom>>;

/// The services a gateway fronts.
struct node_services {
  secret_buffer_actor secrets;
  scheduler_actor scheduler;
  timeline_actor timeline;
};

node_actor spawn_node_gateway(caf::actor_system& sys, node_services services);

} // namespace coalesce
