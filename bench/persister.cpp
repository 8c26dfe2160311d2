// scripts/bench persister: durable throughput of the session persister beside
// the naive design, in one run on fresh databases with durability `synced`:
// 1,000 sessions with 4 KiB blobs, each request one new 300-byte update row.
// - fsync rate: one synced write of a tiny session after the other, the
//   disk's figure of this minute;
// - naive: one synced WriteBatch per request, in request order (a closed
//   loop of C clients on one serial writer always has a request waiting, so
//   one thread writing back to back is that loop), time-boxed;
// - coalesce: C client actors in a closed loop, each persisting a random
//   session through the persister (with the session's snapshot, as a
//   session actor sends it) and waiting for its answer, time-boxed;
// - messages per persist: the same clients and persister, 20 persists each,
//   on a second actor system whose deterministic scheduler runs one message
//   per step: the steps it ran over the persists answered (every message of
//   the clients, the persister, its writers and its I/O actors, answers and
//   retirements included);
// - straight to an I/O actor: the same clients writing straight to one
//   I/O actor (no persister, no writers), time-boxed: the floor under any
//   design whose writes go through an I/O actor (`vs_straight_to_io`);
// - limit: the same session writes from one thread straight into RocksDB in
//   groups of 64 without fsync, the CPU ceiling of WAL and memtable for this
//   payload (`vs_limit`); measured before the two designs and after them,
//   the mean of the two the ceiling;
// - paired limit: limit's writes on two threads at once, a database each:
//   one thread's rate and the CPU per write while both cores work
//   (`paired_limit_vs_limit`, `paired_limit_cpu_vs_limit`), what this host
//   takes from one core while the other is busy too; `vs_paired_limit` is
//   the persister's rate over one such thread's;
// - durable limit: limit's writes with a second thread syncing the WAL
//   behind them, the writer never waiting (`vs_durable_limit`): the
//   ceiling of any design that syncs while it writes (limit's WAL stays in
//   the page cache; this one goes to the disk within the time box);
// - gathered: the same clients hand their writes to one actor that keeps
//   their promises, a thread writes whatever was handed over as one group,
//   a second thread syncs behind it and answers with one message per sync:
//   the ceiling of a design that hands the I/O actor whole groups
//   (`gathered_vs_limit`), no message per write on the writer's thread.
// Each phase prints its CPU time per operation. The actor system runs
// cores - 1 CAF workers (`caf_workers`), the I/O actor's thread a core of
// its own. The fsync rate of a shared disk swings within minutes: only the
// ratio of one run means anything. The last line is one JSON object.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <nlohmann/json.hpp>

#include <coalesce/actors/session_persister.hpp>
#include <coalesce/messages/registration.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/session_store.hpp>

#include <coalesce/actors/session_io_worker.hpp>

#include "cpu_time.hpp"
#include "fresh_db.hpp"

using namespace coalesce;
using coalesce::bench::fresh_db;
using clock_type = std::chrono::steady_clock;

namespace {

struct bench_config : caf::actor_system_config {
  std::size_t clients = 256;
  std::size_t sessions = 1000;
  double seconds = 5.0;
  std::size_t io_workers = session_persister_options{}.io_workers;
  std::string dir = "/tmp";

