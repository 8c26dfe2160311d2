#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/backfill_scheduler_interface.hpp>
#include <coalesce/messages/named_fields.hpp>
#include <coalesce/messages/secret_buffer_interface.hpp>
#include <coalesce/messages/secret_buffer_stats.hpp>
#include <coalesce/messages/secret_entry.hpp>
#include <coalesce/messages/session.hpp>
#include <coalesce/messages/session_persister_interface.hpp>
#include <coalesce/messages/timeline_interface.hpp>

/// What a node shows the world: the services it hosts, each listed here
/// once. This file is the one shared place in messages/ a new service names
/// itself in: its requests in `node_actor`, its member of `service_handles`
/// and of `node_stats`, its entry in `service_entries`, and its message types
/// in `for_each_message_type`, and any request of its that a shutting-down
/// node still serves in `served_while_shutting_down`. Everything that fronts several services (the
/// gateway's forwarders and stats, `connect_services`, the registration of
/// message types, the CLI's stats JSON and the node's stats line) is derived
/// from these lists.
namespace coalesce {

/// The typed handles of the services. In process they point at the
/// services themselves, remotely at the node's gateway, which forwards.
struct service_handles {
  secret_buffer_requests secret_buffer;
  timeline_requests timeline;
  backfill_scheduler_requests backfill_scheduler;
  session_persister_requests session_persister;
};

/// What `stats` answers for a whole node: its own counters and those of each
/// service it hosts.
struct node_stats {
  /// Seconds since the node started serving.
  int64_t uptime_s = 0;
  /// Whether the node received SIGINT or SIGTERM and refuses new requests.
  bool shutting_down = false;
  /// Requests the node refused because it was shutting down.
  uint64_t refused_requests = 0;
  secret_buffer_stats secret_buffer;
  backfill_scheduler_stats backfill_scheduler;
  session_persister_stats session_persister;
};

/// Its fields with their names, in wire order (see named_fields.hpp).
template <class F>
auto with_named_fields(node_stats& x, F&& f) {
  return f(field("uptime_s", x.uptime_s),
           field("shutting_down", x.shutting_down),
           field("refused_requests", x.refused_requests),
           field("secrets", x.secret_buffer), field("scheduler", x.backfill_scheduler),
           field("sessions", x.session_persister));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_stats& x) {
  return with_named_fields(x, [&](auto... fields) {
    return inspect_named_fields(f, caf::meta::type_name("node_stats"),
                                fields...);
  });
}

/// The interface of the one actor a node publishes (its gateway, see
/// coalesce/actors/node_gateway.hpp): every service's requests, plus the
/// node's own stats and shutdown.
using node_actor = secret_buffer_requests::extend_with<
  timeline_requests, backfill_scheduler_requests, session_persister_requests>::
  extend<caf::replies_to<stats_atom>::with<node_stats>,
         /// Accepted only from the node itself: refuse later requests.
         caf::replies_to<shutdown_atom>::with<ok_atom>>;

/// A service as the gateway sees it: where its handle is, and which member
/// of `node_stats` its own `stats` answer fills (`nullptr`: it has none).
template <class Handle, class StatsMember>
struct service_entry {
  Handle* handle;
  StatsMember stats;
};

template <class Handle, class Stats>
service_entry<Handle, Stats node_stats::*>
entry(Handle& handle, Stats node_stats::*stats) {
  return {&handle, stats};
}

template <class Handle>
service_entry<Handle, std::nullptr_t> entry(Handle& handle) {
  return {&handle, nullptr};
}

/// One entry per service, as a tuple; `handles` may be const.
template <class Handles>
auto service_entries(Handles& handles) {
  return std::make_tuple(entry(handles.secret_buffer, &node_stats::secret_buffer),
                         entry(handles.timeline),
                         entry(handles.backfill_scheduler, &node_stats::backfill_scheduler),
                         entry(handles.session_persister, &node_stats::session_persister));
}

/// Requests a shutting-down node still serves: they concern work already
/// admitted (awaiting, cancelling or leaving a backfill run; releasing a
/// session lease, which the shutdown's flush may wait for). Every other
/// request is refused.
template <class Atom>
constexpr bool served_while_shutting_down
  = std::is_same<Atom, await_atom>::value
    || std::is_same<Atom, cancel_atom>::value
    || std::is_same<Atom, detach_atom>::value
    || std::is_same<Atom, release_atom>::value;

/// A message type and the name it crosses nodes under.
template <class T>
struct message_type {
  using type = T;
  const char* name;
};

/// Calls `f(message_type<T>{name})` for every type the services' messages
/// carry (registration.cpp registers them; `std::vector<T>` comes along).
template <class F>
void for_each_message_type(F&& f) {
  f(message_type<secret_key>{"coalesce.secret_key"});
  f(message_type<secret_entry>{"coalesce.secret_entry"});
  f(message_type<secret_write>{"coalesce.secret_write"});
  f(message_type<secret_lookup>{"coalesce.secret_lookup"});
  f(message_type<stored_secret>{"coalesce.stored_secret"});
  f(message_type<secret_buffer_stats>{"coalesce.secret_buffer_stats"});
  f(message_type<timeline_event>{"coalesce.timeline_event"});
  f(message_type<page_cursor>{"coalesce.page_cursor"});
  f(message_type<timeline_page>{"coalesce.timeline_page"});
  f(message_type<stop_condition>{"coalesce.stop_condition"});
  f(message_type<backfill_request>{"coalesce.backfill_request"});
  f(message_type<backfill_ticket>{"coalesce.backfill_ticket"});
  f(message_type<backfill_result>{"coalesce.backfill_result"});
  f(message_type<backfill_scheduler_stats>{"coalesce.scheduler_stats"});
  f(message_type<session_update>{"coalesce.session_update"});
  f(message_type<session_record>{"coalesce.session_record"});
  f(message_type<session_lease>{"coalesce.session_lease"});
  f(message_type<session_persister_stats>{"coalesce.persister_stats"});
  f(message_type<session_handle_actor>{"coalesce.session_handle"});
  f(message_type<node_stats>{"coalesce.node_stats"});
}

} // namespace coalesce
