#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <coalesce/messages/node_interface.hpp>

/// Which key a request is about, so that a cluster routes it to one node:
/// a chat's secrets by the chat, a session by its id, a room's timeline and
/// its backfills by the room. One definition for the client that routes and
/// the node's gateway that refuses a key it does not own.
namespace coalesce {

enum class key_kind : uint8_t {
  chat = 0,
  session = 1,
  room = 2,
};

/// A key of a request. `value` views into the request, which must outlive
/// it.
struct routing_key {
  key_kind kind;
  std::string_view value;
};

/// "chat", "session" or "room".
inline const char* to_string(key_kind x) {
  switch (x) {
    case key_kind::chat:
      return "chat";
    case key_kind::session:
      return "session";
    default:
      return "room";
  }
}

/// "room R", "chat C", "session S": how an error names a key.
inline std::string describe(const routing_key& x) {
  return std::string{to_string(x.kind)} + " " + std::string{x.value};
}

using routing_keys_t = std::vector<routing_key>;

inline routing_keys_t routing_keys(queue_atom,
                                   const std::vector<secret_entry>& xs) {
  routing_keys_t result;
  result.reserve(xs.size());
  for (const auto& x : xs)
    result.push_back({key_kind::chat, x.chat});
  return result;
}

inline routing_keys_t routing_keys(queue_atom, const secret_entry& x) {
  return {{key_kind::chat, x.chat}};
}

inline routing_keys_t routing_keys(lookup_atom, const secret_key& x) {
  return {{key_kind::chat, x.chat}};
}

inline routing_keys_t routing_keys(lookup_atom,
                                   const std::vector<secret_key>& xs) {
  routing_keys_t result;
  result.reserve(xs.size());
  for (const auto& x : xs)
    result.push_back({key_kind::chat, x.chat});
  return result;
}

inline routing_keys_t routing_keys(append_atom, const std::string& room,
                                   const std::vector<timeline_event>&) {
  return {{key_kind::room, room}};
}

/// A pager's requests (a scheduler on another node paging this node's
/// timeline, coalesce.scheduler-remote-pager): by the room, like its appends.
inline routing_keys_t routing_keys(page_atom, const std::string& room,
                                   uint32_t) {
  return {{key_kind::room, room}};
}

inline routing_keys_t routing_keys(commit_atom, const std::string& room,
                                   const page_cursor&) {
  return {{key_kind::room, room}};
}

inline routing_keys_t routing_keys(enqueue_atom, const backfill_request& x) {
  return {{key_kind::room, x.room}};
}

/// The persister's requests that name their session first.
template <class Atom>
constexpr bool names_session_first
  = std::is_same<Atom, register_atom>::value
    || std::is_same<Atom, persist_atom>::value
    || std::is_same<Atom, delete_atom>::value
    || std::is_same<Atom, is_deleted_atom>::value
    || std::is_same<Atom, unflushed_atom>::value
    || std::is_same<Atom, load_atom>::value
    || std::is_same<Atom, wait_idle_atom>::value
    || std::is_same<Atom, exclusive_atom>::value;

template <class Atom, class... Rest>
std::enable_if_t<names_session_first<Atom>, routing_keys_t>
routing_keys(Atom, const std::string& session, const Rest&...) {
  return {{key_kind::session, session}};
}

/// Requests that carry no key: they concern every key a node holds (flush,
/// flush_all, stats, shutdown) or something issued by one node (a backfill
/// ticket, a session lease), which exists only where it was issued.
template <class Atom>
constexpr bool carries_no_key
  = std::is_same<Atom, flush_atom>::value
    || std::is_same<Atom, flush_all_atom>::value
    || std::is_same<Atom, await_atom>::value
    || std::is_same<Atom, cancel_atom>::value
    || std::is_same<Atom, detach_atom>::value
    || std::is_same<Atom, release_atom>::value
    || std::is_same<Atom, stats_atom>::value
    || std::is_same<Atom, shutdown_atom>::value;

/// A new request of `node_actor` that is in neither list fails to compile
/// where it is routed, rather than being served by any node.
template <class Atom, class... Args>
std::enable_if_t<carries_no_key<Atom>, routing_keys_t>
routing_keys(Atom, const Args&...) {
  return {};
}

} // namespace coalesce
