#define CAF_SUITE node.bad_requests
#include <caf/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cxxabi.h>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/connect.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/node/services.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"

// One table of bad requests, at least one row for every request of every
// service (checked as the table runs: a request of a service's interface
// that no row sends fails the test), sent to a node's gateway in process
// and through a proxy
// from a second actor system over a real socket. Each row names the answer
// it is due: an error with its `errc` and the words its message must carry,
// or, where the request is legitimately fine, the answer that says so.
// After each row a valid request of the same service must be answered
// correctly: the node keeps serving. Real services over RocksDB with their
// I/O actors detached, so real time: every wait is bounded.

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

/// Generous: a row is answered within milliseconds; a missing answer fails
/// the row instead of hanging the suite.
constexpr auto answer_timeout = std::chrono::seconds{10};

/// Small limits, so oversize rows stay small messages.
constexpr std::size_t test_max_blob = 4096;
constexpr std::size_t test_max_update = 1024;
constexpr std::size_t test_pending_limit = 64;

struct io_config : test_config {
  io_config() {
    load<io::middleman>();
  }
};

/// What one request got back: its reply or its error; `answered` is false
/// when nothing came within the timeout.
struct outcome {
  bool answered = false;
  error err;
  message reply;
};

/// The handler of a reply of types `Outputs`.
template <template <class...> class List, class... Outputs>
auto reply_collector(outcome& out, List<Outputs...>) {
  return [&out](Outputs&... xs) {
    out.answered = true;
    out.reply = make_message(std::move(xs)...);
  };
}

/// While a row is sent: what it sent, each request as the types it
/// carries (its verb first).
std::set<std::type_index>* sent_by_row = nullptr;

/// Sends one request of `node_actor` and waits for its answer.
template <class... Ts>
outcome ask(scoped_actor& self, const node_actor& node, Ts... xs) {
  using outputs = response_type_t<typename node_actor::signatures, Ts...>;
  if (sent_by_row != nullptr)
    sent_by_row->insert(typeid(type_list<Ts...>));
  outcome out;
  self->request(node, answer_timeout, std::move(xs)...)
    .receive(reply_collector(out, outputs{}), [&out](error& err) {
      out.answered = err != sec::request_timeout;
      out.err = std::move(err);
    });
  return out;
}

/// The reply as a `T`, when it is one.
template <class T>
std::optional<T> reply_as(const outcome& out) {
  if (out.err || !out.reply.match_elements<T>())
    return std::nullopt;
  return out.reply.get_as<T>(0);
}

enum class service { secrets, timeline, backfill, sessions, node };

/// Where the rows are sent from: a remote request is decoded by the node's
/// middleman first, which refuses what its decoders bound.
enum class mode { in_process, remote };

/// A session's live handle: answers the persister's snapshot with `blob`.
session_handle_actor::behavior_type session_handle(std::string blob) {
  return {[blob](snapshot_atom) { return blob; }};
}

/// What the rows need that lives in the requesting system: session handles
/// (the persister asks them for snapshots, across the link when remote).
struct requester_parts {
  session_handle_actor live;
  session_handle_actor oversize;
};

using send_fn = std::function<outcome(scoped_actor&, const node_actor&)>;
/// Empty when a legitimate answer is the one due, else what is wrong.
using fine_fn = std::function<std::string(const outcome&)>;

/// One row: a bad request and the answer it is due.
struct bad_request {
  std::string name;
  service owner;
  send_fn send;
  /// The error due (with words its message must contain), or none when
  /// the request is legitimately fine and `fine` judges the answer.
  std::optional<errc> code;
  std::string words;
  fine_fn fine;
};

bad_request refused(std::string name, service owner, send_fn send, errc code,
                    std::string words) {
  return {std::move(name), owner, std::move(send), code, std::move(words), {}};
}

bad_request fine(std::string name, service owner, send_fn send, fine_fn ok) {
  return {std::move(name), owner, std::move(send), std::nullopt, {},
          std::move(ok)};
}

template <class T>
fine_fn answered_with(std::function<std::string(const T&)> judge) {
  return [judge](const outcome& out) -> std::string {
    auto value = reply_as<T>(out);
    if (!value)
      return "expected a " + std::string{typeid(T).name()} + " answer";
    return judge(*value);
  };
}

fine_fn answered_ok() {
  return answered_with<ok_atom>([](const ok_atom&) { return std::string{}; });
}

/// The node's probes: the names and values set up before the table runs.
constexpr const char* probe_msg_id = "probe";
constexpr uint8_t probe_fill = 7;
constexpr const char* probe_room = "!probe:x";
constexpr const char* probe_backfill_room = "!probe-backfill:x";
constexpr const char* probe_session = "probe-session";
constexpr const char* probe_blob = "probe state";
constexpr std::size_t probe_events = 3;

secret_entry entry_with(std::function<void(secret_entry&)> spoil) {
  auto entry = make_entry("bad", 1);
  spoil(entry);
  return entry;
}

secret_entry entry_with_secret(std::size_t bytes) {
  return entry_with([bytes](secret_entry& x) {
    x.secret = std::vector<uint8_t>(bytes, 1);
  });
}

