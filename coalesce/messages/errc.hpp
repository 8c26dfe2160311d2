#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

namespace coalesce {

/// Every failure coalesce reports as a `caf::error`. The values appear in
/// logs, tests and on the wire between nodes: append only, never renumber.
/// 0 is CAF's "no error".
enum class errc : uint8_t {
  /// A request carried a malformed entry (an empty chat, sender or message
  /// id, or a secret of the wrong length); nothing of it was stored.
  invalid_secret_entry = 1,
  /// RocksDB refused an operation; the context carries its message.
  storage_failed = 2,
  /// A stored row could not be decoded.
  corrupt_record = 3,
  /// The actor stopped before it could answer this request.
  service_stopped = 4,
  /// The node is shutting down and accepts no further remote requests.
  node_shutting_down = 5,
  /// The database was written by a newer coalesce with an unknown format.
  unsupported_format = 6,
  /// The caller may not make this request (e.g. shutting down another node).
  not_permitted = 7,
  /// A request was malformed (e.g. an empty room name, an event without an
  /// id, or a page of zero events); nothing of it was done.
  invalid_request = 8,
  /// Too many runs already wait; the request was not admitted.
  queue_full = 9,
  /// A ticket the scheduler never issued or has long forgotten.
  unknown_ticket = 10,
  /// The service was shut down and takes no new requests.
  service_shut_down = 11,
  /// A later await for the same ticket replaced this one: a ticket has one
  /// parked await, the newest (an await is re-sent after it timed out).
  await_replaced = 12,
  /// No coalesce node answered at an address within the timeout (or the
  /// peer there is not one).
  node_unreachable = 13,
  /// The session was deleted; a persist through a handle from before the
  /// delete is refused.
  session_deleted = 14,
  /// A newer handle was registered for the session and none newer is alive.
  handle_superseded = 15,
  /// The persist's handle died and no live handle of the session is left.
  handle_gone = 16,
  /// Nothing is stored under the name asked for (e.g. an unknown session).
  not_found = 17,
  /// A session handle did not deliver a snapshot: it answered something
  /// else, failed, or did not answer in time; the write failed.
  snapshot_failed = 18,
};

/// The category atom of coalesce's errors.
constexpr caf::atom_value errc_category = caf::atom("coalesce");

std::string to_string(errc x);

/// A sentence an operator can act on, e.g. "invalid secret entry: the secret
/// must be 32 bytes, got 3".
std::string describe(errc x);

caf::error make_error(errc x);

/// An error with a context message; renders as "<describe(x)>: <context>".
caf::error make_error(errc x, std::string context);

/// Renders a coalesce error for `actor_system_config::add_error_category`.
std::string render_errc(uint8_t code, caf::atom_value, const caf::message& ctx);

} // namespace coalesce
