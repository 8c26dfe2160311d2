#pragma once

#include <coalesce/node/node.hpp>

/// coalesce-node under a service manager: readiness and stop reported
/// through sd_notify (systemd's `Type=notify`; see config/coalesce-node.service).
/// Without NOTIFY_SOCKET in the environment they do nothing.
namespace coalesce {

/// `READY=1` with a STATUS naming the address once the node listens,
/// `STOPPING=1` when its shutdown begins.
node_events service_manager_events();

} // namespace coalesce