  bench_config() {
    register_message_types(*this);
    // Every write runs on the I/O actor's thread: the application that
    // embeds a persister writing hard gives it a core of its own, and CAF's
    // workers the rest (docs/session-persister.md, "Cores"). CAF's default
    // of at least four workers, each polling for work when it runs dry,
    // takes that core away on a small machine. --scheduler.max-threads
    // overrides it.
    // (hardware_concurrency is 0 when unknown.)
    set("scheduler.max-threads",
        std::max(2u, std::thread::hardware_concurrency()) - 1);
    opt_group{custom_options_, "bench"}
      .add(clients, "clients", "concurrent clients in the closed loop (C)")
      .add(seconds, "seconds", "time box of each measurement")
      .add(sessions, "sessions", "sessions the clients pick from")
      .add(io_workers, "io-workers", "the persister's I/O actors")
      .add(dir, "dir", "where the fresh databases are made");
  }
};

constexpr std::size_t blob_size = 4096;
constexpr std::size_t payload_size = 300;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

void check(const caf::error& err, const char* what) {
  if (err) {
    std::cerr << what << " failed: " << to_string(err) << '\n';
    std::exit(EXIT_FAILURE);
  }
}

std::string session_name(std::size_t i) {
  return "session-" + std::to_string(i);
}

session_update new_row(uint64_t n) {
  return session_update{"u" + std::to_string(n),
                        static_cast<int64_t>(n), "note",
                        std::string(payload_size, 'p')};
}

double measure_fsync_rate(const bench_config& cfg) {
  fresh_db fresh{cfg.dir};
  auto start = clock_type::now();
  std::size_t writes = 0;
  while (seconds_since(start) < std::min(cfg.seconds, 2.0)) {
    check(storage::save_session(*fresh.db, {"tiny", "x", {}, {}}), "fsync");
    ++writes;
  }
  return writes / seconds_since(start);
}

double measure_naive(const bench_config& cfg) {
  fresh_db fresh{cfg.dir};
  std::mt19937_64 rng{7};
  std::string blob(blob_size, 'b');
  auto start = clock_type::now();
  uint64_t requests = 0;
  while (seconds_since(start) < cfg.seconds) {
    auto session = session_name(rng() % cfg.sessions);
    check(storage::save_session(*fresh.db,
                                {session, blob, {new_row(requests)}, {}}),
          "naive");
    ++requests;
  }
  return requests / seconds_since(start);
}

/// A rate and what it cost: the process's CPU time per operation (every
/// thread, RocksDB's background work included), and the WAL syncs per
/// second it ran (where a phase counts them).
struct rate {
  double per_s = 0;
  double cpu_us_per_op = 0;
  double syncs_per_s = 0;
};

/// `limit`'s writes: groups of 64 session writes of random sessions, one
/// new row each, one WriteBatch without fsync per group.
struct limit_groups {
  std::mt19937_64 rng{11};
  std::string blob = std::string(blob_size, 'b');
  /// Like the persister's I/O actor, it keeps the generations it wrote.
  storage::known_generations known;
  uint64_t writes = 0;

  void write_one(storage::database& db, std::size_t sessions,
                 const char* what) {
    constexpr std::size_t group_size = 64;
    std::vector<storage::session_write> group;
    for (std::size_t i = 0; i < group_size; ++i, ++writes)
      group.push_back({session_name(rng() % sessions), blob,
                       {new_row(writes)}, {}});
    check(storage::save_session_group(db, group,
                                      storage::durability::buffered, &known)
            .failure,
          what);
  }
};

/// `limit`'s writes from `threads` threads at once, each into a database
/// of its own, for the time box. The rate is one thread's (the mean), the
/// CPU time per write the process's over all their writes. One thread is
/// `limit`; two are the paired limit, both cores at once: beside `limit`
/// it shows what one core loses on this host while the other works too,
/// as the persister's I/O thread writes while CAF's worker runs.
rate measure_limit(const bench_config& cfg, std::size_t threads = 1) {
  std::vector<std::unique_ptr<fresh_db>> dbs;
  std::vector<limit_groups> groups(threads);
  for (std::size_t i = 0; i < threads; ++i) {
    dbs.push_back(std::make_unique<fresh_db>(cfg.dir));
    groups[i].rng.seed(11 + 2 * i);
  }
  auto start = clock_type::now();
  auto cpu_before = bench::own_cpu_seconds();
  auto write_until_deadline = [&](std::size_t i) {
    while (seconds_since(start) < cfg.seconds)
      groups[i].write_one(*dbs[i]->db, cfg.sessions, "limit");
  };
  std::vector<std::thread> others;
  for (std::size_t i = 1; i < threads; ++i)
    others.emplace_back(write_until_deadline, i);
  write_until_deadline(0);
  for (auto& other : others)
    other.join();
  auto elapsed = seconds_since(start);
  uint64_t writes = 0;
  for (const auto& x : groups)
    writes += x.writes;
  return {writes / static_cast<double>(threads) / elapsed,
          (bench::own_cpu_seconds() - cpu_before) * 1e6 / writes};
}

/// A thread that syncs the WAL behind a writer that never waits for it:
/// whenever the writer reported a write past the last one synced, it syncs
/// once for all of them and tells `on_synced` the last one covered (what
/// the I/O actor's syncer does, without actors).
class wal_syncer_thread {
public:
  wal_syncer_thread(storage::database& db,
                    std::function<void(uint64_t)> on_synced = nullptr)
    : db_(db), on_synced_(std::move(on_synced)), thread_([this] { run(); }) {
    // nop
  }

