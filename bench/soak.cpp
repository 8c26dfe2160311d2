// scripts/soak: a steady load through all three services of a real
// coalesce-node child (127.0.0.1, port 0, fresh data directory) for several
// minutes, its resident memory sampled and bounded, latency percentiles per
// service at the start and at the end.
//
// The load is open-loop: a pacer issues `rate` operations a second on a
// fixed schedule (a 10 ms tick sends whatever is due since the start),
// whether or not earlier answers came back; every request has a finite
// timeout. Operations cycle through a pattern of ten slots:
// - secrets, five slots: three puts (a `queue` of three new entries and one
//   recapture of an acknowledged key with a new secret), two lookups (four
//   acknowledged keys in one message, each must be found); plus a `flush`
//   with a deadline every 2 s;
// - sessions, three slots, over a rotating set of sessions, each session's
//   turns cycling register, persist, persist, load, lease (exclusive then
//   release), persist, persist, load; a persist adds one update row and
//   removes the row of four persists ago, the session's live handle (an
//   actor here) answers the node's snapshot requests;
// - backfill, two slots: enqueue then await, over rooms whose timelines were
//   filled beforehand with enough history that every run keeps paging.
// Latency is measured per request from its send to its answer. The node's
// VmRSS is sampled every 10 s; the last line is one JSON object, and the
// exit status is non-zero when any request failed or timed out, a backfill
// ran out of history, the node did not stop cleanly, or memory grew past
// the bound (see `memory_verdict`).

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <nlohmann/json.hpp>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/messages/registration.hpp>

#include "node_process.hpp"

using namespace coalesce;
using clock_type = std::chrono::steady_clock;

namespace {

struct soak_config : caf::actor_system_config {
  std::size_t seconds = 300;
  std::size_t rate = 200;
  std::size_t warmup = 60;
  std::size_t window = 60;
  std::size_t sample_interval = 10;
  std::size_t progress_interval = 60;
  // RSS growth after warm-up allowed besides the memtables' share, for the
  // allocator and the caches not yet full: about 1 MiB in 4 minutes was
  // measured beside the share at the defaults (README, "Soak").
  std::size_t slack_mib = 8;
  // The scheduler's kept results (64 MiB by default) are held small so that
  // they are full within the warm-up instead of growing through the run.
  std::size_t results_memory = 2 << 20;
  std::string dir = "/tmp";
  std::string node = bench::own_directory() + "/coalesce-node";

