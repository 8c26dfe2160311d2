#include <coalesce/actors/session_io_worker.hpp>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/guarded_write.hpp>
#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/actors/wal_sync_outcomes.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/session_store.hpp>

namespace coalesce {

namespace {

/// Syncs the WAL and answers the writes it made durable: the I/O actor's
/// helper for the pipelined sync, on its own thread when the I/O actor has
/// one (a blocking call). The I/O actor hands each write of a group it
/// wrote without fsync over to it (`delegate`, so the writer gets its
/// answer from here) and asks once per group for itself; reads ask before
/// they read.
using wal_syncer_actor = caf::typed_actor<
  // A delegated write of group n and its refusal (none: the batch carried
  // it): answered ok, the refusal or the sync's failure. (A replica delta
  // refused comes this way too: an error is an answer of any type.)
  caf::replies_to<sync_atom, uint64_t, caf::error>::with<ok_atom>,
  // A delegated replica delta of group n that the batch applied, or that
  // the replica's state answered without applying: answered with that
  // answer or the sync's failure.
  caf::replies_to<sync_atom, uint64_t, replica_answer>::with<replica_answer>,
  // The I/O actor's own request for group n: answered with the syncs so
  // far, or the sync's failure.
  caf::replies_to<sync_atom, uint64_t>::with<ok_atom, uint64_t>>;

struct wal_syncer_state {
  std::shared_ptr<storage::database> db;
  /// Requests that arrived while the last sync ran: the next sync, which
  /// starts after all of their groups were written, answers them all.
  parked_requests<caf::typed_response_promise<ok_atom>> writes{
    "the WAL syncer"};
  std::vector<std::pair<uint64_t, caf::error>> waiting_writes;
  parked_requests<caf::typed_response_promise<replica_answer>> deltas{
    "the WAL syncer"};
  std::vector<std::pair<uint64_t, replica_answer>> waiting_deltas;
  parked_requests<caf::typed_response_promise<ok_atom, uint64_t>> groups{
    "the WAL syncer"};
  std::vector<uint64_t> waiting_groups;
  /// The newest group a request named: what the next sync covers.
  uint64_t last_group = 0;
  uint64_t syncs = 0;
  /// What the syncs decided, for requests that arrive after the sync that
  /// covered their group (in the benchmark, about one write in seven).
  wal_sync_outcomes outcomes;
};

using syncer_pointer = wal_syncer_actor::stateful_pointer<wal_syncer_state>;

/// Syncs once the mailbox is empty and a request waits: the I/O actor
/// writes the next group while this syncs, and the requests that queued
/// meanwhile cost one sync. (A request answered at once from a finished
/// sync checks too, so that none parked before it is left without a sync.)
void sync_when_idle(syncer_pointer self) {
  auto& st = self->state;
  if (!self->mailbox().empty()
      || (st.waiting_writes.empty() && st.waiting_deltas.empty()
          && st.waiting_groups.empty()))
    return;
  auto covered = st.last_group;
  auto err = guarded_sync(*st.db);
  ++st.syncs;
  st.outcomes.record(covered, err);
  if (err)
    spdlog::warn("session persister: the WAL sync up to group {} failed, "
                 "the {} writes it covered fail and are retried: {}",
                 st.last_group,
                 st.waiting_writes.size() + st.waiting_deltas.size(),
                 self->system().render(err));
  for (auto& [id, refusal] : std::exchange(st.waiting_writes, {})) {
    if (refusal)
      st.writes.answer(id, refusal);
    else if (err)
      st.writes.answer(id, err);
    else
      st.writes.answer(id, ok_atom::value);
  }
  for (auto& [id, answer] : std::exchange(st.waiting_deltas, {})) {
    if (err)
      st.deltas.answer(id, err);
    else
      st.deltas.answer(id, std::move(answer));
  }
  for (auto id : std::exchange(st.waiting_groups, {})) {
    if (err)
      st.groups.answer(id, err);
    else
      st.groups.answer(id, ok_atom::value, st.syncs);
  }
}

/// Parks a request (through `park`) for the next sync, which covers group
/// `group`, and syncs unless more requests wait.
template <class... Ts, class Park>
caf::typed_response_promise<Ts...>
wait_for_sync(syncer_pointer self, uint64_t group, Park park) {
  auto promise = self->make_response_promise<Ts...>();
  park(self->state, promise);
  self->state.last_group = std::max(self->state.last_group, group);
  sync_when_idle(self);
  return promise;
}

wal_syncer_actor::behavior_type
wal_syncer(syncer_pointer self, std::shared_ptr<storage::database> db) {
  self->state.db = std::move(db);
  return {
    [self](sync_atom, uint64_t group,
           caf::error& refusal) -> caf::result<ok_atom> {
      if (auto synced = self->state.outcomes.of(group)) {
        sync_when_idle(self);
        if (refusal)
          return std::move(refusal);
        if (*synced)
          return std::move(*synced);
        return ok_atom::value;
      }
      return wait_for_sync<ok_atom>(self, group, [&](auto& st, auto& promise) {
        st.waiting_writes.emplace_back(st.writes.park(promise),
                                       std::move(refusal));
      });
    },
    [self](sync_atom, uint64_t group,
           replica_answer& answer) -> caf::result<replica_answer> {
      if (auto synced = self->state.outcomes.of(group)) {
        sync_when_idle(self);
        if (*synced)
          return std::move(*synced);
        return std::move(answer);
      }
      return wait_for_sync<replica_answer>(
        self, group, [&](auto& st, auto& promise) {
          st.waiting_deltas.emplace_back(st.deltas.park(promise),
                                         std::move(answer));
        });
    },
    [self](sync_atom, uint64_t group) -> caf::result<ok_atom, uint64_t> {
      if (auto synced = self->state.outcomes.of(group)) {
        sync_when_idle(self);
        if (*synced)
          return std::move(*synced);
        return {ok_atom::value, self->state.syncs};
      }
      return wait_for_sync<ok_atom, uint64_t>(
        self, group, [](auto& st, auto& promise) {
          st.waiting_groups.push_back(st.groups.park(promise));
        });
    },
  };
}

struct session_io_state {
  /// The database every call goes to; shared with the node's other
  /// services.
  std::shared_ptr<storage::database> db;
  /// The group forming: writes that arrived since the last commit, in
  /// arrival order. Written once the mailbox is empty after a write (or
  /// before an erase, load or read).
  std::vector<storage::session_write> pending;
  /// The writers' `write` requests, parked until their group is written:
  /// `commit_pending` answers each with ok or with its error; when the
  /// actor stops first, the list answers errc::stopped_before_answer.
  parked_requests<caf::typed_response_promise<ok_atom>> waiters{
    "the session I/O actor"};
  /// The id in `waiters` of each write in `pending`, at the same index.
  std::vector<uint64_t> pending_waiters;
  /// Replica deltas of the forming group and their parked requests, the
  /// same way (a clustered node's writes).
  std::vector<session_delta> pending_deltas;
  parked_requests<caf::typed_response_promise<replica_answer>> delta_waiters{
    "the session I/O actor"};
  std::vector<uint64_t> pending_delta_waiters;
  /// The generation storage holds for the sessions this actor wrote (it
  /// writes every write of its sessions), so that a group reads no stored
  /// generation it wrote itself; forgotten on an erase or a purge, and all
  /// of it past `max_known` sessions.
  storage::known_generations known;
  /// The version each replica of a session holds that this actor wrote
  /// with a delta (its only writer), so that a group of deltas reads no
  /// version it wrote itself; forgotten like `known`.
  storage::known_versions known_versions;
  /// Groups written (one WriteBatch each), for the persister's stats.
  uint64_t groups = 0;
  /// Batches written while the database syncs every write (groups and
  /// erases), for the persister's stats: with durability `buffered`, none.
  /// With the pipelined sync, the WAL syncs this actor ran itself (the
  /// syncer's are in `syncer_syncs`).
  uint64_t fsyncs = 0;
  /// Pipelined sync (over a `synced` database): a group of several writes
  /// is written without fsync and its writes are handed to the syncer,
  /// which answers them once it synced the WAL after the group, so that
  /// this actor writes the next group meanwhile and no answer waits for it.
  /// None (durability `buffered`): each group is answered once written.
  wal_syncer_actor syncer;
  /// The number of the last group written; this actor's requests to the
  /// syncer not yet answered (none: every group written is durable); the
  /// syncs the syncer reported.
  uint64_t last_group = 0;
  uint64_t syncs_awaited = 0;
  uint64_t syncer_syncs = 0;
};

using io_pointer
  = session_replica_io_actor::stateful_pointer<session_io_state>;

/// Sessions whose stored generation an I/O actor keeps at most (a few MB).
constexpr std::size_t max_known = 65536;

/// The debug log's word for an outcome.
const char* outcome_text(const replica_answer& answer) {
  static const char* const words[] = {"applied", "out_of_sync", "preempted",
                                      "stale"};
  return answer.outcome < 4 ? words[answer.outcome] : "?";
}

/// One debug line per replica request that can change a session: what a
/// history of a replica's versions needs (a lost row's diagnosis).
/// `asked()` says what was asked; nothing is formatted above debug.
template <class Asked>
void trace(const char* what, const std::string& session, Asked asked,
           const caf::expected<replica_answer>& answer) {
  if (!spdlog::should_log(spdlog::level::debug))
    return;
  if (answer)
    spdlog::debug("session replica {} {}: {} -> {} {}", session, what,
                  asked(), outcome_text(*answer),
                  version_text(answer->version));
  else
    spdlog::debug("session replica {} {}: {} -> error", session, what,
                  asked());
}

/// Forgets what this actor remembers `session` holds: another kind of
/// write changed it, or the write it remembers may not be durable.
void forget(io_pointer self, const std::string& session) {
  self->state.known.erase(session);
  self->state.known_versions.erase(session);
}

void count_batch(io_pointer self) {
  if (self->state.db->mode() == storage::durability::synced)
    ++self->state.fsyncs;
}

void request_sync(io_pointer self, std::vector<std::string> sessions);

/// Counts a group of `size` writes or deltas just written (`written`: its
/// batch held any) and, under the pipelined sync, numbers it unless it
/// failed. A group of one with nothing else waiting for a sync is synced
/// here, so that no message to the syncer stands between it and its
/// answer; `failure` takes that sync's error, and `first` (its session) is
/// forgotten on one. Whether the group's answers go through the syncer.
bool close_group(io_pointer self, bool written, std::size_t size,
                 const std::string& first, caf::error& failure) {
  auto& st = self->state;
  auto pipelined = static_cast<bool>(st.syncer);
  if (written) {
    ++st.groups;
    if (!pipelined)
      count_batch(self);
  }
  if (!pipelined || failure)
    return false;
  ++st.last_group;
  if (size > 1 || st.syncs_awaited > 0)
    return true;
  failure = guarded_sync(*st.db);
  ++st.fsyncs;
  if (failure)
    forget(self, first);
  return false;
}

/// Writes the pending replica deltas as one batch and answers each, with
/// the pipelined sync as the writes are (commit_pending).
void commit_pending_deltas(io_pointer self) {
  auto& st = self->state;
  if (st.pending_deltas.empty())
    return;
  auto deltas = std::move(st.pending_deltas);
  auto waiters = std::move(st.pending_delta_waiters);
  st.pending_deltas.clear();
  st.pending_delta_waiters.clear();
  for (const auto& delta : deltas)
    st.known.erase(delta.session);
  storage::replica_group_result result;
  auto pipelined = static_cast<bool>(st.syncer);
  auto failure = guarded_write(*st.db, [&] {
    if (st.known_versions.size() > max_known)
      st.known_versions.clear();
    result = storage::replica_apply_group(
      *st.db, deltas,
      pipelined ? std::optional{storage::durability::buffered} : std::nullopt,
      &st.known_versions);
    return result.failure;
  });
  auto delegated = close_group(self, result.written, deltas.size(),
                               deltas.front().session, failure);
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    if (!failure) {
      const auto& delta = deltas[i];
      trace("write", delta.session,
            [&] {
              return "ballot " + std::to_string(delta.ballot) + " base "
                     + std::to_string(delta.base_ballot) + "."
                     + std::to_string(delta.base_seq) + " g"
                     + std::to_string(delta.generation) + " rows "
                     + std::to_string(delta.updates.size())
                     + (delta.updates.empty() ? ""
                                              : " " + delta.updates.back().id)
                     + (delta.erase ? " erase" : "");
            },
            result.answers[i]);
    }
    if (delegated) {
      // Even a refusal waits: it was decided against deltas not yet
      // durable.
      if (auto promise = st.delta_waiters.take(waiters[i])) {
        if (result.answers[i])
          promise->delegate(st.syncer, sync_atom::value, st.last_group,
                            std::move(*result.answers[i]));
        else
          promise->delegate(st.syncer, sync_atom::value, st.last_group,
                            std::move(result.answers[i].error()));
      }
    } else if (failure)
      st.delta_waiters.answer(waiters[i], failure);
    else if (!result.answers[i])
      st.delta_waiters.answer(waiters[i], result.answers[i].error());
    else
      st.delta_waiters.answer(waiters[i], *result.answers[i]);
  }
  if (delegated) {
    std::vector<std::string> sessions;
    for (auto& delta : deltas)
      sessions.push_back(std::move(delta.session));
    request_sync(self, std::move(sessions));
  }
}

void commit_pending(io_pointer self);

/// Answers `promise` with `x`: its value or its error.
template <class T>
void deliver(caf::typed_response_promise<T>& promise, caf::expected<T> x) {
  if (x)
    promise.deliver(std::move(*x));
  else
    promise.deliver(std::move(x.error()));
}

/// Asks the syncer for the sync of the group just written, whose writes
/// were handed to it: until it answers, the group is not durable; when the
/// sync fails, the generations the group wrote are forgotten.
void request_sync(io_pointer self, std::vector<std::string> sessions) {
  auto& st = self->state;
  ++st.syncs_awaited;
  auto synced = [self](const caf::error& failure,
                       const std::vector<std::string>& sessions) {
    auto& st = self->state;
    --st.syncs_awaited;
    if (failure)
      for (const auto& session : sessions)
        forget(self, session);
    // Writes that arrived before this answer wait for a write handler that
    // finds the mailbox empty: this may have been the last message.
    if (self->mailbox().empty())
      commit_pending(self);
  };
  self->request(st.syncer, caf::infinite, sync_atom::value, st.last_group)
    .then(
      [self, synced, sessions](ok_atom, uint64_t syncs) {
        auto& st = self->state;
        st.syncer_syncs = std::max(st.syncer_syncs, syncs);
        synced(caf::none, sessions);
      },
      [synced, sessions](caf::error& err) { synced(err, sessions); });
}

/// A read's promise while the read waits for a sync: CAF drops an awaited
/// handler unanswered when its actor stops, so the last copy answers
/// errc::stopped_before_answer if nothing else did.
template <class Promise>
struct waiting_read {
  Promise promise;

