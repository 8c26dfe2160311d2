#include <coalesce/actors/session_persister.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/caller_monitor.hpp>
#include <coalesce/actors/guarded_write.hpp>
#include <coalesce/actors/option_text.hpp>
#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/actors/session_queue.hpp>
#include <coalesce/actors/session_registry.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>

namespace coalesce {

// -- I/O actors ---------------------------------------------------------------

struct session_io_state {
  std::shared_ptr<storage::database> db;
  /// The group forming: writes that arrived since the last commit.
  std::vector<storage::session_write> pending;
  parked_requests<caf::typed_response_promise<ok_atom>> waiters{
    "the session I/O actor"};
  std::vector<uint64_t> pending_waiters;
  uint64_t groups = 0;
  uint64_t fsyncs = 0;
};

using io_pointer = session_io_actor::stateful_pointer<session_io_state>;

namespace {

void count_batch(io_pointer self) {
  if (self->state.db->mode() == storage::durability::synced)
    ++self->state.fsyncs;
}

/// Writes the pending group as one batch and answers each of its writes.
void commit_pending(io_pointer self) {
  auto& st = self->state;
  if (st.pending.empty())
    return;
  auto writes = std::move(st.pending);
  auto waiters = std::move(st.pending_waiters);
  st.pending.clear();
  st.pending_waiters.clear();
  storage::session_group_result result;
  auto failure = guarded_write(*st.db, [&] {
    result = storage::save_session_group(*st.db, writes);
    return result.failure;
  });
  if (result.written) {
    ++st.groups;
    count_batch(self);
  }
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    const caf::error* err = nullptr;
    if (i < result.refused.size() && result.refused[i])
      err = &result.refused[i];
    else if (failure)
      err = &failure;
    if (err)
      st.waiters.answer(waiters[i], *err);
    else
      st.waiters.answer(waiters[i], ok_atom::value);
  }
}

} // namespace

session_io_actor::behavior_type
session_io_worker(io_pointer self, std::shared_ptr<storage::database> db) {
  self->state.db = std::move(db);
  return {
    [self](write_atom, storage::session_write& write) {
      auto& st = self->state;
      if (st.pending.empty())
        self->send(self, commit_atom::value);
      auto promise = self->make_response_promise<ok_atom>();
      st.pending.push_back(std::move(write));
      st.pending_waiters.push_back(st.waiters.park(promise));
      return promise;
    },
    [self](commit_atom) { commit_pending(self); },
    [self](erase_atom, const std::string& session,
           uint64_t generation) -> caf::result<ok_atom> {
      commit_pending(self);
      auto& db = *self->state.db;
      if (auto err = guarded_write(db, [&] {
            return storage::erase_session(db, session, generation);
          }))
        return err;
      count_batch(self);
      return ok_atom::value;
    },
    [self](load_atom, const std::string& session)
      -> caf::result<session_record> {
      commit_pending(self);
      auto record = storage::load_session(*self->state.db, session);
      if (!record)
        return std::move(record.error());
      return std::move(*record);
    },
    [self](stored_generation_atom, const std::string& session)
      -> caf::result<bool, uint64_t> {
      commit_pending(self);
      auto stored = storage::stored_generation(*self->state.db, session);
      if (!stored)
        return std::move(stored.error());
      return caf::result<bool, uint64_t>{stored->has_value(),
                                         stored->value_or(0)};
    },
    [self](stats_atom) -> caf::result<uint64_t, uint64_t> {
      return caf::result<uint64_t, uint64_t>{self->state.groups,
                                             self->state.fsyncs};
    },
  };
}

