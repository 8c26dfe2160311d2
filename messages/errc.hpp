#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  stopped_before_answer = 4,
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
  closed_to_new_requests = 11,
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
  /// Storage holds a newer generation of the session (or a delete's
  /// tombstone of one) than the write carries: a stale writer never wins.
  stale_generation = 19,
  /// The request names a key this node does not keep under the configured
  /// cluster: a chat it is not a replica of, a session or room another node
  /// owns; the context names the key and the nodes that keep it (the
  /// client's list of nodes, or its `replicas`, is outdated or wrong).
  not_replica = 20,
  /// A replicated request reached no majority of a key's replicas in time
  /// (coalesce.replicas); the context names the replicas that failed and
  /// why. A `queue` so answered may still be held by the replicas that did
  /// answer: it was not acknowledged, and a retry is harmless.
  no_quorum = 21,
  /// This replica restarted without a clean stop (or with an empty data
  /// directory) and has not yet caught up from its peers: it may lack
  /// captures it had acknowledged, so it answers no read alone; the
  /// coordinator asks the other replicas.
  catching_up = 22,
  /// A replica refused a coordinator's request: the coordinator did not
  /// count a majority under every cluster list the replica serves under
  /// or sees served (`list_stamp`); the refusal names those lists, and the
  /// coordinator counts them from then on.
  lists_not_counted = 23,
};

/// Each error's name (logs, tests) and the sentence it renders as; one row
/// per value of `errc`, in the order of the enum, so a new error is one value
/// and one row, here.
struct errc_text {
  errc code;
  const char* name;
  const char* sentence;
};

inline constexpr errc_text errc_texts[] = {
  {errc::invalid_secret_entry, "invalid_secret_entry", "invalid secret entry"},
  {errc::storage_failed, "storage_failed", "storage failed"},
  {errc::corrupt_record, "corrupt_record", "corrupt record in the database"},
  {errc::stopped_before_answer, "stopped_before_answer",
    "the service stopped before answering"},
  {errc::node_shutting_down, "node_shutting_down", "the node is shutting down"},
  {errc::unsupported_format, "unsupported_format",
    "the database has an unsupported format"},
  {errc::not_permitted, "not_permitted", "the request is not permitted"},
  {errc::invalid_request, "invalid_request", "invalid request"},
  {errc::queue_full, "queue_full", "the queue is full"},
  {errc::unknown_ticket, "unknown_ticket", "unknown ticket"},
  {errc::closed_to_new_requests, "closed_to_new_requests", "the service is shut down"},
  {errc::await_replaced, "await_replaced",
    "a later await for the same ticket replaced this one"},
  {errc::node_unreachable, "node_unreachable", "the node cannot be reached"},
  {errc::session_deleted, "session_deleted", "the session was deleted"},
  {errc::handle_superseded, "handle_superseded",
    "the session handle was superseded by a newer one"},
  {errc::handle_gone, "handle_gone", "no live handle of the session is left"},
  {errc::not_found, "not_found", "not found"},
  {errc::snapshot_failed, "snapshot_failed",
    "the session handle did not deliver a snapshot"},
  {errc::stale_generation, "stale_generation",
    "storage holds a newer generation of the session"},
  {errc::not_replica, "not_replica", "this node is not a replica of the key"},
  {errc::no_quorum, "no_quorum",
    "no majority of the key's replicas answered"},
  {errc::catching_up, "catching_up",
    "this replica is still catching up from its peers"},
  {errc::lists_not_counted, "lists_not_counted",
    "the coordinator did not count every cluster list in use"},
};

constexpr bool errc_texts_in_order() {
  for (std::size_t i = 0; i < std::size(errc_texts); ++i)
    if (static_cast<std::size_t>(errc_texts[i].code) != i + 1)
      return false;
  return true;
}

static_assert(errc_texts_in_order(), "one row per errc value, in enum order");

/// The category atom of coalesce's errors.
constexpr caf::atom_value errc_category = caf::atom("coalesce");

std::string to_string(errc x);

/// A sentence an operator can act on, e.g. "invalid secret entry: the secret
/// must be 32 bytes, got 3".
std::string describe(errc x);

caf::error make_error(errc x);

/// An error with a context message; renders as "<describe(x)>: <context>".
caf::error make_error(errc x, std::string context);

/// The cluster list a `not_replica` refusal names: the one the refusing
/// node serves under, so that a client with an older list adopts it.
struct refusing_list {
  uint64_t version = 0;
  /// Its nodes, "host:port", in list order.
  std::vector<std::string> nodes;
};

/// A `not_replica` refusal: renders as `make_error(errc::not_replica,
/// sentence)` does, and carries `list` for `list_of_refusal`.
caf::error make_not_replica(std::string sentence, refusing_list list);

/// The list `err` names when it is a `not_replica` refusal that carries one.
std::optional<refusing_list> list_of_refusal(const caf::error& err);

/// A `lists_not_counted` refusal: renders as `make_error(errc::
/// lists_not_counted, sentence)` does, and carries `lists` (each one's
/// nodes, "host:port", in list order) for `uncounted_lists_of`.
caf::error make_lists_not_counted(std::string sentence,
                                  std::vector<std::vector<std::string>> lists);

/// The lists `err` names when it is a `lists_not_counted` refusal.
std::optional<std::vector<std::vector<std::string>>>
uncounted_lists_of(const caf::error& err);

/// Renders a coalesce error for `actor_system_config::add_error_category`.
std::string render_errc(uint8_t code, caf::atom_value, const caf::message& ctx);

} // namespace coalesce
