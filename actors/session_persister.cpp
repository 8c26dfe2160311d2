#include <coalesce/actors/session_persister.hpp>

#include <algorithm>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/caller_monitor.hpp>
#include <coalesce/actors/option_text.hpp>
#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/actors/session_io_worker.hpp>
#include <coalesce/actors/session_persister_protocol.hpp>
#include <coalesce/actors/session_registry.hpp>
#include <coalesce/actors/session_writer.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/session_store.hpp>

namespace coalesce {

namespace {

/// A live writer, as the persister knows it.
struct writer_entry {
  session_writer_actor writer;
  /// Messages sent (or delegated) to the writer; a `written` that says it
  /// is idle is compared with what the writer received.
  uint64_t sent = 0;
  /// The handle of the last persist sent to it: where its queued write
  /// comes from, re-resolved (`restand`) when a register changes it.
  session_handle_actor last_handle;
  /// Set while it is idle, having said so when it had received everything
  /// sent to it: its place in `idle_writers`, where it waits warm for its
  /// session's next request and may be retired while it stays.
  std::optional<std::list<std::string>::iterator> idle_at;
};

/// One running `flushall`, under the id of its parked request.
struct flush_run {
  /// Sessions whose barrier or retried write has not answered yet; those
  /// still here when the limit passes count as not written.
  std::set<std::string> waiting;
  /// Sessions already known not written: failed with no live handle left,
  /// or whose barrier or retried write failed.
  uint64_t unwritten = 0;
};

struct persister_state {
  /// The limits; each writer gets a copy.
  session_persister_options options;
  /// The I/O actors; every call about one session goes to the same one
  /// (`io_for`), so storage's fencing check never races.
  std::vector<session_io_actor> io;
  /// The decisions about handles: generations, retired handles, failed
  /// sessions.
  session_registry registry;
  /// The handles monitored (each once): registered ones and those a delete
  /// named; a death reaches `registry.handle_down`.
  caller_monitor handles;
  /// The writer of each session with work, and of up to
  /// `options.idle_writers` sessions whose writers went idle. An entry goes
  /// when its writer retires or dies; the next request about the session
  /// spawns a new one.
  std::unordered_map<std::string, writer_entry> writers;
  /// The session of each writer in `writers`, by its address: a writer's
  /// death (a down message) finds its entry through it.
  std::unordered_map<caf::actor_addr, std::string> writer_sessions;
  /// The sessions whose writers are idle, the most recently idle first: the
  /// last one retires when there are more than `options.idle_writers`.
  std::list<std::string> idle_writers;
  /// Every lease issued and not yet released, with its session: a client's
  /// `release` finds the writer through it (errc::not_found for any other
  /// id); a writer's `release` for a dead holder removes it.
  std::unordered_map<uint64_t, std::string> leases;
  /// The id of the next lease; never 0.
  uint64_t next_lease = 1;
  /// What waits for an earlier request of a session that reads storage's
  /// generation first (a register or delete of a session not known yet),
  /// by session, in arrival order: the session's requests take effect in
  /// the order they arrived.
  std::unordered_map<std::string, std::vector<std::function<void(caf::error)>>>
    in_line;
  /// Sessions whose register waits for its claim (`claim_generations`):
  /// their later requests wait in line until it is answered.
  std::set<std::string> claiming;

  // The lists of parked requests. Each answers what is still in it with
  // errc::stopped_before_answer when the persister stops.

