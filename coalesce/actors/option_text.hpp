#pragma once

#include <string>

#include <caf/deep_to_string.hpp>

/// The words every settings struct uses in --long-help and in its
/// validation sentences, so that each reads the same.
namespace coalesce {

/// "what it is (rule); default X": --long-help then shows every default.
template <class T>
std::string described(const char* what, const T& default_value) {
  return std::string{what} + "; default " + caf::deep_to_string(default_value);
}

/// A key as a validation sentence names it: "GROUP.NAME".
inline std::string option_key(const std::string& group, const char* name) {
  return group + "." + name;
}

} // namespace coalesce
