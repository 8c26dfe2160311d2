#include <coalesce/actors/session_io_worker.hpp>

#include <memory>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/guarded_write.hpp>
#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/session_store.hpp>

namespace coalesce {

namespace {

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
  /// The generation storage holds for the sessions this actor wrote (it
  /// writes every write of its sessions), so that a group reads no stored
  /// generation it wrote itself; forgotten on an erase or a purge, and all
  /// of it past `max_known` sessions.
  storage::known_generations known;
  /// Groups written (one WriteBatch each), for the persister's stats.
  uint64_t groups = 0;
  /// Batches written while the database syncs every write (groups and
  /// erases), for the persister's stats: with durability `buffered`, none.
  uint64_t fsyncs = 0;
};

using io_pointer = session_io_actor::stateful_pointer<session_io_state>;

/// Sessions whose stored generation an I/O actor keeps at most (a few MB).
constexpr std::size_t max_known = 65536;

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
    if (st.known.size() > max_known)
      st.known.clear();
    result = storage::save_session_group(*st.db, writes, std::nullopt,
                                         &st.known);
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

session_io_actor::behavior_type
session_io_worker(io_pointer self, std::shared_ptr<storage::database> db) {
  self->state.db = std::move(db);
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
      commit_pending(self);
      return caf::result<uint64_t, uint64_t>{self->state.groups,
                                             self->state.fsyncs};
    },
  };
}

} // namespace

session_io_actor
spawn_detached_session_io_worker(caf::actor_system& sys,
                                 std::shared_ptr<storage::database> db) {
  return sys.spawn<caf::detached>(session_io_worker, std::move(db));
}

session_io_actor
spawn_scheduled_session_io_worker(caf::actor_system& sys,
                                  std::shared_ptr<storage::database> db) {
  return sys.spawn(session_io_worker, std::move(db));
}

} // namespace coalesce
