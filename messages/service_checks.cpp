// The compile-time checks of every service's descriptor (what a descriptor
// holds: coalesce/messages/service_descriptor.hpp). Compiling this file is
// the check: an entry a new service forgot fails the build here, with a
// sentence saying what to add, rather than a node routing, registering or
// exporting the service wrongly at run time. Nothing here runs.

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/type_nr.hpp>

#include <coalesce/messages/named_fields.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/messages/service_descriptor.hpp>

namespace coalesce {

namespace {

// -- routing -------------------------------------------------------------------

template <class Service, class Atom, class... Args>
constexpr bool check_routing(type_list<Atom, Args...>) {
  static_assert(has_routing_rule<Service, Atom, Args...>::value,
                "a request has no routing rule: add `static RULE "
                "routed_by(ATOM, const ARGS&...)` for it to its service's "
                "descriptor (RULE: one_key, each_key, every_node or issuer)");
  if constexpr (has_routing_rule<Service, Atom, Args...>::value) {
    using rule = decltype(Service::routed_by(std::declval<const Atom&>(),
                                             std::declval<const Args&>()...));
    if constexpr (std::is_same_v<rule, issuer>) {
      static_assert(sizeof...(Args) == 1
                      && contains_v<typename Service::issues,
                                    front_t<type_list<Args..., void>>>,
                    "a request routed to its issuer carries one argument, "
                    "which its service's descriptor lists in `issues`");
    } else {
      static_assert(std::is_same_v<rule, one_key>
                      || std::is_same_v<rule, each_key>
                      || std::is_same_v<rule, every_node>,
                    "routed_by answers one_key, each_key, every_node or "
                    "issuer");
    }
  }
  return true;
}

// -- message types -------------------------------------------------------------

template <class... Ts>
type_list<Ts...> registered_in(const named_types<Ts...>&);

template <class... Services>
struct registered_by {
  using type = concat_t<decltype(registered_in(Services::message_types))...,
                        type_list<node_stats>>;
};

/// Every type registered under a name (`for_each_message_type`).
using registered_types =
  typename all_services::apply<registered_by>::type;

/// What registering `T` covers besides `T`: `std::vector<T>`.
template <class T>
struct element {
  using type = T;
};

template <class T>
struct element<std::vector<T>> {
  using type = T;
};

template <class T>
constexpr bool is_registered = std::is_void_v<T> || caf::type_nr<T>::value != 0
                               || contains_v<registered_types,
                                             typename element<T>::type>;

template <class T>
constexpr bool check_registered() {
  static_assert(is_registered<T>,
                "a request carries or answers a type that crosses nodes "
                "under no name: add `message_type<T>{\"coalesce.NAME\"}` to "
                "the message_types of its service's descriptor");
  return true;
}

template <class... Ts>
constexpr bool check_registered(type_list<Ts...>) {
  return (check_registered<Ts>() && ...);
}

// -- one request ---------------------------------------------------------------

template <class Service, class Signature>
constexpr bool check_request() {
  return check_routing<Service>(inputs_of<Signature>{})
         && check_registered(inputs_of<Signature>{})
         && check_registered(outputs_of<Signature>{});
}

template <class Service, class... Signatures>
constexpr bool check_requests(type_list<Signatures...>) {
  return (check_request<Service, Signatures>() && ...);
}

/// The verb of each request.
template <class... Signatures>
type_list<front_t<inputs_of<Signatures>>...> verbs(type_list<Signatures...>);

/// What the requests answer.
template <class... Signatures>
concat_t<outputs_of<Signatures>...> answers(type_list<Signatures...>);

template <class Service, class... Atoms>
constexpr bool check_served_while_shutting_down(type_list<Atoms...>) {
  using own = decltype(verbs(signatures_in<typename Service::requests>{}));
  static_assert((contains_v<own, Atoms> && ...),
                "served_while_shutting_down lists a verb none of the "
                "service's requests has");
  return true;
}

template <class Service, class... Issued>
constexpr bool check_issues(type_list<Issued...>) {
  using answered
    = decltype(answers(signatures_in<typename Service::requests>{}));
  static_assert((contains_v<answered, Issued> && ...),
                "issues lists a type none of the service's requests answers");
  return true;
}

// -- stats ---------------------------------------------------------------------

/// A field that is a metric of its own kind: a number or a vector of
/// numbers (a flag is always a gauge, text is no metric).
template <class T>
constexpr bool is_number_field
  = (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
    || is_number_vector<T>::value;

/// Counts the number fields of a `with_named_fields` list.
struct count_number_fields {
  template <class... Ts>
  auto operator()(const named_field<Ts>&...) const {
    return std::integral_constant<std::size_t,
                                  (std::size_t{is_number_field<Ts>} + ...
                                   + 0)>{};
  }
};

template <class Stats>
constexpr std::size_t number_fields
  = decltype(with_named_fields(std::declval<Stats&>(),
                               count_number_fields{}))::value;

template <class A, class B>
constexpr bool same_member(A x, B y) {
  if constexpr (std::is_same_v<A, B>)
    return x == y;
  else
    return false;
}

/// How often `Member` is among `Members`.
template <auto Member, auto... Members>
constexpr std::size_t times_listed() {
  return (std::size_t{same_member(Member, Members)} + ... + 0);
}

template <auto... Members>
constexpr bool distinct(members<Members...>) {
  return ((times_listed<Members, Members...>() == 1) && ...);
}

template <class Stats, class T>
constexpr bool is_number_member(T Stats::*) {
  return is_number_field<T>;
}

/// A member of another type.
template <class Stats, class M>
constexpr bool is_number_member(M) {
  return false;
}

/// `Gauges` and `Counters` classify every number field of `Stats`, each
/// once.
template <class Stats, auto... Gauges, auto... Counters>
constexpr bool check_classified(members<Gauges...>, members<Counters...>) {
  static_assert((is_number_member<Stats>(Gauges) && ...)
                  && (is_number_member<Stats>(Counters) && ...),
                "gauges and counters list number fields of the service's "
                "own stats type (a flag is always a gauge, text no metric)");
  static_assert(distinct(members<Gauges..., Counters...>{}),
                "a stats field is listed twice in gauges and counters");
  static_assert(sizeof...(Gauges) + sizeof...(Counters)
                  == number_fields<Stats>,
                "a number field of the stats is neither in gauges nor in "
                "counters: add it to the one that fits (a gauge may go down, "
                "a counter only grows)");
  return true;
}

template <class Stats, class Kinds>
constexpr bool check_classified() {
  return check_classified<Stats>(typename Kinds::gauges{},
                                 typename Kinds::counters{});
}

template <class Service>
constexpr bool check_stats() {
  if constexpr (has_stats<Service>) {
    using stats = stats_type_of<Service>;
    static_assert(contains_v<registered_types, stats>,
                  "the service's stats type is not in its message_types");
    return check_classified<stats, Service>();
  } else {
    return true;
  }
}

// -- one service ---------------------------------------------------------------

template <class Service>
constexpr bool check_service() {
  using requests = signatures_in<typename Service::requests>;
  return check_requests<Service>(requests{})
         && check_served_while_shutting_down<Service>(
           typename Service::served_while_shutting_down{})
         && check_issues<Service>(typename Service::issues{}) && check_stats<Service>();
}

template <class... Services>
constexpr bool check_services(type_list<Services...>) {
  return (check_service<Services>() && ...);
}

static_assert(check_services(all_services{}));
static_assert(check_classified<node_stats, node_own_stats>());

} // namespace

} // namespace coalesce
