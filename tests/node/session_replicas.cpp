#define CAF_SUITE node.session_replicas
#include <caf/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/node/services.hpp>
#include <coalesce/node/session_persister_service.hpp>
#include <coalesce/node/session_replicas.hpp>
#include <coalesce/node/session_sync.hpp>
#include <coalesce/node/sync_rounds.hpp>
#include <coalesce/storage/session_store.hpp>

#include "error_codes.hpp"
#include "release_pass.hpp"
#include "serving_views.hpp"
#include "session_fixtures.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

/// One replica: real services over a database of its own, the endpoint of
/// its replicas of sessions and the gateway peers reach it through.
struct replica {
  std::unique_ptr<local_services> services;
  std::vector<session_replica_io_actor> io;
  /// Set while its replica catches up; its endpoint refuses reads then.
  std::shared_ptr<std::atomic<bool>> catching_up
    = std::make_shared<std::atomic<bool>>(false);
  session_replica_endpoint_actor endpoint;
  /// Serves the peers' repair exchanges.
  session_sync_actor repair;
  node_actor gateway;
};

/// A peer that never answers (a stopped process).
behavior silent_peer(event_based_actor* self) {
  self->set_default_handler(skip);
  return {[](unit_t) {}};
}


struct write_gate_state {
  node_actor target;
  bool open = false;
  /// Batches of writes that arrived while closed, with their requests.
  std::vector<std::tuple<typed_response_promise<std::vector<replica_answer>>,
                         std::vector<session_delta>, list_stamp>>
    held;
  /// The size of each batch passed on and answered, in order.
  std::vector<std::size_t> passed;
  std::size_t items_passed = 0;
  /// A `get` waiting for this many items to have passed.
  std::size_t awaited = 0;
  std::optional<typed_response_promise<std::vector<std::size_t>>> waiting;
  /// Writes the replica applied, whether as a delta of a batch or as a
  /// whole session installed after it answered `out_of_sync`: a batch
  /// answered is not a write stored.
  std::size_t items_stored = 0;
  /// `stored` requests waiting for a count of writes stored.
  std::vector<std::pair<std::size_t, typed_response_promise<ok_atom>>>
    awaiting_stored;
  /// A `held` waiting for a batch to be held.
  std::optional<typed_response_promise<ok_atom>> holding;
};

using gate_pointer = stateful_actor<write_gate_state>*;

/// What a write gate answers once this many writes were stored.
using stored_atom = atom_constant<atom("stored")>;

void count_stored(gate_pointer self, std::size_t applied) {
  auto& st = self->state;
  st.items_stored += applied;
  auto& awaiting = st.awaiting_stored;
  for (auto i = awaiting.begin(); i != awaiting.end();) {
    if (st.items_stored >= i->first) {
      i->second.deliver(ok_atom::value);
      i = awaiting.erase(i);
    } else {
      ++i;
    }
  }
}

void pass_batch(gate_pointer self,
                typed_response_promise<std::vector<replica_answer>> promise,
                std::vector<session_delta> deltas, list_stamp stamp) {
  auto size = deltas.size();
  self->request(self->state.target, infinite, replica_atom::value,
                write_atom::value, std::move(deltas), std::move(stamp))
    .then(
      [self, promise, size](std::vector<replica_answer>& answers) mutable {
        auto applied = std::count_if(
          answers.begin(), answers.end(), [](const replica_answer& answer) {
            return outcome_of(answer) == replica_outcome::applied;
          });
        promise.deliver(std::move(answers));
        count_stored(self, static_cast<std::size_t>(applied));
        auto& st = self->state;
        st.passed.push_back(size);
        st.items_passed += size;
        if (st.waiting && st.items_passed >= st.awaited) {
          st.waiting->deliver(st.passed);
          st.waiting.reset();
        }
      },
      [promise](error& err) mutable { promise.deliver(std::move(err)); });
}

/// A peer's gateway in front of `target` that holds the batches of writes
/// (`write` with several sessions' deltas) until `opengate` unless spawned
/// `open`, and passes every other request on at once; `get` with a count
/// answers the sizes of the batches passed on once that many writes passed
/// and were answered, however the replica took them; `stored` with a count
/// answers once the replica applied that many writes; `held` answers once
/// a batch is held.
behavior write_gate(gate_pointer self, node_actor target, bool open) {
  self->state.target = target;
  self->state.open = open;
  return {
    [self](replica_atom, write_atom, std::vector<session_delta>& deltas,
           list_stamp& stamp) -> result<std::vector<replica_answer>> {
      auto promise = self->make_response_promise<std::vector<replica_answer>>();
      auto& st = self->state;
      if (st.open) {
        pass_batch(self, promise, std::move(deltas), std::move(stamp));
      } else {
        st.held.emplace_back(promise, std::move(deltas), std::move(stamp));
        if (st.holding) {
          st.holding->deliver(ok_atom::value);
          st.holding.reset();
        }
      }
      return promise;
    },
    [self](held_atom) -> result<ok_atom> {
      auto& st = self->state;
      if (!st.held.empty())
        return ok_atom::value;
      st.holding = self->make_response_promise<ok_atom>();
      return *st.holding;
    },
    [self](open_gate_atom) {
      self->state.open = true;
      auto held = std::move(self->state.held);
      for (auto& [promise, deltas, stamp] : held)
        pass_batch(self, promise, std::move(deltas), std::move(stamp));
    },
    [self](get_atom, std::size_t items) -> result<std::vector<std::size_t>> {
      auto& st = self->state;
      if (st.items_passed >= items)
        return st.passed;
      st.awaited = items;
      st.waiting = self->make_response_promise<std::vector<std::size_t>>();
      return *st.waiting;
    },
    [self](replica_atom a, prepare_atom v, std::string& session,
           uint64_t ballot, list_stamp& stamp) {
      return self->delegate(self->state.target, a, v, std::move(session),
                            ballot, std::move(stamp));
    },
    [self](replica_atom a, claim_atom v, std::string& session, uint64_t ballot,
           uint64_t generation, std::string& claimant, list_stamp& stamp) {
      return self->delegate(self->state.target, a, v, std::move(session),
                            ballot, generation, std::move(claimant),
                            std::move(stamp));
    },
    [self](replica_atom a, write_atom v, session_delta& delta,
           list_stamp& stamp) {
      return self->delegate(self->state.target, a, v, std::move(delta),
                            std::move(stamp));
    },
    [self](replica_atom a, install_atom v, uint64_t ballot,
           session_image& image,
           list_stamp& stamp) -> result<replica_answer> {
      auto promise = self->make_response_promise<replica_answer>();
      self
        ->request(self->state.target, infinite, a, v, ballot, std::move(image),
                  std::move(stamp))
        .then(
          [self, promise](replica_answer& answer) mutable {
            auto applied = outcome_of(answer) == replica_outcome::applied;
            promise.deliver(std::move(answer));
            count_stored(self, applied ? 1 : 0);
          },
          [promise](error& err) mutable { promise.deliver(std::move(err)); });
      return promise;
    },
    [self](replica_atom a, image_atom v, std::string& session,
           list_stamp& stamp) {
      return self->delegate(self->state.target, a, v, std::move(session),
                            std::move(stamp));
    },
    [self](replica_atom a, version_atom v, std::string& session,
           list_stamp& stamp) {
      return self->delegate(self->state.target, a, v, std::move(session),
                            std::move(stamp));
    },
    [self](stored_atom, std::size_t writes) -> result<ok_atom> {
      auto& st = self->state;
      if (st.items_stored >= writes)
        return ok_atom::value;
      auto promise = self->make_response_promise<ok_atom>();
      st.awaiting_stored.emplace_back(writes, promise);
      return promise;
    },
  };
}

struct claim_gate_state {
  node_actor target;
  /// The generation each claim received (held or passed) asked for, in
  /// order.
  std::vector<uint64_t> generations;
  std::vector<std::pair<response_promise, message>> held;
  std::optional<response_promise> holding;
  bool open = false;
};

