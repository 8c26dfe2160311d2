// coalesce-cli's `load secrets`: queues random secrets through the node and
// prints a JSON summary of throughput and latency.

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_command.hpp"

namespace coalesce {

namespace {

using json = nlohmann::ordered_json;

struct load_options {
  std::size_t count = 0;
  std::size_t concurrency = 16;
  std::size_t batch = 64;
};

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  return xs[static_cast<std::size_t>(p * (xs.size() - 1))];
}

/// `count` random secrets in chat `chat`, in batches of `batch`.
std::vector<std::vector<secret_entry>>
random_batches(const std::string& chat, std::size_t count, std::size_t batch) {
  std::vector<std::vector<secret_entry>> batches;
  std::mt19937_64 bytes{std::random_device{}()};
  for (std::size_t i = 0; i < count; i += batch) {
    std::vector<secret_entry> entries;
    for (std::size_t j = i; j < std::min(count, i + batch); ++j) {
      std::vector<uint8_t> secret(secret_size);
      for (auto& byte : secret)
        byte = static_cast<uint8_t>(bytes());
      entries.push_back(secret_entry{chat, "coalesce-cli",
                                     "M" + std::to_string(j),
                                     std::move(secret), 0, 0});
    }
    batches.push_back(std::move(entries));
  }
  return batches;
}

int load_secrets(session& s, const load_options& o) {
  if (o.count == 0)
    return usage("--count must be positive");
  if (o.concurrency == 0 || o.batch == 0)
    return usage("--concurrency and --batch must be positive");
  // A run id keeps the keys of separate runs apart.
  auto chat = "load-" + std::to_string(std::random_device{}());
  auto progress = std::make_shared<std::atomic<uint64_t>>(0);
  auto report = std::make_shared<queue_report>();
  auto started = std::chrono::steady_clock::now();
  auto pipeline = spawn_queue_pipeline(s.sys, s.node,
                                       random_batches(chat, o.count, o.batch),
                                       o.concurrency, s.timeout(), progress,
                                       report);
  await_queue_pipeline(s.sys, pipeline, *progress, o.count,
                       isatty(STDERR_FILENO));
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                               - started)
                   .count();
  json summary{
    {"command", "load secrets"},
    {"chat", chat},
    {"entries", report->entries_acknowledged},
    {"requests", report->requests},
    {"seconds", seconds},
    {"entries_per_s", report->entries_acknowledged / seconds},
    {"latency_p50_us", percentile(report->latencies_us, 0.50)},
    {"latency_p99_us", percentile(report->latencies_us, 0.99)},
    {"errors", report->errors},
  };
  std::cout << summary.dump() << '\n';
  if (report->errors > 0)
    return fail(s.failure(report->first_error));
  return exit_ok;
}

void add_load_commands(CLI::App& app, cli_commands& commands) {
  auto load = app.add_subcommand("load", "drive a workload");
  load->require_subcommand(1);
  auto o = std::make_shared<load_options>();
  auto secrets = load->add_subcommand(
    "secrets", "queue --count random secrets and print a JSON summary");
  secrets->add_option("--count", o->count, "entries to queue")->required();
  secrets->add_option("--concurrency", o->concurrency, "requests in flight")
    ->capture_default_str();
  secrets->add_option("--batch", o->batch, "entries per request")
    ->capture_default_str();
  commands.push_back({secrets, [o](session& s) {
                        return load_secrets(s, *o);
                      }});
}

} // namespace

const bool registered = register_command_group(add_load_commands);

} // namespace coalesce
