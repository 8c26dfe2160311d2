#define CAF_SUITE client.cluster_map
#include <caf/test/unit_test.hpp>

#include <map>
#include <string>
#include <vector>

#include <coalesce/client/cluster_map.hpp>

using namespace coalesce;

namespace {

cluster_map nodes(const std::vector<std::string>& entries) {
  cluster_map result;
  auto problem = cluster_map::parse(entries, "coalesce.cluster", result);
  CAF_REQUIRE(!problem);
  return result;
}

const std::vector<std::string> three = {"127.0.0.1:4301", "127.0.0.1:4302",
                                        "127.0.0.1:4303"};

std::vector<std::string> room_names(int count) {
  std::vector<std::string> result;
  for (int i = 0; i < count; ++i)
    result.push_back("!room" + std::to_string(i) + ":example.org");
  return result;
}

std::string parse_problem(const std::vector<std::string>& entries) {
  cluster_map ignored;
  return cluster_map::parse(entries, "coalesce.cluster", ignored)
    .value_or("");
}

} // namespace

CAF_TEST(owners are pinned so that no build moves the keys of a deployment) {
  // Computed by an independent implementation (a few lines of Python) of
  // FNV-1a 64 and splitmix64's finaliser: a change of the hash would move
  // keys of every running deployment, and keys are not migrated.
  CAF_CHECK_EQUAL(stable_hash(""), 0xf52a15e9a9b5e89bULL);
  CAF_CHECK_EQUAL(stable_hash("coalesce"), 0xa740ae3dbc3d02a3ULL);
  auto map = nodes(three);
  CAF_CHECK_EQUAL(map.owner({key_kind::room, "!r1:x"}).text(),
                  "127.0.0.1:4301");
  CAF_CHECK_EQUAL(map.owner({key_kind::chat, "g@g.us"}).text(),
                  "127.0.0.1:4303");
  CAF_CHECK_EQUAL(map.owner({key_kind::session, "s1"}).text(),
                  "127.0.0.1:4302");
}

CAF_TEST(the order of the list changes no owner) {
  auto forward = nodes(three);
  auto backward = nodes({three[2], three[0], three[1]});
  for (const auto& room : room_names(2000)) {
    routing_key key{key_kind::room, room};
    CAF_CHECK_EQUAL(forward.owner(key).text(), backward.owner(key).text());
  }
}

CAF_TEST(keys spread roughly evenly over the nodes) {
  auto map = nodes(three);
  std::map<std::size_t, int> owned;
  auto rooms = room_names(10000);
  for (const auto& room : rooms)
    ++owned[map.owner_index({key_kind::room, room})];
  CAF_REQUIRE_EQUAL(owned.size(), 3u);
  for (const auto& [node, count] : owned) {
    CAF_MESSAGE(map.nodes()[node].text() << " owns " << count);
    CAF_CHECK_GREATER(count, 3000);
    CAF_CHECK_LESS(count, 3667);
  }
}

CAF_TEST(a fourth node takes about a quarter of the keys and only to itself) {
  auto before = nodes(three);
  auto with_fourth = three;
  with_fourth.push_back("127.0.0.1:4304");
  auto after = nodes(with_fourth);
  auto rooms = room_names(10000);
  int moved = 0;
  for (const auto& room : rooms) {
    routing_key key{key_kind::room, room};
    auto old_owner = before.owner(key).text();
    auto new_owner = after.owner(key).text();
    if (old_owner == new_owner)
      continue;
    ++moved;
    CAF_CHECK_EQUAL(new_owner, "127.0.0.1:4304");
  }
  auto share = double(moved) / rooms.size();
  CAF_MESSAGE("share moved: " << share);
  CAF_CHECK_GREATER(share, 0.22);
  CAF_CHECK_LESS(share, 0.28);
}

CAF_TEST(a key kind is part of the key) {
  auto map = nodes(three);
  int differ = 0;
  for (const auto& name : room_names(300))
    if (map.owner_index({key_kind::room, name})
        != map.owner_index({key_kind::chat, name}))
      ++differ;
  CAF_CHECK_GREATER(differ, 100);
}

