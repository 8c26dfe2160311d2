// coalesce-cli's timeline commands: appending events to a room, reading a
// page of it, and backfilling a room's history through the scheduler.

#include <chrono>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>


#include "cli_command.hpp"
#include "event_lines.hpp"

namespace coalesce {

namespace {

int timeline_append(session& s, const std::string& room) {
  std::vector<timeline_event> events;
  if (auto bad = read_stdin_lines(events, parse_event_line))
    return usage(*bad);
  // In order, one batch after the other: the timeline keeps append order.
  for (auto& batch : in_batches(std::move(events), stdin_batch)) {
    uint64_t appended = 0;
    if (auto failed = s.ask(appended, append_atom::value, room,
                            std::move(batch)))
      return fail(*failed);
  }
  return exit_ok;
}

/// One page from the room's position, read only: the position does not
/// move (`backfill` moves it).
int read_page(session& s, const std::string& room, uint32_t max_events) {
  timeline_page page;
  if (auto failed = s.ask(page, page_atom::value, room, max_events))
    return fail(*failed);
  std::cout << (page.reached_start ? "reached_start" : "more") << ' '
            << page.cursor.read_at << ' ' << page.cursor.next << '\n';
  for (const auto& event : page.events)
    std::cout << format_event_line(event) << '\n';
  std::cout.flush();
  return exit_ok;
}

std::optional<priority> parse_priority(const std::string& text) {
  for (auto x : {priority::high, priority::normal, priority::low})
    if (to_string(x) == text)
      return x;
  return std::nullopt;
}

struct backfill_options {
  std::string room;
  std::string priority_text = "normal";
  std::string until_event;
  CLI::Option* older_than_option = nullptr;
  int64_t older_than = 0;
  std::string until_type;
  uint32_t max_batches = 0;
  uint32_t batch_size = 30;
  std::string wait_text = "5min";
};

/// The request the options ask for, or the usage sentence saying why not.
std::optional<std::string> make_request(const backfill_options& o,
                                        backfill_request& request) {
  request.room = o.room;
  auto prio = parse_priority(o.priority_text);
  if (!prio)
    return "--priority must be high, normal or low, got \"" + o.priority_text
           + "\"";
  request.prio = *prio;
  int conditions = 0;
  if (!o.until_event.empty()) {
    request.stop.what = stop_condition::kind::until_event;
    request.stop.event_id = o.until_event;
    ++conditions;
  }
  if (o.older_than_option->count() > 0) {
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
    return std::string{"give at most one of --until-event, --older-than and "
                       "--until-type"};
  request.max_batches = o.max_batches;
  request.batch_size = o.batch_size;
  return std::nullopt;
}

/// Awaits the run's result. A run may take longer than one exchange:
/// --timeout bounds each await, a silent await is re-sent (saying so on
/// stderr) as long as the node answers a ping, and --wait bounds them all.
/// Through --nodes, an issuer that is gone is final: its run went with it.
std::optional<cli_failure> await_result(session& s, backfill_ticket ticket,
                                        caf::timespan wait,
                                        backfill_result& result) {
  using clock = std::chrono::steady_clock;
  auto started = clock::now();
  for (;;) {
    caf::error failed;
    s.self->request(s.node, s.timeout(), await_atom::value, ticket)
      .receive([&](backfill_result& x) { result = std::move(x); },
               [&](caf::error& err) { failed = std::move(err); });
    if (!failed)
      return std::nullopt;
    if (failed != caf::sec::request_timeout)
      return s.failure(failed);
    node_stats alive;
    if (auto ping = s.ask(alive, stats_atom::value))
      return ping;
    auto waited = clock::now() - started;
    if (waited >= wait)
      return cli_failure{exit_unreachable,
                         "the run of ticket " + std::to_string(ticket.id)
                           + " had not ended after --wait "
                           + caf::deep_to_string(wait)
                           + "; the node answers, and the run may still end "
                             "there"};
    std::cerr << "coalesce-cli: the run of ticket " << ticket.id
              << " has not ended after "
              << std::chrono::duration_cast<std::chrono::seconds>(waited)
                   .count()
              << "s; the node answers, waiting again\n";
  }
}

int backfill(session& s, const backfill_options& o) {
  backfill_request request;
  if (auto bad = make_request(o, request))
    return usage(*bad);
  auto wait = parse_duration(o.wait_text);
  if (!wait)
    return usage("--wait \"" + o.wait_text
                 + "\" is not a positive duration as in the config file, "
                   "such as 30s or 5min");
  backfill_ticket ticket;
  if (auto failed = s.ask(ticket, enqueue_atom::value, request))
    return fail(*failed);
  backfill_result result;
  if (auto failed = await_result(s, ticket, *wait, result))
    return fail(*failed);
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

void add_backfill_command(CLI::App& app, cli_commands& commands) {
  auto o = std::make_shared<backfill_options>();
  auto cmd = app.add_subcommand(
    "backfill", "load older history of ROOM through the scheduler; prints the "
                "stop reason, then the loaded events newest first");
  cmd->add_option("room", o->room, "the room")->required();
  cmd->add_option("--priority", o->priority_text, "high, normal or low")
    ->capture_default_str();
  cmd->add_option("--until-event", o->until_event,
                  "stop once this event id was loaded");
  o->older_than_option = cmd->add_option(
    "--older-than", o->older_than,
    "stop once an event older than this timestamp was loaded");
  cmd->add_option("--until-type", o->until_type,
                  "stop once an event of this type was loaded");
  cmd
    ->add_option("--max-batches", o->max_batches,
                 "stop after this many batches (0: no limit)")
    ->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "events per batch")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  cmd
    ->add_option("--wait", o->wait_text,
                 "how long to wait for the run's result in all: each await "
                 "is bounded by --timeout and re-sent while the node answers")
    ->capture_default_str();
  commands.push_back({cmd, [o](session& s) { return backfill(s, *o); }});
}

void add_timeline_commands(CLI::App& app, cli_commands& commands) {
  auto timeline = app.add_subcommand("timeline", "work on room timelines");
  timeline->require_subcommand(1);
  auto room = std::make_shared<std::string>();
  auto append = timeline->add_subcommand(
    "append", "append events to ROOM, one per stdin line, oldest first:\n"
              "EVENT_ID TYPE TIMESTAMP BODY...");
  append->add_option("room", *room, "the room")->required();
  commands.push_back({append, [room](session& s) {
                        return timeline_append(s, *room);
                      }});
  auto max_events = std::make_shared<uint32_t>(100);
  auto page = timeline->add_subcommand(
    "page", "print the page of ROOM a backfill would load next, without "
            "moving its position: \"reached_start\" or \"more\", the "
            "position it was read at and the one after it, then the events "
            "newest first");
  page->add_option("room", *room, "the room")->required();
  page->add_option("--max-events", *max_events, "events at most")
    ->capture_default_str()
    ->check(CLI::PositiveNumber);
  commands.push_back({page, [room, max_events](session& s) {
                        return read_page(s, *room, *max_events);
                      }});
  add_backfill_command(app, commands);
}

} // namespace

const bool registered = register_command_group(add_timeline_commands);

} // namespace coalesce
