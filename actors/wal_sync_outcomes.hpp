#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include <caf/error.hpp>

#include <coalesce/messages/errc.hpp>

/// What an I/O actor's WAL syncs decided, for the requests that reach its
/// syncer after the sync that covered their group.
///
/// The I/O actor numbers the groups it writes without fsync and hands each
/// write of a group to the syncer in a message of its own. A sync that
/// starts once the first of them arrived covers the whole group (the group
/// was written before any was sent), so the rest of them, and any later
/// request for that group, need no sync of their own: they get that sync's
/// outcome. The first sync that covered a group decides for it: after a
/// failed fsync the kernel may have dropped what it had not written, and a
/// later sync that succeeds says nothing about it.
///
/// Requests arrive in group order (they all come from the one I/O actor),
/// so only the last few syncs are kept; a request for a group whose
/// deciding sync was forgotten gets a failure, and what it answers is
/// retried.
namespace coalesce {

class wal_sync_outcomes {
public:
  /// A sync that started once groups 1 to `covered` were written ended with
  /// `failure` (none: they are durable).
  void record(uint64_t covered, caf::error failure) {
    if (!syncs_.empty() && covered <= syncs_.back().first)
      return; // no group that an earlier sync had not covered
    syncs_.emplace_back(covered, std::move(failure));
    if (syncs_.size() > kept) {
      forgotten_through_ = syncs_.front().first;
      syncs_.pop_front();
    }
  }

  /// The outcome of the first sync that covered `group` (none: durable);
  /// nothing while no sync has covered it.
  std::optional<caf::error> of(uint64_t group) const {
    if (group <= forgotten_through_)
      return make_error(errc::storage_failed,
                        "the outcome of the WAL sync of group "
                          + std::to_string(group) + " is forgotten");
    for (const auto& [covered, failure] : syncs_)
      if (group <= covered)
        return failure;
    return std::nullopt;
  }

private:
  static constexpr std::size_t kept = 8;

  /// The syncs that covered new groups, oldest first: the newest group each
  /// covered, and its failure.
  std::deque<std::pair<uint64_t, caf::error>> syncs_;
  /// The newest group covered by a sync no longer in `syncs_`.
  uint64_t forgotten_through_ = 0;
};

} // namespace coalesce
