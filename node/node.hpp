#pragma once

#include <csignal>
#include <functional>
#include <string>

#include <caf/fwd.hpp>

#include <coalesce/node/settings.hpp>

/// A coalesce node: the services of this process published through one
/// gateway on the node's port.
///
/// Start-up: opens the database and starts every service
/// (coalesce/node/services.hpp), publishes the gateway and logs
/// `listening on HOST:PORT`, then a stats line every `stats_interval`.
/// Shutdown, on SIGINT or SIGTERM: the gateway refuses remote requests,
/// then the services stop in order within `shutdown_timeout` (every
/// back-pagination caller answered, every queued secret written), and the
/// database closes. SIGHUP is logged and ignored: the node logs to stdout
/// (no file to reopen) and reads its config file only at start.
namespace coalesce {

/// What the process running a node learns of its life, for a service
/// manager (coalesce-node: app/service_manager.hpp). Either may be empty.
struct node_events {
  /// Once the node listens (and serves its metrics): "HOST:PORT".
  std::function<void(const std::string& address)> ready;
  /// When a shutdown begins.
  std::function<void()> stopping;
};

/// Runs a node until SIGINT or SIGTERM of `signals` arrives, logging and
/// ignoring a SIGHUP among them, and telling a clustered node's
/// coordinators of a SIGCONT among them (it was paused:
/// coalesce/node/pause_watch.hpp). Block them in every thread first,
/// before the actor system starts its threads. A node whose BASP broker
/// stopped (CAF stops it for good on a message it cannot decode) serves
/// nobody: it stops as on SIGTERM. Returns the process's exit status:
/// success when everything queued was written and the broker lived.
int run_node(caf::actor_system& sys, const node_settings& settings,
             const sigset_t& signals, const node_events& events = {});

} // namespace coalesce
