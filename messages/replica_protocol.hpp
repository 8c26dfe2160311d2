#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

/// What the replicas of every replicated service share (sessions:
/// session_replica_interface.hpp, rooms: timeline_replica_interface.hpp):
/// the verbs a key's coordinator sends them, and how a replica took one.
namespace coalesce {

/// A coordinator's first request of a key: promise it this ballot.
using prepare_atom = caf::atom_constant<caf::atom("prepare")>;
/// Replace what the replica holds of a key (a replica behind, a repair).
using install_atom = caf::atom_constant<caf::atom("install")>;
/// What a replica holds of a key, whole, to copy to another.
using image_atom = caf::atom_constant<caf::atom("image")>;
/// What a replica holds of a key, changing nothing.
using version_atom = caf::atom_constant<caf::atom("version")>;
/// Forget a key this node no longer replicates, when it holds it as it did
/// when its replicas were compared (the node's own repair to the actor
/// that serializes the key's writes; never a peer's request).
using drop_atom = caf::atom_constant<caf::atom("drop")>;

/// A repair's request for what a peer holds of the keys the asker is a
/// replica of under the asker's own cluster list (a handoff: the asker
/// joined, or gained keys when another node left).
using handoff_atom = caf::atom_constant<caf::atom("handoff")>;

/// Who asks for a handoff, under which list. A peer that serves under
/// another list (its nodes or their order differ) cannot name the asker
/// by an index of its own, nor tell which keys the asker holds: it takes
/// both from here.
struct handoff_asker {
  /// The asker's list: its version and its nodes ("host:port") in order.
  uint64_t version = 0;
  std::vector<std::string> nodes;
  /// The asker's index in `nodes`.
  uint64_t asker = 0;
  /// How many replicas a key has there (`coalesce.replicas`).
  uint64_t replicas = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, handoff_asker& x) {
  return f(caf::meta::type_name("handoff_asker"), x.version, x.nodes,
           x.asker, x.replicas);
}

/// How a replica took a request.
enum class replica_outcome : uint8_t {
  /// Done (or nothing to do: an install of content not newer).
  applied = 0,
  /// A write that does not build on what this replica holds: send it what
  /// it lacks.
  out_of_sync = 1,
  /// The sender's ballot is below the one promised: another coordinator
  /// took the key over.
  preempted = 2,
  /// The generation is below the floor, or claimed by another handle
  /// (sessions).
  stale = 3,
};

} // namespace coalesce