std::vector<bad_request> secret_rows(mode from) {
  using v = std::vector<secret_entry>;
  auto s = service::secrets;
  auto queue_one = [](secret_entry entry) -> send_fn {
    return [entry](scoped_actor& self, const node_actor& node) {
      return ask(self, node, queue_atom::value, entry);
    };
  };
  auto queue_many = [](v entries) -> send_fn {
    return [entries](scoped_actor& self, const node_actor& node) {
      return ask(self, node, queue_atom::value, entries);
    };
  };
  auto lookup_one = [](secret_key key) -> send_fn {
    return [key](scoped_actor& self, const node_actor& node) {
      return ask(self, node, lookup_atom::value, key);
    };
  };
  auto lookup_many = [](std::vector<secret_key> keys) -> send_fn {
    return [keys](scoped_actor& self, const node_actor& node) {
      return ask(self, node, lookup_atom::value, keys);
    };
  };
  // A coordinator's copies and lookups for one replica: checked like a
  // client's own.
  auto replica_queue = [](v entries) -> send_fn {
    return [entries](scoped_actor& self, const node_actor& node) {
      return ask(self, node, replica_atom::value, entries, list_stamp{});
    };
  };
  auto replica_lookup = [](std::vector<secret_key> keys) -> send_fn {
    return [keys](scoped_actor& self, const node_actor& node) {
      return ask(self, node, replica_atom::value, keys, list_stamp{});
    };
  };
  // Queues `entry`, then looks it up: the lookup's answer is the row's.
  auto queue_then_lookup = [](secret_entry entry) -> send_fn {
    return [entry](scoped_actor& self, const node_actor& node) {
      auto queued = ask(self, node, queue_atom::value, entry);
      if (queued.err)
        return queued;
      return ask(self, node, lookup_atom::value, entry.key());
    };
  };
  auto invalid = errc::invalid_secret_entry;
  std::vector<bad_request> rows{
    refused("queue: empty chat", s,
            queue_one(entry_with([](secret_entry& x) { x.chat.clear(); })),
            invalid, "the chat is empty"),
    refused("queue: empty sender", s,
            queue_one(entry_with([](secret_entry& x) { x.sender.clear(); })),
            invalid, "the sender is empty"),
    refused("queue: empty msg_id", s,
            queue_one(entry_with([](secret_entry& x) { x.msg_id.clear(); })),
            invalid, "the msg_id is empty"),
  };
  for (std::size_t bytes : {0, 31, 33, 4096})
    rows.push_back(refused("queue: secret of " + std::to_string(bytes)
                             + " bytes",
                           s, queue_one(entry_with_secret(bytes)), invalid,
                           "must be 32 bytes, got " + std::to_string(bytes)));
  // Past max_decoded_secret a remote request does not decode: the gateway
  // gets it empty and answers so; in process the buffer's own check speaks.
  for (std::size_t bytes : {max_decoded_secret + 1, std::size_t{1} << 20}) {
    auto name = "queue: secret of " + std::to_string(bytes) + " bytes";
    if (from == mode::remote)
      rows.push_back(refused(name + " (does not decode)", s,
                             queue_one(entry_with_secret(bytes)),
                             errc::invalid_request,
                             "the request could not be decoded"));
    else
      rows.push_back(refused(name, s, queue_one(entry_with_secret(bytes)),
                             invalid,
                             "must be 32 bytes, got " + std::to_string(bytes)));
  }
  rows.push_back(refused("queue many: the second entry has an empty msg_id", s,
                         queue_many(v{make_entry("fine-1", 1),
                                      entry_with([](secret_entry& x) {
                                        x.msg_id.clear();
                                      })}),
                         invalid, "the msg_id is empty (entry 1)"));
  rows.push_back(refused("queue many: a 4096-byte secret among valid ones", s,
                         queue_many(v{make_entry("fine-2", 1),
                                      make_entry("fine-3", 1),
                                      entry_with_secret(4096)}),
                         invalid, "got 4096 (entry 2)"));
  v beyond_limit;
  for (std::size_t i = 0; i < 3 * test_pending_limit; ++i)
    beyond_limit.push_back(make_entry("many-" + std::to_string(i), 3));
  rows.push_back(fine("queue many: three times the pending limit (held, "
                      "then admitted as batches drain: ok)",
                      s, queue_many(beyond_limit), answered_ok()));
  auto key_with = [](std::function<void(secret_key&)> spoil) {
    auto key = key_of(probe_msg_id);
    spoil(key);
    return key;
  };
  rows.push_back(refused("lookup: empty chat", s,
                         lookup_one(key_with([](secret_key& k) {
                           k.chat.clear();
                         })),
                         invalid, "the chat is empty"));
  rows.push_back(refused("lookup: empty sender", s,
                         lookup_one(key_with([](secret_key& k) {
                           k.sender.clear();
                         })),
                         invalid, "the sender is empty"));
  rows.push_back(refused("lookup: empty msg_id", s,
                         lookup_one(key_with([](secret_key& k) {
                           k.msg_id.clear();
                         })),
                         invalid, "the msg_id is empty"));
  rows.push_back(fine("lookup: an unknown key (answers not found)", s,
                      lookup_one(key_of("never-queued")),
                      answered_with<secret_lookup>([](const secret_lookup& x) {
                        return x.found ? "found a key never queued" : "";
                      })));
  rows.push_back(refused("lookup many: the second key has an empty chat", s,
                         lookup_many({key_of(probe_msg_id),
                                      key_with([](secret_key& k) {
                                        k.chat.clear();
                                      })}),
                         invalid, "the chat is empty (key 1)"));
  rows.push_back(refused("replica copies: the second entry has an empty msg_id",
                         s,
                         replica_queue(v{make_entry("fine-4", 1),
                                         entry_with([](secret_entry& x) {
                                           x.msg_id.clear();
                                         })}),
                         invalid, "the msg_id is empty (entry 1)"));
  rows.push_back(refused("replica lookup: the second key has an empty chat", s,
                         replica_lookup({key_of(probe_msg_id),
                                         key_with([](secret_key& k) {
                                           k.chat.clear();
                                         })}),
                         invalid, "the chat is empty (key 1)"));
  rows.push_back(fine("lookup many: no keys (answers no lookups)", s,
                      lookup_many({}),
                      answered_with<std::vector<secret_lookup>>(
                        [](const std::vector<secret_lookup>& x) {
                          return x.empty() ? "" : "answers for no keys";
                        })));
  std::vector<secret_key> unknown_keys;
  for (int i = 0; i < 10000; ++i)
    unknown_keys.push_back(key_of("unknown-" + std::to_string(i)));
  rows.push_back(fine("lookup many: 10,000 unknown keys (all not found)", s,
                      lookup_many(unknown_keys),
                      answered_with<std::vector<secret_lookup>>(
                        [](const std::vector<secret_lookup>& x) {
                          if (x.size() != 10000)
                            return std::string{"not one answer per key"};
                          for (const auto& one : x)
                            if (one.found)
                              return std::string{"found an unknown key"};
                          return std::string{};
                        })));
  // Times are signed: one before 1970 is a time, not an error.
  rows.push_back(fine("queue then lookup: expires_at -1 (fine: stored, read "
                      "as expired, so not found)",
                      s,
                      queue_then_lookup(entry_with([](secret_entry& x) {
                        x.msg_id = "expired-long-ago";
                        x.expires_at = -1;
                      })),
                      answered_with<secret_lookup>([](const secret_lookup& x) {
                        return x.found ? "an expired row was found" : "";
                      })));
  rows.push_back(fine("queue then lookup: message_ts -5 (fine: read back)", s,
                      queue_then_lookup(entry_with([](secret_entry& x) {
                        x.msg_id = "sent-before-1970";
                        x.message_ts = -5;
                      })),
                      answered_with<secret_lookup>([](const secret_lookup& x) {
                        return x.found && x.message_ts == -5
                                 ? ""
                                 : "not read back as queued";
                      })));
  rows.push_back(fine("flush: no deadline (ok once what is queued is "
                      "durable)",
                      s,
                      [](scoped_actor& self, const node_actor& node) {
                        return ask(self, node, flush_atom::value);
                      },
                      answered_ok()));
  rows.push_back(fine("replica flush: this node alone (ok once what it holds "
                      "is durable)",
                      s,
                      [](scoped_actor& self, const node_actor& node) {
                        return ask(self, node, replica_atom::value,
                                   flush_atom::value, list_stamp{});
                      },
                      answered_ok()));
  rows.push_back(refused("flush: a negative deadline", s,
                         [](scoped_actor& self, const node_actor& node) {
                           return ask(self, node, flush_atom::value,
                                      timespan{-1s});
                         },
                         errc::invalid_request, "deadline -1s is negative"));
  return rows;
}

