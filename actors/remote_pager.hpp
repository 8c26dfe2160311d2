#pragma once

#include <cstdint>
#include <set>
#include <string>

#include <caf/actor_control_block.hpp>
#include <caf/fwd.hpp>
#include <caf/node_id.hpp>
#include <caf/replies_to.hpp>
#include <caf/timespan.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include <coalesce/actors/node_address.hpp>
#include <coalesce/messages/timeline_interface.hpp>

/// The remote pager: a pager (coalesce/messages/timeline_interface.hpp) in
/// the scheduler's process that pages the timeline of another node, so that
/// the scheduler runs on one node and the history lives on another
/// (`coalesce.scheduler-remote-pager`).
///
/// - It connects to the other node's gateway on the first request, through
///   a connector (the middleman actor, or the TLS one: the node layer
///   passes it), within `connect_timeout`; the requests that arrive while
///   it connects wait for the connection. It never blocks its thread.
/// - Connected, it delegates each `page` and `commit` to the gateway, which
///   forwards them to its timeline: the answer goes straight to the
///   scheduler, under the scheduler's own `pager_timeout`. A remote node
///   that dies holding a request never answers it (CAF drops what was in
///   flight), so that timeout is what fails the run `failed`; nothing here
///   adds a second one.
/// - It monitors the gateway: once it is down (the node died, the
///   connection broke), the next request connects again, so a restarted
///   node serves the next run.
/// - A failed connection answers the requests waiting for it with
///   `errc::node_unreachable`, one sentence naming the address; a peer that
///   does not serve pages is refused the same way.
/// - Every request is answered: stopping with requests waiting for the
///   connection answers them `errc::stopped_before_answer`.
/// - It holds no history: the commit exchange per delivered page is the
///   scheduler's, and the position lives in the remote timeline.
namespace coalesce {

/// What opens connections to other nodes: the `connect` request of CAF's
/// middleman actor (caf/io/middleman_actor.hpp), which
/// `caf::io::middleman_actor` and the openssl manager's actor answer.
using node_connector_actor = caf::typed_actor<
  caf::replies_to<caf::connect_atom, std::string, uint16_t>::with<
    caf::node_id, caf::strong_actor_ptr, std::set<std::string>>>;

/// A pager paging the timeline of the node at `where` through its gateway.
pager_actor spawn_remote_pager(caf::actor_system& sys,
                               node_connector_actor connector,
                               node_address where,
                               caf::timespan connect_timeout);

} // namespace coalesce
