#define CAF_SUITE client.cluster_client
#include <caf/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/cluster_client.hpp>
#include <coalesce/messages/capture_stamp.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/registration.hpp>
#include <coalesce/node/services.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

// Real nodes over CAF's middleman on 127.0.0.1, each an actor system of its
// own in this process over its own RocksDB directory, and one cluster
// client in another: real actors, real sockets, real time (generous
// timeouts; nothing waits on a clock but the request timeouts under test).

namespace {

struct io_config : actor_system_config {
  io_config() {
    register_message_types(*this);
    load<io::middleman>();
    set("scheduler.max-threads", 2);
  }
};

/// One member of the cluster; `stop` ends it like a lost process (its
/// sockets close), `start` brings it back from its directory on its port.
struct member {
  std::string db_path;
  uint16_t port = 0;
  io_config cfg;
  std::unique_ptr<actor_system> sys;
  std::unique_ptr<local_services> services;
  node_actor gateway;

  /// Its actor system and services, over its directory.
  void start_services_here() {
    sys = std::make_unique<actor_system>(cfg);
    service_settings settings;
    settings.db_path = db_path;
    auto started = start_services(*sys, settings);
    CAF_REQUIRE(started);
    services = std::move(*started);
  }

  void start(const cluster_options& cluster) {
    start_services_here();
    gateway = spawn_node_gateway(*sys, services->handles(),
                                 cluster.foreign_owner("127.0.0.1", port));
    auto published = sys->middleman().publish(gateway, port, "127.0.0.1",
                                              true);
    CAF_REQUIRE(published);
  }

  /// Started as a node serving under `list` (a member it does not name
  /// refuses every key), with the peer counters that make its refusals
  /// carry the list.
  void start_under(const cluster_options& cluster, const cluster_map& list) {
    start_services_here();
    auto self = list.index_of({"127.0.0.1", port}).value_or(list.size());
    std::vector<std::string> addresses;
    for (const auto& node : list.nodes())
      addresses.push_back(node.text());
    gateway = spawn_node_gateway(
      *sys, services->handles(), cluster.foreign_owner(list, self),
      std::make_shared<peer_counters>(std::move(addresses), list.version()));
    CAF_REQUIRE(sys->middleman().publish(gateway, port, "127.0.0.1", true));
  }

  void stop() {
    static_cast<void>(sys->middleman().unpublish(gateway, port));
    anon_send_exit(gateway, exit_reason::user_shutdown);
    gateway = nullptr;
    CAF_CHECK(services->stop(30s));
    services.reset();
    sys.reset();
  }

  /// Backfill runs this node's scheduler finished, whatever their end.
  uint64_t runs_finished() {
    scoped_actor self{*sys};
    uint64_t result = 0;
    self->request(gateway, 10s, stats_atom::value)
      .receive(
        [&](node_stats& x) {
          for (auto n : x.backfill_scheduler.finished)
            result += n;
        },
        [&](error& err) { CAF_FAIL(sys->render(err)); });
    return result;
  }

  /// The secrets this node itself wrote.
  uint64_t entries_written() {
    scoped_actor self{*sys};
    uint64_t result = 0;
    self->request(gateway, 10s, stats_atom::value)
      .receive([&](node_stats& x) { result = x.secret_buffer.entries_written; },
               [&](error& err) { CAF_FAIL(sys->render(err)); });
    return result;
  }
};

/// `count` distinct ports nothing listens on right now. Each probe stays
/// published until every port is chosen: one at a time, the kernel may hand
/// out a port it just had back (two nodes on one port).
std::vector<uint16_t> free_ports(actor_system& sys, std::size_t count) {
  std::vector<std::pair<actor, uint16_t>> probes;
  for (std::size_t i = 0; i < count; ++i) {
    auto probe = sys.spawn([] { return behavior{[](int) {}}; });
    auto port = sys.middleman().publish(probe, 0, "127.0.0.1", true);
    CAF_REQUIRE(port);
    probes.emplace_back(probe, *port);
  }
  std::vector<uint16_t> result;
  for (auto& [probe, port] : probes) {
    static_cast<void>(sys.middleman().unpublish(probe, port));
    anon_send_exit(probe, exit_reason::user_shutdown);
    result.push_back(port);
  }
  return result;
}

struct cluster_fixture {
  temp_dir dir;
  std::array<member, 3> members;
  cluster_options cluster;
  cluster_map map;
  io_config client_cfg;
  actor_system client_sys{client_cfg};
  caf::timespan timeout = 3s;
  node_actor client;