std::vector<bad_request> timeline_rows() {
  auto t = service::timeline;
  auto page = [](std::string room, uint32_t n) -> send_fn {
    return [room, n](scoped_actor& self, const node_actor& node) {
      return ask(self, node, page_atom::value, room, n);
    };
  };
  auto commit = [](std::string room, page_cursor cursor) -> send_fn {
    return [room, cursor](scoped_actor& self, const node_actor& node) {
      return ask(self, node, commit_atom::value, room, cursor);
    };
  };
  auto append = [](std::string room, std::vector<timeline_event> events)
    -> send_fn {
    return [room, events](scoped_actor& self, const node_actor& node) {
      return ask(self, node, append_atom::value, room, events);
    };
  };
  auto invalid = errc::invalid_request;
  auto empty_page = answered_with<timeline_page>([](const timeline_page& x) {
    return x.events.empty() && x.reached_start ? "" : "not an empty last page";
  });
  // A room nobody appended to: where a forged commit would leave its mark.
  std::string untouched = "!untouched:x";
  return {
    refused("page: empty room", t, page("", 10), invalid,
            "the room name is empty"),
    refused("page: zero events", t, page(probe_room, 0), invalid,
            "at least one event"),
    fine("page: an unknown room (an empty last page)", t,
         page("!unknown:x", 10), empty_page),
    fine("page: 2^32-1 events (the room's few events)", t,
         page(probe_room, std::numeric_limits<uint32_t>::max()),
         answered_with<timeline_page>([](const timeline_page& x) {
           return x.events.size() == probe_events && x.reached_start
                    ? ""
                    : "not the room's events";
         })),
    refused("commit: empty room", t, commit("", page_cursor{1, 0}), invalid,
            "the room name is empty"),
    refused("commit: a cursor moving forwards", t,
            commit(probe_room, page_cursor{1, 5}), invalid, "forwards"),
    refused("commit: a forged cursor beyond the room's newest event", t,
            commit(untouched, page_cursor{1000000, 1}), invalid,
            "newest event"),
    fine("commit: a cursor that moves nothing (ok, writes nothing)", t,
         commit(untouched, page_cursor{0, 0}), answered_ok()),
    fine("append then page the room a forged commit was sent for (every "
         "event comes back: the forged commit moved nothing)",
         t,
         [untouched](scoped_actor& self, const node_actor& node) {
           std::vector<timeline_event> events;
           for (int i = 1; i <= 3; ++i)
             events.push_back(timeline_event{"f" + std::to_string(i),
                                             "m.room.message", i, "x"});
           auto appended = ask(self, node, append_atom::value, untouched,
                               events);
           if (appended.err)
             return appended;
           return ask(self, node, page_atom::value, untouched, uint32_t{10});
         },
         answered_with<timeline_page>([](const timeline_page& x) {
           return x.events.size() == 3 ? "" : "events were skipped";
         })),
    refused("append: empty room", t,
            append("", {timeline_event{"e1", "m.room.message", 1, "x"}}),
            invalid, "the room name is empty"),
    refused("append: an event with an empty id", t,
            append(untouched, {timeline_event{"", "m.room.message", 1, "x"}}),
            invalid, "an event has an empty event_id"),
    fine("append: an event at timestamp -1 (fine: stored)", t,
         append("!before-1970:x",
                {timeline_event{"old", "m.room.message", -1, "x"}}),
         answered_with<uint64_t>([](const uint64_t& n) {
           return n == 1 ? "" : "not stored";
         })),
    fine("append: no events (stores nothing, answers 0)", t,
         append(untouched, {}),
         answered_with<uint64_t>([](const uint64_t& n) {
           return n == 0 ? "" : "stored something";
         })),
  };
}