namespace {

// -- the writer of one session -------------------------------------------------

/// Runs one session's queue; every message comes from the persister (its
/// own requests or the clients' it delegated), counted in `received`.
using session_writer_actor = caf::typed_actor<
  caf::replies_to<persist_atom, session_handle_actor,
                  std::vector<session_update>,
                  std::vector<std::string>>::with<ok_atom>,
  /// Deletes the session, leaving a tombstone of the given generation.
  caf::replies_to<delete_atom, uint64_t>::with<ok_atom>,
  caf::replies_to<barrier_atom>::with<ok_atom>,
  caf::replies_to<exclusive_atom, session_lease>::with<session_lease>,
  caf::replies_to<release_atom, session_lease>::with<ok_atom>>;

struct writer_state {
  std::string session;
  session_persister_actor persister;
  session_io_actor io;
  session_persister_options options;
  session_queue queue;
  parked_requests<caf::typed_response_promise<ok_atom>> waiters{
    "the session writer"};
  parked_requests<caf::typed_response_promise<session_lease>> lease_waiters{
    "the session writer"};
  /// Who asked for each queued or held lease.
  std::unordered_map<uint64_t, caf::actor_addr> lease_holders;
  std::optional<uint64_t> held_lease;
  uint64_t received = 0;
  bool asking_to_retire = false;
};

using writer_pointer = session_writer_actor::stateful_pointer<writer_state>;

void pump(writer_pointer self);

void answer_all(writer_pointer self, const std::vector<uint64_t>& waiters,
                const caf::error& result) {
  for (auto id : waiters) {
    if (result)
      self->state.waiters.answer(id, result);
    else
      self->state.waiters.answer(id, ok_atom::value);
  }
}

/// The end of a write job: answers its persists, keeps failed rows for the
/// next write, tells the persister.
void end_write(writer_pointer self, std::shared_ptr<session_rows> rows,
               caf::error result, write_report report) {
  auto& st = self->state;
  report.ok = !result;
  report.settled = rows->waiters.size();
  if (report.attempted && result) {
    spdlog::warn("session persister: write of session {} failed: {}",
                 st.session, self->system().render(result));
    report.rows = 0;
    report.removed = 0;
  } else {
    report.rows = rows->updates.size();
    report.removed = rows->removed.size();
  }
  answer_all(self, rows->waiters, result);
  if (report.attempted && result)
    st.queue.keep_failed(std::move(*rows));
  st.queue.finish(std::move(result));
  self->send(st.persister, written_atom::value, st.session, report);
  pump(self);
}

caf::error snapshot_error(writer_pointer self, const caf::error& err) {
  std::string what;
  if (err == caf::sec::request_timeout)
    what = "no answer within "
           + caf::deep_to_string(self->state.options.snapshot_timeout);
  else if (err == caf::sec::unexpected_response)
    what = "it answered something other than a snapshot";
  else
    what = self->system().render(err);
  return make_error(errc::snapshot_failed,
                    "session " + self->state.session + ": " + what);
}

void write_snapshot(writer_pointer self, std::shared_ptr<session_rows> rows,
                    write_report report, uint64_t generation,
                    std::string& blob) {
  auto& st = self->state;
  if (blob.size() > st.options.max_blob) {
    end_write(self, rows,
              make_error(errc::invalid_request,
                         "the snapshot of session " + st.session + " has "
                           + std::to_string(blob.size())
                           + " bytes, more than persister-max-blob "
                           + std::to_string(st.options.max_blob)),
              report);
    return;
  }
  storage::session_write write{st.session, std::move(blob), rows->updates,
                               rows->removed, generation};
  self->request(st.io, caf::infinite, write_atom::value, std::move(write))
    .then([=](ok_atom) { end_write(self, rows, caf::none, report); },
          [=](caf::error& err) { end_write(self, rows, err, report); });
}

/// A write starts: where to write from (the persister decides), then the
/// snapshot from that handle, then storage.
void start_write(writer_pointer self, std::shared_ptr<session_rows> rows) {
  auto& st = self->state;
  self
    ->request(st.persister, caf::infinite, resolve_atom::value, st.session,
              *rows->source)
    .then(
      [=](session_handle_actor& from, uint64_t generation) {
        write_report report;
        report.attempted = true;
        report.snapshot_asked = true;
        report.source = from;
        self
          ->request(from, self->state.options.snapshot_timeout,
                    snapshot_atom::value)
          .then([=](std::string& blob) {
                  write_snapshot(self, rows, report, generation, blob);
                },
                [=](caf::error& err) {
                  end_write(self, rows, snapshot_error(self, err), report);
                });
      },
      [=](caf::error& err) { end_write(self, rows, err, write_report{}); });
}

void start_erase(writer_pointer self, uint64_t waiter, uint64_t generation) {
  auto& st = self->state;
  auto done = [self, waiter](caf::error result) {
    auto& st = self->state;
    answer_all(self, {waiter}, result);
    write_report report;
    report.erased = !result;
    st.queue.finish(std::move(result));
    self->send(st.persister, written_atom::value, st.session, report);
    pump(self);
  };
  self
    ->request(st.io, caf::infinite, erase_atom::value, st.session, generation)
    .then([=](ok_atom) { done(caf::none); },
          [=](caf::error& err) { done(std::move(err)); });
}

void grant_lease(writer_pointer self, uint64_t lease, uint64_t waiter) {
  auto& st = self->state;
  st.held_lease = lease;
  auto holder = st.lease_holders[lease];
  if (holder)
    self->monitor(holder);
  st.lease_waiters.answer(waiter, session_lease{lease});
}

void end_lease(writer_pointer self) {
  auto& st = self->state;
  st.lease_holders.erase(*st.held_lease);
  st.held_lease.reset();
  st.queue.finish(caf::none);
  pump(self);
}

/// Idle: asks the persister whether it may go; the persister says yes only
/// when it sent nothing this writer has not received.
void maybe_retire(writer_pointer self) {
  auto& st = self->state;
  if (!st.queue.idle() || st.held_lease || st.asking_to_retire)
    return;
  st.asking_to_retire = true;
  self
    ->request(st.persister, caf::infinite, retire_atom::value, st.session,
              st.received)
    .then(
      [self](bool may_go) {
        self->state.asking_to_retire = false;
        if (may_go)
          self->quit();
        else
          maybe_retire(self);
      },
      [self](caf::error&) { self->quit(); });
}

void pump(writer_pointer self) {
  auto& st = self->state;
  while (auto job = st.queue.start_next()) {
    switch (job->kind) {
      case session_job::write:
        start_write(self, std::make_shared<session_rows>(std::move(job->rows)));
        return;
      case session_job::erase:
        start_erase(self, job->rows.waiters.front(), job->generation);
        return;
      case session_job::lease:
        grant_lease(self, job->lease_id, job->rows.waiters.front());
        return;
      case session_job::barrier: {
        auto result = st.queue.last_result();
        answer_all(self, job->rows.waiters, result);
        st.queue.finish(std::move(result));
        break;
      }
    }
  }
  maybe_retire(self);
}

/// Parks a promise for a job with one waiter and queues the job.
caf::typed_response_promise<ok_atom> queue_job(writer_pointer self,
                                               session_job job) {
  auto promise = self->make_response_promise<ok_atom>();
  job.rows.waiters.push_back(self->state.waiters.park(promise));
  self->state.queue.push(std::move(job));
  pump(self);
  return promise;
}

caf::result<ok_atom> on_writer_delete(writer_pointer self,
                                      uint64_t generation) {
  auto& st = self->state;
  auto dropped = st.queue.drop_writes();
  answer_all(self, dropped,
             make_error(errc::session_deleted, "session " + st.session));
  if (!dropped.empty()) {
    write_report report;
    report.settled = dropped.size();
    self->send(st.persister, written_atom::value, st.session, report);
  }
  session_job job;
  job.kind = session_job::erase;
  job.generation = generation;
  return queue_job(self, std::move(job));
}

caf::result<session_lease> on_exclusive(writer_pointer self,
                                        session_lease lease) {
  auto& st = self->state;
  st.lease_holders[lease.id]
    = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto promise = self->make_response_promise<session_lease>();
  session_job job;
  job.kind = session_job::lease;
  job.lease_id = lease.id;
  job.rows.waiters.push_back(st.lease_waiters.park(promise));
  st.queue.push(std::move(job));
  pump(self);
  return promise;
}

caf::result<ok_atom> on_release(writer_pointer self, session_lease lease) {
  auto& st = self->state;
  if (st.held_lease == lease.id) {
    end_lease(self);
  } else if (st.queue.remove_lease(lease.id)) {
    st.lease_holders.erase(lease.id);
    st.lease_waiters.answer_all(
      make_error(errc::invalid_request, "the lease was released before it "
                                        "was granted"));
    pump(self);
  }
  return ok_atom::value;
}

session_writer_actor::behavior_type
session_writer(writer_pointer self, std::string session,
               session_persister_actor persister, session_io_actor io,
               session_persister_options options) {
  auto& st = self->state;
  st.session = std::move(session);
  st.persister = std::move(persister);
  st.io = std::move(io);
  st.options = options;
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (st.held_lease && st.lease_holders[*st.held_lease] == msg.source) {
      self->send(st.persister, release_atom::value, st.session,
                 session_lease{*st.held_lease});
      end_lease(self);
    }
  });
  return {
    [self](persist_atom, session_handle_actor& source,
           std::vector<session_update>& updates,
           std::vector<std::string>& removed) -> caf::result<ok_atom> {
      auto& st = self->state;
      ++st.received;
      auto promise = self->make_response_promise<ok_atom>();
      session_rows rows{source, std::move(updates), std::move(removed),
                        {st.waiters.park(promise)}};
      st.queue.persist(std::move(rows));
      pump(self);
      return promise;
    },
    [self](delete_atom, uint64_t generation) {
      ++self->state.received;
      return on_writer_delete(self, generation);
    },
    [self](barrier_atom) -> caf::result<ok_atom> {
      ++self->state.received;
      session_job job;
      job.kind = session_job::barrier;
      return queue_job(self, std::move(job));
    },
    [self](exclusive_atom, session_lease lease) {
      ++self->state.received;
      return on_exclusive(self, lease);
    },
    [self](release_atom, session_lease lease) {
      ++self->state.received;
      return on_release(self, lease);
    },
  };
}

