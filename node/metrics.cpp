#include <coalesce/node/metrics.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <string_view>
#include <type_traits>

#include <caf/all.hpp>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/node/build_info.hpp>
#include <coalesce/node/process_figures.hpp>
#include <coalesce/node/tls_refusals.hpp>
#include <coalesce/storage/database.hpp>

#include "stats_help.hpp"

namespace coalesce {

namespace {

bool ends_with(const std::string& x, const std::string& suffix) {
  return x.size() >= suffix.size()
         && x.compare(x.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// A service's member of node_stats names its metrics in the singular.
std::string singular(std::string name) {
  if (ends_with(name, "s"))
    name.pop_back();
  return name;
}

/// A field's name with its unit as Prometheus wants it (base unit, at the
/// end), and the factor that converts its value to that unit.
std::pair<std::string, double> with_base_unit(const std::string& name) {
  for (auto [suffix, factor] : {std::pair{"_us", 1e-6}, std::pair{"_ms", 1e-3},
                                std::pair{"_s", 1.0}}) {
    std::string unit{suffix};
    if (ends_with(name, unit))
      return {name.substr(0, name.size() - unit.size()) + "_seconds", factor};
  }
  auto bytes = name.find("bytes_");
  if (bytes != std::string::npos && (bytes == 0 || name[bytes - 1] == '_'))
    return {name.substr(0, bytes) + name.substr(bytes + 6) + "_bytes", 1.0};
  return {name, 1.0};
}

/// Whether `field`, a number field of `owner`, is one of the gauges that
/// `owner`'s descriptor lists (`node_own_stats` for node_stats' own): by
/// the field's address, not its name, so that no name can drift. Every
/// other number field is in its counters (messages/service_checks.cpp).
template <class Stats, auto... Gauges>
bool is_listed(const Stats& owner, const void* field, members<Gauges...>) {
  return ((static_cast<const void*>(&(owner.*Gauges)) == field) || ...);
}

template <class Stats, class T>
bool is_gauge(const Stats& owner, const T& field) {
  return is_listed(owner, &field, typename classified_by_t<Stats>::gauges{});
}

/// The unqualified name of `T`, from the compiler's own spelling of this
/// function (GCC and Clang: "... [with T = coalesce::node_stats; ...]" or
/// "[T = coalesce::node_stats]").
template <class T>
std::string_view type_name() {
  std::string_view text = __PRETTY_FUNCTION__;
  auto start = text.find("T = ");
  if (start == std::string_view::npos)
    return {};
  start += 4;
  auto end = text.find_first_of(";]", start);
  auto name = text.substr(start, end - start);
  auto scope = name.rfind("::");
  return scope == std::string_view::npos ? name : name.substr(scope + 2);
}

/// The doc comment of `Stats`'s field `field` (empty for none).
template <class Stats>
std::string help_of(const char* field) {
  auto owner = type_name<Stats>();
  for (const auto& entry : stats_help::fields)
    if (owner == entry.type && std::string_view{field} == entry.field)
      return entry.text;
  return {};
}

template <class T>
double as_number(const T& x) {
  return static_cast<double>(x);
}

/// An empty metric for the field at `path`, named under `name_prefix`.
template <class Value>
std::pair<stats_metric, double>
metric_for(const std::string& path, const std::string& name_prefix,
           const std::string& field_name, bool gauge, std::string help) {
  stats_metric result;
  result.field = path;
  result.help = std::move(help);
  result.kind = std::is_same_v<Value, bool> || gauge ? metric_kind::gauge
                                                     : metric_kind::counter;
  auto [name, factor] = with_base_unit(field_name);
  if (factor != 1.0)
    for (const char* unit : {"in microseconds", "in milliseconds"})
      if (auto at = result.help.find(unit); at != std::string::npos)
        result.help.replace(at, std::string{unit}.size(), "in seconds");
  result.name = "coalesce_" + name_prefix + name
                + (result.kind == metric_kind::counter ? "_total" : "");
  return {std::move(result), factor};
}

/// The metrics of `field`, a field of `owner`.
template <class Stats, class T>
void add_metrics(std::vector<stats_metric>& out, const std::string& path_prefix,
                 const std::string& name_prefix, const Stats& owner,
                 const named_field<T>& field) {
  auto path = path_prefix + field.name;
  if constexpr (has_named_fields<T>::value) {
    with_named_fields(field.value, [&](const auto&... inner) {
      (add_metrics(out, path + ".", name_prefix + singular(field.name) + "_",
                   field.value, inner),
       ...);
    });
  } else if constexpr (is_number_vector<T>::value) {
    using element = typename T::value_type;
    auto [metric, factor] = metric_for<element>(
      path, name_prefix, field.name, is_gauge(owner, field.value),
      help_of<Stats>(field.name));
    for (std::size_t i = 0; i < field.value.size(); ++i) {
      stats_metric::sample sample;
      if (field.names_indices())
        sample.labels.emplace_back(field.index_label, field.index_text(i));
      else
        sample.labels.emplace_back("index", std::to_string(i));
      sample.value = as_number(field.value[i]) * factor;
      metric.samples.push_back(std::move(sample));
    }
    out.push_back(std::move(metric));
  } else if constexpr (std::is_arithmetic_v<T>) {
    auto [metric, factor] = metric_for<T>(path, name_prefix, field.name,
                                          is_gauge(owner, field.value),
                                          help_of<Stats>(field.name));
    metric.samples.push_back({{}, as_number(field.value) * factor});
    out.push_back(std::move(metric));
  }
  // Text (an error message, the cluster's addresses) is no metric: the log
  // and `stats` carry it.
}

/// The paths of the gauges among `field` (a field of `owner`) and its
/// fields.
template <class Stats, class T>
void add_gauge_paths(std::vector<std::string>& out, const std::string& prefix,
                     const Stats& owner, const named_field<T>& field) {
  auto path = prefix + field.name;
  if constexpr (has_named_fields<T>::value) {
    with_named_fields(field.value, [&](const auto&... inner) {
      (add_gauge_paths(out, path + ".", field.value, inner), ...);
    });
  } else if constexpr (is_number_vector<T>::value
                       || (std::is_arithmetic_v<T>
                           && !std::is_same_v<T, bool>)) {
    if (is_gauge(owner, field.value))
      out.push_back(path);
  }
}

} // namespace

const std::vector<std::string>& gauge_fields() {
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> result;
    node_stats stats;
    with_named_fields(stats, [&](const auto&... field) {
      (add_gauge_paths(result, "", stats, field), ...);
    });
    return result;
  }();
  return fields;
}

std::vector<stats_metric> stats_metrics(node_stats& stats) {
  std::vector<stats_metric> result;
  with_named_fields(stats, [&](const auto&... fields) {
    (add_metrics(result, "", "", stats, fields), ...);
  });
  result.erase(std::remove_if(result.begin(), result.end(),
                              [](const stats_metric& x) {
                                return x.field == "uptime_s";
                              }),
               result.end());
  return result;
}

namespace {

namespace prom = prometheus;

constexpr auto stats_timeout = std::chrono::seconds{5};

prom::MetricFamily family(std::string name, std::string help,
                          prom::MetricType type) {
  prom::MetricFamily result;
  result.name = std::move(name);
  result.help = std::move(help);
  result.type = type;
  return result;
}

prom::ClientMetric gauge_value(double value,
                               std::vector<prom::ClientMetric::Label> labels
                               = {}) {
  prom::ClientMetric result;
  result.label = std::move(labels);
  result.gauge.value = value;
  return result;
}

prom::MetricFamily to_family(const stats_metric& metric) {
  auto result = family(metric.name,
                       metric.help + " (coalesce-cli stats: " + metric.field
                         + ")",
                       metric.kind == metric_kind::counter
                         ? prom::MetricType::Counter
                         : prom::MetricType::Gauge);
  for (const auto& sample : metric.samples) {
    prom::ClientMetric value;
    for (const auto& [name, text] : sample.labels)
      value.label.push_back({name, text});
    if (metric.kind == metric_kind::counter)
      value.counter.value = sample.value;
    else
      value.gauge.value = sample.value;
    result.metric.push_back(std::move(value));
  }
  return result;
}

prom::MetricFamily histogram(std::string name, std::string help,
                             const storage::latency_recorder& recorder) {
  using storage::latency_recorder;
  auto counts = recorder.snapshot();
  prom::ClientMetric value;
  uint64_t cumulative = 0;
  for (std::size_t i = 0; i < latency_recorder::bucket_count; ++i) {
    cumulative += counts.per_bucket[i];
    auto bound = i < latency_recorder::upper_bounds_ns.size()
                   ? static_cast<double>(latency_recorder::upper_bounds_ns[i])
                       * 1e-9
                   : std::numeric_limits<double>::infinity();
    value.histogram.bucket.push_back({cumulative, bound});
  }
  value.histogram.sample_count = cumulative;
  value.histogram.sample_sum
    = std::chrono::duration<double>(counts.sum).count();
  auto result = family(std::move(name), std::move(help),
                       prom::MetricType::Histogram);
  result.metric.push_back(std::move(value));
  return result;
}

void add_database_metrics(std::vector<prom::MetricFamily>& out,
                          const storage::database& db) {
  auto status = db.status();
  auto healthy = family("coalesce_database_healthy",
                        "1 while the database takes writes (healthy, "
                        "writable, no failure since the last reopen)",
                        prom::MetricType::Gauge);
  healthy.metric.push_back(gauge_value(status.writable ? 1 : 0));
  out.push_back(std::move(healthy));
  auto state = family("coalesce_database_state",
                      "1 for the state the last recovery left the database "
                      "in, 0 for the others",
                      prom::MetricType::Gauge);
  using storage::health;
  for (auto [which, name] : {std::pair{health::healthy, "healthy"},
                             std::pair{health::reopening, "reopening"},
                             std::pair{health::down, "down"}})
    state.metric.push_back(
      gauge_value(status.state == which ? 1 : 0, {{"state", name}}));
  out.push_back(std::move(state));
  auto read_only = family("coalesce_database_read_only",
                          "1 while a read-only instance serves reads because "
                          "reopening for writes failed",
                          prom::MetricType::Gauge);
  read_only.metric.push_back(gauge_value(status.read_only ? 1 : 0));
  out.push_back(std::move(read_only));
  auto reopens = family("coalesce_database_reopens_total",
                        "reopens attempted to clear a failure since the "
                        "node started",
                        prom::MetricType::Counter);
  prom::ClientMetric reopens_value;
  reopens_value.counter.value = static_cast<double>(status.reopens);
  reopens.metric.push_back(std::move(reopens_value));
  out.push_back(std::move(reopens));
  out.push_back(histogram("coalesce_write_seconds",
                          "how long each RocksDB write batch took (a synced "
                          "one includes its WAL fsync)",
                          db.write_latency()));
  out.push_back(histogram("coalesce_fsync_seconds",
                          "how long each file sync RocksDB made took (WAL, "
                          "table files, MANIFEST)",
                          db.fsync_latency()));
}

/// `coalesce_build_info` and the `process_*` metrics.
void add_process_metrics(std::vector<prom::MetricFamily>& out) {
  auto info = family("coalesce_build_info",
                     "always 1; its labels name the version and the commit "
                     "this node was built from",
                     prom::MetricType::Gauge);
  info.metric.push_back(gauge_value(
    1, {{"version", build_version()}, {"commit", build_commit()}}));
  out.push_back(std::move(info));
  auto refused = family("coalesce_tls_handshakes_refused_total",
                        "TLS handshakes refused by this node or its peers "
                        "(no certificate, a foreign CA, an old protocol, no "
                        "common cipher); each is logged, at most 10 lines a "
                        "minute",
                        prom::MetricType::Counter);
  prom::ClientMetric refused_value;
  refused_value.counter.value
    = static_cast<double>(tls_handshakes_refused().load());
  refused.metric.push_back(std::move(refused_value));
  out.push_back(std::move(refused));
  auto figures = read_process_figures();
  if (!figures)
    return;
  auto add = [&](const char* name, const char* help, prom::MetricType type,
                 double value) {
    auto metric = family(name, help, type);
    prom::ClientMetric sample;
    if (type == prom::MetricType::Counter)
      sample.counter.value = value;
    else
      sample.gauge.value = value;
    metric.metric.push_back(std::move(sample));
    out.push_back(std::move(metric));
  };
  add("process_cpu_seconds_total", "user and system CPU time spent, in seconds",
      prom::MetricType::Counter, figures->cpu_seconds);
  add("process_resident_memory_bytes", "resident memory size, in bytes",
      prom::MetricType::Gauge, figures->resident_bytes);
  add("process_virtual_memory_bytes", "virtual memory size, in bytes",
      prom::MetricType::Gauge, figures->virtual_bytes);
  add("process_open_fds", "open file descriptors",
      prom::MetricType::Gauge, figures->open_fds);
  add("process_max_fds", "the limit on open file descriptors",
      prom::MetricType::Gauge, figures->max_fds);
  add("process_start_time_seconds",
      "when the node's process started, in seconds since the Unix epoch",
      prom::MetricType::Gauge, figures->start_time_seconds);
}

/// What a scrape reads: asked on prometheus-cpp's HTTP threads, several
/// scrapes at once.
class node_collectable : public prom::Collectable {
public:
  node_collectable(caf::actor_system& sys, node_actor gateway,
                   std::shared_ptr<storage::database> db)
    : sys_(sys), gateway_(std::move(gateway)), db_(std::move(db)) {
    // nop
  }

