#include <coalesce/actors/session_io_worker.hpp>

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/guarded_write.hpp>
#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/session_store.hpp>

namespace coalesce {

namespace {

/// Syncs the WAL: the I/O actor's helper for the pipelined sync, on its own
/// thread when the I/O actor has one (a blocking call).
using wal_syncer_actor
  = caf::typed_actor<caf::replies_to<sync_atom>::with<ok_atom>>;

wal_syncer_actor::behavior_type
wal_syncer(wal_syncer_actor::pointer, std::shared_ptr<storage::database> db) {
  return {
    [db](sync_atom) -> caf::result<ok_atom> {
      if (auto err = guarded_sync(*db))
        return err;
      return ok_atom::value;
    },
  };
}

/// A group written without fsync whose writes wait for the WAL sync after
/// it (pipelined sync): their parked requests and outcomes.
struct unsynced_group {
  /// The group's number: a sync reported for `n` covers groups up to `n`.
  uint64_t number = 0;
  std::vector<uint64_t> waiters;
  /// Per waiter: its refusal, or none when the batch carried it.
  std::vector<caf::error> refused;
  /// The sessions written, forgotten in `known` when the sync fails.
  std::vector<std::string> sessions;
};

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
  /// Groups written (one WriteBatch each), for the persister's stats.
  uint64_t groups = 0;
  /// Batches written while the database syncs every write (groups and
  /// erases), for the persister's stats: with durability `buffered`, none.
  /// With the pipelined sync, the WAL syncs instead.
  uint64_t fsyncs = 0;
  /// Pipelined sync (over a `synced` database): a group of several writes
  /// is written without fsync and answered once this actor synced the WAL
  /// after it, so that the I/O actor writes the next group meanwhile.
  /// None (durability `buffered`): each group is answered once written.
  wal_syncer_actor syncer;
  /// Groups written and not yet answered, oldest first.
  std::deque<unsynced_group> unsynced;
  /// The number of the last group written, and the one the sync under way
  /// covers (0: none is under way).
  uint64_t last_group = 0;
  uint64_t syncing_up_to = 0;
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

void count_batch(io_pointer self) {
  if (self->state.db->mode() == storage::durability::synced)
    ++self->state.fsyncs;
}

/// Writes the pending replica deltas as one batch and answers each.
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
  auto failure = guarded_write(*st.db, [&] {
    result = storage::replica_apply_group(*st.db, deltas);
    return result.failure;
  });
  if (result.written) {
    ++st.groups;
    count_batch(self);
  }
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
    if (failure)
      st.delta_waiters.answer(waiters[i], failure);
    else if (!result.answers[i])
      st.delta_waiters.answer(waiters[i], result.answers[i].error());
    else
      st.delta_waiters.answer(waiters[i], *result.answers[i]);
  }
}

void commit_pending(io_pointer self);

/// Answers the writes of every unsynced group up to number `up_to`: each
/// with its refusal, or with `failure`, or ok.
void answer_synced(io_pointer self, uint64_t up_to, const caf::error& failure) {
  auto& st = self->state;
  while (!st.unsynced.empty() && st.unsynced.front().number <= up_to) {
    auto group = std::move(st.unsynced.front());
    st.unsynced.pop_front();
    if (failure)
      for (const auto& session : group.sessions)
        st.known.erase(session);
    for (std::size_t i = 0; i < group.waiters.size(); ++i) {
      if (i < group.refused.size() && group.refused[i])
        st.waiters.answer(group.waiters[i], group.refused[i]);
      else if (failure)
        st.waiters.answer(group.waiters[i], failure);
      else
        st.waiters.answer(group.waiters[i], ok_atom::value);
    }
  }
}