  wal_syncer_thread(const wal_syncer_thread&) = delete;
  wal_syncer_thread& operator=(const wal_syncer_thread&) = delete;

  ~wal_syncer_thread() {
    stop();
  }

  /// The writer wrote everything up to write number `last`.
  void written(uint64_t last) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      last_written_ = last;
    }
    written_cv_.notify_one();
  }

  /// Stops after the sync under way and returns the syncs run.
  uint64_t stop() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopping_ = true;
    }
    written_cv_.notify_one();
    if (thread_.joinable())
      thread_.join();
    return syncs_;
  }

private:
  void run() {
    uint64_t synced = 0;
    std::unique_lock<std::mutex> guard{mtx_};
    for (;;) {
      written_cv_.wait(guard,
                       [&] { return stopping_ || last_written_ > synced; });
      if (stopping_)
        return;
      synced = last_written_;
      guard.unlock();
      check(db_.sync_wal(), "the WAL sync behind a writer");
      if (on_synced_)
        on_synced_(synced);
      guard.lock();
      ++syncs_;
    }
  }

  storage::database& db_;
  std::function<void(uint64_t)> on_synced_;
  std::mutex mtx_;
  std::condition_variable written_cv_;
  uint64_t last_written_ = 0;
  uint64_t syncs_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

/// `limit` made durable: the same thread writes the same groups without
/// fsync while a second thread syncs the WAL whenever a group was written
/// since its last sync (what the I/O actor's syncer does), and the writer
/// never waits for a sync. The ceiling of any design that syncs the WAL
/// while it writes: here the WAL goes to the disk within the time box; in
/// `limit` it stays in the page cache.
rate measure_durable_limit(const bench_config& cfg) {
  fresh_db fresh{cfg.dir};
  limit_groups groups;
  wal_syncer_thread syncer{*fresh.db};
  uint64_t groups_written = 0;
  auto start = clock_type::now();
  auto cpu_before = bench::own_cpu_seconds();
  while (seconds_since(start) < cfg.seconds) {
    groups.write_one(*fresh.db, cfg.sessions, "durable limit");
    syncer.written(++groups_written);
  }
  auto elapsed = seconds_since(start);
  auto cpu = bench::own_cpu_seconds() - cpu_before;
  auto syncs = syncer.stop();
  return {groups.writes / elapsed, cpu * 1e6 / groups.writes,
          syncs / elapsed};
}

/// A live session: answers every snapshot with its 4 KiB blob.
session_handle_actor::behavior_type session_handle(std::string blob) {
  return {[blob](snapshot_atom) { return blob; }};
}

/// One closed-loop client: persists a random session, waits, repeats until
/// the deadline; its latencies (ms) are read once it terminated.
struct client_result {
  std::vector<double> latencies_ms;
  uint64_t failures = 0;
};

/// When a client stops: at the deadline, or after a number of persists.
struct client_stop {
  clock_type::time_point deadline = clock_type::time_point::max();
  uint64_t persists = std::numeric_limits<uint64_t>::max();
};

/// How a client sends one persist of session `i` carrying `row`; `done`
/// gets its outcome.
using send_persist = std::function<void(
  caf::event_based_actor* self, std::size_t i, session_update row,
  std::function<void(caf::error)> done)>;

