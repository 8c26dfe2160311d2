#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include <coalesce/messages/node_interface.hpp>
#include <coalesce/node/metrics_options.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// A node's Prometheus metrics: `GET /metrics` on `coalesce.host` at
/// `coalesce.metrics-port`, served by prometheus-cpp's own HTTP threads
/// (16; a connection that has not sent its whole request, or taken its
/// answer, within 2 s is closed, so idle or never-reading clients hold a
/// thread for at most that long).
///
/// Each scrape asks the gateway for `stats` (with a timeout, from the HTTP
/// thread, never from a CAF scheduler thread) and reads the database's
/// state and latency recorders, so every value is the moment's. The stats
/// are derived from `node_stats`' named fields (named_fields.hpp), so a new
/// counter of a service appears without a line here:
/// - name: `coalesce_`, the service's member of `node_stats` in the
///   singular (a trailing `s` dropped: `secrets` is `secret`), the field's
///   name, a unit suffix as Prometheus wants it (`_us`, `_ms` and `_s`
///   become `_seconds` with the value converted; `bytes` moves to the end),
///   `_total` for a counter: `secrets.batches_written` is
///   `coalesce_secret_batches_written_total`;
/// - kind: a gauge for flags (0 or 1) and for the number fields a
///   service's descriptor lists in its `gauges` (node_stats' own:
///   `node_own_stats`, coalesce/messages/node_interface.hpp), a counter for
///   those in its `counters`; every number field is in one of them (checked
///   when the messages library compiles); text fields are left out;
/// - a vector indexed by an enum, or by the nodes of the cluster, is one
///   metric with a label per index, the label its field names (`priority`,
///   `reason`, `peer`): `coalesce_scheduler_queued{priority="low"}`,
///   `coalesce_replica_failures_by_peer_total{peer="10.0.0.2:4300"}`;
/// - HELP: the field's doc comment in its stats type.
///
/// Beside them: `coalesce_build_info{version,commit}`, the `process_*`
/// metrics of Prometheus' conventions (CPU, memory, file descriptors, start
/// time), the database's state and latency histograms.
namespace coalesce {

enum class metric_kind { counter, gauge };

/// One metric derived from a field of `node_stats`.
struct stats_metric {
  std::string name;
  /// The field's path as the stats line names it (`secrets.pending`).
  std::string field;
  /// What it measures: the doc comment of the field in its stats type
  /// (cmake/stats_help.py).
  std::string help;
  metric_kind kind = metric_kind::counter;
  struct sample {
    /// Label name and value; empty for a plain field.
    std::vector<std::pair<std::string, std::string>> labels;
    double value = 0;
  };
  std::vector<sample> samples;
};

/// The number fields of `node_stats` that may go down (paths as in
/// `flat_fields`): queue lengths, what is held at the moment, the last
/// batch's figures; derived from the descriptors' `gauges`.
const std::vector<std::string>& gauge_fields();

/// Every numeric field of `stats` as a metric, in field order, but
/// `uptime_s`: the metrics carry the process's start time instead.
std::vector<stats_metric> stats_metrics(node_stats& stats);

/// The running HTTP endpoint; destroying it stops it (waiting for a scrape
/// in progress, at most its stats timeout).
class metrics_exporter {
public:
  struct state;

  explicit metrics_exporter(std::unique_ptr<state> x);
  ~metrics_exporter();

  metrics_exporter(const metrics_exporter&) = delete;
  metrics_exporter& operator=(const metrics_exporter&) = delete;

  /// Where it listens, as `HOST:PORT`.
  const std::string& address() const;

private:
  std::unique_ptr<state> state_;
};

/// Starts serving the metrics of `gateway` and `db` on `host` at
/// `options.port`; null when the port is 0. Error (`invalid_request`,
/// naming `coalesce.metrics-port`) when the port cannot be bound.
caf::expected<std::unique_ptr<metrics_exporter>>
start_metrics(caf::actor_system& sys, node_actor gateway,
              std::shared_ptr<storage::database> db, const std::string& host,
              const metrics_options& options);

} // namespace coalesce
