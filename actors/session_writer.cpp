#include <coalesce/actors/session_writer.hpp>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/actors/session_queue.hpp>
#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

struct writer_state {
  /// The session this writer writes; its one job for its whole life.
  std::string session;
  /// The persister that spawned it: `written` and a dead holder's `release`
  /// go there.
  session_persister_full_actor persister;
  /// The session's I/O actor (the persister picks one per session, always
  /// the same): its writes and erases go there, so fencing holds.
  session_io_actor io;
  /// `max_blob` and `snapshot_timeout` bound each write's snapshot.
  session_persister_options options;
  /// The session's jobs and the rows of a failed write, without actors.
  session_queue queue;
  /// The `persist`, `delete` and `barrier` requests, parked under the ids
  /// the queue carries as waiters. Answered when their job ends (a write
  /// with its outcome, an erase with its outcome, a barrier with the
  /// result of the write before it), a queued persist at once with the
  /// refusal when a delete or a `restand` drops it; when the writer stops
  /// first, with errc::stopped_before_answer.
  parked_requests<caf::typed_response_promise<ok_atom>> waiters{
    "the session writer"};
  /// The `exclusive` requests, parked until their lease job starts
  /// (answered with the lease); one is answered with errc::invalid_request
  /// when its own lease is released before it was granted, and each still
  /// parked with errc::stopped_before_answer when the writer stops.
  parked_requests<caf::typed_response_promise<session_lease>> lease_waiters{
    "the session writer"};
  /// Who asked for each queued or held lease (the client the persister
  /// delegated for), monitored once its lease is granted: its death
  /// releases the lease.
  std::unordered_map<uint64_t, caf::actor_addr> lease_holders;
  /// The lease granted and not yet released: its job is the one running,
  /// so every later job waits.
  std::optional<uint64_t> held_lease;
  /// Messages received from the persister, but `retire`; every `written`
  /// carries it, and the persister lets the writer go only if it sent
  /// exactly that many.
  uint64_t received = 0;
};

using writer_pointer = session_writer_actor::stateful_pointer<writer_state>;

void pump(writer_pointer self);

bool idle(writer_pointer self) {
  return self->state.queue.idle() && !self->state.held_lease;
}

/// Tells the persister what a job did and whether the writer is idle.
void report_to(writer_pointer self, write_report report) {
  auto& st = self->state;
  report.idle = idle(self);
  report.received = st.received;
  self->send(st.persister, written_atom::value, st.session, report);
}

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
/// next write, starts the next job, tells the persister.
void end_write(writer_pointer self, std::shared_ptr<session_rows> rows,
               caf::error result, write_report report) {
  auto& st = self->state;
  report.attempted = true;
  report.ok = !result;
  report.source = *rows->source;
  report.settled = rows->waiters.size();
  if (result) {
    spdlog::warn("session persister: write of session {} failed: {}",
                 st.session, self->system().render(result));
  } else {
    report.rows = rows->updates.size();
    report.removed = rows->removed.size();
  }
  answer_all(self, rows->waiters, result);
  if (result)
    st.queue.keep_failed(std::move(*rows));
  st.queue.finish(std::move(result));
  pump(self);
  report_to(self, report);
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
                    write_report report, std::string blob) {
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
                               rows->removed, rows->generation.value_or(0),
                               !rows->generation.has_value()};
  self->request(st.io, caf::infinite, write_atom::value, std::move(write))
    .then([=](ok_atom) { end_write(self, rows, caf::none, report); },
          [=](caf::error& err) { end_write(self, rows, err, report); });
}

/// A write starts: with the snapshot its newest persist carried, else the
/// one its source answers now; then storage.
void start_write(writer_pointer self, std::shared_ptr<session_rows> rows) {
  write_report report;
  if (rows->snapshot) {
    auto blob = std::move(*rows->snapshot);
    rows->snapshot.reset();
    write_snapshot(self, rows, report, std::move(blob));
    return;
  }
  report.snapshot_asked = true;
  self
    ->request(*rows->source, self->state.options.snapshot_timeout,
              snapshot_atom::value)
    .then([=](std::string& blob) {
            write_snapshot(self, rows, report, std::move(blob));
          },
          [=](caf::error& err) {
            end_write(self, rows, snapshot_error(self, err), report);
          });
}

void start_erase(writer_pointer self, uint64_t waiter, uint64_t generation,
                 bool tombstone) {
  auto& st = self->state;
  auto done = [self, waiter](caf::error result) {
    auto& st = self->state;
    answer_all(self, {waiter}, result);
    write_report report;
    report.erased = !result;
    st.queue.finish(std::move(result));
    pump(self);
    report_to(self, report);
  };
  self
    ->request(st.io, caf::infinite, erase_atom::value, st.session, generation,
              tombstone)
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
  if (idle(self))
    report_to(self, write_report{});
}