/// Through the persister, with the session's snapshot, as a session actor
/// sends it.
send_persist through_persister(
  session_persister_actor persister,
  std::shared_ptr<std::vector<session_handle_actor>> handles) {
  return [=](caf::event_based_actor* self, std::size_t i, session_update row,
             std::function<void(caf::error)> done) {
    self
      ->request(persister, caf::infinite, persist_atom::value, session_name(i),
                (*handles)[i], session_snapshot{std::string(blob_size, 'b')},
                std::vector<session_update>{std::move(row)},
                std::vector<std::string>{})
      .then([done](ok_atom) { done(caf::none); },
            [done](caf::error& err) { done(std::move(err)); });
  };
}

/// Straight to `writer` (an I/O actor, or `gathered`'s gatherer), as a
/// session's writer sends a write: no persister, no writer.
template <class Writer>
send_persist straight_to(Writer writer) {
  return [=](caf::event_based_actor* self, std::size_t i, session_update row,
             std::function<void(caf::error)> done) {
    storage::session_write write{session_name(i), std::string(blob_size, 'b'),
                                 {std::move(row)}, {}, 0, true};
    self->request(writer, caf::infinite, write_atom::value, std::move(write))
      .then([done](ok_atom) { done(caf::none); },
            [done](caf::error& err) { done(std::move(err)); });
  };
}

caf::behavior client(caf::event_based_actor* self, send_persist send,
                     std::size_t sessions, client_stop stop, uint64_t seed,
                     std::shared_ptr<client_result> result) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  auto next = std::make_shared<std::function<void()>>();
  *next = [=] {
    if (clock_type::now() >= stop.deadline
        || result->latencies_ms.size() + result->failures >= stop.persists) {
      *next = nullptr; // the callback holds itself: release it
      self->quit();
      return;
    }
    auto i = (*rng)() % sessions;
    auto sent = clock_type::now();
    auto row = new_row(seed * 1'000'000'000 + result->latencies_ms.size()
                       + result->failures);
    send(self, i, std::move(row), [=](caf::error err) {
      if (!err)
        result->latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(clock_type::now() - sent)
            .count());
      else if (result->failures++ == 0)
        std::cerr << "persist failed: " << to_string(err) << '\n';
      (*next)();
    });
  };
  (*next)();
  return {[](caf::unit_t) {}};
}

/// Runs C clients sending with `send` until the time box ends; returns the
/// answered persists' latencies and the seconds it took.
std::pair<std::vector<double>, double>
run_clients(caf::actor_system& sys, const bench_config& cfg,
            const send_persist& send) {
  std::vector<std::shared_ptr<client_result>> results;
  std::vector<caf::actor> clients;
  auto start = clock_type::now();
  auto deadline = start
                  + std::chrono::duration_cast<clock_type::duration>(
                    std::chrono::duration<double>(cfg.seconds));
  for (std::size_t i = 0; i < cfg.clients; ++i) {
    results.push_back(std::make_shared<client_result>());
    clients.push_back(sys.spawn(client, send, cfg.sessions,
                                client_stop{deadline}, i + 1,
                                results.back()));
  }
  caf::scoped_actor self{sys};
  self->wait_for(clients);
  auto elapsed = seconds_since(start);
  std::vector<double> latencies;
  uint64_t failures = 0;
  for (auto& x : results) {
    latencies.insert(latencies.end(), x->latencies_ms.begin(),
                     x->latencies_ms.end());
    failures += x->failures;
  }
  if (failures > 0)
    std::cerr << failures << " persists failed\n";
  return {std::move(latencies), elapsed};
}

/// The floor under any design whose writes go through an I/O actor: the
/// same clients writing straight to one, each write one message there and
/// its answer back. What lies between it and `limit` is that actor's
/// messages and fsyncs and the clients' share of the two cores.
rate measure_straight_to_io(caf::actor_system& sys, const bench_config& cfg) {
  fresh_db fresh{cfg.dir};
  auto io = spawn_detached_session_io_worker(sys, fresh.db);
  auto cpu_before = bench::own_cpu_seconds();
  auto [latencies, elapsed] = run_clients(sys, cfg, straight_to(io));
  auto cpu = bench::own_cpu_seconds() - cpu_before;
  caf::scoped_actor self{sys};
  self->send_exit(io, caf::exit_reason::user_shutdown);
  self->wait_for(io);
  return {latencies.size() / elapsed, cpu * 1e6 / latencies.size()};
}


