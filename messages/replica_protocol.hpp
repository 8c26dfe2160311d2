#pragma once

#include <cstdint>

#include <caf/atom.hpp>

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
