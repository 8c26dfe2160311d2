#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include <coalesce/messages/session.hpp>
#include <coalesce/messages/session_persister_interface.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// The session persister: applications keep live sessions in memory and ask
/// it to make them durable.
///
/// Guarantees:
/// - Many persists of one session cost one write: persists that arrive while
///   a write of the session runs merge into the next one, which carries all
///   their update rows once and the newest state: the snapshot the newest
///   persist carried, or, when it carried none (or its handle was
///   superseded since), the one the source answers when that write starts.
///   Writes of one session never overlap; the newest state is the one that
///   lands last. Within a merged write the later request wins: a row
///   written again replaces the queued one, a row removed and then written
///   again ends written.
/// - Requests of one session take effect in the order they arrived, even
///   when an earlier one waits for storage's generation.
/// - A superseded handle (a newer one was registered) never writes its own
///   state: its persists are written from the newest live handle, or
///   refused with errc::handle_superseded. Where a queued write comes from
///   is decided again when a register supersedes its handle before it
///   starts. A persist through a handle that died is refused with
///   errc::handle_gone: a dead handle never writes, nor does another on its
///   behalf.
/// - A deleted session never comes back: a delete drops the queued persists
///   (errc::session_deleted), waits for the running write, erases the
///   session in storage, and refuses later persists through every handle
///   registered before it and the handle it names. A session re-created
///   under the same id afterwards (a newly registered handle) persists
///   normally, after the delete.
/// - A persist is answered once the write covering it is done, written with
///   the database's durability, or with the error that ended it. A failed
///   write's rows are kept (`unflushed` answers true) until a write carries
///   them or a delete drops them, and retried by the session's next write,
///   by `waitidle` (once) and by `flushall`, from the failed write's source
///   or, when that died, the session's current handle.
/// - `exclusive` answers a lease once the persists queued before it are
///   written; the session's writes wait until `release` or the holder dies.
///   Releasing a lease still queued takes out that one alone.
/// - Bad input (an empty session id or one over 255 bytes, a payload over
///   `max_update`, an update without an id, a carried snapshot over
///   `max_blob`, a negative `flushall` limit) is refused with
///   errc::invalid_request and changes nothing. A snapshot the handle
///   answers over `max_blob`, not a string, or not within
///   `snapshot_timeout` fails that write like a storage failure.
/// - Actors: the persister keeps the registry (session_registry.hpp, whose
///   top says what it keeps and for how long) and routes; one writer actor
///   per session with work runs its queue (session_queue.hpp) and, once
///   idle, stays warm for the session's next request (`idle_writers` of
///   them; the one idle longest retires); every RocksDB call goes to one of
///   `io_workers` detached I/O actors, always the same one for a session.
///   A solo persist is five messages to its answer
///   (session_persister_protocol.hpp). Writers never block. Every request
///   parked when an actor stops is answered with
///   errc::stopped_before_answer.
/// - Store-side fencing: every write carries its handle's generation and
///   storage refuses a lower one than it holds (errc::stale_generation); a
///   delete moves the session above every generation in use and, while a
///   handle it retired is alive, leaves a tombstone there, removed once the
///   last such handle died. The persister learns a session's stored
///   generation (through its I/O actor) before it first registers or
///   deletes it: after a restart registers continue from the stored
///   generation plus one. A handle the persister has no generation for
///   writes with the one storage holds.
/// - Group commit: each I/O actor writes everything that reached it while
///   it wrote the previous group as one WriteBatch with one fsync (see
///   session_io_worker.hpp); `stats` counts groups and fsyncs.
///
/// What a crash can lose: queued persists whose callers were not answered.
/// An answered persist survives a process crash, and with durability
/// `synced` a power loss.
namespace coalesce {

struct session_persister_options {
  /// Largest snapshot blob, in bytes (16 MiB).
  std::size_t max_blob = 16 * 1024 * 1024;
  /// Largest update payload, in bytes (1 MiB).
  std::size_t max_update = 1024 * 1024;
  /// Detached I/O actors every RocksDB call of the persister goes through.
  /// One by default: each group is one fsync, and a second actor halves the
  /// groups without writing faster on two cores; on a clustered node it
  /// also splits every peer's batch of replica writes into two fsyncs
  /// (docs/results.md, "one I/O actor").
  std::size_t io_workers = 1;
  /// How long a handle may take to answer a snapshot request.
  caf::timespan snapshot_timeout = std::chrono::seconds{5};
  /// Writers kept after their session's work is done, the most recently
  /// idle ones, so that a session persisting again soon reaches a warm
  /// writer; 0 retires each writer once it is idle.
  std::size_t idle_writers = 1024;
  /// Replicas (set by a clustered node, not a config key): a register is
  /// answered once its generation is claimed in storage (at a majority of
  /// the session's replicas), and a persist through a handle registered on
  /// another node is written only when it holds the generation claimed
  /// last (errc::handle_superseded otherwise).
  bool claim_generations = false;

  /// Registers `persister-max-blob`, `persister-max-update`,
  /// `persister-io-workers`, `persister-snapshot-timeout`,
  /// `persister-idle-writers`.
  void add_to(caf::config_option_adder& adder);

  /// Empty when valid, else one sentence naming the key as `GROUP.KEY`.
  std::string validate(const std::string& group = "coalesce") const;
};

/// The persister as its callers hold it: everything a client may send it
/// (session_persister_interface.hpp). What its own actors say to each other
/// is internal (session_persister_protocol.hpp, not installed).
using session_persister_actor = session_persister_interface;

/// The persister with its I/O actors, as production runs them.
struct session_persister_actors {
  session_persister_actor persister;
  /// The I/O actors, for their owner to stop after the persister and wait
  /// for; untyped because only the persister and its writers talk to them.
  std::vector<caf::actor> io;
};

/// Spawns `options.io_workers` detached I/O actors over `db` and the
/// persister on top. The caller stops the I/O actors after the persister.
session_persister_actors
spawn_session_persister_actors(caf::actor_system& sys,
                               std::shared_ptr<storage::database> db,
                               session_persister_options options);

/// The same with the I/O actors scheduled (tests), so that the test
/// coordinator decides when each runs.
session_persister_actors
spawn_session_persister_actors_scheduled(caf::actor_system& sys,
                                         std::shared_ptr<storage::database> db,
                                         session_persister_options options);

} // namespace coalesce
