#include <coalesce/messages/backfill.hpp>

namespace coalesce {

std::string to_string(priority x) {
  switch (x) {
    case priority::low:
      return "low";
    case priority::normal:
      return "normal";
    case priority::high:
      return "high";
  }
  return "priority(" + std::to_string(static_cast<int>(x)) + ")";
}

std::string to_string(stop_reason x) {
  switch (x) {
    case stop_reason::stop_condition_met:
      return "stop_condition_met";
    case stop_reason::reached_timeline_start:
      return "reached_timeline_start";
    case stop_reason::no_data_available:
      return "no_data_available";
    case stop_reason::batch_limit_reached:
      return "batch_limit_reached";
    case stop_reason::failed:
      return "failed";
    case stop_reason::cancelled:
      return "cancelled";
  }
  return "stop_reason(" + std::to_string(static_cast<int>(x)) + ")";
}

} // namespace coalesce
