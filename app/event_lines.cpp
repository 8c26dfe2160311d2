#include "event_lines.hpp"

#include "secret_lines.hpp"

namespace coalesce {

namespace {

/// Cuts the next space-separated field off the front of `rest`.
std::string next_field(std::string& rest) {
  auto start = rest.find_first_not_of(' ');
  if (start == std::string::npos) {
    rest.clear();
    return {};
  }
  auto end = rest.find(' ', start);
  auto field = rest.substr(start, end == std::string::npos ? std::string::npos
                                                           : end - start);
  rest = end == std::string::npos ? std::string{} : rest.substr(end + 1);
  return field;
}

} // namespace

std::optional<timeline_event> parse_event_line(const std::string& line,
                                               std::string& error) {
  auto rest = line;
  if (!rest.empty() && rest.back() == '\r')
    rest.pop_back();
  timeline_event event;
  event.event_id = next_field(rest);
  event.type = next_field(rest);
  auto timestamp = next_field(rest);
  if (event.event_id.empty() || event.type.empty() || timestamp.empty()) {
    error = "expected EVENT_ID TYPE TIMESTAMP BODY...";
    return std::nullopt;
  }
  auto parsed = parse_int64(timestamp);
  if (!parsed) {
    error = "TIMESTAMP \"" + timestamp + "\" is not a whole number";
    return std::nullopt;
  }
  event.timestamp = *parsed;
  event.body = rest;
  return event;
}

std::string format_event_line(const timeline_event& event) {
  auto line = event.event_id + " " + event.type + " "
              + std::to_string(event.timestamp);
  if (!event.body.empty())
    line += " " + event.body;
  return line;
}

} // namespace coalesce
