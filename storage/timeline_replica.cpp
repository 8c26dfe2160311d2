#include <coalesce/storage/timeline_replica.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database_impl.hpp>
#include <coalesce/storage/timeline_access.hpp>
#include <coalesce/storage/timeline_codec.hpp>

namespace coalesce::storage {

namespace {

caf::expected<room_version> read_version(database::impl& state,
                                         const std::string& room) {
  room_version result;
  std::string value;
  auto status = state.db->Get(rocksdb::ReadOptions{},
                              state.handle(family::timeline),
                              encode_replica_key(room), &value);
  std::optional<replica_meta> meta;
  if (status.ok()) {
    meta = decode_replica_meta(value);
    if (!meta)
      return make_error(errc::corrupt_record,
                        "undecodable replica state of room " + room);
  } else if (!status.IsNotFound()) {
    return to_error(status, "reading a room's replica state");
  }
  auto head = read_counter(state, encode_head_key(room), "the timeline head",
                           room);
  if (!head)
    return std::move(head.error());
  auto position = read_counter(state, encode_position_key(room),
                               "the timeline position", room);
  if (!position)
    return std::move(position.error());
  result.head = head->value_or(0);
  if (*position) {
    result.positioned = true;
    result.position = **position;
  }
  if (meta) {
    result.promised = meta->promised;
    result.segments = std::move(meta->segments);
  }
  // Events appended without replicas: one segment, of no coordinator.
  if (result.segments.empty() && result.head > 0)
    result.segments.push_back(timeline_segment{0, 0});
  return result;
}

room_answer answer(replica_outcome outcome, room_version version) {
  return room_answer{static_cast<uint8_t>(outcome), std::move(version)};
}

/// A part whose segments cannot describe a log: refused before anything
/// is written (a replica never stores what it could not compare later).
caf::error check_part(const room_suffix& part) {
  if (auto err = check_room(part.room))
    return err;
  for (const auto& event : part.events)
    if (auto err = check_event(event))
      return err;
  auto head = part.head();
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_request,
                      "a part of room " + part.room + "'s log " + why);
  };
  if (head > 0 && part.segments.empty())
    return bad("has events but no segments");
  for (std::size_t i = 0; i < part.segments.size(); ++i) {
    const auto& x = part.segments[i];
    if (i == 0 ? x.start != 0 : x.start <= part.segments[i - 1].start)
      return bad("has segments out of order");
    if (x.start >= head)
      return bad("has a segment without events");
  }
  if (part.positioned && part.position > head)
    return bad("has its position beyond its head");
  return caf::none;
}

/// Writes into `batch` what taking `part` changes of `mine` (see
/// `room_replica_append`); nullopt when this log does not hold the first
/// `part.from` events of `part`'s.
caf::expected<std::optional<room_version>>
take_part(database::impl& state, const room_version& mine,
          const room_suffix& part, uint64_t promised,
          rocksdb::WriteBatch& batch) {
  using result_type = caf::expected<std::optional<room_version>>;
  const auto& room = part.room;
  auto timeline = state.handle(family::timeline);
  auto part_head = part.head();
  auto shared = shared_prefix(mine.segments, mine.head, part.segments,
                              part_head);
  if (shared < part.from)
    return result_type{std::nullopt};
  auto after = mine;
  auto check = [](const rocksdb::Status& status) {
    return to_error(status, "building the timeline batch");
  };
  if (shared < part_head) {
    // Events past `shared` differ from the part's log (a coordinator's
    // appends no majority took): replaced.
    for (auto seq = shared; seq < mine.head; ++seq)
      if (auto err = check(batch.Delete(timeline, encode_event_key(room, seq))))
        return err;
    for (auto seq = shared; seq < part_head; ++seq)
      if (auto err = check(
            batch.Put(timeline, encode_event_key(room, seq),
                      encode_event_value(part.events[seq - part.from]))))
        return err;
    if (auto err = check(
          batch.Put(timeline, encode_head_key(room), encode_counter(part_head))))
      return err;
    after.head = part_head;
    after.segments = part.segments;
  }
  after.promised = std::max(after.promised, promised);
  if (after.promised != mine.promised || after.segments != mine.segments)
    if (auto err = check(batch.Put(
          timeline, encode_replica_key(room),
          encode_replica_meta({after.promised, after.segments}))))
      return err;
  if (part.positioned && part.position <= after.head
      && (!mine.positioned || part.position < mine.position)) {
    after.positioned = true;
    after.position = part.position;
    if (auto err = check(batch.Put(timeline, encode_position_key(room),
                                   encode_counter(part.position))))
      return err;
  }
  return result_type{std::move(after)};
}

caf::error write(database::impl& state, rocksdb::WriteBatch& batch) {
  if (batch.Count() == 0)
    return caf::none;
  return write_batch(state, batch, std::nullopt, "writing a room replica");
}

} // namespace

caf::expected<room_version> room_replica_version(database& db,
                                                 const std::string& room) {
  using result_type = caf::expected<room_version>;
  return with_room(db, room, [&](database::impl& state) -> result_type {
    return read_version(state, room);
  });
}

caf::expected<room_answer> room_replica_prepare(database& db,
                                                const std::string& room,
                                                uint64_t ballot) {
  using result_type = caf::expected<room_answer>;
  return with_room(db, room, [&](database::impl& state) -> result_type {
    auto mine = read_version(state, room);
    if (!mine)
      return std::move(mine.error());
    if (ballot < mine->promised)
      return answer(replica_outcome::preempted, std::move(*mine));
    if (ballot > mine->promised) {
      mine->promised = ballot;
      rocksdb::WriteBatch batch;
      auto status = batch.Put(state.handle(family::timeline),
                              encode_replica_key(room),
                              encode_replica_meta({ballot, mine->segments}));
      if (!status.ok())
        return to_error(status, "building the timeline batch");
      if (auto err = write(state, batch))
        return err;
    }
    return answer(replica_outcome::applied, std::move(*mine));
  });
}

