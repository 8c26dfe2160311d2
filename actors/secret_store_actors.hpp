#pragma once

#include <memory>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/replica_protocol.hpp>
#include <coalesce/messages/secret_entry.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// The two actors through which the secret buffer reaches RocksDB. Both make
/// blocking calls, so production spawns them `caf::detached` (each on its own
/// thread, never on CAF's scheduler); under the deterministic test
/// coordinator they are spawned as ordinary scheduled actors.
///
/// Reads have their own actor so a lookup never queues behind a batch that
/// is waiting for its fsync.
namespace coalesce {

/// Writes batches of secrets; answers once RocksDB acknowledged them with
/// the database's durability, or with the error RocksDB reported. Local
/// only: a `secret_batch` shares its captures with the buffer (see there).
using secret_drain_actor = caf::typed_actor<
  caf::replies_to<write_atom, secret_batch>::with<ok_atom>,
  /// Deletes the rows still stored as given (storage's `drop_secrets`):
  /// how many.
  caf::replies_to<drop_atom, std::vector<secret_write>>::with<uint64_t>,
  /// Makes every write so far durable, in either durability mode.
  caf::replies_to<sync_atom>::with<ok_atom>>;

/// Reads merged rows, expired ones included, in the order of the keys.
using secret_reader_actor = caf::typed_actor<
  caf::replies_to<read_atom, std::vector<secret_key>>::with<
    std::vector<stored_secret>>>;

secret_drain_actor::behavior_type
secret_drain_worker(secret_drain_actor::pointer self,
                    std::shared_ptr<storage::database> db);

secret_reader_actor::behavior_type
secret_reader(secret_reader_actor::pointer self,
              std::shared_ptr<storage::database> db);

} // namespace coalesce
