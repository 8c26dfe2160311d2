// scripts/bench remote: durable secret throughput, rows per second until a
// flush confirms every entry, of the same load three ways, in one run:
// - local: the services started in this process (start_services) over a
//   fresh database with durability `synced`;
// - remote: this process as a client of a real coalesce-node child on
//   127.0.0.1 (fresh data directory, port 0), through connect_node;
// - tls: the same against a node started with a certificate, the client's
//   actor system with libcaf_openssl loaded (certificates from
//   scripts/make-certs in a temporary directory).
// The load is one producer sending batches (`queue` with a vector of
// entries), keeping `window` requests in flight, then one `flush`; the node
// defaults are the settings of all three. Every measurement gets a fresh
// database (and node). The disk's fsync rate swings within minutes here, so
// the three are interleaved (local, remote, tls, local, ...) for `rounds`
// rounds and compared best with best (medians reported beside). The last
// line is one JSON object.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/client/connect.hpp>
#include <coalesce/client/tls_files.hpp>
#include <coalesce/messages/registration.hpp>
#include <coalesce/node/services.hpp>

#include "node_process.hpp"
#include "secret_load.hpp"

using namespace coalesce;

namespace {

struct bench_config : caf::actor_system_config, bench::load_options {
  std::string make_certs = COALESCE_SOURCE_DIR "/scripts/make-certs";
  bool plain_only = false;

