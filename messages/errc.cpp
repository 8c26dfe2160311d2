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

caf::error make_not_replica(std::string sentence, refusing_list list) {
  return caf::error{static_cast<uint8_t>(errc::not_replica), errc_category,
                    caf::make_message(std::move(sentence), list.version,
                                      std::move(list.nodes))};
}

std::optional<refusing_list> list_of_refusal(const caf::error& err) {
  if (!err || err.category() != errc_category
      || err.code() != static_cast<uint8_t>(errc::not_replica))
    return std::nullopt;
  const auto& ctx = err.context();
  if (!ctx.match_elements<std::string, uint64_t, std::vector<std::string>>())
    return std::nullopt;
  return refusing_list{ctx.get_as<uint64_t>(1),
                       ctx.get_as<std::vector<std::string>>(2)};
}

std::string render_errc(uint8_t code, caf::atom_value,
                        const caf::message& ctx) {
  auto result = describe(static_cast<errc>(code));
  if (!ctx.empty() && ctx.match_element<std::string>(0))
    result += ": " + ctx.get_as<std::string>(0);
  return result;
}

} // namespace coalesce
