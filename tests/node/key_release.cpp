#define CAF_SUITE node.key_release
#include <caf/test/unit_test.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <coalesce/node/key_release.hpp>

using namespace coalesce;

namespace {

using answer_fn = std::function<void(caf::expected<bool>)>;

/// A pass over `keys` keys, each with replicas {0, 1, 2}, whose checks wait
/// for the test to answer them.
struct fixture {
  std::shared_ptr<peer_counters> counters = std::make_shared<peer_counters>();
  key_release release{"sessions", "sessions", released_kind::sessions,
                      counters,
                      [](const caf::error&) { return std::string{"failed"}; }};
  /// Per check asked and not yet answered: its key and its answer.
  std::vector<std::pair<std::size_t, answer_fn>> open_checks;
  std::vector<std::size_t> dropped_keys;
  bool reported = false;
  uint64_t dropped = 0;
  uint64_t kept = 0;

  void start(std::size_t keys) {
    std::vector<std::vector<std::size_t>> replicas(keys, {0, 1, 2});
    release.start(
      std::move(replicas),
      [this](std::size_t, std::size_t key, answer_fn done) {
        open_checks.emplace_back(key, std::move(done));
      },
      [this](std::size_t key, answer_fn done) {
        dropped_keys.push_back(key);
        done(true);
      },
      [] { return true; },
      [this](uint64_t x, uint64_t y) {
        reported = true;
        dropped = x;
        kept = y;
      });
  }

  /// The keys with a check open, each once.
  std::vector<std::size_t> keys_in_flight() const {
    std::vector<std::size_t> result;
    for (const auto& [key, done] : open_checks)
      if (result.empty() || result.back() != key)
        result.push_back(key);
    return result;
  }

  /// Answers every open check: the replica holds the key.
  void answer_all_holding() {
    auto checks = std::move(open_checks);
    open_checks.clear();
    for (auto& [key, done] : checks)
      done(true);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(key_release_tests, fixture)

CAF_TEST(a pass asks about a window of keys at once) {
  start(40);
  // One key at a time cost a round trip to its replicas per key.
  CAF_CHECK_EQUAL(keys_in_flight().size(), key_release::window);
  CAF_CHECK_EQUAL(open_checks.size(), 3 * key_release::window);
  answer_all_holding();
  CAF_CHECK_EQUAL(dropped_keys.size(), key_release::window);
  CAF_CHECK_EQUAL(keys_in_flight().size(), key_release::window);
  while (!open_checks.empty())
    answer_all_holding();
  CAF_REQUIRE(reported);
  CAF_CHECK_EQUAL(dropped, 40u);
  CAF_CHECK_EQUAL(kept, 0u);
  CAF_CHECK_EQUAL(counters->keys_dropped.load(), 40u);
}

CAF_TEST(a pass ends only once every key in flight is decided) {
  start(3);
  CAF_CHECK_EQUAL(keys_in_flight().size(), 3u);
  // Two of the three keys' replicas hold it; the third's do not.
  auto checks = std::move(open_checks);
  open_checks.clear();
  for (auto& [key, done] : checks)
    if (key != 2)
      done(true);
  CAF_CHECK(!reported);
  for (auto& [key, done] : checks)
    if (key == 2)
      done(false);
  CAF_REQUIRE(reported);
  CAF_CHECK_EQUAL(dropped, 2u);
  CAF_CHECK_EQUAL(kept, 1u);
  CAF_CHECK(!release.running());
}

CAF_TEST_FIXTURE_SCOPE_END()
