#define CAF_SUITE actors.session_persister
#include <caf/test/dsl.hpp>

#include <coalesce/actors/session_persister.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <caf/config_option_adder.hpp>
#include <caf/config_option_set.hpp>

#include <coalesce/actors/session_persister_protocol.hpp>
#include <coalesce/actors/wal_sync_outcomes.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>
#include <coalesce/storage/session_store.hpp>

#include "error_codes.hpp"
#include "mailbox.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

using rows = std::vector<session_update>;
using ids = std::vector<std::string>;

session_update row(const std::string& id, int64_t timestamp = 1) {
  return session_update{id, timestamp, "note", "payload of " + id};
}

/// A live session: answers `snapshot` with its blob. While `holding`, it
/// keeps each snapshot request (with the blob it had when asked) until the
/// test calls `release_held`, so a write stays open as long as the test
/// wants.
struct handle_state {
  std::string blob;
  bool holding = false;
  std::vector<std::pair<typed_response_promise<std::string>, std::string>>
    held;
  /// Every blob answered, in order.
  std::vector<std::string> served;
  /// Who asked for each snapshot (the session's writers), in order.
  std::vector<strong_actor_ptr> askers;
};

/// The handle plus the test's signal to answer the held requests.
using test_handle_actor
  = session_handle_actor::extend<reacts_to<ok_atom>>;

using handle_impl = stateful_actor<handle_state, test_handle_actor::base>;

test_handle_actor::behavior_type
test_handle(test_handle_actor::stateful_pointer<handle_state> self,
            std::string blob) {
  self->state.blob = std::move(blob);
  return {
    [self](ok_atom) {
      auto& st = self->state;
      st.holding = false;
      auto held = std::move(st.held);
      st.held.clear();
      for (auto& [promise, blob] : held) {
        st.served.push_back(blob);
        promise.deliver(blob);
      }
    },
    [self](snapshot_atom) -> result<std::string> {
      auto& st = self->state;
      st.askers.push_back(self->current_sender());
      if (!st.holding) {
        st.served.push_back(st.blob);
        return st.blob;
      }
      auto promise = self->make_response_promise<std::string>();
      st.held.emplace_back(promise, st.blob);
      return promise;
    },
  };
}

/// A handle that answers a snapshot request with a number.
behavior wrong_handle() {
  return {[](snapshot_atom) { return 42; }};
}

/// A persister over a real RocksDB in a fresh directory (through the fault
/// seam, all switches off), its I/O actors scheduled so the test
/// coordinator decides every step.
struct persister_fixture : test_coordinator_fixture<test_config> {
  temp_dir dir;
  std::shared_ptr<storage::fault_switches> faults
    = std::make_shared<storage::fault_switches>();
  std::shared_ptr<storage::database> db;
  session_persister_actors service;
  session_persister_actor persister;

  persister_fixture() {
    auto opened = storage::database::open(
      {dir.sub("db"), storage::durability::synced,
       storage::make_fault_injecting_file_system(faults)});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
  }

  ~persister_fixture() override {
    anon_send_exit(persister, exit_reason::kill);
    for (auto& io : service.io)
      anon_send_exit(io, exit_reason::kill);
    sched.run();
  }

  /// The suite's options: two I/O actors, so that its sessions are routed
  /// to more than one (the default is one).
  static session_persister_options two_io_actors() {
    session_persister_options options;
    options.io_workers = 2;
    return options;
  }

  void start(session_persister_options options = two_io_actors()) {
    service = spawn_session_persister_actors_scheduled(sys, db, options);
    persister = service.persister;
    sched.run();
  }

  /// Stops the persister and its I/O actors, closes the database, opens it
  /// again from its directory and starts a new persister: a node restart.
  void restart(session_persister_options options = two_io_actors()) {
    anon_send_exit(persister, exit_reason::user_shutdown);
    for (auto& io : service.io)
      anon_send_exit(io, exit_reason::user_shutdown);
    sched.run();
    CAF_REQUIRE(!db->close());
    db.reset();
    auto opened = storage::database::open(
      {dir.sub("db"), storage::durability::synced,
       storage::make_fault_injecting_file_system(faults)});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
    start(options);
  }

  /// The first I/O actor, typed, for the tests that talk to it directly.
  session_io_actor first_io() const {
    return actor_cast<session_io_actor>(service.io.front());
  }

  session_handle_actor spawn_handle(std::string blob) {
    auto result = sys.spawn(test_handle, std::move(blob));
    sched.run();
    return actor_cast<session_handle_actor>(result);
  }

  handle_state& state_of(const session_handle_actor& handle) {
    return deref<handle_impl>(handle).state;
  }

  void set_blob(const session_handle_actor& handle, std::string blob) {
    state_of(handle).blob = std::move(blob);
  }

  /// Has the handle answer every held snapshot request with the blob of
  /// its time (when the test next runs the actors).
  void release_held(const session_handle_actor& handle) {
    anon_send(actor_cast<test_handle_actor>(handle), ok_atom::value);
  }

  /// Sends a request from `self`, runs every actor, returns the reply.
  template <class T, class... Ts>
  T ask(Ts... xs) {
    self->request(persister, infinite, std::move(xs)...);
    sched.run();
    return next_reply<T>(sys, self);
  }

  template <class... Ts>
  error ask_error(Ts... xs) {
    self->request(persister, infinite, std::move(xs)...);
    sched.run();
    return next_error(self);
  }

  uint64_t register_handle(const std::string& session,
                           const session_handle_actor& handle) {
    return ask<uint64_t>(register_atom::value, session, handle);
  }

  /// A persist whose answer `who` receives later.
  void send_persist(scoped_actor& who, const std::string& session,
                    const session_handle_actor& handle, rows updates,
                    ids removed = {}) {
    who->request(persister, infinite, persist_atom::value, session, handle,
                 std::move(updates), std::move(removed));
  }

  /// Starts a write of `session` that waits for `handle`'s snapshot until
  /// `release_held`: `running` gets its answer then.
  void hold_a_write(scoped_actor& running, const std::string& session,
                    const session_handle_actor& handle, rows updates) {
    state_of(handle).holding = true;
    send_persist(running, session, handle, std::move(updates));
    sched.run();
  }

  /// A persist nobody waits for.
  void fire_persist(const std::string& session,
                    const session_handle_actor& handle, rows updates,
                    ids removed = {}) {
    anon_send(persister, persist_atom::value, session, handle,
              std::move(updates), std::move(removed));
  }

  void persist(const std::string& session, const session_handle_actor& handle,
               rows updates, ids removed = {}) {
    CAF_CHECK(ask<ok_atom>(persist_atom::value, session, handle,
                           std::move(updates), std::move(removed))
              == ok_atom::value);
  }

  error persist_error(const std::string& session,
                      const session_handle_actor& handle, rows updates = {}) {
    return ask_error(persist_atom::value, session, handle, std::move(updates),
                     ids{});
  }

  bool unflushed(const std::string& session) {
    return ask<bool>(unflushed_atom::value, session);
  }

  session_persister_stats stats() {
    return ask<session_persister_stats>(stats_atom::value);
  }

  /// The generation storage holds for `session` (none: nothing).
  std::optional<uint64_t> generation_in_storage(const std::string& session) {
    auto stored = storage::stored_generation(*db, session);
    CAF_REQUIRE(stored.engaged());
    std::optional<uint64_t> result = *stored;
    return result;
  }

  /// What storage holds, read directly.
  caf::expected<session_record> stored(const std::string& session) {
    return storage::load_session(*db, session);
  }

  ids stored_rows(const std::string& session) {
    auto record = stored(session);
    CAF_REQUIRE(record.engaged());
    ids result;
    for (const auto& update : record->updates)
      result.push_back(update.id);
    return result;
  }

  std::string stored_blob(const std::string& session) {
    auto record = stored(session);
    CAF_REQUIRE(record.engaged());
    return record->blob;
  }

  static bool answered(scoped_actor& who) {
    return !who->mailbox().empty();
  }

  /// Runs every actor but `held` until only it has work left: what reaches
  /// it meanwhile waits in its mailbox, as behind a long write.
  void run_all_but(const session_io_actor& held) {
    auto* raw = actor_cast<abstract_actor*>(held);
    sched.run_jobs_filtered([raw](resumable* job) {
      return dynamic_cast<abstract_actor*>(job) != raw;
    });
  }

