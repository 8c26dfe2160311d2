#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/session.hpp>
#include <coalesce/messages/session_persister_interface.hpp>
#include <coalesce/storage/session_store.hpp>

/// What the session persister, its per-session writers and its I/O actors
/// say to each other: the atoms only they use, the writer's report, and
/// the typed interface of each of the three actors. Internal (not
/// installed, see `coalesce_internal_headers` in CMakeLists.txt): clients
/// hold the persister as `session_persister_actor`
/// (coalesce/actors/session_persister.hpp, whose top states the
/// guarantees) and never send any of this.
///
/// Who sends what:
/// - persister -> writer: `persist` (a client's, delegated, or its own retry
///   of a failed write), `delete` with the tombstone's generation,
///   `exclusive` and `release` (delegated), `barrier` (its own); the writer
///   counts each one (retirement below).
/// - writer -> persister: `resolve` when a write starts, `written` after
///   every job, `retire` when idle, `release` with the session when a lease
///   holder died.
/// - writer -> I/O actor: `write` and `erase`; persister -> I/O actor:
///   `storedgen`, `load` (delegated from a client) and `stats`.
/// - to itself: the I/O actor `commit` (the pending group), the persister
///   `timeout` with a flush's id (its limit passed).
///
/// Retirement: a writer with nothing to do asks `retire` with the number
/// of messages it received; the persister says yes only when that equals
/// the number it sent, so no message to a retiring writer is lost.
///
/// Not wire format: none of these types crosses nodes, and none is in the
/// type registry (messages/registration.cpp).
namespace coalesce {

// -- atoms ------------------------------------------------------------------

/// writer -> persister, when a write starts: where to write from, and with
/// which generation.
using resolve_atom = caf::atom_constant<caf::atom("resolve")>;
/// writer -> persister, after every job: its `write_report`.
using written_atom = caf::atom_constant<caf::atom("written")>;
/// writer -> persister, when idle: may the writer stop?
using retire_atom = caf::atom_constant<caf::atom("retire")>;
/// persister -> writer: answered once every job queued before it is done,
/// with the result of the write before it (`waitidle`, `flushall`).
using barrier_atom = caf::atom_constant<caf::atom("barrier")>;
/// writer -> I/O actor: erase a session, leaving a tombstone.
using erase_atom = caf::atom_constant<caf::atom("erase")>;
/// persister -> I/O actor: what storage holds for a session (fencing).
using stored_generation_atom = caf::atom_constant<caf::atom("storedgen")>;

// -- the writer's report -----------------------------------------------------

/// What a writer tells the persister after each job (and after a delete
/// dropped queued persists): enough for the persister's stats and for the
/// registry's failed state, nothing the writer keeps.
struct write_report {
  /// The write got a source and a generation from `resolve`, so it counts
  /// as an attempt: `ok` decides whether the session is marked failed
  /// (false) or written (true). False for erases, barriers, dropped
  /// persists and writes that `resolve` refused; those change no failed
  /// state through this flag.
  bool attempted = false;
  /// The job ended without error (meaningful only when `attempted`).
  bool ok = false;
  /// An erase job succeeded: storage holds the session's tombstone, so the
  /// session is no longer failed.
  bool erased = false;
  /// The handle the write was made from (as `resolve` answered); the
  /// persister retries a failed session from it. Null unless `attempted`.
  session_handle_actor source;
  /// Persist requests this job answered (or the delete dropped): taken off
  /// the stats' `queued_requests`.
  uint64_t settled = 0;
  /// Update rows written; 0 when the write failed (they are kept for the
  /// next write and counted when that one lands).
  uint64_t rows = 0;
  /// Row ids removed in storage; 0 when the write failed, as `rows`.
  uint64_t removed = 0;
  /// The writer asked the handle for a snapshot (the stats'
  /// `snapshot_requests`), whether or not it answered.
  bool snapshot_asked = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_report& x) {
  return f(x.attempted, x.ok, x.erased, x.source, x.settled, x.rows,
           x.removed, x.snapshot_asked);
}

// -- the three interfaces ----------------------------------------------------

/// A session I/O actor: every RocksDB call of the persister, through
/// guarded_write; one of `io_workers`, always the same one for a session.
/// Its contract (group commit, fencing) is at the top of
/// session_io_worker.hpp.
using session_io_actor = caf::typed_actor<
  /// Joins the pending group; answered once the group is written.
  caf::replies_to<write_atom, storage::session_write>::with<ok_atom>,
  /// Sent by the actor to itself: writes the pending group.
  caf::reacts_to<commit_atom>,
  /// Erases the session, leaving a tombstone of the given generation.
  caf::replies_to<erase_atom, std::string, uint64_t>::with<ok_atom>,
  caf::replies_to<load_atom, std::string>::with<session_record>,
  /// Whether anything is stored for the session, and its generation.
  caf::replies_to<stored_generation_atom, std::string>::with<bool, uint64_t>,
  /// Groups written and fsyncs issued so far.
  caf::replies_to<stats_atom>::with<uint64_t, uint64_t>>;

/// The writer of one session: runs the session's queue; every message comes
/// from the persister (its own requests or the clients' it delegated),
/// counted in the writer's `received`.
using session_writer_actor = caf::typed_actor<
  /// persist(source, new update rows, ids of rows to remove): merged into
  /// the queued write; answered when the write carrying it ends.
  caf::replies_to<persist_atom, session_handle_actor,
                  std::vector<session_update>,
                  std::vector<std::string>>::with<ok_atom>,
  /// Deletes the session, leaving a tombstone of the given generation.
  caf::replies_to<delete_atom, uint64_t>::with<ok_atom>,
  caf::replies_to<barrier_atom>::with<ok_atom>,
  /// A client's `exclusive` with the lease the persister issued for it.
  caf::replies_to<exclusive_atom, session_lease>::with<session_lease>,
  caf::replies_to<release_atom, session_lease>::with<ok_atom>>;

/// Every message the persister handles: the client interface plus what its
/// writers and its own timer tell it. Clients hold the narrower
/// `session_persister_actor`; the persister hands this one to its writers.
using session_persister_full_actor = session_persister_interface::extend<
  /// A writer's question when a write starts: where to write from, and
  /// the generation the write carries.
  caf::replies_to<resolve_atom, std::string, session_handle_actor>::with<
    session_handle_actor, uint64_t>,
  caf::reacts_to<written_atom, std::string, write_report>,
  /// A writer with nothing to do: may it go (after `received` messages)?
  caf::replies_to<retire_atom, std::string, uint64_t>::with<bool>,
  /// A writer released a lease because its holder died.
  caf::reacts_to<release_atom, std::string, session_lease>,
  /// The deadline of flush N passed.
  caf::reacts_to<caf::timeout_atom, uint64_t>>;

} // namespace coalesce
