#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include <caf/error.hpp>

#include <coalesce/messages/errc.hpp>

/// The requests a service answers later (response promises), by id, and the
/// guarantee that every one of them is answered: CAF 0.17 has no
/// broken-promise error, so a requester whose promise is dropped unanswered
/// waits until its own timeout, forever with `infinite`.
///
/// Keep the list in the actor's state. CAF 0.17 destroys a stateful actor's
/// state in `on_exit` (stateful_actor.hpp), while the actor still exists, so
/// delivering from this destructor reaches the requesters like any answer
/// (the buffer's and the scheduler's suites stop them with parked requests
/// and check the answer).
///
/// Invariants: an id is parked at most once at a time; `take` hands the
/// promise out and forgets it, so each parked request is answered once, by
/// whoever took it or, when the list goes away, with `errc::stopped_before_answer`
/// saying which service stopped.
namespace coalesce {

template <class Promise>
class parked_requests {
public:
  using id_type = uint64_t;

  /// `service` names the service in the stopped answer ("the secret
  /// buffer").
  explicit parked_requests(std::string service) : service_(std::move(service)) {
    // nop
  }

  parked_requests(const parked_requests&) = delete;
  parked_requests& operator=(const parked_requests&) = delete;

  ~parked_requests() {
    // Most lists are empty when their actor stops (a retired writer's): no
    // error to build for them.
    if (!parked_.empty())
      answer_all(make_error(errc::stopped_before_answer, service_ + " stopped"));
  }

  /// Parks `promise` under a fresh id (never 0) and returns the id.
  id_type park(Promise promise) {
    while (parked_.count(next_id_) > 0)
      ++next_id_;
    auto id = next_id_++;
    parked_.emplace(id, std::move(promise));
    return id;
  }

  /// Parks `promise` under an id the caller chose (a ticket). An earlier
  /// promise under that id is returned rather than dropped unanswered.
  std::optional<Promise> park(id_type id, Promise promise) {
    auto earlier = take(id);
    parked_.emplace(id, std::move(promise));
    return earlier;
  }

  /// Hands out and forgets the promise parked under `id`, if any: whoever
  /// takes it answers it.
  std::optional<Promise> take(id_type id) {
    auto i = parked_.find(id);
    if (i == parked_.end())
      return std::nullopt;
    auto promise = std::move(i->second);
    parked_.erase(i);
    return promise;
  }

  /// Answers and forgets the promise parked under `id`; false if none was.
  template <class... Ts>
  bool answer(id_type id, Ts&&... xs) {
    auto promise = take(id);
    if (!promise)
      return false;
    promise->deliver(std::forward<Ts>(xs)...);
    return true;
  }

  /// Answers every parked request with `err` (a stop, a shutdown).
  void answer_all(const caf::error& err) {
    auto all = std::exchange(parked_, {});
    for (auto& [id, promise] : all)
      promise.deliver(err);
  }

  bool contains(id_type id) const {
    return parked_.count(id) > 0;
  }

  std::size_t size() const {
    return parked_.size();
  }

  bool empty() const {
    return parked_.empty();
  }

private:
  std::string service_;
  std::unordered_map<id_type, Promise> parked_;
  id_type next_id_ = 1;
};

} // namespace coalesce
