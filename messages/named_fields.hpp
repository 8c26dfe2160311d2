#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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
  /// What those names are, as a metric's label ("priority"). Null for a
  /// plain value.
  const char* index_label = nullptr;
  /// Or, for a vector indexed by what is known only at run time (the nodes
  /// of a cluster), the names themselves.
  const std::vector<std::string>* index_names = nullptr;

  /// Whether each index has a name (then a printer shows an object).
  bool names_indices() const {
    return index_name != nullptr || index_names != nullptr;
  }

  /// The name of index `i`: its number when it has none.
  std::string index_text(std::size_t i) const {
    if (index_name != nullptr)
      return index_name(i);
    if (index_names != nullptr && i < index_names->size())
      return (*index_names)[i];
    return std::to_string(i);
  }
};

template <class T>
named_field<T> field(const char* name, T& value) {
  return {name, value};
}

/// A vector indexed by an enum: `index_label` says what an index is (the
/// label of its metric), `index_name` names each.
template <class T>
named_field<T> indexed_field(const char* name, T& value,
                             const char* index_label,
                             std::string (*index_name)(std::size_t)) {
  return {name, value, index_name, index_label};
}

/// A vector indexed like `names` (which outlives the field): `index_label`
/// says what an index is.
template <class T>
named_field<T> named_indices_field(const char* name, T& value,
                                   const char* index_label,
                                   const std::vector<std::string>& names) {
  return {name, value, nullptr, index_label, &names};
}

/// The values of `fields`, for `inspect`: `f(type_name, x.a, x.b, ...)`.
template <class Inspector, class Meta, class... Ts>
auto inspect_named_fields(Inspector& f, Meta type_name,
                          named_field<Ts>... fields) {
  return f(type_name, fields.value...);
}

/// Accepts any list of fields; only its type matters.
struct any_fields {
  template <class... Ts>
  void operator()(Ts&&...) const {
    // nop
  }
};

/// Whether `T` lists its fields with `with_named_fields`.
template <class T, class = void>
struct has_named_fields : std::false_type {};

template <class T>
struct has_named_fields<T, std::void_t<decltype(with_named_fields(
                             std::declval<T&>(), any_fields{}))>>
  : std::true_type {};

template <class T>
struct is_vector : std::false_type {};

template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

/// A vector of numbers (a metric with a sample per index), not of text.
template <class T>
struct is_number_vector : std::false_type {};

template <class T>
struct is_number_vector<std::vector<T>> : std::is_arithmetic<T> {};

/// `x` as one log line's worth of `name=value` words, nested fields as
/// `outer.inner=value` and vectors indexed by an enum as `name.index=value`
/// (the node's periodic stats line).
template <class T>
std::string flat_fields(T& x, const std::string& prefix = {});

namespace detail {

template <class T>
std::string scalar_text(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else {
    static_assert(std::is_arithmetic_v<T>,
                  "a stats field must be a number, a flag, a string, a "
                  "vector of those or a type with named fields");
    return std::to_string(value);
  }
}

template <class T>
void append_flat(std::string& out, const std::string& name, T& value) {
  std::string word;
  if constexpr (has_named_fields<T>::value) {
    word = flat_fields(value, name + ".");
  } else if constexpr (is_vector<T>::value) {
    std::string joined;
    for (const auto& element : value)
      joined += (joined.empty() ? "" : ",") + scalar_text(element);
    word = name + "=[" + joined + "]";
  } else {
    word = name + "=" + scalar_text(value);
  }
  if (!word.empty())
    out += (out.empty() ? "" : " ") + word;
}

template <class T>
void append_field(std::string& out, const std::string& prefix,
                  const named_field<T>& field) {
  if constexpr (is_vector<T>::value) {
    if (field.names_indices()) {
      for (std::size_t i = 0; i < field.value.size(); ++i)
        append_flat(out, prefix + field.name + "." + field.index_text(i),
                    field.value[i]);
      return;
    }
  }
  append_flat(out, prefix + field.name, field.value);
}

} // namespace detail

template <class T>
std::string flat_fields(T& x, const std::string& prefix) {
  std::string out;
  with_named_fields(x, [&](const auto&... fields) {
    (detail::append_field(out, prefix, fields), ...);
  });
  return out;
}

} // namespace coalesce