std::vector<bad_request> backfill_rows() {
  auto b = service::backfill;
  auto enqueue = [](std::function<void(backfill_request&)> spoil) -> send_fn {
    backfill_request request;
    request.room = "!backfill-bad:x";
    spoil(request);
    return [request](scoped_actor& self, const node_actor& node) {
      return ask(self, node, enqueue_atom::value, request);
    };
  };
  auto on_ticket = [](auto atom, uint64_t id) -> send_fn {
    return [atom, id](scoped_actor& self, const node_actor& node) {
      return ask(self, node, atom, backfill_ticket{id});
    };
  };
  auto invalid = errc::invalid_request;
  auto unknown = errc::unknown_ticket;
  constexpr auto forged = std::numeric_limits<uint64_t>::max();
  return {
    refused("enqueue: empty room", b,
            enqueue([](backfill_request& x) { x.room.clear(); }), invalid,
            "the room is empty"),
    refused("enqueue: batch size 0", b,
            enqueue([](backfill_request& x) { x.batch_size = 0; }), invalid,
            "batch_size must be positive"),
    refused("enqueue: priority 3", b,
            enqueue([](backfill_request& x) {
              x.prio = static_cast<priority>(3);
            }),
            invalid, "unknown priority 3"),
    refused("enqueue: priority 255", b,
            enqueue([](backfill_request& x) {
              x.prio = static_cast<priority>(255);
            }),
            invalid, "unknown priority 255"),
    refused("enqueue: stop condition kind 4", b,
            enqueue([](backfill_request& x) {
              x.stop.what = static_cast<stop_condition::kind>(4);
            }),
            invalid, "unknown stop condition 4"),
    refused("enqueue: until an event with an empty id", b,
            enqueue([](backfill_request& x) {
              x.stop.what = stop_condition::kind::until_event;
            }),
            invalid, "until_event names no event"),
    refused("enqueue: until an event type that is empty", b,
            enqueue([](backfill_request& x) {
              x.stop.what = stop_condition::kind::until_type;
            }),
            invalid, "until_type names no event type"),
    fine("enqueue: older than timestamp -1 (fine: a ticket)", b,
         enqueue([](backfill_request& x) {
           x.stop.what = stop_condition::kind::older_than;
           x.stop.timestamp = -1;
         }),
         answered_with<backfill_ticket>([](const backfill_ticket& x) {
           return x.id != 0 ? "" : "ticket 0";
         })),
    fine("enqueue: batch size 2^32-1 for an unknown room (a ticket)", b,
         enqueue([](backfill_request& x) {
           x.batch_size = std::numeric_limits<uint32_t>::max();
           x.max_batches = std::numeric_limits<uint32_t>::max();
         }),
         answered_with<backfill_ticket>([](const backfill_ticket& x) {
           return x.id != 0 ? "" : "ticket 0";
         })),
    refused("await: ticket 0", b, on_ticket(await_atom::value, 0), unknown,
            "ticket 0 was never issued"),
    refused("await: a forged ticket", b, on_ticket(await_atom::value, forged),
            unknown, "was never issued"),
    refused("cancel: a forged ticket", b,
            on_ticket(cancel_atom::value, forged), unknown,
            "was never issued"),
    refused("detach: a forged ticket", b,
            on_ticket(detach_atom::value, forged), unknown,
            "was never issued"),
  };
}

