#include <coalesce/client/cluster_client.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/routing_key.hpp>

namespace coalesce {

namespace {

using clock = std::chrono::steady_clock;

/// Runs once its node is connected (no error) or could not be.
using link_waiter = std::function<void(const caf::error&)>;

/// One node of the list: its handle once connected (null: not connected,
/// or lost), and what waits for the connection under way.
struct node_link {
  node_endpoint where;
  node_actor handle;
  bool connecting = false;
  std::vector<link_waiter> waiting;
};

/// A ticket or lease one node issued, behind the client's own number.
template <class Issued>
struct issued_by {
  std::size_t node;
  Issued real;
};

struct cluster_client_state {
  static inline const char* name = "cluster_client";
  caf::timespan timeout;
  cluster_map map;
  std::vector<node_link> links;
  uint64_t last_id = 0;
  std::unordered_map<uint64_t, issued_by<backfill_ticket>> tickets;
  std::unordered_map<uint64_t, issued_by<session_lease>> leases;
  /// How to fail each exchange under way, so that stopping answers them.
  uint64_t last_exchange = 0;
  std::unordered_map<uint64_t, std::function<void(const caf::error&)>>
    exchanges;
};

using client_pointer = node_actor::stateful_pointer<cluster_client_state>;

caf::error unreachable(const node_link& link, const std::string& why) {
  return make_error(errc::node_unreachable,
                    "the node at " + link.where.text() + " " + why);
}

/// What is left of a request's time; never zero, so that CAF still times
/// out instead of waiting forever.
caf::timespan remaining(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<caf::timespan>(deadline
                                                        - clock::now());
  return std::max(left, caf::timespan{std::chrono::milliseconds{1}});
}

clock::time_point deadline_of(client_pointer self) {
  return clock::now()
         + std::chrono::duration_cast<clock::duration>(self->state.timeout);
}

/// Forgets the node's handle: the next request for it connects again.
void drop_link(client_pointer self, std::size_t index) {
  auto& link = self->state.links[index];
  if (link.handle) {
    self->demonitor(link.handle.address());
    link.handle = nullptr;
  }
}

void finish_connecting(client_pointer self, std::size_t index,
                       const caf::error& err) {
  auto& link = self->state.links[index];
  link.connecting = false;
  auto waiting = std::move(link.waiting);
  link.waiting.clear();
  for (auto& waiter : waiting)
    waiter(err);
}

void connect(client_pointer self, std::size_t index, caf::timespan budget) {
  auto& link = self->state.links[index];
  link.connecting = true;
  self
    ->request(connector(self->system()), budget, caf::connect_atom::value,
              link.where.host, link.where.port)
    .then(
      [self, index](const caf::node_id&, caf::strong_actor_ptr& handle,
                    const std::set<std::string>& interface) {
        auto& link = self->state.links[index];
        if (handle == nullptr)
          return finish_connecting(self, index,
                                   unreachable(link, "publishes no node"));
        if (!self->system().assignable<node_actor>(interface))
          return finish_connecting(
            self, index,
            unreachable(link, "is not a coalesce node of this version"));
        link.handle = caf::actor_cast<node_actor>(std::move(handle));
        self->monitor(link.handle);
        finish_connecting(self, index, caf::error{});
      },
      [self, index, budget](caf::error& err) {
        auto& link = self->state.links[index];
        finish_connecting(
          self, index,
          err == caf::sec::request_timeout
            ? unreachable(link, "did not answer the connection within "
                                  + caf::deep_to_string(budget))
            : unreachable(link, "cannot be connected: "
                                  + self->system().render(err)));
      });
}

/// Runs `then` once node `index` is connected (at once if it is), or with
/// the error that stopped the connection.
void with_node(client_pointer self, std::size_t index,
               clock::time_point deadline, link_waiter then) {
  auto& link = self->state.links[index];
  if (link.handle)
    return then(caf::error{});
  link.waiting.push_back(std::move(then));
  if (!link.connecting)
    connect(self, index, remaining(deadline));
}

/// The error a caller sees for a failed exchange: a node's own answer as it
/// is; anything else (no answer in time, the connection lost) names the
/// node, whose handle is dropped so that the next request reconnects.
caf::error translate(client_pointer self, std::size_t index,
                     caf::error err) {
  if (err.category() == errc_category)
    return err;
  drop_link(self, index);
  auto& link = self->state.links[index];
  if (err == caf::sec::request_timeout)
    return unreachable(link, "did not answer within "
                               + caf::deep_to_string(self->state.timeout));
  return unreachable(link, "was lost: " + self->system().render(err));
}

/// Sends `xs` to node `index`, connecting first if needed, all before
/// `deadline`; then `on_answer(Output&)` or `on_error(const caf::error&)`.
/// Each exchange is listed until it ends, so that a stopping client
/// answers it (`stop`); an exchange that ended is not answered again.
template <class Output, class OnAnswer, class OnError, class... Ts>
void send_to(client_pointer self, std::size_t index,
             clock::time_point deadline, OnAnswer on_answer, OnError on_error,
             Ts... xs) {
  auto id = ++self->state.last_exchange;
  self->state.exchanges.emplace(id, on_error);
  auto ended = [self, id] { return self->state.exchanges.erase(id) == 0; };
  with_node(self, index, deadline, [=](const caf::error& failed) mutable {
    if (failed) {
      if (!ended())
        on_error(failed);
      return;
    }
    self
      ->request(self->state.links[index].handle, remaining(deadline),
                std::move(xs)...)
      .then(
        [on_answer, ended](Output& answer) mutable {
          if (!ended())
            on_answer(answer);
        },
        [self, index, on_error, ended](caf::error& err) mutable {
          if (!ended())
            on_error(translate(self, index, std::move(err)));
        });
  });
}

/// Answers every exchange under way `stopped_before_answer`, then stops.
void stop(client_pointer self, const caf::error& reason) {
  auto exchanges = std::move(self->state.exchanges);
  self->state.exchanges.clear();
  for (auto& [id, fail] : exchanges)
    fail(make_error(errc::stopped_before_answer, "the cluster client stopped"));
  self->quit(reason);
}

/// Answers `promise` with what node `index` answers `xs`.
template <class Output, class... Ts>
caf::result<Output> relay(client_pointer self, std::size_t index, Ts... xs) {
  auto promise = self->make_response_promise<Output>();
  send_to<Output>(
    self, index, deadline_of(self),
    [promise](Output& answer) mutable { promise.deliver(std::move(answer)); },
    [promise](const caf::error& err) mutable { promise.deliver(err); },
    std::move(xs)...);
  return promise;
}

/// Answers once every part of a request sent to several nodes answered
/// (`combine` folds each answer into the total), or with the first error.
template <class Total>
struct gathering {
  Total total;
  std::size_t outstanding;
  caf::typed_response_promise<Total> promise;
  bool failed = false;

