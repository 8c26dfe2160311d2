#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/messages/atoms.hpp>
#include <coalesce/messages/backfill.hpp>
#include <coalesce/messages/replica_protocol.hpp>

/// What a room's coordinator and the room's other replicas say to each
/// other (coalesce/node/timeline_replicas.hpp): between nodes, never a
/// client's. A node serves them through its gateway.
///
/// A room's events form a log, numbered from 0, that every replica holds a
/// prefix of. Each replica keeps, per room, beside its events, head and
/// back-pagination position:
/// - the highest coordinator ballot it promised (`prepare`): a coordinator
///   with a lower one is refused, so two coordinators of a room never both
///   get a majority;
/// - the log's segments: the ballot of the coordinator that appended each
///   run of events, and where that run starts. One coordinator appends each
///   sequence number once under its ballot, so two logs whose segments
///   agree up to a point hold the same events up to it (`shared_prefix`),
///   and a log whose last ballot is higher, or as high and longer, is the
///   newer one (`newer_log`). A coordinator adopts the newest log a
///   majority shows before it appends, so every append a majority took
///   stays in every later log, in its place.
namespace coalesce {

/// A room's replica requests (beside `replica_atom`), so that they never
/// look like a session's.
using room_atom = caf::atom_constant<caf::atom("room")>;

/// A run of a room's log appended under one coordinator's ballot.
struct timeline_segment {
  uint64_t ballot = 0;
  /// The sequence number of its first event.
  uint64_t start = 0;

  friend bool operator==(const timeline_segment& x,
                         const timeline_segment& y) {
    return x.ballot == y.ballot && x.start == y.start;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, timeline_segment& x) {
  return f(caf::meta::type_name("timeline_segment"), x.ballot, x.start);
}

/// What a replica holds of a room.
struct room_version {
  /// The highest coordinator ballot promised.
  uint64_t promised = 0;
  /// The log's segments, oldest first; empty for a room without events.
  std::vector<timeline_segment> segments;
  /// The sequence number the next event gets: the log's length.
  uint64_t head = 0;
  /// The back-pagination position, once a page was committed: older
  /// events come next (coalesce/storage/timeline.hpp).
  bool positioned = false;
  uint64_t position = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_version& x) {
  return f(caf::meta::type_name("room_version"), x.promised, x.segments,
           x.head, x.positioned, x.position);
}

inline uint64_t last_ballot(const std::vector<timeline_segment>& segments) {
  return segments.empty() ? 0 : segments.back().ballot;
}

/// Whether log (`xs`, `x_head`) is newer than (`ys`, `y_head`): a higher
/// last ballot, or the same and longer.
inline bool newer_log(const std::vector<timeline_segment>& xs, uint64_t x_head,
                      const std::vector<timeline_segment>& ys,
                      uint64_t y_head) {
  return std::make_tuple(last_ballot(xs), x_head)
         > std::make_tuple(last_ballot(ys), y_head);
}

/// How many events, from sequence number 0, two logs certainly share: up
/// to the end of the last segment both have in common, and no further
/// than either log reaches.
inline uint64_t shared_prefix(const std::vector<timeline_segment>& xs,
                              uint64_t x_head,
                              const std::vector<timeline_segment>& ys,
                              uint64_t y_head) {
  std::size_t common = 0;
  while (common < xs.size() && common < ys.size()
         && xs[common] == ys[common])
    ++common;
  if (common == 0)
    return 0;
  auto end_of = [](const std::vector<timeline_segment>& segments,
                   std::size_t i, uint64_t head) {
    return i + 1 < segments.size() ? segments[i + 1].start : head;
  };
  return std::min({end_of(xs, common - 1, x_head),
                   end_of(ys, common - 1, y_head), x_head, y_head});
}

/// A part of a room's log as a coordinator sends it to a replica (and a
/// replica to a peer that repairs): the events from sequence number
/// `from` on, the segments of the whole log they end, and the position.
/// A replica takes it when its own log holds the first `from` events of
/// that log; it then holds the whole log (events past a point where the two
/// differ are replaced), and moves its position to `position` when that
/// lies further back.
struct room_suffix {
  std::string room;
  std::vector<timeline_segment> segments;
  uint64_t from = 0;
  std::vector<timeline_event> events;
  bool positioned = false;
  uint64_t position = 0;

  /// The head of the log it ends.
  uint64_t head() const {
    return from + events.size();
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_suffix& x) {
  return f(caf::meta::type_name("room_suffix"), x.room, x.segments, x.from,
           x.events, x.positioned, x.position);
}

/// A replica's answer: how it took the request and what it holds after.
struct room_answer {
  uint8_t outcome = 0;
  room_version version;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_answer& x) {
  return f(caf::meta::type_name("room_answer"), x.outcome, x.version);
}

inline replica_outcome outcome_of(const room_answer& x) {
  return static_cast<replica_outcome>(x.outcome);
}

/// One room a replica holds, and what of it (anti-entropy).
struct room_listing {
  std::string room;
  room_version version;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, room_listing& x) {
  return f(caf::meta::type_name("room_listing"), x.room, x.version);
}

/// The requests a room's coordinator sends each of the room's replicas
/// (its own node's among them).
using timeline_replica_requests = caf::typed_actor<
  /// Promise `ballot` (refused `preempted` below the one promised); answers
  /// what the replica holds.
  caf::replies_to<replica_atom, room_atom, prepare_atom, std::string,
                  uint64_t>::with<room_answer>,
  /// Take a part of the log under `ballot` (see `room_suffix`): `applied`,
  /// `out_of_sync` when this replica lacks events before `from` or holds
  /// others there, `preempted` below the promised ballot.
  caf::replies_to<replica_atom, room_atom, append_atom, uint64_t,
                  room_suffix>::with<room_answer>,
  /// The replica's log from `from` on (from its head when `from` lies
  /// beyond), with its segments and position.
  caf::replies_to<replica_atom, room_atom, image_atom, std::string,
                  uint64_t>::with<room_suffix>>;

/// What a node serves its peers' coordinators of rooms through its
/// gateway: each request with the lists its coordinator counted.
using room_replica_endpoint_actor = stamped_t<timeline_replica_requests>;

/// What a replica that catches up or repairs asks each peer
/// (coalesce/node/timeline_sync.hpp).
using room_listing_requests = caf::typed_actor<
  /// Every room this node holds that node `asker` is a replica of, with
  /// its version. The first number is the fingerprint of the cluster list
  /// the asker serves under (`cluster_map::fingerprint`), the second its
  /// index there: a node under another list refuses (`errc::not_replica`,
  /// with its own list).
  caf::replies_to<replica_atom, room_atom, digest_atom, uint64_t,
                  uint64_t>::with<std::vector<room_listing>>,
  /// The same under the asker's list, whole (a handoff: the asker serves
  /// under another list than this node's).
  caf::replies_to<replica_atom, room_atom, handoff_atom,
                  handoff_asker>::with<std::vector<room_listing>>>;

} // namespace coalesce
