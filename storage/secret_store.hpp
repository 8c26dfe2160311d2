#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <coalesce/messages/secret_entry.hpp>
#include <coalesce/storage/database.hpp>

/// Message secrets in RocksDB (column family "secrets").
///
/// A write adds one merge operand per secret, all in one WriteBatch: the
/// batch is atomic, and the merge operator (see secret_merge.hpp) combines
/// operands with the stored row without a read per row. Because applying a
/// capture twice equals applying it once, a batch that reported failure but
/// still reached the WAL may be written again safely.
///
/// Expired rows stay readable here (`read_secrets` returns them with their
/// expiry; the caller decides against its own clock) until a compaction
/// purges them. The purge decides only on full rows and keeps every merge
/// operand: dropping an operand because of its own expiry would let an older
/// operand or row underneath resurface.
namespace coalesce::storage {

/// What makes `entry` unfit to store (an empty chat, sender or msg_id, or a
/// secret that is not `secret_size` bytes, longer or shorter), empty when
/// nothing does. The buffer refuses a `queue` with the same words.
std::string invalid_secret_entry(const secret_entry& entry);

/// What makes `key` name no storable secret (an empty chat, sender or
/// msg_id), empty when nothing does: the buffer refuses a lookup of it with
/// the words of `invalid_secret_entry`.
std::string invalid_secret_key(const secret_key& key);

/// Writes `writes` as one batch with durability `mode` (by default the
/// database's); refuses the whole batch with `errc::invalid_secret_entry`
/// if one entry is invalid.
caf::error write_secrets(database& db, const std::vector<secret_write>& writes,
                         std::optional<durability> mode = std::nullopt);

/// The same for a batch the buffer shares with its pending map.
caf::error write_secrets(database& db, const secret_batch& writes,
                         std::optional<durability> mode = std::nullopt);

/// Reads the merged rows of `keys`, in order; expired rows included.
caf::expected<std::vector<stored_secret>>
read_secrets(database& db, const std::vector<secret_key>& keys);

/// Deletes each row of `compared` that is still stored exactly as given
/// (its merged entry and capture time), in one batch: how many it deleted.
/// For a node that no longer replicates a chat, once its replicas hold the
/// rows (coalesce/node/key_release.hpp); a row that changed since it was
/// compared stays. Only the drain worker calls it: it is the one writer of
/// the family, so no capture lands between the read and the delete.
caf::expected<uint64_t> drop_secrets(database& db,
                                     const std::vector<secret_write>& compared);

/// Flushes the memtable and compacts the whole secrets family down to the
/// last level, running the purge of expired rows (tests and tools).
caf::error compact_secrets(database& db);

/// Rows physically present in the secrets family, expired ones included.
caf::expected<uint64_t> count_secret_rows(database& db);

/// Whether the secrets family holds no row at all (a new or wiped data
/// directory).
caf::expected<bool> secrets_empty(database& db);

/// Calls `visit(row)` for every merged row of the secrets family, in key
/// order, expired ones included, over one snapshot; the row's entry carries
/// its key. A row that does not decode stops the scan with
/// `errc::corrupt_record`.
caf::error scan_secrets(database& db,
                        const std::function<void(const secret_write&)>& visit);

} // namespace coalesce::storage
