// coalesce-cli: talks to a coalesce node over CAF's middleman.
//
// Exit codes: 0 success, 1 not found, 2 usage error, 3 the node cannot be
// reached or does not answer within the timeout, 4 the node answered with an
// error. Errors go to stderr as one plain sentence.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <nlohmann/json.hpp>

#include "app/event_lines.hpp"
#include "app/node_client.hpp"
#include "app/secret_lines.hpp"
#include "coalesce/messages/registration.hpp"

using namespace coalesce;
using json = nlohmann::ordered_json;

namespace {

/// Entries per queue or lookup message when reading from stdin: large enough
/// to amortise a remote round trip, small enough to keep messages modest.
constexpr std::size_t stdin_batch = 512;
/// Queue requests in flight when putting from stdin.
constexpr std::size_t stdin_window = 8;

struct cli_options {
  std::string host = "127.0.0.1";
  uint16_t port = 4300;
  std::string timeout_text = "5s";
  caf::timespan timeout = std::chrono::seconds{5};
  std::vector<std::string> put_fields;
  std::vector<std::string> get_fields;
  std::size_t load_count = 0;
  std::size_t load_concurrency = 16;
  std::size_t load_batch = 64;
  std::string room;
  std::string backfill_priority = "normal";
  std::string until_event;
  int64_t older_than = 0;
  bool has_older_than = false;
  std::string until_type;
  uint32_t max_batches = 0;
  uint32_t batch_size = 30;
};

std::optional<caf::timespan> parse_duration(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && (std::isdigit(text[digits]) || text[digits] == '.'))
    ++digits;
  if (digits == 0)
    return std::nullopt;
  double value = 0;
  try {
    value = std::stod(text.substr(0, digits));
  } catch (...) {
    return std::nullopt;
  }
  auto unit = text.substr(digits);
  double seconds = 0;
  if (unit == "ms")
    seconds = value / 1000;
  else if (unit == "s" || unit.empty())
    seconds = value;
  else if (unit == "min" || unit == "m")
    seconds = value * 60;
  else
    return std::nullopt;
  if (seconds <= 0)
    return std::nullopt;
  return std::chrono::duration_cast<caf::timespan>(
    std::chrono::duration<double>(seconds));
}

int fail(const cli_failure& failure) {
  std::cerr << "coalesce-cli: " << failure.sentence << '\n';
  return failure.code;
}

int usage(const std::string& sentence) {
  return fail({exit_usage, sentence});
}

/// A connected session with one node. Every request goes out from the same
/// actor: the node watches the actor that enqueued a backfill, and its end
/// would cancel the run.
struct session {
  session(caf::actor_system& sys, const cli_options& opts)
    : sys(sys), opts(opts), self(sys) {
    // nop
  }

  caf::actor_system& sys;
  const cli_options& opts;
  caf::scoped_actor self;
  node_actor node;

  std::string where() const {
    return opts.host + ":" + std::to_string(opts.port);
  }

  cli_failure failure(const caf::error& err) const {
    return classify(sys, err, where(), opts.timeout);
  }

  /// One request and its answer, or the failure it ended in.
  template <class T, class... Ts>
  std::optional<cli_failure> ask(T& result, Ts&&... xs) {
    std::optional<cli_failure> failed;
    self->request(node, opts.timeout, std::forward<Ts>(xs)...)
      .receive([&](T& x) { result = std::move(x); },
               [&](caf::error& err) { failed = failure(err); });
    return failed;
  }
};

