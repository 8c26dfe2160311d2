#define CAF_SUITE node.timeline_replicas
#include <caf/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/node/services.hpp>
#include <coalesce/node/timeline_replicas.hpp>
#include <coalesce/node/timeline_service.hpp>
#include <coalesce/node/sync_rounds.hpp>
#include <coalesce/node/timeline_sync.hpp>
#include <coalesce/storage/timeline_replica.hpp>

#include "error_codes.hpp"
#include "release_pass.hpp"
#include "serving_views.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

/// One replica: real services over a database of its own, the endpoint of
/// its replica of rooms and the gateway peers reach it through.
struct replica {
  std::unique_ptr<local_services> services;
  timeline_replica_store_actor store;
  /// Set while its replica catches up; its endpoint refuses rounds then.
  std::shared_ptr<std::atomic<bool>> catching_up
    = std::make_shared<std::atomic<bool>>(false);
  room_replica_endpoint_actor endpoint;
  timeline_sync_actor repair;
  node_actor gateway;
};

/// A peer that never answers (a stopped process).
behavior silent_peer(event_based_actor* self) {
  self->set_default_handler(skip);
  return {[](unit_t) {}};
}


struct append_tap_state {
  node_actor target;
  /// Whether appends pass at once; else they wait for `opengate`.
  bool open = true;
  std::vector<std::pair<typed_response_promise<room_answer>,
                        std::pair<uint64_t, room_suffix>>>
    held;
  /// A `held` waiting for an append to be held.
  std::optional<typed_response_promise<ok_atom>> holding;
  /// Appends the replica behind it answered `applied`.
  std::size_t applied = 0;
  /// A `get` waiting for this many of them.
  std::size_t awaited = 0;
  std::optional<typed_response_promise<std::size_t>> waiting;
};

using tap_pointer = stateful_actor<append_tap_state>*;

/// A peer's gateway in front of `target` that passes every room request on
/// and counts the appends it answers `applied`: `get` with a count is
/// answered once that many were. A coordinator sends a replica that was
/// behind the part of the log it lacks after that replica answered the
/// append, which can be after a majority answered it: the test learns of
/// the repair from here.
void pass_append(tap_pointer self, typed_response_promise<room_answer> promise,
                 uint64_t ballot, room_suffix suffix) {
  self
    ->request(self->state.target, infinite, replica_atom::value,
              room_atom::value, append_atom::value, ballot, std::move(suffix),
              list_stamp{})
    .then(
      [self, promise](room_answer& answer) mutable {
        auto& st = self->state;
        if (outcome_of(answer) == replica_outcome::applied)
          ++st.applied;
        promise.deliver(std::move(answer));
        if (st.waiting && st.applied >= st.awaited) {
          st.waiting->deliver(st.applied);
          st.waiting.reset();
        }
      },
      [promise](error& err) mutable { promise.deliver(std::move(err)); });
}

/// Spawned not `open`, it holds the appends until `opengate`; `held`
/// answers once one is held.
behavior append_tap(tap_pointer self, node_actor target, bool open) {
  self->state.target = target;
  self->state.open = open;
  return {
    [self](replica_atom, room_atom, append_atom, uint64_t ballot,
           room_suffix& suffix, list_stamp&) -> result<room_answer> {
      auto promise = self->make_response_promise<room_answer>();
      auto& st = self->state;
      if (st.open) {
        pass_append(self, promise, ballot, std::move(suffix));
        return promise;
      }
      st.held.emplace_back(promise, std::make_pair(ballot, std::move(suffix)));
      if (st.holding) {
        st.holding->deliver(ok_atom::value);
        st.holding.reset();
      }
      return promise;
    },
    [self](open_gate_atom) {
      self->state.open = true;
      auto held = std::move(self->state.held);
      for (auto& [promise, append] : held)
        pass_append(self, promise, append.first, std::move(append.second));
    },
    [self](held_atom) -> result<ok_atom> {
      auto& st = self->state;
      if (!st.held.empty())
        return ok_atom::value;
      st.holding = self->make_response_promise<ok_atom>();
      return *st.holding;
    },
    [self](get_atom, std::size_t appends) -> result<std::size_t> {
      auto& st = self->state;
      if (st.applied >= appends)
        return st.applied;
      st.awaited = appends;
      st.waiting = self->make_response_promise<std::size_t>();
      return *st.waiting;
    },
    [self](replica_atom a, room_atom r, prepare_atom v, std::string& room,
           uint64_t ballot, list_stamp& stamp) {
      return self->delegate(self->state.target, a, r, v, std::move(room),
                            ballot, std::move(stamp));
    },
    [self](replica_atom a, room_atom r, image_atom v, std::string& room,
           uint64_t from, list_stamp& stamp) {
      return self->delegate(self->state.target, a, r, v, std::move(room),
                            from, std::move(stamp));
    },
  };
}

timeline_event event(const std::string& id) {
  return timeline_event{id, "m.room.message", 1, "body of " + id};
}

std::vector<timeline_event> events(const std::string& prefix, int n) {
  std::vector<timeline_event> result;
  for (int i = 0; i < n; ++i)
    result.push_back(event(prefix + std::to_string(i)));
  return result;
}

std::vector<std::string> ids_of(const std::vector<timeline_event>& xs) {
  std::vector<std::string> result;
  for (const auto& x : xs)
    result.push_back(x.event_id);
  return result;
}

