#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/backfill.hpp>

/// The room timeline's interfaces (the contract of the stored timeline:
/// coalesce/storage/timeline.hpp; its actor: coalesce/actors/timeline_actors.hpp).
namespace coalesce {

/// What the scheduler asks a pager for. "Load the next older batch of room
/// R, at most N events": answers the batch, newest first, or an error, and
/// moves nothing. "Commit this page of room R": moves the room's position to
/// the page's `cursor.next`, unless the position moved away from
/// `cursor.read_at` meanwhile (a stale commit changes nothing and is
/// answered ok).
using pager_actor = caf::typed_actor<
  caf::replies_to<page_atom, std::string, uint32_t>::with<timeline_page>,
  caf::replies_to<commit_atom, std::string, page_cursor>::with<ok_atom>>;

/// The requests a node's gateway forwards to the timeline: the pager's (a
/// scheduler on another node pages this one's timeline through them, see
/// coalesce/actors/remote_pager.hpp), and appends of events (oldest first),
/// answering how many were stored.
using timeline_requests = pager_actor::extend<caf::replies_to<
  append_atom, std::string, std::vector<timeline_event>>::with<uint64_t>>;

/// The stored timeline: a pager that also appends.
using timeline_actor = timeline_requests;

} // namespace coalesce