  /// Session s: `first` persists b1/u1 with its snapshot and `self` b2/u2,
  /// the second reaching the persister before the writer, having written
  /// and answered the first, reports that it is idle (the report is sent,
  /// not yet handled).
  void persist_again_before_the_idle_report(scoped_actor& first) {
    auto h = spawn_handle("b");
    register_handle("s", h);
    auto solo = [&](scoped_actor& who, const std::string& blob,
                    const std::string& id) {
      who->request(persister, infinite, persist_atom::value, std::string{"s"},
                   h, session_snapshot{blob}, rows{row(id)}, ids{});
    };
    solo(first, "b1", "u1");
    // persister -> writer -> I/O actor: the write's answer waits at the
    // writer.
    sched.run_once();
    sched.run_once();
    sched.run_once();
    CAF_REQUIRE(!answered(first));
    solo(self, "b2", "u2");
    sched.run_once(); // the writer answers the first and reports idle
    CAF_REQUIRE(answered(first));
  }

  /// Writes (or with `deltas`, replica deltas) of a, b then c, d reach the
  /// first I/O actor as two groups, each written and its sync asked for,
  /// while its syncer has not run yet.
  void write_two_groups_before_the_syncer_runs(bool deltas = false) {
    auto io = actor_cast<session_replica_io_actor>(service.io.front());
    auto* raw = actor_cast<abstract_actor*>(io);
    auto run_io_alone = [&] {
      sched.run_jobs_filtered([raw](resumable* job) {
        return dynamic_cast<abstract_actor*>(job) == raw;
      });
    };
    for (auto pair : {std::pair{"a", "b"}, std::pair{"c", "d"}}) {
      for (std::string session : {pair.first, pair.second}) {
        if (deltas) {
          session_delta delta;
          delta.session = session;
          delta.ballot = 7;
          delta.generation = 1;
          delta.blob = "blob " + session;
          delta.updates = {row("u" + session)};
          self->request(io, infinite, replica_atom::value, write_atom::value,
                        std::move(delta));
        } else {
          self->request(io, infinite, write_atom::value,
                        storage::session_write{session, "blob " + session,
                                               {row("u" + session)}, {}, 0});
        }
      }
      run_io_alone();
    }
    CAF_REQUIRE(!answered(self));
  }

  /// Writes of a and b reach the first I/O actor as one group (its first),
  /// which it writes and hands to its syncer, and nothing else runs.
  void write_a_group_of_a_and_b() {
    auto io = first_io();
    for (std::string session : {"a", "b"})
      self->request(io, infinite, write_atom::value,
                    storage::session_write{session, "blob " + session,
                                           {row("u" + session)}, {}, 0});
    auto* raw = actor_cast<abstract_actor*>(io);
    sched.run_jobs_filtered([raw](resumable* job) {
      return dynamic_cast<abstract_actor*>(job) == raw;
    });
  }

  /// Writes of a and b as the first I/O actor's first group, synced and
  /// answered (ok, or storage_failed with `sync_fails`: the fault is
  /// cleared after the sync); returns that I/O actor's syncer, for requests
  /// sent to it directly after the sync that covered group 1.
  actor syncer_after_a_synced_group(bool sync_fails = false) {
    write_a_group_of_a_and_b();
    // The group waits at the syncer: it alone has work.
    auto syncer = actor_cast<actor>(&sched.next_job<abstract_actor>());
    CAF_REQUIRE(actor_cast<abstract_actor*>(syncer)
                != actor_cast<abstract_actor*>(first_io()));
    faults->wal_sync = sync_fails;
    sched.run();
    faults->clear();
    for (int i = 0; i < 2; ++i) {
      if (sync_fails)
        CAF_REQUIRE_EQUAL(code_of(next_error(self)),
                          code(errc::storage_failed));
      else
        CAF_REQUIRE(next_reply<ok_atom>(sys, self) == ok_atom::value);
    }
    return syncer;
  }

  /// Writes of a and b reach the first I/O actor as one group, which it
  /// writes and hands to its syncer; `reader`'s load of a reaches the I/O
  /// actor next, and the syncer syncs the group and answers before the I/O
  /// actor reads the load: the load's own request for the group will reach
  /// the syncer after the sync that covered it.
  void sync_a_group_before_a_load_of_it(scoped_actor& reader) {
    auto io = first_io();
    write_a_group_of_a_and_b();
    reader->request(io, infinite, load_atom::value, std::string{"a"});
    run_all_but(io);
    CAF_REQUIRE(answered(self));
    CAF_REQUIRE(!answered(reader));
  }

  /// Session `session`'s delta number `base_seq + 1` under `ballot`, made
  /// on the version `base_ballot`.`base_seq` (0.0: nothing stored), with
  /// blob "blob <base_seq + 1>".
  static session_delta replica_delta(const std::string& session,
                                     uint64_t ballot, uint64_t base_ballot,
                                     uint64_t base_seq) {
    session_delta delta;
    delta.session = session;
    delta.ballot = ballot;
    delta.generation = 1;
    delta.base_ballot = base_seq == 0 ? 0 : base_ballot;
    delta.base_seq = base_seq;
    delta.blob = "blob " + std::to_string(base_seq + 1);
    delta.updates = {row("u" + std::to_string(base_seq + 1))};
    return delta;
  }

  /// Eight sessions' writes meet at one I/O actor as one group while
  /// `fault` is on: each fails, each session is failed and unflushed, and
  /// a `flushall` writes every one of them.
  void fail_one_group_then_retry(std::atomic<bool>& fault) {
    session_persister_options options;
    options.io_workers = 1;
    start(options);
    constexpr int n = 8;
    auto handles = sessions_with_handles(n);
    for (int i = 0; i < n; ++i)
      send_persist(self, "s" + std::to_string(i), handles[i],
                   {row("u" + std::to_string(i))});
    run_all_but(first_io());
    fault = true;
    sched.run();
    faults->clear();
    for (int i = 0; i < n; ++i)
      CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::storage_failed));
    auto failed = stats();
    CAF_CHECK_EQUAL(failed.failed_sessions, n);
    CAF_CHECK_EQUAL(failed.groups, 1u);
    for (int i = 0; i < n; ++i)
      CAF_CHECK(unflushed("s" + std::to_string(i)));
    CAF_CHECK_EQUAL(ask<uint64_t>(flush_all_atom::value, timespan{5s}), 0u);
    for (int i = 0; i < n; ++i) {
      CAF_CHECK(!unflushed("s" + std::to_string(i)));
      CAF_CHECK_EQUAL(stored_rows("s" + std::to_string(i)),
                      (ids{"u" + std::to_string(i)}));
    }
    CAF_CHECK_EQUAL(stats().failed_sessions, 0u);
  }

  /// Registers a handle for each of `n` sessions s0, s1, ... (so their
  /// stored generations are known) and answers the handles.
  std::vector<session_handle_actor> sessions_with_handles(int n) {
    std::vector<session_handle_actor> result;
    for (int i = 0; i < n; ++i) {
      result.push_back(spawn_handle("blob " + std::to_string(i)));
      register_handle("s" + std::to_string(i), result.back());
    }
    return result;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(session_persister_tests, persister_fixture)

// -- coalescing: many persists, one write, the newest state last --------------

CAF_TEST(queued persists coalesce into one write that lands the newest state) {
  start();
  auto h = spawn_handle("v0");
  register_handle("s", h);
  state_of(h).holding = true;
  scoped_actor first{sys};
  send_persist(first, "s", h, {row("u0", 0)});
  sched.run();
  // The first write waits for its snapshot: K further persists queue.
  constexpr int K = 20;
  for (int i = 1; i < K; ++i) {
    set_blob(h, "v" + std::to_string(i));
    fire_persist("s", h, {row("u" + std::to_string(i), i)});
  }
  set_blob(h, "v" + std::to_string(K));
  send_persist(self, "s", h, {row("u" + std::to_string(K), K)});
  sched.run();
  auto during = stats();
  CAF_CHECK_EQUAL(during.snapshot_requests, 0u); // reported when writes end
  CAF_CHECK_EQUAL(during.writes, 0u);
  CAF_CHECK_EQUAL(during.queued_requests, K + 1u);
  CAF_CHECK_EQUAL(state_of(h).held.size(), 1u); // no second write started
  release_held(h);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, first) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  auto after = stats();
  CAF_CHECK_EQUAL(after.writes, 2u);
  CAF_CHECK_EQUAL(after.snapshot_requests, 2u);
  CAF_CHECK_EQUAL(after.rows_written, K + 1u); // every row once
  CAF_CHECK_EQUAL(state_of(h).served,
                  (ids{"v0", "v" + std::to_string(K)}));
  CAF_CHECK_EQUAL(stored_blob("s"), "v" + std::to_string(K));
  CAF_CHECK_EQUAL(stored_rows("s").size(), K + 1u);
  // The idle writer went away; a later persist starts a new one.
  CAF_CHECK_EQUAL(after.active_writers, 0u);
  CAF_CHECK_EQUAL(after.queued_requests, 0u);
  state_of(h).holding = true;
  send_persist(first, "s", h, {row("late", K + 1)});
  sched.run();
  CAF_CHECK_EQUAL(stats().active_writers, 1u);
  release_held(h);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, first) == ok_atom::value);
  CAF_CHECK_EQUAL(stats().active_writers, 0u);
  CAF_CHECK_EQUAL(stored_rows("s").size(), K + 2u);
}

