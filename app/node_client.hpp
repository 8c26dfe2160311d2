#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "coalesce/messages/node_interface.hpp"

/// coalesce-cli's side of a conversation with a node: connecting within a
/// timeout, and turning every failure into one of the CLI's exit codes with
/// one plain sentence.
namespace coalesce {

/// The exit codes of coalesce-cli.
enum cli_exit : int {
  exit_ok = 0,
  exit_not_found = 1,
  exit_usage = 2,
  exit_unreachable = 3,
  exit_node_error = 4,
};

struct cli_failure {
  int code;
  std::string sentence;
};

/// Connects to the gateway at host:port. `remote_actor` alone can hang on a
/// peer that accepts and stays silent, so this asks the middleman actor with
/// a timed request instead.
std::optional<cli_failure> connect_node(caf::actor_system& sys,
                                        const std::string& host, uint16_t port,
                                        caf::timespan timeout,
                                        node_actor& result);

/// The exit code and sentence for an error a request to the node ended in.
cli_failure classify(caf::actor_system& sys, const caf::error& err,
                     const std::string& where, caf::timespan timeout);

/// What a run of queue requests achieved.
struct queue_report {
  uint64_t entries_sent = 0;
  uint64_t entries_acknowledged = 0;
  uint64_t requests = 0;
  uint64_t errors = 0;
  caf::error first_error;
  /// Round trip of each acknowledged request, in microseconds.
  std::vector<double> latencies_us;
};

/// Sends `batches` as queue requests, at most `window` in flight, each with
/// `timeout`. `progress` counts acknowledged entries as they come in, so a
/// caller can draw a progress bar; `report` is complete once the returned
/// actor has terminated.
caf::actor spawn_queue_pipeline(caf::actor_system& sys, node_actor node,
                                std::vector<std::vector<secret_entry>> batches,
                                std::size_t window, caf::timespan timeout,
                                std::shared_ptr<std::atomic<uint64_t>> progress,
                                std::shared_ptr<queue_report> report);

} // namespace coalesce
