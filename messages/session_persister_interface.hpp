#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/service_descriptor.hpp>
#include <coalesce/messages/session.hpp>

/// The session persister's interface for clients, in process or on another
/// node (the contract: coalesce/actors/session_persister.hpp), and its
/// descriptor. A client compiles against this header only.
namespace coalesce {

// The persister's verbs (the shared ones are in atoms.hpp).
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using register_atom = caf::atom_constant<caf::atom("register")>;
using persist_atom = caf::atom_constant<caf::atom("persist")>;
using delete_atom = caf::atom_constant<caf::atom("delete")>;
using is_deleted_atom = caf::atom_constant<caf::atom("isdeleted")>;
using unflushed_atom = caf::atom_constant<caf::atom("unflushed")>;
using load_atom = caf::atom_constant<caf::atom("load")>;
using wait_idle_atom = caf::atom_constant<caf::atom("waitidle")>;
using flush_all_atom = caf::atom_constant<caf::atom("flushall")>;
using exclusive_atom = caf::atom_constant<caf::atom("exclusive")>;
using release_atom = caf::atom_constant<caf::atom("release")>;

/// A live session: answers `snapshot` with the session's newest blob. The
/// persister asks when a write starts, not when the persist was sent. May
/// be the session actor itself or a small actor wrapping it, on any node.
using session_handle_actor
  = caf::typed_actor<caf::replies_to<snapshot_atom>::with<std::string>>;

/// The requests a node's gateway forwards to the persister.
using session_persister_requests = caf::typed_actor<
  /// Makes `handle` the session's current handle; answers its generation
  /// (errc::session_deleted for a handle a delete retired).
  caf::replies_to<register_atom, std::string, session_handle_actor>::with<
    uint64_t>,
  /// persist(session, handle, new update rows, ids of rows to remove):
  /// answered once the write covering it is done, or with the error that
  /// ended it.
  caf::replies_to<persist_atom, std::string, session_handle_actor,
                  std::vector<session_update>,
                  std::vector<std::string>>::with<ok_atom>,
  /// persist(session, handle, snapshot, rows, removed): the same, carrying
  /// the handle's snapshot of the moment. A write whose newest persist
  /// carried one from its source writes it as is, without asking the
  /// handle; otherwise (a later persist carried none, or the handle was
  /// superseded) the write asks its source.
  caf::replies_to<persist_atom, std::string, session_handle_actor,
                  session_snapshot, std::vector<session_update>,
                  std::vector<std::string>>::with<ok_atom>,
  /// Deletes the session, retiring every handle registered so far.
  caf::replies_to<delete_atom, std::string>::with<ok_atom>,
  /// The same, also tombstoning `handle` (live, maybe never registered).
  caf::replies_to<delete_atom, std::string, session_handle_actor>::with<
    ok_atom>,
  /// Whether `handle` belongs to a deleted incarnation of the session.
  caf::replies_to<is_deleted_atom, std::string, session_handle_actor>::with<
    bool>,
  /// Whether the session has writes queued or running, or its last write
  /// failed.
  caf::replies_to<unflushed_atom, std::string>::with<bool>,
  caf::replies_to<load_atom, std::string>::with<session_record>,
  /// Answered once the session's queued writes are done.
  caf::replies_to<wait_idle_atom, std::string>::with<ok_atom>,
  /// Writes everything queued, retries failed sessions; answers how many
  /// sessions are still not written when done or when the limit passed.
  caf::replies_to<flush_all_atom, caf::timespan>::with<uint64_t>,
  /// Answers a lease once no write of the session runs; its writes wait
  /// until `release` or the holder's death.
  caf::replies_to<exclusive_atom, std::string>::with<session_lease>,
  caf::replies_to<release_atom, session_lease>::with<ok_atom>>;

/// Everything a client may send the persister itself.
using session_persister_interface = session_persister_requests::extend<
  caf::replies_to<stats_atom>::with<session_persister_stats>>;

/// The persister as a node shows it (what each member is for:
/// coalesce/messages/service_descriptor.hpp).
struct session_persister_descriptor {
  using requests = session_persister_requests;

  struct handle_member {
    session_persister_requests session_persister;
  };
  static constexpr auto handle = &handle_member::session_persister;

  struct stats_member {
    session_persister_stats session_persister;
  };
  static constexpr auto stats = &stats_member::session_persister;
  static constexpr const char* stats_name = "sessions";

  /// The work at hand and the sessions failing at the moment.
  using gauges = members<&session_persister_stats::active_writers,
                         &session_persister_stats::queued_requests,
                         &session_persister_stats::failed_sessions,
                         &session_persister_stats::idle_writers>;
  using counters = members<&session_persister_stats::writes,
                           &session_persister_stats::rows_written,
                           &session_persister_stats::rows_removed,
                           &session_persister_stats::snapshot_requests,
                           &session_persister_stats::groups,
                           &session_persister_stats::fsyncs>;

  static constexpr auto message_types = type_names(
    message_type<session_update>{"coalesce.session_update"},
    message_type<session_record>{"coalesce.session_record"},
    message_type<session_snapshot>{"coalesce.session_snapshot"},
    message_type<session_lease>{"coalesce.session_lease"},
    message_type<session_persister_stats>{"coalesce.persister_stats"},
    message_type<session_handle_actor>{"coalesce.session_handle"});

  /// A session lives on its id's replicas (the one a request reaches
  /// coordinates it); every request but `flush_all` and `release` names
  /// the id first.
  template <class... Rest>
  static one_key routed_by(register_atom, const std::string& session,
                           const Rest&...) {
    return {key_kind::session, session};
  }

  template <class... Rest>
  static one_key routed_by(persist_atom, const std::string& session,
                           const Rest&...) {
    return {key_kind::session, session};
  }

  template <class... Rest>
  static one_key routed_by(delete_atom, const std::string& session,
                           const Rest&...) {
    return {key_kind::session, session};
  }

  template <class... Rest>
  static one_key routed_by(is_deleted_atom, const std::string& session,
                           const Rest&...) {
    return {key_kind::session, session};
  }

  static one_key routed_by(unflushed_atom, const std::string& session) {
    return {key_kind::session, session};
  }

  static one_key routed_by(load_atom, const std::string& session) {
    return {key_kind::session, session};
  }

  static one_key routed_by(wait_idle_atom, const std::string& session) {
    return {key_kind::session, session};
  }

  static one_key routed_by(exclusive_atom, const std::string& session) {
    return {key_kind::session, session};
  }

  static every_node routed_by(flush_all_atom, const caf::timespan&) {
    return {};
  }

  /// A lease exists only on the node that granted it.
  static issuer routed_by(release_atom, const session_lease&) {
    return {};
  }

  using issues = type_list<session_lease>;

  /// Releasing a lease, which the shutdown's flush may wait for.
  using served_while_shutting_down = type_list<release_atom>;
};

} // namespace coalesce
