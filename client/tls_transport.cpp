#include <coalesce/client/tls_transport.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <caf/all.hpp>
#include <caf/detail/socket_guard.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/stream.hpp>
#include <caf/io/scribe.hpp>
#include <caf/openssl/manager.hpp>

namespace coalesce {

namespace {

using caf::io::network::default_multiplexer;
using caf::io::network::native_socket;
using caf::io::network::operation;
using caf::io::network::rw_state;

/// OpenSSL writes with write(2), which raises SIGPIPE on a link the peer
/// closed; the signal is held back for the call and a pending one dropped.
class sigpipe_held {
public:
  sigpipe_held() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &saved_);
  }

  ~sigpipe_held() {
    timespec now{};
    sigtimedwait(&sigpipe_, nullptr, &now);
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }

  sigpipe_held(const sigpipe_held&) = delete;
  sigpipe_held& operator=(const sigpipe_held&) = delete;

private:
  sigset_t sigpipe_;
  sigset_t saved_;
};

tls_options& options() {
  static tls_options current;
  return current;
}

/// "host:port" of the socket's peer.
std::string peer_of(native_socket fd) {
  sockaddr_storage address{};
  socklen_t size = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0)
    return "an unknown peer";
  char host[NI_MAXHOST] = {};
  char port[NI_MAXSERV] = {};
  if (getnameinfo(reinterpret_cast<sockaddr*>(&address), size, host,
                  sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV)
      != 0)
    return "an unknown peer";
  return address.ss_family == AF_INET6
           ? "[" + std::string{host} + "]:" + port
           : std::string{host} + ":" + port;
}

/// OpenSSL's reason for the first error in this thread's queue, or
/// `fallback`.
std::string first_error(const char* fallback) {
  auto code = ERR_peek_error();
  if (code == 0)
    return fallback;
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? reason : fallback;
}

int passphrase_of(char* buf, int size, int, void* passphrase) {
  auto& text = *static_cast<std::string*>(passphrase);
  auto n = std::min(static_cast<size_t>(size - 1), text.size());
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
  return static_cast<int>(n);
}

/// One connection's TLS state. Every call starts with an empty error queue:
/// SSL_get_error reads the thread's queue, and the multiplexer thread
/// serves every connection.
class tls_session {
public:
  enum class progress { done, want_read, want_write, failed };

  /// A session on the connected socket `fd` with the system's mutual-TLS
  /// settings, or null when they do not make a context (the node and the
  /// clients check the files before the system starts).
  static std::unique_ptr<tls_session>
  make(const caf::actor_system_config& cfg, native_socket fd, bool accepting) {
    std::unique_ptr<tls_session> session{new tls_session};
    if (!session->init(cfg, fd, accepting))
      return nullptr;
    return session;
  }

  ~tls_session() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
  }

  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  bool handshaking() const {
    return handshaking_;
  }

  progress handshake() {
    sigpipe_held held;
    ERR_clear_error();
    auto result = SSL_do_handshake(ssl_);
    if (result == 1) {
      handshaking_ = false;
      return progress::done;
    }
    switch (SSL_get_error(ssl_, result)) {
      case SSL_ERROR_WANT_READ:
        return progress::want_read;
      case SSL_ERROR_WANT_WRITE:
        return progress::want_write;
      default:
        report_refusal();
        ERR_clear_error();
        return progress::failed;
    }
  }

  rw_state read(size_t& n, void* buf, size_t len) {
    sigpipe_held held;
    ERR_clear_error();
    auto result = SSL_read(ssl_, buf, static_cast<int>(len));
    return outcome(result, n);
  }

  rw_state write(size_t& n, const void* buf, size_t len) {
    if (len == 0) {
      n = 0;
      return rw_state::indeterminate;
    }
    sigpipe_held held;
    ERR_clear_error();
    auto result = SSL_write(ssl_, buf, static_cast<int>(len));
    return outcome(result, n);
  }

  size_t pending() const {
    return static_cast<size_t>(SSL_pending(ssl_));
  }