std::vector<bad_request> session_rows(const requester_parts& parts) {
  auto p = service::sessions;
  auto invalid = errc::invalid_request;
  auto live = parts.live;
  std::string too_long(256, 's');
  using updates = std::vector<session_update>;
  using ids = std::vector<std::string>;
  auto persist = [](std::string session, session_handle_actor handle,
                    updates rows, ids removed) -> send_fn {
    return [=](scoped_actor& self, const node_actor& node) {
      return ask(self, node, persist_atom::value, session, handle, rows,
                 removed);
    };
  };
  auto on_session = [](auto atom, std::string session) -> send_fn {
    return [atom, session](scoped_actor& self, const node_actor& node) {
      return ask(self, node, atom, session);
    };
  };
  auto with_handle = [](auto atom, std::string session,
                        session_handle_actor handle) -> send_fn {
    return [=](scoped_actor& self, const node_actor& node) {
      return ask(self, node, atom, session, handle);
    };
  };
  auto one_row = updates{{"u1", 1, "note", "x"}};
  auto false_answer = answered_with<bool>([](const bool& x) {
    return x ? "answered true for an unknown session" : "";
  });
  session_handle_actor null_handle;
  return {
    refused("register: empty session id", p,
            with_handle(register_atom::value, "", live), invalid,
            "the session id is empty"),
    refused("register: a session id of 256 bytes", p,
            with_handle(register_atom::value, too_long, live), invalid,
            "at most 255"),
    refused("register: a null handle", p,
            with_handle(register_atom::value, "s-null", null_handle), invalid,
            "the session handle is null"),
    refused("persist: empty session id", p, persist("", live, one_row, {}),
            invalid, "the session id is empty"),
    refused("persist: a session id of 256 bytes", p,
            persist(too_long, live, one_row, {}), invalid, "at most 255"),
    refused("persist: a null handle", p,
            persist("s-null", null_handle, one_row, {}), invalid,
            "the session handle is null"),
    refused("persist: an update with an empty id", p,
            persist("s-bad", live, updates{{"", 1, "note", "x"}}, {}), invalid,
            "an update has an empty id"),
    refused("persist: an update payload over persister-max-update", p,
            persist("s-bad", live,
                    updates{{"u1", 1, "note",
                             std::string(test_max_update + 1, 'x')}},
                    {}),
            invalid, "more than persister-max-update"),
    refused("persist: a removed row with an empty id", p,
            persist("s-bad", live, {}, ids{""}), invalid,
            "a removed update has an empty id"),
    refused("persist: a snapshot over persister-max-blob", p,
            persist("s-oversize", parts.oversize, one_row, {}), invalid,
            "more than persister-max-blob"),
    refused("persist with snapshot: a snapshot over persister-max-blob", p,
            [live](scoped_actor& self, const node_actor& node) {
              return ask(self, node, persist_atom::value,
                         std::string{"s-oversize"}, live,
                         session_snapshot{std::string(test_max_blob + 1, 'b')},
                         updates{}, ids{});
            },
            invalid, "more than persister-max-blob"),
    refused("persist with snapshot: a null handle", p,
            [null_handle](scoped_actor& self, const node_actor& node) {
              return ask(self, node, persist_atom::value, std::string{"s-null"},
                         null_handle, session_snapshot{"b"}, updates{}, ids{});
            },
            invalid, "the session handle is null"),
    refused("persist: through a handle of a deleted session", p,
            [live](scoped_actor& self, const node_actor& node) {
              std::string session = "s-deleted";
              auto registered = ask(self, node, register_atom::value, session,
                                    live);
              if (registered.err)
                return registered;
              auto deleted = ask(self, node, delete_atom::value, session);
              if (deleted.err)
                return deleted;
              return ask(self, node, persist_atom::value, session, live,
                         updates{{"u1", 1, "note", "x"}}, ids{});
            },
            errc::session_deleted, "session s-deleted"),
    refused("delete: empty session id", p, on_session(delete_atom::value, ""),
            invalid, "the session id is empty"),
    fine("delete: an unknown session (ok: nothing to delete)", p,
         on_session(delete_atom::value, "s-never-stored"), answered_ok()),
    refused("delete with handle: a null handle", p,
            with_handle(delete_atom::value, "s-null", null_handle), invalid,
            "the session handle is null"),
    refused("isdeleted: empty session id", p,
            with_handle(is_deleted_atom::value, "", live), invalid,
            "the session id is empty"),
    refused("isdeleted: a null handle", p,
            with_handle(is_deleted_atom::value, "s-null", null_handle),
            invalid, "the session handle is null"),
    refused("unflushed: empty session id", p,
            on_session(unflushed_atom::value, ""), invalid,
            "the session id is empty"),
    fine("unflushed: an unknown session (false)", p,
         on_session(unflushed_atom::value, "s-never"), false_answer),
    refused("load: empty session id", p, on_session(load_atom::value, ""),
            invalid, "the session id is empty"),
    refused("load: a session id of 256 bytes", p,
            on_session(load_atom::value, too_long), invalid, "at most 255"),
    refused("load: an unknown session", p,
            on_session(load_atom::value, "s-never"), errc::not_found,
            "no session s-never"),
    refused("waitidle: empty session id", p,
            on_session(wait_idle_atom::value, ""), invalid,
            "the session id is empty"),
    fine("waitidle: an unknown session (ok: nothing queued)", p,
         on_session(wait_idle_atom::value, "s-never"), answered_ok()),
    refused("flushall: a negative limit", p,
            [](scoped_actor& self, const node_actor& node) {
              return ask(self, node, flush_all_atom::value, timespan{-1s});
            },
            invalid, "limit -1s is negative"),
    refused("exclusive: empty session id", p,
            on_session(exclusive_atom::value, ""), invalid,
            "the session id is empty"),
    refused("release: a forged lease", p,
            [](scoped_actor& self, const node_actor& node) {
              return ask(self, node, release_atom::value,
                         session_lease{987654321});
            },
            errc::not_found, "no lease 987654321 is held"),
    refused("release: a lease released before (stale)", p,
            [](scoped_actor& self, const node_actor& node) {
              auto granted = ask(self, node, exclusive_atom::value,
                                 std::string{"s-leased"});
              auto lease = reply_as<session_lease>(granted);
              if (!lease)
                return granted;
              auto released = ask(self, node, release_atom::value, *lease);
              if (released.err)
                return released;
              return ask(self, node, release_atom::value, *lease);
            },
            errc::not_found, "is held"),
  };
}

