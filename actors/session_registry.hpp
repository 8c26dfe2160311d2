#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/expected.hpp>

#include <coalesce/messages/session_persister_interface.hpp>

/// The persister's decisions about handles, without actors: generations per
/// session, tombstones of deleted handles, the generation below which
/// handles belong to a deleted incarnation, and the sessions whose last
/// write failed with the handle to retry from. The persister feeds it the
/// handles' deaths (CAF monitoring); a handle is known by its actor address.
///
/// Generations and store-side fencing: every write carries the generation
/// of the handle it is written from (`generation_of`), and storage refuses
/// one lower than it holds. The registry learns what storage holds
/// (`learn_stored`) before it registers, resolves or deletes anything of a
/// session, so that after a restart registers continue from the stored
/// generation plus one and an unregistered handle writes with the stored
/// generation. A delete moves the session's floor above every generation
/// in use and answers it: the tombstone storage keeps.
///
/// Invariants: generations of one session grow by one per `register`;
/// `deleted_below` never decreases; a handle registered before a delete,
/// or tombstoned by one, stays deleted forever (its address is never
/// reused). Dead handles stay known (marked dead) so that a late persist
/// through one is still judged by its generation.
namespace coalesce {

class session_registry {
public:
  /// Makes `handle` the current handle of `session`; returns its generation.
  uint64_t register_handle(const std::string& session,
                           const session_handle_actor& handle);

  /// Where a persist through `handle` is written from: the handle itself
  /// while it is current (or was never registered) and alive; the newest
  /// live handle of the session when `handle` was superseded or is a dead
  /// unregistered one. Refused with errc::session_deleted,
  /// errc::handle_superseded (no newer live handle) or errc::handle_gone
  /// (no live handle at all). `alive` says whether `handle` is alive.
  caf::expected<session_handle_actor>
  source_for(const std::string& session, const session_handle_actor& handle,
             bool alive) const;

  bool is_deleted(const std::string& session,
                  const session_handle_actor& handle) const;

  /// Whether storage's generation of `session` was learned.
  bool knows_stored(const std::string& session) const;

  /// Storage holds `stored` for `session` (none: nothing stored).
  void learn_stored(const std::string& session, std::optional<uint64_t> stored);

  /// The generation a write from `handle` carries: its own when registered,
  /// else the session's current one (the newest registered, or the floor
  /// of what storage holds or a delete set, whichever is higher).
  uint64_t generation_of(const std::string& session,
                         const session_handle_actor& handle) const;

  /// Retires every handle registered for `session` so far and `live` (when
  /// given), and forgets the session's failed write. Answers the
  /// generation of the delete, above every generation in use: registers
  /// afterwards start there.
  uint64_t delete_session(const std::string& session,
                          const std::optional<session_handle_actor>& live);

  /// `handle` died: it is never written from again.
  void handle_down(const caf::actor_addr& handle);

  /// The last write of `session` failed; `source` is what to retry from.
  void mark_failed(const std::string& session,
                   const session_handle_actor& source);

  /// A write of `session` succeeded.
  void mark_written(const std::string& session);

  bool failed(const std::string& session) const;

  /// The handle to retry a failed session from; none when it is not
  /// failed or no live handle of it is left.
  std::optional<session_handle_actor>
  retry_source(const std::string& session) const;

  /// Every failed session.
  std::vector<std::string> failed_sessions() const;

  std::size_t failed_count() const {
    return failed_.size();
  }

private:
  struct member {
    session_handle_actor handle;
    uint64_t generation;
    bool alive;
  };

  struct lineage {
    std::vector<member> members;
    uint64_t next = 0;
    uint64_t deleted_below = 0;
    /// The lowest generation storage accepts, as far as known.
    uint64_t floor = 0;
    bool stored_known = false;

    uint64_t current() const;

    const member* find(const caf::actor_addr& addr) const;
    /// The newest live member not of a deleted incarnation.
    const member* newest_alive() const;
  };

  bool tombstoned(const std::string& session,
                  const caf::actor_addr& addr) const;

  std::unordered_map<std::string, lineage> lineages_;
  std::unordered_map<std::string, std::vector<caf::actor_addr>> tombstones_;
  std::unordered_map<std::string, session_handle_actor> failed_;
  std::unordered_set<caf::actor_addr> dead_;
  /// The sessions each live registered handle was registered for.
  std::unordered_map<caf::actor_addr, std::vector<std::string>> sessions_of_;
};

} // namespace coalesce
