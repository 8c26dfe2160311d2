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

caf::error make_lists_not_counted(std::string sentence,
                                  std::vector<std::vector<std::string>> lists) {
  // One vector, each list's nodes closed by an empty entry: a vector of
  // vectors is no type CAF 0.17 serializes unannounced.
  std::vector<std::string> flat;
  for (auto& list : lists) {
    for (auto& node : list)
      flat.push_back(std::move(node));
    flat.emplace_back();
  }
  return caf::error{static_cast<uint8_t>(errc::lists_not_counted),
                    errc_category,
                    caf::make_message(std::move(sentence), std::move(flat))};
}

std::optional<std::vector<std::vector<std::string>>>
uncounted_lists_of(const caf::error& err) {
  if (!err || err.category() != errc_category
      || err.code() != static_cast<uint8_t>(errc::lists_not_counted))
    return std::nullopt;
  const auto& ctx = err.context();
  if (!ctx.match_elements<std::string, std::vector<std::string>>())
    return std::nullopt;
  std::vector<std::vector<std::string>> lists(1);
  for (const auto& node : ctx.get_as<std::vector<std::string>>(1)) {
    if (node.empty())
      lists.emplace_back();
    else
      lists.back().push_back(node);
  }
  lists.pop_back(); // what follows the last list's end
  return lists;
}

std::string render_errc(uint8_t code, caf::atom_value,
                        const caf::message& ctx) {
  auto result = describe(static_cast<errc>(code));
  if (!ctx.empty() && ctx.match_element<std::string>(0))
    result += ": " + ctx.get_as<std::string>(0);
  return result;
}

} // namespace coalesce
