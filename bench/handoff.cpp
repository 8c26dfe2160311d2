// scripts/bench handoff: what handing a node that joins its keys costs,
// beside RocksDB's own scan-and-write of the same rows.
// - handoff: two coalesce-node children keep every chat (a list of the two,
//   coalesce.replicas 2), loaded with `entries` secrets through the cluster
//   client (bench/secret_load.hpp). A third starts with an empty directory
//   under the list of all three and coalesce.replicas 3: a replica of every
//   chat, it catches up from the two, which still serve the old list and
//   hand it off every row (docs/operating.md, "Changing the list"). Its
//   rate is the keys it logged as refilled over the catch-up's own time
//   (from its start to the last peer's exchange: the second peer's digests
//   show the rows held, and it sends none), in keys and in bytes (each
//   row's encoded key and value) per second.
// - scan_write: the same rows, the RocksDB way: one of the two stopped, its
//   directory opened with coalesce's storage, every secret scanned and
//   written into a fresh database in batches of `batch` rows, synced, as the
//   node writes.
// The legs are measured `rounds` times, best compared with best; the last
// line is one JSON object.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/client/cluster_client.hpp>
#include <coalesce/messages/registration.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/secret_codec.hpp>
#include <coalesce/storage/secret_store.hpp>

#include "node_process.hpp"
#include "secret_load.hpp"

using namespace coalesce;

namespace {

using bench::round2;

struct bench_config : caf::actor_system_config, bench::load_options {
  std::size_t write_batch = 4096;

  bench_config() : load_options{100'000, 256, 16, 2} {
    register_message_types(*this);
    load<caf::io::middleman>();
    set("scheduler.policy", caf::atom("sharing"));
    caf::config_option_adder adder{custom_options_, "bench"};
    add_to(adder);
    adder.add(write_batch, "write-batch",
              "rows in one write batch of the scan-and-write baseline");
  }
};

[[noreturn]] void fail(const std::string& what) {
  bench::fail_bench("handoff", what);
}

struct measurement {
  uint64_t keys = 0;
  double handoff_seconds = 0;
  uint64_t bytes = 0;
  double scan_write_seconds = 0;

  double handoff_keys_per_s() const {
    return static_cast<double>(keys) / handoff_seconds;
  }