  /// Clients' `flushall`: answered with the number of sessions not written
  /// once every session its `flush_runs` entry waits for is done (at once
  /// when there is none), or when its limit passes (the `timeout` message
  /// with its id), whichever comes first.
  parked_requests<caf::typed_response_promise<uint64_t>> flushes{
    "the session persister"};
  /// The progress of each `flushall` in `flushes`, by its id.
  std::unordered_map<uint64_t, flush_run> flush_runs;
  /// Clients' `waitidle`: answered once the session's writer answered a
  /// barrier (at once when it has no writer) and, when its last write
  /// failed, the one retry did: ok, the retry's error, or errc::handle_gone
  /// when no live handle is left to retry from.
  parked_requests<caf::typed_response_promise<ok_atom>> idle_waits{
    "the session persister"};
  /// Clients' `register` and `isdeleted`, `persist`, `exclusive` and
  /// `unflushed` in line behind one (`in_line`): answered (or delegated to
  /// the writer) when their turn comes.
  parked_requests<caf::typed_response_promise<uint64_t>> registers{
    "the session persister"};
  parked_requests<caf::typed_response_promise<bool>> questions{
    "the session persister"};
  parked_requests<caf::typed_response_promise<ok_atom>> persists{
    "the session persister"};
  parked_requests<caf::typed_response_promise<session_lease>> lease_asks{
    "the session persister"};
  /// Clients' `delete`: waits for its turn (and storage's generation), then
  /// for the writer's erase (which waits for the running write); answered
  /// ok, or with the error of the read or of the erase.
  parked_requests<caf::typed_response_promise<ok_atom>> deletes{
    "the session persister"};
  /// Clients' `stats`, waiting for every I/O actor's groups and fsyncs:
  /// answered once the last one answered (one that fails counts nothing).
  parked_requests<caf::typed_response_promise<session_persister_stats>> stats_asks{
    "the session persister"};
  /// The counters `stats` answers; `active_writers`, `failed_sessions`,
  /// `groups` and `fsyncs` are filled in when asked.
  session_persister_stats stats;
};

using persister_pointer
  = session_persister_full_actor::stateful_pointer<persister_state>;

caf::actor_addr address_of(const session_handle_actor& handle) {
  return caf::actor_cast<caf::actor_addr>(handle);
}

caf::error check_session(const std::string& session) {
  if (auto what = storage::invalid_session_id(session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  return caf::none;
}

caf::error check_handle(const std::string& session,
                        const session_handle_actor& handle) {
  if (auto err = check_session(session))
    return err;
  if (!handle)
    return make_error(errc::invalid_request, "the session handle is null");
  return caf::none;
}

caf::error check_rows(const session_persister_options& options,
                      const std::vector<session_update>& updates,
                      const std::vector<std::string>& removed) {
  for (const auto& update : updates) {
    if (update.id.empty())
      return make_error(errc::invalid_request, "an update has an empty id");
    if (update.payload.size() > options.max_update)
      return make_error(errc::invalid_request,
                        "the payload of update " + update.id + " has "
                          + std::to_string(update.payload.size())
                          + " bytes, more than persister-max-update "
                          + std::to_string(options.max_update));
  }
  for (const auto& id : removed)
    if (id.empty())
      return make_error(errc::invalid_request,
                        "a removed update has an empty id");
  return caf::none;
}

caf::error check_snapshot(const session_persister_options& options,
                          const std::optional<session_snapshot>& snapshot) {
  if (snapshot && snapshot->blob.size() > options.max_blob)
    return make_error(errc::invalid_request,
                      "the snapshot has " + std::to_string(snapshot->blob.size())
                        + " bytes, more than persister-max-blob "
                        + std::to_string(options.max_blob));
  return caf::none;
}

/// Whether `handle` is alive as far as this node knows: a local actor that
/// terminated, or a proxy of a remote one reported down, is cleaned up.
bool alive(const session_handle_actor& handle) {
  auto* actor = caf::actor_cast<caf::abstract_actor*>(handle);
  return actor != nullptr
         && !actor->getf(caf::abstract_actor::is_cleaned_up_flag);
}

const session_io_actor& io_for(persister_pointer self,
                               const std::string& session) {
  auto& io = self->state.io;
  return io[std::hash<std::string>{}(session) % io.size()];
}

/// Whether a request of `session` must wait in line: an earlier one waits
/// for storage's generation or a claim, or this one needs the generation
/// and it is not known.
bool must_wait(persister_pointer self, const std::string& session,
               bool needs_generation) {
  auto& st = self->state;
  return st.in_line.count(session) > 0 || st.claiming.count(session) > 0
         || (needs_generation && !st.registry.knows_stored(session));
}

void read_stored_generation(persister_pointer self,
                            const std::string& session);

/// Runs the session's line in order until it is empty or one of its
/// requests starts a claim (the rest wait for it).
void run_line(persister_pointer self, const std::string& session,
              const caf::error& err) {
  auto& st = self->state;
  while (st.claiming.count(session) == 0) {
    auto i = st.in_line.find(session);
    if (i == st.in_line.end())
      return;
    auto next = std::move(i->second.front());
    i->second.erase(i->second.begin());
    // An empty line is none: what `next` starts does not wait for itself.
    if (i->second.empty())
      st.in_line.erase(i);
    next(err);
  }
}

/// Runs `next` when the earlier requests of `session` in line ran, and,
/// when `needs_generation`, once the registry knows what storage holds (one
/// read through the session's I/O actor, shared by the line). Never blocks.
void in_order(persister_pointer self, const std::string& session,
              bool needs_generation, std::function<void(caf::error)> next) {
  auto& st = self->state;
  if (!must_wait(self, session, needs_generation)) {
    next(caf::none);
    return;
  }
  auto& line = st.in_line[session];
  line.push_back(std::move(next));
  if (line.size() > 1 || st.claiming.count(session) > 0)
    return;
  read_stored_generation(self, session);
}

/// Reads storage's generation of `session` into the registry, then runs
/// the session's line.
void read_stored_generation(persister_pointer self,
                            const std::string& session) {
  self
    ->request(io_for(self, session), caf::infinite,
              stored_generation_atom::value, session)
    .then(
      [self, session](bool stored, uint64_t generation,
                      const std::string& claimant) {
        self->state.registry.learn_stored(
          session,
          stored ? std::optional<uint64_t>{generation} : std::nullopt,
          claimant);
        run_line(self, session, caf::none);
      },
      [self, session](caf::error& err) { run_line(self, session, err); });
}

/// A claim of `session` ended: the requests behind it run, after a read of
/// storage's generation when the registry forgot it.
void end_claim(persister_pointer self, const std::string& session) {
  auto& st = self->state;
  st.claiming.erase(session);
  if (st.in_line.count(session) == 0)
    return;
  // The first one waiting may need storage's generation, as any read does.
  if (!st.registry.knows_stored(session))
    read_stored_generation(self, session);
  else
    run_line(self, session, caf::none);
}

/// An idle writer is about to get work: it is no longer idle.
void wake(persister_state& st, writer_entry& entry) {
  if (!entry.idle_at)
    return;
  st.idle_writers.erase(*entry.idle_at);
  entry.idle_at.reset();
}

/// Whether `session` has a writer with work (an idle one has none).
bool busy_writer(const persister_state& st, const std::string& session) {
  auto i = st.writers.find(session);
  return i != st.writers.end() && !i->second.idle_at;
}

/// The session's writer, spawned when it has none; counts one message sent.
/// `handle` (when given) is where the message's write comes from.
writer_entry& writer_for(persister_pointer self, const std::string& session,
                         const session_handle_actor& handle = {}) {
  auto& st = self->state;
  auto i = st.writers.find(session);
  if (i == st.writers.end()) {
    auto writer = spawn_session_writer(self, session, io_for(self, session),
                                       st.options);
    st.writer_sessions.emplace(caf::actor_cast<caf::actor_addr>(writer),
                               session);
    i = st.writers.emplace(session, writer_entry{std::move(writer), 0, {}, {}})
          .first;
  } else {
    wake(st, i->second);
  }
  ++i->second.sent;
  if (handle)
    i->second.last_handle = handle;
  return i->second;
}

/// The persist a writer gets: where the write comes from and with which
/// generation, decided now from the registry.
caf::expected<write_order>
resolve_persist(persister_pointer self, const std::string& session,
                const session_handle_actor& handle,
                std::optional<session_snapshot>& snapshot,
                std::vector<session_update>& updates,
                std::vector<std::string>& removed) {
  auto& st = self->state;
  if (st.options.claim_generations && !st.registry.adopt(session, handle)
      && st.registry.claimed_by_other(session, handle))
    return make_error(errc::handle_superseded,
                      "session " + session + ": another handle claimed its "
                      "generation since (register this one again)");
  auto source = st.registry.source_for(session, handle, alive(handle));
  if (!source)
    return std::move(source.error());
  write_order order;
  if (auto generation = st.registry.generation_of(session, *source)) {
    order.generation = *generation;
    order.generation_known = true;
  }
  if (snapshot && *source == handle) {
    order.has_snapshot = true;
    order.snapshot = std::move(snapshot->blob);
  }
  order.source = std::move(*source);
  order.updates = std::move(updates);
  order.removed = std::move(removed);
  ++st.stats.queued_requests;
  return order;
}

/// An internal persist with no new rows from `source`: retries a failed
/// write. `done` gets the outcome.
void retry_write(persister_pointer self, const std::string& session,
                 const session_handle_actor& source,
                 std::function<void(caf::error)> done) {
  ++self->state.stats.queued_requests;
  write_order order;
  order.source = source;
  if (auto generation = self->state.registry.generation_of(session, source)) {
    order.generation = *generation;
    order.generation_known = true;
  }
  self
    ->request(writer_for(self, session, source).writer, caf::infinite,
              persist_atom::value, std::move(order))
    .then([done](ok_atom) { done(caf::none); },
          [done](caf::error& err) { done(std::move(err)); });
}

caf::result<ok_atom> on_persist(persister_pointer self, std::string& session,
                                session_handle_actor& handle,
                                std::optional<session_snapshot> snapshot,
                                std::vector<session_update>& updates,
                                std::vector<std::string>& removed) {
  auto& st = self->state;
  if (auto err = check_handle(session, handle))
    return err;
  if (auto err = check_rows(st.options, updates, removed))
    return err;
  if (auto err = check_snapshot(st.options, snapshot))
    return err;
  auto needs_generation = st.options.claim_generations;
  if (!must_wait(self, session, needs_generation)) {
    auto order = resolve_persist(self, session, handle, snapshot, updates,
                                 removed);
    if (!order)
      return std::move(order.error());
    return self->delegate(writer_for(self, session, handle).writer,
                          persist_atom::value, std::move(*order));
  }
  auto promise = self->make_response_promise<ok_atom>();
  auto id = st.persists.park(promise);
  struct request {
    std::string session;
    session_handle_actor handle;
    std::optional<session_snapshot> snapshot;
    std::vector<session_update> updates;
    std::vector<std::string> removed;
  };
  auto args = std::make_shared<request>(
    request{session, handle, std::move(snapshot), std::move(updates),
            std::move(removed)});
  in_order(self, session, needs_generation, [self, id, args](caf::error err) {
    auto promise = self->state.persists.take(id);
    if (!promise)
      return;
    if (err && self->state.options.claim_generations) {
      promise->deliver(std::move(err));
      return;
    }
    auto order = resolve_persist(self, args->session, args->handle,
                                 args->snapshot, args->updates, args->removed);
    if (!order)
      promise->deliver(std::move(order.error()));
    else
      promise->delegate(writer_for(self, args->session, args->handle).writer,
                        persist_atom::value, std::move(*order));
  });
  return promise;
}

caf::result<ok_atom>
on_delete(persister_pointer self, const std::string& session,
          const std::optional<session_handle_actor>& live) {
  if (auto err = check_session(session))
    return err;
  if (live) {
    if (auto err = check_handle(session, *live))
      return err;
    self->state.handles.watch(self, address_of(*live));
  }
  auto promise = self->make_response_promise<ok_atom>();
  auto id = self->state.deletes.park(promise);
  // The tombstone must lie above what storage holds: learn it first.
  in_order(self, session, true, [=](caf::error err) {
    auto& st = self->state;
    if (err) {
      st.deletes.answer(id, std::move(err));
      return;
    }
    auto deletion = st.registry.delete_session(session, live);
    self
      ->request(writer_for(self, session).writer, caf::infinite,
                delete_atom::value, deletion.generation,
                deletion.tombstone_needed)
      .then([=](ok_atom) { self->state.deletes.answer(id, ok_atom::value); },
            [=](caf::error& err) {
              self->state.deletes.answer(id, std::move(err));
            });
  });
  return promise;
}

/// A register changed where the queued write of `session` comes from: tell
/// its writer, if it has one, what the registry says now.
void restand(persister_pointer self, const std::string& session) {
  auto& st = self->state;
  auto i = st.writers.find(session);
  // An idle writer has no queued write whose source could change.
  if (i == st.writers.end() || !i->second.last_handle || i->second.idle_at)
    return;
  auto& entry = i->second;
  ++entry.sent;
  auto source = st.registry.source_for(session, entry.last_handle,
                                       alive(entry.last_handle));
  if (!source) {
    self->send(entry.writer, restand_atom::value, std::move(source.error()),
               session_handle_actor{}, uint64_t{0}, false);
    return;
  }
  auto generation = st.registry.generation_of(session, *source);
  self->send(entry.writer, restand_atom::value, caf::error{}, *source,
             generation.value_or(0), generation.has_value());
}

void register_in_line(persister_pointer self, const std::string& session,
                      const session_handle_actor& handle, uint64_t id,
                      int attempts_left);

/// Claims the generation a register gave `handle` (replicas), holding the
/// session's later requests until storage answered; answers the register.
/// A claim refused because another coordinator took the session over
/// forgets what the registry knew of it and registers once more.
void claim_then_answer(persister_pointer self, const std::string& session,
                       const session_handle_actor& handle, uint64_t generation,
                       uint64_t id, int attempts_left) {
  auto& st = self->state;
  st.claiming.insert(session);
  self
    ->request(io_for(self, session), caf::infinite, claim_atom::value,
              session, generation,
              session_registry::claimant_of(handle))
    .then(
      [=](ok_atom) {
        restand(self, session);
        self->state.registers.answer(id, generation);
        end_claim(self, session);
      },
      [=](caf::error& err) {
        auto& st = self->state;
        st.registry.unregister(session, handle);
        st.registry.forget_stored(session);
        spdlog::warn("session persister: the claim of generation {} of "
                     "session {} failed: {}",
                     generation, session, self->system().render(err));
        if (attempts_left > 0)
          st.in_line[session].insert(
            st.in_line[session].begin(), [=](caf::error read_failed) {
              if (read_failed)
                self->state.registers.answer(id, std::move(read_failed));
              else
                register_in_line(self, session, handle, id,
                                 attempts_left - 1);
            });
        else
          st.registers.answer(id, std::move(err));
        end_claim(self, session);
      });
}

/// A register's turn in the session's line.
void register_in_line(persister_pointer self, const std::string& session,
                      const session_handle_actor& handle, uint64_t id,
                      int attempts_left) {
  auto& st = self->state;
  auto generation = st.registry.register_handle(session, handle);
  if (!generation) {
    st.registers.answer(id, std::move(generation.error()));
    return;
  }
  if (st.options.claim_generations) {
    claim_then_answer(self, session, handle, *generation, id, attempts_left);
    return;
  }
  restand(self, session);
  st.registers.answer(id, *generation);
}

caf::result<uint64_t> on_register(persister_pointer self,
                                  const std::string& session,
                                  const session_handle_actor& handle) {
  if (auto err = check_handle(session, handle))
    return err;
  self->state.handles.watch(self, address_of(handle));
  auto promise = self->make_response_promise<uint64_t>();
  auto id = self->state.registers.park(promise);
  // After a restart, registers continue from the stored generation plus one.
  in_order(self, session, true, [=](caf::error err) {
    if (err) {
      self->state.registers.answer(id, std::move(err));
      return;
    }
    register_in_line(self, session, handle, id, 1);
  });
  return promise;
}

/// Runs `answer` in the session's line: at once when nothing waits in it,
/// else parked in `list` until its turn.
template <class T, class Answer>
caf::result<T>
answer_in_line(persister_pointer self, const std::string& session,
               parked_requests<caf::typed_response_promise<T>>& list,
               Answer answer) {
  if (!must_wait(self, session, false))
    return answer();
  auto promise = self->make_response_promise<T>();
  auto id = list.park(promise);
  in_order(self, session, false, [self, id, &list, answer](caf::error) {
    if (auto promise = list.take(id))
      promise->deliver(answer());
  });
  return promise;
}

/// The persister's counters plus the groups and fsyncs of its I/O actors.
caf::result<session_persister_stats> on_stats(persister_pointer self) {
  auto& st = self->state;
  auto result = std::make_shared<session_persister_stats>(st.stats);
  result->active_writers = st.writers.size() - st.idle_writers.size();
  result->idle_writers = st.idle_writers.size();
  result->failed_sessions = st.registry.failed_count();
  auto promise = self->make_response_promise<session_persister_stats>();
  auto id = st.stats_asks.park(promise);
  if (st.io.empty()) {
    st.stats_asks.answer(id, *result);
    return promise;
  }
  auto missing = std::make_shared<std::size_t>(st.io.size());
  auto one_done = [self, id, result, missing] {
    if (--*missing == 0)
      self->state.stats_asks.answer(id, *result);
  };
  for (const auto& io : st.io)
    self->request(io, caf::infinite, stats_atom::value)
      .then(
        [result, one_done](uint64_t groups, uint64_t fsyncs) {
          result->groups += groups;
          result->fsyncs += fsyncs;
          one_done();
        },
        [one_done](caf::error&) { one_done(); });
  return promise;
}

std::optional<session_handle_actor>
retry_source(persister_pointer self, const std::string& session) {
  return self->state.registry.retry_source(
    session, [](const session_handle_actor& x) { return alive(x); });
}

/// After the queued writes of `session`: retries its failed write once.
void finish_wait_idle(persister_pointer self, const std::string& session,
                      uint64_t id) {
  auto& st = self->state;
  if (!st.registry.failed(session)) {
    st.idle_waits.answer(id, ok_atom::value);
    return;
  }
  auto source = retry_source(self, session);
  if (!source) {
    st.idle_waits.answer(id, make_error(errc::handle_gone,
                                        "session " + session
                                          + " failed and has no live handle"));
    return;
  }
  retry_write(self, session, *source, [self, id](caf::error result) {
    if (result)
      self->state.idle_waits.answer(id, std::move(result));
    else
      self->state.idle_waits.answer(id, ok_atom::value);
  });
}

caf::result<ok_atom> on_wait_idle(persister_pointer self,
                                  const std::string& session) {
  auto& st = self->state;
  if (auto err = check_session(session))
    return err;
  auto promise = self->make_response_promise<ok_atom>();
  auto id = st.idle_waits.park(promise);
  in_order(self, session, false, [self, session, id](caf::error) {
    if (!busy_writer(self->state, session)) {
      finish_wait_idle(self, session, id);
      return;
    }
    self
      ->request(writer_for(self, session).writer, caf::infinite,
                barrier_atom::value)
      .then([=](ok_atom) { finish_wait_idle(self, session, id); },
            [=](caf::error&) { finish_wait_idle(self, session, id); });
  });
  return promise;
}

void finish_flush(persister_pointer self, uint64_t id) {
  auto& st = self->state;
  auto i = st.flush_runs.find(id);
  if (i == st.flush_runs.end())
    return;
  auto unwritten = i->second.unwritten + i->second.waiting.size();
  st.flush_runs.erase(i);
  st.flushes.answer(id, unwritten);
}

void flush_done(persister_pointer self, uint64_t id, const std::string& session,
                bool written) {
  auto& runs = self->state.flush_runs;
  auto i = runs.find(id);
  if (i == runs.end() || i->second.waiting.erase(session) == 0)
    return;
  if (!written)
    ++i->second.unwritten;
  if (i->second.waiting.empty())
    finish_flush(self, id);
}

caf::result<uint64_t> on_flush_all(persister_pointer self,
                                   caf::timespan limit) {
  if (limit < caf::timespan{0})
    return make_error(errc::invalid_request,
                      "the flushall limit " + duration_text(limit)
                        + " is negative");
  auto& st = self->state;
  auto promise = self->make_response_promise<uint64_t>();
  auto id = st.flushes.park(promise);
  auto& run = st.flush_runs[id];
  std::vector<std::string> queued;
  for (const auto& [session, entry] : st.writers)
    if (!st.registry.failed(session))
      queued.push_back(session);
  for (const auto& session : st.registry.failed_sessions()) {
    auto source = retry_source(self, session);
    if (!source) {
      // Its rows stay kept, but no handle is left to write them from.
      ++run.unwritten;
      continue;
    }
    run.waiting.insert(session);
    retry_write(self, session, *source, [=](caf::error result) {
      flush_done(self, id, session, !result);
    });
  }
  for (const auto& session : queued) {
    run.waiting.insert(session);
    self
      ->request(writer_for(self, session).writer, caf::infinite,
                barrier_atom::value)
      .then([=](ok_atom) { flush_done(self, id, session, true); },
            [=](caf::error&) { flush_done(self, id, session, false); });
  }
  if (run.waiting.empty())
    finish_flush(self, id);
  else
    self->delayed_send(self, limit, caf::timeout_atom::value, id);
  return promise;
}

/// Forgets what the registry holds of `session` when nothing about it is
/// under way here either.
void forget_if_idle(persister_pointer self, const std::string& session) {
  auto& st = self->state;
  if (st.writers.count(session) == 0 && st.in_line.count(session) == 0)
    st.registry.forget_if_idle(session);
}

/// Retires the writer idle the longest: it received everything sent to it,
/// and the persister forgets it before anything else could be sent.
void retire_longest_idle(persister_pointer self) {
  auto& st = self->state;
  auto session = std::move(st.idle_writers.back());
  st.idle_writers.pop_back();
  auto i = st.writers.find(session);
  // Forgotten first: its end needs no down message. Unless a client
  // registered it as a handle: CAF 0.17's demonitor would drop that monitor
  // too, and its down message is the handle's death.
  auto address = caf::actor_cast<caf::actor_addr>(i->second.writer);
  if (!st.handles.watching(address))
    self->demonitor(address);
  st.writer_sessions.erase(address);
  self->send(i->second.writer, retire_atom::value);
  st.writers.erase(i);
  forget_if_idle(self, session);
}

void on_written(persister_pointer self, const std::string& session,
                const write_report& report) {
  auto& st = self->state;
  auto& stats = st.stats;
  stats.queued_requests -= std::min(stats.queued_requests, report.settled);
  if (report.snapshot_asked)
    ++stats.snapshot_requests;
  if (report.erased)
    st.registry.mark_written(session);
  if (report.attempted) {
    if (report.ok) {
      ++stats.writes;
      stats.rows_written += report.rows;
      stats.rows_removed += report.removed;
      st.registry.mark_written(session);
    } else {
      st.registry.mark_failed(session, report.source);
    }
  }
  if (!report.idle)
    return;
  // Idle only when the writer received everything sent to it: then nothing
  // sent to it is lost when it retires, and nothing is sent to it while it
  // stays idle (a request wakes it first).
  auto i = st.writers.find(session);
  if (i == st.writers.end() || i->second.idle_at
      || caf::actor_cast<caf::actor_addr>(i->second.writer)
           != caf::actor_cast<caf::actor_addr>(self->current_sender())
      || i->second.sent != report.received)
    return;
  // Kept warm: the session's next persist costs no spawn, no retirement and
  // no read of the stored generation the registry would have forgotten.
  st.idle_writers.push_front(session);
  i->second.idle_at = st.idle_writers.begin();
  while (st.idle_writers.size() > st.options.idle_writers)
    retire_longest_idle(self);
}

/// The persister's `exclusive`: issues a lease id for the session and
/// delegates to its writer, which answers when the lease is granted.
caf::result<session_lease> persister_issue_lease(persister_pointer self,
                                                 const std::string& session) {
  auto& st = self->state;
  if (auto err = check_session(session))
    return err;
  auto issue = [self, session]() -> session_lease {
    auto& st = self->state;
    session_lease lease{st.next_lease++};
    st.leases.emplace(lease.id, session);
    return lease;
  };
  if (!must_wait(self, session, false)) {
    auto lease = issue();
    return self->delegate(writer_for(self, session).writer,
                          exclusive_atom::value, lease);
  }
  auto promise = self->make_response_promise<session_lease>();
  auto id = st.lease_asks.park(promise);
  in_order(self, session, false, [self, session, id, issue](caf::error) {
    if (auto promise = self->state.lease_asks.take(id))
      promise->delegate(writer_for(self, session).writer,
                        exclusive_atom::value, issue());
  });
  return promise;
}

/// The persister's `release`: forgets the lease and delegates to the
/// session's writer, if it still has one.
caf::result<ok_atom> persister_forward_release(persister_pointer self,
                                               session_lease lease) {
  auto& st = self->state;
  auto i = st.leases.find(lease.id);
  if (i == st.leases.end())
    return make_error(errc::not_found,
                      "no lease " + std::to_string(lease.id) + " is held");
  auto session = i->second;
  st.leases.erase(i);
  // An idle writer holds no lease and has none queued.
  if (!busy_writer(st, session))
    return ok_atom::value;
  return self->delegate(writer_for(self, session).writer, release_atom::value,
                        lease);
}

void on_handle_down(persister_pointer self, const caf::actor_addr& handle) {
  auto& st = self->state;
  if (!st.handles.forget(handle))
    return;
  auto death = st.registry.handle_down(handle);
  for (const auto& [session, generation] : death.unfenced) {
    spdlog::info("session persister: no handle of deleted session {} is "
                 "left; its tombstone {} goes",
                 session, generation);
    self->send(io_for(self, session), purge_atom::value, session, generation);
  }
  for (const auto& session : death.sessions)
    forget_if_idle(self, session);
}

/// A writer ended without being retired: its entry goes, and the session's
/// next request spawns a new writer. (Its parked requests were answered
/// as it stopped.)
void on_writer_down(persister_pointer self,
                    std::unordered_map<caf::actor_addr, std::string>::iterator
                      at,
                    const caf::error& reason) {
  auto& st = self->state;
  auto session = std::move(at->second);
  st.writer_sessions.erase(at);
  if (reason)
    spdlog::error("session persister: the writer of session {} died: {}",
                  session, self->system().render(reason));
  if (auto i = st.writers.find(session); i != st.writers.end()) {
    wake(st, i->second); // off the idle list
    st.writers.erase(i);
  }
  forget_if_idle(self, session);
}

void set_handlers(persister_pointer self) {
  // Writers are monitored, not linked: their addresses reach handles and
  // clients (as the sender of snapshot requests and answers), and an exit
  // with exit_reason::kill sent to one would take a linked persister with
  // it (CAF 0.17 makes kill fatal along every link).
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (auto i = st.writer_sessions.find(msg.source);
        i != st.writer_sessions.end())
      on_writer_down(self, i, msg.reason);
    else
      on_handle_down(self, msg.source);
  });
}

session_persister_full_actor::behavior_type
session_persister(persister_pointer self, std::vector<session_io_actor> io,
                  session_persister_options options) {
  self->state.io = std::move(io);
  self->state.options = options;
  set_handlers(self);
  return {
    [self](register_atom, const std::string& session,
           const session_handle_actor& handle) {
      return on_register(self, session, handle);
    },
    [self](persist_atom, std::string& session, session_handle_actor& handle,
           std::vector<session_update>& updates,
           std::vector<std::string>& removed) {
      return on_persist(self, session, handle, std::nullopt, updates, removed);
    },
    [self](persist_atom, std::string& session, session_handle_actor& handle,
           session_snapshot& snapshot, std::vector<session_update>& updates,
           std::vector<std::string>& removed) {
      return on_persist(self, session, handle, std::move(snapshot), updates,
                        removed);
    },
    [self](delete_atom, const std::string& session) {
      return on_delete(self, session, std::nullopt);
    },
    [self](delete_atom, const std::string& session,
           const session_handle_actor& live) {
      return on_delete(self, session, live);
    },
    [self](is_deleted_atom, const std::string& session,
           const session_handle_actor& handle) -> caf::result<bool> {
      if (auto err = check_handle(session, handle))
        return err;
      return answer_in_line<bool>(self, session, self->state.questions,
                                  [self, session, handle] {
                                    return self->state.registry.is_deleted(
                                      session, handle);
                                  });
    },
    [self](unflushed_atom, const std::string& session) -> caf::result<bool> {
      if (auto err = check_session(session))
        return err;
      return answer_in_line<bool>(self, session, self->state.questions,
                                  [self, session] {
                                    return busy_writer(self->state, session)
                                           || self->state.registry.failed(
                                             session);
                                  });
    },
    [self](load_atom, const std::string& session)
      -> caf::result<session_record> {
      if (auto err = check_session(session))
        return err;
      return self->delegate(io_for(self, session), load_atom::value, session);
    },
    [self](wait_idle_atom, const std::string& session) {
      return on_wait_idle(self, session);
    },
    [self](flush_all_atom, caf::timespan limit) {
      return on_flush_all(self, limit);
    },
    [self](exclusive_atom, const std::string& session) {
      return persister_issue_lease(self, session);
    },
    [self](release_atom, session_lease lease) {
      return persister_forward_release(self, lease);
    },
    [self](stats_atom) { return on_stats(self); },
    [self](written_atom, const std::string& session,
           const write_report& report) { on_written(self, session, report); },
    [self](release_atom, const std::string&, session_lease lease) {
      self->state.leases.erase(lease.id);
    },
    [self](caf::timeout_atom, uint64_t id) { finish_flush(self, id); },
  };
}

/// Spawns the persister (scheduled) over the given I/O actors.
session_persister_actor
spawn_session_persister(caf::actor_system& sys,
                        std::vector<session_io_actor> io,
                        session_persister_options options) {
  return sys.spawn(session_persister, std::move(io), options);
}

/// The I/O actors as the caller of the persister holds them: only to stop
/// them and wait for them.
std::vector<caf::actor> untyped(const std::vector<session_io_actor>& io) {
  std::vector<caf::actor> result;
  for (const auto& x : io)
    result.push_back(caf::actor_cast<caf::actor>(x));
  return result;
}

/// The I/O actors (each made by `spawn_io`) and the persister on top.
template <class SpawnIo>
session_persister_actors
spawn_with_io(caf::actor_system& sys, std::shared_ptr<storage::database> db,
              session_persister_options options, SpawnIo spawn_io) {
  std::vector<session_io_actor> io;
  for (std::size_t i = 0; i < std::max<std::size_t>(options.io_workers, 1);
       ++i)
    io.push_back(spawn_io(sys, db));
  session_persister_actors service;
  service.io = untyped(io);
  service.persister = spawn_session_persister(sys, std::move(io), options);
  return service;
}

} // namespace

session_persister_actor
spawn_session_persister_over(caf::actor_system& sys,
                             std::vector<session_io_actor> io,
                             session_persister_options options) {
  return spawn_session_persister(sys, std::move(io), std::move(options));
}

session_persister_actors
spawn_session_persister_actors(caf::actor_system& sys,
                               std::shared_ptr<storage::database> db,
                               session_persister_options options) {
  return spawn_with_io(sys, std::move(db), std::move(options),
                       spawn_detached_session_io_worker);
}

session_persister_actors
spawn_session_persister_actors_scheduled(caf::actor_system& sys,
                                         std::shared_ptr<storage::database> db,
                                         session_persister_options options) {
  return spawn_with_io(sys, std::move(db), std::move(options),
                       spawn_scheduled_session_io_worker);
}

} // namespace coalesce