/// A peer's gateway in front of `target` that holds the claims until
/// `opengate` (`held` answers once one is held, `get` how many came) and
/// passes every other request on at once.
behavior claim_gate(stateful_actor<claim_gate_state>* self,
                    node_actor target) {
  self->state.target = target;
  self->set_default_handler([self](scheduled_actor*, message_view& x)
                              -> result<message> {
    return self->delegate(actor_cast<actor>(self->state.target),
                          x.move_content_to_message());
  });
  return {
    [self](replica_atom a, claim_atom v, std::string& session, uint64_t ballot,
           uint64_t generation, std::string& claimant,
           list_stamp& stamp) -> result<message> {
      auto request = make_message(a, v, std::move(session), ballot, generation,
                                  std::move(claimant), std::move(stamp));
      auto& st = self->state;
      st.generations.push_back(generation);
      if (st.open)
        return self->delegate(actor_cast<actor>(st.target), std::move(request));
      auto promise = self->make_response_promise();
      st.held.emplace_back(promise, std::move(request));
      if (st.holding) {
        st.holding->deliver(ok_atom::value);
        st.holding.reset();
      }
      return promise;
    },
    [self](open_gate_atom) {
      auto& st = self->state;
      st.open = true;
      for (auto& [promise, request] : st.held) {
        auto answer = promise;
        self->request(actor_cast<actor>(st.target), infinite, request)
          .then(
            [answer](replica_answer& x) mutable { answer.deliver(x); },
            [answer](error& err) mutable { answer.deliver(err); });
      }
      st.held.clear();
    },
    [self](held_atom) -> result<message> {
      auto& st = self->state;
      if (!st.held.empty())
        return make_message(ok_atom::value);
      st.holding = self->make_response_promise();
      return *st.holding;
    },
    [self](get_atom) -> result<message> {
      return make_message(self->state.generations.size());
    },
    [self](get_atom, claim_atom) -> result<message> {
      return make_message(self->state.generations);
    },
  };
}

/// A session handle; persists carry their snapshots, so it is never asked.
session_handle_actor::behavior_type idle_handle() {
  return {[](snapshot_atom) { return std::string{"asked"}; }};
}

struct fixture {
  temp_dir dir;
  test_config cfg;
  actor_system sys{cfg};
  /// Three listed in `map`; the fourth joins them in `grown`.
  std::array<replica, 4> replicas;
  cluster_map map{std::vector<node_endpoint>{
    {"127.0.0.1", 4301}, {"127.0.0.1", 4302}, {"127.0.0.1", 4303}}};
  /// `map` with a fourth node: the list after one joined.
  cluster_map grown{std::vector<node_endpoint>{
    {"127.0.0.1", 4301}, {"127.0.0.1", 4302}, {"127.0.0.1", 4303},
    {"127.0.0.1", 4304}}};
  std::vector<actor> others;
  std::vector<replicated_sessions> coordinating;
  std::vector<session_sync_actor> repairs;
  std::shared_ptr<peer_counters> counters = std::make_shared<peer_counters>(
    std::vector<std::string>{"127.0.0.1:4301", "127.0.0.1:4302",
                             "127.0.0.1:4303"});

  fixture() {
    for (std::size_t i = 0; i < replicas.size(); ++i) {
      service_settings settings;
      settings.db_path = dir.sub("n" + std::to_string(i));
      auto started = start_services(sys, settings);
      CAF_REQUIRE(started);
      auto& r = replicas[i];
      r.services = std::move(*started);
      for (const auto& x : r.services->service<session_persister_service>()
                             .actors()
                             .io)
        r.io.push_back(actor_cast<session_replica_io_actor>(x));
      r.endpoint = spawn_session_replica_endpoint(sys, r.io, r.catching_up);
      r.repair = i < map.size() ? sync_of(i, false)
                                : sync_of(i, false, {}, grown, i);
      replica_endpoints endpoints;
      endpoints.session_replicas = r.endpoint;
      endpoints.session_sync = actor_cast<session_listing_requests>(r.repair);
      r.gateway = spawn_node_gateway(sys, r.services->handles(), {}, counters,
                                     endpoints);
    }
  }

  ~fixture() {
    for (auto& node : coordinating)
      node.stop(sys, 1s);
    for (auto& x : others)
      anon_send_exit(x, exit_reason::user_shutdown);
    scoped_actor self{sys};
    for (auto& x : repairs) {
      anon_send_exit(x, exit_reason::user_shutdown);
      self->wait_for(x);
    }
    for (auto& r : replicas) {
      anon_send_exit(r.gateway, exit_reason::user_shutdown);
      anon_send_exit(r.endpoint, exit_reason::user_shutdown);
      r.services->stop(30s);
    }
  }

  /// A repair of node `i`'s sessions, catching up first when `catch_up`,
  /// reporting to `caught_up`; its peers are given later (`introduce`).
  /// Under `list` when given, as its node `self` with keys of
  /// `replica_count` replicas; it drops keys it holds for others only as
  /// `lists` allows (null: never); `list_changed` for a node that
  /// restarted under another list (its catch-up makes two passes);
  /// `exchange_completed` is called with the peer of each exchange that
  /// completed.
  session_sync_actor sync_of(std::size_t i, bool catch_up,
                             actor caught_up = {},
                             std::optional<cluster_map> list = {},
                             std::size_t self = 0,
                             std::size_t replica_count = 3,
                             std::shared_ptr<serving_lists> lists = nullptr,
                             bool list_changed = false,
                             std::function<void(std::size_t)>
                               exchange_completed = nullptr) {
    repair_settings settings{list ? *list : map,
                                   list ? self : i,
                                   replica_count,
                                   10s,
                                   0s,
                                   100ms,
                                   catch_up,
                                   replicas[i].catching_up,
                                   counters,
                                   list_changed,
                                   std::move(lists),
                                   list_changed ? 2 : 1};
    settings.exchange_completed = std::move(exchange_completed);
    auto result = spawn_session_sync(sys, replicas[i].services->database(),
                                     replicas[i].io, caught_up, settings);
    repairs.push_back(result);
    return result;
  }

  /// Tells `repair` (of node `i`) where the other replicas' gateways are.
  void introduce(const session_sync_actor& repair, std::size_t i) {
    for (uint64_t p = 0; p < 3; ++p)
      if (p != i)
        anon_send(repair, peer_up_atom::value, p, replicas[p].gateway);
  }

  /// Tells `repair` (of node `i` under `grown`) where its peers are.
  void introduce_under_grown(const session_sync_actor& repair, std::size_t i) {
    std::vector<node_actor> gateways;
    for (const auto& r : replicas)
      gateways.push_back(r.gateway);
    introduce_peers(repair, i, gateways);
  }

  std::pair<uint64_t, uint64_t> release_at(const session_sync_actor& repair) {
    return release_pass_of(sys, repair);
  }

  node_actor silent() {
    others.push_back(sys.spawn(silent_peer));
    return actor_cast<node_actor>(others.back());
  }

  session_handle_actor handle() {
    auto result = sys.spawn(idle_handle);
    others.push_back(actor_cast<actor>(result));
    return result;
  }

  /// Node `i` coordinating its sessions, its peers reached at `peers`
  /// (by index; the entry of `i` is ignored): real gateways unless given.
  /// Under `list` when given, else `map`.
  session_persister_actor node(std::size_t i,
                               std::array<node_actor, 3> peers = {},
                               caf::timespan timeout = 10s,
                               std::optional<cluster_map> list = {}) {
    auto result = start_replicated_sessions(
      sys, replicas[i].io,
      {list ? *list : map, i, 3, timeout, counters, replicas[i].catching_up,
       nullptr},
      {});
    for (uint64_t p = 0; p < 3; ++p) {
      if (p == i)
        continue;
      auto gateway = peers[p] ? peers[p] : replicas[p].gateway;
      for (const auto& x : result.coordinators)
        anon_send(x, peer_up_atom::value, p, gateway);
    }
    coordinating.push_back(result);
    return result.persister;
  }

