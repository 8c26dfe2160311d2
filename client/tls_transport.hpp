#pragma once

#include <functional>
#include <string>

#include <caf/fwd.hpp>
#include <caf/io/middleman_actor.hpp>

/// Mutual TLS connections for CAF's middleman, replacing the transport of
/// libcaf_openssl 0.17.6, which has two defects a cluster cannot live with:
/// - a handshake whose peer does not answer (a stopped process, an idle
///   socket) makes the multiplexer spin on a write it cannot make: a core at
///   100 % for as long as the peer is silent, and a process that never
///   finishes stopping (CAF waits for the write to drain);
/// - it never clears OpenSSL's per-thread error queue, so an error left by
///   one connection (a peer's EOF) makes another connection's next
///   would-block read look fatal, and CAF closes a healthy link; with two
///   clients connecting at once about one connection in ten was cut.
/// The fix upstream (CAF 0.18, issues 1060 and 1276) parks the writes of a
/// handshake that waits to read; this transport does the same, clears the
/// error queue before every TLS call, and is otherwise CAF's: one TLS
/// context per connection from the system's `openssl.*` settings, peer
/// certificates required on both sides.
namespace coalesce {

/// What every connection of this transport uses beyond the `openssl.*`
/// files. Process-wide, like OpenSSL's own state: set it before the first
/// connection (the node does, from its config).
struct tls_options {
  /// The lowest protocol a handshake may use: "1.2" or "1.3".
  std::string min_version = "1.2";
  /// OpenSSL's cipher list for TLS 1.2 (TLS 1.3's suites all have forward
  /// secrecy): by default only suites with it (CAF's own `HIGH:!aNULL:!MD5`
  /// offered static RSA key exchange too). The accepting side's order wins.
  std::string ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20";
  /// Told of each handshake that failed: the peer's address, whether the
  /// peer connected to this process, and OpenSSL's reason. Called on the
  /// multiplexer thread: it must not block. Empty: no one is told.
  std::function<void(const std::string& peer, bool accepting,
                     const std::string& reason)>
    on_refused;
};

void set_tls_options(tls_options options);

/// The actor that opens connections and ports with mutual TLS: answers the
/// `caf::io::middleman_actor` interface like the openssl module's actor.
/// Spawned on first use, once per actor system (which must have loaded
/// both `caf::io::middleman` and `caf::openssl::manager`); it stops with the
/// openssl module's actor when the system stops.
caf::io::middleman_actor tls_middleman(caf::actor_system& sys);

} // namespace coalesce
