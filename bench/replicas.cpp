// scripts/bench replicas: what keeping every chat's secrets on three nodes
// costs. The same load (bench/secret_load.hpp: batches queued with a window
// in flight, then one flush) two ways, in one run:
// - single: one coalesce-node child alone, through connect_node;
// - replicated: three coalesce-node children on 127.0.0.1 with one
//   coalesce.cluster list and coalesce.replicas 3 (every chat on all three),
//   each with a third of the host's cores for its scheduler (at least one),
//   through the cluster client, each `queue` answered once two of the three
//   hold it.
// Durable rows per second until the flush answered, the `queue` p99, and CPU
// per row of every process involved (the client and the nodes; the client's
// share apart, as the cluster client routes what one node would not), and
// the requests the nodes sent each other per 1,000 rows (their stats'
// `replica_requests`: a coordinator's copies, many queues' in one). Three
// replicas on one 2-core machine triple the writes: the targets are
// replicated_vs_single >= 0.3 and cpu_per_row_vs_single <= 3.5. Then, on
// the same nodes, persists of `sessions` sessions (bench/persist_load.hpp),
// each answered once a majority of the session's replicas stored it:
// persists per second, persist p99 and CPU per persist, with the same
// targets. The legs are interleaved for `rounds` rounds: throughput and p99
// best compared with best, CPU per row and per persist as the mean of all
// rounds (the fastest round is a pick by speed, and the least CPU a pick
// by chance); the replicated leg starts once every node caught up from its
// peers
// (a fresh node does once). The client runs CAF's scheduler with work
// sharing, as the nodes do (docs/configuration.md, "The scheduler"). The
// last line is one JSON object.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <nlohmann/json.hpp>

#include <coalesce/client/cluster_client.hpp>
#include <coalesce/client/connect.hpp>
#include <coalesce/messages/registration.hpp>

#include "node_process.hpp"
#include "persist_load.hpp"
#include "secret_load.hpp"

using namespace coalesce;

namespace {

using bench::round2;

struct bench_config : caf::actor_system_config, bench::load_options {
  std::size_t sessions = 64;
  std::size_t persists = 20'000;
  /// Persists in flight: one per session, so that group commits form on
  /// both sides as they would under many clients.
  std::size_t persist_window = 64;

  bench_config() : load_options{100'000, 256, 16, 3} {
    register_message_types(*this);
    load<caf::io::middleman>();
    // The client shares the two cores with three nodes: as they do, it
    // parks idle workers instead of polling (app/node_config.cpp).
    set("scheduler.policy", caf::atom("sharing"));
    caf::config_option_adder adder{custom_options_, "bench"};
    add_to(adder);
    adder.add(sessions, "sessions", "sessions of the persist leg")
      .add(persists, "persists", "persists per measurement")
      .add(persist_window, "persist-window", "persists in flight");
  }
};

[[noreturn]] void fail(const std::string& what) {
  bench::fail_bench("replicas", what);
}

struct measurement {
  double rows_per_s = 0;
  double queue_p99_ms = 0;
  double cpu_seconds = 0;
  /// The part of `cpu_seconds` this process (the client) used.
  double client_cpu_seconds = 0;
  double persists_per_s = 0;
  double persist_p99_ms = 0;
  double persist_cpu_seconds = 0;
  /// Requests the nodes sent each other during the secrets leg (a
  /// coordinator's copies; the replicated leg only), as their stats count
  /// them.
  uint64_t peer_requests = 0;
};

/// The persist leg against `target`, its CPU as `cpu()` counts it.
template <class Cpu>
void measure_persists(caf::actor_system& sys, const bench_config& cfg,
                      caf::actor target, Cpu cpu, measurement& result) {
  auto before = cpu();
  auto load = bench::drive_persists(sys, "replicas", std::move(target),
                                    cfg.sessions, cfg.persists,
                                    cfg.persist_window);
  result.persists_per_s = load.persists_per_s;
  result.persist_p99_ms = load.persist_p99_ms;
  result.persist_cpu_seconds = cpu() - before;
}

measurement measure_single(caf::actor_system& sys, const bench_config& cfg) {
  bench::temp_dir dir{cfg.dir, "single"};
  bench::node_process node{"replicas", cfg.node, dir.path(), {}};
  auto gateway = connect_node(sys, "127.0.0.1", node.port(),
                              std::chrono::seconds{10});
  if (!gateway)
    fail(unreachable_sentence(sys, gateway.error()));
  auto client_before = bench::own_cpu_seconds();
  auto cpu_before = client_before + node.cpu_seconds();
  auto load = bench::drive_load(sys, "replicas",
                                caf::actor_cast<caf::actor>(*gateway),
                                cfg.entries, cfg.batch, cfg.window);
  measurement result;
  result.rows_per_s = load.rows_per_s;
  result.queue_p99_ms = load.queue_p99_ms;
  result.client_cpu_seconds = bench::own_cpu_seconds() - client_before;
  result.cpu_seconds = bench::own_cpu_seconds() + node.cpu_seconds()
                       - cpu_before;
  measure_persists(
    sys, cfg, caf::actor_cast<caf::actor>(*gateway),
    [&] { return bench::own_cpu_seconds() + node.cpu_seconds(); }, result);
  return result;
}

node_stats stats_of(caf::actor_system& sys, uint16_t port) {
  auto gateway = connect_node(sys, "127.0.0.1", port, std::chrono::seconds{10});
  if (!gateway)
    fail(unreachable_sentence(sys, gateway.error()));
  caf::scoped_actor self{sys};
  node_stats result;
  self->request(*gateway, std::chrono::seconds{10}, stats_atom::value)
    .receive([&](node_stats& stats) { result = std::move(stats); },
             [&](const caf::error& err) { fail(sys.render(err)); });
  return result;
}

/// The replica requests every node at `ports` sent its peers so far.
uint64_t peer_requests_of(caf::actor_system& sys,
                          const std::vector<uint16_t>& ports) {
  uint64_t total = 0;
  for (auto port : ports)
    total += stats_of(sys, port).replica_requests;
  return total;
}

/// Waits until the node at `port` caught up from its peers: a fresh node
/// does once, and refuses reads and writes of sessions until it has.
void await_caught_up(caf::actor_system& sys, uint16_t port) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
  caf::scoped_actor self{sys};
  for (;;) {
    if (stats_of(sys, port).catching_up == 0)
      return;
    if (std::chrono::steady_clock::now() > deadline)
      fail("the node on port " + std::to_string(port)
           + " did not catch up from its peers within 60 s");
    self->receive(caf::after(std::chrono::milliseconds{50}) >> [] {});
  }
}

