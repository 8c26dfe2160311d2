#define CAF_SUITE node.metrics
#include <caf/test/unit_test.hpp>

#include <coalesce/node/metrics.hpp>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>
#include <coalesce/storage/latency_recorder.hpp>
#include <coalesce/storage/secret_store.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

const stats_metric* find_metric(const std::vector<stats_metric>& metrics,
                                const std::string& name) {
  auto i = std::find_if(metrics.begin(), metrics.end(),
                        [&](const stats_metric& x) { return x.name == name; });
  return i == metrics.end() ? nullptr : &*i;
}

/// The value of the sample of `name` labelled `label` (empty: unlabelled).
double sample_of(const std::vector<stats_metric>& metrics,
                 const std::string& name, const std::string& label = {}) {
  auto metric = find_metric(metrics, name);
  if (metric == nullptr)
    CAF_FAIL("no metric " << name);
  for (const auto& sample : metric->samples) {
    auto text = sample.labels.empty() ? std::string{}
                                      : sample.labels[0].first + "="
                                          + sample.labels[0].second;
    if (text == label)
      return sample.value;
  }
  CAF_FAIL("no sample " << label << " of " << name);
  return -1;
}

std::vector<secret_write> one_batch(const std::string& prefix) {
  std::vector<secret_write> result;
  for (int i = 0; i < 10; ++i)
    result.push_back(capture(make_entry(prefix + std::to_string(i),
                                        static_cast<uint8_t>(i + 1)),
                             1));
  return result;
}

std::shared_ptr<database> open_db(const temp_dir& dir,
                                  std::shared_ptr<fault_switches> faults
                                  = nullptr) {
  auto opened = database::open(
    {dir.sub("db"), durability::synced,
     faults ? make_fault_injecting_file_system(faults) : nullptr});
  if (!opened)
    CAF_FAIL("open failed: " << to_string(opened.error()));
  return *opened;
}

} // namespace

CAF_TEST(the stats counters are counters named by prometheus conventions) {
  node_stats stats;
  stats.secret_buffer.batches_written = 12;
  stats.session_persister.fsyncs = 3;
  stats.refused_requests = 2;
  auto metrics = stats_metrics(stats);
  auto batches = find_metric(metrics, "coalesce_secret_batches_written_total");
  CAF_REQUIRE(batches != nullptr);
  CAF_CHECK(batches->kind == metric_kind::counter);
  CAF_CHECK_EQUAL(batches->field, "secrets.batches_written");
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_secret_batches_written_total"),
                  12.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_session_fsyncs_total"), 3.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_refused_requests_total"), 2.0);
}

CAF_TEST(queue lengths are gauges labelled by priority) {
  node_stats stats;
  stats.backfill_scheduler.queued = {4, 5, 6};
  stats.backfill_scheduler.running = 2;
  stats.secret_buffer.pending = 9;
  stats.shutting_down = true;
  auto metrics = stats_metrics(stats);
  auto queued = find_metric(metrics, "coalesce_scheduler_queued");
  CAF_REQUIRE(queued != nullptr);
  CAF_CHECK(queued->kind == metric_kind::gauge);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_scheduler_queued",
                            "priority=low"),
                  4.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_scheduler_queued",
                            "priority=high"),
                  6.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_scheduler_running"), 2.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_secret_pending"), 9.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_shutting_down"), 1.0);
  CAF_CHECK(find_metric(metrics, "coalesce_scheduler_running_total")
            == nullptr);
}

CAF_TEST(finished runs are counted per stop reason) {
  node_stats stats;
  stats.backfill_scheduler.finished[static_cast<std::size_t>(stop_reason::failed)] = 7;
  auto metrics = stats_metrics(stats);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_scheduler_finished_total",
                            "reason=failed"),
                  7.0);
}

