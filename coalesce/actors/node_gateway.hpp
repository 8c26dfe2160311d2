#pragma once

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "coalesce/actors/backfill_scheduler.hpp"
#include "coalesce/actors/secret_buffer.hpp"
#include "coalesce/actors/timeline_actors.hpp"
#include "coalesce/messages/atoms.hpp"
#include "coalesce/messages/node_interface.hpp"
#include "coalesce/messages/node_stats.hpp"
#include "coalesce/messages/secret_entry.hpp"

/// The one actor a node publishes: remote clients (the CLI, other nodes)
/// talk to the node's services through it, never to the services directly.
///
/// - It forwards each request to the service that owns it, with one generic
///   forwarder per service interface (every message of the interface); the service
///   answers the caller directly and sees the caller as the requester (so
///   the secret buffer monitors remote producers like local ones).
/// - `shutdown`, accepted only from the gateway's own node, switches it to
///   refusing: every later request is answered with `errc::node_shutting_down`,
///   while in-process producers keep the services' own shutdown paths (the
///   buffer's seal).
/// - `stats` gathers the counters of every service into one `node_stats`.
///
/// Later services add their messages to `node_actor`, one at a time.
namespace coalesce {

// node_actor: coalesce/messages/node_interface.hpp.

/// The services a gateway fronts.
struct node_services {
  secret_buffer_interface secrets;
  backfill_interface scheduler;
  timeline_requests timeline;
};

node_actor spawn_node_gateway(caf::actor_system& sys, node_services services);

} // namespace coalesce
