#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "coalesce/messages/backfill_interface.hpp"
#include "coalesce/messages/node_stats.hpp"
#include "coalesce/messages/secret_buffer_interface.hpp"
#include "coalesce/messages/timeline_interface.hpp"

/// The interface of the one actor a node publishes (its gateway, see
/// coalesce/actors/node_gateway.hpp): every service's requests, plus the
/// node's own stats and shutdown. A new service adds its requests here.
namespace coalesce {

using node_actor = secret_buffer_requests::extend_with<
  timeline_requests, backfill_requests>::
  extend<caf::replies_to<stats_atom>::with<node_stats>,
         /// Accepted only from the node itself: refuse later requests.
         caf::replies_to<shutdown_atom>::with<ok_atom>>;

} // namespace coalesce
