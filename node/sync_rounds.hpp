#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/replica_protocol.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/serving_lists.hpp>

/// Rounds of repair exchanges with a node's peers, one exchange at a time,
/// and the catch-up from every peer they complete: what the repairs of
/// secrets (secret_sync.hpp) and of sessions (session_sync.hpp) share. Not
/// an actor: a repair actor keeps one in its state and calls it from its
/// handlers, so everything here runs in that actor.
///
/// - An exchange is the repair's own (`exchange_fn`); it reports once, with
///   what it repaired or why it failed. A peer that goes down during its
///   exchange fails it at once (a partition would leave its requests
///   unanswered until their timeouts).
/// - Every completed exchange counts a sync round and what it repaired
///   (`peer_counters`); a failure is logged when a peer starts failing, a
///   success when it repaired something or a peer stopped failing.
/// - While catching up, the node's `catching_up` gauge counts it; the
///   catch-up ends once an exchange with every peer completed.
namespace coalesce {

class sync_rounds {
public:
  /// What an exchange reports: what it repaired, or why it failed.
  using report_fn = std::function<void(caf::expected<uint64_t>)>;
  using exchange_fn = std::function<void(std::size_t peer, report_fn done)>;

  /// `kind` names the repaired data in the log ("secrets"), `unit` what
  /// is counted ("keys"); `name_of` a peer's address, `render` an error.
  sync_rounds(std::string kind, std::string unit,
              std::shared_ptr<peer_counters> counters, exchange_fn exchange,
              std::function<std::string(std::size_t)> name_of,
              std::function<std::string(const caf::error&)> render);

  /// Starts catching up from `peers`: `caught_up(repaired, took)` runs
  /// once an exchange with each completed, `passes` times over (each pass
  /// starts once the one before completed with every peer). Call
  /// `retry_catch_up` to run the exchanges still missing (at once, and
  /// whenever a retry is due).
  void start_catch_up(
    std::vector<std::size_t> peers,
    std::function<void(uint64_t, std::chrono::milliseconds)> caught_up,
    int passes = 1);

  bool catching_up() const {
    return catching_up_;
  }

  /// Whether the catch-up still waits for an exchange with `peer`.
  bool waits_for(std::size_t peer) const {
    return catching_up_ && missing_.count(peer) > 0;
  }

  /// A round with the peers the catch-up still misses.
  void retry_catch_up();

  /// Starts a round with `peers` unless one is under way.
  void start_round(std::vector<std::size_t> peers);

  /// `peer` went down: its exchange, if under way, fails now.
  void peer_down(std::size_t peer);

private:
  void next_exchange();
  void finish(std::size_t peer, caf::expected<uint64_t> repaired);

