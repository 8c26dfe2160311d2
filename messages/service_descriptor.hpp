#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/replies_to.hpp>

/// What a service descriptor is written in. A descriptor is one struct per
/// service, at the end of its `NAME_interface.hpp`, that tells the node's
/// shared code everything it needs about the service; `all_services` in
/// coalesce/messages/node_interface.hpp lists them, and the node's lists
/// (handles, stats, interface, message types, routing, metrics) are derived
/// from it. A descriptor has these members, each required (a service
/// without stats says so):
///
/// - `using requests = NAME_requests;` the typed handle the node's gateway
///   forwards to (its requests join `node_actor`);
/// - `struct handle_member { NAME_requests NAME; };` and
///   `static constexpr auto handle = &handle_member::NAME;` its member of
///   `service_handles`;
/// - its stats: `struct stats_member { NAME_stats NAME; };`,
///   `static constexpr auto stats = &stats_member::NAME;` (its member of
///   `node_stats`), `stats_name` (that member's name on the wire), and
///   `using gauges = members<...>;` and `using counters = members<...>;`:
///   every number field of its stats is in exactly one (a gauge may go
///   down, a counter only grows); or `static constexpr no_stats stats{};`
///   for none;
/// - `message_types = type_names(message_type<T>{"coalesce.T"}, ...)`:
///   every type its messages carry, with the name it crosses nodes under (a
///   name is wire format: never rename one);
/// - `routed_by(...)`: for every request, the rule a cluster routes it by
///   (the kinds below);
/// - `using issues = type_list<...>;` what its requests hand out that later
///   requests bring back to the node that issued it (a ticket, a lease);
/// - `using served_while_shutting_down = type_list<...>;` the verbs a
///   shutting-down node still serves because they concern admitted work.
///
/// coalesce/messages/service_checks.cpp checks every descriptor when the
/// messages library compiles: a request without a routing rule, a number
/// field neither gauge nor counter, a type a request carries that no
/// descriptor registers, fail the build with a sentence saying what to add.
namespace coalesce {

// -- a type list ---------------------------------------------------------------

/// A list of types, for the lists a descriptor holds and the lists derived
/// from them (CAF's own is in caf::detail, not for us to build on).
template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);

  /// `F<Ts...>`.
  template <template <class...> class F>
  using apply = F<Ts...>;
};

/// Whether `List` holds `T`.
template <class List, class T>
struct list_contains;

template <class... Ts, class T>
struct list_contains<type_list<Ts...>, T>
  : std::bool_constant<(std::is_same_v<Ts, T> || ...)> {};

template <class List, class T>
constexpr bool contains_v = list_contains<List, T>::value;

/// The first type of a list.
template <class List>
struct list_front;

template <class T, class... Ts>
struct list_front<type_list<T, Ts...>> {
  using type = T;
};

template <class List>
using front_t = typename list_front<List>::type;

/// Joins lists: `decltype(type_list<A>{} + type_list<B>{})` is
/// `type_list<A, B>` (declared only, for decltype).
template <class... As, class... Bs>
type_list<As..., Bs...> operator+(type_list<As...>, type_list<Bs...>);

template <class... Lists>
using concat_t = decltype((type_list<>{} + ... + Lists{}));

/// The types of `List` for which `Pred<T>::value` holds, in order.
template <template <class> class Pred, class List>
struct list_filter;

template <template <class> class Pred, class... Ts>
struct list_filter<Pred, type_list<Ts...>> {
  using type = concat_t<
    std::conditional_t<Pred<Ts>::value, type_list<Ts>, type_list<>>...>;
};

template <template <class> class Pred, class List>
using filter_t = typename list_filter<Pred, List>::type;

/// Calls `f(T{})` for every `T` of the list, in order (for lists of empty
/// types: descriptors, atoms).
template <class... Ts, class F>
void for_each_type(type_list<Ts...>, F&& f) {
  (f(Ts{}), ...);
}

// -- the requests of a typed handle --------------------------------------------

/// What a typed handle's `signatures` lists, as a `type_list`.
template <template <class...> class List, class... Ts>
type_list<Ts...> as_type_list(List<Ts...>);

template <class Handle>
using signatures_in
  = decltype(as_type_list(std::declval<typename Handle::signatures>()));