/// Asks the syncer for a sync of every group written so far, unless a sync
/// is under way: its answer starts the next one.
void start_sync(io_pointer self) {
  auto& st = self->state;
  if (st.syncing_up_to != 0 || st.unsynced.empty())
    return;
  st.syncing_up_to = st.last_group;
  ++st.fsyncs;
  auto synced = [self](const caf::error& failure) {
    auto& st = self->state;
    auto up_to = std::exchange(st.syncing_up_to, 0);
    if (failure)
      spdlog::warn("session persister: the WAL sync after group {} failed: "
                   "{}",
                   up_to, self->system().render(failure));
    answer_synced(self, up_to, failure);
    // Writes that arrived before this answer wait for a write handler that
    // finds the mailbox empty: this may have been the last message.
    if (self->mailbox().empty())
      commit_pending(self);
    start_sync(self);
  };
  self->request(st.syncer, caf::infinite, sync_atom::value)
    .then([synced](ok_atom) { synced(caf::none); },
          [synced](caf::error& err) { synced(err); });
}

/// Syncs the groups not yet synced here (RocksDB waits for a sync under
/// way) and answers them: before a read, so that a read never answers a
/// write that is not durable (a failure is also the read's), and for a
/// write alone.
caf::error sync_here(io_pointer self) {
  auto& st = self->state;
  if (st.unsynced.empty())
    return caf::none;
  auto err = guarded_sync(*st.db);
  ++st.fsyncs;
  answer_synced(self, st.last_group, err);
  return err;
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
  if (result.written) {
    ++st.groups;
    if (!pipelined)
      count_batch(self);
  }
  if (pipelined && !failure) {
    // Even a refusal waits: it was decided against writes not yet durable.
    unsynced_group group;
    group.number = ++st.last_group;
    group.waiters = std::move(waiters);
    group.refused = std::move(result.refused);
    for (auto& write : writes)
      group.sessions.push_back(std::move(write.session));
    st.unsynced.push_back(std::move(group));
    // A write alone (no load to overlap with) syncs here: no messages to
    // the syncer stand between it and its answer.
    if (writes.size() == 1 && st.syncing_up_to == 0) {
      sync_here(self);
      return;
    }
    start_sync(self);
    return;
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

/// A replica request that changes one session, after the group: through
/// guarded_write, forgetting the generation remembered for it.
template <class F>
caf::result<replica_answer> change_replica(io_pointer self,
                                           const std::string& session, F f) {
  commit_pending(self);
  self->state.known.erase(session);
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
      self->state.known.erase(session);
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
      self->state.known.erase(session);
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
    [self](load_atom, const std::string& session)
      -> caf::result<session_record> {
      commit_pending(self);
      if (auto err = sync_here(self))
        return err;
      auto record = storage::load_session(*self->state.db, session);
      if (!record)
        return std::move(record.error());
      return std::move(*record);
    },
    [self](stored_generation_atom, const std::string& session)
      -> caf::result<bool, uint64_t, std::string> {
      commit_pending(self);
      if (auto err = sync_here(self))
        return err;
      auto stored = storage::stored_generation(*self->state.db, session);
      if (!stored)
        return std::move(stored.error());
      std::string claimant;
      if (stored->has_value()) {
        auto held = storage::replica_version(*self->state.db, session);
        if (!held)
          return std::move(held.error());
        claimant = std::move(held->version.claimant);
      }
      return caf::result<bool, uint64_t, std::string>{
        stored->has_value(), stored->value_or(0), std::move(claimant)};
    },
    [self](claim_atom, const std::string& session, uint64_t generation,
           const std::string& claimant) -> caf::result<ok_atom> {
      commit_pending(self);
      self->state.known.erase(session);
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
      self->state.known.erase(session);
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
    [self](replica_atom, image_atom, const std::string& session)
      -> caf::result<session_image> {
      commit_pending(self);
      if (auto err = sync_here(self))
        return err;
      auto image = storage::replica_image(*self->state.db, session);
      if (!image)
        return std::move(image.error());
      return std::move(*image);
    },
    [self](replica_atom, version_atom, const std::string& session)
      -> caf::result<replica_answer> {
      commit_pending(self);
      if (auto err = sync_here(self))
        return err;
      auto answer = storage::replica_version(*self->state.db, session);
      if (!answer)
        return std::move(answer.error());
      return std::move(*answer);
    },
    [self](stats_atom) -> caf::result<uint64_t, uint64_t> {
      commit_pending(self);
      return caf::result<uint64_t, uint64_t>{self->state.groups,
                                             self->state.fsyncs};
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
