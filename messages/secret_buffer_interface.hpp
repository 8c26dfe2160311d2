#pragma once

#include <vector>

#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/secret_buffer_stats.hpp>
#include <coalesce/messages/secret_entry.hpp>

/// The secret buffer's interface for clients, in process or on another node
/// (the contract: coalesce/actors/secret_buffer.hpp). A client compiles
/// against this header only.
namespace coalesce {

/// The requests a node's gateway forwards to the buffer.
using secret_buffer_requests = caf::typed_actor<
  /// Captures entries; answered once they are admitted (after `seal`: once
  /// they are durable). An empty vector is a no-op.
  caf::replies_to<queue_atom, std::vector<secret_entry>>::with<ok_atom>,
  caf::replies_to<queue_atom, secret_entry>::with<ok_atom>,
  caf::replies_to<lookup_atom, secret_key>::with<secret_lookup>,
  /// Many keys in one message, for remote callers; answers in key order.
  caf::replies_to<lookup_atom, std::vector<secret_key>>::with<
    std::vector<secret_lookup>>,
  caf::replies_to<flush_atom>::with<ok_atom>,
  /// A flush that answers an error naming the failure if the data is not
  /// durable within the deadline; the data stays pending and is retried.
  caf::replies_to<flush_atom, caf::timespan>::with<ok_atom>>;

/// Everything a client may send the buffer itself.
using secret_buffer_interface = secret_buffer_requests::extend<
  /// Switches to inline writes (node shutdown): every later `queue` is
  /// answered once its entries are durable.
  caf::replies_to<seal_atom>::with<ok_atom>,
  caf::replies_to<stats_atom>::with<secret_buffer_stats>>;

} // namespace coalesce
