#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <coalesce/messages/secret_entry.hpp>

/// The secret buffer's decisions, as a plain value: which captures are
/// pending, which producers wait for capacity, what the next batch carries,
/// and what a finished batch releases. No actors, logging or I/O: the secret
/// buffer actor routes messages here and carries out what it decides.
///
/// Invariants:
/// - Every capture is pending, held by a waiting producer, or written; never
///   none of these. A pending entry leaves only when the batch that carried
///   its current version was written.
/// - Each capture gets a sequence number on arrival. A pending entry's
///   version is the number of its newest capture, so a recapture made while
///   the older value is being written (even byte-identical) has a new version
///   and survives that batch's clean-up.
/// - At most one batch is in flight. It carries the current value of up to
///   `max_batch` keys, oldest first: a later batch therefore carries values
///   at least as new as any earlier one, and no key waits behind newer ones.
///   Keeping batches below the limit leaves room to admit the next batch's
///   entries while one is being written, so the disk never waits for the
///   buffer between batches.
/// - The pending map holds at most `limit` keys, except for entries of a dead
///   producer, which are admitted past it rather than dropped.
/// - Producers waiting for capacity are admitted in arrival order; a later
///   capture of a key that an earlier producer still holds waits behind it,
///   so captures of one key are applied in the order they arrived.
/// - A lookup that reads RocksDB cannot tell which batches its read saw. It
///   applies onto the row it read the buffer's value at the start of the
///   read followed by every capture of the key since (`watch`): that covers
///   whatever the read may have seen, and a capture applied again changes
///   nothing, so it answers the key's state when the read's answer arrives.
namespace coalesce {

/// Names one `queue` request while its producer waits for capacity.
using producer_ticket = uint64_t;

/// Names one lookup's read of RocksDB while it is in flight.
using read_watch = uint64_t;

/// A producer whose entries are now all admitted and who may be answered.
struct producer_release {
  producer_ticket ticket;
  /// Sequence number of its newest capture, for answering once durable.
  uint64_t last_sequence;
};

class pending_secrets {
public:
  /// `max_batch` 0 means half the limit (at least 1).
  explicit pending_secrets(std::size_t limit, std::size_t max_batch = 0);

  struct queue_result {
    /// False when the producer must wait: it filled the last slot, or some
    /// of its entries are held for lack of capacity.
    bool answer_now;
    uint64_t last_sequence;
  };

  /// Admits `writes` in order, stopping when a new key does not fit or when
  /// one fills the last slot; the rest is held under `ticket`. Refreshing a
  /// pending key needs no capacity. An empty `writes` is a no-op.
  queue_result queue(producer_ticket ticket, std::vector<secret_write> writes);

  /// Rescues everything held under `ticket` and forgets the ticket (its
  /// producer died). A capture is admitted at once, past the limit, unless
  /// an earlier waiting producer still holds its key: then it joins that
  /// producer's newest held capture of the key, so the captures of one key
  /// are still applied in arrival order. Returns the captures rescued.
  std::size_t force_admit(producer_ticket ticket);

  /// Snapshots up to `max_batch` pending entries, oldest first, as the next
  /// batch. Empty when nothing waits to be written or a batch is already in
  /// flight. The batch shares the entries (immutable) with the pending map:
  /// no entry is copied.
  secret_batch start_batch();

  /// The batch in flight is durable; the next one may start at once. Its
  /// entries stay pending until `release_written`, so starting the next batch
  /// first keeps the disk busy while the clean-up runs.
  void batch_written();

  /// Removes each written entry not recaptured since, then admits waiting
  /// producers in order. Returns those fully admitted.
  std::vector<producer_release> release_written();

  /// `batch_written` and `release_written` in one step.
  std::vector<producer_release> finish_batch();

  /// The batch in flight failed: everything stays pending for a retry.
  void abandon_batch();

  /// What the buffer holds for `key`: the pending entry with every held
  /// capture of it applied in arrival order; nothing when it holds none.
  std::optional<secret_write> find(const secret_key& key) const;

  /// Starts following `key` for a lookup about to read RocksDB: from now
  /// on every capture of it is recorded for `end_watch`.
  read_watch watch(const secret_key& key);

  /// What the lookup applies onto the row its read found: `find(key)` as it
  /// was at `watch`, followed by every capture of the key since, in arrival
  /// order. Ends the watch.
  std::optional<secret_write> end_watch(const secret_key& key, read_watch id);