  soak_config() {
    register_message_types(*this);
    load<caf::io::middleman>();
    opt_group{custom_options_, "soak"}
      .add(seconds, "seconds", "length of the load")
      .add(rate, "rate", "operations per second, all services together")
      .add(warmup, "warmup", "seconds before the memory baseline is taken")
      .add(window, "window", "seconds of the start and end percentiles")
      .add(sample_interval, "sample-interval", "seconds between RSS samples")
      .add(progress_interval, "progress-interval",
           "seconds between progress lines")
      .add(slack_mib, "slack-mib",
           "MiB of RSS growth allowed besides the memtables' share")
      .add(results_memory, "results-memory",
           "the node's scheduler-results-memory in bytes")
      .add(dir, "dir", "where the node's fresh data directory is made")
      .add(node, "node", "the coalesce-node binary");
  }
};

[[noreturn]] void fail(const std::string& what) {
  bench::fail_bench("soak", what);
}

/// Every request's limit: generous, the shared disk may stall for seconds.
constexpr auto request_timeout = std::chrono::seconds{30};
constexpr auto tick_interval = std::chrono::milliseconds{10};
constexpr auto flush_interval = std::chrono::seconds{2};

// -- the shape of the load ---------------------------------------------------

constexpr std::size_t session_count = 32;
constexpr std::size_t session_blob_bytes = 512;
constexpr std::size_t update_payload_bytes = 100;
/// Rows a session keeps: a persist removes the row of this many persists ago.
constexpr uint64_t rows_kept = 4;
constexpr std::size_t room_count = 8;
constexpr uint32_t backfill_batch = 10;
constexpr uint32_t backfill_batches = 2;
constexpr std::size_t event_body_bytes = 32;
/// Acknowledged secret keys the lookups and recaptures choose from.
constexpr std::size_t acknowledged_window = 4096;

/// What RocksDB's memtable spends on one row besides its key and value (the
/// internal key's sequence and type, the skip list node, length prefixes):
/// an estimate on the high side.
constexpr uint64_t memtable_row_overhead = 64;

enum class op_kind { put, lookup, session, backfill };

/// The ten slots the operations cycle through (see the top of the file).
constexpr std::array<op_kind, 10> op_pattern{
  op_kind::put,     op_kind::session,  op_kind::lookup, op_kind::put,
  op_kind::backfill, op_kind::session, op_kind::put,    op_kind::lookup,
  op_kind::backfill, op_kind::session};

enum service : std::size_t { secrets = 0, sessions = 1, backfill = 2 };
constexpr std::array<const char*, 3> service_names{"secrets", "sessions",
                                                   "backfill"};

// Which load of the soak each service of the node gets, by the group of the
// summary its requests count under. Every service of `all_services` is
// named here (checked below), so that a new service joins the soak, or says
// here which load covers it, before the soak compiles.
constexpr service soak_group(secret_buffer_descriptor) {
  return secrets;
}

/// The backfills page the timelines `fill_rooms` appended to.
constexpr service soak_group(timeline_descriptor) {
  return backfill;
}

constexpr service soak_group(backfill_scheduler_descriptor) {
  return backfill;
}

constexpr service soak_group(session_persister_descriptor) {
  return sessions;
}

template <class Service, class = void>
struct soaked : std::false_type {};

template <class Service>
struct soaked<Service, std::void_t<decltype(soak_group(Service{}))>>
  : std::true_type {};

template <class... Services>
constexpr bool soaks_every_service(type_list<Services...>) {
  return (soaked<Services>::value && ...);
}

static_assert(soaks_every_service(all_services{}),
              "a service of all_services has no load in the soak: add one "
              "and name its group in soak_group");

/// Backfill operations of the whole run that page one room.
std::size_t backfills_per_room(const soak_config& cfg) {
  auto slots = std::count(op_pattern.begin(), op_pattern.end(),
                          op_kind::backfill);
  double total = static_cast<double>(cfg.rate) * cfg.seconds * slots
                 / op_pattern.size();
  return static_cast<std::size_t>(std::ceil(total / room_count));
}

/// Events each room gets before the load: every backfill may take its two
/// batches alone (joins of a running run take fewer), plus a quarter.
std::size_t events_per_room(const soak_config& cfg) {
  return backfills_per_room(cfg) * backfill_batch * backfill_batches * 5 / 4
         + backfill_batch;
}

std::string room_name(std::size_t i) {
  return "!soak-room-" + std::to_string(i) + ":example.org";
}

std::string session_name(std::size_t i) {
  return "soak-session-" + std::to_string(i);
}

secret_entry make_secret(uint64_t i, uint8_t version) {
  std::ostringstream msg_id;
  msg_id << "3EB0" << std::uppercase << std::hex << i;
  std::vector<uint8_t> secret(secret_size);
  for (std::size_t b = 0; b < secret.size(); ++b)
    secret[b] = static_cast<uint8_t>(i * 31 + b + version);
  return {"120363" + std::to_string(i % 500) + "@g.us",
          "5511" + std::to_string(i % 7919) + "@s.whatsapp.net", msg_id.str(),
          std::move(secret), 0, 1'700'000'000 + static_cast<int64_t>(i)};
}

uint64_t memtable_bytes(const secret_entry& x) {
  // The stored value: the secret, message time, expiry and capture time.
  return x.chat.size() + x.sender.size() + x.msg_id.size() + x.secret.size()
         + 24 + memtable_row_overhead;
}

// -- what the run measured ---------------------------------------------------

struct latency_sample {
  float sent_at_s;
  float ms;
};

struct rss_sample {
  double at_s;
  uint64_t kib;
};

struct soak_results {
  std::array<std::vector<latency_sample>, 3> latencies;
  std::array<uint64_t, 3> requests{};
  std::array<uint64_t, 3> errors{};
  std::array<uint64_t, 3> timeouts{};
  /// Backfills that reached the start of the history (or an empty batch).
  uint64_t exhausted = 0;
  std::vector<rss_sample> rss;
  /// What the writes sent after warm-up put into RocksDB's memtables.
  uint64_t memtable_bytes_after_warmup = 0;
  std::string first_error;
};

/// The `q` quantile (0..1) of `ms`, sorted in place; 0 when empty.
double quantile(std::vector<float>& ms, double q) {
  if (ms.empty())
    return 0;
  std::sort(ms.begin(), ms.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * ms.size()));
  return ms[std::min(ms.size(), std::max<std::size_t>(rank, 1)) - 1];
}

std::vector<float> latencies_between(const std::vector<latency_sample>& xs,
                                     double from_s, double to_s) {
  std::vector<float> result;
  for (const auto& x : xs)
    if (x.sent_at_s >= from_s && x.sent_at_s < to_s)
      result.push_back(x.ms);
  return result;
}

double round3(double x) {
  return std::round(x * 1000) / 1000;
}

nlohmann::ordered_json percentiles(std::vector<float> ms) {
  return {{"p50", round3(quantile(ms, 0.5))},
          {"p99", round3(quantile(ms, 0.99))},
          {"p999", round3(quantile(ms, 0.999))}};
}

// -- the session handles -----------------------------------------------------

struct handle_state {
  uint64_t snapshots = 0;
};

/// A session's live handle: each snapshot is a new blob of
/// `session_blob_bytes` naming the session and how many it answered.
session_handle_actor::behavior_type
counting_handle(session_handle_actor::stateful_pointer<handle_state> self,
                std::string session) {
  return {[self, session](snapshot_atom) {
    auto blob = session + ":" + std::to_string(++self->state.snapshots) + ":";
    blob.resize(std::max(session_blob_bytes, blob.size()), 'x');
    return blob;
  }};
}

// -- the driver --------------------------------------------------------------

struct session_slot {
  std::string name;
  session_handle_actor handle;
  uint64_t turns = 0;
  uint64_t persists = 0;
};

struct driver_state {
  static inline const char* name = "soak_driver";
  node_actor node;
  pid_t node_pid = -1;
  const soak_config* cfg = nullptr;
  std::shared_ptr<soak_results> results;
  clock_type::time_point start;
  uint64_t ops_issued = 0;
  uint64_t next_secret = 0;
  std::deque<uint64_t> acknowledged;
  std::vector<session_slot> sessions;
  uint64_t session_ops = 0;
  uint64_t backfill_ops = 0;
  std::size_t outstanding = 0;
  double next_flush_s = 0;
  double next_sample_s = 0;
  double next_progress_s = 0;
  bool stopping = false;
};

using driver_actor = caf::stateful_actor<driver_state>;

double seconds_since_start(driver_actor* self) {
  return std::chrono::duration<double>(clock_type::now() - self->state.start)
    .count();
}

/// A request of `svc` is sent now: counted, and its writes added to the
/// memtables' share once warm-up is over.
double note_sent(driver_actor* self, service svc, uint64_t memtable = 0) {
  auto& st = self->state;
  st.results->requests[svc] += 1;
  st.outstanding += 1;
  auto at = seconds_since_start(self);
  if (at >= st.cfg->warmup)
    st.results->memtable_bytes_after_warmup += memtable;
  return at;
}

void note_answer(driver_actor* self, service svc, double sent_at) {
  auto& st = self->state;
  st.outstanding -= 1;
  auto ms = (seconds_since_start(self) - sent_at) * 1000;
  st.results->latencies[svc].push_back(
    {static_cast<float>(sent_at), static_cast<float>(ms)});
}

void note_error(driver_actor* self, service svc, const std::string& what) {
  auto& results = *self->state.results;
  results.errors[svc] += 1;
  if (results.first_error.empty())
    results.first_error = std::string{service_names[svc]} + ": " + what;
}

/// The error handler of a request of `svc`: every error counts, timeouts
/// also on their own.
auto on_failure(driver_actor* self, service svc) {
  return [self, svc](caf::error& err) {
    auto& st = self->state;
    st.outstanding -= 1;
    if (err == caf::sec::request_timeout)
      st.results->timeouts[svc] += 1;
    note_error(self, svc, self->system().render(err));
  };
}

void acknowledge_secrets(driver_state& st, const std::vector<uint64_t>& ids) {
  for (auto id : ids) {
    st.acknowledged.push_back(id);
    if (st.acknowledged.size() > acknowledged_window)
      st.acknowledged.pop_front();
  }
}

/// An acknowledged key, spread over the window by `salt`.
uint64_t some_acknowledged(const driver_state& st, uint64_t salt) {
  return st.acknowledged[(salt * 2654435761u) % st.acknowledged.size()];
}

void put_secrets(driver_actor* self) {
  auto& st = self->state;
  std::vector<secret_entry> batch;
  std::vector<uint64_t> fresh;
  uint64_t memtable = 0;
  for (int i = 0; i < 3; ++i) {
    fresh.push_back(st.next_secret);
    batch.push_back(make_secret(st.next_secret++, 0));
  }
  if (!st.acknowledged.empty())
    batch.push_back(make_secret(some_acknowledged(st, st.next_secret), 1));
  for (const auto& entry : batch)
    memtable += memtable_bytes(entry);
  auto sent_at = note_sent(self, secrets, memtable);
  self->request(st.node, request_timeout, queue_atom::value, std::move(batch))
    .then(
      [self, sent_at, fresh](ok_atom) {
        note_answer(self, secrets, sent_at);
        acknowledge_secrets(self->state, fresh);
      },
      on_failure(self, secrets));
}

void look_up_secrets(driver_actor* self) {
  auto& st = self->state;
  if (st.acknowledged.empty()) {
    put_secrets(self);
    return;
  }
  std::vector<secret_key> keys;
  for (uint64_t i = 0; i < 4; ++i)
    keys.push_back(make_secret(some_acknowledged(st, st.ops_issued * 4 + i), 0)
                     .key());
  auto sent_at = note_sent(self, secrets);
  self->request(st.node, request_timeout, lookup_atom::value, std::move(keys))
    .then(
      [self, sent_at](const std::vector<secret_lookup>& found) {
        note_answer(self, secrets, sent_at);
        for (const auto& x : found)
          if (!x.found)
            note_error(self, secrets, "an acknowledged secret was not found");
      },
      on_failure(self, secrets));
}

void flush_secrets(driver_actor* self) {
  auto sent_at = note_sent(self, secrets);
  self
    ->request(self->state.node, request_timeout, flush_atom::value,
              caf::timespan{std::chrono::seconds{20}})
    .then([self, sent_at](ok_atom) { note_answer(self, secrets, sent_at); },
          on_failure(self, secrets));
}

void persist_session(driver_actor* self, session_slot& s) {
  auto n = s.persists++;
  session_update row{"u" + std::to_string(n),
                     static_cast<int64_t>(n) + 1'700'000'000'000'000,
                     "message", std::string(update_payload_bytes, 'p')};
  std::vector<std::string> removed;
  if (n >= rows_kept)
    removed.push_back("u" + std::to_string(n - rows_kept));
  // The blob and its key, the new row, the removed row's tombstone.
  uint64_t memtable = session_blob_bytes + 2 * s.name.size() + row.id.size()
                      + row.kind.size() + row.payload.size() + 8
                      + 2 * memtable_row_overhead
                      + (removed.empty() ? 0 : s.name.size() + 8
                                                 + memtable_row_overhead);
  auto sent_at = note_sent(self, sessions, memtable);
  self
    ->request(self->state.node, request_timeout, persist_atom::value, s.name,
              s.handle, std::vector<session_update>{std::move(row)},
              std::move(removed))
    .then([self, sent_at](ok_atom) { note_answer(self, sessions, sent_at); },
          on_failure(self, sessions));
}

void load_session(driver_actor* self, const session_slot& s) {
  auto sent_at = note_sent(self, sessions);
  self->request(self->state.node, request_timeout, load_atom::value, s.name)
    .then(
      [self, sent_at, name = s.name](const session_record& record) {
        note_answer(self, sessions, sent_at);
        if (record.blob.rfind(name + ":", 0) != 0 || record.updates.empty()
            || record.updates.size() > rows_kept + 1)
          note_error(self, sessions, "load of " + name + " answered "
                                       + std::to_string(record.updates.size())
                                       + " rows and a foreign blob");
      },
      on_failure(self, sessions));
}

void lease_session(driver_actor* self, const session_slot& s) {
  auto sent_at = note_sent(self, sessions);
  self->request(self->state.node, request_timeout, exclusive_atom::value,
                s.name)
    .then(
      [self, sent_at](const session_lease& lease) {
        note_answer(self, sessions, sent_at);
        auto released_at = note_sent(self, sessions);
        self
          ->request(self->state.node, request_timeout, release_atom::value,
                    lease)
          .then([self, released_at](
                  ok_atom) { note_answer(self, sessions, released_at); },
                on_failure(self, sessions));
      },
      on_failure(self, sessions));
}

void register_session(driver_actor* self, const session_slot& s) {
  auto sent_at = note_sent(self, sessions, memtable_row_overhead);
  self
    ->request(self->state.node, request_timeout, register_atom::value, s.name,
              s.handle)
    .then([self, sent_at](uint64_t) { note_answer(self, sessions, sent_at); },
          on_failure(self, sessions));
}

/// The next turn of the next session in the rotation.
void session_turn(driver_actor* self) {
  auto& st = self->state;
  auto& s = st.sessions[st.session_ops++ % st.sessions.size()];
  switch (s.turns++ % 8) {
    case 0:
      register_session(self, s);
      break;
    case 3:
    case 7:
      load_session(self, s);
      break;
    case 4:
      lease_session(self, s);
      break;
    default:
      persist_session(self, s);
  }
}

void await_backfill(driver_actor* self, backfill_ticket ticket) {
  auto sent_at = note_sent(self, backfill);
  self->request(self->state.node, request_timeout, await_atom::value, ticket)
    .then(
      [self, sent_at](const backfill_result& result) {
        note_answer(self, backfill, sent_at);
        if (result.reason == stop_reason::reached_timeline_start
            || result.reason == stop_reason::no_data_available)
          self->state.results->exhausted += 1;
        else if (result.reason != stop_reason::batch_limit_reached)
          note_error(self, backfill,
                     "a run ended " + to_string(result.reason));
      },
      on_failure(self, backfill));
}

void start_backfill(driver_actor* self) {
  auto& st = self->state;
  backfill_request request;
  request.room = room_name(st.backfill_ops++ % room_count);
  request.batch_size = backfill_batch;
  request.max_batches = backfill_batches;
  // Each page's commit writes the room's position.
  auto sent_at = note_sent(self, backfill,
                           backfill_batches * (request.room.size()
                                               + memtable_row_overhead + 8));
  self->request(st.node, request_timeout, enqueue_atom::value, request)
    .then(
      [self, sent_at](backfill_ticket ticket) {
        note_answer(self, backfill, sent_at);
        await_backfill(self, ticket);
      },
      on_failure(self, backfill));
}

void issue(driver_actor* self, op_kind kind) {
  switch (kind) {
    case op_kind::put:
      put_secrets(self);
      break;
    case op_kind::lookup:
      look_up_secrets(self);
      break;
    case op_kind::session:
      session_turn(self);
      break;
    case op_kind::backfill:
      start_backfill(self);
      break;
  }
}

void sample_rss(driver_actor* self, double at) {
  auto& st = self->state;
  st.results->rss.push_back({at, bench::resident_kib_of(st.node_pid)});
}

/// One short line: the last interval's requests, p99s and the node's RSS.
void print_progress(driver_actor* self, double at) {
  auto& st = self->state;
  auto from = at - static_cast<double>(st.cfg->progress_interval);
  uint64_t requests = 0;
  uint64_t errors = 0;
  std::ostringstream line;
  line << std::fixed << std::setprecision(1);
  for (std::size_t svc = 0; svc < 3; ++svc) {
    requests += st.results->requests[svc];
    errors += st.results->errors[svc];
    auto recent = latencies_between(st.results->latencies[svc], from, at);
    line << ' ' << service_names[svc] << " p99 " << quantile(recent, 0.99)
         << " ms";
  }
  std::cout << "soak " << std::lround(at) << " s: " << requests
            << " requests, " << errors << " errors, rss "
            << bench::resident_kib_of(st.node_pid) << " KiB;" << line.str()
            << std::endl;
}

/// Timers due at `at`: flushes, RSS samples, progress lines.
void run_timers(driver_actor* self, double at) {
  auto& st = self->state;
  if (at >= st.next_flush_s) {
    flush_secrets(self);
    st.next_flush_s += std::chrono::duration<double>(flush_interval).count();
  }
  if (at >= st.next_sample_s) {
    sample_rss(self, at);
    st.next_sample_s += static_cast<double>(st.cfg->sample_interval);
  }
  if (at >= st.next_progress_s) {
    print_progress(self, at);
    st.next_progress_s += static_cast<double>(st.cfg->progress_interval);
  }
}

/// Sends what the schedule says is due by now; after the last second waits
/// for every answer (each has its timeout), samples once more and quits.
void on_tick(driver_actor* self) {
  auto& st = self->state;
  auto at = seconds_since_start(self);
  if (!st.stopping && at >= static_cast<double>(st.cfg->seconds)) {
    st.stopping = true;
    // The last interval's line, when the run ends on one.
    if (at >= st.next_progress_s)
      print_progress(self, at);
  }
  if (st.stopping) {
    if (st.outstanding == 0) {
      sample_rss(self, at);
      self->quit();
      return;
    }
  } else {
    auto due = static_cast<uint64_t>(at * static_cast<double>(st.cfg->rate));
    while (st.ops_issued < due)
      issue(self, op_pattern[st.ops_issued++ % op_pattern.size()]);
    run_timers(self, at);
  }
  self->delayed_send(self, tick_interval, caf::tick_atom::value);
}

caf::behavior soak_driver(driver_actor* self, node_actor node, pid_t node_pid,
                          const soak_config* cfg,
                          std::vector<session_slot> sessions,
                          std::shared_ptr<soak_results> results) {
  auto& st = self->state;
  st.node = std::move(node);
  st.node_pid = node_pid;
  st.cfg = cfg;
  st.sessions = std::move(sessions);
  st.results = std::move(results);
  st.start = clock_type::now();
  st.next_progress_s = static_cast<double>(cfg->progress_interval);
  sample_rss(self, 0);
  st.next_sample_s = static_cast<double>(cfg->sample_interval);
  st.next_flush_s = std::chrono::duration<double>(flush_interval).count();
  self->send(self, caf::tick_atom::value);
  return {[self](caf::tick_atom) { on_tick(self); }};
}

// -- before and after the load -----------------------------------------------

/// Fills every room with `events_per_room` events, oldest first.
void fill_rooms(caf::actor_system& sys, const node_actor& node,
                std::size_t events) {
  caf::scoped_actor self{sys};
  for (std::size_t room = 0; room < room_count; ++room) {
    for (std::size_t first = 0; first < events; first += 1000) {
      std::vector<timeline_event> chunk;
      for (auto i = first; i < std::min(events, first + 1000); ++i)
        chunk.push_back({"$e" + std::to_string(i) + "-r" + std::to_string(room),
                         "m.room.message", 1'700'000'000 + int64_t(i),
                         std::string(event_body_bytes, 'b')});
      self
        ->request(node, std::chrono::seconds{60}, append_atom::value,
                  room_name(room), std::move(chunk))
        .receive([](uint64_t) {},
                 [&](caf::error& err) {
                   fail("filling " + room_name(room) + ": "
                        + sys.render(err));
                 });
    }
  }
}

/// The rotating sessions, each registered with its handle and persisted
/// once, so that every load finds it.
std::vector<session_slot> start_sessions(caf::actor_system& sys,
                                         const node_actor& node) {
  caf::scoped_actor self{sys};
  std::vector<session_slot> result;
  for (std::size_t i = 0; i < session_count; ++i) {
    session_slot s{session_name(i), sys.spawn(counting_handle, session_name(i))};
    auto on_error = [&](caf::error& err) {
      fail("preparing " + s.name + ": " + sys.render(err));
    };
    self->request(node, request_timeout, register_atom::value, s.name, s.handle)
      .receive([](uint64_t) {}, on_error);
    session_update row{"u0", 1'700'000'000'000'000, "message",
                       std::string(update_payload_bytes, 'p')};
    self
      ->request(node, request_timeout, persist_atom::value, s.name, s.handle,
                std::vector<session_update>{row}, std::vector<std::string>{})
      .receive([](ok_atom) {}, on_error);
    s.persists = 1;
    s.turns = 1; // The first turn of the rotation is a persist, not a register.
    result.push_back(std::move(s));
  }
  return result;
}

/// The memory figures and their verdict: after warm-up, the node's RSS may
/// grow by what the load's writes put into RocksDB's memtables (64 MiB a
/// column family before RocksDB flushes one, none fills in a default run)
/// plus a fixed slack for the caches and the allocator.
nlohmann::ordered_json memory_verdict(const soak_config& cfg,
                                      const soak_results& results) {
  uint64_t start_kib = 0;
  uint64_t max_kib = 0;
  std::vector<rss_sample> after;
  for (const auto& x : results.rss)
    if (x.at_s >= static_cast<double>(cfg.warmup)) {
      if (after.empty())
        start_kib = x.kib;
      after.push_back(x);
      max_kib = std::max(max_kib, x.kib);
    }
  // Least squares over the samples after warm-up.
  double slope = 0;
  if (after.size() >= 2) {
    double n = static_cast<double>(after.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& x : after) {
      sx += x.at_s;
      sy += static_cast<double>(x.kib);
      sxx += x.at_s * x.at_s;
      sxy += x.at_s * static_cast<double>(x.kib);
    }
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  }
  auto memtable_kib = results.memtable_bytes_after_warmup / 1024;
  auto slack_kib = static_cast<uint64_t>(cfg.slack_mib) * 1024;
  auto bound_kib = memtable_kib + slack_kib;
  auto growth_kib = max_kib > start_kib ? max_kib - start_kib : 0;
  return {
    {"rss_samples", after.size()},
    {"rss_kib_start", start_kib},
    {"rss_kib_max", max_kib},
    {"rss_kib_end", results.rss.empty() ? 0 : results.rss.back().kib},
    {"rss_growth_kib_per_min", std::round(slope * 60)},
    {"rss_growth_kib", growth_kib},
    {"memtable_share_kib", memtable_kib},
    {"slack_kib", slack_kib},
    {"bound_kib", bound_kib},
    {"bounded", after.size() >= 2 && growth_kib <= bound_kib},
  };
}

nlohmann::ordered_json summary(const soak_config& cfg,
                               const soak_results& results,
                               const node_stats& stats) {
  nlohmann::ordered_json requests, errors, timeouts, latency;
  auto last_from = static_cast<double>(cfg.seconds - cfg.window);
  for (std::size_t svc = 0; svc < 3; ++svc) {
    auto name = service_names[svc];
    requests[name] = results.requests[svc];
    errors[name] = results.errors[svc];
    timeouts[name] = results.timeouts[svc];
    auto& xs = results.latencies[svc];
    latency[name] = {
      {"first", percentiles(latencies_between(xs, 0, double(cfg.window)))},
      {"last", percentiles(latencies_between(xs, last_from, 1e18))}};
  }
  nlohmann::ordered_json out{
    {"bench", "soak"},
    {"seconds", cfg.seconds},
    {"rate", cfg.rate},
    {"warmup_s", cfg.warmup},
    {"window_s", cfg.window},
    {"requests", requests},
    {"errors", errors},
    {"timeouts", timeouts},
    {"exhausted_backfills", results.exhausted},
    {"latency_ms", latency},
  };
  out.update(memory_verdict(cfg, results));
  out["scheduler_results_bytes"] = stats.backfill_scheduler.results_bytes;
  out["scheduler_results_forgotten"] = stats.backfill_scheduler.results_forgotten;
  out["secrets_written"] = stats.secret_buffer.entries_written;
  out["session_writes"] = stats.session_persister.writes;
  out["load_average"] = bench::load_average();
  return out;
}

node_stats ask_stats(caf::actor_system& sys, const node_actor& node) {
  caf::scoped_actor self{sys};
  node_stats result;
  self->request(node, request_timeout, stats_atom::value)
    .receive([&](node_stats& x) { result = std::move(x); },
             [&](caf::error& err) { fail("stats: " + sys.render(err)); });
  return result;
}

void check_options(const soak_config& cfg) {
  if (cfg.rate == 0 || cfg.seconds == 0 || cfg.sample_interval == 0
      || cfg.progress_interval == 0 || cfg.results_memory == 0)
    fail("--soak.rate, --soak.seconds, --soak.sample-interval, "
         "--soak.progress-interval and --soak.results-memory must be "
         "positive");
  if (cfg.warmup + 2 * cfg.sample_interval > cfg.seconds)
    fail("--soak.seconds must leave two RSS samples after --soak.warmup");
  if (cfg.window == 0 || cfg.window > cfg.seconds)
    fail("--soak.window must be positive and at most --soak.seconds");
}

/// The whole run against a fresh node; the summary and whether it passed.
bool run_soak(caf::actor_system& sys, const soak_config& cfg) {
  bench::temp_dir dir{cfg.dir, "soak"};
  bench::node_process node{
    "soak", cfg.node, dir.path(),
    {"--coalesce.scheduler-results-memory="
     + std::to_string(cfg.results_memory)}};
  auto gateway = connect_node(sys, "127.0.0.1", node.port(),
                              std::chrono::seconds{10});
  if (!gateway)
    fail(unreachable_sentence(sys, gateway.error()));
  fill_rooms(sys, *gateway, events_per_room(cfg));
  auto sessions = start_sessions(sys, *gateway);
  std::vector<session_handle_actor> handles;
  for (const auto& s : sessions)
    handles.push_back(s.handle);
  auto results = std::make_shared<soak_results>();
  auto driver = sys.spawn(soak_driver, *gateway, node.pid(), &cfg,
                          std::move(sessions), results);
  {
    caf::scoped_actor self{sys};
    self->monitor(driver);
    self->receive([](caf::down_msg&) {});
  }
  auto stats = ask_stats(sys, *gateway);
  auto out = summary(cfg, *results, stats);
  for (auto& handle : handles)
    caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  auto clean_exit = node.stop();
  out["node_exit_clean"] = clean_exit;
  uint64_t failures = results->exhausted;
  for (std::size_t svc = 0; svc < 3; ++svc)
    failures += results->errors[svc];
  if (!results->first_error.empty())
    std::cerr << "soak: first error: " << results->first_error << '\n';
  std::cout << out.dump() << std::endl;
  return failures == 0 && clean_exit && out["bounded"].get<bool>();
}

} // namespace

int main(int argc, char** argv) {
  soak_config cfg;
  if (auto err = cfg.parse(argc, argv))
    fail("invalid options: " + to_string(err));
  if (cfg.cli_helptext_printed)
    return EXIT_SUCCESS;
  check_options(cfg);
  caf::actor_system sys{cfg};
  return run_soak(sys, cfg) ? EXIT_SUCCESS : EXIT_FAILURE;
}
