#include "actors/timeline_actors.hpp"

#include <caf/all.hpp>

#include "storage/database.hpp"
#include "storage/timeline.hpp"

namespace coalesce {

timeline_actor::behavior_type
timeline_store(timeline_actor::pointer,
               std::shared_ptr<storage::database> db) {
  return {
    [db](page_atom, const std::string& room,
         uint32_t max_events) -> caf::result<timeline_page> {
      auto page = storage::page_backwards(*db, room, max_events);
      if (!page)
        return std::move(page.error());
      return std::move(*page);
    },
    [db](append_atom, const std::string& room,
         const std::vector<timeline_event>& events) -> caf::result<uint64_t> {
      if (auto err = storage::append_events(*db, room, events))
        return err;
      return static_cast<uint64_t>(events.size());
    },
  };
}

} // namespace coalesce