// -- the persister --------------------------------------------------------------

struct writer_entry {
  session_writer_actor writer;
  /// Messages sent (or delegated) to the writer.
  uint64_t sent = 0;
};

struct flush_run {
  std::set<std::string> waiting;
  uint64_t unwritten = 0;
};

struct persister_state {
  session_persister_options options;
  std::vector<session_io_actor> io;
  session_registry registry;
  caller_monitor handles;
  std::unordered_map<std::string, writer_entry> writers;
  std::unordered_map<uint64_t, std::string> leases;
  uint64_t next_lease = 1;
  parked_requests<caf::typed_response_promise<uint64_t>> flushes{
    "the session persister"};
  std::unordered_map<uint64_t, flush_run> flush_runs;
  parked_requests<caf::typed_response_promise<ok_atom>> idle_waits{
    "the session persister"};
  parked_requests<caf::typed_response_promise<uint64_t>> registers{
    "the session persister"};
  parked_requests<caf::typed_response_promise<ok_atom>> deletes{
    "the session persister"};
  parked_requests<caf::typed_response_promise<session_handle_actor, uint64_t>>
    resolves{"the session persister"};
  parked_requests<caf::typed_response_promise<session_persister_stats>> stats_asks{
    "the session persister"};
  /// What waits for storage's generation of a session, by session.
  std::unordered_map<std::string, std::vector<std::function<void(caf::error)>>>
    generation_loads;
  session_persister_stats stats;
};

