// coalesce-node: opens the node's RocksDB database, hosts the secret buffer,
// publishes it over CAF's middleman, and on SIGINT or SIGTERM seals and
// flushes the buffer before it closes the database.

#include <csignal>
#include <cstdlib>
#include <iostream>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/secret_buffer.hpp"
#include "app/node_config.hpp"
#include "storage/database.hpp"

using namespace coalesce;

namespace {

/// Blocks SIGINT and SIGTERM in every thread (CAF's threads inherit the mask
/// from this one), so that only the main thread's sigwait receives them.
sigset_t block_shutdown_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int run_node(caf::actor_system& sys, const node_config& cfg,
             const sigset_t& shutdown_signals) {
  auto mode = *storage::parse_durability(cfg.durability);
  auto db = storage::database::open({cfg.db_path, mode});
  if (!db) {
    spdlog::critical("cannot open the database at {}: {}", cfg.db_path,
                     sys.render(db.error()));
    return EXIT_FAILURE;
  }
  secret_buffer_options options;
  options.pending_limit = cfg.secrets_pending_limit;
  auto service = spawn_secret_service(sys, *db, options);
  auto port = sys.middleman().publish(service.buffer, cfg.port,
                                      cfg.host.c_str(), true);
  if (!port) {
    spdlog::critical("cannot listen on {}:{}: {}", cfg.host, cfg.port,
                     sys.render(port.error()));
    caf::anon_send_exit(service.buffer, caf::exit_reason::user_shutdown);
    return EXIT_FAILURE;
  }
  spdlog::info("listening on {}:{}", cfg.host, *port);

  int signal = 0;
  sigwait(&shutdown_signals, &signal);
  spdlog::info("received signal {}, sealing and flushing the secret buffer",
               signal);
  int status = EXIT_SUCCESS;
  caf::scoped_actor self{sys};
  static_cast<void>(sys.middleman().unpublish(service.buffer, *port));
  self->request(service.buffer, std::chrono::seconds{30}, seal_atom::value)
    .receive([](ok_atom) {}, [&](caf::error&) {});
  self->request(service.buffer, std::chrono::seconds{30}, flush_atom::value)
    .receive([](ok_atom) { spdlog::info("secret buffer flushed"); },
             [&](caf::error& err) {
               spdlog::error("flushing the secret buffer failed: {}",
                             sys.render(err));
               status = EXIT_FAILURE;
             });
  self->send_exit(service.buffer, caf::exit_reason::user_shutdown);
  self->wait_for(service.buffer, service.drain, service.reader);
  if (auto err = (*db)->close()) {
    spdlog::error("closing the database failed: {}", sys.render(err));
    status = EXIT_FAILURE;
  }
  spdlog::info("stopped");
  return status;
}

} // namespace

int main(int argc, char** argv) {
  auto shutdown_signals = block_shutdown_signals();
  node_config cfg;
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << "coalesce-node: invalid configuration: " << to_string(err)
              << '\n';
    return EXIT_FAILURE;
  }
  if (cfg.cli_helptext_printed)
    return EXIT_SUCCESS;
  if (auto problem = validate(cfg); !problem.empty()) {
    std::cerr << "coalesce-node: invalid configuration: " << problem << '\n';
    return EXIT_FAILURE;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  return run_node(sys, cfg, shutdown_signals);
}
