#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/expected.hpp>

#include <coalesce/messages/session_persister_interface.hpp>

/// The persister's decisions about handles, without actors: generations per
/// session, the handles a delete retired, and the sessions whose last write
/// failed with the handle to retry from. The persister feeds it the
/// handles' deaths (CAF monitoring); a handle is known by its actor address,
/// which CAF never reuses.
///
/// Generations and store-side fencing: every write carries the generation
/// of the handle it is written from (`generation_of`), and storage refuses
/// one lower than it holds. The registry learns what storage holds
/// (`learn_stored`) before it registers or deletes anything of a session, so
/// that after a restart registers continue from the stored generation plus
/// one. A delete moves the session's floor above every generation in use and
/// answers it: the tombstone storage keeps.
///
/// What a dead handle may do: nothing. A persist through a handle that died
/// is refused (errc::handle_gone, or errc::session_deleted while the handle
/// is remembered as one a delete retired), whether or not the registry still
/// knows it. That rule is what makes forgetting safe: a forgotten handle is
/// a dead one, and a dead one never writes, so no handle of a deleted
/// incarnation can write the session back however much was forgotten.
///
/// What is kept, and for how long (the bound):
/// - a registered or delete-named handle: while it is alive (the live
///   handles bound it);
/// - a dead handle a delete retired: in a list of the last
///   `remembered_retired` ones, only so that `is_deleted` answers true for
///   it; older ones are forgotten (a persist through one is refused either
///   way);
/// - a session (its generations and floor): while it has a live handle, a
///   failed write, or its caller keeps it (`forget_if_idle` is not called);
///   once forgotten, the next register or delete learns the stored
///   generation again, which every generation written is at most.
///
/// Invariants: a registered handle has one generation, its latest register
/// (registering it again moves it); generations of one session grow by one
/// per register; a handle registered before a delete, or named by it, is
/// deleted for as long as it is known, and refused once dead.
namespace coalesce {

class session_registry {
public:
  /// Keeps the last `remembered_retired` dead handles a delete retired.
  explicit session_registry(std::size_t remembered_retired = 4096)
    : remembered_retired_(remembered_retired) {
    // nop
  }

  /// Makes `handle` the current handle of `session`; returns its generation.
  /// Refused with errc::session_deleted for a handle a delete retired: it
  /// stays retired (register a new handle for the re-created session).
  caf::expected<uint64_t> register_handle(const std::string& session,
                                          const session_handle_actor& handle);

  /// Where a persist through `handle` is written from: the handle itself
  /// while it is current (or was never registered) and alive; the newest
  /// live handle of the session when `handle` was superseded. Refused with
  /// errc::session_deleted, errc::handle_superseded (no newer live handle)
  /// or errc::handle_gone (`handle` is dead). `alive` says whether
  /// `handle` is alive as far as the caller knows.
  caf::expected<session_handle_actor>
  source_for(const std::string& session, const session_handle_actor& handle,
             bool alive) const;

  /// Whether `handle` belongs to a deleted incarnation of `session` (a dead
  /// one: while it is among the remembered ones).
  bool is_deleted(const std::string& session,
                  const session_handle_actor& handle) const;

  /// Whether storage's generation of `session` was learned.
  bool knows_stored(const std::string& session) const;

  /// Storage holds `stored` for `session` (none: nothing), claimed by
  /// `claimant` (a handle's `claimant_of`; empty when no claim made it).
  void learn_stored(const std::string& session, std::optional<uint64_t> stored,
                    const std::string& claimant = {});

  /// Replicas (`session_persister_options::claim_generations`): a handle
  /// registered through another coordinator is known here only by the
  /// claim storage holds. `adopt` makes `handle` the current handle at the
  /// stored generation when it is the claimant and not registered here;
  /// whether it did.
  bool adopt(const std::string& session, const session_handle_actor& handle);

  /// Whether storage's generation of `session` was claimed by a handle
  /// other than `handle`, which is not registered here: a write through it
  /// comes from a superseded handle (or one never registered, which with
  /// replicas must register first).
  bool claimed_by_other(const std::string& session,
                        const session_handle_actor& handle) const;

  /// Forgets what storage holds of `session` (a claim failed: another
  /// coordinator may have moved it): the next request reads it again.
  void forget_stored(const std::string& session);

  /// Undoes `register_handle` of `handle` whose claim failed: it is not
  /// registered (a later register claims again).
  void unregister(const std::string& session,
                  const session_handle_actor& handle);