// -- removals -----------------------------------------------------------------

CAF_TEST(a removal cancels a queued row and is passed on to storage) {
  start();
  auto h = spawn_handle("b");
  persist("s", h, {row("old", 1)});
  state_of(h).holding = true;
  scoped_actor first{sys};
  send_persist(first, "s", h, {row("u0", 2)});
  sched.run();
  fire_persist("s", h, {row("doomed", 3)});
  send_persist(self, "s", h, {}, {"doomed", "old"});
  sched.run();
  release_held(h);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, first) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0"}));
  auto counters = stats();
  CAF_CHECK_EQUAL(counters.rows_written, 2u); // old and u0, never doomed
  CAF_CHECK_EQUAL(counters.rows_removed, 2u); // doomed and old passed on
}

// -- deletes ------------------------------------------------------------------

CAF_TEST(a delete drops queued persists waits for the running write and refuses later ones) {
  start();
  auto h = spawn_handle("v1");
  register_handle("s", h);
  state_of(h).holding = true;
  scoped_actor running{sys};
  scoped_actor queued{sys};
  scoped_actor deleting{sys};
  send_persist(running, "s", h, {row("u0")});
  sched.run();
  send_persist(queued, "s", h, {row("u1")});
  deleting->request(persister, infinite, delete_atom::value, std::string{"s"});
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(queued)), code(errc::session_deleted));
  CAF_CHECK(!answered(deleting)); // waits for the running write
  release_held(h);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, running) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, deleting) == ok_atom::value);
  CAF_CHECK(!stored("s"));
  CAF_CHECK(ask<bool>(is_deleted_atom::value, std::string{"s"}, h));
  CAF_CHECK_EQUAL(code_of(persist_error("s", h, {row("u2")})),
                  code(errc::session_deleted));
  CAF_CHECK(!stored("s"));
  // A session re-created under the same id afterwards persists normally.
  auto fresh = spawn_handle("fresh");
  register_handle("s", fresh);
  CAF_CHECK(!ask<bool>(is_deleted_atom::value, std::string{"s"}, fresh));
  persist("s", fresh, {row("u3")});
  CAF_CHECK_EQUAL(stored_blob("s"), "fresh");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u3"}));
  // A delete clears the failed state of the session.
  faults->wal_append = true;
  CAF_CHECK(persist_error("t", fresh, {row("x")}));
  faults->clear();
  CAF_CHECK(unflushed("t"));
  CAF_CHECK(ask<ok_atom>(delete_atom::value, std::string{"t"})
            == ok_atom::value);
  CAF_CHECK(!unflushed("t"));
  CAF_CHECK_EQUAL(stats().failed_sessions, 0u);
}

CAF_TEST(a persist of a session re-created during its delete is written after the delete) {
  start();
  auto old = spawn_handle("old");
  register_handle("s", old);
  scoped_actor running{sys};
  scoped_actor deleting{sys};
  hold_a_write(running, "s", old, {row("u0")});
  deleting->request(persister, infinite, delete_atom::value, std::string{"s"});
  sched.run();
  auto fresh = spawn_handle("recreated");
  register_handle("s", fresh);
  send_persist(self, "s", fresh, {row("u1")});
  sched.run();
  CAF_CHECK(!answered(deleting));
  release_held(old);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, running) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, deleting) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value); // not deleted
  CAF_CHECK_EQUAL(stored_blob("s"), "recreated");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u1"}));
}

CAF_TEST(a live unregistered handle named by a delete is tombstoned) {
  start();
  auto h = spawn_handle("b");
  CAF_CHECK(!ask<bool>(is_deleted_atom::value, std::string{"s"}, h));
  CAF_CHECK(ask<ok_atom>(delete_atom::value, std::string{"s"}, h)
            == ok_atom::value);
  CAF_CHECK(ask<bool>(is_deleted_atom::value, std::string{"s"}, h));
  CAF_CHECK_EQUAL(code_of(persist_error("s", h, {row("u0")})),
                  code(errc::session_deleted));
  CAF_CHECK(!stored("s"));
  CAF_CHECK_EQUAL(stats().writes, 0u);
}

// -- superseded and dead handles ----------------------------------------------

CAF_TEST(a superseded handle writes the newest live state or is refused) {
  start();
  auto old = spawn_handle("evicted copy");
  register_handle("s", old);
  auto newer = spawn_handle("reloaded");
  register_handle("s", newer);
  persist("s", old, {row("u0")});
  CAF_CHECK_EQUAL(stored_blob("s"), "reloaded");
  CAF_CHECK(state_of(old).served.empty());
  anon_send_exit(newer, exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(code_of(persist_error("s", old, {row("u1")})),
                  code(errc::handle_superseded));
  CAF_CHECK_EQUAL(stats().writes, 1u);
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0"}));
}

CAF_TEST(a persist through a dead handle is refused and no other handle writes for it) {
  start();
  auto live = spawn_handle("live state");
  register_handle("s", live);
  auto unregistered = spawn_handle("stray");
  anon_send_exit(unregistered, exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(code_of(persist_error("s", unregistered, {row("u0")})),
                  code(errc::handle_gone));
  CAF_CHECK(!stored("s"));
  persist("s", live, {row("u1")});
  anon_send_exit(live, exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(code_of(persist_error("s", live, {row("u2")})),
                  code(errc::handle_gone));
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u1"}));
}

CAF_TEST(registering after the old handle died writes from the new one and never from the old) {
  start();
  auto old = spawn_handle("old");
  CAF_CHECK_EQUAL(register_handle("s", old), 0u);
  anon_send_exit(old, exit_reason::kill);
  sched.run();
  // Nothing of s is left to remember: its generations start again from
  // what storage holds (nothing).
  auto fresh = spawn_handle("fresh");
  auto generation = register_handle("s", fresh);
  persist("s", fresh, {row("u0")});
  CAF_CHECK_EQUAL(stored_blob("s"), "fresh");
  CAF_CHECK(generation_in_storage("s") == std::optional<uint64_t>{generation});
  CAF_CHECK_EQUAL(code_of(persist_error("s", old, {row("u1")})),
                  code(errc::handle_gone));
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0"}));
}

// -- where a queued write comes from, decided again when it starts -----------

CAF_TEST(a handle superseded while its persist is queued is written from the newest one) {
  start();
  auto old = spawn_handle("old state");
  register_handle("s", old);
  scoped_actor running{sys};
  hold_a_write(running, "s", old, {row("u0")});
  send_persist(self, "s", old, {row("u1")});
  sched.run();
  auto fresh = spawn_handle("reloaded");
  register_handle("s", fresh);
  release_held(old);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, running) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(state_of(old).served, (ids{"old state"})); // asked once
  CAF_CHECK_EQUAL(stored_blob("s"), "reloaded");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0", "u1"}));
}

CAF_TEST(the newest source of merged persists is the one written) {
  start();
  auto first = spawn_handle("first");
  auto second = spawn_handle("second");
  auto third = spawn_handle("third");
  scoped_actor running{sys};
  hold_a_write(running, "s", first, {row("u0")});
  fire_persist("s", second, {row("u1")});
  send_persist(self, "s", third, {row("u2")});
  sched.run();
  release_held(first);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, running) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(state_of(second).served.empty());
  CAF_CHECK_EQUAL(stored_blob("s"), "third");
}

// -- order of one session's requests -------------------------------------------

CAF_TEST(a delete that is the first touch of a session is not overtaken by a later persist) {
  start();
  auto fresh = spawn_handle("fresh");
  scoped_actor deleting{sys};
  scoped_actor registering{sys};
  deleting->request(persister, infinite, delete_atom::value, std::string{"s"});
  registering->request(persister, infinite, register_atom::value,
                       std::string{"s"}, fresh);
  send_persist(self, "s", fresh, {row("x")});
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, deleting) == ok_atom::value);
  CAF_CHECK_EQUAL(next_reply<uint64_t>(sys, registering), 1u);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stored_blob("s"), "fresh");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"x"}));
}

CAF_TEST(a row removed and then written again in one merged write ends written) {
  start();
  auto h = spawn_handle("b");
  persist("s", h, {row("x", 1)});
  scoped_actor running{sys};
  scoped_actor removing{sys};
  hold_a_write(running, "s", h, {row("u0", 2)});
  send_persist(removing, "s", h, {}, {"x"});
  auto again = session_update{"x", 3, "note", "written again"};
  send_persist(self, "s", h, {again});
  sched.run();
  release_held(h);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, running) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, removing) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  auto record = stored("s");
  CAF_REQUIRE(record.engaged());
  CAF_REQUIRE_EQUAL(record->updates.size(), 2u);
  CAF_CHECK(record->updates[1] == again);
}

