#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/service_descriptor.hpp>

/// The room timeline's interfaces (the contract of the stored timeline:
/// coalesce/storage/timeline.hpp; its actor: coalesce/actors/timeline_actors.hpp),
/// and its descriptor.
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

/// The timeline as a node shows it (what each member is for:
/// coalesce/messages/service_descriptor.hpp).
struct timeline_descriptor {
  using requests = timeline_requests;

  struct handle_member {
    timeline_requests timeline;
  };
  static constexpr auto handle = &handle_member::timeline;

  /// None: every append is answered once written; nothing is held.
  static constexpr no_stats stats{};

  static constexpr auto message_types = type_names(
    message_type<timeline_event>{"coalesce.timeline_event"},
    message_type<page_cursor>{"coalesce.page_cursor"},
    message_type<timeline_page>{"coalesce.timeline_page"});

  /// A room's timeline lives on the room's replicas; the one a request
  /// reaches coordinates it (coalesce/node/timeline_replicas.hpp). A
  /// pager's requests (a scheduler on another node paging this room,
  /// coalesce.scheduler-remote-pager) go there like its appends.
  static one_key routed_by(page_atom, const std::string& room, uint32_t) {
    return {key_kind::room, room};
  }

  static one_key routed_by(commit_atom, const std::string& room,
                           const page_cursor&) {
    return {key_kind::room, room};
  }

  static one_key routed_by(append_atom, const std::string& room,
                           const std::vector<timeline_event>&) {
    return {key_kind::room, room};
  }

  using issues = type_list<>;

  using served_while_shutting_down = type_list<>;
};

} // namespace coalesce
