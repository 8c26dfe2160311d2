#include "actors/timeline_actors.hpp"

#include <caf/all.hpp>

#include "storage/database.hpp"
#include "storage/timeline.hpp"

namespace coalesce {

timeline_actor::behavior_type
timeline_store(timeline_actor::pointer,
               std::shared_ptr<storage::database> db) {
  return {
    // Paging writes the room's position, so both handlers wait for the
    // database to recover from a fault before they write, like every writer.
    [db](page_atom, const std::string& room,
         uint32_t max_events) -> caf::result<timeline_page> {
      if (auto err = db->ready_for_writes())
        return err;
      auto page = storage::page_backwards(*db, room, max_events);
      if (!page) {
        db->recover_after(page.error());
        return std::move(page.error());
      }
      return std::move(*page);
    },
    [db](append_atom, const std::string& room,
         const std::vector<timeline_event>& events) -> caf::result<uint64_t> {
      if (auto err = db->ready_for_writes())
        return err;
      if (auto err = storage::append_events(*db, room, events)) {
        db->recover_after(err);
        return err;
      }
      return static_cast<uint64_t>(events.size());
    },
  };
}

} // namespace coalesce