// -- handles registered twice, retired, or dead --------------------------------

CAF_TEST(a handle registered again writes with its newest generation) {
  start();
  auto h = spawn_handle("h state");
  auto g = spawn_handle("g state");
  CAF_CHECK_EQUAL(register_handle("s", h), 0u);
  CAF_CHECK_EQUAL(register_handle("s", g), 1u);
  persist("s", g, {row("u0")});
  CAF_CHECK_EQUAL(register_handle("s", h), 2u);
  persist("s", h, {row("u1")});
  CAF_CHECK_EQUAL(stored_blob("s"), "h state");
  CAF_CHECK(generation_in_storage("s") == std::optional<uint64_t>{2});
  CAF_CHECK(!unflushed("s"));
}

CAF_TEST(a handle a delete retired stays deleted after it died and newer handles registered) {
  start();
  auto a = spawn_handle("a");
  CAF_CHECK_EQUAL(register_handle("s", a), 0u);
  CAF_CHECK(ask<ok_atom>(delete_atom::value, std::string{"s"})
            == ok_atom::value);
  auto b = spawn_handle("b");
  CAF_CHECK_EQUAL(register_handle("s", b), 1u);
  anon_send_exit(a, exit_reason::kill);
  sched.run();
  auto c = spawn_handle("c");
  CAF_CHECK_EQUAL(register_handle("s", c), 2u);
  CAF_CHECK_EQUAL(code_of(persist_error("s", a, {row("x")})),
                  code(errc::session_deleted));
  CAF_CHECK(ask<bool>(is_deleted_atom::value, std::string{"s"}, a));
  CAF_CHECK(!stored("s"));
  // Registering a retired handle again does not bring it back.
  auto d = spawn_handle("d");
  register_handle("s", d);
  CAF_CHECK(ask<ok_atom>(delete_atom::value, std::string{"s"})
            == ok_atom::value);
  CAF_CHECK_EQUAL(code_of(ask_error(register_atom::value, std::string{"s"}, d)),
                  code(errc::session_deleted));
}

CAF_TEST(the kept rows of a failed write survive a refused persist and are retried from a new handle) {
  start();
  auto h1 = spawn_handle("b1");
  register_handle("s", h1);
  faults->wal_append = true;
  CAF_CHECK_EQUAL(code_of(persist_error("s", h1, {row("r", 1)})),
                  code(errc::storage_failed));
  faults->clear();
  anon_send_exit(h1, exit_reason::kill);
  sched.run();
  // A handle that is already dead, never seen before.
  auto hx = spawn_handle("x");
  anon_send_exit(hx, exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(code_of(persist_error("s", hx, {row("x", 2)})),
                  code(errc::handle_gone));
  CAF_CHECK(unflushed("s"));
  auto h2 = spawn_handle("b2");
  register_handle("s", h2);
  CAF_CHECK_EQUAL(ask<uint64_t>(flush_all_atom::value, timespan{5s}), 0u);
  CAF_CHECK_EQUAL(stored_blob("s"), "b2");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"r"}));
  CAF_CHECK(!unflushed("s"));
}

CAF_TEST(flush all counts a failed session whose handles are all gone) {
  start();
  auto h = spawn_handle("b");
  register_handle("s", h);
  faults->wal_append = true;
  CAF_CHECK(persist_error("s", h, {row("r")}));
  faults->clear();
  anon_send_exit(h, exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(ask<uint64_t>(flush_all_atom::value, timespan{5s}), 1u);
  CAF_CHECK(unflushed("s")); // the rows stay kept for a handle to come
  CAF_CHECK_EQUAL(code_of(ask_error(wait_idle_atom::value, std::string{"s"})),
                  code(errc::handle_gone));
}

// -- the registry's bound ---------------------------------------------------------

CAF_TEST(a deleted session leaves a tombstone only while a handle it retired is alive) {
  start();
  auto h = spawn_handle("b");
  register_handle("s", h);
  persist("s", h, {row("u0")});
  CAF_CHECK(ask<ok_atom>(delete_atom::value, std::string{"s"})
            == ok_atom::value);
  CAF_CHECK(generation_in_storage("s").has_value()); // fences h
  anon_send_exit(h, exit_reason::kill);
  sched.run();
  CAF_CHECK(!generation_in_storage("s").has_value());
  // With no live handle at the delete, none is written.
  auto stray = spawn_handle("stray");
  persist("t", stray, {row("u1")});
  CAF_CHECK(ask<ok_atom>(delete_atom::value, std::string{"t"})
            == ok_atom::value);
  CAF_CHECK(!generation_in_storage("t").has_value());
  CAF_CHECK(!stored("t"));
}

// -- failed writes and flush all ----------------------------------------------

CAF_TEST(a failed write is tracked and retried by the next write and by flush all) {
  start();
  auto h = spawn_handle("b1");
  faults->wal_append = true;
  auto err = persist_error("s", h, {row("u0", 1)});
  CAF_CHECK_EQUAL(code_of(err), code(errc::storage_failed));
  CAF_CHECK(unflushed("s"));
  CAF_CHECK_EQUAL(stats().failed_sessions, 1u);
  CAF_CHECK_EQUAL(ask<uint64_t>(flush_all_atom::value, timespan{5s}), 1u);
  faults->clear();
  // The next write carries the failed write's row.
  set_blob(h, "b2");
  persist("s", h, {row("u1", 2)});
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0", "u1"}));
  CAF_CHECK(!unflushed("s"));
  // flush_all retries a failed session on its own.
  faults->wal_append = true;
  CAF_CHECK(persist_error("s", h, {row("u2", 3)}));
  faults->clear();
  set_blob(h, "b3");
  CAF_CHECK_EQUAL(ask<uint64_t>(flush_all_atom::value, timespan{5s}), 0u);
  CAF_CHECK(!unflushed("s"));
  CAF_CHECK_EQUAL(stored_blob("s"), "b3");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0", "u1", "u2"}));
  CAF_CHECK_EQUAL(stats().failed_sessions, 0u);
}

CAF_TEST(flush all answers the sessions not written when its limit passes) {
  start();
  auto h = spawn_handle("b");
  state_of(h).holding = true;
  fire_persist("a", h, {row("u0")});
  sched.run();
  self->request(persister, infinite, flush_all_atom::value, timespan{1s});
  sched.run();
  CAF_CHECK(!answered(self));
  advance_time(2s);
  sched.run();
  CAF_CHECK_EQUAL(next_reply<uint64_t>(sys, self), 1u);
  release_held(h);
  sched.run();
  CAF_CHECK_EQUAL(ask<uint64_t>(flush_all_atom::value, timespan{1s}), 0u);
  CAF_CHECK_EQUAL(stored_rows("a"), (ids{"u0"}));
}

// -- wait idle ----------------------------------------------------------------

CAF_TEST(wait idle answers once the queued writes are done and at once when nothing is queued) {
  start();
  CAF_CHECK(ask<ok_atom>(wait_idle_atom::value, std::string{"nothing"})
            == ok_atom::value);
  auto h = spawn_handle("b");
  state_of(h).holding = true;
  fire_persist("s", h, {row("u0")});
  sched.run();
  self->request(persister, infinite, wait_idle_atom::value, std::string{"s"});
  sched.run();
  CAF_CHECK(!answered(self));
  release_held(h);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0"}));
  // A failed last write is retried once.
  faults->wal_append = true;
  CAF_CHECK(persist_error("s", h, {row("u1")}));
  faults->clear();
  CAF_CHECK(ask<ok_atom>(wait_idle_atom::value, std::string{"s"})
            == ok_atom::value);
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0", "u1"}));
  CAF_CHECK(!unflushed("s"));
}

// -- leases -------------------------------------------------------------------

CAF_TEST(exclusive answers a lease after the queued persists and holds later writes until release) {
  start();
  auto h = spawn_handle("b");
  state_of(h).holding = true;
  scoped_actor writer{sys};
  scoped_actor holder{sys};
  send_persist(writer, "s", h, {row("u0")});
  sched.run();
  holder->request(persister, infinite, exclusive_atom::value, std::string{"s"});
  sched.run();
  CAF_CHECK(!answered(holder));
  release_held(h);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, writer) == ok_atom::value);
  auto lease = next_reply<session_lease>(sys, holder);
  send_persist(writer, "s", h, {row("u1")});
  sched.run();
  CAF_CHECK(!answered(writer));
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0"}));
  CAF_CHECK(ask<ok_atom>(release_atom::value, lease) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, writer) == ok_atom::value);
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0", "u1"}));
  CAF_CHECK_EQUAL(code_of(ask_error(release_atom::value, lease)),
                  code(errc::not_found));
}