  /// Node `i` of `list` coordinating its sessions, its peers reached at
  /// `peers` (by index in `list`; the entry of `i` is ignored), counting
  /// majorities under the other lists `lists` sees served (null: under
  /// `list` alone).
  session_persister_actor node_under(std::size_t i, const cluster_map& list,
                                     std::vector<node_actor> peers,
                                     std::shared_ptr<serving_lists> lists,
                                     caf::timespan timeout) {
    auto result = start_replicated_sessions(
      sys, replicas[i].io,
      {list, i, 3, timeout, counters, replicas[i].catching_up,
       std::move(lists)},
      {});
    for (uint64_t p = 0; p < peers.size(); ++p)
      if (p != i)
        for (const auto& x : result.coordinators)
          anon_send(x, peer_up_atom::value, p, peers[p]);
    coordinating.push_back(result);
    return result.persister;
  }

  /// Replica `i` behind a gateway of its own serving under `own`, its
  /// peers' lists as `lists` tells (test::gateway_counting).
  node_actor gateway_counting(std::size_t i, const cluster_map& own,
                              std::shared_ptr<serving_lists> lists) {
    replica_endpoints endpoints;
    endpoints.session_replicas = replicas[i].endpoint;
    auto result = coalesce::test::gateway_counting(
      sys, replicas[i].services->handles(), endpoints, own, std::move(lists));
    others.push_back(actor_cast<actor>(result));
    return result;
  }

  /// A session whose replicas are {0, 1, 2} under `map` and `grown` alike.
  std::string session_staying_off_node_3() const {
    return key_not_on(grown, 3, key_kind::session, "s");
  }

  /// A view of node 0's two peers, both of which answered they serve `map`:
  /// it counts `map` alone.
  std::shared_ptr<serving_lists> peers_serving_map() const {
    return two_peers_serving(map);
  }

  /// A session node 3 of `grown` takes from node 2: its replicas are
  /// {0, 1, 2} under `map` and {0, 1, 3} under `grown`.
  std::string session_moving_to_node_3() const {
    for (int i = 0;; ++i) {
      auto session = "s" + std::to_string(i);
      auto set = grown.replica_indices({key_kind::session, session}, 3);
      if (std::find(set.begin(), set.end(), 2) == set.end())
        return session;
    }
  }

  template <class Answer, class Handle, class... Ts>
  expected<Answer> ask(const Handle& to, Ts... xs) {
    scoped_actor self{sys};
    expected<Answer> result{error{}};
    self->request(to, 30s, xs...)
      .receive([&](Answer& answer) { result = std::move(answer); },
               [&](error& err) { result = std::move(err); });
    return result;
  }

  expected<uint64_t> register_at(const session_persister_actor& persister,
                                 const std::string& session,
                                 const session_handle_actor& h) {
    return ask<uint64_t>(persister, register_atom::value, session, h);
  }

  expected<ok_atom> persist_at(const session_persister_actor& persister,
                               const std::string& session,
                               const session_handle_actor& h,
                               const std::string& blob,
                               std::vector<session_update> rows) {
    return ask<ok_atom>(persister, persist_atom::value, session, h,
                        session_snapshot{blob}, std::move(rows),
                        std::vector<std::string>{});
  }

  expected<session_record> load_at(const session_persister_actor& persister,
                                   const std::string& session) {
    return ask<session_record>(persister, load_atom::value, session);
  }

  /// What replica `i` alone holds of `session`, asked through its gateway
  /// as a coordinator asks: after every copy a coordinator sent it before
  /// its answer reached the test (each mailbox on the way is in order).
  session_image image_at(std::size_t i, const std::string& session) {
    auto image = ask<session_image>(replicas[i].gateway, replica_atom::value,
                                    image_atom::value, session, list_stamp{});
    CAF_REQUIRE(image);
    return std::move(*image);
  }

  /// The blob and rows replica `i` holds; none without a session there.
  std::optional<session_record> held_by(std::size_t i,
                                        const std::string& session) {
    auto image = image_at(i, session);
    if (image.version.content != static_cast<uint8_t>(session_content::blob))
      return std::nullopt;
    return image.record;
  }

  session_version version_at(std::size_t i, const std::string& session) {
    return image_at(i, session).version;
  }

  /// An open `write_gate` in front of replica `i`'s gateway. A coordinator
  /// answers once a majority stored a write, and a write for a peer still
  /// answering an earlier batch leaves with the next one: the last replica
  /// may store it after the answer, and a test of every replica learns
  /// from here when it did.
  actor gate(std::size_t i) {
    others.push_back(sys.spawn(write_gate, replicas[i].gateway, true));
    return others.back();
  }

  /// Whether `writes` writes in all passed `gate` and were stored (within
  /// 30 s), as deltas or as whole sessions sent a replica that was behind.
  bool stored_through(const actor& gate, std::size_t writes) {
    return ask<ok_atom>(gate, stored_atom::value, writes).engaged();
  }

  /// Node 0 under `lists`, reaching nodes 1 and 2 through a gate each that
  /// `make_gate` spawns in front of a replica's gateway.
  struct gated_node {
    session_persister_actor persister;
    actor gate1;
    actor gate2;
  };

  template <class MakeGate>
  gated_node behind_gates(MakeGate make_gate,
                          std::shared_ptr<serving_lists> lists) {
    gated_node result;
    result.gate1 = make_gate(replicas[1].gateway);
    result.gate2 = make_gate(replicas[2].gateway);
    others.push_back(result.gate1);
    others.push_back(result.gate2);
    result.persister = node_under(0, map,
                                  {{}, actor_cast<node_actor>(result.gate1),
                                   actor_cast<node_actor>(result.gate2)},
                                  std::move(lists), 10s);
    return result;
  }

  /// Gates that hold every write until opened.
  actor closed_write_gate(const node_actor& target) {
    return sys.spawn(write_gate, target, false);
  }