caf::expected<room_answer> room_replica_append(database& db, uint64_t ballot,
                                               const room_suffix& part) {
  using result_type = caf::expected<room_answer>;
  return with_room(db, part.room, [&](database::impl& state) -> result_type {
    if (auto err = check_part(part))
      return err;
    auto mine = read_version(state, part.room);
    if (!mine)
      return std::move(mine.error());
    if (ballot < mine->promised)
      return answer(replica_outcome::preempted, std::move(*mine));
    rocksdb::WriteBatch batch;
    auto after = take_part(state, *mine, part, ballot, batch);
    if (!after)
      return std::move(after.error());
    if (!*after)
      return answer(replica_outcome::out_of_sync, std::move(*mine));
    if (auto err = write(state, batch))
      return err;
    return answer(replica_outcome::applied, std::move(**after));
  });
}

caf::expected<room_suffix> room_replica_image(database& db,
                                              const std::string& room,
                                              uint64_t from) {
  using result_type = caf::expected<room_suffix>;
  return with_room(db, room, [&](database::impl& state) -> result_type {
    auto mine = read_version(state, room);
    if (!mine)
      return std::move(mine.error());
    room_suffix result;
    result.room = room;
    result.segments = mine->segments;
    result.from = std::min(from, mine->head);
    result.positioned = mine->positioned;
    result.position = mine->position;
    bounded_iterator range{state, encode_event_key(room, result.from),
                           encode_event_key(room, mine->head)};
    auto& it = range.it;
    auto expected_seq = result.from;
    for (it->Seek(range.lower_slice); it->Valid(); it->Next()) {
      auto key = it->key();
      auto seq = decode_event_key(room, {key.data(), key.size()});
      auto value = it->value();
      auto event = decode_event_value({value.data(), value.size()});
      if (!seq || !event || *seq != expected_seq)
        return make_error(errc::corrupt_record,
                          "room " + room + " lacks or garbles event "
                            + std::to_string(expected_seq));
      ++expected_seq;
      result.events.push_back(std::move(*event));
    }
    if (auto err = to_error(it->status(), "reading the timeline"))
      return err;
    if (expected_seq != mine->head)
      return make_error(errc::corrupt_record,
                        "room " + room + " lacks events below its head "
                          + std::to_string(mine->head));
    return result;
  });
}

caf::expected<room_answer> room_replica_repair(database& db,
                                               const room_suffix& part,
                                               uint64_t promised) {
  using result_type = caf::expected<room_answer>;
  return with_room(db, part.room, [&](database::impl& state) -> result_type {
    if (auto err = check_part(part))
      return err;
    auto mine = read_version(state, part.room);
    if (!mine)
      return std::move(mine.error());
    auto log_is_newer = newer_log(part.segments, part.head(), mine->segments,
                                  mine->head);
    auto taken = part;
    if (!log_is_newer) {
      // Only the promise and the position: a part of this log's own.
      taken.segments = mine->segments;
      taken.from = mine->head;
      taken.events.clear();
    }
    rocksdb::WriteBatch batch;
    auto after = take_part(state, *mine, taken, promised, batch);
    if (!after)
      return std::move(after.error());
    if (!*after)
      return answer(replica_outcome::out_of_sync, std::move(*mine));
    if (auto err = write(state, batch))
      return err;
    return answer(replica_outcome::applied, std::move(**after));
  });
}

caf::expected<bool> room_replica_drop(database& db, const std::string& room,
                                      const room_version& expected) {
  using result_type = caf::expected<bool>;
  return with_room(db, room, [&](database::impl& state) -> result_type {
    auto held = read_version(state, room);
    if (!held)
      return std::move(held.error());
    if (held->promised != expected.promised
        || held->segments != expected.segments || held->head != expected.head
        || held->positioned != expected.positioned
        || held->position != expected.position)
      return false;
    rocksdb::WriteBatch batch;
    auto status = batch.DeleteRange(state.handle(family::timeline),
                                    encode_room_start_key(room),
                                    encode_room_end_key(room));
    if (!status.ok())
      return to_error(status, "building a room's drop");
    if (auto err = write(state, batch))
      return err;
    return true;
  });
}

caf::error
scan_room_versions(database& db,
                   const std::function<void(room_listing&&)>& visit) {
  return with_open_database(db, [&](database::impl& state) -> caf::error {
    rocksdb::ReadOptions options;
    // A full scan should not push the hot rows out of the block cache.
    options.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it{
      state.db->NewIterator(options, state.handle(family::timeline))};
    for (it->SeekToFirst(); it->Valid();) {
      auto room = decode_room_of_key({it->key().data(), it->key().size()});
      if (!room)
        return make_error(errc::corrupt_record,
                          "undecodable timeline key during a scan");
      auto version = read_version(state, *room);
      if (!version)
        return std::move(version.error());
      // Past its events in one seek: a scan costs rooms, not events.
      auto end = encode_room_end_key(*room);
      visit(room_listing{std::move(*room), std::move(*version)});
      it->Seek(end);
    }
    return to_error(it->status(), "scanning the timelines");
  });
}

} // namespace coalesce::storage
