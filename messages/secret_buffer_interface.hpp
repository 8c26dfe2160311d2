#pragma once

#include <vector>

#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/replica_protocol.hpp>
#include <coalesce/messages/secret_buffer_stats.hpp>
#include <coalesce/messages/secret_entry.hpp>
#include <coalesce/messages/service_descriptor.hpp>

/// The secret buffer's interface for clients, in process or on another node
/// (the contract: coalesce/actors/secret_buffer.hpp), and its descriptor. A
/// client compiles against this header only.
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
  /// A coordinator's copy of captures for this replica (a cluster with
  /// `coalesce.replicas` above 1): queued like `queue`, passed on to no
  /// other node. Each replica request carries the lists its coordinator
  /// counted (`list_stamp`: a node's gateway refuses one that lacks a list
  /// the node counts; a buffer itself ignores it).
  caf::replies_to<replica_atom, std::vector<secret_entry>,
                  list_stamp>::with<ok_atom>,
  /// This replica's own answer to a coordinator's lookup, in key order.
  caf::replies_to<replica_atom, std::vector<secret_key>, list_stamp>::with<
    std::vector<secret_lookup>>,
  /// A coordinator's flush of this replica alone (`flush` on a clustered
  /// node flushes every node).
  caf::replies_to<replica_atom, flush_atom, list_stamp>::with<ok_atom>,
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

/// The secret buffer as a node shows it (what each member is for:
/// coalesce/messages/service_descriptor.hpp).
struct secret_buffer_descriptor {
  using requests = secret_buffer_requests;

  struct handle_member {
    secret_buffer_requests secret_buffer;
  };
  static constexpr auto handle = &handle_member::secret_buffer;

  struct stats_member {
    secret_buffer_stats secret_buffer;
  };
  static constexpr auto stats = &stats_member::secret_buffer;
  static constexpr const char* stats_name = "secrets";

  /// What is held at the moment and the last batch's figures.
  using gauges = members<&secret_buffer_stats::pending,
                         &secret_buffer_stats::waiting_producers,
                         &secret_buffer_stats::held_entries,
                         &secret_buffer_stats::last_batch_entries,
                         &secret_buffer_stats::last_write_latency_us,
                         &secret_buffer_stats::failing_for_ms>;
  using counters = members<&secret_buffer_stats::batches_written,
                           &secret_buffer_stats::entries_written,
                           &secret_buffer_stats::failed_batches,
                           &secret_buffer_stats::force_buffered,
                           &secret_buffer_stats::retries>;

  static constexpr auto message_types = type_names(
    message_type<secret_key>{"coalesce.secret_key"},
    message_type<secret_entry>{"coalesce.secret_entry"},
    message_type<secret_write>{"coalesce.secret_write"},
    message_type<secret_lookup>{"coalesce.secret_lookup"},
    message_type<stored_secret>{"coalesce.stored_secret"},
    message_type<secret_buffer_stats>{"coalesce.secret_buffer_stats"},
    message_type<list_stamp>{"coalesce.list_stamp"});

  /// A chat's secrets live on the chat's replicas; the one a request
  /// reaches coordinates it.
  static one_key routed_by(queue_atom, const secret_entry& x) {
    return {key_kind::chat, x.chat};
  }

  static each_key routed_by(queue_atom, const std::vector<secret_entry>& xs) {
    return each_key::of(key_kind::chat, xs, &secret_entry::chat);
  }

  static one_key routed_by(lookup_atom, const secret_key& x) {
    return {key_kind::chat, x.chat};
  }

  static each_key routed_by(lookup_atom, const std::vector<secret_key>& xs) {
    return each_key::of(key_kind::chat, xs, &secret_key::chat);
  }

  static each_key routed_by(replica_atom,
                            const std::vector<secret_entry>& xs,
                            const list_stamp&) {
    return each_key::of(key_kind::chat, xs, &secret_entry::chat);
  }

  static each_key routed_by(replica_atom, const std::vector<secret_key>& xs,
                            const list_stamp&) {
    return each_key::of(key_kind::chat, xs, &secret_key::chat);
  }

  template <class... Deadline>
  static every_node routed_by(flush_atom, const Deadline&...) {
    return {};
  }
  static every_node routed_by(replica_atom, flush_atom, const list_stamp&) {
    return {};
  }

  using issues = type_list<>;

  /// None: a `queue` or `flush` after the node's shutdown began is refused
  /// (the node's own shutdown seals and flushes the buffer).
  using served_while_shutting_down = type_list<>;
};

} // namespace coalesce
