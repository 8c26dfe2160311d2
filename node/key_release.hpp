#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/exit_reason.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_response_promise.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/serving_lists.hpp>

/// Dropping what a node still holds of keys it no longer replicates, once
/// their replicas hold them: the end of a handoff, on the old replica.
///
/// A key stays on a node that lost it to a joining node (rendezvous
/// hashing moves keys only to the node that joins) until its replicas
/// under the node's own list hold it. A pass takes each such key in turn,
/// asks each of its replicas what it holds, and drops the key here once a
/// majority of them holds it at least as new (a later majority read meets
/// one of them, so this copy adds nothing); otherwise it keeps the key,
/// which the replicas pull in their next repair round, and tries again in
/// the next pass. The drop itself compares what is held with what was
/// compared, in the actor that serializes the key's writes, so a write
/// that arrived meanwhile keeps the key.
///
/// A node drops nothing while any coordinator may still count it as one of
/// the key's replicas: only once it caught up and every peer of its list
/// answered that it serves that same list (`may_release`). Not an actor: a
/// repair actor keeps one in its state and calls it from its handlers.
namespace coalesce {

/// Run a release pass now (tests; the repair runs one every interval):
/// answered with the keys it dropped and the keys it still holds for
/// their replicas.
using release_keys_atom = caf::atom_constant<caf::atom("handback")>;

/// Which of `peer_counters::keys_to_hand_off` a pass sets.
enum class released_kind : std::size_t { secrets = 0, sessions = 1, rooms = 2 };

/// Whether a node may drop keys it no longer replicates: it is not
/// catching up, and its view of the lists in use (null: never) is settled
/// with no list but its own.
bool may_release(bool catching_up, serving_lists* lists);

class key_release {
public:
  /// Keys a pass asks about at once: one at a time, each a round trip to
  /// its replicas, a pass over many keys took a round trip per key.
  static constexpr std::size_t window = 16;

  /// Whether replica `replica` (an index in the node's list) holds key
  /// `key` (an index into the pass's keys) at least as new as this node.
  using check_fn = std::function<void(
    std::size_t replica, std::size_t key,
    std::function<void(caf::expected<bool>)> done)>;
  /// Drops key `key` here unless it changed since the pass read it:
  /// whether it was dropped.
  using drop_fn = std::function<void(
    std::size_t key, std::function<void(caf::expected<bool>)> done)>;
  /// The pass's result: keys dropped, keys still held.
  using report_fn = std::function<void(uint64_t dropped, uint64_t kept)>;

  /// `kind` names the data in the log ("sessions"), `unit` what is counted.
  key_release(std::string kind, std::string unit, released_kind slot,
              std::shared_ptr<peer_counters> counters,
              std::function<std::string(const caf::error&)> render);

  bool running() const {
    return running_;
  }

  /// Starts a pass over keys this node holds and does not replicate, each
  /// given by its replicas under this node's list; `allowed` is asked
  /// before each drop (the pass ends when it says no); `report` runs once
  /// at the end. Call only when not `running`.
  void start(std::vector<std::vector<std::size_t>> replicas, check_fn check,
             drop_fn drop, std::function<bool()> allowed, report_fn report);

private:
  void run();
  void decided(bool dropped);
  void finish();

