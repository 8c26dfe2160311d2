#pragma once

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>
#include <caf/expected.hpp>
#include <caf/timespan.hpp>

#include "coalesce/messages/node_interface.hpp"

/// Connecting to a coalesce node: what the CLI and applications share. The
/// actor system must have loaded the middleman (`cfg.load<caf::io::middleman>()`);
/// a system that also loaded `caf::openssl::manager` connects through TLS.
namespace coalesce {

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
