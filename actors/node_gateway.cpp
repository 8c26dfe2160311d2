#include <coalesce/actors/node_gateway.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

struct node_gateway_state {
  static inline const char* name = "node_gateway";
  service_handles services;
  foreign_owner_fn foreign_owner;
  std::shared_ptr<const peer_counters> peers;
  replica_endpoints replicas;
  std::chrono::steady_clock::time_point started
    = std::chrono::steady_clock::now();
  bool shutting_down = false;
  uint64_t refused = 0;
};

using gateway_pointer = node_actor::stateful_pointer<node_gateway_state>;

/// How long the gateway waits for one service's stats.
constexpr auto stats_timeout = std::chrono::seconds{10};

/// The error for a request that arrives after shutdown, counted once.
caf::error refuse(gateway_pointer self) {
  ++self->state.refused;
  return make_error(errc::node_shutting_down,
                    "it no longer accepts requests; retry on another node or "
                    "after a restart");
}

/// The refusal of a request naming a key another node owns: the first
/// such key of the request, with its owner.
template <class Atom, class... Args>
std::optional<caf::error>
refuse_foreign_key(gateway_pointer self, Atom atom, const Args&... args) {
  const auto& foreign_owner = self->state.foreign_owner;
  if (!foreign_owner)
    return std::nullopt;
  for (const auto& key : routing_keys(atom, args...)) {
    auto owner = foreign_owner(key);
    if (owner.empty())
      continue;
    auto sentence = describe(key) + " belongs to " + owner;
    // The list goes with the refusal: a client with an older one adopts it.
    if (const auto& peers = self->state.peers; peers && !peers->cluster.empty())
      return make_not_replica(std::move(sentence),
                              {peers->cluster_version, peers->cluster});
    return make_error(errc::not_replica, std::move(sentence));
  }
  return std::nullopt;
}

/// The handler that forwards one request of `Service` (its verb `Atom`,
/// its arguments `Args`, its answer `Outputs`): refuse while shutting down
/// (unless its descriptor says otherwise), otherwise delegate (the service
/// answers the caller directly and sees the caller as the requester).
template <class Service, class Handle, class Atom, class... Args,
          class... Outputs>
auto forwarder(gateway_pointer self, Handle service, type_list<Atom, Args...>,
               type_list<Outputs...>) {
  return [self, service](Atom atom, Args&... args) -> caf::result<Outputs...> {
    if (self->state.shutting_down
        && !served_while_shutting_down<Service, Atom>)
      return refuse(self);
    if (!service)
      return make_error(errc::invalid_request,
                        "this node does not host that service");
    if (auto refusal = refuse_foreign_key(self, atom, args...))
      return std::move(*refusal);
    if (auto refusal = refuse_uncounted(self, args...))
      return std::move(*refusal);
    return self->delegate(service, atom, std::move(args)...);
  };
}

/// One forwarder per request of `Service`, as a tuple.
template <class Service, class Handle, class... Signatures>
auto forwarders(gateway_pointer self, const Handle& service,
                type_list<Signatures...>) {
  return std::make_tuple(forwarder<Service>(self, service,
                                            inputs_of<Signatures>{},
                                            outputs_of<Signatures>{})...);
}

template <class Service>
auto forwarders(gateway_pointer self, Service) {
  return forwarders<Service>(self, self->state.services.*Service::handle,
                             signatures_in<typename Service::requests>{});
}

/// Asks every service for its stats and delivers `node_stats` once all have
/// answered, or the first error.
class stats_gathering {
public:
  stats_gathering(gateway_pointer self, node_stats stats,
                  caf::typed_response_promise<node_stats> promise)
    : self_(self),
      state_(std::make_shared<shared>(shared{std::move(stats),
                                             std::move(promise), 0, false})) {
    // nop
  }

  /// Requests the stats of `Service`, into its member of `node_stats`.
  template <class Service>
  void ask(Service, const service_handles& services) {
    if constexpr (has_stats<Service>) {
      const auto& handle = services.*Service::handle;
      if (!handle)
        return; // not hosted here: its stats stay zero
      using stats = stats_type_of<Service>;
      using stats_source
        = caf::typed_actor<caf::replies_to<stats_atom>::with<stats>>;
      ++state_->outstanding;
      auto state = state_;
      self_->request(caf::actor_cast<stats_source>(handle), stats_timeout,
                     stats_atom::value)
        .then(
          [state](stats& answer) {
            state->stats.*Service::stats = std::move(answer);
            if (--state->outstanding == 0 && !state->failed)
              state->promise.deliver(std::move(state->stats));
          },
          [state](caf::error& err) {
            if (!state->failed) {
              state->failed = true;
              state->promise.deliver(std::move(err));
            }
          });
    }
  }