struct fixture {
  temp_dir dir;
  test_config cfg;
  actor_system sys{cfg};
  /// Three listed in `map`; the fourth joins them in `grown`.
  std::array<replica, 4> replicas;
  cluster_map map{std::vector<node_endpoint>{
    {"127.0.0.1", 4401}, {"127.0.0.1", 4402}, {"127.0.0.1", 4403}}};
  /// `map` with a fourth node: the list after one joined.
  cluster_map grown{std::vector<node_endpoint>{
    {"127.0.0.1", 4401}, {"127.0.0.1", 4402}, {"127.0.0.1", 4403},
    {"127.0.0.1", 4404}}};
  std::vector<actor> others;
  std::vector<replicated_rooms> coordinating;
  std::vector<timeline_sync_actor> repairs;
  std::shared_ptr<peer_counters> counters = std::make_shared<peer_counters>();

  fixture() {
    for (std::size_t i = 0; i < replicas.size(); ++i) {
      service_settings settings;
      settings.db_path = dir.sub("n" + std::to_string(i));
      auto started = start_services(sys, settings);
      CAF_REQUIRE(started);
      auto& r = replicas[i];
      r.services = std::move(*started);
      r.store = r.services->service<timeline_service>().replica_store();
      r.endpoint = spawn_room_replica_endpoint(sys, r.store, r.catching_up);
      r.repair = i < map.size() ? sync_of(i, false)
                                : sync_of(i, false, {}, grown, i);
      replica_endpoints endpoints;
      endpoints.room_replicas = r.endpoint;
      endpoints.room_sync = actor_cast<room_listing_requests>(r.repair);
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

  /// A repair of node `i`'s rooms, catching up first when `catch_up`,
  /// reporting to `caught_up`; its peers are given later (`introduce`).
  /// Under `list` when given, as its node `self` with keys of
  /// `replica_count` replicas; it drops keys it holds for others only as
  /// `lists` allows (null: never).
  timeline_sync_actor sync_of(std::size_t i, bool catch_up,
                              actor caught_up = {},
                              std::optional<cluster_map> list = {},
                              std::size_t self = 0,
                              std::size_t replica_count = 3,
                              std::shared_ptr<serving_lists> lists = nullptr) {
    repair_settings settings{list ? *list : map,
                                    list ? self : i,
                                    replica_count,
                                    10s,
                                    0s,
                                    100ms,
                                    catch_up,
                                    replicas[i].catching_up,
                                    counters,
                                    false,
                                    std::move(lists)};
    auto result = spawn_timeline_sync(sys, replicas[i].services->database(),
                                      replicas[i].store, caught_up, settings);
    repairs.push_back(result);
    return result;
  }

  void introduce(const timeline_sync_actor& repair, std::size_t i) {
    for (uint64_t p = 0; p < 3; ++p)
      if (p != i)
        anon_send(repair, peer_up_atom::value, p, replicas[p].gateway);
  }

  /// Tells `repair` (of node `i` under `grown`) where its peers are.
  void introduce_under_grown(const timeline_sync_actor& repair, std::size_t i) {
    std::vector<node_actor> gateways;
    for (const auto& r : replicas)
      gateways.push_back(r.gateway);
    introduce_peers(repair, i, gateways);
  }

  std::pair<uint64_t, uint64_t> release_at(const timeline_sync_actor& repair) {
    return release_pass_of(sys, repair);
  }

  node_actor silent() {
    others.push_back(sys.spawn(silent_peer));
    return actor_cast<node_actor>(others.back());
  }

  /// Node `i` coordinating its rooms, its peers reached at `peers` (by
  /// index; the entry of `i` is ignored): real gateways unless given.
  /// Under `list` when given, else `map`.
  replicated_rooms node(std::size_t i, std::array<node_actor, 3> peers = {},
                         caf::timespan timeout = 10s,
                         std::optional<cluster_map> list = {},
                         backfill_scheduler_options scheduler = {}) {
    auto result = start_replicated_rooms(
      sys, replicas[i].store,
      {list ? *list : map, i, 3, timeout, counters, replicas[i].catching_up,
       nullptr},
      std::move(scheduler));
    for (uint64_t p = 0; p < 3; ++p) {
      if (p == i)
        continue;
      auto gateway = peers[p] ? peers[p] : replicas[p].gateway;
      anon_send(result.coordinator, peer_up_atom::value, p, gateway);
    }
    coordinating.push_back(result);
    return coordinating.back();
  }

  /// Node `i` of `list` coordinating its rooms, its peers reached at
  /// `peers` (by index in `list`; the entry of `i` is ignored), counting
  /// majorities under the other lists `lists` sees served (null: under
  /// `list` alone).
  replicated_rooms node_under(std::size_t i, const cluster_map& list,
                              std::vector<node_actor> peers,
                              std::shared_ptr<serving_lists> lists,
                              caf::timespan timeout) {
    auto result = start_replicated_rooms(
      sys, replicas[i].store,
      {list, i, 3, timeout, counters, replicas[i].catching_up,
       std::move(lists)},
      {});
    for (uint64_t p = 0; p < peers.size(); ++p)
      if (p != i)
        anon_send(result.coordinator, peer_up_atom::value, p, peers[p]);
    coordinating.push_back(result);
    return coordinating.back();
  }

  /// Replica `i` behind a gateway of its own serving under `own`, its
  /// peers' lists as `lists` tells (test::gateway_counting).
  node_actor gateway_counting(std::size_t i, const cluster_map& own,
                              std::shared_ptr<serving_lists> lists) {
    replica_endpoints endpoints;
    endpoints.room_replicas = replicas[i].endpoint;
    auto result = coalesce::test::gateway_counting(
      sys, replicas[i].services->handles(), endpoints, own, std::move(lists));
    others.push_back(actor_cast<actor>(result));
    return result;
  }

  /// A room node 3 of `grown` takes from node 2 (its replicas are
  /// {0, 1, 2} under `map`, {0, 1, 3} under `grown`), with events a0 and
  /// a1 appended by node 2 under `map` while node 0 was silent: answered,
  /// and held by nodes 1 and 2 alone.
  std::string appended_on_old_replicas_1_and_2() {
    std::string room;
    for (int i = 0; room.empty(); ++i) {
      auto candidate = "!r" + std::to_string(i);
      auto set = grown.replica_indices({key_kind::room, candidate}, 3);
      if (std::find(set.begin(), set.end(), 2) == set.end())
        room = candidate;
    }
    auto old = node_under(2, map, {silent(), replicas[1].gateway, {}},
                          nullptr, 300ms);
    CAF_REQUIRE(append_at(old, room, events("a", 2)));
    CAF_REQUIRE(ids_at(0, room).empty());
    return room;
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

  expected<uint64_t> append_at(const replicated_rooms& node,
                               const std::string& room,
                               std::vector<timeline_event> xs) {
    auto result = ask<uint64_t>(node.coordinator, append_atom::value, room,
                                std::move(xs));
    if (!result)
      CAF_MESSAGE("append to " << room << ": " << sys.render(result.error()));
    return result;
  }

  /// What replica `i` alone holds of `room`, asked through its gateway as
  /// a coordinator asks: after every part a coordinator sent it before its
  /// answer reached the test (each mailbox on the way is in order).
  room_suffix image_at(std::size_t i, const std::string& room) {
    auto image = ask<room_suffix>(replicas[i].gateway, replica_atom::value,
                                  room_atom::value, image_atom::value, room,
                                  uint64_t{0}, list_stamp{});
    CAF_REQUIRE(image);
    return std::move(*image);
  }

  std::vector<std::string> ids_at(std::size_t i, const std::string& room) {
    return ids_of(image_at(i, room).events);
  }

  /// An `append_tap` in front of replica `i`'s gateway, holding the
  /// appends until opened unless `open`.
  actor tap(std::size_t i, bool open = true) {
    others.push_back(sys.spawn(append_tap, replicas[i].gateway, open));
    return others.back();
  }

  /// Node 0 under `lists`, reaching nodes 1 and 2 through a tap each that
  /// holds the appends until opened.
  struct tapped_node {
    replicated_rooms node;
    actor tap1;
    actor tap2;
  };

  tapped_node behind_closed_taps(std::shared_ptr<serving_lists> lists) {
    tapped_node result;
    result.tap1 = tap(1, false);
    result.tap2 = tap(2, false);
    result.node = node_under(0, map,
                             {{}, actor_cast<node_actor>(result.tap1),
                              actor_cast<node_actor>(result.tap2)},
                             std::move(lists), 10s);
    return result;
  }

  /// Whether the replica behind `tap` applied `appends` appends in all
  /// (within 30 s).
  bool applied_through(const actor& tap, std::size_t appends) {
    return ask<std::size_t>(tap, get_atom::value, appends).engaged();
  }

  /// A backfill of `room` through `node`'s scheduler, `batches` batches
  /// of `size` events.
  backfill_result backfill_at(const replicated_rooms& node,
                              const std::string& room, uint32_t size,
                              uint32_t batches) {
    backfill_request request;
    request.room = room;
    request.batch_size = size;
    request.max_batches = batches;
    // One caller enqueues and awaits: a caller that dies cancels its part.
    scoped_actor caller{sys};
    expected<backfill_result> result{error{}};
    caller->request(node.scheduler, 30s, enqueue_atom::value, request)
      .receive(
        [&](backfill_ticket& ticket) {
          caller->request(node.scheduler, 30s, await_atom::value, ticket)
            .receive([&](backfill_result& x) { result = std::move(x); },
                     [&](error& err) { result = std::move(err); });
        },
        [&](error& err) { result = std::move(err); });
    CAF_REQUIRE(result);
    CAF_MESSAGE("backfill of " << room << ": " << to_string(result->reason)
                               << " after " << result->batches
                               << " batches");
    return std::move(*result);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(timeline_replica_tests, fixture)

CAF_TEST(appends_are_answered_once_a_majority_holds_them_in_one_order) {
  auto n0 = node(0);
  CAF_CHECK_EQUAL(append_at(n0, "!r", events("a", 3)), uint64_t{3});
  CAF_CHECK_EQUAL(append_at(n0, "!r", events("b", 2)), uint64_t{2});
  std::vector<std::string> expected{"a0", "a1", "a2", "b0", "b1"};
  for (std::size_t i = 0; i < 3; ++i)
    CAF_CHECK_EQUAL(ids_at(i, "!r"), expected);
  CAF_CHECK(counters->replica_requests > 0u);
}

CAF_TEST(a_coordinators_ballots_carry_its_id) {
  // Node 2 of a list that changed: its id is not its index.
  cluster_map changed{4, map.nodes(), {7, 13, 21}};
  auto n2 = node(2, {}, 10s, changed);
  CAF_REQUIRE(append_at(n2, "!r", events("a", 1)));
  auto segments = image_at(0, "!r").segments;
  CAF_REQUIRE_EQUAL(segments.size(), 1u);
  CAF_CHECK_EQUAL(segments[0].ballot % 1024, 21u);
}

CAF_TEST(a_repair_refuses_a_listing_asked_under_another_list) {
  // Index 1 names another node in a list of another node.
  auto other = ask<std::vector<room_listing>>(
    replicas[0].gateway, replica_atom::value, room_atom::value,
    digest_atom::value,
    cluster_map{map.version() + 1, grown.nodes(), {0, 1, 2, 3}}.fingerprint(),
    uint64_t{1});
  CAF_REQUIRE(!other);
  CAF_CHECK_EQUAL(code_of(other.error()), code(errc::not_replica));
  auto list = list_of_refusal(other.error());
  CAF_REQUIRE(list);
  CAF_CHECK_EQUAL(list->version, map.version());
  CAF_CHECK(ask<std::vector<room_listing>>(
    replicas[0].gateway, replica_atom::value, room_atom::value,
    digest_atom::value, map.fingerprint(), uint64_t{1}));
}

CAF_TEST(while_the_list_changes_an_append_counts_a_majority_of_each_list) {
  auto room = appended_on_old_replicas_1_and_2();
  // Node 3, under the new list, appends while node 1 is silent. Counting
  // the old list's majority too, it reads node 2 and continues the log.
  std::vector<node_actor> peers{replicas[0].gateway, silent(),
                                replicas[2].gateway, {}};
  auto joint = node_under(3, grown, peers, serving_lists::fixed({map}),
                          300ms);
  CAF_REQUIRE(append_at(joint, room, events("b", 1)));
  std::vector<std::string> expected{"a0", "a1", "b0"};
  CAF_CHECK_EQUAL(ids_at(3, room), expected);
  CAF_CHECK_EQUAL(ids_at(0, room), expected);
  CAF_CHECK_EQUAL(ids_at(2, room), expected);
}

CAF_TEST(under_its_own_list_alone_a_new_node_would_lose_an_answered_append) {
  // What the test above guards against: the same round counted under the
  // new list alone sees {0, 3}, neither of which holds the answered
  // events, and starts the log without them.
  auto room = appended_on_old_replicas_1_and_2();
  std::vector<node_actor> peers{replicas[0].gateway, silent(),
                                replicas[2].gateway, {}};
  auto alone = node_under(3, grown, peers, nullptr, 300ms);
  CAF_REQUIRE(append_at(alone, room, events("b", 1)));
  CAF_CHECK_EQUAL(ids_at(3, room), std::vector<std::string>{"b0"});
}

CAF_TEST(an_append_a_majority_took_while_another_list_came_into_use_is_not_answered_ok) {
  // Node 0 counts its own list alone (its peers' last pings named it); its
  // own replica took the append; a peer restarts under a new list and its
  // catch-up tells node 0 so; only then does node 1 take the append. That
  // majority was counted under the old list alone (session_replicas.cpp
  // says why that is not enough): not answered ok.
  auto room = key_not_on(grown, 3, key_kind::room, "!r");
  auto lists = two_peers_serving(map);
  auto [n0, tap1, tap2] = behind_closed_taps(lists);
  scoped_actor self{sys};
  auto pending = self->request(n0.coordinator, 30s, append_atom::value, room,
                               events("a", 1));
  auto first = answer_once_a_peer_serves<uint64_t>(self, pending, tap1,
                                                   *lists, grown);
  check_refused(sys, first, errc::no_quorum, "changed during the request");
  // The next append, counted under both lists, continues the log.
  anon_send(tap2, open_gate_atom::value);
  CAF_REQUIRE(append_at(n0, room, events("b", 1)));
  std::vector<std::string> expected{"a0", "b0"};
  CAF_CHECK_EQUAL(ids_at(1, room), expected);
}

CAF_TEST(an_append_a_majority_took_while_its_node_was_paused_is_not_answered_ok) {
  // Paused after it counted its majority, the node cannot tell whether the
  // lists changed while it slept (serving_lists.hpp): not answered ok; it
  // coordinates nothing until its peers answer again.
  auto room = key_not_on(grown, 3, key_kind::room, "!r");
  hand_clock view_clock;
  auto lists = two_peers_serving(map, 10s, view_clock.source());
  auto [n0, tap1, tap2] = behind_closed_taps(lists);
  scoped_actor self{sys};
  auto pending = self->request(n0.coordinator, 30s, append_atom::value, room,
                               events("a", 1));
  auto first = answer_once_held<uint64_t>(self, pending, tap1, [&] {
    paused_for_an_hour(view_clock);
  });
  check_refused_for_a_pause(sys, first, errc::no_quorum);
  anon_send(tap2, open_gate_atom::value);
  auto refused = append_at(n0, room, events("b", 1));
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::catching_up));
  peers_heard_again(*lists, map);
  CAF_REQUIRE(append_at(n0, room, events("b", 1)));
  std::vector<std::string> expected{"a0", "b0"};
  CAF_CHECK_EQUAL(ids_at(1, room), expected);
}

CAF_TEST(a_replica_that_learned_of_another_list_refuses_an_append_counted_without_it) {
  // Node 2 counts `map` alone (a node being removed: no handoff request
  // tells it of a change). Nodes 0 and 1 learn that a peer serves `grown`:
  // they refuse its appends, naming both lists, and it counts both from
  // then on (session_replicas.cpp replays the same for sessions).
  auto room = key_not_on(grown, 3, key_kind::room, "!r");
  std::array<std::shared_ptr<serving_lists>, 2> seen{two_peers_serving(map),
                                                     two_peers_serving(map)};
  std::vector<node_actor> peers{gateway_counting(0, map, seen[0]),
                                gateway_counting(1, map, seen[1]), {}};
  auto lists = serving_lists::fixed({});
  auto n2 = node_under(2, map, peers, lists, 10s);
  CAF_REQUIRE(append_at(n2, room, events("a", 1)));
  for (auto& x : seen)
    x->peer_serves(0, nodes_of(grown), true);
  check_refused(sys, append_at(n2, room, events("b", 1)), errc::no_quorum,
                "did not count every cluster list in use");
  auto view = lists->current();
  CAF_REQUIRE_EQUAL(view->others.size(), 1u);
  CAF_CHECK(view->others[0].nodes() == grown.nodes());
  CAF_REQUIRE(append_at(n2, room, events("c", 1)));
  // Answered once a majority holds the log that goes on from a0 to c0;
  // the third replica may take c0 after the answer (node 1 was seen with
  // b0 as its last event then: the round's repair came ahead of c0).
  std::size_t holding = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    auto held = ids_at(i, room);
    holding += !held.empty() && held.front() == "a0" && held.back() == "c0";
  }
  CAF_CHECK_GREATER_OR_EQUAL(holding, 2u);
}

CAF_TEST(a_handoff_request_tells_a_node_which_list_its_asker_serves_now) {
  auto lists = two_peers_serving(map);
  auto before = lists->current()->generation;
  auto repair = sync_of(1, false, {}, {}, 0, 3, lists);
  // Node 0 restarted under `grown` and asks for the rooms it keeps there:
  // node 1's coordinators count `grown` too from before the answer.
  CAF_REQUIRE((ask<std::vector<room_listing>>(
    repair, replica_atom::value, room_atom::value, handoff_atom::value,
    handoff_asker_of(grown, 0, 3))));
  auto view = lists->current();
  CAF_CHECK_GREATER(view->generation, before);
  CAF_REQUIRE_EQUAL(view->others.size(), 1u);
  CAF_CHECK(view->others[0].nodes() == grown.nodes());
}

CAF_TEST(a_node_that_has_not_heard_its_peers_lists_coordinates_no_room) {
  // Before every peer told which list it serves under, a majority under
  // this node's list alone may miss what another list's answered: the
  // client is sent to the next replica.
  auto unheard = std::make_shared<serving_lists>(2);
  auto n0 = node_under(0, map, {{}, replicas[1].gateway, replicas[2].gateway},
                       unheard, 10s);
  auto refused = append_at(n0, "!r", events("a", 1));
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::catching_up));
  CAF_CHECK(ids_at(1, "!r").empty());
  unheard->peer_serves(0, {"127.0.0.1:4401", "127.0.0.1:4402",
                           "127.0.0.1:4403"}, false);
  unheard->peer_unanswered(1);
  CAF_CHECK(append_at(n0, "!r", events("a", 1)));
}