/// One message signature of a typed handle (`replies_to<In...>::with<Out...>`)
/// taken apart: what a request carries (its verb first) and what it answers.
template <class Signature>
struct request_signature;

template <template <class...> class List, class... Inputs, class... Outputs>
struct request_signature<caf::typed_mpi<List<Inputs...>,
                                        caf::output_tuple<Outputs...>>> {
  using inputs = type_list<Inputs...>;
  using outputs = type_list<Outputs...>;
};

template <class Signature>
using inputs_of = typename request_signature<Signature>::inputs;

template <class Signature>
using outputs_of = typename request_signature<Signature>::outputs;

// -- message types -------------------------------------------------------------

/// A message type and the name it crosses nodes under.
template <class T>
struct message_type {
  using type = T;
  const char* name;
};

/// Message types with their names, as a descriptor lists them:
/// `type_names(message_type<T>{"coalesce.T"}, ...)`. The types are its
/// template arguments, the names in the same order.
template <class... Ts>
struct named_types {
  const char* names[sizeof...(Ts) + 1];

  /// Calls `f(message_type<T>{name})` for every type, in order.
  template <class F>
  void for_each(F&& f) const {
    std::size_t i = 0;
    (f(message_type<Ts>{names[i++]}), ...);
  }
};

template <class... Ts>
constexpr named_types<Ts...> type_names(message_type<Ts>... xs) {
  return {{xs.name..., nullptr}};
}

// -- routing -------------------------------------------------------------------

/// What kind of key a request names.
enum class key_kind : uint8_t {
  chat = 0,
  session = 1,
  room = 2,
};

/// A key of a request. `value` views into the request, which must outlive
/// it.
struct routing_key {
  key_kind kind;
  std::string_view value;
};

/// "chat", "session" or "room".
inline const char* to_string(key_kind x) {
  switch (x) {
    case key_kind::chat:
      return "chat";
    case key_kind::session:
      return "session";
    default:
      return "room";
  }
}

/// "room R", "chat C", "session S": how an error names a key.
inline std::string describe(const routing_key& x) {
  return std::string{to_string(x.kind)} + " " + std::string{x.value};
}

using routing_keys_t = std::vector<routing_key>;

// The rules a descriptor's `routed_by` answers, one kind per way a cluster
// routes a request (coalesce/client/cluster_client.hpp).

/// The request names one key: its replicas serve it (a node alone: that
/// node), the first the client reaches coordinating.
struct one_key {
  one_key(key_kind kind, std::string_view value) : key{kind, value} {
    // nop
  }

  routing_key key;
};

/// The request is a batch (one vector) of items each naming a key, in the
/// batch's order: a cluster client splits it by owner.
struct each_key {
  /// The key `member` of every item of `xs`, as `kind`.
  template <class T>
  static each_key of(key_kind kind, const std::vector<T>& xs,
                     std::string T::*member) {
    each_key result;
    result.keys.reserve(xs.size());
    for (const auto& x : xs)
      result.keys.push_back({kind, x.*member});
    return result;
  }

  routing_keys_t keys;
};

/// The request concerns every key a node holds (a flush): a cluster client
/// sends it to every node and adds up the answers; a node serves it.
struct every_node {};

/// The request carries something one node issued (its one argument, a type
/// of the service's `issues`), which exists only there: a cluster client
/// sends it to the node that issued it, and forgets it once answered.
struct issuer {};

// -- stats ---------------------------------------------------------------------

/// A service's `stats` when it has none: no member of `node_stats`, and the
/// gateway asks it for none.
struct no_stats {};

/// Fields of a stats type, as a descriptor lists its `gauges` and
/// `counters`: `members<&NAME_stats::pending, ...>`.
template <auto... Members>
struct members {};

template <class Service>
constexpr bool has_stats
  = !std::is_same_v<std::remove_const_t<decltype(Service::stats)>, no_stats>;

/// The type of the member `M` points to (`T` for `T C::*`).
template <class M>
struct member_type;

template <class T, class C>
struct member_type<T C::*> {
  using type = T;
};

/// A service's stats type (for a service with stats).
template <class Service>
using stats_type_of = typename member_type<
  std::remove_const_t<decltype(Service::stats)>>::type;

} // namespace coalesce