  /// Delivers at once when no service has stats.
  void finish() {
    if (state_->outstanding == 0 && !state_->failed)
      state_->promise.deliver(std::move(state_->stats));
  }

private:
  struct shared {
    node_stats stats;
    caf::typed_response_promise<node_stats> promise;
    int outstanding;
    bool failed;
  };

  gateway_pointer self_;
  std::shared_ptr<shared> state_;
};

template <class... Services>
struct service_forwarders {
  static auto make(gateway_pointer self) {
    return std::tuple_cat(forwarders(self, Services{})...);
  }
};

caf::result<node_stats> gather_stats(gateway_pointer self) {
  auto& st = self->state;
  node_stats stats;
  stats.uptime_s = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::steady_clock::now() - st.started)
                     .count();
  stats.shutting_down = st.shutting_down;
  stats.refused_requests = st.refused;
  if (st.peers != nullptr) {
    stats.peers_down = st.peers->down.load();
    stats.peer_losses = st.peers->losses.load();
    stats.replica_requests = st.peers->replica_requests.load();
    stats.replica_failures = st.peers->replica_failures.load();
    stats.catching_up = st.peers->catching_up.load();
    stats.sync_rounds = st.peers->sync_rounds.load();
    stats.keys_repaired = st.peers->keys_repaired.load();
    stats.keys_handed_off = st.peers->keys_handed_off.load();
    for (const auto& held : st.peers->keys_to_hand_off)
      stats.keys_to_hand_off += held.load();
    stats.keys_dropped = st.peers->keys_dropped.load();
    stats.cluster = st.peers->cluster;
    stats.cluster_version = st.peers->cluster_version;
    stats.peers_on_other_lists = st.peers->peers_on_other_lists.load();
    stats.cluster_lists_counted = st.peers->cluster_lists_counted.load();
    for (const auto& node : st.peers->by_node) {
      stats.peer_down.push_back(node.down ? 1 : 0);
      stats.replica_requests_by_peer.push_back(node.replica_requests.load());
      stats.replica_failures_by_peer.push_back(node.replica_failures.load());
    }
  }
  auto promise = self->make_response_promise<node_stats>();
  stats_gathering gathering{self, std::move(stats), promise};
  for_each_service([&](auto service) { gathering.ask(service, st.services); });
  gathering.finish();
  return promise;
}

caf::result<ok_atom> begin_shutdown(gateway_pointer self) {
  auto sender = self->current_sender();
  if (sender == nullptr || sender->node() != self->node())
    return make_error(errc::not_permitted,
                      "only the node itself may shut it down");
  if (!self->state.shutting_down) {
    self->state.shutting_down = true;
    spdlog::info("gateway: shutting down, refusing remote requests");
  }
  return ok_atom::value;
}

/// A message no handler takes, answered with a coalesce error rather than
/// CAF's bare unexpected_message (which also prints to stderr). One that
/// arrives empty is a request the middleman could not decode: a field over
/// its decoder's limit (coalesce/messages/secret_entry.hpp), a truncated or
/// foreign message.
caf::result<caf::message> refuse_unknown(caf::scheduled_actor*,
                                         caf::message_view& x) {
  if (x.content().empty())
    return make_error(errc::invalid_request,
                      "the request could not be decoded: a field over its "
                      "limit, or not a request of this coalesce version");
  return make_error(errc::invalid_request,
                    "the node serves no such request");
}

/// The refusal of a replica request (one that carries a `list_stamp`)
/// whose coordinator did not count every list this node counts; none for
/// any other request.
template <class... Args>
std::optional<caf::error> refuse_uncounted(gateway_pointer self,
                                           const Args&... args) {
  const auto& check = self->state.replicas.uncounted;
  std::optional<caf::error> result;
  if (!check)
    return result;
  if constexpr (sizeof...(Args) > 0) {
    auto one = [&](const auto& x) {
      if constexpr (std::is_same_v<std::decay_t<decltype(x)>, list_stamp>)
        if (!result)
          result = check(x);
    };
    (one(args), ...);
  }
  return result;
}

/// Refuses a repair request when no repair actor serves it here or the
/// node is shutting down; otherwise none.
std::optional<caf::error> refuse_sync(gateway_pointer self) {
  if (self->state.shutting_down)
    return refuse(self);
  if (!self->state.replicas.secret_sync)
    return make_error(errc::invalid_request,
                      "this node keeps no replicas of secrets to compare");
  return std::nullopt;
}

