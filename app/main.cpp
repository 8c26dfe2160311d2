// coalesce-node: a node started from a config file. It opens the node's
// RocksDB database, hosts the services, publishes their gateway over CAF's
// middleman, logs a stats line now and then, and on SIGINT or SIGTERM refuses
// remote requests, seals and flushes the services within the shutdown
// timeout, and closes the database.

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include "coalesce/actors/backfill_scheduler.hpp"
#include "coalesce/actors/node_gateway.hpp"
#include "coalesce/actors/secret_buffer.hpp"
#include "coalesce/actors/timeline_actors.hpp"
#include "app/node_config.hpp"
#include "coalesce/storage/database.hpp"

#ifdef COALESCE_FAULT_SEAM
#  include "app/fault_control.hpp"
#endif

using namespace coalesce;
using std::chrono::steady_clock;

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

std::string describe(const secret_buffer_stats& x) {
  return fmt::format("pending={} waiting_producers={} held_entries={} "
                     "batches_written={} entries_written={} failed_batches={} "
                     "last_batch_size={} last_write_us={} force_buffered={} "
                     "retries={} failing_for_ms={}",
                     x.pending, x.waiting_producers, x.held_entries,
                     x.batches_written, x.entries_written, x.failed_batches,
                     x.last_batch_size, x.last_write_latency_us,
                     x.force_buffered, x.retries, x.failing_for_ms);
}

/// Logs the node's counters every `interval` until it is told to stop.
caf::behavior stats_reporter(caf::event_based_actor* self, node_actor gateway,
                             caf::timespan interval) {
  self->delayed_send(self, interval, caf::tick_atom::value);
  return {
    [=](caf::tick_atom) {
      self->request(gateway, std::chrono::seconds{10}, stats_atom::value)
        .then(
          [](node_stats& stats) {
            const auto& s = stats.scheduler;
            spdlog::info("stats: uptime_s={} refused_requests={} secrets: {} "
                         "scheduler: queued_low={} queued_normal={} "
                         "queued_high={} running={} coalesced_joins={}",
                         stats.uptime_s, stats.refused_requests,
                         describe(stats.secrets), s.queued[0], s.queued[1],
                         s.queued[2], s.running, s.coalesced_joins);
          },
          [self](caf::error& err) {
            spdlog::warn("stats: no answer from the gateway: {}",
                         self->system().render(err));
          });
      self->delayed_send(self, interval, caf::tick_atom::value);
    },
  };
}

/// Time left until `deadline`, at least one millisecond.
caf::timespan until(steady_clock::time_point deadline) {
  auto left = deadline - steady_clock::now();
  return std::max<caf::timespan>(
    std::chrono::duration_cast<caf::timespan>(left),
    std::chrono::milliseconds{1});
}

/// Refuses remote requests, cancels every back-pagination run (answering its
/// callers), then seals and flushes the secret buffer within the shutdown
/// timeout. Returns whether everything queued was written.
bool drain_services(caf::actor_system& sys, const node_config& cfg,
                    node_actor gateway, scheduler_actor scheduler,
                    const secret_service& secrets) {
  auto deadline = steady_clock::now() + cfg.shutdown_timeout;
  caf::scoped_actor self{sys};
  self->request(gateway, until(deadline), shutdown_atom::value)
    .receive([](ok_atom) {}, [](caf::error&) {});
  self->request(scheduler, until(deadline), shutdown_atom::value)
    .receive([](ok_atom) {}, [](caf::error&) {});
  self->request(secrets.buffer, until(deadline), seal_atom::value)
    .receive([](ok_atom) {}, [](caf::error&) {});
  bool written = false;
  self->request(secrets.buffer, until(deadline), flush_atom::value)
    .receive([&](ok_atom) { written = true; },
             [&](caf::error& err) {
               spdlog::error("flushing the secret buffer failed within {}: {}",
                             caf::deep_to_string(cfg.shutdown_timeout),
                             sys.render(err));
             });
  if (written) {
    spdlog::info("secret buffer flushed: every queued secret is durable");
    return true;
  }
  self->request(secrets.buffer, std::chrono::seconds{5}, stats_atom::value)
    .receive(
      [](secret_buffer_stats& st) {
        spdlog::error("{} secrets could not be written ({} pending, {} held "
                      "by waiting producers)",
                      st.pending + st.held_entries, st.pending,
                      st.held_entries);
      },
      [&](caf::error& err) {
        spdlog::error("the secret buffer does not answer; what it held is "
                      "unknown: {}",
                      sys.render(err));
      });
  return false;
}