/// Runs a queue pipeline, drawing a progress bar on stderr when it is a
/// terminal. Returns once every request was answered or failed.
void run_pipeline(session& s, caf::actor pipeline,
                  const std::shared_ptr<std::atomic<uint64_t>>& progress,
                  uint64_t total, bool show_progress) {
  caf::scoped_actor self{s.sys};
  self->monitor(pipeline);
  bool done = false;
  auto draw = [&] {
    if (!show_progress)
      return;
    auto acknowledged = progress->load();
    auto fraction = total == 0 ? 1.0 : double(acknowledged) / total;
    int filled = static_cast<int>(fraction * 40);
    std::fprintf(stderr, "\r[%s%s] %3d%% %llu/%llu entries",
                 std::string(filled, '#').c_str(),
                 std::string(40 - filled, ' ').c_str(),
                 static_cast<int>(fraction * 100),
                 static_cast<unsigned long long>(acknowledged),
                 static_cast<unsigned long long>(total));
  };
  while (!done) {
    self->receive([&](caf::down_msg&) { done = true; },
                  caf::after(std::chrono::milliseconds{200}) >> draw);
  }
  draw();
  if (show_progress)
    std::fputc('\n', stderr);
}

/// Reads stdin one item per non-blank line with `parse(line, error)`;
/// returns the usage sentence naming the first bad line, or nothing.
template <class T, class Parse>
std::optional<std::string> read_stdin_lines(std::vector<T>& out, Parse parse) {
  std::string line;
  std::string error;
  std::size_t number = 0;
  while (std::getline(std::cin, line)) {
    ++number;
    if (split_fields(line).empty())
      continue;
    auto item = parse(line, error);
    if (!item)
      return "line " + std::to_string(number) + ": " + error;
    out.push_back(std::move(*item));
  }
  return std::nullopt;
}

int secret_put(session& s) {
  std::vector<secret_entry> entries;
  std::string error;
  if (s.opts.put_fields == std::vector<std::string>{"-"}) {
    auto bad = read_stdin_lines(entries, [](const std::string& line,
                                            std::string& why) {
      return parse_entry(split_fields(line), why);
    });
    if (bad)
      return usage(*bad);
  } else {
    auto entry = parse_entry(s.opts.put_fields, error);
    if (!entry)
      return usage(error);
    entries.push_back(std::move(*entry));
  }
  std::vector<std::vector<secret_entry>> batches;
  for (std::size_t i = 0; i < entries.size(); i += stdin_batch)
    batches.emplace_back(
      std::make_move_iterator(entries.begin() + i),
      std::make_move_iterator(entries.begin()
                              + std::min(entries.size(), i + stdin_batch)));
  auto progress = std::make_shared<std::atomic<uint64_t>>(0);
  auto report = std::make_shared<queue_report>();
  auto pipeline = spawn_queue_pipeline(s.sys, s.node, std::move(batches),
                                       stdin_window, s.opts.timeout, progress,
                                       report);
  run_pipeline(s, pipeline, progress, entries.size(), false);
  if (report->errors > 0)
    return fail(s.failure(report->first_error));
  return exit_ok;
}

int secret_get(session& s) {
  std::string error;
  if (s.opts.get_fields != std::vector<std::string>{"-"}) {
    auto key = parse_key(s.opts.get_fields, error);
    if (!key)
      return usage(error);
    secret_lookup answer;
    if (auto failed = s.ask(answer, lookup_atom::value, *key))
      return fail(*failed);
    if (!answer.found)
      return fail({exit_not_found, "no secret for " + key->chat + " "
                                     + key->sender + " " + key->msg_id});
    std::cout << to_hex(answer.secret) << ' ' << answer.message_ts << '\n';
    return exit_ok;
  }
  std::vector<secret_key> keys;
  auto bad = read_stdin_lines(keys, [](const std::string& line,
                                       std::string& why) {
    return parse_key(split_fields(line), why);
  });
  if (bad)
    return usage(*bad);
  for (std::size_t i = 0; i < keys.size(); i += stdin_batch) {
    std::vector<secret_key> batch(
      keys.begin() + i, keys.begin() + std::min(keys.size(), i + stdin_batch));
    std::vector<secret_lookup> answers;
    if (auto failed = s.ask(answers, lookup_atom::value, std::move(batch)))
      return fail(*failed);
    for (const auto& answer : answers) {
      if (answer.found)
        std::cout << to_hex(answer.secret) << ' ' << answer.message_ts << '\n';
      else
        std::cout << "-\n";
    }
  }
  return exit_ok;
}