  std::string kind_;
  std::string unit_;
  std::shared_ptr<peer_counters> counters_;
  exchange_fn exchange_;
  std::function<std::string(std::size_t)> name_of_;
  std::function<std::string(const caf::error&)> render_;
  /// Peers not yet caught up from in this pass (empty once caught up).
  std::set<std::size_t> missing_;
  /// Every peer of the catch-up, and the passes left after this one.
  std::vector<std::size_t> catch_up_peers_;
  int passes_left_ = 0;
  bool catching_up_ = false;
  std::chrono::steady_clock::time_point catch_up_started_;
  uint64_t caught_up_repaired_ = 0;
  std::function<void(uint64_t, std::chrono::milliseconds)> caught_up_;
  /// The peers left in the round under way.
  std::deque<std::size_t> round_;
  bool exchanging_ = false;
  /// Whether a catch-up retry came while a round ran.
  bool retry_after_round_ = false;
  /// Peers whose last exchange failed: logged once until one succeeds.
  std::set<std::size_t> failing_;
  /// The peer of the exchange under way, and what ends it early.
  std::size_t exchange_peer_ = 0;
  std::function<void()> abort_exchange_;
};

/// A repair's own messages: catch up now (or on its retry timer), and the
/// periodic round.
using catch_up_atom = caf::atom_constant<caf::atom("catchup")>;
using repair_atom = caf::atom_constant<caf::atom("repair")>;
/// What a repair tells once it caught up (or at once, without a catch-up).
using caught_up_atom = caf::atom_constant<caf::atom("caughtup")>;

// -- handoffs: exchanges with a peer under another cluster list -------------

/// This node (`self` of `map`, keys of `replicas` replicas each) as the
/// asker of a handoff.
handoff_asker handoff_asker_of(const cluster_map& map, std::size_t self,
                               std::size_t replicas);

/// The list a handoff's asker serves under, checked (its nodes parse, none
/// twice, at most `cluster_map::node_id_limit`; its index names one; one
/// replica or more), or `errc::invalid_request` saying what is wrong.
caf::expected<cluster_map> list_of_asker(const handoff_asker& asker);

/// Whether node `node` of `map` is one of `key`'s first `replicas`.
bool replica_of(const cluster_map& map, std::size_t replicas,
                const routing_key& key, std::size_t node);

/// A peer asked this node (`self` of `map`) for a handoff under its own
/// list: it serves under that list now, whatever its last ping answered.
/// `lists` learns it before the handoff is answered, so that from then on
/// this node's coordinators count that list's majorities too and fail a
/// request counted without it (replica_calls::lists_generation). The
/// asker's catch-up (a second pass, `start_sync_rounds`) then finds
/// everything answered under a count that missed it. A peer not in `map`
/// (a node that joins) changes nothing: no peer of this node serves it yet.
void learn_asker_list(serving_lists* lists, const cluster_map& map,
                      std::size_t self, const handoff_asker& asker);

/// Whether a peer refused an exchange because it serves under another
/// list than the asker's (`refuse_asker`): the asker pulls by handoff
/// instead.
bool refused_for_list(const caf::error& err);

/// Counts `keys` handed off to `asker` and logs them (when there are any).
/// `kind` names the data ("secrets"), `unit` what is counted ("keys").
void note_handed_off(peer_counters& counters, const char* kind,
                     const char* unit, const handoff_asker& asker,
                     uint64_t keys);

/// Every node of the cluster list but `self`.
std::vector<std::size_t> every_peer(std::size_t nodes, std::size_t self);

/// The refusal of a peer's exchange that does not name a peer of this node
/// (`self` of `map`): one asked under another list than `map` (another
/// fingerprint: `errc::not_replica`, with this node's list; the asker's
/// index may name another node here, and a listing for it would be that
/// node's), or naming no other node of it (`errc::invalid_request`).
std::optional<caf::error> refuse_asker(const cluster_map& map,
                                       std::size_t self, uint64_t asked_under,
                                       uint64_t asker);

// The handlers both repair actors share. `Self` is the actor; its state
// holds `peers` (the gateways by index), `rounds`, `retry_scheduled` and
// `settings` (`map`, `self`, `retry`, `interval`).

/// A peer is up: its gateway is known, and a catch-up waiting for it may
/// complete now.
template <class Self, class Gateway>
void on_peer_up(Self* self, uint64_t index, Gateway& gateway) {
  auto& st = self->state;
  if (index >= st.peers.size())
    return;
  st.peers[index] = std::move(gateway);
  if (st.rounds->waits_for(index))
    self->send(self, catch_up_atom::value, false);
}

/// A peer is down: forgotten, and its exchange fails now.
template <class Self>
void on_peer_down(Self* self, uint64_t index) {
  auto& st = self->state;
  if (index < st.peers.size())
    st.peers[index] = nullptr;
  st.rounds->peer_down(index);
}

/// Runs the catch-up's missing exchanges, with one retry timer at a time.
template <class Self>
void on_catch_up(Self* self, bool from_timer) {
  auto& st = self->state;
  if (from_timer)
    st.retry_scheduled = false;
  if (!st.rounds->catching_up())
    return;
  st.rounds->retry_catch_up();
  if (!st.retry_scheduled) {
    st.retry_scheduled = true;
    self->delayed_send(self, st.settings.retry, catch_up_atom::value, true);
  }
}

/// The periodic round with every peer, and the next one's timer.
template <class Self>
void on_repair(Self* self) {
  auto& st = self->state;
  st.rounds->start_round(every_peer(st.settings.map.size(), st.settings.self));
  self->delayed_send(self, st.settings.interval, repair_atom::value);
}

/// Starts a repair actor's rounds, as each does when spawned. Its state
/// holds besides the above `caught_up` (told once caught up) and
/// `settings.catch_up`, `catching_up` and `counters`. `kind` names the
/// repaired data in the log ("rooms"), `unit` what is counted ("rooms"),
/// `serving` what the node does once caught up ("serving reads"). Without
/// a clean-stop mark it sets `catching_up`, catches up from every peer,
/// logs both ends and then tells `caught_up`; with one, it tells at once.
/// A periodic round follows every `settings.interval` (0: never).
template <class Self>
void start_sync_rounds(Self* self, const char* kind, const char* unit,
                       const char* waits, const char* serves,
                       sync_rounds::exchange_fn exchange) {
  auto& st = self->state;
  st.rounds = std::make_unique<sync_rounds>(
    kind, unit, st.settings.counters, std::move(exchange),
    [self](std::size_t peer) {
      return self->state.settings.map.nodes()[peer].text();
    },
    [self](const caf::error& err) { return self->system().render(err); });
  if (st.settings.catch_up && st.settings.map.size() > 1) {
    st.settings.catching_up->store(true);
    std::string what = kind;
    std::string counted = unit;
    std::string then = serves;
    // Under a list its peers may not know yet, the first pass tells every
    // peer which list this node serves now (learn_asker_list); the second
    // finds what they answered before they learned it.
    st.rounds->start_catch_up(
      every_peer(st.settings.map.size(), st.settings.self),
      [self, what, counted, then](uint64_t repaired,
                                  std::chrono::milliseconds took) {
        self->state.settings.catching_up->store(false);
        spdlog::info("{}: caught up from every peer: {} {} repaired in {} "
                     "ms; {}",
                     what, repaired, counted, took.count(), then);
        if (self->state.caught_up)
          caf::anon_send(self->state.caught_up, caught_up_atom::value);
      },
      st.settings.catch_up_passes);
    spdlog::info("{}: {}; catching up from every peer before {}", kind,
                 st.settings.list_changed
                   ? "the cluster list changed (what this node gained is "
                     "handed off from the nodes that hold it)"
                   : "the last stop was not clean (or never happened)",
                 waits);
    self->send(self, catch_up_atom::value, false);
  } else {
    st.settings.catching_up->store(false);
    if (st.caught_up)
      caf::anon_send(st.caught_up, caught_up_atom::value);
  }
  if (st.settings.interval.count() > 0)
    self->delayed_send(self, st.settings.interval, repair_atom::value);
}

} // namespace coalesce