CAF_TEST(a_replica_that_does_not_answer_holds_up_no_append) {
  auto n0 = node(0, {node_actor{}, node_actor{}, silent()}, 300ms);
  CAF_CHECK_EQUAL(append_at(n0, "!r", events("a", 2)), uint64_t{2});
  CAF_CHECK_EQUAL(ids_at(1, "!r"), (std::vector<std::string>{"a0", "a1"}));
}

CAF_TEST(an_append_without_a_majority_fails_naming_the_replicas) {
  auto n0 = node(0, {node_actor{}, silent(), silent()}, 300ms);
  auto answer = append_at(n0, "!r", events("a", 1));
  CAF_REQUIRE(!answer);
  CAF_CHECK_EQUAL(code_of(answer.error()), code(errc::no_quorum));
  auto text = sys.render(answer.error());
  CAF_CHECK(text.find("127.0.0.1:4402") != std::string::npos);
  CAF_CHECK(text.find("127.0.0.1:4403") != std::string::npos);
  CAF_CHECK(ids_at(1, "!r").empty());
}

CAF_TEST(a_replica_behind_is_sent_the_events_it_lacks) {
  auto n0 = node(0, {node_actor{}, node_actor{}, silent()}, 300ms);
  CAF_REQUIRE(append_at(n0, "!r", events("a", 3)));
  CAF_CHECK(ids_at(2, "!r").empty());
  auto behind = tap(2);
  auto again
    = node(0, {node_actor{}, node_actor{}, actor_cast<node_actor>(behind)});
  CAF_REQUIRE(append_at(again, "!r", events("b", 1)));
  // Refused at first (it lacks a0 to a2), then sent them with b0.
  CAF_REQUIRE(applied_through(behind, 1));
  CAF_CHECK_EQUAL(ids_at(2, "!r"),
                  (std::vector<std::string>{"a0", "a1", "a2", "b0"}));
}