  cluster_fixture() {
    auto ports = free_ports(client_sys, members.size());
    for (std::size_t i = 0; i < members.size(); ++i) {
      members[i].db_path = dir.sub("n" + std::to_string(i));
      members[i].port = ports[i];
      cluster.cluster.push_back("127.0.0.1:"
                                + std::to_string(members[i].port));
    }
    CAF_REQUIRE(!cluster_map::parse(cluster.cluster, "cluster", map));
    // Every key on its owner alone: the routing of each kind of request.
    // Replicated secrets (the node's coordinator) are proven with real node
    // processes (tests/app/cluster.sh).
    cluster.replicas = 1;
    for (auto& m : members)
      m.start(cluster);
    client = spawn_cluster_client(client_sys, map, timeout, 1);
    choose_chats();
  }

  /// The chats the tests' secrets go to: four owned by each node. The ports,
  /// and so the owners, change from run to run, and twelve chats taken in
  /// order missed one of three nodes in a run of about twenty.
  std::vector<std::string> chats;

  void choose_chats() {
    constexpr std::size_t per_node = 4;
    std::map<std::size_t, std::vector<std::string>> by_owner;
    for (int i = 0; chats.size() < per_node * members.size(); ++i) {
      auto chat = "chat" + std::to_string(i) + "@g.us";
      auto& owned = by_owner[owner_of_chat(chat)];
      if (owned.size() < per_node) {
        owned.push_back(chat);
        chats.push_back(chat);
      }
    }
  }

  ~cluster_fixture() {
    anon_send_exit(client, exit_reason::user_shutdown);
    for (auto& m : members)
      if (m.sys)
        m.stop();
  }

  /// A request through the client: its answer or its error.
  template <class T, class... Ts>
  expected<T> ask(Ts... xs) {
    scoped_actor self{client_sys};
    expected<T> result{error{}};
    // The client answers within its own timeout; this one only catches a
    // client that never answers.
    self->request(client, timeout * 3, std::move(xs)...)
      .receive([&](T& x) { result = std::move(x); },
               [&](error& err) { result = std::move(err); });
    return result;
  }

  std::size_t owner_of_chat(const std::string& chat) {
    return map.owner_index({key_kind::chat, chat});
  }

  secret_entry entry(int i) {
    auto result = make_entry("m" + std::to_string(i), uint8_t(i + 1));
    result.chat = chats[i % chats.size()];
    return result;
  }

