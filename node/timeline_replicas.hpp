#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/backfill_scheduler.hpp>
#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/actors/timeline_actors.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/messages/timeline_replica_interface.hpp>
#include <coalesce/node/coordinator_settings.hpp>
#include <coalesce/node/peer_watch.hpp>
#include <coalesce/node/serving_lists.hpp>

/// A clustered node's rooms (`coalesce.replicas` above 1): every room's
/// timeline is kept on its replicas (its first `replicas` nodes by
/// rendezvous order). The node runs a coordinator in front of its stored
/// timeline: to the gateway and to the node's own scheduler it is the
/// timeline (`timeline_requests`: page, commit, append), and it makes each
/// call of a room a call to the room's replicas
/// (coalesce/messages/timeline_replica_interface.hpp says what each keeps),
/// this node's timeline one of them.
///
/// - A coordinator's first call of a room prepares it: it promises the
///   replicas a ballot above any they promised (the node's index in the
///   low bits), adopts the newest log a majority shows and the furthest
///   position among them, and writes both back to a majority under its
///   ballot. Then every event of its log is on a majority.
/// - `append` numbers the events after the log's head and is answered once
///   a majority took them, in that place: one order on every replica. A
///   replica that lacks earlier events, or holds others from a coordinator
///   no majority followed, answers `out_of_sync` and is sent the log from
///   where the two part.
/// - `page` reads this node's replica (a majority holds what it holds);
///   `commit` checks the cursor against it and moves the position on a
///   majority: so a backfill is answered only once its position is on a
///   majority, and the next coordinator continues from there.
/// - A coordinator that a majority promised a newer ballot (its clients
///   failed over) gets no majority for anything: errc::no_quorum, and its
///   next call prepares again.
/// - While this node's replica catches up (`catching_up`), it counts as
///   failed in every round: a replica that lost what it held must not make
///   an older log look like the newest, nor promise a ballot it promised
///   before.
/// - Calls of one room run one at a time, in arrival order; a replica that
///   does not answer within `timeout` counts as failed. Calls still open
///   when the coordinator stops are answered errc::stopped_before_answer.
namespace coalesce {

/// The coordinator: the timeline's view, plus what the peer watch tells it.
using timeline_coordinator_actor = timeline_requests::extend<
  caf::reacts_to<peer_up_atom, uint64_t, node_actor>,
  caf::reacts_to<peer_down_atom, uint64_t>>;

timeline_coordinator_actor
spawn_timeline_coordinator(caf::actor_system& sys,
                           timeline_replica_store_actor local,
                           coordinator_settings settings);

/// What the gateway hands the replica requests of other nodes'
/// coordinators: to the local timeline. While `catching_up` is set,
/// `prepare` and `append` are refused errc::catching_up (images, which
/// peers repairing themselves read, are served).
room_replica_endpoint_actor
spawn_room_replica_endpoint(caf::actor_system& sys,
                            timeline_replica_store_actor local,
                            std::shared_ptr<const std::atomic<bool>>
                              catching_up = nullptr);

/// A clustered node's rooms: the coordinator, the endpoint its peers reach
/// the local replica through, and a scheduler of its own paging through
/// the coordinator (the node's backfills).
struct replicated_rooms {
  timeline_coordinator_actor coordinator;
  room_replica_endpoint_actor endpoint;
  backfill_scheduler_actor scheduler;

  /// What the peer watch reports to.
  std::vector<caf::actor> subscribers() const;

  /// Answers the scheduler's callers (runs cancelled), then stops every
  /// actor; before the local timeline stops.
  void stop(caf::actor_system& sys, caf::timespan limit);
};

replicated_rooms
start_replicated_rooms(caf::actor_system& sys,
                       timeline_replica_store_actor local,
                       const coordinator_settings& settings,
                       backfill_scheduler_options scheduler);

} // namespace coalesce