measurement measure_replicated(caf::actor_system& sys,
                               const bench_config& cfg) {
  auto ports = bench::free_ports("replicas", 3);
  std::string list;
  std::vector<std::string> entries;
  for (auto port : ports) {
    entries.push_back("127.0.0.1:" + std::to_string(port));
    list += (list.empty() ? "[\"" : ",\"") + entries.back() + "\"";
  }
  list += "]";
  std::vector<std::unique_ptr<bench::temp_dir>> dirs;
  std::vector<std::unique_ptr<bench::node_process>> nodes;
  // Three nodes share this host: each gets its share of the cores for its
  // scheduler, as docs/configuration.md advises for nodes on one host (the
  // single leg's node has the host alone and CAF's default).
  auto threads_of_a_shared_host
    = "--scheduler.max-threads="
      + std::to_string(std::max(1u, std::thread::hardware_concurrency()
                                      / static_cast<unsigned>(ports.size())));
  for (auto port : ports) {
    dirs.push_back(std::make_unique<bench::temp_dir>(cfg.dir, "replica"));
    nodes.push_back(std::make_unique<bench::node_process>(
      "replicas", cfg.node, dirs.back()->path(),
      std::vector<std::string>{"--coalesce.port=" + std::to_string(port),
                               "--coalesce.cluster=" + list,
                               "--coalesce.replicas=3",
                               threads_of_a_shared_host}));
  }
  for (auto port : ports)
    await_caught_up(sys, port);
  cluster_map map;
  if (auto problem = cluster_map::parse(entries, "cluster", map))
    fail(*problem);
  auto client = spawn_cluster_client(sys, map, std::chrono::seconds{30}, 3);
  auto cpu_of_all = [&] {
    auto total = bench::own_cpu_seconds();
    for (auto& node : nodes)
      total += node->cpu_seconds();
    return total;
  };
  auto requests_before = peer_requests_of(sys, ports);
  auto client_before = bench::own_cpu_seconds();
  auto cpu_before = cpu_of_all();
  auto load = bench::drive_load(sys, "replicas",
                                caf::actor_cast<caf::actor>(client),
                                cfg.entries, cfg.batch, cfg.window);
  measurement result;
  result.peer_requests = peer_requests_of(sys, ports) - requests_before;
  result.rows_per_s = load.rows_per_s;
  result.queue_p99_ms = load.queue_p99_ms;
  result.client_cpu_seconds = bench::own_cpu_seconds() - client_before;
  result.cpu_seconds = cpu_of_all() - cpu_before;
  measure_persists(sys, cfg, caf::actor_cast<caf::actor>(client), cpu_of_all,
                   result);
  caf::anon_send_exit(client, caf::exit_reason::user_shutdown);
  return result;
}

const measurement& best(const std::vector<measurement>& runs) {
  return *std::max_element(runs.begin(), runs.end(), [](auto& x, auto& y) {
    return x.rows_per_s < y.rows_per_s;
  });
}

double cpu_us_per_row(const bench_config& cfg, const measurement& run) {
  return run.cpu_seconds * 1e6 / static_cast<double>(cfg.entries);
}

double cpu_us_per_persist(const bench_config& cfg, const measurement& run) {
  return run.persist_cpu_seconds * 1e6 / static_cast<double>(cfg.persists);
}

/// The CPU seconds `field` of all `runs` in microseconds per unit of work,
/// each round doing `per_round` units: the mean of the rounds.
double mean_us_per(const std::vector<measurement>& runs,
                   double measurement::*field, std::size_t per_round) {
  double seconds = 0;
  for (const auto& run : runs)
    seconds += run.*field;
  return seconds * 1e6 / static_cast<double>(per_round * runs.size());
}