  secret_key key(int i) {
    auto x = entry(i);
    return x.key();
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(cluster_client_tests, cluster_fixture)

CAF_TEST(a batch is split across owners and each node holds only its keys) {
  std::vector<secret_entry> batch;
  std::map<std::size_t, uint64_t> expected;
  std::vector<secret_key> keys;
  for (int i = 0; i < 120; ++i) {
    batch.push_back(entry(i));
    keys.push_back(key(i));
    ++expected[owner_of_chat(batch.back().chat)];
  }
  CAF_REQUIRE_EQUAL(expected.size(), 3u);
  CAF_REQUIRE(ask<ok_atom>(queue_atom::value, batch));
  CAF_REQUIRE(ask<ok_atom>(flush_atom::value));
  for (std::size_t i = 0; i < members.size(); ++i)
    CAF_CHECK_EQUAL(members[i].entries_written(), expected[i]);
  auto found = ask<std::vector<secret_lookup>>(lookup_atom::value, keys);
  CAF_REQUIRE(found);
  CAF_REQUIRE_EQUAL(found->size(), keys.size());
  for (int i = 0; i < 120; ++i) {
    CAF_CHECK((*found)[i].found);
    CAF_CHECK((*found)[i].secret == entry(i).secret);
  }
  auto stats = ask<node_stats>(stats_atom::value);
  CAF_REQUIRE(stats);
  CAF_CHECK_EQUAL(stats->secret_buffer.entries_written, 120u);
}

CAF_TEST(a client with an older list adopts the one a refusal names) {
  // The nodes serve under version 2, which drops member 2: it still runs
  // and refuses every key, naming that list. The client routes by version
  // 1, under which member 2 owns a third of the chats.
  cluster_map moved{2, {map.nodes()[0], map.nodes()[1]}, {0, 1}};
  for (auto& m : members)
    m.stop();
  for (auto& m : members)
    m.start_under(cluster, moved);
  std::vector<int> of_member_2;
  for (int i = 0; of_member_2.size() < 4; ++i)
    if (owner_of_chat(entry(i).chat) == 2)
      of_member_2.push_back(i);
  for (auto i : of_member_2) {
    auto queued = ask<ok_atom>(queue_atom::value, entry(i));
    CAF_CHECK(queued);
    if (!queued)
      CAF_MESSAGE(client_sys.render(queued.error()));
  }
  CAF_REQUIRE(ask<ok_atom>(flush_atom::value));
  for (auto i : of_member_2) {
    auto found = ask<secret_lookup>(lookup_atom::value, key(i));
    CAF_REQUIRE(found);
    CAF_CHECK(found->secret == entry(i).secret);
  }
  CAF_CHECK_EQUAL(members[2].entries_written(), 0u);
  CAF_CHECK_EQUAL(members[0].entries_written() + members[1].entries_written(),
                  of_member_2.size());
}

CAF_TEST(tickets of different nodes stay apart) {
  // Two rooms of different owners: each node numbers its tickets from 1.
  std::vector<std::string> rooms;
  std::map<std::size_t, bool> owners;
  for (int i = 0; rooms.size() < 2; ++i) {
    auto room = "!r" + std::to_string(i) + ":x";
    auto owner = map.owner_index({key_kind::room, room});
    if (!owners[owner]) {
      owners[owner] = true;
      rooms.push_back(room);
    }
  }
  std::vector<backfill_ticket> tickets;
  for (const auto& room : rooms) {
    CAF_REQUIRE(ask<uint64_t>(append_atom::value, room,
                              std::vector<timeline_event>{
                                {room + "-e1", "m.text", 1, "hi " + room}}));
    backfill_request request;
    request.room = room;
    auto ticket = ask<backfill_ticket>(enqueue_atom::value, request);
    CAF_REQUIRE(ticket);
    tickets.push_back(*ticket);
  }
  for (std::size_t i = 0; i < rooms.size(); ++i) {
    auto result = ask<backfill_result>(await_atom::value, tickets[i]);
    CAF_REQUIRE(result);
    CAF_REQUIRE_EQUAL(result->events.size(), 1u);
    CAF_CHECK_EQUAL(result->events[0].event_id, rooms[i] + "-e1");
  }
}

CAF_TEST(a lost node fails its keys naming it and is reconnected once back) {
  std::vector<secret_entry> batch;
  for (int i = 0; i < 12; ++i)
    batch.push_back(entry(i));
  CAF_REQUIRE(ask<ok_atom>(queue_atom::value, batch));
  CAF_REQUIRE(ask<ok_atom>(flush_atom::value));
  auto lost = owner_of_chat(entry(0).chat);
  auto where = map.nodes()[lost].text();
  members[lost].stop();
  auto started = std::chrono::steady_clock::now();
  auto answer = ask<secret_lookup>(lookup_atom::value, key(0));
  auto took = std::chrono::steady_clock::now() - started;
  CAF_REQUIRE(!answer);
  CAF_MESSAGE(client_sys.render(answer.error()));
  CAF_CHECK_EQUAL(answer.error().code(),
                  static_cast<uint8_t>(errc::node_unreachable));
  CAF_CHECK_NOT_EQUAL(client_sys.render(answer.error()).find(where),
                      std::string::npos);
  CAF_CHECK_LESS_OR_EQUAL(took, timeout + 500ms);
  for (int i = 0; i < 12; ++i)
    if (owner_of_chat(entry(i).chat) != lost) {
      auto other = ask<secret_lookup>(lookup_atom::value, key(i));
      CAF_CHECK(other && other->found);
    }
  members[lost].start(cluster);
  auto back = ask<secret_lookup>(lookup_atom::value, key(0));
  CAF_REQUIRE(back);
  CAF_CHECK(back->found);
  CAF_CHECK(back->secret == entry(0).secret);
}

CAF_TEST(an await whose node was lost fails saying to retry) {
  std::string room = "!lost:x";
  auto issuer = map.owner_index({key_kind::room, room});
  CAF_REQUIRE(ask<uint64_t>(append_atom::value, room,
                            std::vector<timeline_event>{
                              {"e1", "m.text", 1, "hi"}}));
  backfill_request request;
  request.room = room;
  auto ticket = ask<backfill_ticket>(enqueue_atom::value, request);
  CAF_REQUIRE(ticket);
  members[issuer].stop();
  auto result = ask<backfill_result>(await_atom::value, *ticket);
  CAF_REQUIRE(!result);
  auto said = client_sys.render(result.error());
  CAF_MESSAGE(said);
  CAF_CHECK_EQUAL(result.error().code(),
                  static_cast<uint8_t>(errc::node_unreachable));
  CAF_CHECK_NOT_EQUAL(said.find(map.nodes()[issuer].text()),
                      std::string::npos);
  CAF_CHECK_NOT_EQUAL(said.find("retry the request"), std::string::npos);
}

/// The node cannot know whether the client got its ticket (a client that
/// timed out asks another replica instead): the page waits for the await.
CAF_TEST(a backfill from another node moves the position only once awaited) {
  std::string room = "!claimed:x";
  auto issuer = map.owner_index({key_kind::room, room});
  CAF_REQUIRE(ask<uint64_t>(append_atom::value, room,
                            std::vector<timeline_event>{
                              {"e1", "m.text", 1, "one"},
                              {"e2", "m.text", 2, "two"}}));
  backfill_request request;
  request.room = room;
  request.batch_size = 1;
  request.max_batches = 1;
  auto unawaited = ask<backfill_ticket>(enqueue_atom::value, request);
  CAF_REQUIRE(unawaited);
  // A ticket's one event (its part is one batch of one).
  auto event_of = [&](const expected<backfill_ticket>& ticket) {
    CAF_REQUIRE(ticket);
    auto result = ask<backfill_result>(await_atom::value, *ticket);
    CAF_REQUIRE(result);
    CAF_REQUIRE_EQUAL(result->events.size(), 1u);
    return result->events[0].event_id;
  };
  // A request of a lower priority joins no run of the first's and starts
  // only once the first's run ended (one run per room at a time, the
  // higher priority first): it loads the page again, since the first's
  // run ended with its one page loaded and not committed.
  auto later = request;
  later.prio = priority::low;
  CAF_CHECK_EQUAL(event_of(ask<backfill_ticket>(enqueue_atom::value, later)),
                  "e2");
  CAF_CHECK_EQUAL(members[issuer].runs_finished(), 2u);
  // Awaited late, the first ticket gets the page it loaded.
  CAF_CHECK_EQUAL(event_of(unawaited), "e2");
  CAF_CHECK_EQUAL(event_of(ask<backfill_ticket>(enqueue_atom::value, request)),
                  "e1");
}

CAF_TEST_FIXTURE_SCOPE_END()

namespace {

/// Stands in for a node's secrets behind a real gateway: records the
/// captures handed to it, then answers `ok`, or refuses them as a node
/// shutting down would (which the cluster client retries on the next
/// replica).
behavior capture_recorder(event_based_actor*,
                          std::shared_ptr<std::vector<secret_entry>> seen,
                          bool refuse) {
  return {
    [=](queue_atom, std::vector<secret_entry>& xs) -> result<ok_atom> {
      seen->insert(seen->end(), xs.begin(), xs.end());
      if (refuse)
        return make_error(errc::node_shutting_down, "it is stopping");
      return ok_atom::value;
    },
  };
}

} // namespace

CAF_TEST(a cluster client of replicated nodes stamps each capture once) {
  io_config cfg;
  actor_system sys{cfg};
  std::vector<std::shared_ptr<std::vector<secret_entry>>> seen;
  std::vector<actor> recorders;
  std::vector<node_actor> gateways;
  std::vector<node_endpoint> nodes;
  for (auto port : free_ports(sys, 3)) {
    seen.push_back(std::make_shared<std::vector<secret_entry>>());
    // Decided below, once the chat's first replica is known.
    recorders.push_back(actor{});
    nodes.push_back({"127.0.0.1", port});
  }
  cluster_map map{nodes};
  auto order = map.replica_indices({key_kind::chat, "g@g.us"}, 3);
  for (std::size_t i = 0; i < 3; ++i) {
    recorders[i] = sys.spawn(capture_recorder, seen[i], i == order[0]);
    service_handles handles;
    handles.secret_buffer = actor_cast<secret_buffer_requests>(recorders[i]);
    gateways.push_back(spawn_node_gateway(sys, handles));
    CAF_REQUIRE(sys.middleman().publish(gateways[i], nodes[i].port,
                                        "127.0.0.1", true));
  }
  io_config client_cfg;
  actor_system client_sys{client_cfg};
  auto client = spawn_cluster_client(client_sys, map, 5s, 3);
  scoped_actor self{client_sys};
  std::vector<secret_entry> batch{make_entry("a", 1), make_entry("b", 2)};
  for (int round = 0; round < 2; ++round)
    self->request(client, 15s, queue_atom::value, batch)
      .receive([](ok_atom) {},
               [&](error& err) { CAF_FAIL(client_sys.render(err)); });
  // The first replica refused the first batch (the client then avoids it
  // a while), the second took both: the retry carried the stamps of the
  // first attempt, the client's (its source in the low bits), distinct and
  // rising.
  const auto& refused = *seen[order[0]];
  const auto& taken = *seen[order[1]];
  CAF_REQUIRE_EQUAL(refused.size(), 2u);
  CAF_REQUIRE_EQUAL(taken.size(), 4u);
  CAF_CHECK(seen[order[2]]->empty());
  for (std::size_t i = 0; i < 4; ++i) {
    if (i < 2)
      CAF_CHECK_EQUAL(refused[i].stamp, taken[i].stamp);
    CAF_CHECK_NOT_EQUAL(taken[i].stamp, 0u);
    CAF_CHECK_EQUAL(taken[i].stamp & capture_clock::client_source,
                    capture_clock::client_source);
    if (i > 0)
      CAF_CHECK_GREATER(taken[i].stamp, taken[i - 1].stamp);
  }
  anon_send_exit(client, exit_reason::user_shutdown);
  for (std::size_t i = 0; i < 3; ++i) {
    static_cast<void>(sys.middleman().unpublish(gateways[i], nodes[i].port));
    anon_send_exit(gateways[i], exit_reason::user_shutdown);
    anon_send_exit(recorders[i], exit_reason::user_shutdown);
  }
}

namespace {

/// Stands in for a node's room coordinator: counts the appends it takes,
/// or refuses them as a coordinator whose replica catches up does.
behavior room_recorder(event_based_actor*, std::shared_ptr<int> taken,
                       bool catching_up) {
  return {
    [=](append_atom, const std::string& room,
        std::vector<timeline_event>& xs) -> result<uint64_t> {
      if (catching_up)
        return make_error(errc::catching_up,
                          "room " + room + ": this node's replica is "
                                           "catching up from its peers");
      *taken += static_cast<int>(xs.size());
      return uint64_t{xs.size()};
    },
  };
}

} // namespace

CAF_TEST(a room whose first replica catches up is served by the next) {
  io_config cfg;
  actor_system sys{cfg};
  std::vector<node_endpoint> nodes;
  for (auto port : free_ports(sys, 3))
    nodes.push_back({"127.0.0.1", port});
  cluster_map map{nodes};
  std::string room = "!catching:x";
  auto order = map.replica_indices({key_kind::room, room}, 3);
  std::vector<std::shared_ptr<int>> taken;
  std::vector<actor> recorders;
  std::vector<node_actor> gateways;
  for (std::size_t i = 0; i < 3; ++i) {
    taken.push_back(std::make_shared<int>(0));
    recorders.push_back(sys.spawn(room_recorder, taken[i], i == order[0]));
    service_handles handles;
    handles.timeline = actor_cast<timeline_requests>(recorders[i]);
    gateways.push_back(spawn_node_gateway(sys, handles));
    CAF_REQUIRE(sys.middleman().publish(gateways[i], nodes[i].port,
                                        "127.0.0.1", true));
  }
  io_config client_cfg;
  actor_system client_sys{client_cfg};
  auto client = spawn_cluster_client(client_sys, map, 5s, 3);
  scoped_actor self{client_sys};
  self
    ->request(client, 15s, append_atom::value, room,
              std::vector<timeline_event>{{"e1", "m.text", 1, "hi"}})
    .receive([](uint64_t) {},
             [&](error& err) { CAF_FAIL(client_sys.render(err)); });
  CAF_CHECK_EQUAL(*taken[order[0]], 0);
  CAF_CHECK_EQUAL(*taken[order[1]], 1);
  CAF_CHECK_EQUAL(*taken[order[2]], 0);
  anon_send_exit(client, exit_reason::user_shutdown);
  for (std::size_t i = 0; i < 3; ++i) {
    static_cast<void>(sys.middleman().unpublish(gateways[i], nodes[i].port));
    anon_send_exit(gateways[i], exit_reason::user_shutdown);
    anon_send_exit(recorders[i], exit_reason::user_shutdown);
  }
}
