#pragma once

#include <cstdint>

#include <caf/error.hpp>

#include <coalesce/messages/errc.hpp>

/// Errors checked by their coalesce code: `CAF_CHECK_EQUAL(code_of(err),
/// code(errc::x))` compares two numbers and prints both when they differ,
/// whatever the error's context says.
namespace coalesce::test {

/// The `errc` value of `err` as a number; 0 (no errc uses it) when `err`
/// is none or of another category, such as one of CAF's own.
inline uint8_t code_of(const caf::error& err) {
  // CAF 0.17's `category()` of a none error reads through a null pointer:
  // a check that expected an error and got none must fail, not crash.
  if (!err)
    return 0;
  return err.category() == errc_category ? err.code() : 0;
}

/// `x` as `code_of` answers it.
constexpr uint8_t code(errc x) {
  return static_cast<uint8_t>(x);
}

} // namespace coalesce::test
