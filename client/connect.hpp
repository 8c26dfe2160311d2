#pragma once

#include <cstdint>
#include <string>

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

} // namespace coalesce
