#include <coalesce/actors/remote_pager.hpp>

#include <functional>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>

namespace coalesce {

namespace {

/// The requests that arrived while the connection was being opened, in
/// arrival order: each is either sent on to the connected gateway or
/// answered with the connection's error. Whatever is still here when the
/// actor stops is answered `errc::stopped_before_answer` (CAF 0.17 destroys the
/// state in `on_exit`, while the actor can still answer).
class waiting_requests {
public:
  waiting_requests() = default;
  waiting_requests(const waiting_requests&) = delete;
  waiting_requests& operator=(const waiting_requests&) = delete;

  ~waiting_requests() {
    fail_all(make_error(errc::stopped_before_answer, "the remote pager stopped"));
  }

  template <class Promise, class... Ts>
  void add(Promise promise, Ts... xs) {
    waiting_.push_back(
      {[promise, xs...](const pager_actor& remote) mutable {
         promise.delegate(remote, std::move(xs)...);
       },
       [promise](const caf::error& err) mutable { promise.deliver(err); }});
  }

  void forward_all(const pager_actor& remote) {
    for (auto& request : std::exchange(waiting_, {}))
      request.forward(remote);
  }

  void fail_all(const caf::error& err) {
    for (auto& request : std::exchange(waiting_, {}))
      request.fail(err);
  }

private:
  struct request {
    std::function<void(const pager_actor&)> forward;
    std::function<void(const caf::error&)> fail;
  };

  std::vector<request> waiting_;
};

} // namespace

struct remote_pager_state {
  static inline const char* name = "remote_pager";

  explicit remote_pager_state(caf::local_actor*) {
    // nop
  }

  remote_pager_state(const remote_pager_state&) = delete;
  remote_pager_state& operator=(const remote_pager_state&) = delete;

  node_connector_actor connector;
  node_address where;
  /// "host:port", as every log line and error names the remote node.
  std::string address;
  caf::timespan connect_timeout{};
  /// The remote gateway's pager messages; null until connected and again
  /// once it is down.
  pager_actor remote;
  bool connecting = false;
  waiting_requests waiting;
};

namespace {

using remote_pager_pointer = pager_actor::stateful_pointer<remote_pager_state>;

caf::error unreachable(std::string sentence) {
  return make_error(errc::node_unreachable, std::move(sentence));
}

void on_connected(remote_pager_pointer self, caf::strong_actor_ptr& handle,
                  const std::set<std::string>& interface) {
  auto& st = self->state;
  st.connecting = false;
  if (handle == nullptr) {
    st.waiting.fail_all(unreachable("the remote pager: no node is published at "
                                    + st.address));
    return;
  }
  if (!self->system().assignable<pager_actor>(interface)) {
    st.waiting.fail_all(unreachable("the remote pager: the peer at "
                                    + st.address
                                    + " does not serve timeline pages (not "
                                      "a coalesce node of this version)"));
    return;
  }
  st.remote = caf::actor_cast<pager_actor>(std::move(handle));
  self->monitor(st.remote);
  spdlog::info("remote pager: connected to the node at {}", st.address);
  st.waiting.forward_all(st.remote);
}

void on_connect_failed(remote_pager_pointer self, const caf::error& err) {
  auto& st = self->state;
  st.connecting = false;
  auto sentence
    = err == caf::sec::request_timeout
        ? "the remote pager's node at " + st.address
            + " did not answer the connection within "
            + caf::deep_to_string(st.connect_timeout)
        : "the remote pager cannot connect to the node at " + st.address + ": "
            + self->system().render(err);
  spdlog::warn("remote pager: {}", sentence);
  st.waiting.fail_all(unreachable(std::move(sentence)));
}

/// Opens the connection unless it is being opened; the waiting requests
/// go on once it is answered.
void connect(remote_pager_pointer self) {
  auto& st = self->state;
  if (st.connecting)
    return;
  st.connecting = true;
  self
    ->request(st.connector, st.connect_timeout, caf::connect_atom::value,
              st.where.host, st.where.port)
    .then(
      [self](caf::node_id&, caf::strong_actor_ptr& handle,
             std::set<std::string>& interface) {
        on_connected(self, handle, interface);
      },
      [self](caf::error& err) { on_connect_failed(self, err); });
}

/// Sends a pager request on to the remote gateway, which answers the
/// requester directly; before the connection is open it waits for it.
template <class Output, class... Ts>
caf::result<Output> forward(remote_pager_pointer self, Ts... xs) {
  auto& st = self->state;
  if (st.remote)
    return self->delegate(st.remote, std::move(xs)...);
  auto promise = self->make_response_promise<Output>();
  st.waiting.add(promise, std::move(xs)...);
  connect(self);
  return promise;
}

void on_down(remote_pager_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (msg.source != st.remote)
    return; // an earlier connection's gateway
  spdlog::warn("remote pager: the node at {} is down ({}); the next request "
               "connects again",
               st.address, self->system().render(msg.reason));
  st.remote = nullptr;
}

pager_actor::behavior_type
remote_pager(remote_pager_pointer self, node_connector_actor connector,
             node_address where, caf::timespan connect_timeout) {
  auto& st = self->state;
  st.connector = std::move(connector);
  st.address = where.host + ":" + std::to_string(where.port);
  st.where = std::move(where);
  st.connect_timeout = connect_timeout;
  self->set_down_handler(
    [self](caf::down_msg& msg) { on_down(self, msg); });
  return {
    [self](page_atom atom, std::string& room, uint32_t max_events) {
      return forward<timeline_page>(self, atom, std::move(room), max_events);
    },
    [self](commit_atom atom, std::string& room, page_cursor& cursor) {
      return forward<ok_atom>(self, atom, std::move(room), std::move(cursor));
    },
  };
}

} // namespace

pager_actor spawn_remote_pager(caf::actor_system& sys,
                               node_connector_actor connector,
                               node_address where,
                               caf::timespan connect_timeout) {
  return sys.spawn(remote_pager, std::move(connector), std::move(where),
                   connect_timeout);
}

} // namespace coalesce
