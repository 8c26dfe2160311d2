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
#include <coalesce/messages/capture_stamp.hpp>
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
  /// Until then a replicated key's requests go to its next replica: this
  /// node failed one (unreachable, silent, shutting down).
  clock::time_point avoided_until{};
};

/// How long a node that failed a replicated request is passed over.
constexpr auto avoid_failed_node = std::chrono::seconds{5};

/// How long a batch of secrets that got no majority waits before it is
/// sent again: about what a node takes to restart in a rolling change.
constexpr auto pause_before_again = std::chrono::milliseconds{200};

using pause_atom = caf::atom_constant<caf::atom("pause")>;
using resume_atom = caf::atom_constant<caf::atom("resume")>;

struct pause_timer_state {
  static inline const char* name = "cluster_client_pauses";
  uint64_t last = 0;
  std::unordered_map<uint64_t, caf::response_promise> waiting;
};

/// Answers `pause` with `ok` once the time it names passed: the client's
/// own behavior is its typed interface, with no room for a message of
/// its own to wake it.
caf::behavior pause_timer(caf::stateful_actor<pause_timer_state>* self) {
  return {
    [self](pause_atom, caf::timespan length) {
      auto id = ++self->state.last;
      auto promise = self->make_response_promise();
      self->state.waiting.emplace(id, promise);
      self->delayed_send(self, length, resume_atom::value, id);
      return promise;
    },
    [self](resume_atom, uint64_t id) {
      auto i = self->state.waiting.find(id);
      if (i == self->state.waiting.end())
        return;
      i->second.deliver(caf::ok_atom::value);
      self->state.waiting.erase(i);
    },
  };
}

/// A ticket or lease one node issued, behind the client's own number.
template <class Issued>
struct issued_by {
  std::size_t node;
  Issued real;
};

template <class Issued>
using issued_table = std::unordered_map<uint64_t, issued_by<Issued>>;

template <class... Issued>
using issued_tables = std::tuple<issued_table<Issued>...>;

struct cluster_client_state {
  static inline const char* name = "cluster_client";
  caf::timespan timeout;
  /// On how many nodes a chat's secrets are kept (the nodes'
  /// `coalesce.replicas`).
  std::size_t replicas = 1;
  /// The list requests are routed by: the one given, or a newer one a
  /// node's refusal named (`adopt_newer_list`).
  cluster_map map;
  /// Every node the client ever routed to, in the order first listed: a
  /// node keeps its link (its connection, what it issued) when the list
  /// changes. Requests, tickets and leases name nodes by link.
  std::vector<node_link> links;
  /// The link of each node of `map`, by its index there.
  std::vector<std::size_t> link_of;
  uint64_t last_id = 0;
  /// What nodes issued (tickets, leases), one table per type of
  /// `all_issued`, by the client's own number.
  all_issued::apply<issued_tables> issued_by_nodes;
  /// How to fail each exchange under way, so that stopping answers them.
  uint64_t last_exchange = 0;
  std::unordered_map<uint64_t, std::function<void(const caf::error&)>>
    exchanges;
  /// Stamps the captures it sends replicated nodes (`stamp_captures`).
  capture_clock stamps;
  /// Wakes requests that wait before going again (`after_pause`), spawned
  /// on first use, linked.
  caf::actor pauses;

  template <class Issued>
  issued_table<Issued>& issued() {
    return std::get<issued_table<Issued>>(issued_by_nodes);
  }
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
        auto node = node_answered(self->system(), link.where.text(),
                                  std::move(handle), interface);
        if (!node)
          return finish_connecting(self, index, node.error());
        link.handle = std::move(*node);
        self->monitor(link.handle);
        finish_connecting(self, index, caf::error{});
      },
      // The sentences of a single node's connection (connect.hpp): a
      // refused TLS handshake is named the same whichever way it was met.
      [self, index, budget](caf::error& err) {
        finish_connecting(self, index,
                          connect_failed(self->system(),
                                         self->state.links[index].where.text(),
                                         err, budget));
      });
}