CAF_TEST(the death of a lease holder releases its lease) {
  start();
  auto h = spawn_handle("b");
  {
    scoped_actor holder{sys};
    holder->request(persister, infinite, exclusive_atom::value,
                    std::string{"s"});
    sched.run();
    next_reply<session_lease>(sys, holder);
    send_persist(self, "s", h, {row("u0")});
    sched.run();
    CAF_CHECK(!answered(self));
  }
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0"}));
}

CAF_TEST(releasing a queued lease answers that one alone and the others are granted in turn) {
  start();
  auto h = spawn_handle("b");
  scoped_actor x{sys};
  scoped_actor y{sys};
  scoped_actor z{sys};
  x->request(persister, infinite, exclusive_atom::value, std::string{"s"});
  sched.run();
  auto held = next_reply<session_lease>(sys, x);
  y->request(persister, infinite, exclusive_atom::value, std::string{"s"});
  sched.run();
  z->request(persister, infinite, exclusive_atom::value, std::string{"s"});
  sched.run();
  // Lease ids are issued in order: z's is two after x's.
  session_lease zs{held.id + 2};
  CAF_CHECK(ask<ok_atom>(release_atom::value, zs) == ok_atom::value);
  CAF_CHECK_EQUAL(code_of(next_error(z)), code(errc::invalid_request));
  CAF_CHECK(!answered(y));
  send_persist(self, "s", h, {row("u0")});
  sched.run();
  CAF_CHECK(ask<ok_atom>(release_atom::value, held) == ok_atom::value);
  auto ys = next_reply<session_lease>(sys, y);
  CAF_CHECK_EQUAL(ys.id, held.id + 1);
  CAF_CHECK(!answered(self));
  CAF_CHECK(ask<ok_atom>(release_atom::value, ys) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0"}));
}

// -- load and unflushed -------------------------------------------------------

CAF_TEST(load and has unflushed are messages and load of an unknown session is not found) {
  start();
  CAF_CHECK_EQUAL(code_of(ask_error(load_atom::value, std::string{"nobody"})),
                  code(errc::not_found));
  CAF_CHECK(!unflushed("s"));
  auto h = spawn_handle("blob");
  state_of(h).holding = true;
  fire_persist("s", h, {row("u1", 5), row("u0", 5)});
  sched.run();
  CAF_CHECK(unflushed("s"));
  release_held(h);
  sched.run();
  CAF_CHECK(!unflushed("s"));
  auto record = ask<session_record>(load_atom::value, std::string{"s"});
  CAF_CHECK_EQUAL(record.blob, "blob");
  CAF_REQUIRE_EQUAL(record.updates.size(), 2u);
  CAF_CHECK(record.updates[0] == row("u0", 5));
  CAF_CHECK(record.updates[1] == row("u1", 5));
}

// -- bad input and bad snapshots ----------------------------------------------

CAF_TEST(bad input gets a clear error and changes nothing) {
  session_persister_options options;
  options.max_update = 8;
  options.max_blob = 16;
  start(options);
  auto h = spawn_handle("fits");
  auto invalid = code(errc::invalid_request);
  CAF_CHECK_EQUAL(code_of(persist_error("", h, {row("u")})), invalid);
  CAF_CHECK_EQUAL(code_of(persist_error(std::string(256, 'x'), h)), invalid);
  CAF_CHECK_EQUAL(code_of(persist_error("s", h, {row("")})), invalid);
  CAF_CHECK_EQUAL(code_of(persist_error(
                    "s", h, {session_update{"u", 1, "k", "nine byte"}})),
                  invalid);
  CAF_CHECK_EQUAL(code_of(persist_error("s", session_handle_actor{})),
                  invalid);
  CAF_CHECK_EQUAL(code_of(ask_error(persist_atom::value, std::string{"s"}, h,
                                    session_snapshot{std::string(17, 'b')},
                                    rows{}, ids{})),
                  invalid);
  CAF_CHECK_EQUAL(code_of(ask_error(register_atom::value, std::string{},
                                    h)),
                  invalid);
  CAF_CHECK(!stored("s"));
  CAF_CHECK(!unflushed("s"));
  auto counters = stats();
  CAF_CHECK_EQUAL(counters.writes, 0u);
  CAF_CHECK_EQUAL(counters.active_writers, 0u);
  // A snapshot over the limit fails its write, tracked as failed.
  set_blob(h, std::string(17, 'b'));
  session_update small{"u", 1, "k", "8 bytes!"};
  CAF_CHECK_EQUAL(code_of(persist_error("s", h, {small})), invalid);
  CAF_CHECK(unflushed("s"));
  CAF_CHECK(!stored("s"));
}

CAF_TEST(a handle that answers something other than a snapshot fails the write) {
  start();
  auto h = actor_cast<session_handle_actor>(sys.spawn(wrong_handle));
  CAF_CHECK_EQUAL(code_of(persist_error("s", h, {row("u")})),
                  code(errc::snapshot_failed));
  CAF_CHECK(!stored("s"));
  CAF_CHECK(unflushed("s"));
}

CAF_TEST(a handle that does not answer within the snapshot timeout fails the write) {
  session_persister_options options;
  options.snapshot_timeout = 2s;
  start(options);
  auto h = spawn_handle("b");
  state_of(h).holding = true;
  send_persist(self, "s", h, {row("u")});
  sched.run();
  CAF_CHECK(!answered(self));
  advance_time(3s);
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::snapshot_failed));
  CAF_CHECK(unflushed("s"));
  CAF_CHECK_EQUAL(stats().failed_sessions, 1u);
  CAF_CHECK(!stored("s"));
  state_of(h).held.clear();
}

// -- stats --------------------------------------------------------------------

CAF_TEST(stats count writers queued requests writes rows failures and snapshots) {
  start();
  auto h = spawn_handle("b");
  persist("s", h, {row("u0"), row("u1")});
  persist("s", h, {}, {"u0"});
  state_of(h).holding = true;
  fire_persist("t", h, {row("x")});
  fire_persist("t", h, {row("y")});
  sched.run();
  auto during = stats();
  CAF_CHECK_EQUAL(during.active_writers, 1u);
  CAF_CHECK_EQUAL(during.queued_requests, 2u);
  CAF_CHECK_EQUAL(during.writes, 2u);
  CAF_CHECK_EQUAL(during.rows_written, 2u);
  CAF_CHECK_EQUAL(during.rows_removed, 1u);
  CAF_CHECK_EQUAL(during.snapshot_requests, 2u);
  faults->wal_append = true;
  release_held(h);
  sched.run();
  faults->clear();
  auto after = stats();
  CAF_CHECK_EQUAL(after.failed_sessions, 1u);
  CAF_CHECK_EQUAL(after.snapshot_requests, 4u);
  CAF_CHECK_EQUAL(after.queued_requests, 0u);
  CAF_CHECK_EQUAL(after.writes, 2u);
}

CAF_TEST(the queued requests gauge drops the persists a delete dropped) {
  start();
  auto h = spawn_handle("b");
  register_handle("s", h);
  scoped_actor running{sys};
  scoped_actor queued{sys};
  hold_a_write(running, "s", h, {row("u0")});
  send_persist(queued, "s", h, {row("u1")});
  sched.run();
  CAF_CHECK_EQUAL(stats().queued_requests, 2u);
  self->request(persister, infinite, delete_atom::value, std::string{"s"});
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(queued)), code(errc::session_deleted));
  CAF_CHECK_EQUAL(stats().queued_requests, 1u);
  release_held(h);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, running) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stats().queued_requests, 0u);
}

// -- messages per persist and retirement ------------------------------------------

CAF_TEST(a solo persist carrying its snapshot is answered after five messages) {
  start();
  auto h = spawn_handle("b0");
  register_handle("s", h);
  persist("s", h, {row("u0")}); // the session is known, its writer idle
  auto asked = state_of(h).served.size();
  self->request(persister, infinite, persist_atom::value, std::string{"s"}, h,
                session_snapshot{"b1"}, rows{row("u1")}, ids{});
  // Each run is one message handled; the answer to `self` is one more.
  int messages = 1;
  while (!answered(self)) {
    CAF_REQUIRE(sched.try_run_once());
    ++messages;
  }
  CAF_CHECK_LESS_OR_EQUAL(messages, 5);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  sched.run();
  CAF_CHECK_EQUAL(state_of(h).served.size(), asked); // the handle was not asked
  CAF_CHECK_EQUAL(stored_blob("s"), "b1");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0", "u1"}));
  CAF_CHECK_EQUAL(stats().active_writers, 0u);
}

