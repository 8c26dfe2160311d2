// An application that reaches a coalesce node over the network and hosts no
// service itself: it queues a secret, reads it back and prints the node's
// stats.
//
//   client HOST PORT

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/registration.hpp>

using namespace std::chrono_literals;

namespace {

struct client_config : caf::actor_system_config {
  client_config() {
    coalesce::register_message_types(*this);
    load<caf::io::middleman>();
  }
};

} // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: client HOST PORT\n";
    return EXIT_FAILURE;
  }
  using namespace coalesce;
  client_config cfg;
  caf::actor_system sys{cfg};
  auto node = connect_node(sys, argv[1],
                           static_cast<uint16_t>(std::stoi(argv[2])), 10s);
  if (!node) {
    std::cerr << unreachable_sentence(sys, node.error()) << '\n';
    return EXIT_FAILURE;
  }
  caf::scoped_actor self{sys};
  bool ok = true;
  auto fail = [&](const caf::error& err) {
    std::cerr << sys.render(err) << '\n';
    ok = false;
  };
  std::vector<uint8_t> secret(secret_size, 0x2b);
  std::vector<secret_entry> entries{
    {"client@g.us", "carol@s.whatsapp.net", "c1", secret, 0, 1700000002}};
  self->request(*node, 10s, queue_atom::value, entries)
    .receive([](ok_atom) {}, fail);
  self->request(*node, 10s, lookup_atom::value, entries.front().key())
    .receive(
      [&](const secret_lookup& found) {
        std::cout << "client: secret c1 "
                  << (found.found && found.secret == secret ? "found"
                                                            : "MISSING")
                  << '\n';
        ok = ok && found.found;
      },
      fail);
  self->request(*node, 10s, stats_atom::value)
    .receive(
      [&](const node_stats& stats) {
        std::cout << "client: the node holds " << stats.secret_buffer.pending
                  << " pending secrets\n";
      },
      fail);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
