#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <coalesce/messages/session.hpp>
#include <coalesce/messages/session_replica_interface.hpp>
#include <coalesce/storage/database.hpp>

/// Sessions in RocksDB: each session's blob in the family "sessions", its
/// update rows in "session_updates".
///
/// Keys start with the session id length-prefixed (4 bytes, big-endian), so
/// the keys of one session form one range that contains no other session's
/// keys, even for ids that are prefixes of each other ("a" and "a\x01...").
/// An update row's key is that prefix followed by the update id.
///
/// The blob value starts with a format byte (1) and the writer's generation
/// (8 bytes, big-endian), then the blob, so a later format can carry more
/// without rewriting old rows. A deleted session keeps a tombstone under
/// the blob's key: format byte 2 and the generation of the delete. An
/// update row's value is a format byte, the timestamp, the kind and the
/// payload.
///
/// Store-side fencing: a write whose generation is lower than the stored
/// one (blob or tombstone) is refused with errc::stale_generation and
/// changes nothing; an equal generation passes, so a retry passes. A
/// tombstone keeps the higher of the delete's generation and the stored
/// one, so a writer from before the delete cannot win after it.
///
/// Every call that writes is one WriteBatch with the durability `mode`
/// names (by default the database's): a crash leaves all of a call's
/// changes or none. RocksDB has no conditional write, so the check and
/// the write of one session race if two threads write that session at
/// once: callers serialise the writes of one session (the persister sends
/// every write of a session through the same I/O actor).
///
/// Replicas (coalesce/messages/session_replica_interface.hpp says what a
/// replica keeps and why): a replicated node's values have format 3, the
/// generation floor and its claimant, the promised ballot, the content's
/// version and kind (none: a claim or promise only, which `load_session`
/// answers errc::not_found), then the blob. Every call reads formats 1 and
/// 2 as version (0, 0). A replica's delete keeps its tombstone for good:
/// without it a replica that missed the delete would win a read.
///
/// Failures: a malformed request (an empty session id or one over 255
/// bytes, an update with an empty id) is refused with errc::invalid_request
/// before anything is written; `load_session` of a session without a blob
/// answers errc::not_found; a stored value that does not decode gives
/// errc::corrupt_record. All calls block on disk I/O.
namespace coalesce::storage {

/// The longest session id, in bytes.
constexpr std::size_t max_session_id = 255;

/// One session write: the newest blob, the new update rows and the ids of
/// the rows to delete.
struct session_write {
  std::string session;
  std::string blob;
  std::vector<session_update> updates;
  std::vector<std::string> removed;
  /// The writer's generation, stored with the blob (store-side fencing).
  uint64_t generation = 0;
  /// The writer has no generation of its own (a handle never registered,
  /// of a session the persister knows nothing of): the write carries the
  /// one storage holds (0 when nothing is), so it passes the check.
  bool generation_from_storage = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_write& x) {
  return f(x.session, x.blob, x.updates, x.removed, x.generation,
           x.generation_from_storage);
}

/// Empty when `session` is a valid session id, else why not.
std::string invalid_session_id(const std::string& session);

/// Writes the blob, the update rows and the removals as one batch. A row
/// both written and removed by the same write ends removed. Refused with
/// errc::stale_generation when storage holds a higher generation.
caf::error save_session(database& db, const session_write& write,
                        std::optional<durability> mode = std::nullopt);

/// What `save_session_group` did.
struct session_group_result {
  /// Per write, in order: why it was refused before the batch (invalid,
  /// stale generation); none for a write the batch carried.
  std::vector<caf::error> refused;
  /// Why the batch failed: then every write it carried failed with it.
  caf::error failure;
  /// Whether a batch was written (none when every write was refused).
  bool written = false;
};

/// The generation storage holds for sessions whose every write goes
/// through one caller (the persister's I/O actor of those sessions), kept by
/// that caller from group to group so that a group need not read what it
/// wrote itself. Valid only while nothing else writes those sessions.
using known_generations = std::unordered_map<std::string, uint64_t>;

/// Group commit: every write not refused (checked one by one, each
/// against the stored generation or an earlier write of the same session
/// in the group) goes into one WriteBatch, written once (one fsync when
/// synced). Each session's part is atomic; so is the whole group. With
/// `known`, a session found there is checked against it instead of a read,
/// and the group's outcome is recorded there (a failed batch forgets its
/// sessions).
session_group_result
save_session_group(database& db, const std::vector<session_write>& writes,
                   std::optional<durability> mode = std::nullopt,
                   known_generations* known = nullptr);

/// Removes the blob and every update row of `session` (one range delete of
/// its update rows) in one batch, leaving a tombstone with the higher of
/// `tombstone` and the stored generation; with none, leaving nothing.
/// Erasing an unknown session is no error.
caf::error erase_session(database& db, const std::string& session,
                         std::optional<uint64_t> tombstone = 0,
                         std::optional<durability> mode = std::nullopt);

/// Removes the tombstone of `session` if it is one of at most `generation`
/// (it fences nothing any more); a blob or a higher tombstone stays. Whether
/// it removed one.
caf::expected<bool> purge_tombstone(database& db, const std::string& session,
                                    uint64_t generation,
                                    std::optional<durability> mode
                                    = std::nullopt);

/// The generation stored for `session` (its blob's or its tombstone's);
/// none when nothing is stored.
caf::expected<std::optional<uint64_t>>
stored_generation(database& db, const std::string& session);

/// The blob and update rows of `session`, rows by timestamp, then id.
caf::expected<session_record> load_session(database& db,
                                           const std::string& session);

/// The key prefix of every key of `session` (tests and tools).
std::string session_key_prefix(const std::string& session);

// -- replicas ------------------------------------------------------------------

/// What the replica holds of `session`, as an `applied` answer.
caf::expected<replica_answer> replica_version(database& db,
                                              const std::string& session);

/// Promises `ballot` (stored when above the promised one); `preempted`
/// when below it.
caf::expected<replica_answer>
replica_prepare(database& db, const std::string& session, uint64_t ballot,
                std::optional<durability> mode = std::nullopt);

/// Claims `generation` for `claimant` under `ballot`: `preempted` below the
/// promised ballot, `stale` when the floor is higher or the same
/// generation was claimed by another claimant; a repeated claim changes
/// nothing.
caf::expected<replica_answer>
replica_claim(database& db, const std::string& session, uint64_t ballot,
              uint64_t generation, const std::string& claimant,
              std::optional<durability> mode = std::nullopt);

/// What `replica_apply_group` did.
struct replica_group_result {
  /// Per delta, in order: how the replica took it (or why it was invalid).
  std::vector<caf::expected<replica_answer>> answers;
  /// Why the batch failed: then no delta of it applied, whatever `answers`
  /// says.
  caf::error failure;
  bool written = false;
};

/// The version a replica holds of each session, as its only writer last
/// wrote or read it (replica_apply_group).
using known_versions = std::unordered_map<std::string, session_version>;

/// Group commit of deltas, each checked (ballot, generation, base
/// version) against what the replica holds or an earlier delta of the same
/// session in the group; the applied ones form one WriteBatch. With
/// `known`, a session found there is checked against it instead of a read,
/// and what each session of the group holds after it is recorded there (a
/// failed batch forgets its sessions).
replica_group_result
replica_apply_group(database& db, const std::vector<session_delta>& deltas,
                    std::optional<durability> mode = std::nullopt,
                    known_versions* known = nullptr);

/// The ballot of a repair (anti-entropy, catch-up): it copies what some
/// replica already holds, checked by content version alone.
constexpr uint64_t repair_ballot = 0;

/// Replaces the session with `image` when its content is newer than the
/// replica's, and raises the floor to the image's when higher (a claim the
/// replica missed), whether or not the content is newer; `preempted` when
/// `ballot` is below the promised one (unless it is `repair_ballot`).
caf::expected<replica_answer>
replica_install(database& db, uint64_t ballot, const session_image& image,
                std::optional<durability> mode = std::nullopt);

/// The whole session as the replica holds it.
caf::expected<session_image> replica_image(database& db,
                                           const std::string& session);

/// Forgets `session` here, its head (blob, tombstone or claim) and rows,
/// when what the replica holds is still exactly `expected` (`applied`,
/// with the empty version); `out_of_sync`, changing nothing, when anything
/// changed since (a write, a claim, a promise). For a node that no longer
/// replicates the session, once its replicas hold it
/// (coalesce/node/key_release.hpp). Leaves no tombstone: no replica of
/// the session is on this node any more.
caf::expected<replica_answer>
replica_drop(database& db, const std::string& session,
             const session_version& expected);

/// Calls `visit` with the version of every session the replica holds
/// (blobs, tombstones, claims), in key order.
caf::error
scan_session_versions(database& db,
                      const std::function<void(session_listing&&)>& visit);

} // namespace coalesce::storage
