#define CAF_SUITE actors.node_gateway
#include <caf/test/dsl.hpp>

#include <coalesce/actors/backfill_scheduler.hpp>
#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/actors/secret_buffer.hpp>
#include <coalesce/actors/secret_store_actors.hpp>
#include <coalesce/actors/timeline_actors.hpp>

#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;

namespace {

/// A gateway in front of a real secret buffer over RocksDB in a fresh
/// directory, every actor scheduled by the test coordinator.
struct gateway_fixture : test_coordinator_fixture<test_config> {
  temp_dir dir;
  std::shared_ptr<storage::database> db;
  secret_drain_actor drain;
  secret_reader_actor reader;
  secret_buffer_actor buffer;
  timeline_actor timeline;
  backfill_scheduler_actor scheduler;
  node_actor gateway;

  gateway_fixture() {
    auto opened = storage::database::open({dir.sub("db"),
                                           storage::durability::synced});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
    drain = sys.spawn(secret_drain_worker, db);
    reader = sys.spawn(secret_reader, db);
    buffer = spawn_secret_buffer(sys, drain, reader, secret_buffer_options{});
    timeline = sys.spawn(timeline_store, db);
    scheduler = spawn_backfill_scheduler(sys, timeline, backfill_scheduler_options{});
    // The services this suite exercises; the others stay unhosted.
    service_handles hosted;
    hosted.secret_buffer = buffer;
    hosted.timeline = timeline;
    hosted.backfill_scheduler = scheduler;
    gateway = spawn_node_gateway(sys, hosted);
    sched.run();
  }

  ~gateway_fixture() override {
    for (auto hdl : {actor_cast<actor>(gateway), actor_cast<actor>(buffer),
                     actor_cast<actor>(drain), actor_cast<actor>(reader),
                     actor_cast<actor>(scheduler), actor_cast<actor>(timeline)})
      anon_send_exit(hdl, exit_reason::kill);
    sched.run();
  }