/// Starts queued jobs until one has to wait for an answer.
void pump(writer_pointer self) {
  auto& st = self->state;
  while (auto job = st.queue.start_next()) {
    switch (job->kind) {
      case session_job::write:
        start_write(self, std::make_shared<session_rows>(std::move(job->rows)));
        return;
      case session_job::erase:
        start_erase(self, job->rows.waiters.front(), job->generation,
                    job->tombstone);
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

/// Answers dropped persists with `why` and tells the persister.
void settle_dropped(writer_pointer self, const std::vector<uint64_t>& dropped,
                    const caf::error& why) {
  answer_all(self, dropped, why);
  if (dropped.empty() && !idle(self))
    return;
  write_report report;
  report.settled = dropped.size();
  report_to(self, report);
}

/// The writer's `persist`: merged into the queued write.
caf::result<ok_atom> writer_queue_persist(writer_pointer self,
                                          write_order& order) {
  auto& st = self->state;
  auto promise = self->make_response_promise<ok_atom>();
  session_rows rows;
  rows.source = std::move(order.source);
  if (order.generation_known)
    rows.generation = order.generation;
  if (order.has_snapshot)
    rows.snapshot = std::move(order.snapshot);
  rows.updates = std::move(order.updates);
  rows.removed = std::move(order.removed);
  rows.waiters.push_back(st.waiters.park(promise));
  st.queue.persist(std::move(rows));
  pump(self);
  return promise;
}

/// The writer's `delete`: drops the queued persists, queues the erase.
caf::result<ok_atom> writer_queue_delete(writer_pointer self,
                                         uint64_t generation, bool tombstone) {
  auto& st = self->state;
  auto dropped = st.queue.drop_writes();
  answer_all(self, dropped,
             make_error(errc::session_deleted, "session " + st.session));
  if (!dropped.empty()) {
    write_report report;
    report.settled = dropped.size();
    report_to(self, report);
  }
  session_job job;
  job.kind = session_job::erase;
  job.generation = generation;
  job.tombstone = tombstone;
  return queue_job(self, std::move(job));
}

/// The writer's `restand`: a register changed where the queued writes come
/// from, or that they may not be written at all.
void writer_restand(writer_pointer self, const caf::error& refusal,
                    const session_handle_actor& source, uint64_t generation,
                    bool generation_known) {
  auto& st = self->state;
  if (refusal) {
    settle_dropped(self, st.queue.refuse_queued_writes(), refusal);
    return;
  }
  st.queue.change_source(source, generation_known
                                   ? std::optional<uint64_t>{generation}
                                   : std::nullopt);
}

/// The writer's `exclusive`: queues the lease job behind the queued jobs;
/// answered with the lease when it starts (grant_lease).
caf::result<session_lease> writer_queue_lease(writer_pointer self,
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

/// The writer's `release`: ends the held lease, or takes a queued one out
/// and answers that one's `exclusive` (no other).
caf::result<ok_atom> writer_release_lease(writer_pointer self,
                                          session_lease lease) {
  auto& st = self->state;
  if (st.held_lease == lease.id) {
    end_lease(self);
  } else if (auto waiter = st.queue.remove_lease(lease.id)) {
    st.lease_holders.erase(lease.id);
    st.lease_waiters.answer(*waiter,
                            make_error(errc::invalid_request,
                                       "lease " + std::to_string(lease.id)
                                         + " was released before it was "
                                           "granted"));
    pump(self);
    if (idle(self))
      report_to(self, write_report{});
  }
  return ok_atom::value;
}

session_writer_actor::behavior_type
session_writer(writer_pointer self, std::string session,
               session_persister_full_actor persister, session_io_actor io,
               session_persister_options options) {
  auto& st = self->state;
  st.session = std::move(session);
  st.persister = std::move(persister);
  st.io = std::move(io);
  st.options = options;
  // The writer ends with its persister, as a link would end it; a monitor
  // rather than a link, so that no exit sent to the writer reaches the
  // persister (see session_persister.cpp, set_handlers).
  self->monitor(st.persister);
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (msg.source == caf::actor_cast<caf::actor_addr>(st.persister)) {
      self->quit(msg.reason);
      return;
    }
    if (st.held_lease && st.lease_holders[*st.held_lease] == msg.source) {
      self->send(st.persister, release_atom::value, st.session,
                 session_lease{*st.held_lease});
      end_lease(self);
    }
  });
  return {
    [self](persist_atom, write_order& order) {
      ++self->state.received;
      return writer_queue_persist(self, order);
    },
    [self](delete_atom, uint64_t generation, bool tombstone) {
      ++self->state.received;
      return writer_queue_delete(self, generation, tombstone);
    },
    [self](barrier_atom) -> caf::result<ok_atom> {
      ++self->state.received;
      session_job job;
      job.kind = session_job::barrier;
      auto promise = queue_job(self, std::move(job));
      if (idle(self))
        report_to(self, write_report{});
      return promise;
    },
    [self](exclusive_atom, session_lease lease) {
      ++self->state.received;
      return writer_queue_lease(self, lease);
    },
    [self](release_atom, session_lease lease) {
      ++self->state.received;
      return writer_release_lease(self, lease);
    },
    [self](restand_atom, const caf::error& refusal,
           const session_handle_actor& source, uint64_t generation,
           bool generation_known) {
      ++self->state.received;
      writer_restand(self, refusal, source, generation, generation_known);
    },
    [self](retire_atom) { self->quit(); },
  };
}

} // namespace

session_writer_actor
spawn_session_writer(session_persister_full_actor::pointer persister,
                     std::string session, session_io_actor io,
                     const session_persister_options& options) {
  auto writer = persister->spawn(
    session_writer, std::move(session),
    caf::actor_cast<session_persister_full_actor>(persister), std::move(io),
    options);
  persister->monitor(writer);
  return writer;
}

} // namespace coalesce
