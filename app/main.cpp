// coalesce-node: a node started from a config file (coalesce/node/node.hpp
// says what a node does; app/node_config.hpp how its settings are read).

#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>

#include <chrono>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/settings.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <spdlog/spdlog.h>

#include "log_format.hpp"
#include "node_config.hpp"
#include "service_manager.hpp"
#include <coalesce/client/tls_transport.hpp>
#include <coalesce/node/node.hpp>
#include <coalesce/node/tls_refusals.hpp>

#ifdef COALESCE_FAULT_SEAM
#  include "fault_control.hpp"
#  include <coalesce/storage/fault_injection.hpp>
#endif

namespace {

/// Blocks SIGINT, SIGTERM, SIGHUP and SIGCONT in every thread (CAF's
/// threads inherit the mask from this one), so that only the node's main
/// loop receives them: SIGHUP's default action would end the process
/// without a flush, and a SIGCONT (the process still continues when it is
/// blocked) tells a clustered node that it was paused.
sigset_t block_node_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGCONT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

/// CAF 0.17.6 throws while decoding some of its own types from a peer (a
/// `config_value` or stream message with an unknown type index: "invalid
/// type found"); in a BASP worker, on a scheduler thread that catches
/// nothing, so the process ends in std::terminate (in the BASP broker the
/// node's broker watch stops it: coalesce/node/node.hpp). Nothing can keep
/// the node up then; this names why it stopped in the log, where an
/// operator looks first.
[[noreturn]] void log_and_abort_on_uncaught_exception() {
  std::string what = "an unknown exception";
  if (auto thrown = std::current_exception()) {
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& error) {
      what = error.what();
    } catch (...) {
    }
  }
  spdlog::critical("the node stops: an exception no actor caught: {} (CAF "
                   "0.17.6 throws \"invalid type found\" while decoding a "
                   "peer's message it cannot read; see \"Known limits of CAF "
                   "0.17\" in docs/operating.md)",
                   what);
  spdlog::default_logger()->flush();
  std::abort();
}

} // namespace

int main(int argc, char** argv) {
  using namespace coalesce;
  std::set_terminate(log_and_abort_on_uncaught_exception);
  auto node_signals = block_node_signals();
  node_config cfg;
  if (auto problem = load_node_config(cfg, argc, argv); !problem.empty()) {
    std::cerr << "coalesce-node: invalid configuration: " << problem << '\n';
    return EXIT_FAILURE;
  }
  if (cfg.cli_helptext_printed)
    return EXIT_SUCCESS;
  configure_logging(cfg.settings);
#ifdef COALESCE_FAULT_SEAM
  // Test build only: the disk fails on demand, switched from a file.
  auto faults = std::make_shared<storage::fault_switches>();
  cfg.settings.services.file_system
    = storage::make_fault_injecting_file_system(faults);
  const char* control_file = std::getenv("COALESCE_FAULT_CONTROL");
  std::unique_ptr<fault_control> control;
  if (control_file != nullptr)
    control = std::make_unique<fault_control>(control_file, faults);
  spdlog::warn("this is the test build with the fault seam; control file: {}",
               control_file != nullptr ? control_file : "(none)");
#endif
  // A cluster's nodes send BASP heartbeats, so that a peer or client that
  // sets middleman.connection-timeout sees a hung node; the node itself
  // finds its hung peers by pinging them (coalesce/node/peer_watch.hpp).
  if (!cfg.settings.cluster.cluster.empty()
      && caf::get_or(cfg, "middleman.heartbeat-interval", caf::timespan{0})
             .count()
           == 0)
    caf::put(cfg.content, "middleman.heartbeat-interval",
             caf::timespan{std::chrono::seconds{1}});
  cfg.load<caf::io::middleman>();
  if (uses_tls(cfg)) {
    set_tls_options({cfg.settings.tls_min_version, cfg.settings.tls_ciphers,
                     log_tls_refusal});
    spdlog::info("TLS {} and later; TLS 1.2 ciphers \"{}\"",
                 cfg.settings.tls_min_version, cfg.settings.tls_ciphers);
    cfg.load<caf::openssl::manager>();
  } else {
    spdlog::warn("no TLS: the plain port on {} is for development only. CAF "
                 "0.17's plain port trusts the lengths peers send: garbage "
                 "from 300 connections left a node unreachable and grown to "
                 "3.9 GB resident. Set openssl.certificate, openssl.key and "
                 "openssl.cafile for mutual TLS",
                 cfg.settings.host);
  }
  caf::actor_system sys{cfg};
  return run_node(sys, cfg.settings, node_signals, service_manager_events());
}