CAF_TEST(replica requests and peers down are labelled by the peer address) {
  node_stats stats;
  stats.cluster = {"10.0.0.1:4300", "10.0.0.2:4300", "10.0.0.3:4300"};
  stats.peer_down = {0, 1, 0};
  stats.replica_requests_by_peer = {0, 40, 50};
  stats.replica_failures_by_peer = {0, 7, 0};
  auto metrics = stats_metrics(stats);
  auto down = find_metric(metrics, "coalesce_peer_down");
  CAF_REQUIRE(down != nullptr);
  CAF_CHECK(down->kind == metric_kind::gauge);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_peer_down",
                            "peer=10.0.0.2:4300"),
                  1.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_peer_down",
                            "peer=10.0.0.3:4300"),
                  0.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_replica_requests_by_peer_total",
                            "peer=10.0.0.3:4300"),
                  50.0);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_replica_failures_by_peer_total",
                            "peer=10.0.0.2:4300"),
                  7.0);
  // The addresses are text: no metric of their own.
  CAF_CHECK(find_metric(metrics, "coalesce_cluster") == nullptr);
  CAF_CHECK(find_metric(metrics, "coalesce_cluster_total") == nullptr);
  // The stats line names each peer by its address too.
  auto line = flat_fields(stats);
  CAF_CHECK_NOT_EQUAL(line.find("replica_failures_by_peer.10.0.0.2:4300=7"),
                      std::string::npos);
}

CAF_TEST(durations are in seconds and sizes in bytes at the name end) {
  node_stats stats;
  stats.uptime_s = 90;
  stats.secret_buffer.last_write_latency_us = 1500;
  stats.secret_buffer.failing_for_ms = 250;
  stats.backfill_scheduler.events_bytes_held = 4096;
  auto metrics = stats_metrics(stats);
  // The process's start time stands for it (process_start_time_seconds).
  CAF_CHECK(std::none_of(metrics.begin(), metrics.end(),
                         [](const stats_metric& x) {
                           return x.field == "uptime_s";
                         }));
  CAF_CHECK_EQUAL(
    sample_of(metrics, "coalesce_secret_last_write_latency_seconds"), 0.0015);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_secret_failing_for_seconds"),
                  0.25);
  CAF_CHECK_EQUAL(sample_of(metrics, "coalesce_scheduler_events_held_bytes"),
                  4096.0);
}

CAF_TEST(every numeric stats field is one well named metric) {
  node_stats stats;
  auto metrics = stats_metrics(stats);
  std::regex valid{"^coalesce_[a-z][a-z0-9_]*[a-z0-9]$"};
  std::set<std::string> names;
  for (const auto& metric : metrics) {
    CAF_CHECK(std::regex_match(metric.name, valid));
    CAF_CHECK(names.insert(metric.name).second);
    auto counter_name = metric.name.size() > 6
                        && metric.name.compare(metric.name.size() - 6, 6,
                                               "_total")
                             == 0;
    CAF_CHECK_EQUAL(counter_name, metric.kind == metric_kind::counter);
  }
  // Every word of the stats line is a metric's field (or one index of it),
  // the text fields excepted.
  std::istringstream words{flat_fields(stats)};
  for (std::string word; words >> word;) {
    auto field = word.substr(0, word.find('='));
    if (field == "secrets.last_error" || field == "cluster"
        || field == "uptime_s")
      continue;
    auto covered = std::any_of(metrics.begin(), metrics.end(),
                               [&](const stats_metric& x) {
                                 return field == x.field
                                        || field.rfind(x.field + ".", 0) == 0;
                               });
    if (!covered)
      CAF_FAIL("no metric for the stats field " << field);
  }
  // A renamed field must not silently turn a gauge into a counter.
  for (const auto& gauge : gauge_fields()) {
    if (gauge == "uptime_s")
      continue; // no metric (see above)
    auto listed = std::any_of(metrics.begin(), metrics.end(),
                              [&](const stats_metric& x) {
                                return x.field == gauge
                                       && x.kind == metric_kind::gauge;
                              });
    if (!listed)
      CAF_FAIL("gauge_fields names " << gauge << ", which no field is");
  }
}