CAF_TEST(a writer that reports idle while a persist is on its way does not retire) {
  session_persister_options options = two_io_actors();
  options.idle_writers = 0; // every idle writer retires at once
  start(options);
  scoped_actor first{sys};
  persist_again_before_the_idle_report(first);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, first) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stored_blob("s"), "b2");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u1", "u2"}));
}

CAF_TEST(a writer that reports idle while a persist is on its way is not taken for idle) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  scoped_actor first{sys};
  persist_again_before_the_idle_report(first);
  // The persister takes the second persist, then the report; the second's
  // write waits at the I/O actor: the writer has work.
  run_all_but(first_io());
  CAF_REQUIRE(!answered(self));
  scoped_actor asker{sys};
  asker->request(persister, infinite, unflushed_atom::value, std::string{"s"});
  run_all_but(first_io());
  CAF_CHECK_EQUAL(next_reply<bool>(sys, asker), true);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, first) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u1", "u2"}));
  auto after = stats();
  CAF_CHECK_EQUAL(after.active_writers, 0u);
  CAF_CHECK_EQUAL(after.idle_writers, 1u);
  CAF_CHECK(!unflushed("s"));
}

CAF_TEST(idle writers stay warm up to the limit and the rest retire) {
  session_persister_options options = two_io_actors();
  options.idle_writers = 2;
  start(options);
  auto handles = sessions_with_handles(4);
  sched.run();
  auto running = sys.registry().running();
  for (int i = 0; i < 3; ++i)
    persist("s" + std::to_string(i), handles[i], {row("u" + std::to_string(i))});
  auto after = stats();
  CAF_CHECK_EQUAL(after.active_writers, 0u);
  CAF_CHECK_EQUAL(after.idle_writers, 2u);
  CAF_CHECK_EQUAL(sys.registry().running(), running + 2);
  // A warm writer takes its session's next persist: no writer is added.
  persist("s1", handles[1], {row("v1")});
  CAF_CHECK_EQUAL(sys.registry().running(), running + 2);
  CAF_CHECK_EQUAL(stats().idle_writers, 2u);
  // A persist on its way to a warm writer makes it busy until written.
  state_of(handles[2]).holding = true;
  send_persist(self, "s2", handles[2], {row("v2")});
  sched.run();
  CAF_CHECK(unflushed("s2"));
  auto during = stats();
  CAF_CHECK_EQUAL(during.active_writers, 1u);
  CAF_CHECK_EQUAL(during.idle_writers, 1u);
  release_held(handles[2]);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(!unflushed("s2"));
  CAF_CHECK_EQUAL(stored_rows("s2"), (ids{"u2", "v2"}));
  CAF_CHECK_EQUAL(stored_rows("s1"), (ids{"u1", "v1"}));
  CAF_CHECK_EQUAL(sys.registry().running(), running + 2);
}

CAF_TEST(an idle writer killed through its address is dropped and the next persist starts a new one) {
  // The handle sees its writer's address (the sender of the snapshot
  // request) and kills it: exit_reason::kill, which CAF 0.17 passes along
  // every link, must not reach the persister.
  start();
  auto h = spawn_handle("b1");
  register_handle("s", h);
  persist("s", h, {row("u1")});
  CAF_REQUIRE_EQUAL(state_of(h).askers.size(), 1u);
  CAF_REQUIRE_EQUAL(stats().idle_writers, 1u);
  auto writer = actor_cast<actor>(state_of(h).askers.front());
  anon_send_exit(writer, exit_reason::kill);
  sched.run();
  auto after = stats();
  CAF_CHECK_EQUAL(after.idle_writers, 0u);
  CAF_CHECK_EQUAL(after.active_writers, 0u);
  set_blob(h, "b2");
  persist("s", h, {row("u2")});
  CAF_CHECK_EQUAL(stored_blob("s"), "b2");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u1", "u2"}));
  CAF_REQUIRE_EQUAL(state_of(h).askers.size(), 2u);
  CAF_CHECK_NOT_EQUAL(state_of(h).askers.back(), state_of(h).askers.front());
}

CAF_TEST(a writer registered as a session handle stays watched as a handle after it retires) {
  // A client can learn a writer's address and register it as a handle:
  // retiring the writer must not drop the persister's watch of that handle
  // (CAF 0.17's demonitor drops every monitor of an address), whose death
  // ends the tombstone of the session it was registered for.
  auto options = two_io_actors();
  options.idle_writers = 0; // a writer retires once idle
  start(options);
  auto h = spawn_handle("b");
  register_handle("s", h);
  hold_a_write(self, "s", h, {row("u1")});
  CAF_REQUIRE_EQUAL(state_of(h).askers.size(), 1u);
  auto writer = actor_cast<session_handle_actor>(state_of(h).askers.front());
  register_handle("t", writer);
  CAF_REQUIRE(ask<ok_atom>(delete_atom::value, std::string{"t"})
              == ok_atom::value);
  CAF_REQUIRE(generation_in_storage("t").has_value()); // fences the writer
  release_held(h);
  sched.run(); // s's write lands, its writer goes idle and retires
  CAF_REQUIRE(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_REQUIRE_EQUAL(stats().active_writers + stats().idle_writers, 0u);
  CAF_CHECK(!generation_in_storage("t").has_value());
}

CAF_TEST(the writer idle longest is the one that retires) {
  session_persister_options options = two_io_actors();
  options.idle_writers = 2;
  start(options);
  auto handles = sessions_with_handles(4);
  auto name = [](int i) { return "s" + std::to_string(i); };
  // s0 retires when s2 goes idle; s1 writes again, so s2 is idle longest
  // when s3 goes idle, and retires.
  for (int i : {0, 1, 2, 1, 3})
    persist(name(i), handles[i], {row("u" + std::to_string(i))});
  CAF_CHECK_EQUAL(stats().idle_writers, 2u);
  // Whether a session's writer is warm shows while its write waits for the
  // handle's snapshot: a warm one leaves one writer idle, a new one two.
  auto idle_during_a_held_write = [&](int i) {
    state_of(handles[i]).holding = true;
    send_persist(self, name(i), handles[i], {row("v" + std::to_string(i))});
    sched.run();
    auto during = stats();
    CAF_CHECK_EQUAL(during.active_writers, 1u);
    release_held(handles[i]);
    state_of(handles[i]).holding = false;
    sched.run();
    CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
    return during.idle_writers;
  };
  CAF_CHECK_EQUAL(idle_during_a_held_write(1), 1u); // kept
  CAF_CHECK_EQUAL(idle_during_a_held_write(3), 1u); // kept
  CAF_CHECK_EQUAL(idle_during_a_held_write(2), 2u); // retired
}

// -- stopping ----------------------------------------------------------------

CAF_TEST(requests parked when the persister stops are answered) {
  start();
  auto h = spawn_handle("b");
  state_of(h).holding = true;
  scoped_actor waiting{sys};
  send_persist(waiting, "s", h, {row("u0")});
  self->request(persister, infinite, flush_all_atom::value, timespan{1h});
  sched.run();
  anon_send_exit(persister, exit_reason::user_shutdown);
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(waiting)),
                  code(errc::stopped_before_answer));
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::stopped_before_answer));
  state_of(h).held.clear();
}

// -- store-side fencing -------------------------------------------------------

CAF_TEST(a forced stale write is refused in storage) {
  start();
  CAF_REQUIRE(!storage::save_session(*db, {"s", "gen 5", {row("u0")}, {}, 5}));
  storage::session_write stale{"s", "stale", {row("u1")}, {"u0"}, 4};
  self->request(first_io(), infinite, write_atom::value, stale);
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::stale_generation));
  CAF_CHECK_EQUAL(stored_blob("s"), "gen 5");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0"}));
}

CAF_TEST(a delete then a stale write is refused) {
  start();
  auto h = spawn_handle("before");
  auto generation = register_handle("s", h);
  persist("s", h, {row("u0")});
  CAF_CHECK(ask<ok_atom>(delete_atom::value, std::string{"s"})
            == ok_atom::value);
  // A write from before the delete, reaching storage after it.
  storage::session_write stale{"s", "before", {row("u1")}, {}, generation};
  self->request(first_io(), infinite, write_atom::value, stale);
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::stale_generation));
  CAF_CHECK(!stored("s"));
  // The session re-created afterwards writes.
  auto fresh = spawn_handle("fresh");
  CAF_CHECK_GREATER(register_handle("s", fresh), generation);
  persist("s", fresh, {row("u2")});
  CAF_CHECK_EQUAL(stored_blob("s"), "fresh");
}