  template <class Answer, class Combine>
  void answered(Answer& answer, Combine& combine) {
    if (failed)
      return;
    combine(total, answer);
    if (--outstanding == 0)
      promise.deliver(std::move(total));
  }

  void fail(const caf::error& err) {
    if (!failed) {
      failed = true;
      promise.deliver(err);
    }
  }
};

/// Sends `parts[node]` to each node and folds the answers.
template <class Output, class Total, class Combine, class Parts>
caf::result<Total> to_several(client_pointer self, Total initial,
                              Combine combine, Parts parts) {
  auto state = std::make_shared<gathering<Total>>(gathering<Total>{
    std::move(initial), parts.size(), self->make_response_promise<Total>()});
  auto deadline = deadline_of(self);
  // Not a structured binding: C++17 lambdas may not capture one.
  for (auto& part : parts) {
    auto node = part.first;
    auto& message = part.second;
    std::apply(
      [&](auto... xs) {
        send_to<Output>(
          self, node, deadline,
          [state, combine, node = node](Output& answer) mutable {
            std::pair<std::size_t, Output&> from_node{node, answer};
            state->answered(from_node, combine);
          },
          [state](const caf::error& err) { state->fail(err); },
          std::move(xs)...);
      },
      std::move(message));
  }
  if (parts.empty())
    state->promise.deliver(std::move(state->total));
  return state->promise;
}

/// The same message to every node.
template <class Output, class Total, class Combine, class... Ts>
caf::result<Total> to_every_node(client_pointer self, Total initial,
                                 Combine combine, Ts... xs) {
  std::map<std::size_t, std::tuple<Ts...>> parts;
  for (std::size_t i = 0; i < self->state.links.size(); ++i)
    parts.emplace(i, std::make_tuple(xs...));
  return to_several<Output>(self, std::move(initial), std::move(combine),
                            std::move(parts));
}

/// Every counter of `part` added to `total` (flags or-ed).
template <class T>
void add_counters(T& total, T& part) {
  if constexpr (has_named_fields<T>::value) {
    with_named_fields(total, [&](auto... totals) {
      with_named_fields(part, [&](auto... parts) {
        (add_counters(totals.value, parts.value), ...);
      });
    });
  } else if constexpr (is_vector<T>::value) {
    if (total.size() < part.size())
      total.resize(part.size());
    for (std::size_t i = 0; i < part.size(); ++i)
      add_counters(total[i], part[i]);
  } else if constexpr (std::is_same<T, bool>::value) {
    total = total || part;
  } else if constexpr (std::is_arithmetic<T>::value) {
    total += part;
  }
}

template <class Output>
struct output {};

// -- routes, one per kind of request -----------------------------------------

/// A request with one key: to its owner.
template <class Output, class Atom, class... Args>
caf::result<Output> route(output<Output>, client_pointer self, Atom atom,
                          Args&... args) {
  auto keys = routing_keys(atom, args...);
  static_assert(!carries_no_key<Atom>, "a keyless request needs its route");
  auto owner = self->state.map.owner_index(keys.front());
  return relay<Output>(self, owner, atom, std::move(args)...);
}

caf::result<ok_atom> route(output<ok_atom>, client_pointer self, queue_atom,
                           std::vector<secret_entry>& entries) {
  std::map<std::size_t, std::tuple<queue_atom, std::vector<secret_entry>>>
    parts;
  for (auto& entry : entries) {
    auto owner = self->state.map.owner_index({key_kind::chat, entry.chat});
    auto& part = parts[owner];
    std::get<0>(part) = queue_atom::value;
    std::get<1>(part).push_back(std::move(entry));
  }
  return to_several<ok_atom>(self, ok_atom::value, [](ok_atom&, auto&) {},
                             std::move(parts));
}

caf::result<std::vector<secret_lookup>>
route(output<std::vector<secret_lookup>>, client_pointer self, lookup_atom,
      std::vector<secret_key>& keys) {
  // Which positions of the answer each owner's part fills.
  auto positions = std::make_shared<std::map<std::size_t,
                                             std::vector<std::size_t>>>();
  std::map<std::size_t, std::tuple<lookup_atom, std::vector<secret_key>>>
    parts;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto owner = self->state.map.owner_index({key_kind::chat, keys[i].chat});
    (*positions)[owner].push_back(i);
    std::get<1>(parts[owner]).push_back(std::move(keys[i]));
  }
  auto fill = [positions](std::vector<secret_lookup>& total, auto& answer) {
    auto& where = (*positions)[answer.first];
    auto& found = answer.second;
    for (std::size_t i = 0; i < where.size() && i < found.size(); ++i)
      total[where[i]] = std::move(found[i]);
  };
  return to_several<std::vector<secret_lookup>>(
    self, std::vector<secret_lookup>(keys.size()), fill, std::move(parts));
}

caf::result<ok_atom> route(output<ok_atom>, client_pointer self, flush_atom) {
  return to_every_node<ok_atom>(self, ok_atom::value, [](ok_atom&, auto&) {},
                                flush_atom::value);
}

caf::result<ok_atom> route(output<ok_atom>, client_pointer self, flush_atom,
                           caf::timespan& deadline) {
  return to_every_node<ok_atom>(self, ok_atom::value, [](ok_atom&, auto&) {},
                                flush_atom::value, deadline);
}

caf::result<uint64_t> route(output<uint64_t>, client_pointer self,
                            flush_all_atom, caf::timespan& limit) {
  return to_every_node<uint64_t>(
    self, uint64_t{0},
    [](uint64_t& total, auto& answer) { total += answer.second; },
    flush_all_atom::value, limit);
}

caf::result<node_stats> route(output<node_stats>, client_pointer self,
                              stats_atom) {
  return to_every_node<node_stats>(
    self, node_stats{},
    [](node_stats& total, auto& answer) {
      auto& part = answer.second;
      auto longest = std::max(total.uptime_s, part.uptime_s);
      add_counters(total, part);
      total.uptime_s = longest;
    },
    stats_atom::value);
}

caf::result<ok_atom> route(output<ok_atom>, client_pointer, shutdown_atom) {
  return make_error(errc::not_permitted,
                    "a cluster client shuts no node down");
}

/// Issues the client's own number for what node `node` issued.
template <class Issued>
Issued remember(client_pointer self,
                std::unordered_map<uint64_t, issued_by<Issued>>& issued,
                std::size_t node, const Issued& real) {
  auto id = ++self->state.last_id;
  issued.emplace(id, issued_by<Issued>{node, real});
  return Issued{id};
}

caf::result<backfill_ticket> route(output<backfill_ticket>,
                                   client_pointer self, enqueue_atom,
                                   backfill_request& request) {
  auto owner = self->state.map.owner_index({key_kind::room, request.room});
  auto promise = self->make_response_promise<backfill_ticket>();
  send_to<backfill_ticket>(
    self, owner, deadline_of(self),
    [self, owner, promise](backfill_ticket& real) mutable {
      promise.deliver(remember(self, self->state.tickets, owner, real));
    },
    [promise](const caf::error& err) mutable { promise.deliver(err); },
    enqueue_atom::value, std::move(request));
  return promise;
}

caf::result<session_lease> route(output<session_lease>, client_pointer self,
                                 exclusive_atom, std::string& session) {
  auto owner = self->state.map.owner_index({key_kind::session, session});
  auto promise = self->make_response_promise<session_lease>();
  send_to<session_lease>(
    self, owner, deadline_of(self),
    [self, owner, promise](session_lease& real) mutable {
      promise.deliver(remember(self, self->state.leases, owner, real));
    },
    [promise](const caf::error& err) mutable { promise.deliver(err); },
    exclusive_atom::value, std::move(session));
  return promise;
}

/// A request carrying a ticket or lease: to the node that issued the real
/// one; forgotten once `done` says the request ended its use.
template <class Output, class Atom, class Issued>
caf::result<Output>
to_issuer(client_pointer self,
          std::unordered_map<uint64_t, issued_by<Issued>>& issued, Atom atom,
          const Issued& mine, bool forget_when_answered) {
  auto i = issued.find(mine.id);
  if (i == issued.end())
    return make_error(errc::unknown_ticket,
                      "this cluster client issued no ticket or lease "
                        + std::to_string(mine.id));
  auto promise = self->make_response_promise<Output>();
  auto id = mine.id;
  send_to<Output>(
    self, i->second.node, deadline_of(self),
    [&issued, id, promise, forget_when_answered](Output& answer) mutable {
      if (forget_when_answered)
        issued.erase(id);
      promise.deliver(std::move(answer));
    },
    [promise](const caf::error& err) mutable { promise.deliver(err); }, atom,
    i->second.real);
  return promise;
}

caf::result<backfill_result> route(output<backfill_result>,
                                   client_pointer self, await_atom atom,
                                   backfill_ticket& ticket) {
  return to_issuer<backfill_result>(self, self->state.tickets, atom, ticket,
                                    true);
}

template <class Atom>
std::enable_if_t<std::is_same<Atom, cancel_atom>::value
                   || std::is_same<Atom, detach_atom>::value,
                 caf::result<ok_atom>>
route(output<ok_atom>, client_pointer self, Atom atom,
      backfill_ticket& ticket) {
  return to_issuer<ok_atom>(self, self->state.tickets, atom, ticket, true);
}

caf::result<ok_atom> route(output<ok_atom>, client_pointer self,
                           release_atom atom, session_lease& lease) {
  return to_issuer<ok_atom>(self, self->state.leases, atom, lease, true);
}

/// The handler of one message signature of `node_actor`.
template <class Signature>
struct router;

template <class Atom, class... Args, class Output>
struct router<caf::typed_mpi<caf::detail::type_list<Atom, Args...>,
                             caf::output_tuple<Output>>> {
  static auto make(client_pointer self) {
    return [self](Atom atom, Args&... args) -> caf::result<Output> {
      return route(output<Output>{}, self, atom, args...);
    };
  }
};

template <class... Signatures>
node_actor::behavior_type routers(client_pointer self,
                                  caf::detail::type_list<Signatures...>) {
  return {router<Signatures>::make(self)...};
}

node_actor::behavior_type cluster_client(client_pointer self, cluster_map map,
                                         caf::timespan timeout) {
  auto& st = self->state;
  st.timeout = timeout;
  st.map = std::move(map);
  for (const auto& node : st.map.nodes()) {
    st.links.emplace_back();
    st.links.back().where = node;
  }
  self->set_down_handler([self](caf::down_msg& down) {
    for (auto& link : self->state.links)
      if (link.handle && link.handle.address() == down.source)
        link.handle = nullptr;
  });
  self->set_exit_handler(
    [self](caf::exit_msg& exit) { stop(self, exit.reason); });
  return routers(self, node_actor::signatures{});
}

} // namespace

node_actor spawn_cluster_client(caf::actor_system& sys, cluster_map nodes,
                                caf::timespan timeout) {
  return sys.spawn(cluster_client, std::move(nodes), timeout);
}

} // namespace coalesce
