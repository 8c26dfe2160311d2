#pragma once

#include <tuple>
#include <utility>

#include <coalesce/actors/backfill_scheduler.hpp>
#include <coalesce/actors/secret_buffer.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/node/backfill_scheduler_service.hpp>
#include <coalesce/node/secret_buffer_service.hpp>
#include <coalesce/node/session_persister_service.hpp>
#include <coalesce/node/timeline_service.hpp>

/// The services a node hosts: the one place in node/ a new service names
/// itself. Starting, stopping, the handles and the settings' keys and
/// validation are derived from these two lists (coalesce/node/services.cpp,
/// settings.cpp); a service of `all_services` missing from
/// `hosted_services` fails to compile here.
namespace coalesce {

/// Each service's settings (a struct with its defaults, `add_to` and
/// `validate`), a member each.
struct service_options {
  secret_buffer_options secret_buffer;
  backfill_scheduler_options backfill_scheduler;
  session_persister_options session_persister;

  /// Calls `f` with every member, in the order of the keys in --long-help.
  template <class Self, class F>
  static void for_each(Self& self, F&& f) {
    f(self.secret_buffer);
    f(self.backfill_scheduler);
    f(self.session_persister);
  }
};

/// The services in start order; they wind down and stop in reverse. Each
/// type is a service as the node hosts it: `descriptor` (which service of
/// `all_services` it is), `start(sys, db, options, earlier)` (`earlier`:
/// this tuple, whose services before it have started),
/// `add_handles(service_handles&)`, `wind_down(self, deadline)` (answer or
/// write what it holds; false when something was not written), `to_exit()`
/// and `to_wait_for()`.
using hosted_services
  = std::tuple<secret_buffer_service, timeline_service, backfill_scheduler_service,
               session_persister_service>;

/// The descriptors of `hosted_services` (declared only, for decltype).
template <class... Hosted>
type_list<typename Hosted::descriptor...> descriptors_of(std::tuple<Hosted...>);

template <class... Hosted, class... Services>
constexpr bool hosts_each_once(type_list<Hosted...>, type_list<Services...>) {
  return sizeof...(Hosted) == sizeof...(Services)
         && (contains_v<type_list<Hosted...>, Services> && ...);
}

static_assert(hosts_each_once(decltype(descriptors_of(
                                std::declval<hosted_services>())){},
                              all_services{}),
              "every service of all_services (node_interface.hpp) is hosted "
              "once: add its NAME_service to hosted_services");

} // namespace coalesce