CAF_TEST(a restart then a register then a write succeeds) {
  // The first run: three loads of the session, the last one written.
  start();
  session_handle_actor last;
  for (auto blob : {"first", "second", "old run"}) {
    last = spawn_handle(blob);
    register_handle("s", last);
  }
  persist("s", last, {row("u0")});
  auto before = generation_in_storage("s");
  CAF_REQUIRE(before.has_value());
  restart();
  // The new run's first register continues above what storage holds, so a
  // handle of the old run (were one still alive) would be fenced out.
  auto h = spawn_handle("new run");
  CAF_CHECK_EQUAL(register_handle("s", h), *before + 1);
  persist("s", h, {row("u1")});
  CAF_CHECK_EQUAL(stored_blob("s"), "new run");
  CAF_CHECK_EQUAL(stored_rows("s"), (ids{"u0", "u1"}));
  CAF_CHECK(generation_in_storage("s") == std::optional<uint64_t>{*before + 1});
  // A handle never registered writes with the stored generation, and a
  // delete's tombstone lands above it.
  CAF_REQUIRE(!storage::save_session(*db, {"t", "old run", {}, {}, 9}));
  auto stray = spawn_handle("stray");
  persist("t", stray, {row("u2")});
  CAF_CHECK_EQUAL(stored_blob("t"), "stray");
  CAF_CHECK(ask<ok_atom>(delete_atom::value, std::string{"t"}, stray)
            == ok_atom::value);
  CAF_CHECK(generation_in_storage("t") == std::optional<uint64_t>{10});
}

// -- group commit -------------------------------------------------------------

CAF_TEST(writes of many sessions queued behind a busy I/O stage go out as one group) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  constexpr int n = 12;
  auto handles = sessions_with_handles(n);
  auto before = stats();
  auto syncs = faults->wal_syncs.load();
  for (int i = 0; i < n; ++i)
    send_persist(self, "s" + std::to_string(i), handles[i],
                 {row("u" + std::to_string(i))});
  run_all_but(first_io());
  CAF_CHECK(!answered(self)); // every write waits at the I/O actor
  sched.run();
  for (int i = 0; i < n; ++i)
    CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  auto after = stats();
  CAF_CHECK_EQUAL(after.writes, n);
  CAF_CHECK_EQUAL(after.groups - before.groups, 1u);
  CAF_CHECK_EQUAL(after.fsyncs - before.fsyncs, 1u);
  CAF_CHECK_EQUAL(faults->wal_syncs.load() - syncs, 1);
  for (int i = 0; i < n; ++i)
    CAF_CHECK_EQUAL(stored_blob("s" + std::to_string(i)),
                    "blob " + std::to_string(i));
}

CAF_TEST(a failure of one group fails every session in it and each is retried) {
  fail_one_group_then_retry(faults->wal_append);
}

CAF_TEST(a failed WAL sync after a group fails every write in it and each is retried) {
  // The group is written without fsync, then synced by the I/O actor's
  // syncer: its writes are answered by the sync, and the sync fails.
  fail_one_group_then_retry(faults->wal_sync);
}

CAF_TEST(a load behind a group waiting for its WAL sync answers nothing that is not durable) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto handles = sessions_with_handles(2);
  send_persist(self, "s0", handles[0], {row("u0")});
  send_persist(self, "s1", handles[1], {row("u1")});
  run_all_but(first_io());
  scoped_actor reader{sys};
  reader->request(persister, infinite, load_atom::value, std::string{"s0"});
  run_all_but(first_io());
  // The load reaches the I/O actor behind the two writes: it commits them
  // as one group and syncs before it reads; the sync fails.
  faults->wal_sync = true;
  sched.run();
  faults->clear();
  CAF_CHECK_EQUAL(code_of(next_error(reader)), code(errc::storage_failed));
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::storage_failed));
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::storage_failed));
  CAF_CHECK_EQUAL(ask<uint64_t>(flush_all_atom::value, timespan{5s}), 0u);
  auto record = ask<session_record>(load_atom::value, std::string{"s0"});
  CAF_CHECK_EQUAL(record.blob, "blob 0");
}

CAF_TEST(a read asking for a group already synced costs no second sync) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto syncs = faults->wal_syncs.load();
  scoped_actor reader{sys};
  sync_a_group_before_a_load_of_it(reader);
  CAF_REQUIRE_EQUAL(faults->wal_syncs.load() - syncs, 1);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(next_reply<session_record>(sys, reader).blob, "blob a");
  CAF_CHECK_EQUAL(faults->wal_syncs.load() - syncs, 1);
}

CAF_TEST(a request for a group whose sync failed gets that failure though the disk syncs again) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  // The load's request for the group comes after the group's sync failed,
  // when the disk syncs again (the fault cleared): what the failed sync
  // covered may be lost, and the load must not vouch for it.
  scoped_actor reader{sys};
  faults->wal_sync = true;
  sync_a_group_before_a_load_of_it(reader);
  faults->clear();
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::storage_failed));
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::storage_failed));
  CAF_CHECK_EQUAL(code_of(next_error(reader)), code(errc::storage_failed));
}

CAF_TEST(a request answered from a finished sync leaves none waiting before it unsynced) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto syncer = syncer_after_a_synced_group();
  // Out of group order (the I/O actor never sends so): a request for a
  // group no sync covered yet, parked, then one for group 1, answered from
  // the sync that covered it. The first must still get its sync.
  scoped_actor asker{sys};
  for (uint64_t group : {uint64_t{5}, uint64_t{1}})
    asker->request(syncer, infinite, sync_atom::value, group);
  sched.run();
  for (int i = 0; i < 2; ++i) {
    auto reply = next_message(asker);
    CAF_CHECK(reply.match_elements<ok_atom, uint64_t>());
  }
}

CAF_TEST(a write or a delta answered from a finished sync leaves none waiting before it unsynced) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto syncer = syncer_after_a_synced_group();
  // As above, with the late request a write, then (once all is answered)
  // a delta, of group 1: each answered from the sync that covered it,
  // after a request for a later group parked before it, which must still
  // get its sync.
  scoped_actor asker{sys};
  auto parked_then_late = [&](uint64_t later_group, auto late_request,
                              auto is_late_answer) {
    asker->request(syncer, infinite, sync_atom::value, later_group);
    late_request();
    sched.run();
    int parked = 0;
    int late = 0;
    for (int i = 0; i < 2; ++i) {
      auto reply = next_message(asker);
      if (reply.match_elements<ok_atom, uint64_t>())
        ++parked;
      else if (is_late_answer(reply))
        ++late;
    }
    CAF_CHECK_EQUAL(parked, 1);
    CAF_CHECK_EQUAL(late, 1);
  };
  parked_then_late(
    5,
    [&] {
      asker->request(syncer, infinite, sync_atom::value, uint64_t{1},
                     caf::error{});
    },
    [](message& reply) { return reply.match_elements<ok_atom>(); });
  parked_then_late(
    6,
    [&] {
      asker->request(syncer, infinite, sync_atom::value, uint64_t{1},
                     replica_answer{});
    },
    [](message& reply) { return reply.match_elements<replica_answer>(); });
}

CAF_TEST(a refused write handed over after the sync of its group gets its refusal) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto syncer = syncer_after_a_synced_group();
  // Two more writes of group 1 handed over late, as the I/O actor hands a
  // group's writes one message each while the sync runs: one the batch
  // refused, one it carried. The sync succeeded, yet the refused write
  // was not stored and must not be answered ok.
  scoped_actor writer{sys};
  writer->request(syncer, infinite, sync_atom::value, uint64_t{1},
                  make_error(errc::stale_generation, "session b"));
  writer->request(syncer, infinite, sync_atom::value, uint64_t{1},
                  caf::error{});
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(writer)), code(errc::stale_generation));
  CAF_CHECK(next_reply<ok_atom>(sys, writer) == ok_atom::value);
}

CAF_TEST(a write and a delta handed over after the failed sync of their group get its failure) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto syncer = syncer_after_a_synced_group(true);
  // Late requests of group 1, as the I/O actor hands a group's writes and
  // deltas over one message each while the sync runs; the disk syncs
  // again by now, but what the failed sync covered may be lost.
  scoped_actor writer{sys};
  writer->request(syncer, infinite, sync_atom::value, uint64_t{1},
                  caf::error{});
  writer->request(syncer, infinite, sync_atom::value, uint64_t{1},
                  replica_answer{});
  sched.run();
  CAF_CHECK_EQUAL(code_of(next_error(writer)), code(errc::storage_failed));
  CAF_CHECK_EQUAL(code_of(next_error(writer)), code(errc::storage_failed));
}

