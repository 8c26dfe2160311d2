#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/timespan.hpp>

#include "coalesce/client/connect.hpp"
#include "coalesce/messages/backfill_interface.hpp"
#include "coalesce/messages/node_interface.hpp"
#include "coalesce/messages/secret_buffer_interface.hpp"
#include "coalesce/messages/timeline_interface.hpp"
#include "coalesce/node/settings.hpp"

/// coalesce's public entry points for an application: start the services
/// inside the application's own `actor_system`, or connect to a running
/// node, and get the same typed handles either way, so that application
/// code is identical for in-process and remote use.
///
/// Every request to a handle is a CAF request with a timeout of the
/// caller's choosing; the contracts are those of the services
/// (coalesce/actors/secret_buffer.hpp, coalesce/actors/backfill_scheduler.hpp,
/// coalesce/storage/timeline.hpp).
namespace coalesce {

/// The typed handles of the services. In process they point at the
/// services themselves, remotely at the node's gateway, which forwards.
struct service_handles {
  secret_buffer_requests secrets;
  timeline_requests timeline;
  backfill_requests backfill;
};

/// Services running in this process over one database.
class local_services {
public:
  struct parts;

  explicit local_services(std::unique_ptr<parts> state);
  local_services(const local_services&) = delete;
  local_services& operator=(const local_services&) = delete;

  /// Stops the services if `stop` was not called, with a 30 s deadline.
  /// Destroy it (or call `stop`) before the actor system it runs in.
  ~local_services();

  service_handles handles() const;

  /// The actors themselves, for what only the process may send (a seal, a
  /// stop condition as code, the services' own stats) and for the node's
  /// gateway.
  const secret_buffer_actor& secret_buffer() const;
  const scheduler_actor& scheduler() const;
  const timeline_actor& timeline() const;

  /// Stops the services in order within `deadline`: cancels every
  /// back-pagination run (its callers are answered), seals and flushes the
  /// secret buffer, stops the actors and closes the database. Returns
  /// whether everything queued was written; what was not is logged. Later
  /// calls return the first call's answer.
  bool stop(caf::timespan deadline);

private:
  std::unique_ptr<parts> parts_;
};

/// Opens the database and spawns the services (the I/O actors detached)
/// from validated settings. Errors: `settings.validate()`'s sentence as
/// `errc::invalid_request`, or the database's failure to open.
caf::expected<std::unique_ptr<local_services>>
start_services(caf::actor_system& sys, const service_settings& settings);

/// `connect_node` (coalesce/client/connect.hpp), as the handles an
/// application uses.
caf::expected<service_handles> connect_services(caf::actor_system& sys,
                                                const std::string& host,
                                                uint16_t port,
                                                caf::timespan timeout);

} // namespace coalesce
