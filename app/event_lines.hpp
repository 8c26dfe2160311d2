#pragma once

#include <optional>
#include <string>

#include <coalesce/messages/backfill.hpp>

/// The text form of timeline events that `timeline append` reads and
/// `backfill` prints: `EVENT_ID TYPE TIMESTAMP BODY...`, the body being the
/// rest of the line (it may hold spaces, or be empty).
namespace coalesce {

std::optional<timeline_event> parse_event_line(const std::string& line,
                                               std::string& error);

std::string format_event_line(const timeline_event& event);

} // namespace coalesce
