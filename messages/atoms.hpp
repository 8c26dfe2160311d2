#pragma once

#include <caf/atom.hpp>

/// The verbs of the first services and of the node. A new service defines
/// the verbs only it uses in its own `NAME_interface.hpp` (an atom is a
/// type: nothing else has to list it). Atoms are part of the wire format
/// between nodes: rename one and older nodes stop understanding newer ones.
/// CAF 0.17 limits atom text to 10 characters. Verbs CAF already defines
/// (`caf::flush_atom`, `caf::ok_atom`, ...) are reused rather than redefined.
namespace coalesce {

using caf::flush_atom;
using caf::ok_atom;

using queue_atom = caf::atom_constant<caf::atom("queue")>;
using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
using seal_atom = caf::atom_constant<caf::atom("seal")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using write_atom = caf::atom_constant<caf::atom("write")>;
using sync_atom = caf::atom_constant<caf::atom("sync")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;
/// A coordinator's request to one replica of a key, served there alone.
using replica_atom = caf::atom_constant<caf::atom("replica")>;
/// Replicas comparing what they hold (anti-entropy).
using digest_atom = caf::atom_constant<caf::atom("digest")>;
using page_atom = caf::atom_constant<caf::atom("page")>;
using append_atom = caf::atom_constant<caf::atom("append")>;
using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>;
using await_atom = caf::atom_constant<caf::atom("await")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using detach_atom = caf::atom_constant<caf::atom("detach")>;
using commit_atom = caf::atom_constant<caf::atom("commit")>;

} // namespace coalesce