private:
  tls_session() = default;

  bool init(const caf::actor_system_config& cfg, native_socket fd,
            bool accepting) {
    ERR_clear_error();
    ctx_ = SSL_CTX_new(TLS_method());
    if (ctx_ == nullptr || cfg.openssl_certificate.empty()
        || cfg.openssl_key.empty())
      return false;
    if (SSL_CTX_use_certificate_chain_file(ctx_,
                                           cfg.openssl_certificate.c_str())
        != 1)
      return false;
    if (!cfg.openssl_passphrase.empty()) {
      passphrase_ = cfg.openssl_passphrase;
      SSL_CTX_set_default_passwd_cb(ctx_, passphrase_of);
      SSL_CTX_set_default_passwd_cb_userdata(ctx_, &passphrase_);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx_, cfg.openssl_key.c_str(),
                                    SSL_FILETYPE_PEM)
        != 1)
      return false;
    auto cafile = cfg.openssl_cafile.empty() ? nullptr
                                             : cfg.openssl_cafile.c_str();
    auto capath = cfg.openssl_capath.empty() ? nullptr
                                             : cfg.openssl_capath.c_str();
    if ((cafile != nullptr || capath != nullptr)
        && SSL_CTX_load_verify_locations(ctx_, cafile, capath) != 1)
      return false;
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       nullptr);
    const auto& chosen = options();
    if (SSL_CTX_set_cipher_list(ctx_, chosen.ciphers.c_str()) != 1)
      return false;
    if (SSL_CTX_set_min_proto_version(ctx_, chosen.min_version == "1.3"
                                              ? TLS1_3_VERSION
                                              : TLS1_2_VERSION)
        != 1)
      return false;
    SSL_CTX_set_options(ctx_, SSL_OP_CIPHER_SERVER_PREFERENCE);
    fd_ = fd;
    accepting_ = accepting;
    ssl_ = SSL_new(ctx_);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd) != 1)
      return false;
    if (accepting)
      SSL_set_accept_state(ssl_);
    else
      SSL_set_connect_state(ssl_);
    ERR_clear_error();
    return true;
  }

  rw_state outcome(int result, size_t& n) {
    if (result > 0) {
      n = static_cast<size_t>(result);
      return rw_state::success;
    }
    n = 0;
    switch (SSL_get_error(ssl_, result)) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE:
        // Nothing moved; the multiplexer calls again when the socket is
        // ready.
        return rw_state::success;
      default:
        ERR_clear_error();
        return rw_state::failure;
    }
  }

  /// Tells `options().on_refused` why the handshake failed: OpenSSL's
  /// reason, or the peer's going away before it finished (not when it
  /// went away without sending a byte).
  void report_refusal() {
    const auto& report = options().on_refused;
    if (!report)
      return;
    // A peer that connected and sent nothing (a load balancer's TCP health
    // check, a port probe) began no handshake to refuse.
    if (accepting_ && BIO_number_read(SSL_get_rbio(ssl_)) == 0)
      return;
    report(peer_of(fd_), accepting_,
           first_error("the peer closed the connection during the "
                       "handshake"));
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  native_socket fd_ = caf::io::network::invalid_native_socket;
  bool accepting_ = false;
  bool handshaking_ = true;
  std::string passphrase_;
};

/// The I/O calls of CAF's stream, through the session once its handshake is
/// done; a failed handshake fails every later call, which closes the link.
struct tls_policy {
  tls_session* session;
  bool failed = false;

  rw_state read_some(size_t& n, native_socket, void* buf, size_t len) {
    if (failed) {
      n = 0;
      return rw_state::failure;
    }
    return session->read(n, buf, len);
  }

  rw_state write_some(size_t& n, native_socket, const void* buf, size_t len) {
    if (failed) {
      n = 0;
      return rw_state::failure;
    }
    return session->write(n, buf, len);
  }

  bool must_read_more(native_socket, size_t threshold) {
    return !failed && session->pending() >= threshold;
  }
};

/// CAF's stream with the handshake driven by both read and write events. A
/// handshake that waits for the peer stops polling for writes (CAF 0.17.6
/// keeps polling an ever-writable socket, a busy loop); what is to be
/// written stays in the buffer and is polled for again once the handshake
/// moves.
class tls_stream final : public caf::io::network::stream {
public:
  tls_stream(default_multiplexer& mpx, native_socket fd,
             std::unique_ptr<tls_session> session,
             caf::io::network::stream_manager* owner)
    : stream(mpx, fd),
      session_(std::move(session)),
      policy_{session_.get()},
      owner_(owner) {
  }

  void handle_event(operation op) override {
    if (op != operation::propagate_error && session_->handshaking()
        && !policy_.failed && !advance_handshake(op))
      return;
    handle_event_impl(op, policy_);
  }