/// The handler of one replica request: to `target` (one of this node's
/// `replica_endpoints`), or refused naming what (`kept`) this node keeps
/// no replicas of.
template <class Target, class... Args, class Output>
auto replica_forwarder(gateway_pointer self, Target target, const char* kept,
                       type_list<Args...>, type_list<Output>) {
  return [self, target, kept](Args&... args) -> caf::result<Output> {
    if (self->state.shutting_down)
      return refuse(self);
    const auto& handle = self->state.replicas.*target;
    if (!handle)
      return make_error(errc::invalid_request,
                        std::string{"this node keeps no replicas of "}
                          + kept);
    if (auto refusal = refuse_uncounted(self, args...))
      return std::move(*refusal);
    return self->delegate(handle, std::move(args)...);
  };
}

template <class Target, class... Signatures>
auto replica_forwarders(gateway_pointer self, Target target, const char* kept,
                        type_list<Signatures...>) {
  return std::make_tuple(replica_forwarder(self, target, kept,
                                           inputs_of<Signatures>{},
                                           outputs_of<Signatures>{})...);
}

node_actor::behavior_type node_gateway(gateway_pointer self,
                                       service_handles services,
                                       foreign_owner_fn foreign_owner,
                                       std::shared_ptr<const peer_counters> peers,
                                       replica_endpoints replicas) {
  self->state.services = std::move(services);
  self->state.replicas = std::move(replicas);
  self->state.foreign_owner = std::move(foreign_owner);
  self->state.peers = std::move(peers);
  self->set_default_handler(refuse_unknown);
  auto handlers = std::tuple_cat(
    all_services::apply<service_forwarders>::make(self),
    replica_forwarders(self, &replica_endpoints::session_replicas, "sessions",
                       signatures_in<session_replica_endpoint_actor>{}),
    replica_forwarders(self, &replica_endpoints::session_sync, "sessions",
                       signatures_in<session_listing_requests>{}),
    replica_forwarders(self, &replica_endpoints::room_replicas, "rooms",
                       signatures_in<room_replica_endpoint_actor>{}),
    replica_forwarders(self, &replica_endpoints::room_sync, "rooms",
                       signatures_in<room_listing_requests>{}),
    std::make_tuple([self](stats_atom) { return gather_stats(self); },
                    [self](shutdown_atom) { return begin_shutdown(self); },
                    [self](digest_atom atom, uint64_t list_version,
                           uint64_t asker) -> caf::result<secret_digest> {
                      if (auto refusal = refuse_sync(self))
                        return std::move(*refusal);
                      return self->delegate(self->state.replicas.secret_sync,
                                            atom, list_version, asker);
                    },
                    [self](digest_atom atom, uint64_t list_version,
                           uint64_t asker, secret_buckets& buckets)
                      -> caf::result<std::vector<secret_entry>> {
                      if (auto refusal = refuse_sync(self))
                        return std::move(*refusal);
                      return self->delegate(self->state.replicas.secret_sync,
                                            atom, list_version, asker,
                                            std::move(buckets));
                    },
                    [self](handoff_atom atom, handoff_asker& asker)
                      -> caf::result<secret_digest> {
                      if (auto refusal = refuse_sync(self))
                        return std::move(*refusal);
                      return self->delegate(self->state.replicas.secret_sync,
                                            atom, std::move(asker));
                    },
                    [self](handoff_atom atom, handoff_asker& asker,
                           secret_buckets& buckets)
                      -> caf::result<std::vector<secret_entry>> {
                      if (auto refusal = refuse_sync(self))
                        return std::move(*refusal);
                      return self->delegate(self->state.replicas.secret_sync,
                                            atom, std::move(asker),
                                            std::move(buckets));
                    },
                    [self](replica_atom atom, read_atom verb,
                           std::vector<secret_key>& keys)
                      -> caf::result<std::vector<stored_secret>> {
                      if (auto refusal = refuse_sync(self))
                        return std::move(*refusal);
                      return self->delegate(self->state.replicas.secret_sync,
                                            atom, verb, std::move(keys));
                    }));
  return std::apply(
    [](auto&&... fs) {
      return node_actor::behavior_type{std::forward<decltype(fs)>(fs)...};
    },
    std::move(handlers));
}

} // namespace

node_actor spawn_node_gateway(caf::actor_system& sys, service_handles services,
                              foreign_owner_fn foreign_owner,
                              std::shared_ptr<const peer_counters> peers,
                              replica_endpoints endpoints) {
  return sys.spawn(node_gateway, std::move(services),
                   std::move(foreign_owner), std::move(peers),
                   std::move(endpoints));
}

} // namespace coalesce