  /// Checks that `session`, read through `persister`, is `blob` with the
  /// rows `expected`.
  void check_reads(const session_persister_actor& persister,
                   const std::string& session, const std::string& blob,
                   const ids& expected) {
    auto loaded = load_at(persister, session);
    CAF_REQUIRE(loaded);
    CAF_CHECK_EQUAL(loaded->blob, blob);
    CAF_CHECK_EQUAL(ids_of(*loaded), expected);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(session_replicas_tests, fixture)

CAF_TEST(a persist is answered once a majority stored it and reaches every replica) {
  std::array<actor, 3> gates{actor{}, gate(1), gate(2)};
  auto persister = node(0, {node_actor{}, actor_cast<node_actor>(gates[1]),
                            actor_cast<node_actor>(gates[2])});
  auto h = handle();
  auto generation = register_at(persister, "s", h);
  CAF_REQUIRE(generation);
  CAF_REQUIRE(persist_at(persister, "s", h, "v1", {row("a", 1)}));
  CAF_REQUIRE(persist_at(persister, "s", h, "v2", {row("b", 2)}));
  // Node 0's own replica was sent both before the answers, which image_at
  // reads after; a peer may take the second after its answer.
  CAF_REQUIRE(stored_through(gates[1], 2));
  CAF_REQUIRE(stored_through(gates[2], 2));
  for (std::size_t i = 0; i < 3; ++i) {
    auto held = held_by(i, "s");
    CAF_REQUIRE(held);
    CAF_CHECK_EQUAL(held->blob, "v2");
    CAF_CHECK_EQUAL(ids_of(*held), (ids{"a", "b"}));
    // The register's claim is on every replica too.
    CAF_CHECK_EQUAL(version_at(i, "s").generation, *generation);
  }
  auto loaded = load_at(persister, "s");
  CAF_REQUIRE(loaded);
  CAF_CHECK_EQUAL(loaded->blob, "v2");
  CAF_CHECK_EQUAL(counters->replica_failures.load(), 0u);
}

CAF_TEST(writes that queue for a peer reach it together in one batch) {
  auto gate = sys.spawn(write_gate, replicas[1].gateway, false);
  others.push_back(gate);
  auto persister = node(0, {node_actor{}, actor_cast<node_actor>(gate),
                            node_actor{}});
  auto coordinators = coordinating.back().coordinators.size();
  constexpr std::size_t sessions = 24;
  auto h = handle();
  for (std::size_t i = 0; i < sessions; ++i)
    CAF_REQUIRE(register_at(persister, "b" + std::to_string(i), h));
  // Node 1 holds each coordinator's first batch: node 0 and node 2 answer
  // every persist meanwhile, and node 1's deltas queue behind the batch.
  for (std::size_t i = 0; i < sessions; ++i)
    CAF_REQUIRE(persist_at(persister, "b" + std::to_string(i), h,
                           "v" + std::to_string(i),
                           {row("r", static_cast<int64_t>(i))}));
  anon_send(gate, open_gate_atom::value);
  auto passed = ask<std::vector<std::size_t>>(gate, get_atom::value,
                                              sessions);
  CAF_REQUIRE(passed);
  CAF_MESSAGE("batches to node 1: " << deep_to_string(*passed) << " from "
                                    << coordinators << " coordinators");
  // Each coordinator's held first write, then the rest together.
  CAF_CHECK_LESS_OR_EQUAL(passed->size(), 2 * coordinators);
  CAF_CHECK_GREATER(*std::max_element(passed->begin(), passed->end()),
                    sessions / (2 * coordinators));
  for (std::size_t i = 0; i < sessions; ++i) {
    auto held = held_by(1, "b" + std::to_string(i));
    CAF_REQUIRE(held);
    CAF_CHECK_EQUAL(held->blob, "v" + std::to_string(i));
    CAF_CHECK_EQUAL(ids_of(*held), (ids{"r"}));
  }
}

CAF_TEST(a replica that missed writes gets the whole session on the next one) {
  auto h = handle();
  {
    auto persister = node(0, {node_actor{}, node_actor{}, silent()});
    CAF_REQUIRE(register_at(persister, "s", h));
    CAF_REQUIRE(persist_at(persister, "s", h, "v1", {row("a", 1)}));
    CAF_CHECK(!held_by(2, "s"));
  }
  // Node 1 takes over with node 2 back and node 0 gone: its write needs
  // node 2, which it finds behind and sends the whole session.
  auto persister = node(1, {silent(), node_actor{}, node_actor{}});
  CAF_REQUIRE(persist_at(persister, "s", h, "v2", {row("b", 2)}));
  auto held = held_by(2, "s");
  CAF_REQUIRE(held);
  CAF_CHECK_EQUAL(held->blob, "v2");
  CAF_CHECK_EQUAL(ids_of(*held), (ids{"a", "b"}));
  CAF_CHECK(same_content(version_at(2, "s"), version_at(1, "s")));
}

CAF_TEST(without a majority a request fails in time and names the replicas) {
  auto persister = node(0, {node_actor{}, silent(), silent()}, 300ms);
  auto h = handle();
  auto started = std::chrono::steady_clock::now();
  auto generation = register_at(persister, "s", h);
  CAF_REQUIRE(!generation);
  CAF_CHECK_EQUAL(code_of(generation.error()), code(errc::no_quorum));
  auto text = sys.render(generation.error());
  CAF_CHECK(text.find("127.0.0.1:4302") != std::string::npos);
  CAF_CHECK(text.find("127.0.0.1:4303") != std::string::npos);
  CAF_CHECK_LESS(std::chrono::steady_clock::now() - started, 10s);
  // Nothing a later read could see was written.
  CAF_CHECK(!held_by(0, "s"));
  // Each silent peer's failure counted against it, none against this node.
  CAF_CHECK_EQUAL(counters->by_node[0].replica_failures.load(), 0u);
  CAF_CHECK_GREATER_OR_EQUAL(counters->by_node[1].replica_failures.load(), 1u);
  CAF_CHECK_GREATER_OR_EQUAL(counters->by_node[2].replica_failures.load(), 1u);
  CAF_CHECK_EQUAL(counters->replica_failures.load(),
                  counters->by_node[1].replica_failures.load()
                    + counters->by_node[2].replica_failures.load());
}

CAF_TEST(another coordinator adopts the handle and reads the newest write) {
  auto first = node(0);
  auto h = handle();
  CAF_REQUIRE(register_at(first, "s", h));
  CAF_REQUIRE(persist_at(first, "s", h, "v1", {row("a", 1)}));
  // The handle's client fails over to node 1, which never saw its register.
  auto second = node(1);
  CAF_REQUIRE(persist_at(second, "s", h, "v2", {row("b", 2)}));
  for (auto& persister : {first, second}) {
    auto loaded = load_at(persister, "s");
    CAF_REQUIRE(loaded);
    CAF_CHECK_EQUAL(loaded->blob, "v2");
    CAF_CHECK_EQUAL(ids_of(*loaded), (ids{"a", "b"}));
  }
}

CAF_TEST(a read answers the newest write even when its coordinator missed it) {
  auto h = handle();
  auto first = node(0);
  CAF_REQUIRE(register_at(first, "s", h));
  CAF_REQUIRE(persist_at(first, "s", h, "v1", {row("a", 1)}));
  // Node 1 coordinates a write that node 0's replica never gets.
  auto second = node(1, {silent(), node_actor{}, node_actor{}});
  CAF_REQUIRE(persist_at(second, "s", h, "v2", {row("b", 2)}));
  auto behind = held_by(0, "s");
  CAF_REQUIRE(behind);
  CAF_CHECK_EQUAL(behind->blob, "v1");
  auto loaded = load_at(first, "s");
  CAF_REQUIRE(loaded);
  CAF_CHECK_EQUAL(loaded->blob, "v2");
  CAF_CHECK_EQUAL(ids_of(*loaded), (ids{"a", "b"}));
}

CAF_TEST(a superseded handle is never answered ok on any coordinator) {
  auto first = node(0);
  auto old_handle = handle();
  auto old_generation = register_at(first, "s", old_handle);
  CAF_REQUIRE(old_generation);
  CAF_REQUIRE(persist_at(first, "s", old_handle, "old", {row("a", 1)}));
  auto second = node(1);
  auto new_handle = handle();
  auto new_generation = register_at(second, "s", new_handle);
  CAF_REQUIRE(new_generation);
  CAF_CHECK_GREATER(*new_generation, *old_generation);
  CAF_REQUIRE(persist_at(second, "s", new_handle, "new", {row("b", 2)}));
  // Node 0 still takes the old handle for the current one; the replicas
  // promised node 1 and hold the newer generation.
  auto late = persist_at(first, "s", old_handle, "stale", {row("x", 3)});
  CAF_CHECK(!late);
  // On a third coordinator the old handle is known superseded by its
  // claim, and refused before any write.
  auto third = node(2);
  auto refused = persist_at(third, "s", old_handle, "stale", {row("y", 4)});
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::handle_superseded));
  // A retry of everything failed on node 0 gets no majority either.
  auto unwritten = ask<uint64_t>(first, flush_all_atom::value,
                                 caf::timespan{5s});
  CAF_REQUIRE(unwritten);
  CAF_CHECK_EQUAL(*unwritten, 1u);
  auto loaded = load_at(third, "s");
  CAF_REQUIRE(loaded);
  CAF_CHECK_EQUAL(loaded->blob, "new");
  CAF_CHECK_EQUAL(ids_of(*loaded), (ids{"a", "b"}));
}

CAF_TEST(two coordinators registering at once claim different generations) {
  auto first = node(0);
  auto second = node(1);
  auto a = handle();
  auto b = handle();
  scoped_actor self{sys};
  // Both sent before either is answered; each answer comes back as a
  // message.
  self->send(first, register_atom::value, std::string{"s"}, a);
  self->send(second, register_atom::value, std::string{"s"}, b);
  std::vector<expected<uint64_t>> answers;
  for (int i = 0; i < 2; ++i)
    self->receive(
      [&](uint64_t generation) { answers.emplace_back(generation); },
      [&](error& err) { answers.emplace_back(std::move(err)); },
      after(30s) >> [&] { CAF_FAIL("a register was not answered"); });
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  if (answers[0] && answers[1])
    CAF_CHECK_NOT_EQUAL(*answers[0], *answers[1]);
  else
    CAF_CHECK(answers[0] || answers[1]);
}