/// `gathered`: the queue one scheduled actor (the gatherer) shares with a
/// writer thread. The gatherer queues each client's write here; the writer
/// takes the whole queue as one group.
struct gathered_queue {
  std::mutex mtx;
  std::condition_variable queued_cv;
  std::vector<storage::session_write> queued;
  /// The number of the last write queued.
  uint64_t last_queued = 0;
  bool stop = false;
};

/// The gatherer: holds each client's promise until the sync that covers its
/// write reports with one message.
using gatherer_actor = caf::typed_actor<
  caf::replies_to<write_atom, storage::session_write>::with<ok_atom>,
  caf::reacts_to<sync_atom, uint64_t>>;

struct gatherer_state {
  uint64_t last_write = 0;
  std::deque<std::pair<uint64_t, caf::typed_response_promise<ok_atom>>>
    waiting;
};

gatherer_actor::behavior_type
gatherer(gatherer_actor::stateful_pointer<gatherer_state> self,
         std::shared_ptr<gathered_queue> shared) {
  return {
    [self, shared](write_atom, storage::session_write& write) {
      auto promise = self->make_response_promise<ok_atom>();
      auto number = ++self->state.last_write;
      self->state.waiting.emplace_back(number, promise);
      bool was_empty = false;
      {
        std::lock_guard<std::mutex> guard{shared->mtx};
        was_empty = shared->queued.empty();
        shared->queued.push_back(std::move(write));
        shared->last_queued = number;
      }
      if (was_empty)
        shared->queued_cv.notify_one();
      return promise;
    },
    [self](sync_atom, uint64_t last_synced) {
      auto& waiting = self->state.waiting;
      while (!waiting.empty() && waiting.front().first <= last_synced) {
        waiting.front().second.deliver(ok_atom::value);
        waiting.pop_front();
      }
    },
  };
}

/// The ceiling of a design that hands its writer whole groups: the same
/// clients send each write to one scheduled actor, which keeps their
/// promises and queues the writes for a writer thread; the writer writes
/// everything queued as one group without fsync, a syncer thread syncs the
/// WAL behind it, and one message per sync answers the writes it covered.
/// So the writer's thread takes no message per write, and CAF's worker two
/// (the write and its answer) besides the clients'.
rate measure_gathered(caf::actor_system& sys, const bench_config& cfg) {
  fresh_db fresh{cfg.dir};
  auto shared = std::make_shared<gathered_queue>();
  auto gather = sys.spawn(gatherer, shared);
  wal_syncer_thread syncer{*fresh.db, [gather](uint64_t last_synced) {
                             caf::anon_send(gather, sync_atom::value,
                                            last_synced);
                           }};
  std::thread writer{[&] {
    storage::known_generations known;
    std::vector<storage::session_write> group;
    for (;;) {
      uint64_t last = 0;
      {
        std::unique_lock<std::mutex> guard{shared->mtx};
        shared->queued_cv.wait(
          guard, [&] { return shared->stop || !shared->queued.empty(); });
        if (shared->stop)
          return;
        group.swap(shared->queued);
        last = shared->last_queued;
      }
      check(storage::save_session_group(*fresh.db, group,
                                        storage::durability::buffered, &known)
              .failure,
            "gathered");
      group.clear();
      syncer.written(last);
    }
  }};
  auto cpu_before = bench::own_cpu_seconds();
  auto [latencies, elapsed] = run_clients(sys, cfg, straight_to(gather));
  auto cpu = bench::own_cpu_seconds() - cpu_before;
  // Every client had its last write answered before it stopped.
  {
    std::lock_guard<std::mutex> guard{shared->mtx};
    shared->stop = true;
  }
  shared->queued_cv.notify_one();
  writer.join();
  auto syncs = syncer.stop();
  caf::anon_send_exit(gather, caf::exit_reason::user_shutdown);
  return {latencies.size() / elapsed, cpu * 1e6 / latencies.size(),
          syncs / elapsed};
}