/// Requests of the gateway itself: a message of no request it serves.
std::vector<bad_request> node_rows() {
  auto stranger = [](message content) -> send_fn {
    return [content](scoped_actor& self, const node_actor& node) {
      outcome out;
      self->request(actor_cast<actor>(node), answer_timeout, content)
        .receive([&out](ok_atom) { out.answered = true; },
                 [&out](error& err) {
                   out.answered = err != sec::request_timeout;
                   out.err = std::move(err);
                 });
      return out;
    };
  };
  return {
    refused("a message of no request the node serves", service::node,
            stranger(make_message(std::string{"hello"}, 42)),
            errc::invalid_request, "serves no such request"),
    refused("an empty message", service::node, stranger(message{}),
            errc::invalid_request, "could not be decoded"),
    // A node alone keeps no replicas: the repair's requests are refused.
    refused("digest: asked of a node that keeps no replicas", service::node,
            [](scoped_actor& self, const node_actor& node) {
              return ask(self, node, digest_atom::value, uint64_t{1},
                         uint64_t{1});
            },
            errc::invalid_request, "keeps no replicas of secrets"),
    refused("digest rows: asked of a node that keeps no replicas",
            service::node,
            [](scoped_actor& self, const node_actor& node) {
              return ask(self, node, digest_atom::value, uint64_t{1},
                         uint64_t{1}, secret_buckets{{0, 1, 4294967295u}});
            },
            errc::invalid_request, "keeps no replicas of secrets"),
    // Nor of sessions: a coordinator's requests are refused.
    refused("session prepare: asked of a node that keeps no replicas",
            service::node,
            [](scoped_actor& self, const node_actor& node) {
              return ask(self, node, replica_atom::value,
                         prepare_atom::value, std::string{"s"}, uint64_t{1},
                         list_stamp{});
            },
            errc::invalid_request, "keeps no replicas of sessions"),
    refused("session delta: sent to a node that keeps no replicas",
            service::node,
            [](scoped_actor& self, const node_actor& node) {
              session_delta delta;
              delta.session = "s";
              return ask(self, node, replica_atom::value, write_atom::value,
                         delta, list_stamp{});
            },
            errc::invalid_request, "keeps no replicas of sessions"),
  };
}

/// The whole table, in the order it is sent.
std::vector<bad_request> bad_request_table(const requester_parts& parts,
                                          mode from) {
  std::vector<bad_request> rows;
  for (auto part : {secret_rows(from), timeline_rows(), backfill_rows(),
                    session_rows(parts), node_rows()})
    for (auto& row : part)
      rows.push_back(std::move(row));
  return rows;
}

/// The row's verdict: empty when the answer is the one due.
std::string judge(actor_system& sys, const bad_request& row,
                  const outcome& out) {
  if (!out.answered)
    return "no answer within " + deep_to_string(answer_timeout);
  if (!row.code) {
    if (out.err)
      return "a legitimate request failed: " + sys.render(out.err);
    return row.fine(out);
  }
  if (!out.err)
    return "succeeded where " + coalesce::to_string(*row.code) + " is due";
  if (out.err.category() != errc_category
      || out.err.code() != static_cast<uint8_t>(*row.code))
    return "answered " + sys.render(out.err) + " where "
           + coalesce::to_string(*row.code) + " is due";
  const auto& context = out.err.context();
  if (!context.match_elements<std::string>()
      || context.get_as<std::string>(0).empty())
    return "the error carries no message: " + sys.render(out.err);
  auto rendered = sys.render(out.err);
  if (rendered.find(row.words) == std::string::npos)
    return "the message \"" + rendered + "\" does not say \"" + row.words
           + "\"";
  return {};
}