CAF_TEST(a_coordinator_whose_replica_is_behind_adopts_the_newest_log) {
  auto n0 = node(0, {node_actor{}, node_actor{}, silent()}, 300ms);
  CAF_REQUIRE(append_at(n0, "!r", events("a", 3)));
  CAF_REQUIRE(ids_at(2, "!r").empty());
  auto n2 = node(2);
  CAF_REQUIRE(append_at(n2, "!r", events("b", 1)));
  std::vector<std::string> expected{"a0", "a1", "a2", "b0"};
  for (std::size_t i = 0; i < 3; ++i)
    CAF_CHECK_EQUAL(ids_at(i, "!r"), expected);
}

CAF_TEST(a_new_coordinator_continues_the_log_and_cuts_the_old_one_off) {
  auto n0 = node(0);
  CAF_REQUIRE(append_at(n0, "!r", events("a", 2)));
  auto n1 = node(1);
  CAF_REQUIRE(append_at(n1, "!r", events("b", 2)));
  // Node 0's ballot is below the one a majority promised node 1.
  auto late = append_at(n0, "!r", events("late", 1));
  CAF_REQUIRE(!late);
  CAF_CHECK_EQUAL(code_of(late.error()), code(errc::no_quorum));
  // Its next call prepares again and continues after node 1's events.
  CAF_REQUIRE(append_at(n0, "!r", events("c", 1)));
  std::vector<std::string> expected{"a0", "a1", "b0", "b1", "c0"};
  for (std::size_t i = 0; i < 3; ++i)
    CAF_CHECK_EQUAL(ids_at(i, "!r"), expected);
}

