#pragma once

#include <caf/atom.hpp>

/// Every verb coalesce's actors understand. Atoms are part of the wire format
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
using page_atom = caf::atom_constant<caf::atom("page")>;
using append_atom = caf::atom_constant<caf::atom("append")>;
using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>;
using await_atom = caf::atom_constant<caf::atom("await")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using detach_atom = caf::atom_constant<caf::atom("detach")>;
using commit_atom = caf::atom_constant<caf::atom("commit")>;
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using register_atom = caf::atom_constant<caf::atom("register")>;
using persist_atom = caf::atom_constant<caf::atom("persist")>;
using delete_atom = caf::atom_constant<caf::atom("delete")>;
using is_deleted_atom = caf::atom_constant<caf::atom("isdeleted")>;
using unflushed_atom = caf::atom_constant<caf::atom("unflushed")>;
using load_atom = caf::atom_constant<caf::atom("load")>;
using wait_idle_atom = caf::atom_constant<caf::atom("waitidle")>;
using flush_all_atom = caf::atom_constant<caf::atom("flushall")>;
using exclusive_atom = caf::atom_constant<caf::atom("exclusive")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using resolve_atom = caf::atom_constant<caf::atom("resolve")>;
using written_atom = caf::atom_constant<caf::atom("written")>;
using retire_atom = caf::atom_constant<caf::atom("retire")>;
using barrier_atom = caf::atom_constant<caf::atom("barrier")>;
using erase_atom = caf::atom_constant<caf::atom("erase")>;

} // namespace coalesce
