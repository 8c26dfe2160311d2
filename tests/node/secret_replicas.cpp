#define CAF_SUITE node.secret_replicas
#include <caf/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/node/secret_buffer_service.hpp>
#include <coalesce/node/secret_replicas.hpp>
#include <coalesce/node/services.hpp>

#include "error_codes.hpp"
#include "secret_fixtures.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

/// One replica: real services over a database of its own and the gateway
/// a peer reaches them through.
struct replica {
  std::unique_ptr<local_services> services;
  node_actor gateway;
};

/// A peer that never answers (a stopped process): it keeps every request
/// unread in its mailbox.
behavior silent_peer(event_based_actor* self) {
  self->set_default_handler(skip);
  return {[](unit_t) {}};
}

struct fixture {
  temp_dir dir;
  test_config cfg;
  actor_system sys{cfg};
  std::array<replica, 3> replicas;
  cluster_map map{std::vector<node_endpoint>{
    {"127.0.0.1", 4301}, {"127.0.0.1", 4302}, {"127.0.0.1", 4303}}};
  std::vector<actor> silent_peers;
  std::shared_ptr<peer_counters> counters = std::make_shared<peer_counters>();

  fixture() {
    for (std::size_t i = 0; i < replicas.size(); ++i) {
      service_settings settings;
      settings.db_path = dir.sub("n" + std::to_string(i));
      auto started = start_services(sys, settings);
      CAF_REQUIRE(started);
      replicas[i].services = std::move(*started);
      replicas[i].gateway = spawn_node_gateway(
        sys, replicas[i].services->handles());
    }
  }

  ~fixture() {
    for (auto& peer : silent_peers)
      anon_send_exit(peer, exit_reason::user_shutdown);
    for (auto& r : replicas) {
      anon_send_exit(r.gateway, exit_reason::user_shutdown);
      r.services->stop(30s);
    }
  }

  secret_buffer_actor buffer_of(std::size_t i) {
    return replicas[i].services->service<secret_buffer_service>()
      .actors()
      .buffer;
  }

  /// Node 0's coordinator; peers 1 and 2 are `peers` (their gateways
  /// unless replaced).
  secret_replicas_actor coordinator(std::array<node_actor, 2> peers,
                                    caf::timespan timeout = 10s) {
    auto result = spawn_secret_replicas(
      sys, buffer_of(0), {map, 0, 3, timeout, counters});
    for (uint64_t i = 1; i <= 2; ++i)
      anon_send(result, peer_up_atom::value, i, peers[i - 1]);
    return result;
  }

  node_actor silent() {
    silent_peers.push_back(sys.spawn(silent_peer));
    return actor_cast<node_actor>(silent_peers.back());
  }

  /// What replica `i` alone holds of `key`, asked through its gateway (the
  /// way the coordinator's copies reach it, so after them).
  secret_lookup held_by(std::size_t i, const secret_key& key) {
    scoped_actor self{sys};
    secret_lookup result;
    self
      ->request(replicas[i].gateway, 10s, replica_atom::value,
                std::vector<secret_key>{key})
      .receive([&](std::vector<secret_lookup>& found) { result = found[0]; },
               [&](error& err) { CAF_FAIL(sys.render(err)); });
    return result;
  }

