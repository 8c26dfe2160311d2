#pragma once

#include <atomic>
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
#include <caf/timespan.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/node_gateway.hpp>
#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/replica_protocol.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/key_release.hpp>
#include <coalesce/node/serving_lists.hpp>

namespace coalesce::storage {
class database;
} // namespace coalesce::storage

/// Rounds of repair exchanges with a node's peers, one exchange at a time,
/// and the catch-up from every peer they complete, and how a repair actor
/// starts: what the repairs of secrets (secret_sync.hpp), sessions
/// (session_sync.hpp) and rooms (timeline_sync.hpp) share. Not
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

/// How a repair actor of each kind (secret_sync.hpp, session_sync.hpp,
/// timeline_sync.hpp) is set up.
struct repair_settings {
  cluster_map map;
  /// This node's index in `map`.
  std::size_t self = 0;
  std::size_t replicas = 3;
  /// How long a peer may take to answer one step of an exchange (a
  /// secrets' peer flushes and scans its rows first).
  caf::timespan timeout;
  /// Between two periodic repairs; 0 for none.
  caf::timespan interval;
  /// Between two attempts to catch up with the peers still missing.
  caf::timespan retry;
  /// Whether to catch up first (no clean-stop mark was found, or the
  /// cluster list changed).
  bool catch_up = false;
  /// Set while catching up, read by this node's coordinators and endpoint
  /// (null where the repair tells its coordinator instead: secrets).
  std::shared_ptr<std::atomic<bool>> catching_up;
  std::shared_ptr<peer_counters> counters;
  /// Whether the catch-up is for a changed cluster list (this node may
  /// have gained keys): what its log says.
  bool list_changed = false;
  /// The lists peers serve under: keys this node no longer replicates are
  /// dropped only while it serves under its own list alone (null: never
  /// dropped); a peer's handoff request tells it what that peer serves
  /// (`learn_asker_list`).
  std::shared_ptr<serving_lists> lists = nullptr;
  /// Passes of the catch-up over every peer (cluster_list.hpp,
  /// `catch_up_passes`): two under a list the peers may not know yet.
  int catch_up_passes = 1;
  /// Whether the repaired data was empty at start (a new or wiped
  /// directory): the catch-up is then logged as a refill.
  bool started_empty = false;
  /// Called in the repair actor after every exchange with a peer that
  /// completed (and was counted in `counters`), with the peer's index: what
  /// a test waits on for a number of exchanges. Empty: nothing is called.
  std::function<void(std::size_t)> exchange_completed = nullptr;
};

/// The stamp of a repair's request to a peer's replicas: the lists this
/// node counts now (a peer refuses a request without one it counts).
inline list_stamp stamp_now(const repair_settings& settings) {
  auto view = settings.lists ? settings.lists->current() : nullptr;
  return stamp_of(settings.map, view.get());
}

class sync_rounds {
public:
  /// What an exchange reports: what it repaired, or why it failed.
  using report_fn = std::function<void(caf::expected<uint64_t>)>;
  using exchange_fn = std::function<void(std::size_t peer, report_fn done)>;