int secret_flush(session& s) {
  // The node answers with the reason if the data is not durable in time,
  // before this client's own timeout would leave the user guessing.
  auto deadline = s.opts.timeout * 8 / 10;
  ok_atom done;
  if (auto failed = s.ask(done, flush_atom::value, deadline))
    return fail(*failed);
  return exit_ok;
}

int timeline_append(session& s) {
  std::vector<timeline_event> events;
  if (auto bad = read_stdin_lines(events, parse_event_line))
    return usage(*bad);
  // In order, one batch after the other: the timeline keeps append order.
  for (std::size_t i = 0; i < events.size(); i += stdin_batch) {
    std::vector<timeline_event> batch(
      events.begin() + i, events.begin() + std::min(events.size(),
                                                    i + stdin_batch));
    uint64_t appended = 0;
    if (auto failed = s.ask(appended, append_atom::value, s.opts.room,
                            std::move(batch)))
      return fail(*failed);
  }
  return exit_ok;
}

std::optional<priority> parse_priority(const std::string& text) {
  if (text == "high")
    return priority::high;
  if (text == "normal")
    return priority::normal;
  if (text == "low")
    return priority::low;
  return std::nullopt;
}

int backfill(session& s) {
  const auto& o = s.opts;
  backfill_request request;
  request.room = o.room;
  auto prio = parse_priority(o.backfill_priority);
  if (!prio)
    return usage("--priority must be high, normal or low, got \""
                 + o.backfill_priority + "\"");
  request.prio = *prio;
  int conditions = 0;
  if (!o.until_event.empty()) {
    request.stop.what = stop_condition::kind::until_event;
    request.stop.event_id = o.until_event;
    ++conditions;
  }
  if (o.has_older_than) {
    request.stop.what = stop_condition::kind::older_than;
    request.stop.timestamp = o.older_than;
    ++conditions;
  }
  if (!o.until_type.empty()) {
    request.stop.what = stop_condition::kind::until_type;
    request.stop.event_type = o.until_type;
    ++conditions;
  }
  if (conditions > 1)
    return usage("give at most one of --until-event, --older-than and "
                 "--until-type");
  request.max_batches = o.max_batches;
  request.batch_size = o.batch_size;
  backfill_ticket ticket;
  if (auto failed = s.ask(ticket, enqueue_atom::value, request))
    return fail(*failed);
  // The run may take longer than one exchange: --timeout bounds each await,
  // and a silent await is re-sent as long as the node answers a ping.
  backfill_result result;
  for (;;) {
    std::optional<cli_failure> failed = s.ask(result, await_atom::value,
                                              ticket);
    if (!failed)
      break;
    if (failed->code != exit_unreachable)
      return fail(*failed);
    node_stats alive;
    if (auto ping = s.ask(alive, stats_atom::value))
      return fail(*ping);
  }
  std::cout << to_string(result.reason) << '\n';
  for (const auto& event : result.events)
    std::cout << format_event_line(event) << '\n';
  std::cout.flush();
  if (result.reason == stop_reason::failed)
    return fail({exit_node_error, "the run for room " + o.room
                                    + " failed: the pager reported an error "
                                      "or did not answer in time"});
  if (result.reason == stop_reason::cancelled)
    return fail({exit_node_error,
                 "the run for room " + o.room + " was cancelled"});
  return exit_ok;
}

