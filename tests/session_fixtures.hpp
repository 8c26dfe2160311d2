#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <coalesce/messages/session.hpp>

/// Session rows as the session suites write and compare them.
namespace coalesce::test {

/// An update row `id` at `timestamp`, its payload naming it.
inline session_update row(const std::string& id, int64_t timestamp) {
  return session_update{id, timestamp, "note", "payload of " + id};
}

/// The ids of a record's rows, in its order.
inline std::vector<std::string> ids_of(const session_record& record) {
  std::vector<std::string> result;
  for (const auto& update : record.updates)
    result.push_back(update.id);
  return result;
}

using ids = std::vector<std::string>;

} // namespace coalesce::test
