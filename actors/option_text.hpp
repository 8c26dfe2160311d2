#pragma once

#include <string>

#include <caf/deep_to_string.hpp>
#include <caf/timespan.hpp>

/// The words every settings struct uses in --long-help and in its
/// validation sentences, so that each reads the same.
namespace coalesce {

/// "what it is (rule); default X": --long-help then shows every default.
template <class T>
std::string described(const char* what, const T& default_value) {
  return std::string{what} + "; default " + caf::deep_to_string(default_value);
}

/// A duration as a validation sentence shows it: CAF 0.17 prints every
/// negative duration as "0d", which would hide what was wrong.
inline std::string duration_text(caf::timespan x) {
  if (x.count() < 0)
    return "-" + caf::deep_to_string(-x);
  return caf::deep_to_string(x);
}

/// A key as a validation sentence names it: "GROUP.NAME".
inline std::string option_key(const std::string& group, const char* name) {
  return group + "." + name;
}

} // namespace coalesce
