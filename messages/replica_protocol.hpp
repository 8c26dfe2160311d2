#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

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

/// The cluster lists a coordinator counted majorities under when it sent
/// a replica request, each as its `cluster_map::fingerprint` (its own list
/// first). A replica's gateway refuses the request when it lacks a list
/// the replica serves under or sees a peer of its list serve under
/// (`errc::lists_not_counted`, naming them): a coordinator that has not
/// learned of a list in use (paused, or a node being removed, which no
/// handoff request tells) then gets no majority from the replicas that
/// have, and learns the list from the refusal.
struct list_stamp {
  std::vector<uint64_t> lists;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, list_stamp& x) {
  return f(caf::meta::type_name("list_stamp"), x.lists);
}

template <class Signature>
struct stamped_signature;

template <class... Inputs, class... Outputs>
struct stamped_signature<caf::typed_mpi<caf::detail::type_list<Inputs...>,
                                        caf::output_tuple<Outputs...>>> {
  using type =
    typename caf::replies_to<Inputs..., list_stamp>::template with<Outputs...>;
};

template <class Interface>
struct stamped_interface;

template <class... Signatures>
struct stamped_interface<caf::typed_actor<Signatures...>> {
  using type
    = caf::typed_actor<typename stamped_signature<Signatures>::type...>;
};

/// `Interface` as a node's gateway serves it to its peers' coordinators:
/// every request with a `list_stamp` last. The replica behind the gateway
/// serves `Interface` itself, and a coordinator asks its own node's
/// replica without one.
template <class Interface>
using stamped_t = typename stamped_interface<Interface>::type;

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