  template <class Answer, class... Ts>
  expected<Answer> ask(const secret_replicas_actor& to, caf::timespan timeout,
                       Ts... xs) {
    scoped_actor self{sys};
    expected<Answer> result{error{}};
    self->request(to, timeout, xs...)
      .receive([&](Answer& answer) { result = std::move(answer); },
               [&](error& err) { result = std::move(err); });
    return result;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(secret_replicas_tests, fixture)

CAF_TEST(a queue reaches every replica and is answered once a majority holds it) {
  auto coordinating = coordinator({replicas[1].gateway, replicas[2].gateway});
  std::vector<secret_entry> entries{make_entry("r1", 1), make_entry("r2", 2)};
  CAF_REQUIRE(ask<ok_atom>(coordinating, 10s, queue_atom::value, entries));
  for (std::size_t i = 0; i < 3; ++i) {
    CAF_CHECK(held_by(i, key_of("r1")).found);
    CAF_CHECK(held_by(i, key_of("r2")).secret == secret_of(2));
  }
  CAF_CHECK_EQUAL(counters->replica_requests.load(), 2u);
  CAF_CHECK_EQUAL(counters->replica_failures.load(), 0u);
  anon_send_exit(coordinating, exit_reason::user_shutdown);
}

CAF_TEST(a silent replica holds up no answer a majority gives) {
  auto coordinating = coordinator({replicas[1].gateway, silent()}, 10s);
  auto started = std::chrono::steady_clock::now();
  CAF_REQUIRE(ask<ok_atom>(coordinating, 10s, queue_atom::value,
                           make_entry("s1", 3)));
  auto found = ask<secret_lookup>(coordinating, 10s, lookup_atom::value,
                                  key_of("s1"));
  CAF_REQUIRE(found);
  CAF_CHECK(found->found);
  // Both well before the 10 s the silent replica is given.
  CAF_CHECK_LESS(std::chrono::steady_clock::now() - started, 5s);
  anon_send_exit(coordinating, exit_reason::user_shutdown);
}

CAF_TEST(without a majority a queue is refused naming the failed replicas) {
  auto coordinating = coordinator({silent(), silent()}, 300ms);
  auto refused = ask<ok_atom>(coordinating, 10s, queue_atom::value,
                              make_entry("q1", 4));
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::no_quorum));
  auto text = sys.render(refused.error());
  CAF_MESSAGE(text);
  CAF_CHECK_NOT_EQUAL(text.find("127.0.0.1:4302 did not answer within"),
                      std::string::npos);
  CAF_CHECK_NOT_EQUAL(text.find("127.0.0.1:4303 did not answer within"),
                      std::string::npos);
  CAF_CHECK_EQUAL(counters->replica_failures.load(), 2u);
  anon_send_exit(coordinating, exit_reason::user_shutdown);
}

CAF_TEST(a lookup sees what a majority holds though the coordinator missed it) {
  // Replicas 1 and 2 hold it, the coordinator's own (0) does not: every
  // majority of the three includes one that answers it, and a found copy
  // wins over a miss.
  scoped_actor self{sys};
  for (std::size_t i : {1, 2})
    self
      ->request(replicas[i].gateway, 10s, replica_atom::value,
                std::vector<secret_entry>{make_entry("m1", 5)})
      .receive([](ok_atom) {}, [&](error& err) { CAF_FAIL(sys.render(err)); });
  CAF_REQUIRE(!held_by(0, key_of("m1")).found);
  auto coordinating = coordinator({replicas[1].gateway, replicas[2].gateway});
  for (int round = 0; round < 20; ++round) {
    auto found = ask<std::vector<secret_lookup>>(
      coordinating, 10s, lookup_atom::value,
      std::vector<secret_key>{key_of("m1"), key_of("never")});
    CAF_REQUIRE(found);
    CAF_CHECK(found->at(0).found);
    CAF_CHECK(found->at(0).secret == secret_of(5));
    CAF_CHECK(!found->at(1).found);
  }
  anon_send_exit(coordinating, exit_reason::user_shutdown);
}

CAF_TEST(a coordinator that stops answers every request under way) {
  auto coordinating = coordinator({silent(), silent()}, 60s);
  scoped_actor self{sys};
  auto started = std::chrono::steady_clock::now();
  auto pending = self->request(coordinating, 15s, queue_atom::value,
                               make_entry("x1", 6));
  // The queue is under way (its copies wait on the silent peers) once the
  // coordinator answered a later request: it reads its mailbox in order.
  CAF_REQUIRE(ask<ok_atom>(coordinating, 10s, flush_atom::value));
  anon_send_exit(coordinating, exit_reason::user_shutdown);
  error answer;
  pending.receive([](ok_atom) { CAF_FAIL("answered ok without a majority"); },
                  [&](error& err) { answer = std::move(err); });
  CAF_CHECK_EQUAL(code_of(answer), code(errc::stopped_before_answer));
  // Not the request's own 15 s timeout, nor the replicas' 60 s.
  CAF_CHECK_LESS(std::chrono::steady_clock::now() - started, 10s);
}

CAF_TEST_FIXTURE_SCOPE_END()
