#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/secret_store_actors.hpp>
#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/secret_buffer_interface.hpp>
#include <coalesce/messages/secret_buffer_stats.hpp>
#include <coalesce/messages/secret_entry.hpp>

/// The message-secret write-behind buffer.
///
/// A captured secret is readable the moment `queue` is answered, and becomes
/// durable when the drain worker has written the batch that carries it. The
/// buffer splits visibility from durability: producers pay for an actor
/// message, not for an fsync, and a burst of captures coalesces into one
/// RocksDB write batch.
///
/// Guarantees:
/// - A queued secret is always visible to `lookup`: from the buffer until the
///   batch carrying it was written, from RocksDB afterwards; never from
///   neither. `lookup` answers what a read after the next flush would.
/// - One batch is in flight at a time; entries queued meanwhile go into the
///   next one. A recapture of a key during a write survives that write.
/// - Duplicates coalesce, merging retention metadata as sequential writes
///   would (storage/secret_merge.hpp).
/// - At most `pending_limit` distinct keys are pending. A producer whose
///   entries do not all fit, or whose entry filled the last slot, is answered
///   only once all its entries are admitted, after batches free capacity.
///   Held entries are already readable.
/// - Nothing that reached the buffer is discarded: a waiting producer that
///   dies has its held entries admitted past the limit (behind any earlier
///   hold of the same key, so one key's captures keep their arrival order);
///   a failed batch stays
///   pending and readable and is retried with exponential backoff (the drain
///   worker asks the database to recover meanwhile). While writes fail,
///   producers back-pressure at the high-water mark as usual.
/// - `flush` is answered once everything queued before it is durable (the
///   flush ends with a WAL sync, whatever the durability mode). After `seal`,
///   every `queue` is answered only once its entries are durable. A flush
///   with a negative deadline is refused with `errc::invalid_request`. A failed
///   WAL sync is retried on its own timer; batches go on meanwhile.
/// - Invalid entries (an empty chat, sender or msg_id, or a secret that is
///   not 32 bytes, shorter or longer) are answered with
///   `errc::invalid_secret_entry` in storage's words; nothing of that
///   request is stored. A lookup of a key with an empty chat, sender or
///   msg_id gets the same error, not "not found" (a batch of keys is refused
///   whole, naming the first bad key).
/// - A drain worker or reader that dies is replaced (see
///   `spawn_secret_buffer`); what it was doing is retried, nothing is lost.
/// - When the buffer stops, every request still parked is answered with
///   `errc::stopped_before_answer`.
///
/// What a crash can lose: entries not yet written (at most the pending limit
/// plus what producers hold). With durability `synced` a written batch
/// survives a power loss; with `buffered` it survives a process crash, and a
/// power loss may lose the batches written since the last WAL sync.
namespace coalesce {

/// The client interface (coalesce/messages/secret_buffer_interface.hpp)
/// plus the buffer's own reminders.
using secret_buffer_actor = secret_buffer_interface::extend<
  /// Deletes the rows still stored as given, through the drain worker (a
  /// node's repair dropping chats it no longer replicates,
  /// coalesce/node/secret_sync.hpp): how many.
  caf::replies_to<replica_atom, drop_atom,
                  std::vector<secret_write>>::with<uint64_t>,
  /// Writes what is pending now (also the buffer's own wake-up and retry).
  caf::reacts_to<drain_atom>,
  /// The buffer's own reminder that the deadline of flush N has passed.
  caf::reacts_to<caf::timeout_atom, uint64_t>,
  /// The buffer's own reminder to retry a failed WAL sync. It has a timer of
  /// its own so that batches keep going out meanwhile.
  caf::reacts_to<sync_atom>>;

struct secret_buffer_options {
  /// Distinct pending keys before producers wait. A live stream drains long
  /// before this; the cap keeps a stalled disk from turning write-behind into
  /// unbounded memory.
  std::size_t pending_limit = 4096;
  /// Entries one batch carries at most; 0 means half the pending limit, so
  /// the next batch's entries are admitted while one is being written.
  std::size_t max_batch = 0;
  /// First delay before a failed batch is retried; doubles per failure.
  caf::timespan retry_base = std::chrono::milliseconds{10};
  /// Longest delay between retries of a failed batch.
  caf::timespan retry_max = std::chrono::seconds{2};

  /// Registers the settings under a config group (`secrets-pending-limit`,
  /// `secrets-retry-base`, `secrets-retry-max`), each described with its
  /// default; parsing the config then writes into this object.
  void add_to(caf::config_option_adder& adder);

  /// Empty when the settings are valid, else one sentence naming the key
  /// (as `GROUP.KEY`) and what is wrong with its value.
  std::string validate(const std::string& group = "coalesce") const;
};

/// The buffer's check of a queue's entries, in storage's words: an
/// `errc::invalid_secret_entry` naming the first bad entry ("(entry N)"),
/// or none. A coordinator checks a request with it before its copies join
/// other requests' copies in one message.
caf::error check_secret_entries(const std::vector<secret_entry>& entries);

/// Spawns a replacement for a drain worker or reader that died.
struct secret_worker_factory {
  std::function<secret_drain_actor(caf::actor_system&)> drain;
  std::function<secret_reader_actor(caf::actor_system&)> reader;
};

/// Spawns the buffer as a scheduled actor over the given workers. Tests
/// pass workers spawned as scheduled actors, so the deterministic test
/// coordinator sees every message.
///
/// The buffer monitors both workers. When one dies (a crash, a kill) it
/// spawns a replacement through `replace` and logs it: the write or sync in
/// flight bounces and is retried on the new worker like any failed write, a
/// read in flight is sent again, nothing is lost. The buffer stops the
/// replacements it spawned when it stops. Without a factory for the worker
/// that died, the buffer stops (answering every parked request) rather than
/// bounce requests forever.
secret_buffer_actor spawn_secret_buffer(caf::actor_system& sys,
                                        secret_drain_actor drain,
                                        secret_reader_actor reader,
                                        secret_buffer_options options,
                                        secret_worker_factory replace = {});

/// The buffer with the drain worker and reader it started with, as
/// production runs them. After a worker died, `drain` or `reader` names the
/// dead one; its replacement stops with the buffer.
struct secret_buffer_actors {
  secret_buffer_actor buffer;
  secret_drain_actor drain;
  secret_reader_actor reader;
};

/// Spawns the drain worker and the reader detached over `db`, and the buffer
/// on top, replacing a dead worker by a new detached one over `db`. The
/// workers stop when the buffer stops.
secret_buffer_actors spawn_secret_buffer_actors(caf::actor_system& sys,
                                    std::shared_ptr<storage::database> db,
                                    secret_buffer_options options);

} // namespace coalesce
