#define CAF_SUITE actors.session_registry
#include <caf/test/dsl.hpp>

#include <coalesce/actors/session_registry.hpp>

#include <coalesce/messages/errc.hpp>

#include <set>
#include <string>

#include "error_codes.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;

namespace {

session_handle_actor::behavior_type idle_handle() {
  return {[](snapshot_atom) { return std::string{}; }};
}

/// The registry only compares handles; the actors never run.
struct registry_fixture : test_coordinator_fixture<test_config> {
  session_registry registry;

  session_handle_actor handle() {
    return sys.spawn(idle_handle);
  }

  caf::actor_addr addr(const session_handle_actor& x) {
    return actor_cast<actor_addr>(x);
  }

  /// The generation `register_handle` answers; fails the test on a refusal.
  uint64_t registered(session_registry& into, const std::string& session,
                      const session_handle_actor& x) {
    auto generation = into.register_handle(session, x);
    CAF_REQUIRE(generation.engaged());
    return *generation;
  }

  /// Handles the test reported down.
  std::set<caf::actor_addr> dead;

  std::optional<session_handle_actor> retry_source(const std::string& session) {
    return registry.retry_source(session, [this](const session_handle_actor& x) {
      return dead.count(addr(x)) == 0;
    });
  }

  /// Where a persist through `x` (alive) is written from, or the error.
  caf::expected<session_handle_actor> source(const session_handle_actor& x,
                                             bool alive = true) {
    return registry.source_for("s", x, alive);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(session_registry_tests, registry_fixture)

CAF_TEST(generations grow by one per register) {
  auto a = handle();
  auto b = handle();
  CAF_CHECK_EQUAL(registered(registry, "s", a), 0u);
  CAF_CHECK_EQUAL(registered(registry, "s", b), 1u);
  CAF_CHECK_EQUAL(registered(registry, "t", a), 0u);
  // A handle registered again moves to the newest generation.
  CAF_CHECK_EQUAL(registered(registry, "s", a), 2u);
  CAF_CHECK(*registry.generation_of("s", a) == 2u);
  CAF_CHECK(*source(a) == a);
  CAF_CHECK(*source(b) == a);
}

CAF_TEST(a current or never registered live handle writes from itself) {
  auto a = handle();
  auto stray = handle();
  registry.register_handle("s", a);
  CAF_CHECK(*source(a) == a);
  CAF_CHECK(*source(stray) == stray);
}

CAF_TEST(a superseded handle writes from the newest live one or is refused) {
  auto old = handle();
  auto newer = handle();
  registry.register_handle("s", old);
  registry.register_handle("s", newer);
  CAF_CHECK(*source(old) == newer);
  registry.handle_down(addr(newer));
  auto refused = source(old);
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::handle_superseded));
}

CAF_TEST(a dead handle is gone whether the registry knows it or not) {
  auto current = handle();
  auto stray = handle();
  registry.register_handle("s", current);
  auto stray_gone = source(stray, false);
  CAF_REQUIRE(!stray_gone);
  CAF_CHECK_EQUAL(code_of(stray_gone.error()), code(errc::handle_gone));
  auto gone = source(current, false);
  CAF_REQUIRE(!gone);
  CAF_CHECK_EQUAL(code_of(gone.error()), code(errc::handle_gone));
  registry.handle_down(addr(current));
  gone = source(current, false);
  CAF_REQUIRE(!gone);
  CAF_CHECK_EQUAL(code_of(gone.error()), code(errc::handle_gone));
}

CAF_TEST(a delete retires registered handles and tombstones the one it names) {
  auto registered = handle();
  auto live = handle();
  auto other = handle();
  registry.register_handle("s", registered);
  registry.delete_session("s", live);
  CAF_CHECK(registry.is_deleted("s", registered));
  CAF_CHECK(registry.is_deleted("s", live));
  CAF_CHECK(!registry.is_deleted("s", other));
  CAF_CHECK(!registry.is_deleted("t", live));
  auto refused = source(registered);
  CAF_REQUIRE(!refused);
  CAF_CHECK_EQUAL(code_of(refused.error()), code(errc::session_deleted));
  // Re-created afterwards: current, and the old handles stay deleted.
  auto fresh = handle();
  registry.register_handle("s", fresh);
  CAF_CHECK(*source(fresh) == fresh);
  CAF_CHECK(registry.is_deleted("s", registered));
  registry.handle_down(addr(registered));
  CAF_CHECK(registry.is_deleted("s", registered));
  auto refused_dead = source(registered, false);
  CAF_REQUIRE(!refused_dead);
  CAF_CHECK_EQUAL(code_of(refused_dead.error()), code(errc::session_deleted));
  // A retired handle registered again stays retired.
  auto again = registry.register_handle("s", live);
  CAF_REQUIRE(!again);
  CAF_CHECK_EQUAL(code_of(again.error()), code(errc::session_deleted));
}

CAF_TEST(a dead unregistered handle never writes from a deleted incarnation) {
  auto before = handle();
  auto stray = handle();
  registry.register_handle("s", before);
  registry.delete_session("s", std::nullopt);
  auto gone = source(stray, false);
  CAF_REQUIRE(!gone);
  CAF_CHECK_EQUAL(code_of(gone.error()), code(errc::handle_gone));
}

CAF_TEST(failed sessions keep their retry source until written or deleted) {
  auto a = handle();
  registry.register_handle("s", a);
  registry.mark_failed("s", a);
  registry.mark_failed("t", a);
  CAF_CHECK(registry.failed("s"));
  CAF_CHECK_EQUAL(registry.failed_count(), 2u);
  CAF_CHECK(*retry_source("s") == a);
  registry.mark_written("s");
  CAF_CHECK(!registry.failed("s"));
  CAF_CHECK(!retry_source("s"));
  registry.delete_session("t", std::nullopt);
  CAF_CHECK(!registry.failed("t"));
  registry.mark_failed("s", a);
  registry.handle_down(addr(a));
  dead.insert(addr(a));
  CAF_CHECK(registry.failed("s"));
  CAF_CHECK(!retry_source("s")); // no live handle left
  // A handle registered since is the session's current one: retried from.
  auto b = handle();
  registry.register_handle("s", b);
  CAF_CHECK(*retry_source("s") == b);
}

CAF_TEST(generations continue from the stored one and a delete moves above every one in use) {
  auto stray = handle();
  registry.learn_stored("s", 5);
  CAF_CHECK(registry.knows_stored("s"));
  CAF_CHECK(!registry.knows_stored("t"));
  CAF_CHECK(registry.generation_of("s", stray) == 5u); // unregistered
  auto a = handle();
  CAF_CHECK_EQUAL(registered(registry, "s", a), 6u);
  CAF_CHECK(registry.generation_of("s", a) == 6u);
  CAF_CHECK(registry.generation_of("s", stray) == 6u);
  auto deletion = registry.delete_session("s", std::nullopt);
  CAF_CHECK_EQUAL(deletion.generation, 7u);
  CAF_CHECK(deletion.tombstone_needed); // a is alive
  CAF_CHECK(registry.generation_of("s", stray) == 7u);
  auto fresh = handle();
  CAF_CHECK_EQUAL(registered(registry, "s", fresh), 7u);
  // Nothing stored: registers start at 0; a delete still moves above it.
  registry.learn_stored("t", std::nullopt);
  CAF_CHECK(registry.generation_of("t", stray) == 0u);
  deletion = registry.delete_session("t", std::nullopt);
  CAF_CHECK_EQUAL(deletion.generation, 1u);
  CAF_CHECK(!deletion.tombstone_needed); // no handle to fence
  // A session the registry knows nothing of: storage's generation.
  CAF_CHECK(!registry.generation_of("u", stray));
}

CAF_TEST(registering and deleting many sessions whose handles die leaves a bounded registry) {
  session_registry bounded{100};
  constexpr int n = 5000;
  for (int i = 0; i < n; ++i) {
    auto session = "s" + std::to_string(i);
    bounded.learn_stored(session, std::nullopt);
    auto h = handle();
    CAF_REQUIRE(bounded.register_handle(session, h));
    auto deletion = bounded.delete_session(session, std::nullopt);
    CAF_REQUIRE(deletion.tombstone_needed);
    auto death = bounded.handle_down(addr(h));
    CAF_REQUIRE_EQUAL(death.unfenced.size(), 1u);
    CAF_CHECK_EQUAL(death.unfenced.front().second, deletion.generation);
    for (const auto& x : death.sessions)
      bounded.forget_if_idle(x);
    // Handles registered once, for a single put, then gone.
    auto put = handle();
    CAF_REQUIRE(bounded.register_handle("t", put));
    bounded.handle_down(addr(put));
    bounded.forget_if_idle("t");
  }
  auto held = bounded.size();
  CAF_CHECK_EQUAL(held.sessions, 0u);
  CAF_CHECK_EQUAL(held.handles, 0u);
  CAF_CHECK_EQUAL(held.remembered_retired, 100u);
  // The newest retired handles are still known as deleted; a forgotten one
  // is refused once dead all the same.
  auto fresh = handle();
  bounded.learn_stored("s0", std::nullopt);
  CAF_CHECK_EQUAL(registered(bounded, "s0", fresh), 0u);
  CAF_CHECK(*bounded.source_for("s0", fresh, true) == fresh);
}

CAF_TEST_FIXTURE_SCOPE_END()