  // A window of 16 x 256 entries fills the buffer's default pending limit
  // (4,096): over a socket the answers take longer, and with 8 in flight the
  // remote producer, not the disk, set the pace (remote_vs_local 0.78 at 8,
  // 0.94 at 16 in one run; both wrote full batches of ~2,040 rows).
  bench_config() : load_options{200'000, 256, 16, 5} {
    register_message_types(*this);
    load<caf::io::middleman>();
    caf::config_option_adder adder{custom_options_, "bench"};
    add_to(adder);
    adder.add(make_certs, "make-certs", "the scripts/make-certs script")
      .add(plain_only, "plain-only", "skip the TLS leg");
  }
};

/// The client side of the TLS leg: a second actor system, since one that
/// loaded the openssl manager connects through TLS only.
struct tls_client_config : caf::actor_system_config {
  explicit tls_client_config(const tls_files& files) {
    register_message_types(*this);
    load<caf::io::middleman>();
    load<caf::openssl::manager>();
    set_tls_files(*this, files);
  }
};

[[noreturn]] void fail(const std::string& what) {
  bench::fail_bench("remote", what);
}

/// One run of the load: its rows per second, how many RocksDB write
/// batches (fsyncs) carried them, and the CPU time every process involved
/// spent on it (the cost of the path, which other load on the machine does
/// not change the way it changes the rate).
struct measurement {
  double rows_per_s = 0;
  uint64_t write_batches = 0;
  double cpu_seconds = 0;
};

/// Rows per second of the load against `buffer`, until its flush answered.
double drive(caf::actor_system& sys, const bench_config& cfg,
             caf::actor buffer) {
  return bench::drive_load(sys, "remote", std::move(buffer), cfg.entries,
                           cfg.batch, cfg.window)
    .rows_per_s;
}

measurement measure_local(caf::actor_system& sys, const bench_config& cfg) {
  bench::temp_dir dir{cfg.dir, "local"};
  service_settings settings;
  settings.db_path = dir.path() + "/db";
  settings.durability = "synced";
  auto local = start_services(sys, settings);
  if (!local)
    fail("cannot start the services: " + sys.render(local.error()));
  measurement result;
  auto cpu_before = bench::own_cpu_seconds();
  result.rows_per_s
    = drive(sys, cfg,
            caf::actor_cast<caf::actor>((*local)->handles().secret_buffer));
  result.cpu_seconds = bench::own_cpu_seconds() - cpu_before;
  caf::scoped_actor self{sys};
  self
    ->request((*local)->service<secret_buffer_service>().actors().buffer,
              bench::load_request_timeout, stats_atom::value)
    .receive(
      [&](const secret_buffer_stats& stats) {
        result.write_batches = stats.batches_written;
      },
      [&](caf::error& err) { fail("local stats: " + sys.render(err)); });
  if (!(*local)->stop(std::chrono::seconds{60}))
    fail("the local services did not write everything");
  return result;
}

/// The remote load against a fresh node started with `node_args`, through
/// `sys` (plain or TLS); nothing if it cannot connect.
std::optional<measurement> measure_node(caf::actor_system& sys,
                                   const bench_config& cfg, const char* what,
                                   const std::vector<std::string>& node_args) {
  bench::temp_dir dir{cfg.dir, what};
  bench::node_process node{"remote", cfg.node, dir.path(), node_args};
  // The TLS leg must measure TLS: the node says how it listens.
  if (node.tls() != !node_args.empty()) {
    std::cerr << "bench remote: " << what << ": the node listens "
              << (node.tls() ? "with" : "without") << " mutual TLS\n";
    return std::nullopt;
  }
  auto gateway = connect_node(sys, "127.0.0.1", node.port(),
                              std::chrono::seconds{10});
  if (!gateway) {
    std::cerr << "bench remote: " << what << ": "
              << unreachable_sentence(sys, gateway.error()) << '\n';
    return std::nullopt;
  }
  measurement result;
  auto cpu_before = bench::own_cpu_seconds() + node.cpu_seconds();
  result.rows_per_s = drive(sys, cfg, caf::actor_cast<caf::actor>(*gateway));
  result.cpu_seconds = bench::own_cpu_seconds() + node.cpu_seconds() - cpu_before;
  caf::scoped_actor self{sys};
  self->request(*gateway, bench::load_request_timeout, stats_atom::value)
    .receive(
      [&](const node_stats& stats) {
        result.write_batches = stats.secret_buffer.batches_written;
      },
      [&](caf::error& err) { fail("node stats: " + sys.render(err)); });
  return result;
}

double median(std::vector<measurement> runs) {
  std::vector<double> xs;
  for (auto& run : runs)
    xs.push_back(run.rows_per_s);
  std::sort(xs.begin(), xs.end());
  auto n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

const measurement& best_run(const std::vector<measurement>& runs) {
  return *std::max_element(runs.begin(), runs.end(),
                           [](auto& x, auto& y) {
                             return x.rows_per_s < y.rows_per_s;
                           });
}

double best(const std::vector<measurement>& runs) {
  return best_run(runs).rows_per_s;
}

std::string rows_text(const measurement& run) {
  return std::to_string(std::lround(run.rows_per_s)) + " rows/s in "
         + std::to_string(run.write_batches) + " write batches, "
         + std::to_string(std::lround(run.cpu_seconds * 1000)) + " ms CPU";
}

std::string ratio_text(double ratio) {
  char text[16];
  std::snprintf(text, sizeof(text), "%.2f", ratio);
  return text;
}

/// Runs scripts/make-certs into `dir`; false (with a note) if it fails.
bool make_certificates(const bench_config& cfg, const std::string& dir) {
  std::string cmd = "'" + cfg.make_certs + "' '" + dir + "' >/dev/null";
  if (std::system(cmd.c_str()) == 0)
    return true;
  std::cerr << "bench remote: " << cfg.make_certs << " failed\n";
  return false;
}

/// The measurements of every round, per leg (tls empty when skipped).
struct legs {
  std::vector<measurement> local;
  std::vector<measurement> remote;
  std::vector<measurement> tls;
};

/// The TLS client: its own actor system over the client certificate of
/// `certs`; null (with a note) when the certificates cannot be made.
struct tls_client {
  std::unique_ptr<tls_client_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
};

tls_client start_tls_client(const bench_config& cfg,
                            const std::string& certs) {
  tls_client result;
  if (cfg.plain_only || !make_certificates(cfg, certs))
    return result;
  tls_files client{certs + "/client.pem", certs + "/client-key.pem", "",
                   certs + "/ca.pem", ""};
  // CAF aborts on a bad file: check first, as every client does.
  if (auto problem = check_tls_files(client); !problem.empty())
    fail("the client's TLS files: " + problem);
  result.cfg = std::make_unique<tls_client_config>(client);
  result.sys = std::make_unique<caf::actor_system>(*result.cfg);
  return result;
}

/// Local, remote and tls in turn, `rounds` times, a line per round.
legs run_rounds(caf::actor_system& sys, const bench_config& cfg,
                const std::string& certs) {
  auto client = start_tls_client(cfg, certs);
  std::vector<std::string> tls_node_args{
    "--openssl.certificate=" + certs + "/node.pem",
    "--openssl.key=" + certs + "/node-key.pem",
    "--openssl.cafile=" + certs + "/ca.pem"};
  legs result;
  for (std::size_t round = 1; round <= cfg.rounds; ++round) {
    auto& local = result.local.emplace_back(measure_local(sys, cfg));
    auto plain = measure_node(sys, cfg, "remote", {});
    if (!plain)
      fail("cannot reach the plain node");
    auto& remote = result.remote.emplace_back(*plain);
    auto line = "round " + std::to_string(round) + " local: "
                + rows_text(local) + "; remote: " + rows_text(remote) + " ("
                + ratio_text(remote.rows_per_s / local.rows_per_s) + ")";
    if (client.sys) {
      if (auto secured = measure_node(*client.sys, cfg, "tls",
                                      tls_node_args)) {
        auto& tls = result.tls.emplace_back(*secured);
        line += "; tls: " + rows_text(tls) + " ("
                + ratio_text(tls.rows_per_s / remote.rows_per_s)
                + " of remote)";
      } else {
        std::cerr << "bench remote: the TLS leg is skipped: no TLS "
                     "connection to a node started with --openssl.* "
                     "(does this coalesce-node publish through TLS?)\n";
        client.sys.reset();
      }
    }
    std::cout << line << std::endl;
  }
  return result;
}

/// The last line: best of each leg (and the medians), ratios of the bests.
nlohmann::ordered_json summary(const bench_config& cfg, const legs& runs) {
  auto round2 = [](double x) { return std::round(x * 100) / 100; };
  auto or_null = [](const std::vector<measurement>& xs, auto f) {
    return xs.empty() ? nlohmann::json(nullptr) : nlohmann::json(f(xs));
  };
  auto best_rows = [](const std::vector<measurement>& xs) {
    return std::round(best(xs));
  };
  // Rows per fsync of the best run: how well the buffer coalesced.
  auto rows_per_write = [&](const std::vector<measurement>& xs) {
    auto& run = best_run(xs);
    return std::round(static_cast<double>(cfg.entries)
                      / std::max<uint64_t>(run.write_batches, 1));
  };
  // CPU microseconds per row, median over the rounds.
  auto cpu_per_row = [&](const std::vector<measurement>& xs) {
    std::vector<double> us;
    for (auto& run : xs)
      us.push_back(run.cpu_seconds * 1e6 / cfg.entries);
    std::sort(us.begin(), us.end());
    return round2(us[us.size() / 2]);
  };
  auto& remote = runs.remote;
  return {
    {"bench", "remote"},
    {"entries", cfg.entries},
    {"batch", cfg.batch},
    {"window", cfg.window},
    {"rounds", cfg.rounds},
    {"local_rows_per_s", best_rows(runs.local)},
    {"remote_rows_per_s", best_rows(remote)},
    {"tls_rows_per_s", or_null(runs.tls, best_rows)},
    {"remote_vs_local", round2(best(remote) / best(runs.local))},
    {"tls_vs_plain", or_null(runs.tls, [&](auto& xs) {
       return round2(best(xs) / best(remote));
     })},
    {"median_remote_vs_local", round2(median(remote) / median(runs.local))},
    {"median_tls_vs_plain", or_null(runs.tls, [&](auto& xs) {
       return round2(median(xs) / median(remote));
     })},
    {"local_rows_per_write", rows_per_write(runs.local)},
    {"remote_rows_per_write", rows_per_write(remote)},
    {"tls_rows_per_write", or_null(runs.tls, rows_per_write)},
    {"local_cpu_us_per_row", cpu_per_row(runs.local)},
    {"remote_cpu_us_per_row", cpu_per_row(remote)},
    {"tls_cpu_us_per_row", or_null(runs.tls, cpu_per_row)},
    {"load_average", bench::load_average()},
  };
}

} // namespace

int main(int argc, char** argv) {
  bench_config cfg;
  if (auto err = cfg.parse(argc, argv))
    fail("invalid options: " + to_string(err));
  if (cfg.cli_helptext_printed)
    return EXIT_SUCCESS;
  cfg.check("remote");
  // The in-process services log like a node; only their trouble matters here.
  spdlog::set_level(spdlog::level::warn);
  caf::actor_system sys{cfg};
  bench::temp_dir certs{cfg.dir, "certs"};
  auto runs = run_rounds(sys, cfg, certs.path());
  std::cout << summary(cfg, runs).dump() << std::endl;
  return EXIT_SUCCESS;
}
