#pragma once

#include <unordered_set>

#include <caf/actor_addr.hpp>

/// Monitors each caller of a service once. CAF 0.17 sends one down message
/// per `monitor` call (two calls, two messages), so a service that monitors
/// every request's sender would see a caller die once per request it made.
/// This set remembers who is monitored; the down handler calls `forget`, so
/// a caller seen again later (an actor address is never reused) would be
/// monitored anew.
///
/// Invariant: an address is in the set exactly while one monitor for it is
/// outstanding (from `watch` until `forget`). An invalid address (a request
/// from outside any actor) is never monitored.
namespace coalesce {

class caller_monitor {
public:
  /// Whether `caller` needs a monitor now; records it as monitored.
  bool add(const caf::actor_addr& caller) {
    return caller && watched_.insert(caller).second;
  }

  /// Monitors `caller` through `self` unless it already is.
  template <class Self>
  void watch(Self* self, const caf::actor_addr& caller) {
    if (add(caller))
      self->monitor(caller);
  }

  /// A down message arrived for `caller`: returns whether it was watched.
  bool forget(const caf::actor_addr& caller) {
    return watched_.erase(caller) > 0;
  }

  bool watching(const caf::actor_addr& caller) const {
    return watched_.count(caller) > 0;
  }

  std::size_t size() const {
    return watched_.size();
  }

private:
  std::unordered_set<caf::actor_addr> watched_;
};

} // namespace coalesce