  double scan_write_keys_per_s() const {
    return static_cast<double>(keys) / scan_write_seconds;
  }
};

/// `["127.0.0.1:P",...]` of the first `count` ports.
std::string list_of(const std::vector<uint16_t>& ports, std::size_t count) {
  std::string list;
  for (std::size_t i = 0; i < count; ++i)
    list += (list.empty() ? "[\"" : ",\"") + std::string{"127.0.0.1:"}
            + std::to_string(ports[i]) + "\"";
  return list + "]";
}

/// Waits for `node`'s refill line; its keys and milliseconds.
std::pair<uint64_t, double> await_refill(const bench::node_process& node) {
  static const std::regex refilled{
    "secrets: refilled the empty data directory from its peers: ([0-9]+) "
    "keys in ([0-9]+) ms"};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes{5};
  for (;;) {
    std::smatch found;
    auto log = node.log_text();
    if (std::regex_search(log, found, refilled))
      return {std::stoull(found[1]), std::stod(found[2])};
    if (std::chrono::steady_clock::now() > deadline)
      fail("the joining node did not refill within 5 minutes:\n" + log);
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
}

/// Scans the secrets of the database at `from` and writes them into a fresh
/// one at `to`, `batch` rows a synced write batch: the seconds it took, and
/// the bytes of the rows (their encoded keys and values) into `bytes`.
double scan_and_write(const std::string& from, const std::string& to,
                      std::size_t batch, uint64_t& keys, uint64_t& bytes) {
  auto source = storage::database::open(storage::database_options{from});
  if (!source)
    fail("cannot open " + from + ": " + to_string(source.error()));
  auto target = storage::database::open(storage::database_options{to});
  if (!target)
    fail("cannot open " + to + ": " + to_string(target.error()));
  keys = 0;
  bytes = 0;
  auto start = bench::load_clock::now();
  std::vector<secret_write> rows;
  caf::error failed;
  auto write = [&] {
    if (!failed && !rows.empty())
      failed = storage::write_secrets(**target, rows);
    rows.clear();
  };
  auto err = storage::scan_secrets(**source, [&](const secret_write& row) {
    ++keys;
    bytes += storage::encode_secret_key(row.entry.key()).size()
             + storage::encode_secret_value(row).size();
    rows.push_back(row);
    if (rows.size() == batch)
      write();
  });
  write();
  auto took = bench::seconds_since(start);
  if (err || failed)
    fail("the scan-and-write failed: " + to_string(err ? err : failed));
  return took;
}

measurement measure(caf::actor_system& sys, const bench_config& cfg) {
  auto ports = bench::free_ports("handoff", 3);
  auto pair = list_of(ports, 2);
  std::vector<std::unique_ptr<bench::temp_dir>> dirs;
  std::vector<std::unique_ptr<bench::node_process>> nodes;
  for (std::size_t i = 0; i < 2; ++i) {
    dirs.push_back(std::make_unique<bench::temp_dir>(cfg.dir, "handoff"));
    nodes.push_back(std::make_unique<bench::node_process>(
      "handoff", cfg.node, dirs.back()->path(),
      std::vector<std::string>{"--coalesce.port=" + std::to_string(ports[i]),
                               "--coalesce.cluster=" + pair,
                               "--coalesce.replicas=2"}));
  }
  cluster_map map;
  if (auto problem = cluster_map::parse(
        {"127.0.0.1:" + std::to_string(ports[0]),
         "127.0.0.1:" + std::to_string(ports[1])},
        "cluster", map))
    fail(*problem);
  auto client = spawn_cluster_client(sys, map, std::chrono::seconds{30}, 2);
  bench::drive_load(sys, "handoff", caf::actor_cast<caf::actor>(client),
                    cfg.entries, cfg.batch, cfg.window);
  caf::anon_send_exit(client, caf::exit_reason::user_shutdown);
  dirs.push_back(std::make_unique<bench::temp_dir>(cfg.dir, "handoff"));
  bench::node_process joining{
    "handoff", cfg.node, dirs.back()->path(),
    std::vector<std::string>{"--coalesce.port=" + std::to_string(ports[2]),
                             "--coalesce.cluster=" + list_of(ports, 3),
                             "--coalesce.replicas=3"}};
  measurement result;
  auto [keys, ms] = await_refill(joining);
  result.keys = keys;
  result.handoff_seconds = ms / 1000;
  if (!joining.stop() || !nodes[1]->stop() || !nodes[0]->stop())
    fail("a node did not stop cleanly");
  uint64_t scanned = 0;
  result.scan_write_seconds
    = scan_and_write(dirs[0]->path() + "/db", dirs[2]->path() + "/copy",
                     cfg.write_batch, scanned, result.bytes);
  if (scanned != keys)
    fail("the joining node refilled " + std::to_string(keys)
         + " keys, but the source holds " + std::to_string(scanned));
  return result;
}

} // namespace

int main(int argc, char** argv) {
  bench_config cfg;
  if (auto err = cfg.parse(argc, argv))
    fail("invalid options: " + to_string(err));
  if (cfg.cli_helptext_printed)
    return EXIT_SUCCESS;
  cfg.check("handoff");
  if (cfg.write_batch == 0)
    fail("--bench.write-batch must be positive");
  // RocksDB's own lines, which coalesce's storage logs at info, would bury
  // the rounds' lines.
  spdlog::set_level(spdlog::level::warn);
  caf::actor_system sys{cfg};
  std::vector<measurement> runs;
  for (std::size_t round = 1; round <= cfg.rounds; ++round) {
    auto& run = runs.emplace_back(measure(sys, cfg));
    std::cout << "round " << round << ": handoff of " << run.keys << " keys ("
              << run.bytes << " bytes) in " << round2(run.handoff_seconds)
              << " s: " << std::lround(run.handoff_keys_per_s())
              << " keys/s; scan-and-write " << round2(run.scan_write_seconds)
              << " s: " << std::lround(run.scan_write_keys_per_s())
              << " keys/s" << std::endl;
  }
  auto by_handoff = [](auto& x, auto& y) {
    return x.handoff_keys_per_s() < y.handoff_keys_per_s();
  };
  auto by_baseline = [](auto& x, auto& y) {
    return x.scan_write_keys_per_s() < y.scan_write_keys_per_s();
  };
  const auto& best = *std::max_element(runs.begin(), runs.end(), by_handoff);
  const auto& base = *std::max_element(runs.begin(), runs.end(), by_baseline);
  auto bytes_per_s = [](const measurement& run, double seconds) {
    return static_cast<double>(run.bytes) / seconds;
  };
  nlohmann::ordered_json summary{
    {"bench", "handoff"},
    {"entries", cfg.entries},
    {"rounds", cfg.rounds},
    {"write_batch", cfg.write_batch},
    {"keys", best.keys},
    {"bytes", best.bytes},
    {"handoff_keys_per_s", std::round(best.handoff_keys_per_s())},
    {"handoff_bytes_per_s",
     std::round(bytes_per_s(best, best.handoff_seconds))},
    {"scan_write_keys_per_s", std::round(base.scan_write_keys_per_s())},
    {"scan_write_bytes_per_s",
     std::round(bytes_per_s(base, base.scan_write_seconds))},
    {"handoff_vs_scan_write",
     round2(best.handoff_keys_per_s() / base.scan_write_keys_per_s())},
    {"load_average", bench::load_average()},
  };
  std::cout << summary.dump() << std::endl;
  return EXIT_SUCCESS;
}
