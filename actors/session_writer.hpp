#pragma once

#include <string>

#include <coalesce/actors/session_persister.hpp>
#include <coalesce/actors/session_persister_protocol.hpp>

/// The writer of one session (`session_writer_actor`): runs the session's
/// queue (session_queue.hpp), one job at a time, in arrival order.
/// Internal: the persister spawns one per session with work and is the only
/// actor that talks to it.
///
/// - A persist arrives resolved (`write_order`: its source, generation and
///   maybe the snapshot it carried). Persists that arrive while a job runs
///   merge into the queued write at the tail, so writes of one session
///   never overlap and the newest state lands last. A write starts with the
///   snapshot its newest persist carried, or asks its source for one, and
///   hands the snapshot and the merged rows to the session's I/O actor.
/// - `restand` (a register superseded the queued writes' handle) changes
///   where the queued writes come from, or refuses them; the rows of a
///   failed write stay kept either way.
/// - A delete answers the queued persists with errc::session_deleted, drops
///   the rows a failed write kept, and queues an erase behind the running
///   job. A lease is granted when its job starts (every job queued before
///   it is done) and held, holding up every later job, until it is
///   released or its holder dies; a queued lease released early answers its
///   own `exclusive` alone. A barrier is answered with the result of the
///   write before it.
/// - After each job, and whenever it became idle, it tells the persister
///   what happened and whether it is idle (`written`, a `write_report`). It
///   never blocks: every call is an asynchronous request.
///
/// Failure: a write that failed (storage, a snapshot refused, late, not a
/// string or over `max_blob`) answers its persists with the error and keeps
/// its rows for the session's next write.
///
/// Retirement and shutdown: idle (nothing queued, running, kept or held),
/// it says so in its `written` and stops when the persister answers
/// `retire`, which it does only when the writer received everything sent
/// to it (see session_persister_protocol.hpp). The writer and the
/// persister monitor each other (no link: an exit sent to a writer, whose
/// address its handles and clients see, never reaches the persister): the
/// writer stops when the persister does, answering the requests it parked
/// with errc::stopped_before_answer, and the persister forgets a writer
/// that died, whose session's next request spawns a new one.
namespace coalesce {

/// Spawns the writer of `session`, monitored by `persister` (the calling
/// actor), writing through `io`, the session's I/O actor.
session_writer_actor
spawn_session_writer(session_persister_full_actor::pointer persister,
                     std::string session, session_io_actor io,
                     const session_persister_options& options);

} // namespace coalesce