using persister_pointer
  = session_persister_actor::stateful_pointer<persister_state>;

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

/// Monitors `handle` once; whether it is alive (not reported down).
bool watch(persister_pointer self, const session_handle_actor& handle) {
  auto addr = address_of(handle);
  self->state.handles.watch(self, addr);
  return self->state.handles.watching(addr);
}

const session_io_actor& io_for(persister_pointer self,
                               const std::string& session) {
  auto& io = self->state.io;
  return io[std::hash<std::string>{}(session) % io.size()];
}

/// Runs `next` once the registry knows what storage holds for `session`
/// (at once when it does; else after one read through the session's I/O
/// actor, shared by everything that waits meanwhile). Never blocks.
void with_stored_generation(persister_pointer self, const std::string& session,
                            std::function<void(caf::error)> next) {
  auto& st = self->state;
  if (st.registry.knows_stored(session)) {
    next(caf::none);
    return;
  }
  auto& waiting = st.generation_loads[session];
  waiting.push_back(std::move(next));
  if (waiting.size() > 1)
    return;
  auto done = [self, session](caf::error err) {
    auto i = self->state.generation_loads.find(session);
    if (i == self->state.generation_loads.end())
      return;
    auto waiting = std::move(i->second);
    self->state.generation_loads.erase(i);
    for (auto& next : waiting)
      next(err);
  };
  self
    ->request(io_for(self, session), caf::infinite,
              stored_generation_atom::value, session)
    .then(
      [self, session, done](bool stored, uint64_t generation) {
        self->state.registry.learn_stored(
          session, stored ? std::optional<uint64_t>{generation} : std::nullopt);
        done(caf::none);
      },
      [done](caf::error& err) { done(std::move(err)); });
}

