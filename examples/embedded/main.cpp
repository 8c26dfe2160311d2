// A CAF application that uses coalesce twice with the same code: first
// with the services started inside its own actor system, then against a
// running coalesce node.
//
//   embedded DB_DIR HOST PORT

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <coalesce/messages/registration.hpp>
#include <coalesce/node/services.hpp>

using namespace std::chrono_literals;

namespace {

struct app_config : caf::actor_system_config {
  app_config() {
    coalesce::register_message_types(*this);
    load<caf::io::middleman>();
  }
};

/// Queues two secrets and reads one back, appends three events to a room
/// and back-pages it to its start. The same for local and remote handles.
bool use(caf::actor_system& sys, const coalesce::service_handles& services,
         const std::string& where) {
  using namespace coalesce;
  caf::scoped_actor self{sys};
  bool ok = true;
  auto fail = [&](const caf::error& err) {
    std::cerr << where << ": " << sys.render(err) << '\n';
    ok = false;
  };
  std::vector<uint8_t> secret(secret_size, 0x2a);
  std::vector<secret_entry> entries{
    {"family@g.us", "alice@s.whatsapp.net", "m1", secret, 0, 1700000000},
    {"family@g.us", "bob@s.whatsapp.net", "m2", secret, 0, 1700000001}};
  self->request(services.secret_buffer, 10s, queue_atom::value, entries)
    .receive([](ok_atom) {}, fail);
  self
    ->request(services.secret_buffer, 10s, lookup_atom::value,
              secret_key{"family@g.us", "bob@s.whatsapp.net", "m2"})
    .receive(
      [&](const secret_lookup& found) {
        std::cout << where << ": secret m2 "
                  << (found.found && found.secret == secret ? "found"
                                                            : "MISSING")
                  << '\n';
        ok = ok && found.found;
      },
      fail);
  self->request(services.secret_buffer, 10s, flush_atom::value)
    .receive([&](ok_atom) { std::cout << where << ": flushed\n"; }, fail);
  std::vector<timeline_event> events{{"e1", "m.room.create", 1, ""},
                                     {"e2", "m.room.message", 2, "hi"},
                                     {"e3", "m.room.message", 3, "bye"}};
  auto room = "!" + where + ":example.org";
  self->request(services.timeline, 10s, append_atom::value, room, events)
    .receive([](uint64_t) {}, fail);
  backfill_request request;
  request.room = room;
  request.batch_size = 2;
  backfill_ticket ticket;
  self->request(services.backfill_scheduler, 10s, enqueue_atom::value, request)
    .receive([&](const backfill_ticket& x) { ticket = x; }, fail);
  self->request(services.backfill_scheduler, 30s, await_atom::value, ticket)
    .receive(
      [&](const backfill_result& result) {
        std::cout << where << ": backfill " << to_string(result.reason)
                  << ", " << result.events.size() << " events\n";
        ok = ok && result.events.size() == events.size();
      },
      fail);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: embedded DB_DIR HOST PORT\n";
    return EXIT_FAILURE;
  }
  app_config cfg;
  caf::actor_system sys{cfg};
  coalesce::service_settings settings;
  settings.db_path = argv[1];
  auto local = coalesce::start_services(sys, settings);
  if (!local) {
    std::cerr << "starting the services: " << sys.render(local.error())
              << '\n';
    return EXIT_FAILURE;
  }
  bool ok = use(sys, (*local)->handles(), "in-process");
  ok = (*local)->stop(30s) && ok;
  auto remote = coalesce::connect_services(
    sys, argv[2], static_cast<uint16_t>(std::stoi(argv[3])), 10s);
  if (!remote) {
    std::cerr << "connecting: " << sys.render(remote.error()) << '\n';
    return EXIT_FAILURE;
  }
  ok = use(sys, *remote, "remote") && ok;
  std::cout << (ok ? "all good" : "FAILED") << '\n';
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
