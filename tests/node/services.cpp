#define CAF_SUITE node.services
#include <caf/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/node/services.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>
#include <coalesce/storage/secret_store.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

struct io_config : test_config {
  io_config() {
    load<io::middleman>();
  }
};

/// A session's live handle: answers the persister's snapshot with `blob`.
session_handle_actor::behavior_type session_handle(std::string blob) {
  return {[blob](snapshot_atom) { return blob; }};
}

/// Registers a handle of `session` answering `blob` and persists it with
/// one update row; answers the persist's error, none once written.
error persist_session(actor_system& sys, const service_handles& services,
                      const std::string& session, const std::string& blob) {
  scoped_actor self{sys};
  auto handle = sys.spawn(session_handle, blob);
  error result;
  self->request(services.session_persister, 30s, register_atom::value, session, handle)
    .receive([](uint64_t) {}, [&](error& err) { result = err; });
  if (!result)
    self
      ->request(services.session_persister, 30s, persist_atom::value, session, handle,
                std::vector<session_update>{{"u1", 1, "note", "first"}},
                std::vector<std::string>{})
      .receive([](ok_atom) {}, [&](error& err) { result = err; });
  anon_send_exit(handle, exit_reason::user_shutdown);
  return result;
}

/// What an application does with the handles, the same in process and
/// remote: queue and look up secrets, flush, append to a room and back-page
/// it to its start, persist a session and load it back. Real actors, real RocksDB, real time (the I/O actors
/// are detached), every wait bounded.
void use_the_services(actor_system& sys, const service_handles& services,
                      const std::string& room) {
  scoped_actor self{sys};
  std::vector<secret_entry> entries{make_entry(room + "-1", 1),
                                    make_entry(room + "-2", 2)};
  self->request(services.secret_buffer, 30s, queue_atom::value, entries)
    .receive([](ok_atom) {}, [&](error& err) { CAF_FAIL(sys.render(err)); });
  self->request(services.secret_buffer, 30s, lookup_atom::value, key_of(room + "-2"))
    .receive(
      [&](secret_lookup& found) {
        CAF_CHECK(found.found);
        CAF_CHECK_EQUAL(found.secret, secret_of(2));
      },
      [&](error& err) { CAF_FAIL(sys.render(err)); });
  self->request(services.secret_buffer, 30s, flush_atom::value)
    .receive([](ok_atom) {}, [&](error& err) { CAF_FAIL(sys.render(err)); });
  std::vector<timeline_event> events;
  for (int i = 1; i <= 5; ++i)
    events.push_back(timeline_event{"e" + std::to_string(i), "m.room.message",
                                    1000 + i, "hello"});
  self->request(services.timeline, 30s, append_atom::value, room, events)
    .receive([](uint64_t n) { CAF_CHECK_EQUAL(n, 5u); },
             [&](error& err) { CAF_FAIL(sys.render(err)); });
  backfill_request request;
  request.room = room;
  request.batch_size = 2;
  backfill_ticket ticket;
  self->request(services.backfill_scheduler, 30s, enqueue_atom::value, request)
    .receive([&](backfill_ticket& x) { ticket = x; },
             [&](error& err) { CAF_FAIL(sys.render(err)); });
  self->request(services.backfill_scheduler, 30s, await_atom::value, ticket)
    .receive(
      [&](backfill_result& result) {
        CAF_CHECK_EQUAL(result.reason, stop_reason::reached_timeline_start);
        CAF_REQUIRE_EQUAL(result.events.size(), 5u);
        CAF_CHECK_EQUAL(result.events.front().event_id, "e5");
        CAF_CHECK_EQUAL(result.events.back().event_id, "e1");
      },
      [&](error& err) { CAF_FAIL(sys.render(err)); });
  auto persisted = persist_session(sys, services, room, "state of " + room);
  CAF_REQUIRE_EQUAL(persisted, error{});
  self->request(services.session_persister, 30s, load_atom::value, room)
    .receive(
      [&](session_record& record) {
        CAF_CHECK_EQUAL(record.blob, "state of " + room);
        CAF_REQUIRE_EQUAL(record.updates.size(), 1u);
        CAF_CHECK_EQUAL(record.updates[0].payload, "first");
      },
      [&](error& err) { CAF_FAIL(sys.render(err)); });
}

service_settings settings_in(const temp_dir& dir) {
  service_settings settings;
  settings.db_path = dir.sub("db");
  return settings;
}

} // namespace