/// Runs `then` once node `index` is connected (at once if it is, without
/// wrapping it in a `link_waiter`), or with the error that stopped the
/// connection.
template <class Then>
void with_node(client_pointer self, std::size_t index,
               clock::time_point deadline, Then&& then) {
  auto& link = self->state.links[index];
  if (link.handle)
    return then(caf::error{});
  link.waiting.emplace_back(std::forward<Then>(then));
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
  // Moved, not copied, into the waiter: a batch is its whole size.
  with_node(self, index, deadline,
            [=, request = std::make_tuple(std::move(xs)...)](
              const caf::error& failed) mutable {
    if (failed) {
      if (!ended())
        on_error(failed);
      return;
    }
    std::apply(
      [&](auto&... args) {
        return self->request(self->state.links[index].handle,
                             remaining(deadline), std::move(args)...);
      },
      request)
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

/// Runs `then` once `length` passed, or `on_error` with why not (the
/// client stopped first: `stop` answers it as any exchange under way).
void after_pause(client_pointer self, caf::timespan length,
                 std::function<void()> then,
                 std::function<void(const caf::error&)> on_error) {
  auto& st = self->state;
  if (!st.pauses)
    st.pauses = self->spawn<caf::linked>(pause_timer);
  auto id = ++st.last_exchange;
  st.exchanges.emplace(id, on_error);
  self->request(st.pauses, caf::infinite, pause_atom::value, length)
    .then(
      [self, id, then](caf::ok_atom) {
        if (self->state.exchanges.erase(id) > 0)
          then();
      },
      [self, id, on_error](caf::error& err) {
        if (self->state.exchanges.erase(id) > 0)
          on_error(err);
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
  for (auto link : self->state.link_of)
    parts.emplace(link, std::make_tuple(xs...));
  return to_several<Output>(self, std::move(initial), std::move(combine),
                            std::move(parts));
}

/// Every counter of `part` added to `total` (flags or-ed, text kept).
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
  } else if constexpr (std::is_same<T, std::string>::value) {
    // Text every node tells alike (the cluster's addresses).
    if (total.empty())
      total = part;
  } else if constexpr (std::is_arithmetic<T>::value) {
    total += part;
  }
}

template <class Output>
struct output {};

// -- routes, one per kind of routing rule ------------------------------------

/// Issues the client's own number for what node `node` issued.
template <class Issued>
Issued remember(client_pointer self, std::size_t node, const Issued& real) {
  auto id = ++self->state.last_id;
  self->state.issued<Issued>().emplace(id,
                                                issued_by<Issued>{node, real});
  return Issued{id};
}

/// Whether `key`'s requests may go to any of its replicas: every key
/// under `replicas` above 1.
bool replicated(client_pointer self, const routing_key&) {
  return self->state.replicas > 1 && self->state.map.size() > 1;
}

/// Whether node `index` is not passed over for a recent failure.
bool live(client_pointer self, std::size_t index, clock::time_point now) {
  return self->state.links[index].avoided_until <= now;
}

/// The replica a replicated key's request goes to: the first one not passed
/// over for a recent failure (the owner when all were).
std::size_t coordinator(client_pointer self,
                        const std::vector<std::size_t>& replicas,
                        clock::time_point now) {
  for (auto index : replicas)
    if (live(self, index, now))
      return index;
  return replicas.front();
}

/// The links of `key`'s replicas, first to be asked first.
std::vector<std::size_t> replicas_of(client_pointer self,
                                     const routing_key& key) {
  auto& st = self->state;
  auto result = st.map.replica_indices(key, st.replicas);
  for (auto& index : result)
    index = st.link_of[index];
  return result;
}

/// Routes by `nodes` from now on; a node already linked keeps its link.
void use_list(cluster_client_state& st, cluster_map nodes) {
  st.map = std::move(nodes);
  st.link_of.clear();
  for (const auto& node : st.map.nodes()) {
    auto known = std::find_if(
      st.links.begin(), st.links.end(),
      [&](const node_link& x) { return x.where == node; });
    if (known == st.links.end()) {
      st.links.emplace_back();
      st.links.back().where = node;
      known = st.links.end() - 1;
    }
    st.link_of.push_back(static_cast<std::size_t>(known - st.links.begin()));
  }
}

/// Adopts the list a `not_replica` refusal names when it is newer than the
/// client's (the node serves under a list that changed since the client's
/// was given): whether it did, and so whether the request is worth
/// sending again. Versions only grow, so a request is sent again at most
/// once per newer list.
bool adopt_newer_list(client_pointer self, const caf::error& err) {
  auto named = list_of_refusal(err);
  if (!named || named->version <= self->state.map.version())
    return false;
  cluster_map nodes;
  if (cluster_map::parse(named->nodes, "a refusal's list", nodes)
      || nodes.empty())
    return false;
  std::vector<uint32_t> ids(nodes.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<uint32_t>(i);
  use_list(self->state,
           cluster_map{named->version, nodes.nodes(), std::move(ids)});
  return true;
}

/// Whether a batch of secrets (queued or looked up: twice is harmless)
/// that a coordinator answered with `err` is worth sending again after a
/// pause: it got no majority of some chat's replicas, as during a rolling
/// change while a replica restarts, or while a node that already serves
/// the new list refuses a chat it keeps under the old one only.
bool worth_again_after_pause(const caf::error& err) {
  return err.category() == errc_category
         && err.code() == static_cast<uint8_t>(errc::no_quorum);
}

/// Whether a failed exchange with a replica is worth one with the next:
/// the node could not be reached, did not answer, is shutting down, or
/// cannot coordinate the key while its replica catches up (a room's).
bool worth_failing_over(const caf::error& err) {
  return err.category() == errc_category
         && (err.code() == static_cast<uint8_t>(errc::node_unreachable)
             || err.code() == static_cast<uint8_t>(errc::node_shutting_down)
             || err.code() == static_cast<uint8_t>(errc::catching_up));
}

/// Passes over node `index` for a while; true unless it already was (the
/// retry then would go where this one went).
bool avoid(client_pointer self, std::size_t index) {
  auto now = clock::now();
  auto fresh = live(self, index, now);
  self->state.links[index].avoided_until = now + avoid_failed_node;
  return fresh;
}

/// One attempt's deadline: a share of the request's, so that a replica that
/// does not answer leaves time for the next.
clock::time_point attempt_deadline(client_pointer self,
                                   clock::time_point deadline) {
  auto share = std::chrono::duration_cast<clock::duration>(
    self->state.timeout / static_cast<int64_t>(self->state.replicas));
  return std::min(deadline, clock::now() + share);
}

/// A batch of keys (`atom, *items`): one part per coordinator (its owner
/// when not replicated; as few as the keys' replicas allow), sent at once;
/// answered once every part is, a vector answer (one per item) in the
/// batch's order, any other added up (an `ok` stays `ok`). A part whose
/// coordinator fails is not waited for: the whole batch goes again, with
/// that node passed over when the keys are replicated, or under the newer
/// list a refusal named (a secret queued or looked up twice is harmless),
/// until the request's deadline; any other failure answers the batch.
template <class Output, class Atom, class T>
void attempt_batch(client_pointer self, Atom atom,
                   std::shared_ptr<const std::vector<T>> items,
                   caf::typed_response_promise<Output> promise,
                   clock::time_point deadline) {
  auto rule = routing_rule(atom, *items);
  // Any replica of a key may coordinate it: a key joins a coordinator the
  // batch already uses when that node is one of its live replicas, so a
  // batch whose chats share replicas (all of them, with three nodes and
  // three replicas) is one request, not one per first replica.
  std::map<std::size_t, std::vector<std::size_t>> positions;
  auto now = clock::now();
  for (std::size_t i = 0; i < items->size(); ++i) {
    auto replicas = replicas_of(self, rule.keys[i]);
    auto chosen = coordinator(self, replicas, now);
    for (auto index : replicas)
      if (positions.count(index) > 0 && live(self, index, now)) {
        chosen = index;
        break;
      }
    positions[chosen].push_back(i);
  }
  struct attempt {
    Output total;
    std::size_t outstanding;
    bool ended = false;
  };
  auto state = std::make_shared<attempt>();
  if constexpr (is_vector<Output>::value)
    state->total.resize(items->size());
  state->outstanding = positions.size();
  auto keys_replicated = !rule.keys.empty()
                         && replicated(self, rule.keys.front());
  auto this_attempt = keys_replicated ? attempt_deadline(self, deadline)
                                      : deadline;
  for (auto& [node, where] : positions) {
    std::vector<T> part;
    part.reserve(where.size());
    for (auto i : where)
      part.push_back((*items)[i]);
    auto index = node;
    auto placed = std::make_shared<std::vector<std::size_t>>(where);
    send_to<Output>(
      self, index, this_attempt,
      [state, placed, promise](Output& answer) mutable {
        if (state->ended)
          return;
        if constexpr (is_vector<Output>::value) {
          for (std::size_t i = 0; i < placed->size() && i < answer.size(); ++i)
            state->total[(*placed)[i]] = std::move(answer[i]);
        } else {
          add_counters(state->total, answer);
        }
        if (--state->outstanding == 0) {
          state->ended = true;
          promise.deliver(std::move(state->total));
        }
      },
      [self, atom, items, state, promise, deadline, index,
       keys_replicated](const caf::error& err) mutable {
        if (state->ended)
          return;
        state->ended = true;
        if (clock::now() < deadline
            && (adopt_newer_list(self, err)
                || (keys_replicated && worth_failing_over(err)
                    && avoid(self, index))))
          attempt_batch<Output>(self, atom, items, promise, deadline);
        else if (keys_replicated && worth_again_after_pause(err)
                 && clock::now() + pause_before_again < deadline)
          after_pause(
            self, pause_before_again,
            [=] { attempt_batch<Output>(self, atom, items, promise, deadline); },
            [promise](const caf::error& why) mutable {
              promise.deliver(why);
            });
        else
          promise.deliver(err);
      },
      atom, std::move(part));
  }
  if (positions.empty())
    promise.deliver(std::move(state->total));
}

/// One key's request (`xs`), to its coordinator (its owner when not
/// replicated); for a replicated key again to the next replica while it
/// fails and the deadline allows; again under a newer list a refusal named.
/// What a service issues (a ticket, a lease) is answered under the client's
/// own number, remembering the node that issued it. The request's values
/// are shared by its attempts: each copies them once, into its message.
template <class Output, class... Ts>
void attempt_one(client_pointer self, routing_key key,
                 std::shared_ptr<const std::string> key_text,
                 caf::typed_response_promise<Output> promise,
                 clock::time_point deadline,
                 std::shared_ptr<const std::tuple<Ts...>> xs) {
  key.value = *key_text;
  auto index = coordinator(self, replicas_of(self, key), clock::now());
  auto this_attempt = replicated(self, key) ? attempt_deadline(self, deadline)
                                            : deadline;
  std::apply(
    [&](const auto&... args) {
      send_to<Output>(
        self, index, this_attempt,
        [self, index, promise](Output& answer) mutable {
          if constexpr (contains_v<all_issued, Output>)
            promise.deliver(remember(self, index, answer));
          else
            promise.deliver(std::move(answer));
        },
        [self, key, key_text, promise, deadline, index,
         xs](const caf::error& err) mutable {
          if (clock::now() < deadline
              && (adopt_newer_list(self, err)
                  || (replicated(self, key) && worth_failing_over(err)
                      && avoid(self, index))))
            attempt_one<Output>(self, key, key_text, promise, deadline, xs);
          else
            promise.deliver(err);
        },
        args...);
    },
    *xs);
}

/// The shared values of a request (`attempt_one`).
template <class... Ts>
std::shared_ptr<const std::tuple<Ts...>> shared_request(Ts&&... xs) {
  return std::make_shared<const std::tuple<Ts...>>(std::move(xs)...);
}

/// A request naming one key (`attempt_one`).
template <class Output, class Atom, class... Args>
caf::result<Output> to_owner(client_pointer self, const routing_key& key,
                             Atom atom, Args&... args) {
  auto promise = self->make_response_promise<Output>();
  auto text = std::make_shared<const std::string>(key.value);
  attempt_one<Output>(self, key, text, promise, deadline_of(self),
                      shared_request(std::move(atom), std::move(args)...));
  return promise;
}

/// A batch (`xs`) whose items name keys (`attempt_batch`).
template <class Output, class Atom, class T>
caf::result<Output> to_owners(client_pointer self, Atom atom,
                              std::vector<T>& xs) {
  auto promise = self->make_response_promise<Output>();
  attempt_batch<Output>(self, atom,
                        std::make_shared<const std::vector<T>>(std::move(xs)),
                        promise, deadline_of(self));
  return promise;
}

/// What the caller of a ticket or lease whose issuer was lost or is
/// stopping is told: it went with its node, and a retry goes to the next
/// replica (a backfill run there continues from the room's committed
/// position). Other errors pass unchanged.
caf::error issuer_lost(const caf::error& err, uint64_t id) {
  if (err.category() != errc_category
      || (err.code() != static_cast<uint8_t>(errc::node_unreachable)
          && err.code() != static_cast<uint8_t>(errc::node_shutting_down)))
    return err;
  std::string why;
  if (err.context().match_elements<std::string>())
    why = err.context().get_as<std::string>(0) + "; ";
  return make_error(static_cast<errc>(err.code()),
                    why + "ticket or lease " + std::to_string(id)
                      + " went with it: retry the request, the next "
                        "replica takes it (a backfill continues from the "
                        "room's committed position)");
}

/// A request carrying what one node issued: to that node, under the real
/// one; forgotten once answered.
template <class Output, class Atom, class Issued>
caf::result<Output> to_issuer(client_pointer self, Atom atom,
                              const Issued& mine) {
  auto& issued = self->state.issued<Issued>();
  auto i = issued.find(mine.id);
  if (i == issued.end())
    return make_error(errc::unknown_ticket,
                      "this cluster client issued no ticket or lease "
                        + std::to_string(mine.id));
  auto promise = self->make_response_promise<Output>();
  auto id = mine.id;
  send_to<Output>(
    self, i->second.node, deadline_of(self),
    [&issued, id, promise](Output& answer) mutable {
      issued.erase(id);
      promise.deliver(std::move(answer));
    },
    [promise, id](const caf::error& err) mutable {
      promise.deliver(issuer_lost(err, id));
    },
    atom, i->second.real);
  return promise;
}

/// Stamps the captures of a `queue` before its first attempt, when the
/// nodes keep replicas: a retry through the next replica, or a copy that
/// waited in a hung coordinator, then carries the stamp of the moment the
/// client sent it and never overtakes a capture the client sent later.
void stamp_captures(client_pointer self, secret_entry& x) {
  if (x.stamp == 0)
    x.stamp = self->state.stamps.next(capture_clock::client_source);
}

void stamp_captures(client_pointer self, std::vector<secret_entry>& xs) {
  auto now = capture_clock::now_us();
  for (auto& x : xs)
    if (x.stamp == 0)
      x.stamp = self->state.stamps.next(capture_clock::client_source, now);
}

/// A request of a service, by the rule its descriptor gives it
/// (routing_key.hpp).
template <class Output, class Atom, class... Args>
caf::result<Output> route(output<Output>, client_pointer self, Atom atom,
                          Args&... args) {
  if constexpr (std::is_same_v<Atom, queue_atom>)
    if (self->state.replicas > 1)
      (stamp_captures(self, args), ...);
  if constexpr (std::is_same_v<Atom, flush_atom>) {
    if (self->state.replicas > 1 && self->state.map.size() > 1) {
      // A node keeping replicas flushes every node itself (and answers
      // once enough did, secret_replicas.hpp): one node's answer is the
      // cluster's, and a node that is down or hung is failed over.
      auto promise = self->make_response_promise<Output>();
      attempt_one<Output>(self, routing_key{key_kind::chat, ""},
                          std::make_shared<const std::string>(), promise,
                          deadline_of(self),
                          shared_request(std::move(atom), std::move(args)...));
      return promise;
    }
  }
  // The rule's kind only: a batch's keys are found where it is split.
  using rule_type = decltype(routing_rule(atom, args...));
  if constexpr (std::is_same_v<rule_type, one_key>) {
    return to_owner<Output>(self, routing_rule(atom, args...).key, atom,
                            args...);
  } else if constexpr (std::is_same_v<rule_type, each_key>) {
    static_assert(sizeof...(Args) == 1,
                  "a batch request (each_key) carries its batch alone");
    return to_owners<Output>(self, atom, args...);
  } else if constexpr (std::is_same_v<rule_type, every_node>) {
    return to_every_node<Output>(
      self, Output{},
      [](Output& total, auto& answer) { add_counters(total, answer.second); },
      atom, std::move(args)...);
  } else {
    static_assert(std::is_same_v<rule_type, issuer> && sizeof...(Args) == 1);
    return to_issuer<Output>(self, atom, args...);
  }
}

/// The node's own requests.
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

/// Replicas compare what they hold node to node, never through a client.
template <class Output, class... Args>
caf::result<Output> route(output<Output>, client_pointer, digest_atom,
                          Args&...) {
  return make_error(errc::not_permitted,
                    "replicas compare their secrets node to node, not "
                    "through a cluster client");
}

/// Nor do they hand keys off through one.
template <class Output, class... Args>
caf::result<Output> route(output<Output>, client_pointer, handoff_atom,
                          Args&...) {
  return make_error(errc::not_permitted,
                    "replicas hand keys off node to node, not through a "
                    "cluster client");
}

template <class Verb>
constexpr bool is_replica_verb
  = std::is_same_v<Verb, prepare_atom> || std::is_same_v<Verb, claim_atom>
    || std::is_same_v<Verb, write_atom> || std::is_same_v<Verb, install_atom>
    || std::is_same_v<Verb, image_atom> || std::is_same_v<Verb, version_atom>
    || std::is_same_v<Verb, digest_atom> || std::is_same_v<Verb, room_atom>
    || std::is_same_v<Verb, handoff_atom> || std::is_same_v<Verb, read_atom>;

/// Replicas of sessions and of rooms talk node to node, never through a
/// client.
template <class Output, class Verb, class... Args>
std::enable_if_t<is_replica_verb<Verb>, caf::result<Output>>
route(output<Output>, client_pointer, replica_atom, Verb, Args&...) {
  return make_error(errc::not_permitted,
                    "replicas talk node to node, not through a cluster "
                    "client");
}

/// Nor do the replicas of secrets (a copy, a lookup or a flush, each with
/// the lists its coordinator counted).
template <class Output, class Part>
std::enable_if_t<!is_replica_verb<Part>, caf::result<Output>>
route(output<Output>, client_pointer, replica_atom, Part&, list_stamp&) {
  return make_error(errc::not_permitted,
                    "replicas talk node to node, not through a cluster "
                    "client");
}

/// The handler of one request of `node_actor`.
template <class Atom, class... Args, class Output>
auto router(client_pointer self, type_list<Atom, Args...>,
            type_list<Output>) {
  return [self](Atom atom, Args&... args) -> caf::result<Output> {
    return route(output<Output>{}, self, atom, args...);
  };
}

template <class... Signatures>
node_actor::behavior_type routers(client_pointer self,
                                  type_list<Signatures...>) {
  return {router(self, inputs_of<Signatures>{}, outputs_of<Signatures>{})...};
}

node_actor::behavior_type cluster_client(client_pointer self, cluster_map map,
                                         caf::timespan timeout,
                                         std::size_t replicas) {
  auto& st = self->state;
  st.timeout = timeout;
  st.replicas = std::max<std::size_t>(replicas, 1);
  use_list(st, std::move(map));
  self->set_down_handler([self](caf::down_msg& down) {
    for (auto& link : self->state.links)
      if (link.handle && link.handle.address() == down.source)
        link.handle = nullptr;
  });
  self->set_exit_handler(
    [self](caf::exit_msg& exit) { stop(self, exit.reason); });
  return routers(self, signatures_in<node_actor>{});
}

} // namespace

node_actor spawn_cluster_client(caf::actor_system& sys, cluster_map nodes,
                                caf::timespan timeout, std::size_t replicas) {
  return sys.spawn(cluster_client, std::move(nodes), timeout, replicas);
}

} // namespace coalesce
