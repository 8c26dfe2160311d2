#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/session_persister.hpp>
#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/session.hpp>
#include <coalesce/messages/session_persister_interface.hpp>
#include <coalesce/storage/session_store.hpp>

/// What the session persister, its per-session writers and its I/O actors
/// say to each other: the atoms only they use, the persister's resolved
/// persist, the writer's report, and the typed interface of each of the
/// three actors. Internal (not installed, see `coalesce_internal_headers` in
/// CMakeLists.txt): clients hold the persister as `session_persister_actor`
/// (coalesce/actors/session_persister.hpp, whose top states the guarantees)
/// and never send any of this.
///
/// Who sends what:
/// - persister -> writer: `persist` with a `write_order` (a client's,
///   delegated, or its own retry of a failed write), `delete` with the
///   tombstone's generation, `exclusive` and `release` (delegated),
///   `barrier` (its own), `restand` when a register changed where the
///   queued writes come from, `retire` when the writer may go; the writer
///   counts each one but `retire` (retirement below).
/// - writer -> persister: `written` after every job and whenever it became
///   idle, `release` with the session when a lease holder died.
/// - writer -> I/O actor: `write` and `erase`; persister -> I/O actor:
///   `storedgen`, `claim`, `load` (delegated from a client), `purge` and
///   `stats`. (The answer to a `write` of a group that waits for its WAL
///   sync comes from the I/O actor's syncer, which the write was delegated
///   to: session_io_worker.hpp, "Pipelined sync".)
///
/// A solo persist is five messages to its answer: client -> persister ->
/// writer -> I/O actor -> writer -> client. The persister resolves the
/// source and generation itself (no round trip), a persist that carries
/// its snapshot needs no snapshot request, and the I/O actor writes its
/// group as soon as its mailbox is empty (no message to itself).
///
/// Idleness and retirement: a writer's `written` says whether it is idle
/// and how many messages it received; the persister takes it for idle only
/// when that equals the number it sent (so nothing is on its way to it),
/// keeps it warm until a request wakes it, and sends `retire` to the one
/// idle longest when more than `idle_writers` are idle, forgetting it at
/// once: no message to a retiring writer is lost.
///
/// Not wire format: none of these types crosses nodes, and none is in the
/// type registry (messages/registration.cpp).
namespace coalesce {

// -- atoms ------------------------------------------------------------------

/// writer -> persister, after every job and when idle: its `write_report`.
using written_atom = caf::atom_constant<caf::atom("written")>;
/// persister -> writer: it may go (it received everything sent to it).
using retire_atom = caf::atom_constant<caf::atom("retire")>;
/// persister -> writer: answered once every job queued before it is done,
/// with the result of the write before it (`waitidle`, `flushall`).
using barrier_atom = caf::atom_constant<caf::atom("barrier")>;
/// persister -> writer: where the queued writes come from changed.
using restand_atom = caf::atom_constant<caf::atom("restand")>;
/// writer -> I/O actor: erase a session, leaving a tombstone or not.
using erase_atom = caf::atom_constant<caf::atom("erase")>;
/// persister -> I/O actor: remove a tombstone that fences nothing any more.
using purge_atom = caf::atom_constant<caf::atom("purge")>;
/// persister -> I/O actor: what storage holds for a session (fencing).
using stored_generation_atom = caf::atom_constant<caf::atom("storedgen")>;

// -- the persister's resolved persist ----------------------------------------

/// A persist as the persister hands it to the writer, resolved: where to
/// write from and with which generation, so the writer asks nothing.
struct write_order {
  /// The handle the write asks for its snapshot (when it carries none).
  session_handle_actor source;
  /// The generation the write carries, unless `generation_known` is false:
  /// then the one storage holds (session_write::generation_from_storage).
  uint64_t generation = 0;
  bool generation_known = false;
  /// The snapshot the client sent with the persist, when it came from
  /// `source` itself.
  bool has_snapshot = false;
  std::string snapshot;
  std::vector<session_update> updates;
  std::vector<std::string> removed;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_order& x) {
  return f(x.source, x.generation, x.generation_known, x.has_snapshot,
           x.snapshot, x.updates, x.removed);
}

// -- the writer's report -----------------------------------------------------

/// What a writer tells the persister after each job (and after a delete or a
/// `restand` dropped queued persists, and when it became idle): enough for
/// the persister's stats, the registry's failed state and retirement,
/// nothing the writer keeps.
struct write_report {
  /// A write was attempted: `ok` decides whether the session is marked
  /// failed (false) or written (true). False for erases, barriers, leases
  /// and dropped persists; those change no failed state through this flag.
  bool attempted = false;
  /// The job ended without error (meaningful only when `attempted`).
  bool ok = false;
  /// An erase job succeeded: the session is no longer failed.
  bool erased = false;
  /// The handle the write was made from; the persister retries a failed
  /// session from it. Null unless `attempted`.
  session_handle_actor source;
  /// Persist requests this job answered (or a delete or `restand` dropped):
  /// taken off the stats' `queued_requests`.
  uint64_t settled = 0;
  /// Update rows written; 0 when the write failed (they are kept for the
  /// next write and counted when that one lands).
  uint64_t rows = 0;
  /// Row ids removed in storage; 0 when the write failed, as `rows`.
  uint64_t removed = 0;
  /// The writer asked the handle for a snapshot (the stats'
  /// `snapshot_requests`), whether or not it answered.
  bool snapshot_asked = false;
  /// Nothing is queued, running, kept or held: the writer may retire.
  bool idle = false;
  /// Messages the writer received so far (retirement).
  uint64_t received = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_report& x) {
  return f(x.attempted, x.ok, x.erased, x.source, x.settled, x.rows,
           x.removed, x.snapshot_asked, x.idle, x.received);
}

// -- the three interfaces ----------------------------------------------------

/// A session I/O actor: every RocksDB call of the persister, through
/// guarded_write; one of `io_workers`, always the same one for a session.
/// Its contract (group commit, fencing) is at the top of
/// session_io_worker.hpp.
using session_io_actor = caf::typed_actor<
  /// Joins the pending group; answered once the group is written.
  caf::replies_to<write_atom, storage::session_write>::with<ok_atom>,
  /// Erases the session, leaving a tombstone of the given generation when
  /// the flag is set.
  caf::replies_to<erase_atom, std::string, uint64_t, bool>::with<ok_atom>,
  /// Removes the session's tombstone if it is one of at most this
  /// generation.
  caf::reacts_to<purge_atom, std::string, uint64_t>,
  caf::replies_to<load_atom, std::string>::with<session_record>,
  /// Whether anything is stored for the session, its generation and who
  /// claimed that generation (empty: no claim did).
  caf::replies_to<stored_generation_atom, std::string>::with<bool, uint64_t,
                                                            std::string>,
  /// Claims a generation for a handle (its address as text) before the
  /// register is answered (`session_persister_options::claim_generations`):
  /// refused errc::stale_generation when storage holds a higher one or
  /// another handle claimed it.
  caf::replies_to<claim_atom, std::string, uint64_t, std::string>::with<
    ok_atom>,
  /// Groups written and fsyncs issued so far.
  caf::replies_to<stats_atom>::with<uint64_t, uint64_t>>;

/// An I/O actor as a clustered node runs it: also a replica of the sessions
/// it writes, for their coordinators (coalesce/node/session_replicas.hpp),
/// this node's and its peers'. Replica deltas join the pending group like
/// writes; every other replica request commits the group first.
using session_replica_io_actor
  = session_io_actor::extend_with<session_replica_requests>::extend<
    /// Forgets the session when it is still held as `session_version`
    /// says (coalesce/storage/session_store.hpp, `replica_drop`).
    caf::replies_to<replica_atom, drop_atom, std::string,
                    session_version>::with<bool>>;

/// The writer of one session: runs the session's queue; every message comes
/// from the persister (its own requests or the clients' it delegated).
using session_writer_actor = caf::typed_actor<
  /// A persist, resolved: merged into the queued write; answered when the
  /// write carrying it ends.
  caf::replies_to<persist_atom, write_order>::with<ok_atom>,
  /// Deletes the session, leaving a tombstone of the given generation when
  /// the flag is set.
  caf::replies_to<delete_atom, uint64_t, bool>::with<ok_atom>,
  caf::replies_to<barrier_atom>::with<ok_atom>,
  /// A client's `exclusive` with the lease the persister issued for it.
  caf::replies_to<exclusive_atom, session_lease>::with<session_lease>,
  caf::replies_to<release_atom, session_lease>::with<ok_atom>,
  /// The queued writes come from this source with this generation now
  /// (`generation_known` false: storage's), or, with an error, may not be
  /// written at all.
  caf::reacts_to<restand_atom, caf::error, session_handle_actor, uint64_t,
                 bool>,
  /// The persister let the writer go.
  caf::reacts_to<retire_atom>>;

/// Every message the persister handles: the client interface plus what its
/// writers and its own timer tell it. Clients hold the narrower
/// `session_persister_actor`; the persister hands this one to its writers.
using session_persister_full_actor = session_persister_interface::extend<
  caf::reacts_to<written_atom, std::string, write_report>,
  /// A writer released a lease because its holder died.
  caf::reacts_to<release_atom, std::string, session_lease>,
  /// The deadline of flush N passed.
  caf::reacts_to<caf::timeout_atom, uint64_t>>;

// -- spawning over other I/O actors --------------------------------------------

/// The persister alone over I/O actors the caller spawned and stops after
/// it: a clustered node's, over its sessions' coordinators
/// (coalesce/node/session_replicas.hpp).
session_persister_actor
spawn_session_persister_over(caf::actor_system& sys,
                             std::vector<session_io_actor> io,
                             session_persister_options options);

} // namespace coalesce