int run_node(caf::actor_system& sys, const node_config& cfg,
             const sigset_t& shutdown_signals) {
  auto mode = *storage::parse_durability(cfg.durability);
  storage::database_options db_options{cfg.db_path, mode};
#ifdef COALESCE_FAULT_SEAM
  // Test build only: the disk fails on demand, switched from a file.
  auto faults = std::make_shared<storage::fault_switches>();
  db_options.file_system = storage::make_fault_injecting_file_system(faults);
  const char* control_file = std::getenv("COALESCE_FAULT_CONTROL");
  std::unique_ptr<fault_control> control;
  if (control_file != nullptr)
    control = std::make_unique<fault_control>(control_file, faults);
  spdlog::warn("this is the test build with the fault seam; control file: {}",
               control_file != nullptr ? control_file : "(none)");
#endif
  auto db = storage::database::open(db_options);
  if (!db) {
    spdlog::critical("cannot open the database at {}: {}", cfg.db_path,
                     sys.render(db.error()));
    return EXIT_FAILURE;
  }
  spdlog::info("opened the database at {} (durability {})", cfg.db_path,
               cfg.durability);
  secret_buffer_options options;
  options.pending_limit = cfg.secrets_pending_limit;
  options.retry_base = cfg.secrets_retry_base;
  options.retry_max = cfg.secrets_retry_max;
  auto secrets = spawn_secret_service(sys, *db, options);
  auto timeline = sys.spawn<caf::detached>(timeline_store, *db);
  scheduler_options scheduling;
  scheduling.limits.max_concurrent = cfg.scheduler_max_concurrent;
  scheduling.limits.max_queued = cfg.scheduler_max_queued;
  scheduling.limits.max_per_priority = {cfg.scheduler_max_concurrent_low,
                                        cfg.scheduler_max_concurrent_normal,
                                        cfg.scheduler_max_concurrent_high};
  scheduling.pager_timeout = cfg.scheduler_pager_timeout;
  scheduling.results_memory = cfg.scheduler_results_memory;
  auto scheduler = spawn_backfill_scheduler(sys, timeline, scheduling);
  auto gateway = spawn_node_gateway(
    sys, node_services{secrets.buffer, scheduler, timeline});
  auto stop_actors = [&] {
    for (auto hdl : {caf::actor_cast<caf::actor>(gateway),
                     caf::actor_cast<caf::actor>(scheduler),
                     caf::actor_cast<caf::actor>(timeline),
                     caf::actor_cast<caf::actor>(secrets.buffer)})
      caf::anon_send_exit(hdl, caf::exit_reason::user_shutdown);
    caf::scoped_actor self{sys};
    self->wait_for(gateway, scheduler, timeline, secrets.buffer, secrets.drain,
                   secrets.reader);
  };
  auto port = sys.middleman().publish(gateway, cfg.port, cfg.host.c_str(),
                                      true);
  if (!port) {
    spdlog::critical("cannot listen on {}:{}: {}", cfg.host, cfg.port,
                     sys.render(port.error()));
    stop_actors();
    return EXIT_FAILURE;
  }
  spdlog::info("listening on {}:{}", cfg.host, *port);
  caf::actor reporter;
  if (cfg.stats_interval.count() > 0)
    reporter = sys.spawn(stats_reporter, gateway, cfg.stats_interval);

  int signal = 0;
  sigwait(&shutdown_signals, &signal);
  spdlog::info("received {}, shutting down within {}",
               signal == SIGINT ? "SIGINT" : "SIGTERM",
               caf::deep_to_string(cfg.shutdown_timeout));
  if (reporter)
    caf::anon_send_exit(reporter, caf::exit_reason::user_shutdown);
  auto written = drain_services(sys, cfg, gateway, scheduler, secrets);
  static_cast<void>(sys.middleman().unpublish(gateway, *port));
  stop_actors();
  auto status = written ? EXIT_SUCCESS : EXIT_FAILURE;
  if (auto err = (*db)->close()) {
    spdlog::error("closing the database failed: {}", sys.render(err));
    status = EXIT_FAILURE;
  }
  spdlog::info("stopped ({})", status == EXIT_SUCCESS
                                 ? "everything written"
                                 : "NOT everything was written");
  return status;
}

} // namespace

int main(int argc, char** argv) {
  auto shutdown_signals = block_shutdown_signals();
  node_config cfg;
  if (auto problem = load_node_config(cfg, argc, argv); !problem.empty()) {
    std::cerr << "coalesce-node: invalid configuration: " << problem << '\n';
    return EXIT_FAILURE;
  }
  if (cfg.cli_helptext_printed)
    return EXIT_SUCCESS;
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  return run_node(sys, cfg, shutdown_signals);
}
