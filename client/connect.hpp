#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/expected.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/timespan.hpp>

#include <coalesce/messages/node_interface.hpp>

/// Connecting to a coalesce node: what the CLI and applications share. The
/// actor system must have loaded the middleman (`cfg.load<caf::io::middleman>()`);
/// a system that also loaded `caf::openssl::manager` connects through TLS.
///
/// Enabling mutual TLS in an application, before the actor system starts:
/// check the files with `check_tls_files` (coalesce/client/tls_files.hpp;
/// CAF aborts the process on files it cannot use), put them into the
/// config with `set_tls_files` (CAF's `openssl_*` fields), then
/// `cfg.load<caf::io::middleman>()` and `cfg.load<caf::openssl::manager>()`,
/// in that order. Every connection of that system is then TLS, with this
/// certificate, trusting the nodes' CA file. A refused handshake fails with
/// `errc::node_unreachable` and a sentence naming the likely causes.
namespace coalesce {

/// The actor that opens connections (answers `connect_atom, host, port`):
/// the TLS one when the system loaded the openssl module, so that one
/// process never mixes plain and TLS links.
caf::io::middleman_actor connector(caf::actor_system& sys);

/// Connects to the gateway at host:port within `timeout`. `remote_actor`
/// alone can hang on a peer that accepts and stays silent, so this asks the
/// middleman actor with a timed request instead. Fails with
/// `errc::node_unreachable` and one sentence naming the address: nothing
/// answered in time, the connection failed, nothing is published there, or
/// the peer is not a coalesce node of this version.
caf::expected<node_actor> connect_node(caf::actor_system& sys,
                                       const std::string& host,
                                       uint16_t port, caf::timespan timeout);

/// The sentence an error of `connect_node` carries.
std::string unreachable_sentence(caf::actor_system& sys, const caf::error& err);

/// What `connect_node` makes of the connector's answer for `where`
/// ("host:port"): the node, or `errc::node_unreachable` with its sentence.
caf::expected<node_actor>
node_answered(caf::actor_system& sys, const std::string& where,
              caf::strong_actor_ptr handle,
              const std::set<std::string>& interface);

/// What `connect_node` makes of the connector's error for `where`.
caf::error connect_failed(caf::actor_system& sys, const std::string& where,
                          const caf::error& err, caf::timespan timeout);

/// `connect_node` from an event-based actor without blocking it (the
/// connector makes the connection): `done(caf::expected<node_actor>)` runs
/// in `self`'s context with what `connect_node` would answer.
template <class Self, class Done>
void request_node(Self* self, const std::string& host, uint16_t port,
                  caf::timespan timeout, Done done) {
  auto where = host + ":" + std::to_string(port);
  self
    ->request(connector(self->system()), timeout, caf::connect_atom::value,
              host, port)
    .then(
      [self, where, done](const caf::node_id&, caf::strong_actor_ptr& handle,
                          const std::set<std::string>& interface) mutable {
        done(node_answered(self->system(), where, std::move(handle),
                           interface));
      },
      [self, where, timeout, done](caf::error& err) mutable {
        done(caf::expected<node_actor>{
          connect_failed(self->system(), where, err, timeout)});
      });
}

/// Runs `then(gateway)` with the gateway of the peer at `known[index]`
/// (the peers' gateways in `self`'s state, by their index in the cluster
/// list), connecting to `host:port` first and keeping the gateway there
/// when none is known; `failed(sentence)` when the peer cannot be reached.
template <class Self, class Then, class Failed>
void with_peer_gateway(Self* self, std::vector<node_actor>& known,
                       std::size_t index, const std::string& host,
                       uint16_t port, caf::timespan timeout, Then then,
                       Failed failed) {
  if (known[index])
    return then(known[index]);
  request_node(self, host, port, timeout,
               [self, &known, index, then,
                failed](caf::expected<node_actor> gateway) mutable {
                 if (!gateway)
                   return failed(
                     "cannot be connected: "
                     + unreachable_sentence(self->system(), gateway.error()));
                 known[index] = *gateway;
                 then(*gateway);
               });
}

} // namespace coalesce
