#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include <coalesce/actors/session_persister_protocol.hpp>

/// The session persister's I/O actor (`session_io_actor`): every blocking
/// RocksDB call of the persister, through guarded_write. Internal: only the
/// persister spawns it and talks to it, and its writers.
///
/// Group commit: a write is not written when it arrives but appended to
/// the pending group, which is written when the actor's mailbox is empty
/// after a write, and before any other request is handled. So a group is
/// everything that reached the actor while the previous group was written,
/// and no message to itself stands between a write and its answer. A group
/// is one WriteBatch and one fsync; each write in it is checked against its
/// session's stored generation on its own (a stale one fails alone), and a
/// failure of the batch fails every write it carried. An erase, a load, a
/// tombstone purge or a generation read sees every write that arrived
/// before it.

/// Fencing holds because the persister sends every call of one session to
/// the same I/O actor, and an actor handles one message at a time: the
/// check of a session's stored generation and the write after it never
/// race with another write of that session.
/// For the same reason the actor may remember the generation it wrote for
/// each of its sessions and check the next write against that instead of
/// reading it (`storage::known_generations`); an erase, a purge or a failed
/// batch makes it read again.
///
/// Failure: a failed write or erase is answered with its error (storage's,
/// or while the database recovers from a fault the recovery's, see
/// guarded_write.hpp), a failed load or generation read with storage's.
/// Nothing is retried here: the writer keeps a failed write's rows and
/// retries them.
///
/// Replicas: on a clustered node the same actor is the replica of its
/// sessions (`session_replica_io_actor`): deltas join the group, and every
/// replica request of a session goes to the actor that writes it, so the
/// check and the write of a replica never race either.
///
/// Pipelined sync: over a database whose durability is `synced`, a group of
/// several writes is written without fsync and its writes are delegated to
/// the actor's syncer (a linked actor, detached with a detached I/O actor),
/// which answers each (ok or refused) only once it synced the WAL after the
/// group; meanwhile the I/O actor writes the next groups, and the syncer
/// syncs once for every request that queued during its last sync. A failed
/// sync fails every write it covered. A write alone, with no group waiting
/// for a sync, is synced by the I/O actor itself before its answer (a solo
/// persist keeps its five messages). A load, a generation read or a replica
/// read behind groups not yet synced waits for the syncer's next sync and
/// answers that sync's failure, so no read sees a write that is not
/// durable. Replica deltas are written and answered the same way.
///
/// Shutdown: the owner of the persister stops the I/O actors after it.
/// Writes of a group not yet committed are answered with
/// errc::stopped_before_answer, unwritten.
namespace coalesce {

/// Spawns an I/O actor over `db` on its own thread (`caf::detached`), as
/// production runs it: its blocking calls never hold up CAF's scheduler.
session_replica_io_actor
spawn_detached_session_io_worker(caf::actor_system& sys,
                                 std::shared_ptr<storage::database> db);

/// The same as an ordinary scheduled actor, so that the test coordinator
/// decides when it runs.
session_replica_io_actor
spawn_scheduled_session_io_worker(caf::actor_system& sys,
                                  std::shared_ptr<storage::database> db);

} // namespace coalesce