CAF_TEST(bad entries are refused with a sentence naming the key) {
  CAF_CHECK_EQUAL(parse_problem(three), "");
  for (auto bad : {"127.0.0.1", ":4301", "127.0.0.1:", "127.0.0.1:0",
                   "127.0.0.1:65536", "127.0.0.1:43x1"}) {
    auto problem = parse_problem({three[0], bad});
    CAF_MESSAGE(problem);
    CAF_CHECK_EQUAL(problem.rfind("coalesce.cluster: \"" + std::string{bad}
                                    + "\"",
                                  0),
                    0u);
  }
  CAF_CHECK_EQUAL(parse_problem({three[0], three[1], three[0]}),
                  "coalesce.cluster: \"127.0.0.1:4301\" is listed twice");
}

CAF_TEST(each request is routed by the key it names) {
  std::vector<secret_entry> entries(2);
  entries[0].chat = "c1";
  entries[1].chat = "c2";
  auto keys = routing_keys(queue_atom::value, entries);
  CAF_REQUIRE_EQUAL(keys.size(), 2u);
  CAF_CHECK(keys[0].kind == key_kind::chat && keys[0].value == "c1");
  CAF_CHECK(keys[1].kind == key_kind::chat && keys[1].value == "c2");
  backfill_request request;
  request.room = "r";
  auto room = routing_keys(enqueue_atom::value, request);
  CAF_REQUIRE_EQUAL(room.size(), 1u);
  CAF_CHECK(room[0].kind == key_kind::room && room[0].value == "r");
  std::string session = "s";
  auto by_session = routing_keys(load_atom::value, session);
  CAF_REQUIRE_EQUAL(by_session.size(), 1u);
  CAF_CHECK(by_session[0].kind == key_kind::session
            && by_session[0].value == "s");
  CAF_CHECK(routing_keys(await_atom::value, backfill_ticket{7}).empty());
}

CAF_TEST(the replicas of a key are its rendezvous order with the owner first) {
  const std::vector<std::string> five = {"127.0.0.1:4301", "127.0.0.1:4302",
                                         "127.0.0.1:4303", "127.0.0.1:4304",
                                         "127.0.0.1:4305"};
  auto map = nodes(five);
  auto shuffled = nodes({five[3], five[1], five[4], five[0], five[2]});
  std::map<std::size_t, int> second_place;
  for (const auto& room : room_names(2000)) {
    routing_key key{key_kind::room, room};
    auto replicas = map.replica_indices(key, 3);
    CAF_REQUIRE_EQUAL(replicas.size(), 3u);
    CAF_CHECK_EQUAL(replicas.front(), map.owner_index(key));
    CAF_CHECK(replicas[0] != replicas[1] && replicas[1] != replicas[2]
              && replicas[0] != replicas[2]);
    // The same set in the same order whatever the order of the list.
    auto other = shuffled.replica_indices(key, 3);
    for (std::size_t i = 0; i < 3; ++i)
      CAF_CHECK_EQUAL(map.nodes()[replicas[i]].text(),
                      shuffled.nodes()[other[i]].text());
    // Dropping a node that is not a replica changes neither.
    std::vector<std::string> four;
    for (std::size_t i = 0; i < five.size(); ++i)
      if (i != replicas[0] && i != replicas[1] && i != replicas[2]) {
        four = five;
        four.erase(four.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    auto smaller = nodes(four);
    auto kept = smaller.replica_indices(key, 3);
    for (std::size_t i = 0; i < 3; ++i)
      CAF_CHECK_EQUAL(smaller.nodes()[kept[i]].text(),
                      map.nodes()[replicas[i]].text());
    ++second_place[replicas[1]];
  }
  // Every node is somebody's second replica, about a fifth of the time.
  CAF_CHECK_EQUAL(second_place.size(), 5u);
  for (const auto& [node, count] : second_place)
    CAF_CHECK(count > 300 && count < 500);
  // Fewer nodes than replicas: every node, the owner first.
  auto pair = nodes({five[0], five[1]});
  routing_key key{key_kind::chat, "g@g.us"};
  auto both = pair.replica_indices(key, 3);
  CAF_CHECK_EQUAL(both.size(), 2u);
  CAF_CHECK_EQUAL(both.front(), pair.owner_index(key));
}