  explicit waiting_read(Promise x) : promise(std::move(x)) {
    // nop
  }

  waiting_read(const waiting_read&) = delete;
  waiting_read& operator=(const waiting_read&) = delete;

  ~waiting_read() {
    if (promise.pending())
      promise.deliver(make_error(errc::stopped_before_answer,
                                 "the session I/O actor stopped"));
  }
};

/// Answers `promise` through `answer(promise)` once every group written so
/// far is durable, or with the failed sync's error: a read never answers a
/// write that is not durable. Nothing else runs in between (`await`).
template <class Promise, class Answer>
Promise when_durable(io_pointer self, Promise promise, Answer answer) {
  auto& st = self->state;
  if (st.syncs_awaited == 0) {
    answer(promise);
    return promise;
  }
  auto read = std::make_shared<waiting_read<Promise>>(promise);
  self->request(st.syncer, caf::infinite, sync_atom::value, st.last_group)
    .await(
      [self, read, answer](ok_atom, uint64_t syncs) {
        auto& st = self->state;
        st.syncer_syncs = std::max(st.syncer_syncs, syncs);
        answer(read->promise);
      },
      [read](caf::error& err) { read->promise.deliver(std::move(err)); });
  return promise;
}

/// Writes the pending group as one batch and answers each of its writes.
void commit_pending(io_pointer self) {
  commit_pending_deltas(self);
  auto& st = self->state;
  if (st.pending.empty())
    return;
  auto writes = std::move(st.pending);
  auto waiters = std::move(st.pending_waiters);
  st.pending.clear();
  st.pending_waiters.clear();
  // A write of the persister's own format replaces a replica's version.
  for (const auto& write : writes)
    st.known_versions.erase(write.session);
  storage::session_group_result result;
  auto pipelined = static_cast<bool>(st.syncer);
  auto failure = guarded_write(*st.db, [&] {
    if (st.known.size() > max_known)
      st.known.clear();
    result = storage::save_session_group(
      *st.db, writes,
      pipelined ? std::optional{storage::durability::buffered} : std::nullopt,
      &st.known);
    return result.failure;
  });
  result.refused.resize(writes.size());
  if (close_group(self, result.written, writes.size(), writes.front().session,
                  failure)) {
    // Even a refusal waits: it was decided against writes not yet durable.
    std::vector<std::string> sessions;
    for (std::size_t i = 0; i < waiters.size(); ++i) {
      if (auto promise = st.waiters.take(waiters[i]))
        promise->delegate(st.syncer, sync_atom::value, st.last_group,
                          std::move(result.refused[i]));
      sessions.push_back(std::move(writes[i].session));
    }
    request_sync(self, std::move(sessions));
    return;
  }
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    const caf::error* err = nullptr;
    if (result.refused[i])
      err = &result.refused[i];
    else if (failure)
      err = &failure;
    if (err)
      st.waiters.answer(waiters[i], *err);
    else
      st.waiters.answer(waiters[i], ok_atom::value);
  }
}