struct coalesce_result {
  uint64_t requests = 0;
  double persists_per_s = 0;
  double cpu_us_per_persist = 0;
  double p99_ms = 0;
  /// The thread that worked most (the I/O actor's, when it is the
  /// bottleneck): its share of the wall clock and its CPU time per write;
  /// the cores the process's other threads kept busy meanwhile.
  bench::thread_cpu busiest;
  double busiest_busy = 0;
  double busiest_cpu_us_per_write = 0;
  double others_cores = 0;
  session_persister_stats stats;
};

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  return xs[static_cast<std::size_t>(p * (xs.size() - 1))];
}

coalesce_result measure_coalesce(caf::actor_system& sys,
                                 const bench_config& cfg) {
  fresh_db fresh{cfg.dir};
  session_persister_options options;
  options.io_workers = cfg.io_workers;
  auto service = spawn_session_persister_actors(sys, fresh.db, options);
  auto handles = std::make_shared<std::vector<session_handle_actor>>();
  for (std::size_t i = 0; i < cfg.sessions; ++i)
    handles->push_back(sys.spawn(session_handle, std::string(blob_size, 'b')));
  auto cpu_before = bench::own_cpu_seconds();
  auto threads_before = bench::threads_cpu_seconds();
  auto [latencies, elapsed] = run_clients(
    sys, cfg, through_persister(service.persister, handles));
  auto cpu = bench::own_cpu_seconds() - cpu_before;
  auto busiest = bench::busiest_thread(threads_before,
                                       bench::threads_cpu_seconds());
  coalesce_result result;
  result.busiest = busiest;
  result.busiest_busy = busiest.seconds / elapsed;
  result.others_cores = (cpu - busiest.seconds) / elapsed;
  result.requests = latencies.size();
  result.persists_per_s = latencies.size() / elapsed;
  result.cpu_us_per_persist = cpu * 1e6 / latencies.size();
  result.p99_ms = percentile(latencies, 0.99);
  caf::scoped_actor self{sys};
  self->request(service.persister, std::chrono::minutes{1}, stats_atom::value)
    .receive([&](session_persister_stats& st) { result.stats = st; },
             [](caf::error& err) { check(err, "stats"); });
  if (result.stats.writes > 0)
    result.busiest_cpu_us_per_write = busiest.seconds * 1e6
                                      / result.stats.writes;
  for (auto& handle : *handles)
    self->send_exit(handle, caf::exit_reason::user_shutdown);
  self->send_exit(service.persister, caf::exit_reason::user_shutdown);
  self->wait_for(service.persister);
  for (auto& io : service.io)
    self->send_exit(io, caf::exit_reason::user_shutdown);
  for (auto& io : service.io)
    self->wait_for(io);
  return result;
}

/// The deterministic scheduler's configuration: one message per step.
struct counting_config : caf::actor_system_config {
  counting_config() {
    register_message_types(*this);
    set("scheduler.policy", caf::atom("testing"));
    set("logger.file-verbosity", caf::atom("quiet"));
  }
};

/// Messages per answered persist: C clients persist `per_client` times each
/// through a persister whose I/O actors are scheduled, all on a scheduler
/// that runs one message per step; the steps counted are the messages.
double measure_messages(const bench_config& cfg, uint64_t per_client) {
  counting_config counting;
  caf::actor_system sys{counting};
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  fresh_db fresh{cfg.dir};
  session_persister_options options;
  options.io_workers = cfg.io_workers;
  auto service = spawn_session_persister_actors_scheduled(sys, fresh.db,
                                                          options);
  auto handles = std::make_shared<std::vector<session_handle_actor>>();
  for (std::size_t i = 0; i < cfg.sessions; ++i)
    handles->push_back(sys.spawn(session_handle, std::string(blob_size, 'b')));
  sched.run();
  std::vector<std::shared_ptr<client_result>> results;
  for (std::size_t i = 0; i < cfg.clients; ++i) {
    results.push_back(std::make_shared<client_result>());
    client_stop stop;
    stop.persists = per_client;
    sys.spawn(client, through_persister(service.persister, handles),
              cfg.sessions, stop, i + 1, results.back());
  }
  auto steps = sched.run();
  uint64_t answered = 0;
  for (auto& x : results)
    answered += x->latencies_ms.size();
  for (auto& handle : *handles)
    caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(service.persister, caf::exit_reason::user_shutdown);
  for (auto& io : service.io)
    caf::anon_send_exit(io, caf::exit_reason::user_shutdown);
  sched.run();
  return answered == 0 ? 0.0 : static_cast<double>(steps) / answered;
}

} // namespace