  /// `kind` names the repaired data in the log ("secrets"), `unit` what
  /// is counted ("keys"); `name_of` a peer's address, `render` an error;
  /// `completed` (may be empty) is called after each completed exchange.
  sync_rounds(std::string kind, std::string unit,
              std::shared_ptr<peer_counters> counters, exchange_fn exchange,
              std::function<std::string(std::size_t)> name_of,
              std::function<std::string(const caf::error&)> render,
              std::function<void(std::size_t)> completed = nullptr);

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
  std::function<void(std::size_t)> completed_;
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
/// asker's catch-up (a second pass, `start_repair`) then finds
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

/// The state every repair actor keeps; `Local` is what it installs
/// through (the secret buffer, the session I/O actors, the timeline store).
template <class Local>
struct repair_state {
  std::shared_ptr<storage::database> db;
  Local local;
  /// Told once the catch-up completed (or at once without one).
  caf::actor caught_up;
  repair_settings settings;
  /// Each peer's gateway by its index in the cluster list, when known.
  std::vector<node_actor> peers;
  std::unique_ptr<sync_rounds> rounds;
  /// Whether a retry of the catch-up is scheduled.
  bool retry_scheduled = false;
  std::unique_ptr<key_release> release;
  std::vector<release_promise> release_waiters;
};

// The handlers the repair actors share. `Self` is the actor; its state is
// a `repair_state`.

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

/// The words a repair's log lines and counters use: string literals (the
/// catch-up keeps them past the start).
struct repair_words {
  /// The repaired data ("rooms").
  const char* kind;
  /// What an exchange counts ("keys"), and what a release pass drops
  /// ("chats").
  const char* unit;
  const char* dropped_unit;
  released_kind released;
  /// What the node holds back while catching up ("answering reads"), and
  /// does once caught up ("serving reads").
  const char* waits;
  const char* serves;
};

/// Starts a repair actor, as each does when spawned: its state (a
/// `repair_state`) takes the arguments, its release passes answer their
/// waiters at exit, and its rounds start. Without a clean-stop mark it
/// sets `catching_up`, catches up from every peer, logs both ends and then
/// tells `caught_up`; with one, it tells at once. A periodic round follows
/// every `settings.interval` (0: never).
template <class Self, class Local>
void start_repair(Self* self, std::shared_ptr<storage::database> db,
                  Local local, caf::actor caught_up, repair_settings settings,
                  const repair_words& words,
                  sync_rounds::exchange_fn exchange) {
  auto& st = self->state;
  st.db = std::move(db);
  st.local = std::move(local);
  st.caught_up = std::move(caught_up);
  st.settings = std::move(settings);
  st.peers.resize(st.settings.map.size());
  st.release = std::make_unique<key_release>(
    words.kind, words.dropped_unit, words.released, st.settings.counters,
    [self](const caf::error& err) { return self->system().render(err); });
  answer_releases_at_exit(self);
  st.rounds = std::make_unique<sync_rounds>(
    words.kind, words.unit, st.settings.counters, std::move(exchange),
    [self](std::size_t peer) {
      return self->state.settings.map.nodes()[peer].text();
    },
    [self](const caf::error& err) { return self->system().render(err); },
    st.settings.exchange_completed);
  auto set_catching_up = [self](bool value) {
    if (self->state.settings.catching_up)
      self->state.settings.catching_up->store(value);
  };
  if (st.settings.catch_up && st.settings.map.size() > 1) {
    set_catching_up(true);
    // Under a list its peers may not know yet, the first pass tells every
    // peer which list this node serves now (learn_asker_list); the second
    // finds what they answered before they learned it.
    st.rounds->start_catch_up(
      every_peer(st.settings.map.size(), st.settings.self),
      [self, set_catching_up, words](uint64_t repaired,
                                     std::chrono::milliseconds took) {
        set_catching_up(false);
        if (self->state.settings.started_empty)
          spdlog::info("{}: refilled the empty data directory from its "
                       "peers: {} {} in {} ms; {}",
                       words.kind, repaired, words.unit, took.count(),
                       words.serves);
        else
          spdlog::info("{}: caught up from every peer: {} {} repaired in {} "
                       "ms; {}",
                       words.kind, repaired, words.unit, took.count(),
                       words.serves);
        if (self->state.caught_up)
          caf::anon_send(self->state.caught_up, caught_up_atom::value);
      },
      st.settings.catch_up_passes);
    spdlog::info("{}: {}; catching up from every peer before {}", words.kind,
                 st.settings.list_changed
                   ? "its cluster list changed (what it gained, and what "
                     "its peers took under the old list meanwhile, is "
                     "handed off from the nodes that hold it)"
                 : st.settings.started_empty
                   ? "the data directory is empty"
                   : "the last stop was not clean (or never happened)",
                 words.waits);
    self->send(self, catch_up_atom::value, false);
  } else {
    set_catching_up(false);
    if (st.caught_up)
      caf::anon_send(st.caught_up, caught_up_atom::value);
  }
  if (st.settings.interval.count() > 0)
    self->delayed_send(self, st.settings.interval, repair_atom::value);
}

} // namespace coalesce