  void removed_from_loop(operation op) override {
    if (op == operation::read && writes_parked_) {
      // Nothing is left to move the handshake on: the writes are dropped.
      writes_parked_ = false;
      state_.writing = false;
    }
    stream::removed_from_loop(op);
  }

  void graceful_shutdown() override {
    if (writes_parked_) {
      // The peer never finished its handshake: nothing will be written.
      writes_parked_ = false;
      state_.writing = false;
    }
    stream::graceful_shutdown();
  }

private:
  /// True when the handshake is done (or failed, which the I/O call then
  /// reports), so the event goes on to CAF's reads and writes.
  bool advance_handshake(operation op) {
    switch (session_->handshake()) {
      case tls_session::progress::done:
        if (writes_parked_)
          poll_writes_again();
        return true;
      case tls_session::progress::want_read:
        if (op == operation::write && !writes_parked_) {
          // Still writing as far as CAF's stream knows, so a flush adds to
          // the buffer instead of polling again.
          writes_parked_ = true;
          backend().del(operation::write, fd(), this);
        }
        return false;
      case tls_session::progress::want_write:
        if (writes_parked_ || !state_.writing)
          poll_writes_again();
        return false;
      case tls_session::progress::failed:
        policy_.failed = true;
        return true;
    }
    return false;
  }

  /// Polls for writes again with the buffer as it was: the multiplexer
  /// forgot the writer when it stopped polling.
  void poll_writes_again() {
    writes_parked_ = false;
    state_.writing = false;
    force_empty_write(manager_ptr{owner_});
  }

  std::unique_ptr<tls_session> session_;
  tls_policy policy_;
  caf::io::network::stream_manager* owner_;
  bool writes_parked_ = false;
};

/// CAF's scribe (a connection's end in a broker) over a tls_stream.
class tls_scribe final : public caf::io::scribe {
public:
  tls_scribe(default_multiplexer& mpx, native_socket fd,
             std::unique_ptr<tls_session> session)
    : scribe(caf::io::network::conn_hdl_from_socket(fd)),
      stream_(mpx, fd, std::move(session), this) {
  }

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_)
      launch();
  }

  void ack_writes(bool enable) override {
    stream_.ack_writes(enable);
  }

  std::vector<char>& wr_buf() override {
    return stream_.wr_buf();
  }

  std::vector<char>& rd_buf() override {
    return stream_.rd_buf();
  }

  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }

  void flush() override {
    stream_.flush(this);
  }

  std::string addr() const override {
    auto addr = caf::io::network::remote_addr_of_fd(stream_.fd());
    return addr ? *addr : std::string{};
  }

  uint16_t port() const override {
    auto port = caf::io::network::remote_port_of_fd(stream_.fd());
    return port ? *port : 0;
  }

  void add_to_loop() override {
    stream_.activate(this);
  }

  void remove_from_loop() override {
    stream_.passivate();
  }

private:
  void launch() {
    launched_ = true;
    stream_.start(this);
    // A write event starts the client's handshake.
    stream_.force_empty_write(this);
  }

  bool launched_ = false;
  tls_stream stream_;
};

/// How long one connect may wait for the peer's answer. This actor makes
/// every connection of the process, one at a time, and CAF's own connect
/// waits for the kernel's SYN retries (over two minutes against a host
/// that drops its packets: a partition): each connect queued behind such
/// a one, and the process's exit, would wait as long.
constexpr auto longest_connect = std::chrono::seconds{2};

/// A TCP connection to `host:port` (each address it resolves to in turn),
/// connected without blocking and given up after `limit`; CAF's error for a
/// failed connect otherwise.
caf::expected<native_socket> connect_within(const std::string& host,
                                            uint16_t port,
                                            std::chrono::milliseconds limit) {
  auto failed = [&](const std::string& why) {
    return caf::make_error(caf::sec::cannot_connect_to_node, "ip_connect failed",
                           host, port, why);
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  auto service = std::to_string(port);
  if (auto rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
      rc != 0 || found == nullptr)
    return failed(rc != 0 ? gai_strerror(rc) : "no address");
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses{found,
                                                               freeaddrinfo};
  std::string why = "no address";
  for (auto* a = found; a != nullptr; a = a->ai_next) {
    auto fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                       a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    caf::detail::socket_guard guard{fd};
    caf::io::network::nonblocking(fd, true);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        why = std::strerror(errno);
        continue;
      }
      pollfd wanted{fd, POLLOUT, 0};
      int ready;
      do {
        ready = ::poll(&wanted, 1, static_cast<int>(limit.count()));
      } while (ready < 0 && errno == EINTR);
      if (ready <= 0) {
        why = ready == 0 ? "no answer within "
                             + std::to_string(limit.count()) + " ms"
                         : std::strerror(errno);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        why = std::strerror(err);
        continue;
      }
    }
    return guard.release();
  }
  return failed(why);
}

