#include "actors/node_gateway.hpp"

#include <chrono>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "messages/errc.hpp"

namespace coalesce {

namespace {

struct node_gateway_state {
  static inline const char* name = "node_gateway";
  node_services services;
  std::chrono::steady_clock::time_point started
    = std::chrono::steady_clock::now();
  bool shutting_down = false;
  uint64_t refused = 0;
};

using gateway_pointer = node_actor::stateful_pointer<node_gateway_state>;

/// The error for a request that arrives after shutdown, counted once.
caf::error refuse(gateway_pointer self) {
  ++self->state.refused;
  return make_error(errc::shutting_down,
                    "it no longer accepts requests; retry on another node or "
                    "after a restart");
}

node_actor::behavior_type node_gateway(gateway_pointer self,
                                       node_services services) {
  self->state.services = std::move(services);
  return {
    [self](queue_atom, std::vector<secret_entry>& entries)
      -> caf::result<ok_atom> {
      if (self->state.shutting_down)
        return refuse(self);
      return self->delegate(self->state.services.secrets, queue_atom::value,
                            std::move(entries));
    },
    [self](lookup_atom, secret_key& key) -> caf::result<secret_lookup> {
      if (self->state.shutting_down)
        return refuse(self);
      return self->delegate(self->state.services.secrets, lookup_atom::value,
                            std::move(key));
    },
    [self](lookup_atom, std::vector<secret_key>& keys)
      -> caf::result<std::vector<secret_lookup>> {
      if (self->state.shutting_down)
        return refuse(self);
      return self->delegate(self->state.services.secrets, lookup_atom::value,
                            std::move(keys));
    },
    [self](flush_atom) -> caf::result<ok_atom> {
      if (self->state.shutting_down)
        return refuse(self);
      return self->delegate(self->state.services.secrets, flush_atom::value);
    },
    [self](flush_atom, caf::timespan deadline) -> caf::result<ok_atom> {
      if (self->state.shutting_down)
        return refuse(self);
      return self->delegate(self->state.services.secrets, flush_atom::value,
                            deadline);
    },
    [self](append_atom, std::string& room,
           std::vector<timeline_event>& events) -> caf::result<uint64_t> {
      if (self->state.shutting_down)
        return refuse(self);
      return self->delegate(self->state.services.timeline, append_atom::value,
                            std::move(room), std::move(events));
    },
    [self](enqueue_atom,
           backfill_request& request) -> caf::result<backfill_ticket> {
      if (self->state.shutting_down)
        return refuse(self);
      return self->delegate(self->state.services.scheduler,
                            enqueue_atom::value, std::move(request));
    },
    // Awaits, cancels and detaches are still served while shutting down:
    // they concern requests already admitted, which shutdown answers.
    [self](await_atom,
           const backfill_ticket& ticket) -> caf::result<backfill_result> {
      return self->delegate(self->state.services.scheduler, await_atom::value,
                            ticket);
    },
    [self](cancel_atom, const backfill_ticket& ticket) -> caf::result<ok_atom> {
      return self->delegate(self->state.services.scheduler,
                            cancel_atom::value, ticket);
    },
    [self](detach_atom, const backfill_ticket& ticket) -> caf::result<ok_atom> {
      return self->delegate(self->state.services.scheduler,
                            detach_atom::value, ticket);
    },
    [self](stats_atom) -> caf::result<node_stats> {
      auto& st = self->state;
      node_stats stats;
      stats.uptime_s = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::steady_clock::now() - st.started)
                         .count();
      stats.shutting_down = st.shutting_down;
      stats.refused_requests = st.refused;
      auto promise = self->make_response_promise<node_stats>();
      auto fail = [promise](caf::error& err) mutable {
        promise.deliver(std::move(err));
      };
      // One service after the other: the answer carries both.
      self->request(st.services.secrets, std::chrono::seconds{10},
                    stats_atom::value)
        .then(
          [self, promise, stats, fail](secret_buffer_stats& secrets) mutable {
            stats.secrets = std::move(secrets);
            self
              ->request(self->state.services.scheduler,
                        std::chrono::seconds{10}, stats_atom::value)
              .then(
                [promise, stats](scheduler_stats& scheduler) mutable {
                  stats.scheduler = std::move(scheduler);
                  promise.deliver(std::move(stats));
                },
                fail);
          },
          fail);
      return promise;
    },
    [self](shutdown_atom) -> caf::result<ok_atom> {
      auto sender = self->current_sender();
      if (sender == nullptr || sender->node() != self->node())
        return make_error(errc::not_permitted,
                          "only the node itself may shut it down");
      if (!self->state.shutting_down) {
        self->state.shutting_down = true;
        spdlog::info("gateway: shutting down, refusing remote requests");
      }
      return ok_atom::value;
    },
  };
}

} // namespace

node_actor spawn_node_gateway(caf::actor_system& sys, node_services services) {
  return sys.spawn(node_gateway, std::move(services));
}

} // namespace coalesce