json to_json(const node_stats& x) {
  const auto& b = x.secrets;
  const auto& sched = x.scheduler;
  json finished = json::object();
  for (std::size_t i = 0; i < sched.finished.size(); ++i)
    finished[to_string(static_cast<stop_reason>(i))] = sched.finished[i];
  return json{
    {"uptime_s", x.uptime_s},
    {"shutting_down", x.shutting_down},
    {"refused_requests", x.refused_requests},
    {"secrets",
     {{"pending", b.pending},
      {"waiting_producers", b.waiting_producers},
      {"held_entries", b.held_entries},
      {"batches_written", b.batches_written},
      {"entries_written", b.entries_written},
      {"failed_batches", b.failed_batches},
      {"last_batch_size", b.last_batch_size},
      {"last_write_latency_us", b.last_write_latency_us},
      {"force_buffered", b.force_buffered},
      {"sealed", b.sealed},
      {"retries", b.retries},
      {"failing_for_ms", b.failing_for_ms},
      {"last_error", b.last_error}}},
    {"scheduler",
     {{"queued",
       {{"low", sched.queued.at(0)},
        {"normal", sched.queued.at(1)},
        {"high", sched.queued.at(2)}}},
      {"running", sched.running},
      {"coalesced_joins", sched.coalesced_joins},
      {"finished", finished}}},
  };
}

int stats(session& s) {
  node_stats result;
  if (auto failed = s.ask(result, stats_atom::value))
    return fail(*failed);
  std::cout << to_json(result).dump() << '\n';
  return exit_ok;
}

double percentile(std::vector<double> xs, double p) {
  if (xs.empty())
    return 0;
  std::sort(xs.begin(), xs.end());
  return xs[static_cast<std::size_t>(p * (xs.size() - 1))];
}

int load_secrets(session& s) {
  const auto& o = s.opts;
  if (o.load_count == 0)
    return usage("--count must be positive");
  if (o.load_concurrency == 0 || o.load_batch == 0)
    return usage("--concurrency and --batch must be positive");
  // A run id keeps the keys of separate runs apart.
  auto run = std::to_string(std::random_device{}());
  std::vector<std::vector<secret_entry>> batches;
  std::mt19937_64 bytes{std::random_device{}()};
  for (std::size_t i = 0; i < o.load_count; i += o.load_batch) {
    std::vector<secret_entry> batch;
    for (std::size_t j = i; j < std::min(o.load_count, i + o.load_batch); ++j) {
      std::vector<uint8_t> secret(secret_size);
      for (auto& byte : secret)
        byte = static_cast<uint8_t>(bytes());
      batch.push_back(secret_entry{"load-" + run, "coalesce-cli",
                                   "M" + std::to_string(j), std::move(secret),
                                   0, 0});
    }
    batches.push_back(std::move(batch));
  }
  auto progress = std::make_shared<std::atomic<uint64_t>>(0);
  auto report = std::make_shared<queue_report>();
  auto started = std::chrono::steady_clock::now();
  auto pipeline = spawn_queue_pipeline(s.sys, s.node, std::move(batches),
                                       o.load_concurrency, o.timeout, progress,
                                       report);
  run_pipeline(s, pipeline, progress, o.load_count, isatty(STDERR_FILENO));
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                               - started)
                   .count();
  json summary{
    {"command", "load secrets"},
    {"chat", "load-" + run},
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

struct cli_config : caf::actor_system_config {
  cli_config() {
    register_message_types(*this);
    load<caf::io::middleman>();
    // A client needs few threads; CAF's default of at least four is for
    // servers.
    set("scheduler.max-threads", 2);
  }
};

} // namespace