/// CAF's doorman (a listening port in a broker), handing each accepted
/// socket to a tls_scribe.
class tls_doorman final : public caf::io::network::doorman_impl {
public:
  using doorman_impl::doorman_impl;

  bool new_connection() override {
    if (detached())
      return false;
    auto& mpx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    caf::detail::socket_guard guard{fd};
    caf::io::network::nonblocking(fd, true);
    auto session = tls_session::make(mpx.system().config(), fd, true);
    if (session == nullptr)
      return false;
    auto scribe = caf::make_counted<tls_scribe>(mpx, fd, std::move(session));
    guard.release();
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }
};

class tls_middleman_actor final : public caf::io::middleman_actor_impl {
public:
  tls_middleman_actor(caf::actor_config& cfg, caf::actor broker,
                      caf::actor module_actor)
    : middleman_actor_impl(cfg, std::move(broker)),
      module_actor_(std::move(module_actor)) {
  }

  const char* name() const override {
    return "coalesce.tls_middleman";
  }

  behavior_type make_behavior() override {
    // The system kills the openssl module's actor first when it stops; the
    // link takes this one along (a detached actor left running would keep
    // the system from stopping).
    link_to(module_actor_);
    return middleman_actor_impl::make_behavior();
  }

  void on_exit() override {
    // The system waits for this actor's thread, which ends only once the
    // last reference is gone: the registry's among them.
    system().registry().erase(registry_key());
    module_actor_ = nullptr;
    middleman_actor_impl::on_exit();
    // This thread made TLS contexts, so OpenSSL keeps an error state for it,
    // freed when the thread ends; CAF counts a detached actor's thread done
    // before it ends, and the process may already be past OpenSSL's cleanup
    // by then (LeakSanitizer saw it in 2 of 500 CLI runs).
    OPENSSL_thread_stop();
  }

  static caf::atom_value registry_key() {
    return caf::atom("coalTLS");
  }

protected:
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host,
                                             uint16_t port) override {
    auto fd = connect_within(host, port, longest_connect);
    if (!fd)
      return std::move(fd.error());
    caf::detail::socket_guard guard{*fd};
    caf::io::network::nonblocking(*fd, true);
    auto session = tls_session::make(system().config(), *fd, false);
    if (session == nullptr)
      return caf::make_error(caf::sec::cannot_connect_to_node,
                             "cannot make a TLS context from the openssl.* "
                             "settings");
    guard.release();
    return caf::make_counted<tls_scribe>(mpx(), *fd, std::move(session));
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr,
                                           bool reuse) override {
    auto fd = caf::io::network::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd)
      return std::move(fd.error());
    return caf::make_counted<tls_doorman>(mpx(), *fd);
  }

private:
  default_multiplexer& mpx() {
    return static_cast<default_multiplexer&>(system().middleman().backend());
  }

  caf::actor module_actor_;
};

} // namespace

void set_tls_options(tls_options x) {
  options() = std::move(x);
}

caf::io::middleman_actor tls_middleman(caf::actor_system& sys) {
  static std::mutex spawning;
  std::lock_guard<std::mutex> guard{spawning};
  auto key = tls_middleman_actor::registry_key();
  if (auto existing = sys.registry().get(key))
    return caf::actor_cast<caf::io::middleman_actor>(existing);
  auto broker = sys.middleman().named_broker<caf::io::basp_broker>(
    caf::atom("BASP"));
  auto module_actor = caf::actor_cast<caf::actor>(
    sys.openssl_manager().actor_handle());
  auto actor = sys.spawn<tls_middleman_actor, caf::detached + caf::hidden>(
    std::move(broker), std::move(module_actor));
  sys.registry().put(key, caf::actor_cast<caf::strong_actor_ptr>(actor));
  return actor;
}

} // namespace coalesce
