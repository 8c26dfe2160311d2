// coalesce-cli's secret commands: put, get and flush.

#include <memory>

#include <CLI/CLI.hpp>

#include "cli_command.hpp"

namespace coalesce {

namespace {

/// Queue requests in flight when putting from stdin.
constexpr std::size_t stdin_window = 8;

/// `-` alone in place of the fields: read them from stdin, one per line.
bool from_stdin(const std::vector<std::string>& fields) {
  return fields == std::vector<std::string>{"-"};
}

int secret_put(session& s, const std::vector<std::string>& fields) {
  std::vector<secret_entry> entries;
  std::string error;
  if (from_stdin(fields)) {
    auto bad = read_stdin_lines(entries, [](const std::string& line,
                                            std::string& why) {
      return parse_entry(split_fields(line), why);
    });
    if (bad)
      return usage(*bad);
  } else {
    auto entry = parse_entry(fields, error);
    if (!entry)
      return usage(error);
    entries.push_back(std::move(*entry));
  }
  auto total = entries.size();
  auto progress = std::make_shared<std::atomic<uint64_t>>(0);
  auto report = std::make_shared<queue_report>();
  auto pipeline = spawn_queue_pipeline(s.sys, s.node,
                                       in_batches(std::move(entries),
                                                  stdin_batch),
                                       stdin_window, s.timeout(), progress,
                                       report);
  await_queue_pipeline(s.sys, pipeline, *progress, total, false);
  if (report->errors > 0)
    return fail(s.failure(report->first_error));
  return exit_ok;
}

void print_lookup(const secret_lookup& answer) {
  std::cout << to_hex(answer.secret) << ' ' << answer.message_ts << '\n';
}

int secret_get_one(session& s, const std::vector<std::string>& fields) {
  std::string error;
  auto key = parse_key(fields, error);
  if (!key)
    return usage(error);
  secret_lookup answer;
  if (auto failed = s.ask(answer, lookup_atom::value, *key))
    return fail(*failed);
  if (!answer.found)
    return fail({exit_not_found, "no secret for " + key->chat + " "
                                   + key->sender + " " + key->msg_id});
  print_lookup(answer);
  return exit_ok;
}

int secret_get_stdin(session& s) {
  std::vector<secret_key> keys;
  auto bad = read_stdin_lines(keys, [](const std::string& line,
                                       std::string& why) {
    return parse_key(split_fields(line), why);
  });
  if (bad)
    return usage(*bad);
  for (auto& batch : in_batches(std::move(keys), stdin_batch)) {
    std::vector<secret_lookup> answers;
    if (auto failed = s.ask(answers, lookup_atom::value, std::move(batch)))
      return fail(*failed);
    for (const auto& answer : answers) {
      if (answer.found)
        print_lookup(answer);
      else
        std::cout << "-\n";
    }
  }
  return exit_ok;
}

int secret_flush(session& s) {
  // The node answers with the reason if the data is not durable in time,
  // before this client's own timeout would leave the user guessing.
  auto deadline = s.timeout() * 8 / 10;
  ok_atom done;
  if (auto failed = s.ask(done, flush_atom::value, deadline))
    return fail(*failed);
  return exit_ok;
}

void add_secret_commands(CLI::App& app, cli_commands& commands) {
  auto secret = app.add_subcommand("secret", "put, get or flush secrets");
  secret->require_subcommand(1);

  auto put_fields = std::make_shared<std::vector<std::string>>();
  auto put = secret->add_subcommand(
    "put", "queue one secret, or with - one per stdin line:\n"
           "CHAT SENDER MSG_ID SECRET_HEX [EXPIRES_AT [MESSAGE_TS]]");
  put->add_option("fields", *put_fields,
                  "CHAT SENDER MSG_ID SECRET_HEX [EXPIRES_AT [MESSAGE_TS]] or -")
    ->required();
  commands.push_back({put, [put_fields](session& s) {
                        return secret_put(s, *put_fields);
                      }});

  auto get_fields = std::make_shared<std::vector<std::string>>();
  auto get = secret->add_subcommand(
    "get", "print SECRET_HEX MESSAGE_TS of one secret (exit 1 if missing), or "
           "with - one line per stdin key (- for a missing one)");
  get->add_option("fields", *get_fields, "CHAT SENDER MSG_ID or -")
    ->required();
  commands.push_back({get, [get_fields](session& s) {
                        return from_stdin(*get_fields)
                                 ? secret_get_stdin(s)
                                 : secret_get_one(s, *get_fields);
                      }});

  auto flush = secret->add_subcommand(
    "flush", "return once everything queued before it is durable");
  commands.push_back({flush, secret_flush});
}

} // namespace

const bool registered = register_command_group(add_secret_commands);

} // namespace coalesce