CAF_TEST(events_no_majority_took_are_replaced_by_the_majoritys) {
  auto third = tap(2);
  auto n0
    = node(0, {node_actor{}, node_actor{}, actor_cast<node_actor>(third)});
  CAF_REQUIRE(append_at(n0, "!r", events("a", 2)));
  CAF_REQUIRE(applied_through(third, 1));
  // A deposed coordinator's append that reached replica 2 alone.
  auto held = image_at(2, "!r");
  room_suffix lost;
  lost.room = "!r";
  lost.segments = held.segments;
  lost.segments.push_back(timeline_segment{1, 2});
  lost.from = 2;
  lost.events = {event("lost")};
  auto taken = ask<room_answer>(replicas[2].store, replica_atom::value,
                                room_atom::value, append_atom::value,
                                held.segments.back().ballot, lost);
  CAF_REQUIRE(taken);
  CAF_REQUIRE_EQUAL(ids_at(2, "!r").size(), 3u);
  CAF_REQUIRE(append_at(n0, "!r", events("b", 1)));
  // a0 and a1; then b0, refused at first (it holds "lost" there) and sent
  // again from where the two logs part.
  CAF_REQUIRE(applied_through(third, 2));
  CAF_CHECK_EQUAL(ids_at(2, "!r"),
                  (std::vector<std::string>{"a0", "a1", "b0"}));
}