CAF_TEST(the ballots of a coordinator carry its id) {
  // Node 1 of a list that changed: its id is not its index, and two nodes
  // of different lists never make the same ballot.
  cluster_map changed{4, map.nodes(), {7, 13, 12}};
  auto coordinator = node(1, {}, 10s, changed);
  auto h = handle();
  CAF_REQUIRE(register_at(coordinator, "s", h));
  CAF_REQUIRE(persist_at(coordinator, "s", h, "blob", {}));
  auto version = version_at(1, "s");
  CAF_CHECK_NOT_EQUAL(version.ballot, 0u);
  CAF_CHECK_EQUAL(version.ballot % 1024, 13u);
  CAF_CHECK_EQUAL(version.promised % 1024, 13u);
}

CAF_TEST(a repair refuses a listing asked under another list) {
  // Index 1 names another node in the same nodes' other order (as nodes
  // that settled their lists apart may hold them under one version).
  auto reversed = map.nodes();
  std::reverse(reversed.begin(), reversed.end());
  auto other = ask<std::vector<session_listing>>(
    replicas[0].gateway, replica_atom::value, digest_atom::value,
    cluster_map{map.version(), reversed, map.ids()}.fingerprint(),
    uint64_t{1});
  CAF_REQUIRE(!other);
  CAF_CHECK_EQUAL(code_of(other.error()), code(errc::not_replica));
  auto list = list_of_refusal(other.error());
  CAF_REQUIRE(list);
  CAF_CHECK_EQUAL(list->version, map.version());
  CAF_CHECK(ask<std::vector<session_listing>>(
    replicas[0].gateway, replica_atom::value, digest_atom::value,
    map.fingerprint(), uint64_t{1}));
}

CAF_TEST(a delete leaves a tombstone on every replica) {
  std::array<actor, 3> gates{actor{}, gate(1), gate(2)};
  auto persister = node(0, {node_actor{}, actor_cast<node_actor>(gates[1]),
                            actor_cast<node_actor>(gates[2])});
  auto h = handle();
  CAF_REQUIRE(register_at(persister, "s", h));
  CAF_REQUIRE(persist_at(persister, "s", h, "v1", {row("a", 1)}));
  CAF_REQUIRE(ask<ok_atom>(persister, delete_atom::value, std::string{"s"}));
  // The persist and the delete.
  CAF_REQUIRE(stored_through(gates[1], 2));
  CAF_REQUIRE(stored_through(gates[2], 2));
  for (std::size_t i = 0; i < 3; ++i)
    CAF_CHECK_EQUAL(version_at(i, "s").content,
                    static_cast<uint8_t>(session_content::deleted));
  auto loaded = load_at(persister, "s");
  CAF_REQUIRE(!loaded);
  CAF_CHECK_EQUAL(code_of(loaded.error()), code(errc::not_found));
}

CAF_TEST(a replica that lost what it held catches up before it answers reads) {
  auto h = handle();
  {
    // Node 2 misses every write.
    auto persister = node(0, {node_actor{}, node_actor{}, silent()});
    CAF_REQUIRE(register_at(persister, "s", h));
    for (int i = 1; i <= 5; ++i)
      CAF_REQUIRE(persist_at(persister, "s", h, "v" + std::to_string(i),
                             {row("r" + std::to_string(i), i)}));
    auto other = handle();
    CAF_REQUIRE(register_at(persister, "t", other));
    CAF_REQUIRE(persist_at(persister, "t", other, "t1", {row("a", 1)}));
    CAF_REQUIRE(ask<ok_atom>(persister, delete_atom::value, std::string{"t"}));
  }
  CAF_CHECK(!held_by(2, "s"));
  // While it catches up, its replica refuses every read, a peer's too.
  replicas[2].catching_up->store(true);
  auto refused = ask<replica_answer>(replicas[2].gateway, replica_atom::value,
                                     version_atom::value, std::string{"s"},
                                     list_stamp{});
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::catching_up));
  scoped_actor waiter{sys};
  auto repair = sync_of(2, true, actor_cast<actor>(waiter));
  introduce(repair, 2);
  waiter->receive([](caught_up_atom) {},
                  after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  CAF_CHECK(!replicas[2].catching_up->load());
  auto held = held_by(2, "s");
  CAF_REQUIRE(held);
  CAF_CHECK_EQUAL(held->blob, "v5");
  CAF_CHECK_EQUAL(ids_of(*held), (ids{"r1", "r2", "r3", "r4", "r5"}));
  CAF_CHECK(same_content(version_at(2, "s"), version_at(0, "s")));
  // The claims and the delete came along.
  CAF_CHECK_EQUAL(version_at(2, "s").generation, version_at(0, "s").generation);
  CAF_CHECK_EQUAL(version_at(2, "t").content,
                  static_cast<uint8_t>(session_content::deleted));
  CAF_CHECK_GREATER_OR_EQUAL(counters->keys_repaired.load(), 2u);
}