CAF_TEST(a stale session in a group fails alone and the others commit) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  CAF_REQUIRE(!storage::save_session(*db, {"old", "gen 5", {}, {}, 5}));
  auto io = first_io();
  self->request(io, infinite, write_atom::value,
                storage::session_write{"a", "blob a", {row("u0")}, {}, 0});
  self->request(io, infinite, write_atom::value,
                storage::session_write{"old", "stale", {}, {}, 4});
  self->request(io, infinite, write_atom::value,
                storage::session_write{"b", "blob b", {}, {}, 0});
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::stale_generation));
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(stats().groups, 1u);
  CAF_CHECK_EQUAL(stored_blob("a"), "blob a");
  CAF_CHECK_EQUAL(stored_blob("b"), "blob b");
  CAF_CHECK_EQUAL(stored_blob("old"), "gen 5");
}

CAF_TEST(groups written while the WAL syncer is busy are synced by one sync) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto syncs = faults->wal_syncs.load();
  auto before = stats();
  write_two_groups_before_the_syncer_runs();
  sched.run();
  for (int i = 0; i < 4; ++i)
    CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(faults->wal_syncs.load() - syncs, 1);
  auto after = stats();
  CAF_CHECK_EQUAL(after.groups - before.groups, 2u);
  CAF_CHECK_EQUAL(after.fsyncs - before.fsyncs, 1u);
  for (auto session : {"a", "b", "c", "d"})
    CAF_CHECK_EQUAL(stored_blob(session), std::string{"blob "} + session);
}

CAF_TEST(replica deltas written while the WAL syncer is busy are synced by one sync) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto syncs = faults->wal_syncs.load();
  write_two_groups_before_the_syncer_runs(true);
  sched.run();
  for (int i = 0; i < 4; ++i) {
    auto answer = next_reply<replica_answer>(sys, self);
    CAF_CHECK_EQUAL(answer.outcome,
                    static_cast<uint8_t>(replica_outcome::applied));
  }
  CAF_CHECK_EQUAL(faults->wal_syncs.load() - syncs, 1);
  for (auto session : {"a", "b", "c", "d"})
    CAF_CHECK_EQUAL(stored_blob(session), std::string{"blob "} + session);
}

CAF_TEST(a failed WAL sync fails the replica deltas of every group it covered) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  write_two_groups_before_the_syncer_runs(true);
  faults->wal_sync = true;
  sched.run();
  faults->clear();
  for (int i = 0; i < 4; ++i)
    CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::storage_failed));
}

CAF_TEST(an I/O actor checks deltas against what it wrote until another request changes the session) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto io = actor_cast<session_replica_io_actor>(service.io.front());
  auto write = [&](uint64_t ballot, uint64_t base_seq) {
    self->request(io, infinite, replica_atom::value, write_atom::value,
                  replica_delta("s", ballot, 7, base_seq));
    sched.run();
    return outcome_of(next_reply<replica_answer>(sys, self));
  };
  CAF_REQUIRE(write(7, 0) == replica_outcome::applied);
  // Checked against the version the first delta left, remembered.
  CAF_REQUIRE(write(7, 1) == replica_outcome::applied);
  // A newer coordinator's promise reaches the replica: what the I/O actor
  // remembered of s is stale, and the old coordinator's next delta, on the
  // version it wrote last, is preempted.
  self->request(io, infinite, replica_atom::value, prepare_atom::value,
                std::string{"s"}, uint64_t{9});
  sched.run();
  CAF_REQUIRE(outcome_of(next_reply<replica_answer>(sys, self))
              == replica_outcome::applied);
  CAF_CHECK(write(7, 2) == replica_outcome::preempted);
  CAF_CHECK_EQUAL(stored_blob("s"), "blob 2");
}

CAF_TEST(a delta retried after its group failed is checked against storage) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  auto io = actor_cast<session_replica_io_actor>(service.io.front());
  auto write = [&](uint64_t base_seq) {
    self->request(io, infinite, replica_atom::value, write_atom::value,
                  replica_delta("s", 7, 7, base_seq));
    sched.run();
  };
  write(0);
  CAF_REQUIRE(outcome_of(next_reply<replica_answer>(sys, self))
              == replica_outcome::applied);
  faults->wal_append = true;
  write(1);
  faults->clear();
  CAF_REQUIRE_EQUAL(code_of(next_error(self)), code(errc::storage_failed));
  // Storage holds the first delta only: the retry applies on it.
  write(1);
  CAF_CHECK(outcome_of(next_reply<replica_answer>(sys, self))
            == replica_outcome::applied);
  CAF_CHECK_EQUAL(stored_blob("s"), "blob 2");
}

CAF_TEST(a WAL syncer that dies before its sync answers the writes and the read waiting for it) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  write_two_groups_before_the_syncer_runs();
  auto io = actor_cast<session_replica_io_actor>(service.io.front());
  auto* raw_io = actor_cast<abstract_actor*>(io);
  scoped_actor reader{sys};
  reader->request(io, infinite, load_atom::value, std::string{"a"});
  // The load reaches the I/O actor, which waits for the sync of the two
  // groups before it reads: the syncer alone has work left.
  sched.run_jobs_filtered([raw_io](resumable* job) {
    return dynamic_cast<abstract_actor*>(job) == raw_io;
  });
  CAF_REQUIRE(!answered(reader));
  auto* syncer = &sched.next_job<abstract_actor>();
  CAF_REQUIRE(syncer != raw_io);
  anon_send_exit(actor_cast<actor>(syncer), exit_reason::kill);
  sched.run();
  // Nothing was synced: the read and the four writes are answered that the
  // service stopped, none waits for an answer that never comes.
  CAF_CHECK_EQUAL(code_of(next_error(reader)),
                  code(errc::stopped_before_answer));
  for (int i = 0; i < 4; ++i)
    CAF_CHECK_EQUAL(code_of(next_error(self)),
                    code(errc::stopped_before_answer));
}

CAF_TEST(a failed WAL sync fails the writes of every group it covered) {
  session_persister_options options;
  options.io_workers = 1;
  start(options);
  write_two_groups_before_the_syncer_runs();
  faults->wal_sync = true;
  sched.run();
  faults->clear();
  for (int i = 0; i < 4; ++i)
    CAF_CHECK_EQUAL(code_of(next_error(self)), code(errc::storage_failed));
}

CAF_TEST_FIXTURE_SCOPE_END()

// -- what the WAL syncs decided ----------------------------------------------

CAF_TEST(the first sync that covered a group decides its outcome) {
  wal_sync_outcomes outcomes;
  CAF_CHECK(!outcomes.of(1));
  outcomes.record(3, caf::none);
  outcomes.record(5, make_error(errc::storage_failed, "EIO"));
  outcomes.record(5, caf::none); // covered nothing new
  outcomes.record(9, caf::none);
  auto failed = [&](uint64_t group) {
    auto outcome = outcomes.of(group);
    CAF_REQUIRE(outcome);
    return static_cast<bool>(*outcome);
  };
  CAF_CHECK(!failed(1));
  CAF_CHECK(!failed(3));
  CAF_CHECK(failed(4));
  CAF_CHECK(failed(5));
  CAF_CHECK(!failed(6));
  CAF_CHECK(!failed(9));
  CAF_CHECK(!outcomes.of(10));
  // Eight more syncs: the first three are forgotten, and a request for
  // a group they decided fails rather than claim it durable.
  for (uint64_t covered = 10; covered < 18; ++covered)
    outcomes.record(covered, caf::none);
  CAF_CHECK(failed(1));
  CAF_CHECK(failed(9));
  CAF_CHECK(!failed(10));
  CAF_CHECK(!failed(17));
  CAF_CHECK(!outcomes.of(18));
}

// -- settings ----------------------------------------------------------------

/// The node registers these once it hosts the persister (node.settings then
/// compares them with config/coalesce.ini too); until then this pins the
/// keys, their defaults and the README's rows.
CAF_TEST(every invalid persister setting is refused with a sentence naming its key) {
  auto refused = [](auto change, const std::string& key) {
    session_persister_options options;
    change(options);
    CAF_CHECK_NOT_EQUAL(options.validate().find("coalesce." + key),
                        std::string::npos);
  };
  CAF_CHECK_EQUAL(session_persister_options{}.validate(), "");
  refused([](session_persister_options& x) { x.max_blob = 0; }, "persister-max-blob");
  refused([](session_persister_options& x) { x.max_update = 0; },
          "persister-max-update");
  refused([](session_persister_options& x) { x.io_workers = 0; },
          "persister-io-workers");
  refused([](session_persister_options& x) { x.io_workers = 65; },
          "persister-io-workers");
  refused([](session_persister_options& x) { x.snapshot_timeout = {}; },
          "persister-snapshot-timeout");
  refused([](session_persister_options& x) { x.idle_writers = 1000001; },
          "persister-idle-writers");
}