CAF_TEST(each metric says what it measures in the doc comment of its field) {
  node_stats stats;
  auto metrics = stats_metrics(stats);
  for (const auto& metric : metrics)
    if (metric.help.empty())
      CAF_FAIL("no HELP for " << metric.name << " (" << metric.field << ")");
  auto help_of = [&](const std::string& field) {
    for (const auto& metric : metrics)
      if (metric.field == field)
        return metric.help;
    return std::string{};
  };
  CAF_CHECK_EQUAL(help_of("secrets.pending"),
                  "Distinct keys waiting to be written.");
  CAF_CHECK_EQUAL(help_of("sessions.fsyncs"),
                  "Synced batches (one fsync each): groups and deletes "
                  "written with durability synced.");
  CAF_CHECK_EQUAL(help_of("peer_losses"),
                  "Times a peer this node had reached went down (lost or "
                  "silent).");
  // A duration converted to seconds says so.
  auto latency = help_of("secrets.last_write_latency_us");
  CAF_CHECK(latency.find("in seconds") != std::string::npos);
  CAF_CHECK(latency.find("microseconds") == std::string::npos);
}

CAF_TEST(the latency recorder counts each duration in its inclusive bucket) {
  latency_recorder recorder;
  recorder.record(50us);                // the first bound itself
  recorder.record(50'001ns);            // just above it
  recorder.record(3ms);                 // between 2.5 ms and 5 ms
  recorder.record(20s);                 // above every bound
  recorder.record(-1ns);                // a clock going back counts as 0
  auto counts = recorder.snapshot();
  const auto& bounds = latency_recorder::upper_bounds_ns;
  auto bucket_of = [&](int64_t ns) {
    return static_cast<std::size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), ns) - bounds.begin());
  };
  CAF_CHECK_EQUAL(counts.per_bucket[0], 2u);
  CAF_CHECK_EQUAL(counts.per_bucket[1], 1u);
  CAF_CHECK_EQUAL(counts.per_bucket[bucket_of(3'000'000)], 1u);
  CAF_CHECK_EQUAL(bounds[bucket_of(3'000'000)], 5'000'000);
  CAF_CHECK_EQUAL(counts.per_bucket[latency_recorder::bucket_count - 1], 1u);
  CAF_CHECK_EQUAL(counts.total(), 5u);
  CAF_CHECK_EQUAL(counts.sum, 50us + 50'001ns + 3ms + 20s);
}

CAF_TEST(a synced write is recorded as a write and its fsync) {
  temp_dir dir;
  auto db = open_db(dir);
  auto writes_before = db->write_latency().snapshot().total();
  auto fsyncs_before = db->fsync_latency().snapshot().total();
  CAF_REQUIRE(!write_secrets(*db, one_batch("a")));
  CAF_REQUIRE(!write_secrets(*db, one_batch("b")));
  CAF_CHECK_EQUAL(db->write_latency().snapshot().total(), writes_before + 2);
  CAF_CHECK_GREATER_OR_EQUAL(db->fsync_latency().snapshot().total(),
                             fsyncs_before + 2);
  CAF_CHECK_GREATER(db->write_latency().snapshot().sum.count(), 0);
  CAF_CHECK(!db->close());
}

CAF_TEST(the database status follows a failure and its recovery) {
  temp_dir dir;
  auto faults = std::make_shared<fault_switches>();
  auto db = open_db(dir, faults);
  auto fresh = db->status();
  CAF_CHECK(fresh.state == health::healthy);
  CAF_CHECK(fresh.writable);
  CAF_CHECK(!fresh.read_only);
  faults->wal_append = true;
  auto failed = write_secrets(*db, one_batch("c"));
  CAF_REQUIRE_NOT_EQUAL(failed, caf::none);
  CAF_CHECK(!db->status().writable);
  faults->disk_full = true;
  CAF_CHECK_NOT_EQUAL(db->recover(), caf::none);
  auto down = db->status();
  CAF_CHECK(down.state == health::down);
  CAF_CHECK(!down.writable);
  CAF_CHECK_EQUAL(down.reopens, 1u);
  faults->clear();
  CAF_CHECK_EQUAL(db->recover(), caf::none);
  auto recovered = db->status();
  CAF_CHECK(recovered.state == health::healthy);
  CAF_CHECK(recovered.writable);
  CAF_CHECK(!recovered.read_only);
  CAF_CHECK_EQUAL(recovered.reopens, 2u);
  CAF_CHECK(!db->close());
}
