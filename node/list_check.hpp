#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include <coalesce/client/cluster_map.hpp>

/// The check a node makes before it stores a changed cluster list: every
/// other node of the new list must answer (operating.md, "Changing the
/// list"). Internal to node/.
namespace coalesce {

/// The nodes of `list` other than `self_index` that answered no ping
/// (`stats`) before `limit` ran out, in list order, each with its last
/// reason. Every node is asked at once, each on a thread of its own (a
/// hung node holds up no other's ask), and a node that fails is asked
/// again every `retry`, so that one restarting at the moment delays the
/// check rather than failing it. No ask outlasts `limit`: each waits at
/// most `peer_timeout` and never past it, so the check ends within `limit`
/// however many nodes hang. Blocks the caller: a node calls it before it
/// serves.
std::vector<std::string> unanswering_nodes(caf::actor_system& sys,
                                           const cluster_map& list,
                                           std::size_t self_index,
                                           caf::timespan peer_timeout,
                                           caf::timespan retry,
                                           caf::timespan limit);

} // namespace coalesce