  std::vector<prom::MetricFamily> Collect() const override {
    std::vector<prom::MetricFamily> result;
    auto answered = false;
    caf::scoped_actor self{sys_};
    self->request(gateway_, stats_timeout, stats_atom::value)
      .receive(
        [&](node_stats& stats) {
          answered = true;
          for (const auto& metric : stats_metrics(stats))
            result.push_back(to_family(metric));
        },
        [&](caf::error& err) {
          spdlog::warn("metrics: no stats from the gateway: {}",
                       sys_.render(err));
        });
    auto up = family("coalesce_stats_up",
                     "1 when the node answered this scrape's stats request "
                     "in time; without it the node_stats metrics are absent",
                     prom::MetricType::Gauge);
    up.metric.push_back(gauge_value(answered ? 1 : 0));
    result.push_back(std::move(up));
    add_database_metrics(result, *db_);
    add_process_metrics(result);
    return result;
  }

private:
  caf::actor_system& sys_;
  node_actor gateway_;
  std::shared_ptr<storage::database> db_;
};

/// HTTP worker threads. civetweb gives each connection a worker until its
/// request is read and answered, so a client that connects and sends
/// nothing (or part of a request, or never reads the answer) holds one:
/// with a single worker one such client kept every scrape out for
/// civetweb's default 30 s request timeout (app.hostile_clients).
constexpr const char* metrics_http_threads = "16";

/// How long a worker waits for a whole request, or for a client to take the
/// answer, before it closes the connection. A scraper on the same host sends
/// its request at once; a held connection costs a worker this long.
constexpr const char* metrics_request_timeout_ms = "2000";

/// civetweb's form of a listening address: an IPv6 one in brackets.
std::string listening_address(const std::string& host, uint16_t port) {
  auto address = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return address + ":" + std::to_string(port);
}

} // namespace

struct metrics_exporter::state {
  std::shared_ptr<node_collectable> collectable;
  /// Declared last, destroyed first: no scrape runs once the rest goes.
  std::unique_ptr<prom::Exposer> exposer;
  std::string address;
};

metrics_exporter::metrics_exporter(std::unique_ptr<state> x)
  : state_(std::move(x)) {
  // nop
}

metrics_exporter::~metrics_exporter() {
  state_->exposer.reset();
}

const std::string& metrics_exporter::address() const {
  return state_->address;
}

caf::expected<std::unique_ptr<metrics_exporter>>
start_metrics(caf::actor_system& sys, node_actor gateway,
              std::shared_ptr<storage::database> db, const std::string& host,
              const metrics_options& options) {
  if (options.port == 0)
    return std::unique_ptr<metrics_exporter>{};
  auto result = std::make_unique<metrics_exporter::state>();
  result->address = listening_address(host, options.port);
  result->collectable = std::make_shared<node_collectable>(
    sys, std::move(gateway), std::move(db));
  try {
    result->exposer = std::make_unique<prom::Exposer>(std::vector<std::string>{
      "listening_ports", result->address, "num_threads", metrics_http_threads,
      "request_timeout_ms", metrics_request_timeout_ms});
  } catch (const std::exception& err) {
    return make_error(errc::invalid_request,
                      "coalesce.metrics-port = " + std::to_string(options.port)
                        + ": cannot serve metrics on " + result->address
                        + ": " + err.what());
  }
  result->exposer->RegisterCollectable(result->collectable);
  return std::make_unique<metrics_exporter>(std::move(result));
}

} // namespace coalesce