  /// How a claim names a handle: its address as text, the same on every
  /// node.
  static std::string claimant_of(const session_handle_actor& handle);

  /// The generation a write from `source` carries: its own when registered,
  /// else the session's current one (the newest registered, or the floor of
  /// what storage holds or a delete set); none when the registry knows
  /// neither, and the write takes the generation storage holds.
  std::optional<uint64_t> generation_of(const std::string& session,
                                        const session_handle_actor& source) const;

  /// What `delete_session` decided.
  struct deletion {
    /// Above every generation in use: registers afterwards start there.
    uint64_t generation;
    /// Whether a handle registered before the delete, or named by it, is
    /// still alive: only then must storage keep a tombstone to fence it.
    bool tombstone_needed;
  };

  /// Retires every handle registered for `session` so far and `live` (when
  /// given), and forgets the session's failed write.
  deletion delete_session(const std::string& session,
                          const std::optional<session_handle_actor>& live);

  /// What a handle's death changed.
  struct death {
    /// The sessions it was registered for or named by a delete of.
    std::vector<std::string> sessions;
    /// Those whose tombstone (of the generation given) no longer fences
    /// anything: their last retired live handle was this one.
    std::vector<std::pair<std::string, uint64_t>> unfenced;
  };

  /// `handle` died: it is never written from again.
  death handle_down(const caf::actor_addr& handle);

  /// Forgets `session` when it holds nothing that needs remembering (see
  /// the bound above). The caller calls it when it has no work for the
  /// session either.
  void forget_if_idle(const std::string& session);

  /// The last write of `session` failed; `source` is what to retry from.
  void mark_failed(const std::string& session,
                   const session_handle_actor& source);

  /// A write of `session` succeeded.
  void mark_written(const std::string& session);

  bool failed(const std::string& session) const;

  /// The handle to retry a failed session from: the failed write's source
  /// while it may write, else the session's current handle while alive;
  /// none when it is not failed or neither is left. `alive` says whether a
  /// handle is alive as far as the caller knows.
  template <class Alive>
  std::optional<session_handle_actor>
  retry_source(const std::string& session, Alive alive) const {
    auto i = failed_.find(session);
    if (i == failed_.end())
      return std::nullopt;
    if (auto source = source_for(session, i->second, alive(i->second)))
      return *source;
    return current_alive(session);
  }

  /// Every failed session.
  std::vector<std::string> failed_sessions() const;

  std::size_t failed_count() const {
    return failed_.size();
  }

  /// What the registry holds, for the bound's tests.
  struct footprint {
    std::size_t sessions = 0;
    std::size_t handles = 0;
    std::size_t remembered_retired = 0;
  };

  footprint size() const;

private:
  struct member {
    session_handle_actor handle;
    uint64_t generation;
  };

  struct lineage {
    /// The live registered handles, each once.
    std::vector<member> members;
    /// Live unregistered handles a delete named.
    std::vector<caf::actor_addr> named;
    uint64_t next = 0;
    uint64_t deleted_below = 0;
    /// The lowest generation storage accepts, as far as known.
    uint64_t floor = 0;
    bool stored_known = false;
    /// Who claimed `floor` in storage (replicas only; empty: nobody).
    std::string claimed_by;

    uint64_t current() const;
    const member* find(const caf::actor_addr& addr) const;
    /// The newest live member not of a deleted incarnation.
    const member* newest_alive() const;
    /// Whether a live handle was registered before the last delete or named
    /// by it: then storage keeps the delete's tombstone to fence it. It only
    /// turns false (a retired handle cannot register again), when the last
    /// one dies.
    bool retired_alive() const;
  };

  const lineage* find(const std::string& session) const;
  /// The current (newest registered) handle of `session`, if it is alive
  /// and not retired.
  std::optional<session_handle_actor>
  current_alive(const std::string& session) const;
  bool remembered_as_retired(const std::string& session,
                             const caf::actor_addr& addr) const;
  void remember_retired(const std::string& session,
                        const caf::actor_addr& addr);

  std::size_t remembered_retired_;
  std::unordered_map<std::string, lineage> lineages_;
  std::unordered_map<std::string, session_handle_actor> failed_;
  /// The sessions each live handle is registered for or named by a delete.
  std::unordered_map<caf::actor_addr, std::vector<std::string>> sessions_of_;
  /// The last dead retired handles, oldest first, with their sessions.
  std::deque<std::pair<caf::actor_addr, std::string>> retired_order_;
  std::set<std::pair<caf::actor_addr, std::string>> retired_;
};

} // namespace coalesce
