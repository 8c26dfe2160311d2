// coalesce-cli's session commands: put, get, updates and delete. For `put`
// the CLI is the session's live handle: it registers an actor that answers
// the persister's snapshot request with the file's bytes, and waits until
// the write that covers its persist is done.

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>

#include <CLI/CLI.hpp>

#include "cli_command.hpp"
#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

/// `ID:KIND:PAYLOAD` (the payload may hold colons), stamped now.
std::optional<session_update> parse_update(const std::string& text,
                                           std::string& why) {
  auto first = text.find(':');
  auto second = first == std::string::npos ? first : text.find(':', first + 1);
  if (second == std::string::npos || first == 0) {
    why = "--update \"" + text + "\" is not ID:KIND:PAYLOAD";
    return std::nullopt;
  }
  session_update row;
  row.id = text.substr(0, first);
  row.kind = text.substr(first + 1, second - first - 1);
  row.payload = text.substr(second + 1);
  row.timestamp = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  return row;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return std::nullopt;
  return std::string{std::istreambuf_iterator<char>{in},
                     std::istreambuf_iterator<char>{}};
}

/// The session's live handle for the time of one put: the file's bytes.
session_handle_actor::behavior_type file_handle(std::string blob) {
  return {[blob](snapshot_atom) { return blob; }};
}

struct put_options {
  std::string session_id;
  std::string file;
  std::vector<std::string> updates;
};

int session_put(session& s, const put_options& o) {
  auto blob = read_file(o.file);
  if (!blob)
    return usage("cannot read " + o.file);
  std::vector<session_update> rows;
  for (const auto& text : o.updates) {
    std::string why;
    auto row = parse_update(text, why);
    if (!row)
      return usage(why);
    rows.push_back(std::move(*row));
  }
  auto handle = s.sys.spawn(file_handle, *blob);
  // The actor system waits for the handle when the CLI exits: stop it on
  // every path.
  std::shared_ptr<void> stop_handle{nullptr, [handle](void*) {
    caf::anon_send_exit(handle, caf::exit_reason::user_shutdown);
  }};
  uint64_t generation = 0;
  if (auto failed = s.ask(generation, register_atom::value, o.session_id,
                          handle))
    return fail(*failed);
  ok_atom done;
  // The snapshot goes with the persist: the node need not ask the handle
  // back across the network.
  if (auto failed = s.ask(done, persist_atom::value, o.session_id, handle,
                          session_snapshot{std::move(*blob)}, std::move(rows),
                          std::vector<std::string>{}))
    return fail(*failed);
  return exit_ok;
}

/// The session's record, or the exit code: not found is exit 1.
std::optional<session_record> load(session& s, const std::string& id,
                                   int& code) {
  std::optional<session_record> result;
  s.self->request(s.node, s.timeout(), load_atom::value, id)
    .receive([&](session_record& x) { result = std::move(x); },
             [&](caf::error& err) {
               if (err.category() == errc_category
                   && err.code() == static_cast<uint8_t>(errc::not_found))
                 code = fail({exit_not_found, "no session " + id});
               else
                 code = fail(s.failure(err));
             });
  return result;
}

int session_get(session& s, const std::string& id) {
  int code = exit_ok;
  auto record = load(s, id, code);
  if (!record)
    return code;
  std::cout.write(record->blob.data(),
                  static_cast<std::streamsize>(record->blob.size()));
  return exit_ok;
}

int session_updates(session& s, const std::string& id) {
  int code = exit_ok;
  auto record = load(s, id, code);
  if (!record)
    return code;
  for (const auto& row : record->updates)
    std::cout << row.id << ' ' << row.timestamp << ' ' << row.kind << ' '
              << row.payload << '\n';
  return exit_ok;
}

int session_delete(session& s, const std::string& id) {
  ok_atom done;
  if (auto failed = s.ask(done, delete_atom::value, id))
    return fail(*failed);
  return exit_ok;
}

void add_session_commands(CLI::App& app, cli_commands& commands) {
  auto group = app.add_subcommand("session",
                                  "persist, read or delete sessions");
  group->require_subcommand(1);
  auto put = std::make_shared<put_options>();
  auto put_cmd = group->add_subcommand(
    "put", "make FILE the state of SESSION_ID and wait until it is written");
  put_cmd->add_option("session", put->session_id, "the session id")
    ->required();
  put_cmd->add_option("file", put->file, "the session's state blob")
    ->required();
  put_cmd->add_option("--update", put->updates,
                      "an update row written with it, ID:KIND:PAYLOAD "
                      "(repeatable)");
  commands.push_back({put_cmd, [put](session& s) {
                        return session_put(s, *put);
                      }});
  auto id = std::make_shared<std::string>();
  auto get_cmd = group->add_subcommand(
    "get", "print the stored state of SESSION_ID (exit 1: not found)");
  get_cmd->add_option("session", *id, "the session id")->required();
  commands.push_back({get_cmd, [id](session& s) {
                        return session_get(s, *id);
                      }});
  auto updates_cmd = group->add_subcommand(
    "updates", "print the update rows of SESSION_ID, one per line: ID "
               "TIMESTAMP KIND PAYLOAD, oldest first");
  updates_cmd->add_option("session", *id, "the session id")->required();
  commands.push_back({updates_cmd, [id](session& s) {
                        return session_updates(s, *id);
                      }});
  auto delete_cmd = group->add_subcommand(
    "delete", "delete SESSION_ID and every update row of it");
  delete_cmd->add_option("session", *id, "the session id")->required();
  commands.push_back({delete_cmd, [id](session& s) {
                        return session_delete(s, *id);
                      }});
}

} // namespace

const bool registered = register_command_group(add_session_commands);

} // namespace coalesce
