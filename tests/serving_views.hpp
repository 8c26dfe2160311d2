#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/test/unit_test.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/serving_lists.hpp>

#include "error_codes.hpp"

/// The replica suites' views of which lists a node's peers serve, for their
/// replays of a list change.
namespace coalesce::test {

/// What a ping of a node under `list` answers it serves.
inline std::vector<std::string> nodes_of(const cluster_map& list) {
  std::vector<std::string> result;
  for (const auto& node : list.nodes())
    result.push_back(node.text());
  return result;
}

/// A steady clock a test moves by hand: the pause of a node, as its view
/// of its peers tells time.
class hand_clock {
public:
  serving_lists::time_source source() const {
    auto at = at_;
    return [at] {
      return serving_lists::clock::time_point{
        serving_lists::clock::duration{at->load()}};
    };
  }

  void advance(serving_lists::clock::duration by) {
    *at_ += by.count();
  }

private:
  std::shared_ptr<std::atomic<serving_lists::clock::rep>> at_
    = std::make_shared<std::atomic<serving_lists::clock::rep>>(
      serving_lists::clock::now().time_since_epoch().count());
};

/// The view of a node whose two peers both last answered they serve
/// `list`: it counts `list` alone until told otherwise, and goes stale once
/// a peer went unasked for `max_silence` (zero: never) by `now`.
inline std::shared_ptr<serving_lists>
two_peers_serving(const cluster_map& list,
                  serving_lists::clock::duration max_silence = {},
                  serving_lists::time_source now = serving_lists::clock::now) {
  auto lists = std::make_shared<serving_lists>(2, max_silence, std::move(now));
  lists->peer_serves(0, nodes_of(list), false);
  lists->peer_serves(1, nodes_of(list), false);
  return lists;
}

/// The first key of `kind` named `prefix` N `suffix` that node `node` of
/// `list` is not one of the 3 replicas of.
inline std::string key_not_on(const cluster_map& list, std::size_t node,
                              key_kind kind, const std::string& prefix,
                              const std::string& suffix = "") {
  for (int i = 0;; ++i) {
    auto key = prefix + std::to_string(i) + suffix;
    auto set = list.replica_indices({kind, key}, 3);
    bool on = false;
    for (auto x : set)
      on = on || x == node;
    if (!on)
      return key;
  }
}

/// A gateway in front of a replica's services (`handles`) and its replica
/// endpoints (`endpoints`), as the replica serves under `own` with its
/// peers' lists as `lists` tells them: it refuses a coordinator's request
/// that did not count each list it counts.
inline node_actor gateway_counting(caf::actor_system& sys,
                                   const service_handles& handles,
                                   replica_endpoints endpoints,
                                   const cluster_map& own,
                                   std::shared_ptr<serving_lists> lists,
                                   std::shared_ptr<const peer_counters>
                                     counters = {}) {
  endpoints.uncounted = uncounted_check(own, std::move(lists));
  return spawn_node_gateway(sys, handles, {}, std::move(counters),
                            std::move(endpoints));
}

/// What the replicas' test gates answer to: open (pass what they hold and
/// all that follows), and answer once a request is held.
using open_gate_atom = caf::atom_constant<caf::atom("opengate")>;
using held_atom = caf::atom_constant<caf::atom("held")>;

/// The middle of the replays of a list change or a pause: once `gate` (the
/// first peer's) holds the request `pending` waits for, `meanwhile` runs,
/// then the gate opens and the request's answer is returned.
template <class Answer, class Pending>
caf::expected<Answer> answer_once_held(caf::scoped_actor& self,
                                       Pending& pending, const caf::actor& gate,
                                       const std::function<void()>& meanwhile) {
  caf::expected<Answer> result{caf::error{}};
  bool held = false;
  self->request(gate, std::chrono::seconds{30}, held_atom::value)
    .receive([&](caf::ok_atom) { held = true; },
             [&](caf::error& err) { result = std::move(err); });
  if (!held)
    return result;
  meanwhile();
  caf::anon_send(gate, open_gate_atom::value);
  pending.receive([&](Answer& x) { result = std::move(x); },
                  [&](caf::error& err) { result = std::move(err); });
  return result;
}

/// The middle of the replays of a list change: while `gate` holds the
/// request, the first peer is seen serving `next` (as its catch-up's
/// handoff request shows it).
template <class Answer, class Pending>
caf::expected<Answer>
answer_once_a_peer_serves(caf::scoped_actor& self, Pending& pending,
                          const caf::actor& gate, serving_lists& lists,
                          const cluster_map& next) {
  return answer_once_held<Answer>(self, pending, gate, [&] {
    lists.peer_serves(0, nodes_of(next), true);
  });
}

/// A node paused for an hour, as its view's clock tells it.
inline void paused_for_an_hour(hand_clock& clock) {
  clock.advance(std::chrono::hours{1});
}

/// A node stopped and continued a moment later (SIGCONT), as its pause
/// watch tells its view: a second by the view's clock, far less than the
/// silence the view allows.
inline void paused_for_a_second(hand_clock& clock, serving_lists& lists) {
  clock.advance(std::chrono::seconds{1});
  lists.woke(clock.source()());
}

/// Checks that `answer` was refused with `expected`, saying `why`.
template <class Answer>
void check_refused(const caf::actor_system& sys,
                   const caf::expected<Answer>& answer, errc expected,
                   const std::string& why) {
  CAF_REQUIRE(!answer);
  CAF_CHECK_EQUAL(code_of(answer.error()), code(expected));
  CAF_CHECK(sys.render(answer.error()).find(why) != std::string::npos);
}

/// Checks that `answer` was refused with `expected` because its node was
/// paused.
template <class Answer>
void check_refused_for_a_pause(const caf::actor_system& sys,
                               const caf::expected<Answer>& answer,
                               errc expected) {
  check_refused(sys, answer, expected, "paused");
}

/// Both peers answer a ping again, naming `list` (this node's own).
inline void peers_heard_again(serving_lists& lists, const cluster_map& list) {
  lists.peer_serves(0, nodes_of(list), false);
  lists.peer_serves(1, nodes_of(list), false);
}

} // namespace coalesce::test
