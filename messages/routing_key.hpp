#pragma once

#include <type_traits>
#include <utility>

#include <coalesce/messages/node_interface.hpp>
#include <coalesce/messages/service_descriptor.hpp>

/// Which key a request is about, so that a cluster routes it to one node:
/// a chat's secrets by the chat, a session by its id, a room's timeline and
/// its backfills by the room. Each service's descriptor says it per request
/// (`routed_by`; the kinds of rule and `routing_key` itself are in
/// service_descriptor.hpp). One definition for the client that routes and
/// the node's gateway that refuses a key it does not own.
namespace coalesce {

/// Whether `Service`'s requests include one carrying `Inputs` (its verb
/// first).
template <class Service, class Inputs>
struct serves_request {
  template <class Signatures>
  struct any;

  template <class... Signatures>
  struct any<type_list<Signatures...>>
    : std::bool_constant<(std::is_same_v<inputs_of<Signatures>, Inputs>
                          || ...)> {};

  static constexpr bool value
    = any<signatures_in<typename Service::requests>>::value;
};

/// The service one of whose requests carries `Inputs`.
template <class Inputs>
struct service_serving {
  template <class Service>
  struct test : std::bool_constant<serves_request<Service, Inputs>::value> {};

  using found = filter_t<test, all_services>;
  static_assert(found::size == 1,
                "no service (or more than one) serves this request");
  using type = front_t<found>;
};

/// Whether `Service`'s descriptor has a routing rule for a request carrying
/// `Atom, Args...`.
template <class Service, class Atom, class... Args>
struct has_routing_rule {
  template <class S, class = void>
  struct test : std::false_type {};

  template <class S>
  struct test<S, std::void_t<decltype(S::routed_by(
                   std::declval<const Atom&>(), std::declval<const Args&>()...))>>
    : std::true_type {};

  static constexpr bool value = test<Service>::value;
};

/// The rule the request `atom, args...` is routed by: `one_key`,
/// `each_key`, `every_node` or `issuer`, as its service's descriptor says.
template <class Atom, class... Args>
auto routing_rule(Atom atom, const Args&... args) {
  using service =
    typename service_serving<type_list<Atom, Args...>>::type;
  if constexpr (has_routing_rule<service, Atom, Args...>::value) {
    return service::routed_by(atom, args...);
  } else {
    static_assert(has_routing_rule<service, Atom, Args...>::value,
                  "a request has no routing rule: add `static RULE "
                  "routed_by(ATOM, const ARGS&...)` for it to its service's "
                  "descriptor (service_descriptor.hpp)");
    return every_node{};
  }
}

inline routing_keys_t keys_of(const one_key& x) {
  return {x.key};
}

inline routing_keys_t keys_of(each_key x) {
  return std::move(x.keys);
}

inline routing_keys_t keys_of(every_node) {
  return {};
}

inline routing_keys_t keys_of(issuer) {
  return {};
}

/// The keys the request `atom, args...` names, in order; none when it
/// names none (it concerns every key a node holds, or carries what one node
/// issued, which exists only there).
template <class Atom, class... Args>
routing_keys_t routing_keys(Atom atom, const Args&... args) {
  return keys_of(routing_rule(atom, args...));
}

} // namespace coalesce