int main(int argc, char** argv) {
  cli_options opts;
  CLI::App app{"coalesce-cli: talk to a coalesce node.\n\nExit codes: 0 "
               "success, 1 not found, 2 usage error, 3 node unreachable or "
               "silent within the timeout, 4 the node answered with an error."};
  app.add_option("--host", opts.host, "address of the node")
    ->capture_default_str();
  app.add_option("--port", opts.port, "port of the node")->capture_default_str();
  app.add_option("--timeout", opts.timeout_text,
                 "bound on each exchange with the node, e.g. 500ms, 5s, 1min")
    ->capture_default_str();
  app.require_subcommand(1);

  auto secret = app.add_subcommand("secret", "put, get or flush secrets");
  secret->require_subcommand(1);
  auto put = secret->add_subcommand(
    "put", "queue one secret, or with - one per stdin line:\n"
           "CHAT SENDER MSG_ID SECRET_HEX [EXPIRES_AT [MESSAGE_TS]]");
  put->add_option("fields", opts.put_fields,
                  "CHAT SENDER MSG_ID SECRET_HEX [EXPIRES_AT [MESSAGE_TS]] or -")
    ->required();
  auto get = secret->add_subcommand(
    "get", "print SECRET_HEX MESSAGE_TS of one secret (exit 1 if missing), or "
           "with - one line per stdin key (- for a missing one)");
  get->add_option("fields", opts.get_fields, "CHAT SENDER MSG_ID or -")
    ->required();
  auto flush = secret->add_subcommand(
    "flush", "return once everything queued before it is durable");
  auto stats_cmd = app.add_subcommand("stats",
                                      "print the node's counters as JSON");
  auto load = app.add_subcommand("load", "drive a workload");
  load->require_subcommand(1);
  auto load_secrets_cmd = load->add_subcommand(
    "secrets", "queue --count random secrets and print a JSON summary");
  load_secrets_cmd->add_option("--count", opts.load_count, "entries to queue")
    ->required();
  load_secrets_cmd
    ->add_option("--concurrency", opts.load_concurrency, "requests in flight")
    ->capture_default_str();
  load_secrets_cmd->add_option("--batch", opts.load_batch, "entries per request")
    ->capture_default_str();

  auto timeline = app.add_subcommand("timeline", "work on room timelines");
  timeline->require_subcommand(1);
  auto append = timeline->add_subcommand(
    "append", "append events to ROOM, one per stdin line, oldest first:\n"
              "EVENT_ID TYPE TIMESTAMP BODY...");
  append->add_option("room", opts.room, "the room")->required();
  auto backfill_cmd = app.add_subcommand(
    "backfill", "load older history of ROOM through the scheduler; prints the "
                "stop reason, then the loaded events newest first");
  backfill_cmd->add_option("room", opts.room, "the room")->required();
  backfill_cmd
    ->add_option("--priority", opts.backfill_priority, "high, normal or low")
    ->capture_default_str();
  backfill_cmd->add_option("--until-event", opts.until_event,
                           "stop once this event id was loaded");
  auto older_than = backfill_cmd->add_option(
    "--older-than", opts.older_than,
    "stop once an event older than this timestamp was loaded");
  backfill_cmd->add_option("--until-type", opts.until_type,
                           "stop once an event of this type was loaded");
  backfill_cmd
    ->add_option("--max-batches", opts.max_batches,
                 "stop after this many batches (0: no limit)")
    ->capture_default_str();
  backfill_cmd
    ->add_option("--batch-size", opts.batch_size, "events per batch")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    auto code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage;
  }
  opts.has_older_than = older_than->count() > 0;
  auto timeout = parse_duration(opts.timeout_text);
  if (!timeout)
    return usage("--timeout \"" + opts.timeout_text
                 + "\" is not a duration such as 500ms, 5s or 1min");
  opts.timeout = *timeout;

  cli_config cfg;
  caf::actor_system sys{cfg};
  session s{sys, opts};
  if (auto failed = connect_node(sys, opts.host, opts.port, opts.timeout,
                                 s.node))
    return fail(*failed);
  if (*put)
    return secret_put(s);
  if (*get)
    return secret_get(s);
  if (*flush)
    return secret_flush(s);
  if (*stats_cmd)
    return stats(s);
  if (*load_secrets_cmd)
    return load_secrets(s);
  if (*append)
    return timeline_append(s);
  if (*backfill_cmd)
    return backfill(s);
  return usage("no command given; see --help");
}