CAF_TEST(invalid settings are refused before anything is opened) {
  test_config cfg;
  actor_system sys{cfg};
  temp_dir dir;
  auto settings = settings_in(dir);
  settings.secret_buffer.pending_limit = 0;
  auto started = start_services(sys, settings);
  CAF_REQUIRE(!started);
  CAF_CHECK_EQUAL(started.error().code(),
                  static_cast<uint8_t>(errc::invalid_request));
  CAF_CHECK_NOT_EQUAL(sys.render(started.error())
                        .find("coalesce.secrets-pending-limit"),
                      std::string::npos);
  CAF_CHECK(!std::filesystem::exists(dir.sub("db")));
}

CAF_TEST(services started in process serve and write everything on stop) {
  test_config cfg;
  actor_system sys{cfg};
  temp_dir dir;
  auto started = start_services(sys, settings_in(dir));
  CAF_REQUIRE(started);
  use_the_services(sys, (*started)->handles(), "!local:x");
  {
    scoped_actor self{sys};
    const auto& buffer
      = (*started)->service<secret_buffer_service>().actors().buffer;
    self->request(buffer, 30s, queue_atom::value,
                  make_entry("late", 9))
      .receive([](ok_atom) {}, [&](error& err) { CAF_FAIL(sys.render(err)); });
  }
  CAF_CHECK((*started)->stop(30s));
  auto reopened = storage::database::open({dir.sub("db")});
  CAF_REQUIRE(reopened);
  auto rows = storage::read_secrets(**reopened, {key_of("!local:x-1"),
                                                 key_of("late")});
  CAF_REQUIRE(rows);
  CAF_CHECK((*rows)[0].found);
  CAF_CHECK((*rows)[1].found);
}

CAF_TEST(a connected node gives the same handles and the same answers) {
  temp_dir dir;
  io_config node_cfg;
  actor_system node_sys{node_cfg};
  auto started = start_services(node_sys, settings_in(dir));
  CAF_REQUIRE(started);
  auto& local = **started;
  auto gateway = spawn_node_gateway(node_sys, local.handles());
  auto port = node_sys.middleman().publish(gateway, 0, "127.0.0.1", true);
  CAF_REQUIRE(port);
  {
    io_config client_cfg;
    actor_system client_sys{client_cfg};
    auto remote = connect_services(client_sys, "127.0.0.1", *port, 10s);
    CAF_REQUIRE(remote);
    use_the_services(client_sys, *remote, "!remote:x");
  }
  static_cast<void>(node_sys.middleman().unpublish(gateway, *port));
  anon_send_exit(gateway, exit_reason::user_shutdown);
  CAF_CHECK(local.stop(30s));
}

CAF_TEST(connecting where no node listens fails within the timeout) {
  io_config cfg;
  actor_system sys{cfg};
  uint16_t free_port = 0;
  {
    // A port that was just free: nothing listens there any more.
    auto probe = sys.spawn([] { return behavior{[](int) {}}; });
    auto port = sys.middleman().publish(probe, 0, "127.0.0.1", true);
    CAF_REQUIRE(port);
    free_port = *port;
    static_cast<void>(sys.middleman().unpublish(probe, free_port));
    anon_send_exit(probe, exit_reason::user_shutdown);
  }
  auto started = std::chrono::steady_clock::now();
  auto remote = connect_services(sys, "127.0.0.1", free_port, 2s);
  CAF_REQUIRE(!remote);
  CAF_CHECK_EQUAL(remote.error().code(),
                  static_cast<uint8_t>(errc::node_unreachable));
  CAF_CHECK_LESS(std::chrono::steady_clock::now() - started, 5s);
}

CAF_TEST(stop reports a session whose write keeps failing) {
  test_config cfg;
  actor_system sys{cfg};
  temp_dir dir;
  auto switches = std::make_shared<storage::fault_switches>();
  auto settings = settings_in(dir);
  settings.file_system = storage::make_fault_injecting_file_system(switches);
  auto started = start_services(sys, settings);
  CAF_REQUIRE(started);
  auto handles = (*started)->handles();
  scoped_actor self{sys};
  // A handle that stays alive, as an application's live session does.
  auto live = sys.spawn(session_handle, std::string{"unsaved"});
  self->request(handles.session_persister, 30s, register_atom::value,
                std::string{"doomed"}, live)
    .receive([](uint64_t) {}, [&](error& err) { CAF_FAIL(sys.render(err)); });
  switches->wal_append = true;
  bool failed = false;
  self
    ->request(handles.session_persister, 30s, persist_atom::value,
              std::string{"doomed"}, live, std::vector<session_update>{},
              std::vector<std::string>{})
    .receive([](ok_atom) {}, [&](error&) { failed = true; });
  CAF_REQUIRE(failed);
  CAF_CHECK(!(*started)->stop(3s));
  anon_send_exit(live, exit_reason::user_shutdown);
}