  std::string kind_;
  std::string unit_;
  released_kind slot_;
  std::shared_ptr<peer_counters> counters_;
  std::function<std::string(const caf::error&)> render_;
  bool running_ = false;
  std::vector<std::vector<std::size_t>> replicas_;
  check_fn check_;
  drop_fn drop_;
  std::function<bool()> allowed_;
  report_fn report_;
  std::size_t next_ = 0;
  /// Keys asked about and not yet decided.
  std::size_t in_flight_ = 0;
  uint64_t dropped_ = 0;
  uint64_t kept_ = 0;
  /// What the last pass kept: a pass that keeps as many says nothing.
  uint64_t last_kept_ = 0;
  /// The first failure to ask a replica, for the log.
  std::string failure_;
  /// Trampoline: a check or drop may answer at once, and a pass over many
  /// keys must not recurse once per key.
  bool in_run_ = false;
  bool run_again_ = false;
  /// Whether `allowed` said no: the pass ends once the keys in flight are
  /// decided.
  bool stopped_ = false;
};

using release_promise = caf::typed_response_promise<uint64_t, uint64_t>;

/// Whether node `self` of `map` is not one of `key`'s first `replicas`, and
/// so holds `key` only until its replicas do.
inline bool held_for_others(const cluster_map& map, std::size_t replicas,
                            std::size_t self, const routing_key& key) {
  auto nodes = map.replica_indices(key, replicas);
  return std::find(nodes.begin(), nodes.end(), self) == nodes.end();
}

/// Makes an exit answer every `release_keys_atom` still waiting for its
/// pass (CAF 0.17 drops a parked promise silently).
template <class Self>
void answer_releases_at_exit(Self* self) {
  self->set_exit_handler([self](caf::exit_msg& msg) {
    for (auto& promise : self->state.release_waiters)
      promise.deliver(make_error(errc::stopped_before_answer,
                                 "the repair stopped during its release "
                                 "pass"));
    self->state.release_waiters.clear();
    self->quit(msg.reason);
  });
}

/// A `release_keys_atom` request: its promise joins the waiters of the
/// pass under way, or of the one `release(self)` starts.
template <class Self, class Release>
caf::typed_response_promise<uint64_t, uint64_t>
join_release_pass(Self* self, Release release) {
  auto promise = self->template make_response_promise<uint64_t, uint64_t>();
  self->state.release_waiters.push_back(promise);
  release(self);
  return promise;
}

/// The release pass the repair actors of secrets, sessions and rooms run,
/// unless one runs already (it then answers the waiters too). `Self`'s state
/// holds `release` (a key_release), `release_waiters` (promises of
/// `release_keys_atom`, answered when the pass ends), `rounds`, `db`,
/// `peers` (gateways by index) and `settings` (`map`, `self`, `replicas`,
/// `lists`, `counters`). `scan(db, visit)` visits every key stored (a
/// `Held`, `key_of(x)` its routing key); `check(gateway, x, done)` asks a
/// replica whether it holds `x` at least as new, `drop(x, done)` drops it
/// here unless it changed. `kind` names the data in the log.
template <class Held, class Self, class Scan, class KeyOf, class Check,
          class Drop>
void run_release_pass(Self* self, const char* kind, released_kind slot,
                      Scan scan, KeyOf key_of, Check check, Drop drop) {
  auto& st = self->state;
  if (st.release->running())
    return;
  auto answer_waiters = [self](auto... xs) {
    auto waiters = std::move(self->state.release_waiters);
    self->state.release_waiters.clear();
    for (auto& promise : waiters)
      promise.deliver(xs...);
  };
  std::vector<Held> held;
  const auto& settings = st.settings;
  auto err = scan(*st.db, [&](Held&& x) {
    if (held_for_others(settings.map, settings.replicas, settings.self,
                        key_of(x)))
      held.push_back(std::move(x));
  });
  if (err) {
    spdlog::warn("{}: a release pass could not scan: {}", kind,
                 self->system().render(err));
    return answer_waiters(err);
  }
  auto allowed = [self] {
    return may_release(self->state.rounds->catching_up(),
                       self->state.settings.lists.get());
  };
  if (held.empty() || !allowed()) {
    // Still counted, so that status shows what waits for the change to end.
    st.settings.counters->keys_to_hand_off[static_cast<std::size_t>(slot)]
      = held.size();
    return answer_waiters(uint64_t{0}, uint64_t{held.size()});
  }
  std::vector<std::vector<std::size_t>> replicas;
  replicas.reserve(held.size());
  for (const auto& x : held)
    replicas.push_back(
      settings.map.replica_indices(key_of(x), settings.replicas));
  auto keys = std::make_shared<std::vector<Held>>(std::move(held));
  st.release->start(
    std::move(replicas),
    [self, keys, check](std::size_t replica, std::size_t key,
                        std::function<void(caf::expected<bool>)> done) {
      const auto& gateway = self->state.peers[replica];
      if (!gateway)
        return done(make_error(errc::node_unreachable,
                               self->state.settings.map.nodes()[replica].text()
                                 + " has not been reached yet"));
      check(gateway, (*keys)[key], std::move(done));
    },
    [keys, drop](std::size_t key,
                 std::function<void(caf::expected<bool>)> done) {
      drop((*keys)[key], std::move(done));
    },
    allowed,
    [answer_waiters](uint64_t dropped, uint64_t kept) {
      answer_waiters(dropped, kept);
    });
}

} // namespace coalesce
