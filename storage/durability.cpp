#include <coalesce/storage/durability.hpp>

namespace coalesce::storage {

std::string to_string(durability x) {
  return x == durability::synced ? "synced" : "buffered";
}

std::optional<durability> parse_durability(const std::string& text) {
  if (text == "synced")
    return durability::synced;
  if (text == "buffered")
    return durability::buffered;
  return std::nullopt;
}

} // namespace coalesce::storage