CAF_TEST(a node under another list is handed off the sessions it keeps there) {
  // Node 2 missed every write. It comes back under a list of the same
  // nodes in another order, two replicas a session: its peers still serve
  // the old list, refuse its comparison and hand off the sessions it is a
  // replica of under its list, and no other.
  auto h = handle();
  auto persister = node(0, {node_actor{}, node_actor{}, silent()});
  cluster_map reordered{2, {map.nodes()[2], map.nodes()[1], map.nodes()[0]},
                        {2, 1, 0}};
  std::vector<std::string> gained;
  std::vector<std::string> kept_elsewhere;
  for (int i = 0; i < 24; ++i) {
    auto session = "s" + std::to_string(i);
    CAF_REQUIRE(register_at(persister, session, h));
    CAF_REQUIRE(persist_at(persister, session, h, "v" + session,
                           {row("r", i)}));
    auto key = routing_key{key_kind::session, session};
    (replica_of(reordered, 2, key, 0) ? gained : kept_elsewhere)
      .push_back(session);
  }
  CAF_REQUIRE_GREATER(gained.size(), 0u);
  CAF_REQUIRE_GREATER(kept_elsewhere.size(), 0u);
  scoped_actor waiter{sys};
  auto repair = sync_of(2, true, actor_cast<actor>(waiter), reordered, 0, 2);
  anon_send(repair, peer_up_atom::value, uint64_t{1}, replicas[1].gateway);
  anon_send(repair, peer_up_atom::value, uint64_t{2}, replicas[0].gateway);
  waiter->receive([](caught_up_atom) {},
                  after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  CAF_CHECK(!replicas[2].catching_up->load());
  for (const auto& session : gained) {
    auto held = held_by(2, session);
    CAF_CHECK(held && held->blob == "v" + session);
    CAF_CHECK_EQUAL(version_at(2, session).generation,
                    version_at(0, session).generation);
  }
  for (const auto& session : kept_elsewhere)
    CAF_CHECK(!held_by(2, session));
  // Both peers hold every session and offered each it gained.
  CAF_CHECK_EQUAL(counters->keys_handed_off.load(), 2 * gained.size());
  CAF_CHECK_EQUAL(counters->keys_repaired.load(), gained.size());
}

CAF_TEST(a node drops the sessions it lost to a joining node once their replicas hold them) {
  // Written under the three-node list while node 1 took the claims but
  // none of the writes: node 0 and node 2 hold each session, node 1 its
  // generation alone. Node 3 joins; the sessions it takes from node 2 have
  // the replicas {0, 1, 3}, of which node 0 alone holds them until node 3
  // was handed them off.
  auto h = handle();
  auto claims_only = sys.spawn(write_gate, replicas[1].gateway, false);
  others.push_back(claims_only);
  auto persister = node(0, {node_actor{}, actor_cast<node_actor>(claims_only),
                            node_actor{}},
                        300ms);
  std::vector<std::string> lost;
  std::vector<std::string> kept;
  for (int i = 0; i < 24; ++i) {
    auto session = "s" + std::to_string(i);
    CAF_REQUIRE(register_at(persister, session, h));
    CAF_REQUIRE(persist_at(persister, session, h, "v" + session,
                           {row("r", i)}));
    auto key = routing_key{key_kind::session, session};
    (replica_of(grown, 3, key, 2) ? kept : lost).push_back(session);
  }
  CAF_REQUIRE_GREATER(lost.size(), 0u);
  CAF_REQUIRE_GREATER(kept.size(), 0u);
  auto released = sync_of(2, false, {}, grown, 2, 3, serving_lists::fixed({}));
  introduce_under_grown(released, 2);
  // One replica of three holds them: node 2 keeps every one.
  CAF_CHECK_EQUAL(release_at(released),
                  std::make_pair(uint64_t{0}, uint64_t{lost.size()}));
  CAF_CHECK_EQUAL(counters->keys_to_hand_off[1].load(), lost.size());
  for (const auto& session : lost) {
    CAF_CHECK(held_by(2, session));
    CAF_CHECK(!held_by(1, session));
    CAF_CHECK_EQUAL(version_at(1, session).generation,
                    version_at(2, session).generation);
  }
  // Node 3 joins and is handed them off by the nodes of the old list.
  scoped_actor waiter{sys};
  replicas[3].catching_up->store(true);
  auto joined = sync_of(3, true, actor_cast<actor>(waiter), grown, 3);
  introduce_under_grown(joined, 3);
  waiter->receive([](caught_up_atom) {},
                  after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  // While a peer still serves the old list, node 2 may count as a replica
  // there: it drops nothing.
  auto joint = sync_of(2, false, {}, grown, 2, 3, serving_lists::fixed({map}));
  introduce_under_grown(joint, 2);
  CAF_CHECK_EQUAL(release_at(joint),
                  std::make_pair(uint64_t{0}, uint64_t{lost.size()}));
  // Nor while it catches up: node 1 never answers its comparison (which
  // waits 10 s), while nodes 0 and 3 would answer that they hold them.
  auto catching = sync_of(2, true, {}, grown, 2, 3, serving_lists::fixed({}));
  introduce_peers(catching, 2,
                  {replicas[0].gateway, silent(), replicas[2].gateway,
                   replicas[3].gateway});
  CAF_CHECK_EQUAL(release_at(catching),
                  std::make_pair(uint64_t{0}, uint64_t{lost.size()}));
  replicas[2].catching_up->store(false);
  // Under its list alone, with nodes 0 and 3 holding them, it drops them.
  CAF_CHECK_EQUAL(release_at(released),
                  std::make_pair(uint64_t{lost.size()}, uint64_t{0}));
  for (const auto& session : lost) {
    CAF_CHECK(!held_by(2, session));
    auto moved = held_by(3, session);
    CAF_CHECK(moved && moved->blob == "v" + session);
  }
  for (const auto& session : kept)
    CAF_CHECK(held_by(2, session));
  CAF_CHECK_EQUAL(counters->keys_dropped.load(), lost.size());
  CAF_CHECK_EQUAL(counters->keys_to_hand_off[1].load(), 0u);
  // A coordinator under the new list reads each from its replicas.
  auto under_grown = node_under(0, grown,
                                {node_actor{}, replicas[1].gateway,
                                 replicas[2].gateway, replicas[3].gateway},
                                serving_lists::fixed({}), 10s);
  for (const auto& session : lost) {
    auto loaded = load_at(under_grown, session);
    CAF_CHECK(loaded && loaded->blob == "v" + session);
  }
}

CAF_TEST(a drop keeps a session written since its replicas were compared) {
  // Node 0's own replica stores each write before the answer.
  auto h = handle();
  auto persister = node(0);
  CAF_REQUIRE(register_at(persister, "s", h));
  CAF_REQUIRE(persist_at(persister, "s", h, "v1", {row("a", 1)}));
  auto compared = version_at(0, "s");
  CAF_REQUIRE(persist_at(persister, "s", h, "v2", {row("b", 2)}));
  auto io = replicas[0].io.front();
  auto dropped = ask<bool>(io, replica_atom::value, drop_atom::value,
                           std::string{"s"}, compared);
  CAF_REQUIRE(dropped);
  CAF_CHECK(!*dropped);
  auto held = held_by(0, "s");
  CAF_CHECK(held && held->blob == "v2");
  dropped = ask<bool>(io, replica_atom::value, drop_atom::value,
                      std::string{"s"}, version_at(0, "s"));
  CAF_REQUIRE(dropped);
  CAF_CHECK(*dropped);
  CAF_CHECK(!held_by(0, "s"));
  CAF_CHECK_EQUAL(version_at(0, "s").content,
                  static_cast<uint8_t>(session_content::none));
  std::vector<std::string> listed;
  CAF_CHECK(!storage::scan_session_versions(
    *replicas[0].services->database(),
    [&](session_listing&& x) { listed.push_back(x.session); }));
  CAF_CHECK(listed.empty());
}

CAF_TEST(while the list changes a read counts a majority of each list) {
  auto session = session_moving_to_node_3();
  // Node 2, still under the old list, writes while node 0 is silent: the
  // answered write is on {1, 2} alone.
  auto h = handle();
  auto old = node_under(2, map, {silent(), replicas[1].gateway, {}}, nullptr,
                        300ms);
  CAF_REQUIRE(register_at(old, session, h));
  CAF_REQUIRE(persist_at(old, session, h, "v1", {row("a", 1)}));
  CAF_REQUIRE(!held_by(0, session));
  // Node 3, under the new list, reads while node 1 is silent: {0, 3} is a
  // majority of the new replicas and never saw the write. Under the new
  // list alone the write is not found; counting the old list's majority
  // too, node 2 is asked and shows it.
  std::vector<node_actor> peers{replicas[0].gateway, silent(),
                                replicas[2].gateway, {}};
  auto alone = node_under(3, grown, peers, nullptr, 300ms);
  auto missed = load_at(alone, session);
  CAF_REQUIRE(!missed);
  CAF_CHECK_EQUAL(code_of(missed.error()), code(errc::not_found));
  auto joint = node_under(3, grown, peers, serving_lists::fixed({map}),
                          300ms);
  auto loaded = load_at(joint, session);
  CAF_REQUIRE(loaded);
  CAF_CHECK_EQUAL(loaded->blob, "v1");
  CAF_CHECK_EQUAL(ids_of(*loaded), (ids{"a"}));
}

CAF_TEST(while the list changes a write reaches a majority of each list) {
  auto session = session_moving_to_node_3();
  // Node 3, under the new list, registers and persists while node 1 is
  // silent: counting the old list too, the write must reach node 2.
  auto h = handle();
  std::vector<node_actor> peers{replicas[0].gateway, silent(),
                                replicas[2].gateway, {}};
  auto joint = node_under(3, grown, peers, serving_lists::fixed({map}),
                          300ms);
  CAF_REQUIRE(register_at(joint, session, h));
  CAF_REQUIRE(persist_at(joint, session, h, "v1", {row("a", 1)}));
  // Node 2, still under the old list, reads while node 0 is silent: {1, 2}.
  auto old = node_under(2, map, {silent(), replicas[1].gateway, {}}, nullptr,
                        300ms);
  auto loaded = load_at(old, session);
  CAF_REQUIRE(loaded);
  CAF_CHECK_EQUAL(loaded->blob, "v1");
  CAF_CHECK_EQUAL(ids_of(*loaded), (ids{"a"}));
}

CAF_TEST(a write a majority took while another list came into use is not answered ok) {
  // The order the membership campaign lost a session row by: node 0 counts
  // its own list alone (its peers' last pings named it) and its write is
  // on its own replica; a peer restarts under a new list and, catching up,
  // asks node 0 for a handoff (node 0 now sees the new list served); only
  // then does node 1 take the write. Its majority was counted under the
  // old list alone, which a majority of the new one need not meet: not
  // answered from that round; written once more, counted under both, and
  // that round answers.
  auto session = session_staying_off_node_3();
  auto lists = peers_serving_map();
  auto [n0, gate1, gate2] = behind_gates(
    [this](const node_actor& target) { return closed_write_gate(target); },
    lists);
  auto h = handle();
  CAF_REQUIRE(register_at(n0, session, h));
  scoped_actor self{sys};
  auto pending = self->request(n0, 30s, persist_atom::value, session, h,
                               session_snapshot{"v1"},
                               std::vector<session_update>{row("a", 1)},
                               std::vector<std::string>{});
  auto first = answer_once_a_peer_serves<ok_atom>(self, pending, gate1,
                                                  *lists, grown);
  CAF_REQUIRE(first);
  // Node 1 took the write twice before the answer: once in each round.
  auto passed = ask<std::vector<std::size_t>>(gate1, get_atom::value,
                                              std::size_t{0});
  CAF_REQUIRE(passed);
  CAF_CHECK_EQUAL(*passed, (std::vector<std::size_t>{1, 1}));
  anon_send(gate2, open_gate_atom::value);
  check_reads(n0, session, "v1", ids{"a"});
  CAF_REQUIRE(persist_at(n0, session, h, "v2", {row("b", 2)}));
  check_reads(n0, session, "v2", ids{"a", "b"});
}

CAF_TEST(a node paused past the silence it allows coordinates nothing until it hears its peers) {
  // A node frozen while the others changed lists wakes with their old
  // answers, and a node being removed learns of the change from no
  // handoff: until every peer answered again, it cannot tell which lists
  // to count majorities under.
  hand_clock view_clock;
  auto lists = two_peers_serving(map, 10s, view_clock.source());
  auto n0 = node_under(0, map, {{}, replicas[1].gateway, replicas[2].gateway},
                       lists, 10s);
  auto h = handle();
  CAF_REQUIRE(register_at(n0, "s", h));
  paused_for_an_hour(view_clock);
  auto refused = persist_at(n0, "s", h, "v1", {row("a", 1)});
  check_refused_for_a_pause(sys, refused, errc::catching_up);
  auto unread = load_at(n0, "s");
  CAF_REQUIRE(!unread);
  CAF_CHECK_EQUAL(code_of(unread.error()), code(errc::catching_up));
  peers_heard_again(*lists, map);
  CAF_REQUIRE(persist_at(n0, "s", h, "v2", {row("b", 2)}));
  check_reads(n0, "s", "v2", ids{"a", "b"});
}

CAF_TEST(a write a majority took while its node was paused is not answered ok) {
  // Paused after it counted its majority under the lists it knew, the
  // node cannot tell whether they changed while it slept: not answered
  // ok, and written again once its peers answer.
  hand_clock view_clock;
  auto lists = two_peers_serving(map, 10s, view_clock.source());
  auto [n0, gate1, gate2] = behind_gates(
    [this](const node_actor& target) { return closed_write_gate(target); },
    lists);
  auto h = handle();
  CAF_REQUIRE(register_at(n0, "s", h));
  scoped_actor self{sys};
  auto pending = self->request(n0, 30s, persist_atom::value, std::string{"s"},
                               h, session_snapshot{"v1"},
                               std::vector<session_update>{row("a", 1)},
                               std::vector<std::string>{});
  auto first = answer_once_held<ok_atom>(self, pending, gate1, [&] {
    paused_for_an_hour(view_clock);
  });
  check_refused_for_a_pause(sys, first, errc::no_quorum);
  anon_send(gate2, open_gate_atom::value);
  peers_heard_again(*lists, map);
  CAF_REQUIRE(persist_at(n0, "s", h, "v2", {row("b", 2)}));
  check_reads(n0, "s", "v2", ids{"a", "b"});
}

CAF_TEST(a claim a majority took while another list came into use is made again) {
  // The same order for a register: its claim of a generation is counted
  // under the old list alone when it lands. The persister does not answer
  // the register from it: it registers once more, and that claim, counted
  // under both lists, is what the register answers.
  auto session = session_staying_off_node_3();
  auto lists = peers_serving_map();
  auto [n0, gate1, gate2] = behind_gates(
    [this](const node_actor& target) { return sys.spawn(claim_gate, target); },
    lists);
  auto h = handle();
  scoped_actor self{sys};
  auto pending = self->request(n0, 30s, register_atom::value, session, h);
  auto registered = answer_once_a_peer_serves<uint64_t>(self, pending, gate1,
                                                        *lists, grown);
  CAF_REQUIRE(registered);
  CAF_CHECK_EQUAL(ask<std::size_t>(gate1, get_atom::value), 2u);
  // The coordinator made the same claim again (its second round), not the
  // persister a register of its own, which would claim a later generation.
  auto claimed = ask<std::vector<uint64_t>>(gate1, get_atom::value,
                                            claim_atom::value);
  CAF_CHECK(claimed == std::vector<uint64_t>(2, *registered));
  auto held = version_at(1, session);
  CAF_CHECK_EQUAL(held.generation, *registered);
  anon_send(gate2, open_gate_atom::value);
  CAF_CHECK(persist_at(n0, session, h, "v1", {row("a", 1)}));
}

CAF_TEST(a coordinator that missed a list change gets no majority from replicas that count it) {
  // A node being removed, or one paused while the others changed lists,
  // counts its own list alone, and no handoff request tells it otherwise.
  // Nodes 0 and 1 restarted under `grown` and see node 2 serve `map`: they
  // refuse its requests, naming both lists, and it counts both from then
  // on, whatever its pings told it: the register's read, refused, is made
  // once more counting both, and answered.
  auto session = session_staying_off_node_3();
  std::vector<node_actor> peers{
    gateway_counting(0, grown, serving_lists::fixed({map})),
    gateway_counting(1, grown, serving_lists::fixed({map})), {}};
  auto lists = serving_lists::fixed({});
  auto n2 = node_under(2, map, peers, lists, 10s);
  auto h = handle();
  CAF_REQUIRE(register_at(n2, session, h));
  auto view = lists->current();
  CAF_REQUIRE_EQUAL(view->others.size(), 1u);
  CAF_CHECK(view->others[0].nodes() == grown.nodes());
  // Counting both, its requests are taken.
  CAF_REQUIRE(persist_at(n2, session, h, "v1", {row("a", 1)}));
  for (std::size_t i : {0, 1}) {
    auto held = held_by(i, session);
    CAF_REQUIRE(held);
    CAF_CHECK_EQUAL(held->blob, "v1");
  }
}

CAF_TEST(a replica that learned of another list refuses a write counted without it) {
  // The order the list-carrying requests close: node 2 counts `map` alone
  // and writes; nodes 0 and 1, still under `map`, learn that a peer
  // restarted under `grown` (its handoff request, a ping). A write node 2
  // counted under `map` alone could now miss what `grown`'s majorities
  // take: both refuse it, and node 2 writes it once more counting both,
  // which answers the persist.
  auto session = session_staying_off_node_3();
  std::array<std::shared_ptr<serving_lists>, 2> seen{two_peers_serving(map),
                                                     two_peers_serving(map)};
  std::array<actor, 2> gates;
  for (std::size_t i : {0, 1}) {
    gates[i] = sys.spawn(write_gate, gateway_counting(i, map, seen[i]), true);
    others.push_back(gates[i]);
  }
  std::vector<node_actor> peers{actor_cast<node_actor>(gates[0]),
                                actor_cast<node_actor>(gates[1]), {}};
  auto lists = serving_lists::fixed({});
  auto n2 = node_under(2, map, peers, lists, 10s);
  auto h = handle();
  CAF_REQUIRE(register_at(n2, session, h));
  CAF_REQUIRE(persist_at(n2, session, h, "v1", {row("a", 1)}));
  // Both peers stored it: the next write leaves for each in a batch of its
  // own, stamped when node 2 counted it (a peer still answering this one
  // would take the next with a stamp made after the other's refusal).
  for (auto& gate : gates)
    CAF_REQUIRE(stored_through(gate, 1));
  for (auto& x : seen)
    x->peer_serves(0, nodes_of(grown), true);
  CAF_REQUIRE(persist_at(n2, session, h, "v2", {row("b", 2)}));
  // Only a refusal names `grown` to node 2.
  CAF_CHECK_EQUAL(lists->current()->others.size(), 1u);
  // Node 2 applied `v2` in the refused round: the round that answers finds
  // both peers behind and installs the session whole, on the second peer
  // possibly after the answer.
  for (auto& gate : gates)
    CAF_REQUIRE(stored_through(gate, 2));
  for (std::size_t i : {0, 1}) {
    auto held = held_by(i, session);
    CAF_REQUIRE(held);
    CAF_CHECK_EQUAL(held->blob, "v2");
  }
  check_reads(n2, session, "v2", ids{"a", "b"});
}

CAF_TEST(a handoff request tells a node which list its asker serves now) {
  auto lists = peers_serving_map();
  auto before = lists->current()->generation;
  CAF_REQUIRE(lists->current()->others.empty());
  auto repair = sync_of(1, false, {}, {}, 0, 3, lists);
  // A node that joins is no peer of node 1: nothing to learn from it.
  CAF_REQUIRE((ask<std::vector<session_listing>>(
    repair, replica_atom::value, handoff_atom::value,
    handoff_asker_of(grown, 3, 3))));
  CAF_CHECK_EQUAL(lists->current()->generation, before);
  // Node 0 restarted under `grown` and asks for what it keeps there: node
  // 1's coordinators count `grown` too from before the answer.
  CAF_REQUIRE((ask<std::vector<session_listing>>(
    repair, replica_atom::value, handoff_atom::value,
    handoff_asker_of(grown, 0, 3))));
  auto view = lists->current();
  CAF_CHECK_GREATER(view->generation, before);
  CAF_REQUIRE_EQUAL(view->others.size(), 1u);
  CAF_CHECK(view->others[0].nodes() == grown.nodes());
}

CAF_TEST(a node whose list changed catches up from every peer twice) {
  // The first pass tells each peer the new list; the second finds what a
  // peer took before it learned it.
  scoped_actor waiter{sys};
  auto rounds_before = counters->sync_rounds.load();
  auto repair = sync_of(3, true, actor_cast<actor>(waiter), grown, 3, 3,
                        nullptr, true);
  introduce_under_grown(repair, 3);
  waiter->receive([](caught_up_atom) {},
                  after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  CAF_CHECK_EQUAL(counters->sync_rounds.load() - rounds_before, 6u);
}

// The campaign's lost row, replayed: a joining node (node 3 of `grown`)
// compares with nodes 1 and 2, which learn its list; node 1, still under
// the old list alone, then has a write taken by 1 and 2 (node 0 silent);
// the joiner compares with node 0, which lacks it. Under `grown` the
// session's replicas include 3 and 0, a majority without the write: only a
// second pass over every peer brings it to node 3.
CAF_TEST(a joining nodes second pass finds a write its peers took meanwhile) {
  std::string session;
  for (int i = 0; session.empty(); ++i) {
    auto name = "j" + std::to_string(i);
    auto set = grown.replica_indices({key_kind::session, name}, 3);
    auto has = [&](std::size_t node) {
      return std::find(set.begin(), set.end(), node) != set.end();
    };
    if (has(3) && has(0))
      session = name;
  }
  auto h = handle();
  auto before = node(1);
  CAF_REQUIRE(register_at(before, session, h));
  CAF_REQUIRE(persist_at(before, session, h, "v1", {row("a", 1)}));
  scoped_actor waiter{sys};
  // Told the peer of each exchange the joiner completes.
  scoped_actor exchanges{sys};
  // Two passes, as node.cpp gives a node starting under its first list.
  auto repair = sync_of(3, true, actor_cast<actor>(waiter), grown, 3, 3,
                        nullptr, true,
                        [to = actor_cast<actor>(exchanges)](std::size_t peer) {
                          anon_send(to, static_cast<uint64_t>(peer));
                        });
  anon_send(repair, peer_up_atom::value, uint64_t{1}, replicas[1].gateway);
  anon_send(repair, peer_up_atom::value, uint64_t{2}, replicas[2].gateway);
  std::set<uint64_t> compared;
  while (compared.size() < 2)
    exchanges->receive(
      [&](uint64_t peer) { compared.insert(peer); },
      after(30s) >> [] { CAF_FAIL("no exchange with nodes 1 and 2 in 30 s"); });
  CAF_REQUIRE(compared == (std::set<uint64_t>{1, 2}));
  auto unaware = node(1, {silent(), node_actor{}, node_actor{}});
  auto later = handle();
  CAF_REQUIRE(register_at(unaware, session, later));
  CAF_REQUIRE(persist_at(unaware, session, later, "v2", {row("b", 2)}));
  CAF_REQUIRE(!held_by(0, session) || held_by(0, session)->blob == "v1");
  anon_send(repair, peer_up_atom::value, uint64_t{0}, replicas[0].gateway);
  waiter->receive([](caught_up_atom) {},
                  after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  auto held = held_by(3, session);
  CAF_REQUIRE(held);
  CAF_CHECK_EQUAL(held->blob, "v2");
  CAF_CHECK_EQUAL(ids_of(*held), (ids{"a", "b"}));
}

CAF_TEST(a node that has not heard which lists its peers serve writes nothing) {
  auto unheard = std::make_shared<serving_lists>(2);
  auto n0 = node_under(0, map, {{}, replicas[1].gateway, replicas[2].gateway},
                       unheard, 10s);
  auto h = handle();
  auto refused = register_at(n0, "s", h);
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::catching_up));
  CAF_CHECK(!held_by(1, "s"));
  unheard->peer_unanswered(0);
  unheard->peer_serves(1, {"127.0.0.1:4301", "127.0.0.1:4302",
                           "127.0.0.1:4303"}, false);
  CAF_CHECK(register_at(n0, "s", h));
}

CAF_TEST(a peer that names no cluster list adds nothing to count) {
  // A node started without coalesce.cluster answers pings with no list:
  // it keeps no replica of anything, and a group of none would never be
  // decided.
  auto n0 = node_under(0, map, {{}, replicas[1].gateway, replicas[2].gateway},
                       serving_lists::fixed({cluster_map{}}), 10s);
  auto h = handle();
  CAF_REQUIRE(register_at(n0, "s", h));
  CAF_CHECK(persist_at(n0, "s", h, "v1", {row("a", 1)}));
}

CAF_TEST(a catching up replica does not count toward a read) {
  auto h = handle();
  auto first = node(0);
  CAF_REQUIRE(register_at(first, "s", h));
  CAF_REQUIRE(persist_at(first, "s", h, "v1", {row("a", 1)}));
  // Node 1's replica catches up (as after a wiped disk) and node 0 is
  // gone: node 2 alone is no majority, so the read fails rather than
  // trust a replica that may have lost the newest write.
  replicas[1].catching_up->store(true);
  auto second = node(1, {silent(), node_actor{}, node_actor{}}, 300ms);
  auto loaded = load_at(second, "s");
  CAF_REQUIRE(!loaded);
  CAF_CHECK_EQUAL(code_of(loaded.error()), code(errc::no_quorum));
  CAF_CHECK(sys.render(loaded.error()).find("is catching up")
            != std::string::npos);
  replicas[1].catching_up->store(false);
  auto again = load_at(second, "s");
  CAF_REQUIRE(again);
  CAF_CHECK_EQUAL(again->blob, "v1");
}

CAF_TEST_FIXTURE_SCOPE_END()
