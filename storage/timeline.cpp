#include <coalesce/storage/timeline.hpp>

#include <limits>
#include <memory>
#include <optional>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database_impl.hpp>
#include <coalesce/storage/timeline_codec.hpp>

namespace coalesce::storage {

namespace {

/// The codec stores every length in 4 bytes.
bool fits_length(const std::string& x) {
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

caf::error check_room(const std::string& room) {
  if (room.empty())
    return make_error(errc::invalid_request, "the room name is empty");
  if (!fits_length(room))
    return make_error(errc::invalid_request, "the room name is too long");
  return caf::none;
}

caf::error check_event(const timeline_event& event) {
  if (event.event_id.empty())
    return make_error(errc::invalid_request, "an event has an empty event_id");
  if (!fits_length(event.event_id) || !fits_length(event.type)
      || !fits_length(event.body))
    return make_error(errc::invalid_request,
                      "event " + event.event_id + " has a field too long");
  return caf::none;
}

/// Reads one counter (head or position); nullopt when it is not stored.
caf::expected<std::optional<uint64_t>>
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

caf::error write_batch(database::impl& state, rocksdb::WriteBatch& batch,
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

} // namespace

caf::error append_events(database& db, const std::string& room,
                         const std::vector<timeline_event>& events,
                         std::optional<durability> mode) {
  return with_room(db, room, [&](database::impl& state) -> caf::error {
    for (const auto& event : events)
      if (auto err = check_event(event))
        return err;
    if (events.empty())
      return caf::none;
    auto head_key = encode_head_key(room);
    auto head = read_counter(state, head_key, "the timeline head", room);
    if (!head)
      return std::move(head.error());
    auto seq = head->value_or(0);
    auto timeline = state.handle(family::timeline);
    rocksdb::WriteBatch batch;
    for (const auto& event : events) {
      auto status = batch.Put(timeline, encode_event_key(room, seq++),
                              encode_event_value(event));
      if (!status.ok())
        return to_error(status, "building the timeline batch");
    }
    auto status = batch.Put(timeline, head_key, encode_counter(seq));
    if (!status.ok())
      return to_error(status, "building the timeline batch");
    return write_batch(state, batch, mode, "appending to the timeline");
  });
}

namespace {

/// Where the next page of `room` starts: the stored position, or just after
/// the newest event for a room never paged.
caf::expected<uint64_t> paging_position(database::impl& state,
                                        const std::string& room) {
  auto stored = read_counter(state, encode_position_key(room),
                             "the timeline position", room);
  if (!stored)
    return std::move(stored.error());
  if (*stored)
    return **stored;
  auto head = read_counter(state, encode_head_key(room), "the timeline head",
                           room);
  if (!head)
    return std::move(head.error());
  return head->value_or(0);
}

/// Fills `page` with at most `max_events` events older than `position`,
/// newest first.
caf::error read_page(database::impl& state, const std::string& room,
                     uint64_t position, uint32_t max_events,
                     timeline_page& page) {
  bounded_iterator range{state, encode_event_key(room, 0),
                         encode_event_key(room, position)};
  auto& it = range.it;
  uint64_t oldest = position;
  for (it->SeekToLast(); it->Valid() && page.events.size() < max_events;
       it->Prev()) {
    auto key = it->key();
    auto seq = decode_event_key(room, std::string_view{key.data(), key.size()});
    auto value = it->value();
    auto event = decode_event_value(
      std::string_view{value.data(), value.size()});
    if (!seq || !event)
      return make_error(errc::corrupt_record,
                        "undecodable timeline event of room " + room);
    oldest = *seq;
    page.events.push_back(std::move(*event));
  }
  // Still valid here means an older event exists beyond this batch.
  page.reached_start = !it->Valid();
  if (auto err = to_error(it->status(), "reading the timeline"))
    return err;
  page.cursor.next = oldest;
  return caf::none;
}

} // namespace

caf::expected<timeline_page>
page_backwards(database& db, const std::string& room, uint32_t max_events) {
  using result_type = caf::expected<timeline_page>;
  return with_room(db, room, [&](database::impl& state) -> result_type {
    if (max_events == 0)
      return make_error(errc::invalid_request,
                        "a page must hold at least one event");
    auto position = paging_position(state, room);
    if (!position)
      return std::move(position.error());
    timeline_page page;
    page.cursor = page_cursor{*position, *position};
    if (*position == 0) {
      // Nothing older: an exhausted room, or one without events.
      page.reached_start = true;
      return page;
    }
    if (auto err = read_page(state, room, *position, max_events, page))
      return err;
    return page;
  });
}

caf::error commit_page(database& db, const std::string& room,
                       const page_cursor& cursor,
                       std::optional<durability> mode) {
  return with_room(db, room, [&](database::impl& state) -> caf::error {
    if (cursor.next > cursor.read_at)
      return make_error(errc::invalid_request,
                        "a page cursor cannot move the position forwards");
    if (cursor.next == cursor.read_at)
      return caf::none;
    // No page is read beyond the head, which never goes back: such a cursor
    // is forged, and would skip events never delivered.
    auto head = read_counter(state, encode_head_key(room), "the timeline head",
                             room);
    if (!head)
      return std::move(head.error());
    if (cursor.read_at > head->value_or(0))
      return make_error(errc::invalid_request,
                        "a page cursor read at " + std::to_string(cursor.read_at)
                          + " lies beyond the room's newest event (head "
                          + std::to_string(head->value_or(0)) + ")");
    auto position_key = encode_position_key(room);
    auto stored = read_counter(state, position_key, "the timeline position",
                               room);
    if (!stored)
      return std::move(stored.error());
    if (*stored && **stored != cursor.read_at)
      return caf::none; // Stale: the page was committed already, or reset.
    rocksdb::WriteBatch batch;
    auto status = batch.Put(state.handle(family::timeline), position_key,
                            encode_counter(cursor.next));
    if (!status.ok())
      return to_error(status, "building the timeline batch");
    return write_batch(state, batch, mode, "moving the timeline position");
  });
}

caf::expected<uint64_t> count_events(database& db, const std::string& room) {
  using result_type = caf::expected<uint64_t>;
  return with_room(db, room, [&](database::impl& state) -> result_type {
    bounded_iterator range{state, encode_event_key(room, 0),
                           encode_events_end_key(room)};
    auto& it = range.it;
    uint64_t events = 0;
    for (it->Seek(range.lower_slice); it->Valid(); it->Next())
      ++events;
    if (auto err = to_error(it->status(), "counting the timeline"))
      return err;
    return events;
  });
}

caf::error reset_position(database& db, const std::string& room,
                          std::optional<durability> mode) {
  return with_room(db, room, [&](database::impl& state) -> caf::error {
    rocksdb::WriteBatch batch;
    auto status = batch.Delete(state.handle(family::timeline),
                               encode_position_key(room));
    if (!status.ok())
      return to_error(status, "building the timeline batch");
    return write_batch(state, batch, mode, "resetting the timeline position");
  });
}

} // namespace coalesce::storage