/// The session's writer, spawned when it has none; counts one message sent.
const session_writer_actor& writer_for(persister_pointer self,
                                       const std::string& session) {
  auto& st = self->state;
  auto i = st.writers.find(session);
  if (i == st.writers.end()) {
    auto writer = self->spawn<caf::linked>(
      session_writer, session, caf::actor_cast<session_persister_actor>(self),
      io_for(self, session), st.options);
    i = st.writers.emplace(session, writer_entry{std::move(writer), 0}).first;
  }
  ++i->second.sent;
  return i->second.writer;
}

/// An internal persist with no new rows from `source`: retries a failed
/// write. `done` gets the outcome.
void retry_write(persister_pointer self, const std::string& session,
                 const session_handle_actor& source,
                 std::function<void(caf::error)> done) {
  ++self->state.stats.queued_requests;
  self
    ->request(writer_for(self, session), caf::infinite, persist_atom::value,
              source, std::vector<session_update>{},
              std::vector<std::string>{})
    .then([done](ok_atom) { done(caf::none); },
          [done](caf::error& err) { done(std::move(err)); });
}

caf::result<ok_atom> on_persist(persister_pointer self, std::string& session,
                                session_handle_actor& handle,
                                std::vector<session_update>& updates,
                                std::vector<std::string>& removed) {
  auto& st = self->state;
  if (auto err = check_handle(session, handle))
    return err;
  if (auto err = check_rows(st.options, updates, removed))
    return err;
  auto alive = watch(self, handle);
  auto source = st.registry.source_for(session, handle, alive);
  if (!source)
    return std::move(source.error());
  ++st.stats.queued_requests;
  return self->delegate(writer_for(self, session), persist_atom::value,
                        std::move(*source), std::move(updates),
                        std::move(removed));
}

caf::result<ok_atom>
on_delete(persister_pointer self, const std::string& session,
          const std::optional<session_handle_actor>& live) {
  if (auto err = check_session(session))
    return err;
  if (live) {
    if (auto err = check_handle(session, *live))
      return err;
    watch(self, *live);
  }
  auto promise = self->make_response_promise<ok_atom>();
  auto id = self->state.deletes.park(promise);
  // The tombstone must lie above what storage holds: learn it first.
  with_stored_generation(self, session, [=](caf::error err) {
    auto& st = self->state;
    if (err) {
      st.deletes.answer(id, std::move(err));
      return;
    }
    auto tombstone = st.registry.delete_session(session, live);
    self
      ->request(writer_for(self, session), caf::infinite, delete_atom::value,
                tombstone)
      .then([=](ok_atom) { self->state.deletes.answer(id, ok_atom::value); },
            [=](caf::error& err) {
              self->state.deletes.answer(id, std::move(err));
            });
  });
  return promise;
}