CAF_TEST(a_backfill_is_answered_once_its_position_is_on_a_majority) {
  auto n0 = node(0);
  CAF_REQUIRE(append_at(n0, "!r", events("e", 10)));
  auto first = backfill_at(n0, "!r", 3, 2);
  CAF_CHECK_EQUAL(ids_of(first.events),
                  (std::vector<std::string>{"e9", "e8", "e7", "e6", "e5",
                                            "e4"}));
  // The position is on a majority (here every replica): 4.
  std::size_t holding = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    auto x = image_at(i, "!r");
    holding += x.positioned && x.position == 4 ? 1 : 0;
  }
  CAF_CHECK_GREATER_OR_EQUAL(holding, 2u);
  // The next coordinator (a client failed over) goes on from there: no
  // event delivered twice, none skipped.
  auto n1 = node(1);
  auto rest = backfill_at(n1, "!r", 3, 0);
  CAF_CHECK_EQUAL(ids_of(rest.events),
                  (std::vector<std::string>{"e3", "e2", "e1", "e0"}));
  CAF_CHECK(rest.reason == stop_reason::reached_timeline_start);
}

CAF_TEST(a_caller_in_the_coordinators_own_process_claims_its_ticket_too) {
  // A cluster client in the node's own process fails over like a remote
  // one when the node is slow: the answer to its enqueue may reach nobody.
  // Were its pages committed without a claim, the retry (on this node or
  // the next) would start past events no backfill delivered.
  backfill_scheduler_options options;
  options.pager_timeout = 300ms;
  auto n0 = node(0, {}, 10s, {}, options);
  CAF_REQUIRE(append_at(n0, "!r", events("e", 4)));
  backfill_request lost;
  lost.room = "!r";
  lost.batch_size = 2;
  lost.max_batches = 1;
  // Another priority than the retry's: a run of its own, not shared.
  lost.prio = priority::low;
  scoped_actor gave_up{sys};
  gave_up->request(n0.scheduler, 30s, enqueue_atom::value, lost)
    .receive([](backfill_ticket&) {},
             [&](error& err) { CAF_FAIL(sys.render(err)); });
  // The retry waits for the room's run to end: unclaimed after 300 ms,
  // it ends without moving the position.
  auto retry = backfill_at(n0, "!r", 4, 0);
  CAF_CHECK_EQUAL(ids_of(retry.events),
                  (std::vector<std::string>{"e3", "e2", "e1", "e0"}));
}