/// A valid request of `owner`, answered as the setup left it: empty when
/// it is, else what went wrong.
std::string probe(actor_system& sys, scoped_actor& self, const node_actor& node,
                  service owner, backfill_ticket probe_ticket) {
  auto failed = [&](const outcome& out) {
    return !out.answered ? std::string{"no answer"}
                         : "error " + sys.render(out.err);
  };
  switch (owner) {
    case service::secrets: {
      auto out = ask(self, node, lookup_atom::value, key_of(probe_msg_id));
      auto found = reply_as<secret_lookup>(out);
      if (!found)
        return failed(out);
      return found->found && found->secret == secret_of(probe_fill)
               ? ""
               : "the probe secret is gone";
    }
    case service::timeline: {
      auto out = ask(self, node, page_atom::value, std::string{probe_room},
                     uint32_t{10});
      auto page = reply_as<timeline_page>(out);
      if (!page)
        return failed(out);
      return page->events.size() == probe_events ? ""
                                                 : "the probe room changed";
    }
    case service::backfill: {
      auto out = ask(self, node, await_atom::value, probe_ticket);
      auto result = reply_as<backfill_result>(out);
      if (!result)
        return failed(out);
      return result->events.size() == probe_events ? ""
                                                   : "the probe run changed";
    }
    case service::sessions: {
      auto out = ask(self, node, load_atom::value, std::string{probe_session});
      auto record = reply_as<session_record>(out);
      if (!record)
        return failed(out);
      return record->blob == probe_blob ? "" : "the probe session changed";
    }
    case service::node: {
      auto out = ask(self, node, stats_atom::value);
      return reply_as<node_stats>(out) ? "" : failed(out);
    }
  }
  return "unknown service";
}

/// Counts of one pass of the table.
struct table_run {
  std::size_t tried = 0;
  /// Rows not answered as due (no answer, another answer, no message).
  std::size_t wrong_answers = 0;
  /// Rows after which a valid request of the same service failed.
  std::size_t stopped_serving = 0;
  /// Requests of a service's interface that no row sent.
  std::size_t requests_without_rows = 0;
};

std::string type_name(const std::type_info& x) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name{
    abi::__cxa_demangle(x.name(), nullptr, nullptr, &status), std::free};
  return status == 0 ? name.get() : x.name();
}

/// "lookup(coalesce::secret_key)": how a missing row is named.
template <class Atom, class... Args>
std::string request_name(type_list<Atom, Args...>) {
  std::string args;
  ((args += (args.empty() ? "" : ", ") + type_name(typeid(Args))), ...);
  return to_string(Atom::value) + "(" + args + ")";
}

/// The requests of every service that no row sent, each named.
std::vector<std::string>
requests_without_rows(const std::set<std::type_index>& sent) {
  std::vector<std::string> result;
  for_each_service([&](auto service) {
    using requests = typename decltype(service)::requests;
    for_each_type(signatures_in<requests>{}, [&](auto signature) {
      using inputs = inputs_of<decltype(signature)>;
      if (sent.count(typeid(inputs)) == 0)
        result.push_back(request_name(inputs{}));
    });
  });
  return result;
}

/// Sends every row, checks its answer, then probes its service.
table_run run_table(actor_system& sys, const node_actor& node,
                    const std::vector<bad_request>& rows,
                    backfill_ticket probe_ticket) {
  scoped_actor self{sys};
  table_run run;
  std::set<std::type_index> sent;
  for (const auto& row : rows) {
    ++run.tried;
    sent_by_row = &sent;
    auto out = row.send(self, node);
    sent_by_row = nullptr;
    auto verdict = judge(sys, row, out);
    if (!verdict.empty())
      ++run.wrong_answers;
    CAF_CHECK_EQUAL(row.name + ": " + verdict, row.name + ": ");
    if (auto broken = probe(sys, self, node, row.owner, probe_ticket);
        !broken.empty()) {
      ++run.stopped_serving;
      CAF_ERROR("after " << row.name << ", the node no longer serves: "
                         << broken);
    }
  }
  for (const auto& missing : requests_without_rows(sent)) {
    ++run.requests_without_rows;
    CAF_ERROR("no row sends the request " << missing);
  }
  return run;
}

/// A node as `coalesce-node` runs one: real services over RocksDB in a
/// fresh directory behind the published gateway, with the probes set up.
struct serving_node {
  temp_dir dir;
  io_config cfg;
  actor_system sys{cfg};
  std::unique_ptr<local_services> services;
  node_actor gateway;
  uint16_t port = 0;
  backfill_ticket probe_ticket;
  session_handle_actor probe_handle;

  serving_node() {
    service_settings settings;
    settings.db_path = dir.sub("db");
    settings.session_persister.max_blob = test_max_blob;
    settings.session_persister.max_update = test_max_update;
    settings.secret_buffer.pending_limit = test_pending_limit;
    auto started = start_services(sys, settings);
    CAF_REQUIRE(started);
    services = std::move(*started);
    gateway = spawn_node_gateway(sys, services->handles());
    auto published = sys.middleman().publish(gateway, 0, "127.0.0.1", true);
    CAF_REQUIRE(published);
    port = *published;
    set_up_probes();
  }

