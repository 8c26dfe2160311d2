#pragma once

#include <cstddef>
#include <string>

/// One list of a message type's fields with their names, for the types
/// whose fields a client shows by name (the stats). CAF 0.17's `inspect`
/// carries no names, so such a type lists its fields once, in
/// `with_named_fields(x, f)` calling `f(named_field...)` in wire order, and
/// both its `inspect` and a client's printer read that list: the names
/// cannot drift from the wire format.
namespace coalesce {

template <class T>
struct named_field {
  const char* name;
  T& value;
  /// For a vector indexed by an enum (say, counters per priority): the
  /// name of each index, so that a printer can show an object instead of
  /// an array. Null for a plain value.
  std::string (*index_name)(std::size_t) = nullptr;
};

template <class T>
named_field<T> field(const char* name, T& value) {
  return {name, value};
}

template <class T>
named_field<T> indexed_field(const char* name, T& value,
                             std::string (*index_name)(std::size_t)) {
  return {name, value, index_name};
}

/// The values of `fields`, for `inspect`: `f(type_name, x.a, x.b, ...)`.
template <class Inspector, class Meta, class... Ts>
auto inspect_named_fields(Inspector& f, Meta type_name,
                          named_field<Ts>... fields) {
  return f(type_name, fields.value...);
}

} // namespace coalesce