CAF_TEST(a_catching_up_replica_counts_out_of_every_round) {
  replicas[0].catching_up->store(true);
  auto n0 = node(0);
  auto refused = append_at(n0, "!r", events("a", 1));
  CAF_REQUIRE(!refused);
  // The code the cluster client fails over on.
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::catching_up));
  CAF_CHECK(sys.render(refused.error()).find("catching up")
            != std::string::npos);
  // Its endpoint refuses other coordinators' rounds too.
  auto prepare = ask<room_answer>(replicas[0].gateway, replica_atom::value,
                                  room_atom::value, prepare_atom::value,
                                  std::string{"!r"}, uint64_t{5},
                                  list_stamp{});
  CAF_REQUIRE(!prepare);
  CAF_CHECK_EQUAL(code_of(prepare.error()), code(errc::catching_up));
  // The others still make a majority.
  auto n1 = node(1);
  CAF_CHECK(append_at(n1, "!r", events("b", 1)));
}

CAF_TEST(a_replica_catches_up_from_its_peers_before_it_takes_part) {
  auto n0 = node(0, {node_actor{}, node_actor{}, silent()}, 300ms);
  CAF_REQUIRE(append_at(n0, "!r", events("a", 4)));
  CAF_REQUIRE(append_at(n0, "!other", events("o", 1)));
  CAF_REQUIRE_EQUAL(backfill_at(n0, "!r", 2, 1).events.size(), 2u);
  CAF_CHECK(ids_at(2, "!r").empty());
  scoped_actor self{sys};
  // Set before anything serves, as the node does.
  replicas[2].catching_up->store(true);
  auto repair = sync_of(2, true, actor_cast<actor>(self));
  introduce(repair, 2);
  self->receive([](caught_up_atom) {},
                after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  CAF_CHECK(!replicas[2].catching_up->load());
  auto x = image_at(2, "!r");
  CAF_CHECK_EQUAL(ids_of(x.events),
                  (std::vector<std::string>{"a0", "a1", "a2", "a3"}));
  CAF_CHECK(x.positioned);
  CAF_CHECK_EQUAL(x.position, 2u);
  // Only the rooms node 2 is a replica of: every room here, with 3 nodes.
  CAF_CHECK_EQUAL(ids_at(2, "!other"), (std::vector<std::string>{"o0"}));
}

CAF_TEST(a_node_under_another_list_is_handed_off_the_rooms_it_keeps_there) {
  // Node 2 missed every append. It comes back under a list of the same
  // nodes in another order, two replicas a room: its peers still serve the
  // old list, refuse its comparison and hand off the rooms it is a replica
  // of under its list (their events in order, their positions), and no
  // other.
  auto n0 = node(0, {node_actor{}, node_actor{}, silent()}, 300ms);
  cluster_map reordered{2, {map.nodes()[2], map.nodes()[1], map.nodes()[0]},
                        {2, 1, 0}};
  std::vector<std::string> gained;
  std::vector<std::string> kept_elsewhere;
  for (int i = 0; i < 12; ++i) {
    auto room = "!r" + std::to_string(i);
    CAF_REQUIRE(append_at(n0, room, events("e", 3)));
    CAF_REQUIRE_EQUAL(backfill_at(n0, room, 2, 1).events.size(), 2u);
    auto key = routing_key{key_kind::room, room};
    (replica_of(reordered, 2, key, 0) ? gained : kept_elsewhere)
      .push_back(room);
  }
  CAF_REQUIRE_GREATER(gained.size(), 0u);
  CAF_REQUIRE_GREATER(kept_elsewhere.size(), 0u);
  scoped_actor self{sys};
  replicas[2].catching_up->store(true);
  auto repair = sync_of(2, true, actor_cast<actor>(self), reordered, 0, 2);
  anon_send(repair, peer_up_atom::value, uint64_t{1}, replicas[1].gateway);
  anon_send(repair, peer_up_atom::value, uint64_t{2}, replicas[0].gateway);
  self->receive([](caught_up_atom) {},
                after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  CAF_CHECK(!replicas[2].catching_up->load());
  for (const auto& room : gained) {
    auto x = image_at(2, room);
    CAF_CHECK_EQUAL(ids_of(x.events),
                    (std::vector<std::string>{"e0", "e1", "e2"}));
    CAF_CHECK(x.positioned && x.position == 1u);
  }
  for (const auto& room : kept_elsewhere)
    CAF_CHECK(ids_at(2, room).empty());
  CAF_CHECK_EQUAL(counters->keys_handed_off.load(), 2 * gained.size());
}

CAF_TEST(a_node_drops_the_rooms_it_lost_to_a_joining_node_once_their_replicas_hold_them) {
  // Appended under the old list while node 0 was silent: nodes 1 and 2
  // hold the room; under `grown` its replicas are {0, 1, 3}, of which
  // node 1 alone holds it until node 3 was handed it off.
  auto room = appended_on_old_replicas_1_and_2();
  auto old = node_under(1, map, {silent(), {}, replicas[2].gateway}, nullptr,
                        300ms);
  CAF_REQUIRE_EQUAL(backfill_at(old, room, 1, 1).events.size(), 1u);
  auto released = sync_of(2, false, {}, grown, 2, 3, serving_lists::fixed({}));
  introduce_under_grown(released, 2);
  CAF_CHECK_EQUAL(release_at(released),
                  std::make_pair(uint64_t{0}, uint64_t{1}));
  CAF_CHECK_EQUAL(counters->keys_to_hand_off[2].load(), 1u);
  CAF_CHECK_EQUAL(ids_at(2, room), (std::vector<std::string>{"a0", "a1"}));
  scoped_actor self{sys};
  replicas[3].catching_up->store(true);
  auto joined = sync_of(3, true, actor_cast<actor>(self), grown, 3);
  introduce_under_grown(joined, 3);
  self->receive([](caught_up_atom) {},
                after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  // While a peer still serves the old list, node 2 drops nothing.
  auto joint = sync_of(2, false, {}, grown, 2, 3, serving_lists::fixed({map}));
  introduce_under_grown(joint, 2);
  CAF_CHECK_EQUAL(release_at(joint),
                  std::make_pair(uint64_t{0}, uint64_t{1}));
  CAF_CHECK_EQUAL(release_at(released),
                  std::make_pair(uint64_t{1}, uint64_t{0}));
  auto gone = image_at(2, room);
  CAF_CHECK(gone.events.empty() && gone.segments.empty() && !gone.positioned);
  auto moved = image_at(3, room);
  CAF_CHECK_EQUAL(ids_of(moved.events), (std::vector<std::string>{"a0", "a1"}));
  CAF_CHECK(moved.positioned && moved.position == 1u);
  CAF_CHECK_EQUAL(counters->keys_dropped.load(), 1u);
  CAF_CHECK_EQUAL(counters->keys_to_hand_off[2].load(), 0u);
}

CAF_TEST(a_room_is_kept_while_its_replicas_lack_its_position) {
  // Nodes 1 and 3 hold the log, but only node 2 took the backfill's
  // position (a position only ever moves back): node 2 keeps the room.
  auto room = appended_on_old_replicas_1_and_2();
  scoped_actor self{sys};
  replicas[3].catching_up->store(true);
  auto joined = sync_of(3, true, actor_cast<actor>(self), grown, 3);
  introduce_under_grown(joined, 3);
  self->receive([](caught_up_atom) {},
                after(30s) >> [] { CAF_FAIL("no catch-up within 30 s"); });
  auto positioned = ask<room_answer>(
    replicas[2].store, replica_atom::value, room_atom::value,
    install_atom::value,
    room_suffix{room, image_at(2, room).segments, 2, {}, true, 0}, uint64_t{0});
  CAF_REQUIRE(positioned);
  CAF_REQUIRE(image_at(2, room).positioned);
  auto released = sync_of(2, false, {}, grown, 2, 3, serving_lists::fixed({}));
  introduce_under_grown(released, 2);
  CAF_CHECK_EQUAL(release_at(released),
                  std::make_pair(uint64_t{0}, uint64_t{1}));
  CAF_CHECK(image_at(2, room).positioned);
}

CAF_TEST(a_drop_keeps_a_room_appended_to_since_its_replicas_were_compared) {
  auto n0 = node(0);
  CAF_REQUIRE(append_at(n0, "!r", events("a", 2)));
  auto& db = *replicas[0].services->database();
  auto compared = storage::room_replica_version(db, "!r");
  CAF_REQUIRE(compared);
  CAF_REQUIRE(append_at(n0, "!r", events("b", 1)));
  auto dropped = ask<bool>(replicas[0].store, replica_atom::value,
                           room_atom::value, drop_atom::value,
                           std::string{"!r"}, *compared);
  CAF_REQUIRE(dropped);
  CAF_CHECK(!*dropped);
  CAF_CHECK_EQUAL(ids_at(0, "!r"), (std::vector<std::string>{"a0", "a1", "b0"}));
  auto current = storage::room_replica_version(db, "!r");
  CAF_REQUIRE(current);
  dropped = ask<bool>(replicas[0].store, replica_atom::value,
                      room_atom::value, drop_atom::value, std::string{"!r"},
                      *current);
  CAF_REQUIRE(dropped);
  CAF_CHECK(*dropped);
  std::vector<std::string> listed;
  CAF_CHECK(!storage::scan_room_versions(
    db, [&](room_listing&& x) { listed.push_back(x.room); }));
  CAF_CHECK(listed.empty());
}

CAF_TEST(a_stopping_coordinator_answers_every_open_call) {
  auto n0 = node(0, {node_actor{}, silent(), silent()}, 60s);
  scoped_actor self{sys};
  auto pending = self->request(n0.coordinator, 30s, append_atom::value,
                               std::string{"!r"}, events("a", 1));
  anon_send_exit(n0.coordinator, exit_reason::user_shutdown);
  pending.receive([](uint64_t) { CAF_FAIL("answered without a majority"); },
                  [&](error& err) {
                    CAF_CHECK_EQUAL(code_of(err),
                                    code(errc::stopped_before_answer));
                  });
}

CAF_TEST(malformed_requests_are_refused) {
  auto n0 = node(0);
  auto unnamed = append_at(n0, "", events("a", 1));
  CAF_REQUIRE(!unnamed);
  CAF_CHECK_EQUAL(code_of(unnamed.error()), code(errc::invalid_request));
  auto no_id = append_at(n0, "!r", {event("")});
  CAF_REQUIRE(!no_id);
  CAF_CHECK_EQUAL(code_of(no_id.error()), code(errc::invalid_request));
  auto forged = ask<ok_atom>(n0.coordinator, commit_atom::value,
                             std::string{"!r"}, page_cursor{9, 3});
  CAF_REQUIRE(!forged);
  CAF_CHECK_EQUAL(code_of(forged.error()), code(errc::invalid_request));
  auto forwards = ask<ok_atom>(n0.coordinator, commit_atom::value,
                               std::string{"!r"}, page_cursor{3, 9});
  CAF_REQUIRE(!forwards);
  CAF_CHECK_EQUAL(code_of(forwards.error()), code(errc::invalid_request));
}

CAF_TEST_FIXTURE_SCOPE_END()
