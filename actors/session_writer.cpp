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
  /// The persister that spawned it: `resolve`, `written`, `retire` and a
  /// dead holder's `release` go there.
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
  /// result of the write before it), a queued persist at once with
  /// errc::session_deleted when a delete drops it; when the writer stops
  /// first, with errc::stopped_before_answer.
  parked_requests<caf::typed_response_promise<ok_atom>> waiters{
    "the session writer"};
  /// The `exclusive` requests, parked until their lease job starts
  /// (answered with the lease); every one still parked is answered with
  /// errc::invalid_request when a queued lease is released before it was
  /// granted, and with errc::stopped_before_answer when the writer stops.
  parked_requests<caf::typed_response_promise<session_lease>> lease_waiters{
    "the session writer"};
  /// Who asked for each queued or held lease (the client the persister
  /// delegated for), monitored once its lease is granted: its death
  /// releases the lease.
  std::unordered_map<uint64_t, caf::actor_addr> lease_holders;
  /// The lease granted and not yet released: its job is the one running,
  /// so every later job waits.
  std::optional<uint64_t> held_lease;
  /// Messages received from the persister; `retire` sends it, and the
  /// persister lets the writer go only if it sent exactly that many.
  uint64_t received = 0;
  /// A `retire` question is out: ask no second one until it is answered.
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

/// The writer's `delete`: drops the queued persists, queues the erase.
caf::result<ok_atom> writer_queue_delete(writer_pointer self,
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

/// The writer's `release`: ends the held lease, or takes a queued one out.
caf::result<ok_atom> writer_release_lease(writer_pointer self,
                                          session_lease lease) {
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
               session_persister_full_actor persister, session_io_actor io,
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
      return writer_queue_delete(self, generation);
    },
    [self](barrier_atom) -> caf::result<ok_atom> {
      ++self->state.received;
      session_job job;
      job.kind = session_job::barrier;
      return queue_job(self, std::move(job));
    },
    [self](exclusive_atom, session_lease lease) {
      ++self->state.received;
      return writer_queue_lease(self, lease);
    },
    [self](release_atom, session_lease lease) {
      ++self->state.received;
      return writer_release_lease(self, lease);
    },
  };
}

} // namespace

session_writer_actor
spawn_session_writer(session_persister_full_actor::pointer persister,
                     std::string session, session_io_actor io,
                     const session_persister_options& options) {
  return persister->spawn<caf::linked>(
    session_writer, std::move(session),
    caf::actor_cast<session_persister_full_actor>(persister), std::move(io),
    options);
}

} // namespace coalesce
