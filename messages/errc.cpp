#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

const errc_text* text_of(errc x) {
  auto index = static_cast<std::size_t>(x);
  if (index == 0 || index > std::size(errc_texts))
    return nullptr;
  return &errc_texts[index - 1];
}

} // namespace

std::string to_string(errc x) {
  if (auto text = text_of(x))
    return text->name;
  return "errc(" + std::to_string(static_cast<int>(x)) + ")";
}

std::string describe(errc x) {
  if (auto text = text_of(x))
    return text->sentence;
  return to_string(x);
}

caf::error make_error(errc x) {
  return caf::error{static_cast<uint8_t>(x), errc_category};
}

caf::error make_error(errc x, std::string context) {
  return caf::error{static_cast<uint8_t>(x), errc_category,
                    caf::make_message(std::move(context))};
}

std::string render_errc(uint8_t code, caf::atom_value,
                        const caf::message& ctx) {
  auto result = describe(static_cast<errc>(code));
  if (ctx.match_elements<std::string>())
    result += ": " + ctx.get_as<std::string>(0);
  return result;
}

} // namespace coalesce
