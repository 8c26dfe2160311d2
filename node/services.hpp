#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/timespan.hpp>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/node_interface.hpp>
#include <coalesce/node/settings.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// coalesce's public entry points for an application: start the services
/// inside the application's own `actor_system`, or connect to a running
/// node, and get the same typed handles either way, so that application
/// code is identical for in-process and remote use.
///
/// Every request to a handle is a CAF request with a timeout of the
/// caller's choosing; the contracts are those of the services, each named
/// by its interface header in coalesce/messages/ (the secret buffer's in
/// coalesce/actors/secret_buffer.hpp, the persister's in
/// coalesce/actors/session_persister.hpp, ...).
namespace coalesce {

// service_handles: coalesce/messages/node_interface.hpp.

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

  /// The handles of every service (also what the node's gateway fronts).
  service_handles handles() const;

  /// One service as hosted (a type of `hosted_services`,
  /// coalesce/node/service_list.hpp), for what only the process may send
  /// (a seal, a stop condition as code, a service's own stats):
  /// `local.service<secret_buffer_service>().actors().buffer`.
  template <class Service>
  const Service& service() const {
    return std::get<Service>(hosted());
  }

  /// The database they share (the node's metrics read its state).
  std::shared_ptr<storage::database> database() const;

  /// Whether the process that used the database before stopped with
  /// everything written (`stop` marks it; a crash, a failed write or a new
  /// database leave no mark).
  bool stopped_cleanly_before() const;

  /// Stops the services within `deadline`: each winds down in the reverse
  /// of the start order (the persister writes every queued session and
  /// retries the failed ones, the scheduler cancels every run and its
  /// callers are answered, the secret buffer seals and flushes), then every
  /// actor stops and the database closes, marked clean when everything
  /// queued was written. Returns whether it was; what was not is logged.
  /// Later calls return the first call's answer.
  bool stop(caf::timespan deadline);

private:
  const hosted_services& hosted() const;

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
