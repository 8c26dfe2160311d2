#include <coalesce/storage/timeline.hpp>

#include <limits>
#include <memory>
#include <optional>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database_impl.hpp>
#include <coalesce/storage/timeline_access.hpp>
#include <coalesce/storage/timeline_codec.hpp>

namespace coalesce::storage {

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
