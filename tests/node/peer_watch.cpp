#define CAF_SUITE node.peer_watch
#include <caf/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/messages/secret_buffer_stats.hpp>
#include <coalesce/node/list_check.hpp>
#include <coalesce/node/peer_watch.hpp>

#include "silent_port.hpp"
#include "test_config.hpp"

using namespace coalesce;
using namespace std::chrono_literals;

namespace {

using clock_type = serving_lists::clock;

struct io_config : coalesce::test::test_config {
  io_config() {
    load<caf::io::middleman>();
  }
};

/// Told of each change a test waits for (an ask ended, a ping held), so
/// that it checks its condition after each instead of polling it.
class change_signal {
public:
  void tell() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      ++changes_;
    }
    changed_.notify_all();
  }

  /// Whether `holds()` became true within `limit` (real time: the dials
  /// are real connections), checked at once and after each change told.
  bool within(std::chrono::milliseconds limit,
              const std::function<bool()>& holds) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::unique_lock<std::mutex> guard{mtx_};
    for (;;) {
      auto seen = changes_;
      guard.unlock();
      // Not under the lock: `holds` may read what a teller holds locked
      // while it tells.
      auto held = holds();
      guard.lock();
      if (held)
        return true;
      if (!changed_.wait_until(guard, deadline,
                               [&] { return changes_ != seen; }))
        return false;
    }
  }

private:
  std::mutex mtx_;
  std::condition_variable changed_;
  uint64_t changes_ = 0;
};

using release_atom = caf::atom_constant<caf::atom("release")>;

/// A peer's secret buffer that holds every stats request until released
/// (unless `holding` is false: then it answers at once): its gateway
/// answers a ping only then, so the test moves the clock while the ping is
/// open. `asked` counts the requests it got, and `signal` is told of each.
caf::behavior held_stats(caf::event_based_actor* self,
                         std::shared_ptr<std::atomic<int>> asked,
                         std::shared_ptr<change_signal> signal,
                         bool holding) {
  auto held = std::make_shared<std::vector<caf::response_promise>>();
  return {
    [self, held, asked, signal, holding](stats_atom) {
      auto promise = self->make_response_promise();
      ++*asked;
      signal->tell();
      if (holding)
        held->push_back(promise);
      else
        promise.deliver(secret_buffer_stats{});
    },
    [held](release_atom) {
      for (auto& promise : *held)
        promise.deliver(secret_buffer_stats{});
      held->clear();
    },
  };
}

/// A peer in its own actor system, reached over a real connection: a real
/// gateway whose secret buffer is `held_stats`.
struct held_peer {
  io_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<std::atomic<int>> asked
    = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<change_signal> asked_signal
    = std::make_shared<change_signal>();
  caf::actor buffer;
  node_actor gateway;
  uint16_t port = 0;

  explicit held_peer(bool holding = true)
    : buffer(sys.spawn(held_stats, asked, asked_signal, holding)) {
    service_handles handles;
    handles.secret_buffer = caf::actor_cast<decltype(handles.secret_buffer)>(
      buffer);
    gateway = spawn_node_gateway(sys, handles);
    auto published = sys.middleman().publish(gateway, 0, "127.0.0.1", true);
    CAF_REQUIRE(published);
    port = *published;
  }

  void release() {
    caf::anon_send(buffer, release_atom::value);
  }

  ~held_peer() {
    release();
    caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(buffer, caf::exit_reason::user_shutdown);
  }
};

struct fixture {
  io_config cfg;
  caf::actor_system sys{cfg};
  coalesce::test::silent_port peer;
  /// The view's clock, which the test moves (nanoseconds since the epoch
  /// of the steady clock).
  std::shared_ptr<std::atomic<clock_type::rep>> at
    = std::make_shared<std::atomic<clock_type::rep>>(
      clock_type::now().time_since_epoch().count());
  std::shared_ptr<serving_lists> lists
    = std::make_shared<serving_lists>(1, 9s, [at = at] {
        return clock_type::time_point{clock_type::duration{at->load()}};
      });
  /// Told of each end of an ask the view records.
  std::shared_ptr<change_signal> heard = [this] {
    auto signal = std::make_shared<change_signal>();
    lists->on_heard([signal] { signal->tell(); });
    return signal;
  }();
  caf::actor watch;