/// A replica request that changes one session, after the group: through
/// guarded_write, forgetting the generation remembered for it.
template <class F>
caf::result<replica_answer> change_replica(io_pointer self,
                                           const std::string& session, F f) {
  commit_pending(self);
  forget(self, session);
  auto& db = *self->state.db;
  auto answer = guarded_write(db, [&] { return f(db); });
  if (!answer)
    return std::move(answer.error());
  return std::move(*answer);
}

session_replica_io_actor::behavior_type
session_io_worker(io_pointer self, std::shared_ptr<storage::database> db,
                  bool detached) {
  self->state.db = std::move(db);
  // The syncer blocks like the I/O actor does: on a thread of its own when
  // the I/O actor has one. Linked: neither outlives the other.
  auto& st = self->state;
  if (st.db->mode() == storage::durability::synced)
    st.syncer = detached
                  ? self->spawn<caf::detached + caf::linked>(wal_syncer, st.db)
                  : self->spawn<caf::linked>(wal_syncer, st.db);
  return {
    [self](write_atom, storage::session_write& write) {
      auto& st = self->state;
      auto promise = self->make_response_promise<ok_atom>();
      st.pending.push_back(std::move(write));
      st.pending_waiters.push_back(st.waiters.park(promise));
      // Everything that reached the actor while it wrote the last group is
      // in the mailbox now: the group closes with the last of it, and no
      // message to itself delays the write.
      if (self->mailbox().empty())
        commit_pending(self);
      return promise;
    },
    [self](erase_atom, const std::string& session, uint64_t generation,
           bool tombstone) -> caf::result<ok_atom> {
      commit_pending(self);
      forget(self, session);
      auto& db = *self->state.db;
      if (auto err = guarded_write(db, [&] {
            return storage::erase_session(
              db, session,
              tombstone ? std::optional<uint64_t>{generation} : std::nullopt);
          }))
        return err;
      count_batch(self);
      return ok_atom::value;
    },
    [self](purge_atom, const std::string& session, uint64_t generation) {
      commit_pending(self);
      forget(self, session);
      auto& db = *self->state.db;
      auto purged = guarded_write(db, [&] {
        return storage::purge_tombstone(db, session, generation);
      });
      if (!purged)
        spdlog::warn("session persister: the tombstone of session {} stays: "
                     "{}",
                     session, self->system().render(purged.error()));
      else if (*purged)
        count_batch(self);
    },
    [self](load_atom, const std::string& session) {
      commit_pending(self);
      return when_durable(
        self, self->make_response_promise<session_record>(),
        [self, session](auto& promise) {
          deliver(promise, storage::load_session(*self->state.db, session));
        });
    },
    [self](stored_generation_atom, const std::string& session) {
      commit_pending(self);
      return when_durable(
        self, self->make_response_promise<bool, uint64_t, std::string>(),
        [self, session](auto& promise) {
          auto stored = storage::stored_generation(*self->state.db, session);
          if (!stored) {
            promise.deliver(std::move(stored.error()));
            return;
          }
          std::string claimant;
          if (stored->has_value()) {
            auto held = storage::replica_version(*self->state.db, session);
            if (!held) {
              promise.deliver(std::move(held.error()));
              return;
            }
            claimant = std::move(held->version.claimant);
          }
          promise.deliver(stored->has_value(), stored->value_or(0),
                          std::move(claimant));
        });
    },
    [self](claim_atom, const std::string& session, uint64_t generation,
           const std::string& claimant) -> caf::result<ok_atom> {
      commit_pending(self);
      forget(self, session);
      auto& db = *self->state.db;
      auto answer = guarded_write(db, [&] {
        return storage::replica_claim(db, session, 0, generation, claimant);
      });
      if (!answer)
        return std::move(answer.error());
      if (outcome_of(*answer) != replica_outcome::applied)
        return make_error(errc::stale_generation,
                          "session " + session + ": generation "
                            + std::to_string(generation)
                            + " is taken; storage holds "
                            + std::to_string(answer->version.generation));
      return ok_atom::value;
    },
    [self](replica_atom, write_atom, session_delta& delta) {
      auto& st = self->state;
      auto promise = self->make_response_promise<replica_answer>();
      st.pending_deltas.push_back(std::move(delta));
      st.pending_delta_waiters.push_back(st.delta_waiters.park(promise));
      if (self->mailbox().empty())
        commit_pending(self);
      return promise;
    },
    [self](replica_atom, prepare_atom, const std::string& session,
           uint64_t ballot) {
      return change_replica(self, session, [&](storage::database& db) {
        auto answer = storage::replica_prepare(db, session, ballot);
        trace(
          "prepare", session,
          [&] { return "ballot " + std::to_string(ballot); }, answer);
        return answer;
      });
    },
    [self](replica_atom, claim_atom, const std::string& session,
           uint64_t ballot, uint64_t generation, const std::string& claimant) {
      return change_replica(self, session, [&](storage::database& db) {
        auto answer = storage::replica_claim(db, session, ballot, generation,
                                             claimant);
        trace("claim", session,
              [&] {
                return "ballot " + std::to_string(ballot) + " g"
                       + std::to_string(generation) + "/" + claimant;
              },
              answer);
        return answer;
      });
    },
    [self](replica_atom, install_atom, uint64_t ballot,
           const session_image& image) {
      return change_replica(self, image.session, [&](storage::database& db) {
        auto answer = storage::replica_install(db, ballot, image);
        trace("install", image.session,
              [&] {
                return "ballot " + std::to_string(ballot) + " image "
                       + version_text(image.version) + " rows "
                       + std::to_string(image.record.updates.size());
              },
              answer);
        return answer;
      });
    },
    [self](replica_atom, drop_atom, const std::string& session,
           const session_version& expected) -> caf::result<bool> {
      commit_pending(self);
      forget(self, session);
      auto& db = *self->state.db;
      auto dropped = guarded_write(
        db, [&] { return storage::replica_drop(db, session, expected); });
      trace(
        "drop", session,
        [&] { return "expected " + version_text(expected); }, dropped);
      if (!dropped)
        return std::move(dropped.error());
      return outcome_of(*dropped) == replica_outcome::applied;
    },
    [self](replica_atom, image_atom, const std::string& session) {
      commit_pending(self);
      return when_durable(
        self, self->make_response_promise<session_image>(),
        [self, session](auto& promise) {
          deliver(promise, storage::replica_image(*self->state.db, session));
        });
    },
    [self](replica_atom, version_atom, const std::string& session) {
      commit_pending(self);
      return when_durable(
        self, self->make_response_promise<replica_answer>(),
        [self, session](auto& promise) {
          deliver(promise,
                  storage::replica_version(*self->state.db, session));
        });
    },
    [self](stats_atom) -> caf::result<uint64_t, uint64_t> {
      commit_pending(self);
      return caf::result<uint64_t, uint64_t>{
        self->state.groups, self->state.fsyncs + self->state.syncer_syncs};
    },
  };
}

} // namespace

session_replica_io_actor
spawn_detached_session_io_worker(caf::actor_system& sys,
                                 std::shared_ptr<storage::database> db) {
  return sys.spawn<caf::detached>(session_io_worker, std::move(db), true);
}

session_replica_io_actor
spawn_scheduled_session_io_worker(caf::actor_system& sys,
                                  std::shared_ptr<storage::database> db) {
  return sys.spawn(session_io_worker, std::move(db), false);
}

} // namespace coalesce