caf::result<uint64_t> on_register(persister_pointer self,
                                  const std::string& session,
                                  const session_handle_actor& handle) {
  if (auto err = check_handle(session, handle))
    return err;
  watch(self, handle);
  auto promise = self->make_response_promise<uint64_t>();
  auto id = self->state.registers.park(promise);
  // After a restart, registers continue from the stored generation plus one.
  with_stored_generation(self, session, [=](caf::error err) {
    auto& st = self->state;
    if (err)
      st.registers.answer(id, std::move(err));
    else
      st.registers.answer(id, st.registry.register_handle(session, handle));
  });
  return promise;
}

/// Where a starting write is written from and the generation it carries.
caf::result<session_handle_actor, uint64_t>
on_resolve(persister_pointer self, const std::string& session,
           const session_handle_actor& handle) {
  auto promise = self->make_response_promise<session_handle_actor, uint64_t>();
  auto id = self->state.resolves.park(promise);
  with_stored_generation(self, session, [=](caf::error err) {
    auto& st = self->state;
    if (err) {
      st.resolves.answer(id, std::move(err));
      return;
    }
    auto source = st.registry.source_for(
      session, handle, st.handles.watching(address_of(handle)));
    if (!source) {
      st.resolves.answer(id, std::move(source.error()));
      return;
    }
    auto generation = st.registry.generation_of(session, *source);
    st.resolves.answer(id, std::move(*source), generation);
  });
  return promise;
}