  /// Watches the peer at `port` with `settings`.
  void start_watch(uint16_t port, peer_watch_settings settings) {
    std::vector<std::string> nodes{"127.0.0.1:1",
                                   "127.0.0.1:" + std::to_string(port)};
    cluster_map map;
    CAF_REQUIRE(!cluster_map::parse(nodes, "cluster", map));
    auto counters = std::make_shared<peer_counters>(nodes, 1);
    watch = spawn_peer_watch(sys, map, 0, settings, counters, {}, lists);
  }

  void jump_an_hour() {
    *at += std::chrono::duration_cast<clock_type::duration>(1h).count();
  }

  ~fixture() {
    caf::anon_send_exit(watch, caf::exit_reason::user_shutdown);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(peer_watch_tests, fixture)

// A node paused while an ask was open wakes to that ask's end: had it been
// dated by its end, the view would look fresh though nothing was heard
// since the pause.
// Each dial to the silent port times out after 300 ms and the next follows
// 3 s later, so the view stays as the first failure left it for seconds.
CAF_TEST(a failed dial counts as heard when it was made not when it failed) {
  start_watch(peer.port(), {300ms, 3s});
  CAF_REQUIRE(peer.dialed_within(10s));
  jump_an_hour();
  CAF_REQUIRE(heard->within(10s, [&] { return lists->current()->settled; }));
  CAF_CHECK(lists->stale());
  // The next dial is made after the jump: its failure makes the view fresh.
  CAF_CHECK(heard->within(20s, [&] { return !lists->stale(); }));
}

// Likewise for a ping's answer: it tells what the peer served at some
// moment after the ask, which may be before the pause.
CAF_TEST(a pings answer counts as heard when the ping was sent) {
  held_peer answering;
  start_watch(answering.port, {10s, 3s});
  // Reached, the peer is pinged at once; its answer waits for the buffer.
  CAF_REQUIRE(answering.asked_signal->within(
    10s, [&] { return answering.asked->load() == 1; }));
  jump_an_hour();
  answering.release();
  CAF_REQUIRE(heard->within(10s, [&] { return lists->current()->settled; }));
  CAF_CHECK(lists->stale());
  // The next ping is sent after the jump: its answer makes the view fresh.
  CAF_REQUIRE(answering.asked_signal->within(
    20s, [&] { return answering.asked->load() == 2; }));
  answering.release();
  CAF_CHECK(heard->within(10s, [&] { return !lists->stale(); }));
}

// A node changing its list asks every other node of the new list before
// it stores it (operating.md, "Changing the list"): the check's "within
// LIMIT" holds however many nodes hang, and a hung node costs no other its
// ask. Asked one after the other, each hung node would take a whole peer
// timeout (3 s) past the limit.
CAF_TEST(a list check asks every node at once and ends within its limit) {
  held_peer answering{false};
  coalesce::test::silent_port hung[3];
  uint16_t closed = 0;
  {
    coalesce::test::silent_port gone;
    closed = gone.port();
  }
  std::vector<std::string> nodes{"127.0.0.1:1"};
  for (const auto& port : hung)
    nodes.push_back("127.0.0.1:" + std::to_string(port.port()));
  nodes.push_back("127.0.0.1:" + std::to_string(answering.port));
  nodes.push_back("127.0.0.1:" + std::to_string(closed));
  cluster_map list;
  CAF_REQUIRE(!cluster_map::parse(nodes, "cluster", list));
  auto started = std::chrono::steady_clock::now();
  auto missing = unanswering_nodes(sys, list, 0, 3s, 300ms, 1s);
  auto took = std::chrono::steady_clock::now() - started;
  CAF_MESSAGE("took " << caf::deep_to_string(
                std::chrono::duration_cast<caf::timespan>(took)));
  CAF_CHECK_LESS(took, 2500ms);
  CAF_REQUIRE_EQUAL(missing.size(), 4u);
  for (std::size_t i = 0; i < 3; ++i)
    CAF_CHECK_EQUAL(missing[i].rfind(nodes[i + 1] + " (", 0), 0u);
  CAF_CHECK_EQUAL(missing[3].rfind(nodes[5] + " (", 0), 0u);
  CAF_CHECK_GREATER_OR_EQUAL(answering.asked->load(), 1);
}

CAF_TEST_FIXTURE_SCOPE_END()
