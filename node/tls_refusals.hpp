#pragma once

#include <atomic>
#include <cstdint>
#include <string>

/// What a node does with a refused TLS handshake (a client without a
/// certificate or with a foreign CA's, an old protocol, no common cipher;
/// client/tls_transport.hpp reports each): one warning with the peer's
/// address and OpenSSL's reason, at most `refusal_lines_per_minute` lines a
/// minute (the next line then says how many were left out, so a flood
/// cannot fill a disk), and a count the metrics publish
/// (`coalesce_tls_handshakes_refused_total`). Process-wide, like the
/// transport's report.
namespace coalesce {

constexpr int refusal_lines_per_minute = 10;

/// Counts and logs one refusal (`accepting`: the peer connected to this
/// node). Called on the multiplexer thread; never blocks on I/O but
/// spdlog's.
void log_tls_refusal(const std::string& peer, bool accepting,
                     const std::string& reason);

/// The refusals counted since the process started.
std::atomic<uint64_t>& tls_handshakes_refused();

} // namespace coalesce