const measurement& best_persists(const std::vector<measurement>& runs) {
  return *std::max_element(runs.begin(), runs.end(), [](auto& x, auto& y) {
    return x.persists_per_s < y.persists_per_s;
  });
}

} // namespace

int main(int argc, char** argv) {
  bench_config cfg;
  if (auto err = cfg.parse(argc, argv))
    fail("invalid options: " + to_string(err));
  if (cfg.cli_helptext_printed)
    return EXIT_SUCCESS;
  cfg.check("replicas");
  // The persist leg never ends without a session or a persist to wait for.
  if (cfg.sessions == 0 || cfg.persists == 0 || cfg.persist_window == 0)
    fail("--bench.sessions, --bench.persists and --bench.persist-window "
         "must be positive");
  caf::actor_system sys{cfg};
  std::vector<measurement> single;
  std::vector<measurement> replicated;
  for (std::size_t round = 1; round <= cfg.rounds; ++round) {
    auto& one = single.emplace_back(measure_single(sys, cfg));
    auto& three = replicated.emplace_back(measure_replicated(sys, cfg));
    std::cout << "round " << round << " single: " << std::lround(one.rows_per_s)
              << " rows/s, queue p99 " << round2(one.queue_p99_ms) << " ms, "
              << round2(cpu_us_per_row(cfg, one)) << " us CPU/row; replicated: "
              << std::lround(three.rows_per_s) << " rows/s, queue p99 "
              << round2(three.queue_p99_ms) << " ms, "
              << round2(cpu_us_per_row(cfg, three)) << " us CPU/row"
              << std::endl;
    std::cout << "round " << round << " single: "
              << std::lround(one.persists_per_s) << " persists/s, p99 "
              << round2(one.persist_p99_ms) << " ms, "
              << round2(cpu_us_per_persist(cfg, one))
              << " us CPU/persist; replicated: "
              << std::lround(three.persists_per_s) << " persists/s, p99 "
              << round2(three.persist_p99_ms) << " ms, "
              << round2(cpu_us_per_persist(cfg, three)) << " us CPU/persist"
              << std::endl;
  }
  const auto& one = best(single);
  const auto& three = best(replicated);
  const auto& one_p = best_persists(single);
  const auto& three_p = best_persists(replicated);
  auto single_row_cpu = mean_us_per(single, &measurement::cpu_seconds,
                                    cfg.entries);
  auto replicated_row_cpu = mean_us_per(replicated, &measurement::cpu_seconds,
                                        cfg.entries);
  auto single_persist_cpu = mean_us_per(
    single, &measurement::persist_cpu_seconds, cfg.persists);
  auto replicated_persist_cpu = mean_us_per(
    replicated, &measurement::persist_cpu_seconds, cfg.persists);
  nlohmann::ordered_json summary{
    {"bench", "replicas"},
    {"entries", cfg.entries},
    {"batch", cfg.batch},
    {"window", cfg.window},
    {"rounds", cfg.rounds},
    {"replicas", 3},
    {"single_rows_per_s", std::round(one.rows_per_s)},
    {"replicated_rows_per_s", std::round(three.rows_per_s)},
    {"replicated_vs_single", round2(three.rows_per_s / one.rows_per_s)},
    {"single_queue_p99_ms", round2(one.queue_p99_ms)},
    {"replicated_queue_p99_ms", round2(three.queue_p99_ms)},
    {"single_cpu_us_per_row", round2(single_row_cpu)},
    {"replicated_cpu_us_per_row", round2(replicated_row_cpu)},
    {"cpu_per_row_vs_single", round2(replicated_row_cpu / single_row_cpu)},
    {"single_client_cpu_us_per_row",
     round2(mean_us_per(single, &measurement::client_cpu_seconds,
                        cfg.entries))},
    {"replicated_client_cpu_us_per_row",
     round2(mean_us_per(replicated, &measurement::client_cpu_seconds,
                        cfg.entries))},
    {"replicated_peer_requests_per_1000_rows",
     round2(static_cast<double>(three.peer_requests) * 1000.0
            / static_cast<double>(cfg.entries))},
    {"sessions", cfg.sessions},
    {"persists", cfg.persists},
    {"persist_window", cfg.persist_window},
    {"single_persists_per_s", std::round(one_p.persists_per_s)},
    {"replicated_persists_per_s", std::round(three_p.persists_per_s)},
    {"persists_replicated_vs_single",
     round2(three_p.persists_per_s / one_p.persists_per_s)},
    {"single_persist_p99_ms", round2(one_p.persist_p99_ms)},
    {"replicated_persist_p99_ms", round2(three_p.persist_p99_ms)},
    {"single_cpu_us_per_persist", round2(single_persist_cpu)},
    {"replicated_cpu_us_per_persist", round2(replicated_persist_cpu)},
    {"persist_cpu_vs_single",
     round2(replicated_persist_cpu / single_persist_cpu)},
    {"load_average", bench::load_average()},
  };
  std::cout << summary.dump() << std::endl;
  return EXIT_SUCCESS;
}
