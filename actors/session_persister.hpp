#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/session.hpp>
#include <coalesce/messages/session_persister_interface.hpp>
#include <coalesce/storage/session_store.hpp>

/// The session persister: applications keep live sessions in memory and ask
/// it to make them durable.
///
/// Guarantees:
/// - Many persists of one session cost one write: persists that arrive while
///   a write of the session runs merge into the next one, which carries all
///   their update rows once and the snapshot the handle answers when that
///   write starts. Writes of one session never overlap; the newest state is
///   the one that lands last.
/// - A superseded handle (a newer one was registered) never writes its own
///   state: its persists are written from the newest live handle, or refused
///   with errc::handle_superseded. A persist whose handle died is written
///   from the newest live handle of the session, or refused with
///   errc::handle_gone.
/// - A deleted session never comes back: a delete drops the queued persists
///   (errc::session_deleted), waits for the running write, erases the
///   session in storage, and refuses later persists through every handle
///   registered before it and the handle it names. A session re-created
///   under the same id afterwards (a newly registered handle) persists
///   normally, after the delete.
/// - A persist is answered once the write covering it is done, written with
///   the database's durability, or with the error that ended it. A failed
///   write is kept (`unflushed` answers true) and retried by the session's
///   next write, by `waitidle` (once) and by `flushall`.
/// - `exclusive` answers a lease once the persists queued before it are
///   written; the session's writes wait until `release` or the holder dies.
/// - Bad input (an empty session id or one over 255 bytes, a payload over
///   `max_update`, an update without an id, a negative `flushall` limit) is
///   refused with errc::invalid_request and changes nothing. A snapshot over
///   `max_blob`, not a string, or not answered within `snapshot_timeout`
///   fails that write like a storage failure.
/// - Actors: the persister keeps the registry (session_registry.hpp) and
///   routes; one writer actor per session with work runs its queue
///   (session_queue.hpp) and retires when idle; every RocksDB call goes to
///   one of `io_workers` detached I/O actors, always the same one for a
///   session. Writers never block. Every request parked when an actor stops
///   is answered with errc::stopped_before_answer.
/// - Store-side fencing: every write carries its handle's generation and
///   storage refuses a lower one than it holds (errc::stale_generation); a
///   delete leaves a tombstone above every generation in use. The persister
///   learns a session's stored generation (through its I/O actor) before it
///   first registers, resolves or deletes it: after a restart registers
///   continue from the stored generation plus one.
/// - Group commit: each I/O actor writes everything that reached it while
///   it wrote the previous group as one WriteBatch with one fsync (see
///   session_io_actor); `stats` counts groups and fsyncs.
///
/// What a crash can lose: queued persists whose callers were not answered.
/// An answered persist survives a process crash, and with durability
/// `synced` a power loss.
namespace coalesce {

// What the persister, its writers and its I/O actors say to each other.
using resolve_atom = caf::atom_constant<caf::atom("resolve")>;
using written_atom = caf::atom_constant<caf::atom("written")>;
using retire_atom = caf::atom_constant<caf::atom("retire")>;
using barrier_atom = caf::atom_constant<caf::atom("barrier")>;
using erase_atom = caf::atom_constant<caf::atom("erase")>;
using stored_generation_atom = caf::atom_constant<caf::atom("storedgen")>;

struct session_persister_options {
  /// Largest snapshot blob, in bytes (16 MiB).
  std::size_t max_blob = 16 * 1024 * 1024;
  /// Largest update payload, in bytes (1 MiB).
  std::size_t max_update = 1024 * 1024;
  /// Detached I/O actors every RocksDB call of the persister goes through.
  std::size_t io_workers = 2;
  /// How long a handle may take to answer a snapshot request.
  caf::timespan snapshot_timeout = std::chrono::seconds{5};

  /// Registers `persister-max-blob`, `persister-max-update`,
  /// `persister-io-workers`, `persister-snapshot-timeout`.
  void add_to(caf::config_option_adder& adder);

  /// Empty when valid, else one sentence naming the key as `GROUP.KEY`.
  std::string validate(const std::string& group = "coalesce") const;
};

/// A session I/O actor: blocking RocksDB calls, through guarded_write.
///
/// Group commit: a write is not written when it arrives but appended to
/// the pending group; the first write of a group sends the actor `commit`,
/// which lands behind every message that already arrived, so a group is
/// everything that reached the actor while the previous group was written.
/// A group is one WriteBatch and one fsync; each write in it is checked
/// against its session's stored generation on its own (a stale one fails
/// alone), and a failure of the batch fails every write it carried. An
/// erase, a load or a generation read first commits the pending group, so
/// they see every write that arrived before them.
///
/// Fencing holds because the persister sends every call of one session to
/// the same I/O actor, and an actor handles one message at a time: the
/// check of a session's stored generation and the write after it never
/// race with another write of that session.
using session_io_actor = caf::typed_actor<
  caf::replies_to<write_atom, storage::session_write>::with<ok_atom>,
  caf::reacts_to<commit_atom>,
  /// Erases the session, leaving a tombstone of the given generation.
  caf::replies_to<erase_atom, std::string, uint64_t>::with<ok_atom>,
  caf::replies_to<load_atom, std::string>::with<session_record>,
  /// Whether anything is stored for the session, and its generation.
  caf::replies_to<stored_generation_atom, std::string>::with<bool, uint64_t>,
  /// Groups written and fsyncs issued so far.
  caf::replies_to<stats_atom>::with<uint64_t, uint64_t>>;

struct session_io_state;

session_io_actor::behavior_type
session_io_worker(session_io_actor::stateful_pointer<session_io_state> self,
                  std::shared_ptr<storage::database> db);

/// What a writer tells the persister after each job.
struct write_report {
  /// Storage was asked to write (so `ok` decides the failed state).
  bool attempted = false;
  bool ok = false;
  /// The session was erased.
  bool erased = false;
  /// The handle the write was made from.
  session_handle_actor source;
  /// Persist requests answered by this job.
  uint64_t settled = 0;
  uint64_t rows = 0;
  uint64_t removed = 0;
  bool snapshot_asked = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, write_report& x) {
  return f(x.attempted, x.ok, x.erased, x.source, x.settled, x.rows,
           x.removed, x.snapshot_asked);
}

/// The persister: the client interface plus what its writers tell it.
using session_persister_actor = session_persister_interface::extend<
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

/// Spawns the persister (scheduled) over the given I/O actors. Tests pass
/// I/O actors spawned as scheduled actors, for the test coordinator.
session_persister_actor
spawn_session_persister(caf::actor_system& sys,
                        std::vector<session_io_actor> io,
                        session_persister_options options);

/// The persister with its I/O actors, as production runs them.
struct session_persister_actors {
  session_persister_actor persister;
  std::vector<session_io_actor> io;
};

/// Spawns `options.io_workers` detached I/O actors over `db` and the
/// persister on top. The caller stops the I/O actors after the persister.
session_persister_actors spawn_session_persister_actors(caf::actor_system& sys,
                                          std::shared_ptr<storage::database> db,
                                          session_persister_options options);

/// The same with the I/O actors scheduled (tests).
session_persister_actors
spawn_persister_service_scheduled(caf::actor_system& sys,
                                  std::shared_ptr<storage::database> db,
                                  session_persister_options options);

} // namespace coalesce