/// The persister's counters plus the groups and fsyncs of its I/O actors.
caf::result<session_persister_stats> on_stats(persister_pointer self) {
  auto& st = self->state;
  auto result = std::make_shared<session_persister_stats>(st.stats);
  result->active_writers = st.writers.size();
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

/// After the queued writes of `session`: retries its failed write once.
void finish_wait_idle(persister_pointer self, const std::string& session,
                      uint64_t id) {
  auto& st = self->state;
  if (!st.registry.failed(session)) {
    st.idle_waits.answer(id, ok_atom::value);
    return;
  }
  auto source = st.registry.retry_source(session);
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
  if (st.writers.count(session) == 0) {
    finish_wait_idle(self, session, id);
    return promise;
  }
  self->request(writer_for(self, session), caf::infinite, barrier_atom::value)
    .then([=](ok_atom) { finish_wait_idle(self, session, id); },
          [=](caf::error&) { finish_wait_idle(self, session, id); });
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
    auto source = st.registry.retry_source(session);
    if (!source) {
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
    self->request(writer_for(self, session), caf::infinite, barrier_atom::value)
      .then([=](ok_atom) { flush_done(self, id, session, true); },
            [=](caf::error&) { flush_done(self, id, session, false); });
  }
  if (run.waiting.empty())
    finish_flush(self, id);
  else
    self->delayed_send(self, limit, caf::timeout_atom::value, id);
  return promise;
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
  if (!report.attempted)
    return;
  if (report.ok) {
    ++stats.writes;
    stats.rows_written += report.rows;
    stats.rows_removed += report.removed;
    st.registry.mark_written(session);
  } else {
    st.registry.mark_failed(session, report.source);
  }
}

bool on_retire(persister_pointer self, const std::string& session,
               uint64_t received) {
  auto& writers = self->state.writers;
  auto i = writers.find(session);
  if (i == writers.end()
      || caf::actor_cast<caf::actor_addr>(i->second.writer)
           != caf::actor_cast<caf::actor_addr>(self->current_sender())
      || i->second.sent != received)
    return false;
  writers.erase(i);
  return true;
}

caf::result<session_lease> on_exclusive(persister_pointer self,
                                        const std::string& session) {
  auto& st = self->state;
  if (auto err = check_session(session))
    return err;
  session_lease lease{st.next_lease++};
  st.leases.emplace(lease.id, session);
  return self->delegate(writer_for(self, session), exclusive_atom::value,
                        lease);
}

caf::result<ok_atom> on_release(persister_pointer self, session_lease lease) {
  auto& st = self->state;
  auto i = st.leases.find(lease.id);
  if (i == st.leases.end())
    return make_error(errc::not_found,
                      "no lease " + std::to_string(lease.id) + " is held");
  auto session = i->second;
  st.leases.erase(i);
  if (st.writers.count(session) == 0)
    return ok_atom::value;
  return self->delegate(writer_for(self, session), release_atom::value, lease);
}

void set_handlers(persister_pointer self) {
  self->set_down_handler([self](caf::down_msg& msg) {
    if (self->state.handles.forget(msg.source))
      self->state.registry.handle_down(msg.source);
  });
  self->set_exit_handler([self](caf::exit_msg& msg) {
    for (auto i = self->state.writers.begin(); i != self->state.writers.end();
         ++i)
      if (caf::actor_cast<caf::actor_addr>(i->second.writer) == msg.source) {
        if (msg.reason)
          spdlog::error("session persister: the writer of session {} died: {}",
                        i->first, self->system().render(msg.reason));
        self->state.writers.erase(i);
        return;
      }
    if (msg.reason)
      self->quit(msg.reason);
  });
}

session_persister_actor::behavior_type
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
      return on_persist(self, session, handle, updates, removed);
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
      return self->state.registry.is_deleted(session, handle);
    },
    [self](unflushed_atom, const std::string& session) -> caf::result<bool> {
      if (auto err = check_session(session))
        return err;
      return self->state.writers.count(session) > 0
             || self->state.registry.failed(session);
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
      return on_exclusive(self, session);
    },
    [self](release_atom, session_lease lease) {
      return on_release(self, lease);
    },
    [self](stats_atom) { return on_stats(self); },
    [self](resolve_atom, const std::string& session,
           const session_handle_actor& handle) {
      return on_resolve(self, session, handle);
    },
    [self](written_atom, const std::string& session,
           const write_report& report) { on_written(self, session, report); },
    [self](retire_atom, const std::string& session, uint64_t received) {
      return on_retire(self, session, received);
    },
    [self](release_atom, const std::string&, session_lease lease) {
      self->state.leases.erase(lease.id);
    },
    [self](caf::timeout_atom, uint64_t id) { finish_flush(self, id); },
  };
}

} // namespace

session_persister_actor
spawn_session_persister(caf::actor_system& sys,
                        std::vector<session_io_actor> io,
                        session_persister_options options) {
  return sys.spawn(session_persister, std::move(io), options);
}

session_persister_actors spawn_session_persister_actors(caf::actor_system& sys,
                                          std::shared_ptr<storage::database> db,
                                          session_persister_options options) {
  session_persister_actors service;
  for (std::size_t i = 0; i < std::max<std::size_t>(options.io_workers, 1);
       ++i)
    service.io.push_back(sys.spawn<caf::detached>(session_io_worker, db));
  service.persister = spawn_session_persister(sys, service.io, options);
  return service;
}

session_persister_actors
spawn_persister_service_scheduled(caf::actor_system& sys,
                                  std::shared_ptr<storage::database> db,
                                  session_persister_options options) {
  session_persister_actors service;
  for (std::size_t i = 0; i < std::max<std::size_t>(options.io_workers, 1);
       ++i)
    service.io.push_back(sys.spawn(session_io_worker, db));
  service.persister = spawn_session_persister(sys, service.io, options);
  return service;
}

} // namespace coalesce
