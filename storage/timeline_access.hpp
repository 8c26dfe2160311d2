#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database_impl.hpp>
#include <coalesce/storage/timeline_codec.hpp>

/// What the timeline's storage functions (timeline.cpp, and the replicas'
/// in timeline_replica.cpp) share to read and write a room's keys: checks
/// of a request, bounded iterators, counters and batches. Internal to
/// storage/.
namespace coalesce::storage {

/// The codec stores every length in 4 bytes.
inline bool fits_length(const std::string& x) {
  return x.size() <= std::numeric_limits<uint32_t>::max();
}

/// An iterator over the timeline keys in [lower, upper); it owns the bounds
/// RocksDB points to, so they live as long as the iterator.
struct bounded_iterator {
  bounded_iterator(database::impl& state, std::string lo, std::string hi)
    : lower(std::move(lo)),
      upper(std::move(hi)),
      lower_slice(lower),
      upper_slice(upper) {
    rocksdb::ReadOptions options;
    options.iterate_lower_bound = &lower_slice;
    options.iterate_upper_bound = &upper_slice;
    it.reset(state.db->NewIterator(options, state.handle(family::timeline)));
  }

  bounded_iterator(const bounded_iterator&) = delete;
  bounded_iterator& operator=(const bounded_iterator&) = delete;

  std::string lower;
  std::string upper;
  rocksdb::Slice lower_slice;
  rocksdb::Slice upper_slice;
  std::unique_ptr<rocksdb::Iterator> it;
};

inline caf::error check_room(const std::string& room) {
  if (room.empty())
    return make_error(errc::invalid_request, "the room name is empty");
  if (!fits_length(room))
    return make_error(errc::invalid_request, "the room name is too long");
  return caf::none;
}

inline caf::error check_event(const timeline_event& event) {
  if (event.event_id.empty())
    return make_error(errc::invalid_request, "an event has an empty event_id");
  if (!fits_length(event.event_id) || !fits_length(event.type)
      || !fits_length(event.body))
    return make_error(errc::invalid_request,
                      "event " + event.event_id + " has a field too long");
  return caf::none;
}

/// Reads one counter (head or position); nullopt when it is not stored.
inline caf::expected<std::optional<uint64_t>>
read_counter(database::impl& state, const std::string& key, const char* what,
             const std::string& room) {
  std::string value;
  auto status = state.db->Get(rocksdb::ReadOptions{},
                              state.handle(family::timeline), key, &value);
  if (status.IsNotFound())
    return std::optional<uint64_t>{};
  if (!status.ok())
    return to_error(status, what);
  auto x = decode_counter(value);
  if (!x)
    return make_error(errc::corrupt_record,
                      std::string{"undecodable "} + what + " of room " + room);
  return std::optional<uint64_t>{*x};
}

inline caf::error write_batch(database::impl& state, rocksdb::WriteBatch& batch,
                       std::optional<durability> mode, const char* what) {
  return to_error(state.write(mode, &batch), what);
}

/// The opening of every timeline function: an open database (see
/// `with_open_database`) and a named room.
template <class Use>
auto with_room(database& db, const std::string& room, Use&& use)
  -> decltype(use(db.internals())) {
  return with_open_database(db, [&](database::impl& state)
                                  -> decltype(use(db.internals())) {
    if (auto err = check_room(room))
      return err;
    return use(state);
  });
}

} // namespace coalesce::storage