  ~serving_node() {
    static_cast<void>(sys.middleman().unpublish(gateway, port));
    anon_send_exit(gateway, exit_reason::user_shutdown);
    anon_send_exit(probe_handle, exit_reason::user_shutdown);
    static_cast<void>(services->stop(30s));
  }

  /// What every probe reads back: a secret, a room's events, a finished
  /// back-pagination run and a persisted session.
  void set_up_probes() {
    scoped_actor self{sys};
    auto required = [&](const outcome& out) {
      if (!out.answered || out.err)
        CAF_FAIL("setting up the probes failed: " << sys.render(out.err));
    };
    required(ask(self, gateway, queue_atom::value,
                 make_entry(probe_msg_id, probe_fill)));
    required(ask(self, gateway, flush_atom::value));
    std::vector<timeline_event> events;
    for (std::size_t i = 1; i <= probe_events; ++i)
      events.push_back(timeline_event{"e" + std::to_string(i),
                                      "m.room.message",
                                      static_cast<int64_t>(i), "hi"});
    for (auto room : {probe_room, probe_backfill_room})
      required(ask(self, gateway, append_atom::value, std::string{room},
                   events));
    backfill_request request;
    request.room = probe_backfill_room;
    auto enqueued = ask(self, gateway, enqueue_atom::value, request);
    required(enqueued);
    probe_ticket = *reply_as<backfill_ticket>(enqueued);
    required(ask(self, gateway, await_atom::value, probe_ticket));
    probe_handle = sys.spawn(session_handle, std::string{probe_blob});
    required(ask(self, gateway, register_atom::value,
                 std::string{probe_session}, probe_handle));
    required(ask(self, gateway, persist_atom::value, std::string{probe_session},
                 probe_handle, std::vector<session_update>{},
                 std::vector<std::string>{}));
  }
};

/// Handles in `sys` for the session rows; stopped when it goes away.
struct requester_handles {
  explicit requester_handles(actor_system& sys)
    : parts{sys.spawn(session_handle, std::string{"live"}),
            sys.spawn(session_handle, std::string(test_max_blob + 1, 'b'))} {
    // nop
  }

  ~requester_handles() {
    anon_send_exit(parts.live, exit_reason::user_shutdown);
    anon_send_exit(parts.oversize, exit_reason::user_shutdown);
  }

  requester_parts parts;
};

} // namespace

CAF_TEST(every bad request in process is refused clearly and the node keeps serving) {
  serving_node node;
  requester_handles handles{node.sys};
  auto run = run_table(node.sys, node.gateway,
                       bad_request_table(handles.parts, mode::in_process),
                       node.probe_ticket);
  CAF_CHECK_EQUAL(run.wrong_answers, 0u);
  CAF_CHECK_EQUAL(run.stopped_serving, 0u);
  CAF_CHECK_EQUAL(run.requests_without_rows, 0u);
  scoped_actor self{node.sys};
  CAF_CHECK_EQUAL(probe(node.sys, self, node.gateway, service::node,
                        node.probe_ticket),
                  "");
  // From the node itself a shutdown is legitimate; every later request
  // but those of admitted work is refused, and stats still answer.
  auto shut = ask(self, node.gateway, shutdown_atom::value);
  CAF_CHECK(reply_as<ok_atom>(shut));
  auto late = ask(self, node.gateway, load_atom::value,
                  std::string{probe_session});
  CAF_CHECK_EQUAL(late.err.code(),
                  static_cast<uint8_t>(errc::node_shutting_down));
  auto stats = reply_as<node_stats>(ask(self, node.gateway, stats_atom::value));
  CAF_REQUIRE(stats);
  CAF_CHECK(stats->shutting_down);
  CAF_MESSAGE("bad requests tried in process: "
              << run.tried << ", answered otherwise than due: "
              << run.wrong_answers << ", node stopped serving after: "
              << run.stopped_serving << " rows");
}

CAF_TEST(every bad request from another node is refused clearly and the node keeps serving) {
  serving_node node;
  io_config client_cfg;
  actor_system client_sys{client_cfg};
  auto remote = connect_node(client_sys, "127.0.0.1", node.port, 10s);
  CAF_REQUIRE(remote);
  table_run run;
  {
    requester_handles handles{client_sys};
    auto rows = bad_request_table(handles.parts, mode::remote);
    rows.push_back(refused("shutdown: from another node", service::node,
                           [](scoped_actor& self, const node_actor& node) {
                             return ask(self, node, shutdown_atom::value);
                           },
                           errc::not_permitted, "only the node itself"));
    run = run_table(client_sys, *remote, rows, node.probe_ticket);
  }
  CAF_CHECK_EQUAL(run.wrong_answers, 0u);
  CAF_CHECK_EQUAL(run.stopped_serving, 0u);
  CAF_CHECK_EQUAL(run.requests_without_rows, 0u);
  scoped_actor self{client_sys};
  auto stats = reply_as<node_stats>(ask(self, *remote, stats_atom::value));
  CAF_REQUIRE(stats);
  CAF_CHECK(!stats->shutting_down);
  CAF_MESSAGE("bad requests tried from another node: "
              << run.tried << ", answered otherwise than due: "
              << run.wrong_answers << ", node stopped serving after: "
              << run.stopped_serving << " rows");
}
