#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <coalesce/messages/node_interface.hpp>

/// coalesce-cli's side of a conversation with a node: connecting within a
/// timeout, one session every command talks through, and turning every
/// failure into one of the CLI's exit codes with one plain sentence. The one
/// CAF-heavy part of the CLI the command groups share.
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

/// Prints the failure's sentence on stderr; returns its exit code.
int fail(const cli_failure& failure);

/// A usage error: exit 2 with `sentence`.
int usage(const std::string& sentence);

/// A duration in the syntax of the config file (CAF's: 500ms, 5s, 1min,
/// 1h, ...), or nothing if `text` is none or not positive.
std::optional<caf::timespan> parse_duration(const std::string& text);

/// Where and how patiently the CLI talks to a node.
struct node_address {
  std::string host = "127.0.0.1";
  uint16_t port = 4300;
  caf::timespan timeout = std::chrono::seconds{5};
  /// --nodes: every node of a cluster, "h:p,h:p"; empty: the one node above.
  std::string nodes;
  /// The nodes' `coalesce.replicas`: on how many a chat's secrets are kept.
  std::size_t replicas = 3;

  std::string where() const {
    return nodes.empty() ? host + ":" + std::to_string(port)
                         : "owning the key among " + nodes;
  }
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

/// A connected session with one node. Every request goes out from the same
/// actor: the node watches the actor that enqueued a backfill, and its end
/// would cancel the run.
struct session {
  session(caf::actor_system& sys, node_address address)
    : sys(sys), address(std::move(address)), self(sys) {
    // nop
  }

  caf::actor_system& sys;
  node_address address;
  caf::scoped_actor self;
  node_actor node;

  caf::timespan timeout() const {
    return address.timeout;
  }

  cli_failure failure(const caf::error& err) const {
    return classify(sys, err, address.where(), address.timeout);
  }

  /// One request and its answer, or the failure it ended in.
  template <class T, class... Ts>
  std::optional<cli_failure> ask(T& result, Ts&&... xs) {
    std::optional<cli_failure> failed;
    self->request(node, address.timeout, std::forward<Ts>(xs)...)
      .receive([&](T& x) { result = std::move(x); },
               [&](caf::error& err) { failed = failure(err); });
    return failed;
  }
};

/// The stats of one node at host:port, reached on its own with `s`'s
/// timeout (and its TLS files: the system is `s`'s), or the failure.
std::optional<cli_failure> stats_of_node(session& s, const std::string& host,
                                         uint16_t port, node_stats& result);

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

/// Returns once `pipeline` terminated, drawing a progress bar of
/// `progress` out of `total` entries on stderr if `show_progress`.
void await_queue_pipeline(caf::actor_system& sys, const caf::actor& pipeline,
                          const std::atomic<uint64_t>& progress,
                          uint64_t total, bool show_progress);

} // namespace coalesce