int main(int argc, char** argv) {
  bench_config cfg;
  if (auto err = cfg.parse(argc, argv)) {
    std::cerr << "invalid options: " << to_string(err) << '\n';
    return EXIT_FAILURE;
  }
  if (cfg.cli_helptext_printed)
    return EXIT_SUCCESS;
  if (cfg.clients == 0 || cfg.sessions == 0 || cfg.io_workers == 0) {
    std::cerr << "bench.clients, bench.sessions and bench.io-workers must be "
                 "positive\n";
    return EXIT_FAILURE;
  }
  caf::actor_system sys{cfg};
  auto fsyncs_per_s = measure_fsync_rate(cfg);
  std::printf("disk: %.0f fsyncs/s\n", fsyncs_per_s);
  auto naive = measure_naive(cfg);
  std::printf("naive: %.0f persists/s (one synced WriteBatch per request)\n",
              naive);
  // The limit before and after the two designs, their mean the ceiling:
  // what this machine gives one thread drifts within a minute.
  auto limit_before = measure_limit(cfg);
  std::printf("limit: %.0f session writes/s (groups of 64, no fsync), %.1f "
              "us CPU each\n",
              limit_before.per_s, limit_before.cpu_us_per_op);
  auto paired = measure_limit(cfg, 2);
  std::printf("paired limit: %.0f session writes/s on each of two threads "
              "(limit's writes, both at once, a database each), %.1f us CPU "
              "each\n",
              paired.per_s, paired.cpu_us_per_op);
  auto straight = measure_straight_to_io(sys, cfg);
  std::printf("straight to an I/O actor: %.0f writes/s (the same clients, "
              "no persister, no writers), %.1f us CPU each\n",
              straight.per_s, straight.cpu_us_per_op);
  auto gathered = measure_gathered(sys, cfg);
  std::printf("gathered: %.0f writes/s (the same clients handing their "
              "writes to one actor, a thread writing them in groups, one "
              "message per sync, %.0f syncs/s), %.1f us CPU each\n",
              gathered.per_s, gathered.syncs_per_s, gathered.cpu_us_per_op);
  auto durable = measure_durable_limit(cfg);
  std::printf("durable limit: %.0f session writes/s (the limit's writes, a "
              "second thread syncing the WAL behind them, %.0f syncs/s), "
              "%.1f us CPU each\n",
              durable.per_s, durable.syncs_per_s, durable.cpu_us_per_op);
  auto ours = measure_coalesce(sys, cfg);
  auto limit_after = measure_limit(cfg);
  std::printf("limit again: %.0f session writes/s, %.1f us CPU each\n",
              limit_after.per_s, limit_after.cpu_us_per_op);
  rate limit{(limit_before.per_s + limit_after.per_s) / 2,
             (limit_before.cpu_us_per_op + limit_after.cpu_us_per_op) / 2};
  auto messages = measure_messages(cfg, 20);
  std::printf("coalesce: %.0f persists/s, %.1f us CPU each, %llu writes in "
              "%llu groups, %llu fsyncs, p99 %.2f ms\n",
              ours.persists_per_s, ours.cpu_us_per_persist,
              static_cast<unsigned long long>(ours.stats.writes),
              static_cast<unsigned long long>(ours.stats.groups),
              static_cast<unsigned long long>(ours.stats.fsyncs), ours.p99_ms);
  std::printf("busiest thread: %s, busy %.0f%% of the time, %.1f us CPU per "
              "write; the other threads kept %.2f cores busy\n",
              ours.busiest.name.c_str(), 100 * ours.busiest_busy,
              ours.busiest_cpu_us_per_write, ours.others_cores);
  auto fsyncs_per_1000 = ours.requests == 0
                           ? 0.0
                           : 1000.0 * ours.stats.fsyncs / ours.requests;
  std::printf("%.1f fsyncs per 1,000 persists; %.2f messages per persist "
              "(counted one by one on a deterministic scheduler)\n",
              fsyncs_per_1000, messages);
  auto round2 = [](double x) { return std::round(x * 100) / 100; };
  auto round1 = [](double x) { return std::round(x * 10) / 10; };
  nlohmann::ordered_json result{
    {"bench", "persister"},
    {"sessions", cfg.sessions},
    {"requests", ours.requests},
    {"fsyncs_per_s", std::round(fsyncs_per_s)},
    {"naive_persists_per_s", std::round(naive)},
    {"persists_per_s", std::round(ours.persists_per_s)},
    {"vs_naive", round2(ours.persists_per_s / naive)},
    {"writes", ours.stats.writes},
    {"groups", ours.stats.groups},
    {"fsyncs", ours.stats.fsyncs},
    {"fsyncs_per_1000_persists", round2(fsyncs_per_1000)},
    {"messages_per_persist", round2(messages)},
    {"p99_persist_ms", round2(ours.p99_ms)},
    {"cpu_us_per_persist", round1(ours.cpu_us_per_persist)},
    {"busiest_thread", ours.busiest.name},
    {"busiest_thread_busy", round2(ours.busiest_busy)},
    {"busiest_thread_cpu_us_per_write", round1(ours.busiest_cpu_us_per_write)},
    {"busiest_thread_cpu_vs_limit",
     round2(ours.busiest_cpu_us_per_write / limit.cpu_us_per_op)},
    {"other_threads_cores", round2(ours.others_cores)},
    {"limit_writes_per_s", std::round(limit.per_s)},
    {"limit_runs_writes_per_s",
     {std::round(limit_before.per_s), std::round(limit_after.per_s)}},
    {"limit_cpu_us_per_write", round1(limit.cpu_us_per_op)},
    {"vs_limit", round2(ours.persists_per_s / limit.per_s)},
    {"paired_limit_writes_per_s", std::round(paired.per_s)},
    {"paired_limit_cpu_us_per_write", round1(paired.cpu_us_per_op)},
    {"paired_limit_vs_limit", round2(paired.per_s / limit.per_s)},
    {"paired_limit_cpu_vs_limit",
     round2(paired.cpu_us_per_op / limit.cpu_us_per_op)},
    {"vs_paired_limit", round2(ours.persists_per_s / paired.per_s)},
    {"durable_limit_writes_per_s", std::round(durable.per_s)},
    {"durable_limit_cpu_us_per_write", round1(durable.cpu_us_per_op)},
    {"durable_limit_syncs_per_s", std::round(durable.syncs_per_s)},
    {"durable_limit_vs_limit", round2(durable.per_s / limit.per_s)},
    {"vs_durable_limit", round2(ours.persists_per_s / durable.per_s)},
    {"straight_to_io_writes_per_s", std::round(straight.per_s)},
    {"straight_to_io_cpu_us_per_write", round1(straight.cpu_us_per_op)},
    {"straight_to_io_vs_limit", round2(straight.per_s / limit.per_s)},
    {"vs_straight_to_io", round2(ours.persists_per_s / straight.per_s)},
    {"gathered_writes_per_s", std::round(gathered.per_s)},
    {"gathered_cpu_us_per_write", round1(gathered.cpu_us_per_op)},
    {"gathered_vs_limit", round2(gathered.per_s / limit.per_s)},
    {"vs_gathered", round2(ours.persists_per_s / gathered.per_s)},
    {"caf_workers", caf::get_or(cfg, "scheduler.max-threads", size_t{0})},
  };
  std::cout << result.dump() << std::endl;
  return EXIT_SUCCESS;
}
