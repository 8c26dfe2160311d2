#include <coalesce/actors/timeline_actors.hpp>

#include <caf/all.hpp>

#include <coalesce/actors/guarded_write.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/timeline.hpp>
#include <coalesce/storage/timeline_replica.hpp>

namespace coalesce {

namespace {

/// Answers `x`, or its error.
template <class T>
caf::result<T> answer(caf::expected<T> x) {
  if (!x)
    return std::move(x.error());
  return std::move(*x);
}

} // namespace

timeline_replica_store_actor::behavior_type
timeline_store(timeline_replica_store_actor::pointer,
               std::shared_ptr<storage::database> db) {
  return {
    // Paging reads the room's position and committing writes it; every
    // handler waits for the database to recover from a fault first, like
    // every writer.
    [db](page_atom, const std::string& room,
         uint32_t max_events) -> caf::result<timeline_page> {
      auto page = guarded_write(
        *db, [&] { return storage::page_backwards(*db, room, max_events); });
      if (!page)
        return std::move(page.error());
      return std::move(*page);
    },
    [db](commit_atom, const std::string& room,
         const page_cursor& cursor) -> caf::result<ok_atom> {
      if (auto err = guarded_write(
            *db, [&] { return storage::commit_page(*db, room, cursor); }))
        return err;
      return ok_atom::value;
    },
    [db](append_atom, const std::string& room,
         const std::vector<timeline_event>& events) -> caf::result<uint64_t> {
      if (auto err = guarded_write(
            *db, [&] { return storage::append_events(*db, room, events); }))
        return err;
      return static_cast<uint64_t>(events.size());
    },
    [db](replica_atom, room_atom, prepare_atom, const std::string& room,
         uint64_t ballot) {
      return answer(guarded_write(*db, [&] {
        return storage::room_replica_prepare(*db, room, ballot);
      }));
    },
    [db](replica_atom, room_atom, append_atom, uint64_t ballot,
         const room_suffix& part) {
      return answer(guarded_write(
        *db, [&] { return storage::room_replica_append(*db, ballot, part); }));
    },
    [db](replica_atom, room_atom, image_atom, const std::string& room,
         uint64_t from) {
      return answer(guarded_write(
        *db, [&] { return storage::room_replica_image(*db, room, from); }));
    },
    [db](replica_atom, room_atom, drop_atom, const std::string& room,
         const room_version& expected) {
      return answer(guarded_write(*db, [&] {
        return storage::room_replica_drop(*db, room, expected);
      }));
    },
    [db](replica_atom, room_atom, install_atom, const room_suffix& part,
         uint64_t promised) {
      return answer(guarded_write(*db, [&] {
        return storage::room_replica_repair(*db, part, promised);
      }));
    },
  };
}

} // namespace coalesce
