#include <coalesce/actors/node_address.hpp>

namespace coalesce {

std::optional<node_address> parse_node_address(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return std::nullopt;
  auto digits = text.substr(colon + 1);
  if (digits.size() > 5
      || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  auto port = std::stoul(digits);
  if (port == 0 || port > 65535)
    return std::nullopt;
  return node_address{text.substr(0, colon), static_cast<uint16_t>(port)};
}

} // namespace coalesce