  /// Sends a request, runs every actor, and returns the answer.
  template <class T, class... Ts>
  T ask(Ts... xs) {
    auto answer = self->request(gateway, infinite, std::move(xs)...);
    sched.run();
    T result{};
    answer.receive([&](T& x) { result = std::move(x); },
                   [&](error& err) { CAF_FAIL(sys.render(err)); });
    return result;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(node_gateway_tests, gateway_fixture)

CAF_TEST(requests reach the secret buffer through the gateway) {
  CAF_CHECK(ask<ok_atom>(queue_atom::value,
                         std::vector<secret_entry>{make_entry("M1", 0x11)})
            == ok_atom::value);
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
  auto answer = ask<secret_lookup>(lookup_atom::value, key_of("M1"));
  CAF_CHECK(answer.found);
  CAF_CHECK(answer.secret == secret_of(0x11));
  auto many = ask<std::vector<secret_lookup>>(
    lookup_atom::value, std::vector<secret_key>{key_of("M1"), key_of("NO")});
  CAF_REQUIRE_EQUAL(many.size(), 2u);
  CAF_CHECK(many[0].found);
  CAF_CHECK(!many[1].found);
  auto stats = ask<node_stats>(stats_atom::value);
  CAF_CHECK_EQUAL(stats.secret_buffer.entries_written, 1u);
  CAF_CHECK(!stats.shutting_down);
}

/// The timeline and the scheduler behind the gateway: append, then backfill
/// through the default pager, which reads the RocksDB timeline.
CAF_TEST(a backfill through the gateway pages the stored timeline) {
  std::vector<timeline_event> events;
  for (int i = 1; i <= 5; ++i)
    events.push_back(timeline_event{"e" + std::to_string(i), "m.text", i,
                                    "hello " + std::to_string(i)});
  CAF_CHECK_EQUAL(ask<uint64_t>(append_atom::value, std::string{"!room"},
                                events),
                  5u);
  backfill_request request;
  request.room = "!room";
  request.batch_size = 2;
  request.stop.what = stop_condition::kind::until_event;
  request.stop.event_id = "e2";
  auto ticket = ask<backfill_ticket>(enqueue_atom::value, request);
  auto result = ask<backfill_result>(await_atom::value, ticket);
  CAF_CHECK_EQUAL(result.reason, stop_reason::stop_condition_met);
  CAF_CHECK_EQUAL(result.batches, 2u);
  std::vector<std::string> ids;
  for (auto& e : result.events)
    ids.push_back(e.event_id);
  CAF_CHECK_EQUAL(ids, (std::vector<std::string>{"e5", "e4", "e3", "e2"}));
  auto stats = ask<node_stats>(stats_atom::value);
  CAF_CHECK_EQUAL(
    stats.backfill_scheduler.finished[static_cast<int>(stop_reason::stop_condition_met)],
    1u);
}

/// After shutdown, remote callers get a clear error instead of a write that
/// might race the final flush.
CAF_TEST(after shutdown every request is refused with shutting down) {
  CAF_CHECK(ask<ok_atom>(shutdown_atom::value) == ok_atom::value);
  auto answer = self->request(gateway, infinite, queue_atom::value,
                              std::vector<secret_entry>{make_entry("LATE", 1)});
  sched.run();
  CAF_REQUIRE(!self->mailbox().empty());
  bool refused = false;
  answer.receive([&](ok_atom) { CAF_FAIL("a late queue was accepted"); },
                 [&](error& err) {
                   refused = err.code()
                             == static_cast<uint8_t>(errc::node_shutting_down);
                   CAF_MESSAGE(sys.render(err));
                 });
  CAF_CHECK(refused);
  auto stats = ask<node_stats>(stats_atom::value);
  CAF_CHECK(stats.shutting_down);
  CAF_CHECK_EQUAL(stats.refused_requests, 1u);
  CAF_CHECK_EQUAL(stats.secret_buffer.pending, 0u);
  CAF_CHECK_EQUAL(stats.secret_buffer.entries_written, 0u);
}

CAF_TEST(a request for a service the node does not host is refused) {
  auto answer = self->request(gateway, infinite, load_atom::value,
                              std::string{"some-session"});
  sched.run();
  CAF_REQUIRE(!self->mailbox().empty());
  bool refused = false;
  answer.receive([&](session_record&) { CAF_FAIL("an unhosted load answered"); },
                 [&](error& err) {
                   refused = err.code()
                             == static_cast<uint8_t>(errc::invalid_request);
                   CAF_MESSAGE(sys.render(err));
                 });
  CAF_CHECK(refused);
  auto stats = ask<node_stats>(stats_atom::value);
  CAF_CHECK_EQUAL(stats.session_persister.writes, 0u);
}

CAF_TEST_FIXTURE_SCOPE_END()

namespace {

const std::string here = "127.0.0.1:4301";

/// The same services behind a gateway of the first node of a three-node
/// cluster, as a node builds it from `coalesce.cluster`.
struct cluster_gateway_fixture : gateway_fixture {
  cluster_map cluster;
  node_actor member;

  cluster_gateway_fixture() {
    CAF_REQUIRE(!cluster_map::parse({here, "127.0.0.1:4302", "127.0.0.1:4303"},
                                    "coalesce.cluster", cluster));
    service_handles hosted;
    hosted.secret_buffer = buffer;
    hosted.timeline = timeline;
    hosted.backfill_scheduler = scheduler;
    member = spawn_node_gateway(sys, hosted, [this](const routing_key& key) {
      auto owner = cluster.owner(key).text();
      return owner == here ? std::string{} : owner;
    });
    sched.run();
  }

  ~cluster_gateway_fixture() override {
    anon_send_exit(member, exit_reason::kill);
    sched.run();
  }

  /// The first name "PREFIX0", "PREFIX1", ... whose owner is (or is not)
  /// this node.
  std::string name(key_kind kind, const std::string& prefix, bool owned) {
    for (int i = 0;; ++i) {
      auto candidate = prefix + std::to_string(i);
      if ((cluster.owner({kind, candidate}).text() == here) == owned)
        return candidate;
    }
  }

  /// The error `member` answers, or none if it served the request.
  template <class T, class... Ts>
  error refusal(Ts... xs) {
    auto answer = self->request(member, infinite, std::move(xs)...);
    sched.run();
    error result;
    answer.receive([](T&) {}, [&](error& err) { result = std::move(err); });
    if (result)
      CAF_MESSAGE(sys.render(result));
    return result;
  }

  secret_entry entry_in(const std::string& chat, const std::string& msg_id) {
    auto result = make_entry(msg_id, 0x22);
    result.chat = chat;
    return result;
  }
};

bool is_not_replica(const error& err) {
  // CAF 0.17's category() of no error dereferences nothing: ask first.
  return err && err.category() == errc_category
         && err.code() == static_cast<uint8_t>(errc::not_replica);
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(cluster_gateway_tests, cluster_gateway_fixture)

CAF_TEST(a cluster member serves its own keys and refuses others naming the owner) {
  auto mine = name(key_kind::chat, "chat", true);
  auto theirs = name(key_kind::chat, "chat", false);
  auto owner = cluster.owner({key_kind::chat, theirs}).text();
  CAF_CHECK(!refusal<ok_atom>(queue_atom::value, entry_in(mine, "M1")));
  auto refused = refusal<ok_atom>(queue_atom::value, entry_in(theirs, "M2"));
  CAF_REQUIRE(is_not_replica(refused));
  CAF_CHECK_EQUAL(sys.render(refused),
                  "this node is not a replica of the key: chat " + theirs
                    + " belongs to " + owner);
  CAF_CHECK(is_not_replica(refusal<secret_lookup>(
    lookup_atom::value, secret_key{theirs, "a@s.whatsapp.net", "M2"})));
  auto room = name(key_kind::room, "!room", false);
  CAF_CHECK(is_not_replica(refusal<uint64_t>(append_atom::value, room,
                                           std::vector<timeline_event>{})));
  backfill_request request;
  request.room = room;
  CAF_CHECK(is_not_replica(refusal<backfill_ticket>(enqueue_atom::value,
                                                  request)));
  request.room = name(key_kind::room, "!room", true);
  CAF_CHECK(!refusal<backfill_ticket>(enqueue_atom::value, request));
}

CAF_TEST(a batch with a foreign key is refused whole naming its first foreign owner) {
  auto mine = name(key_kind::chat, "chat", true);
  auto theirs = name(key_kind::chat, "chat", false);
  auto owner = cluster.owner({key_kind::chat, theirs}).text();
  auto refused = refusal<ok_atom>(
    queue_atom::value,
    std::vector<secret_entry>{entry_in(mine, "M1"), entry_in(theirs, "M2"),
                              entry_in(mine, "M3")});
  CAF_REQUIRE(is_not_replica(refused));
  CAF_CHECK_EQUAL(sys.render(refused),
                  "this node is not a replica of the key: chat " + theirs
                    + " belongs to " + owner);
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
  auto stats = ask<node_stats>(stats_atom::value);
  CAF_CHECK_EQUAL(stats.secret_buffer.entries_written, 0u);
  auto lookups = std::vector<secret_key>{{mine, "a@s.whatsapp.net", "M1"},
                                         {theirs, "a@s.whatsapp.net", "M2"}};
  CAF_CHECK(is_not_replica(refusal<std::vector<secret_lookup>>(
    lookup_atom::value, lookups)));
}

CAF_TEST(a request carrying only a ticket is served where the ticket was made) {
  backfill_request request;
  request.room = name(key_kind::room, "!room", true);
  request.max_batches = 1;
  backfill_ticket ticket;
  auto answer = self->request(member, infinite, enqueue_atom::value, request);
  sched.run();
  answer.receive([&](backfill_ticket& x) { ticket = x; },
                 [&](error& err) { CAF_FAIL(sys.render(err)); });
  CAF_CHECK(!refusal<backfill_result>(await_atom::value, ticket));
  CAF_CHECK(!refusal<ok_atom>(flush_atom::value));
}

CAF_TEST_FIXTURE_SCOPE_END()