  /// True when every capture numbered up to `sequence` was written.
  bool durable_through(uint64_t sequence) const {
    return sequence < durable_below();
  }

  /// Every capture numbered below this was written. One pass over the
  /// pending and held captures after each batch's clean-up, then cached:
  /// only `release_written` raises it, because a new capture is numbered
  /// above every earlier one and an admitted capture keeps its number. So
  /// any number of durability waiters are checked in one pass, not one each.
  uint64_t durable_below() const;

  /// The number of the newest capture so far (0 before the first).
  uint64_t last_sequence() const {
    return next_sequence_ - 1;
  }

  bool writing() const {
    return writing_;
  }

  /// Whether a batch could start now.
  bool has_unwritten() const {
    return !unwritten_.empty();
  }

  std::size_t size() const {
    return pending_.size();
  }

  std::size_t limit() const {
    return limit_;
  }

  std::size_t held_entries() const {
    return held_count_;
  }

  std::size_t waiting_producers() const {
    return waiters_.size();
  }

  /// The version of the pending entry for `key`, 0 when none (tests).
  uint64_t version_of(const secret_key& key) const;

private:
  struct slot {
    /// Never changed in place: a merge makes a new row, so a batch in
    /// flight that shares the old one keeps what it carries.
    std::shared_ptr<const secret_write> row;
    /// Sequence number of the newest capture merged into `row`.
    uint64_t version;
    /// Lowest sequence number whose capture may not be durable yet.
    uint64_t oldest;
  };

  using pending_map = std::unordered_map<secret_key, slot, secret_key_hash>;

  /// A pending entry by address: nodes of an unordered_map keep their
  /// address across rehashing, and only `release_written` erases entries.
  using entry_ref = pending_map::value_type*;

  /// One capture, or several captures of one key coalesced in arrival
  /// order (a dead producer's joined to an earlier hold).
  struct held_write {
    secret_write write;
    /// Number of the oldest capture it carries.
    uint64_t sequence;
    /// Number of the newest capture it carries.
    uint64_t newest;
  };

  struct waiter {
    producer_ticket ticket;
    std::deque<held_write> held;
    uint64_t last_sequence;
  };

  enum class admission { admitted, filled_last_slot, blocked };

  /// Admits the front of `held` if it fits. `respect_earlier_holds` makes a
  /// refresh wait while another producer still holds the same key.
  admission admit_front(std::deque<held_write>& held,
                        bool respect_earlier_holds);

  void admit(secret_key&& key, held_write&& capture);

  void merge_into(slot& entry, held_write&& capture);

  /// The newest capture of `key` held by a producer that arrived before
  /// `producer`; nullptr when none.
  held_write* latest_hold_before(std::deque<waiter>::iterator producer,
                                 const secret_key& key);

  void hold(waiter&& w);

  /// Adds a capture that just arrived to every watch of its key.
  void record_for_watches(const secret_write& capture);

  void unhold(const secret_key& key);

  std::size_t limit_;
  std::size_t max_batch_;
  uint64_t next_sequence_ = 1;
  pending_map pending_;
  /// Producers waiting for capacity, in arrival order.
  std::deque<waiter> waiters_;
  /// How many held captures each key has, so lookups and refreshes only scan
  /// the waiters when a key is actually held.
  std::unordered_map<secret_key, std::size_t, secret_key_hash> held_keys_;
  std::size_t held_count_ = 0;
  /// Pending entries not in the batch in flight, in the order they became
  /// pending (or were recaptured during the write of their older value).
  std::deque<entry_ref> unwritten_;
  /// Each entry of the last written batch with the version it carried,
  /// until `release_written` cleans them up.
  std::vector<std::pair<entry_ref, uint64_t>> written_;
  /// Each entry the batch in flight carries, with the version it carries.
  std::vector<std::pair<entry_ref, uint64_t>> in_flight_;
  bool writing_ = false;

  struct watched {
    read_watch id;
    std::optional<secret_write> value;
  };

  /// Lookups reading RocksDB, by key.
  std::unordered_map<secret_key, std::vector<watched>, secret_key_hash>
    watches_;
  read_watch next_watch_ = 1;
  /// `durable_below`, once computed since the last clean-up.
  mutable std::optional<uint64_t> durable_below_;
};

} // namespace coalesce
