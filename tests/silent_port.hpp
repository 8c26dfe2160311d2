#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include <caf/test/unit_test.hpp>

namespace coalesce::test {

/// A TCP port that accepts connections (the kernel completes them) and
/// never says a word: a peer whose process hangs. A dial to it ends only by
/// its timeout, so the test can move the clock while the ask is open.
class silent_port {
public:
  silent_port() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    CAF_REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CAF_REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address),
                       sizeof(address))
                == 0);
    CAF_REQUIRE(::listen(fd_, 16) == 0);
    socklen_t size = sizeof(address);
    CAF_REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address),
                              &size)
                == 0);
    port_ = ntohs(address.sin_port);
  }

  ~silent_port() {
    ::close(fd_);
  }

  uint16_t port() const {
    return port_;
  }

  /// Whether a connection waits to be accepted within `limit`: the dial
  /// reached the socket, so its ask was made.
  bool dialed_within(std::chrono::milliseconds limit) const {
    pollfd waiting{fd_, POLLIN, 0};
    return ::poll(&waiting, 1, static_cast<int>(limit.count())) == 1;
  }

private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

} // namespace coalesce::test
