#include <coalesce/node/timeline_sync.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/sync_rounds.hpp>
#include <coalesce/storage/timeline_replica.hpp>

namespace coalesce {

namespace {

/// What the actor handles: its interface plus its own timers.
using timeline_sync_impl = timeline_sync_actor::extend<
  caf::reacts_to<catch_up_atom, bool>, caf::reacts_to<repair_atom>>;

struct timeline_sync_state : repair_state<timeline_replica_store_actor> {
  static inline const char* name = "timeline_sync";
};

using sync_pointer = timeline_sync_impl::stateful_pointer<timeline_sync_state>;

/// What this node holds of the rooms node `asker` of `map` is a replica
/// of.
caf::expected<std::vector<room_listing>>
listing_for(sync_pointer self, const cluster_map& map, std::size_t replicas,
            std::size_t asker) {
  std::vector<room_listing> result;
  auto err = storage::scan_room_versions(
    *self->state.db, [&](room_listing&& x) {
      if (replica_of(map, replicas, routing_key{key_kind::room, x.room},
                     asker))
        result.push_back(std::move(x));
    });
  if (err)
    return err;
  return result;
}

/// Whether `theirs` holds something `mine` lacks: a newer log, a higher
/// promise or a position further back.
bool worth_fetching(const room_version& theirs, const room_version* mine) {
  if (mine == nullptr)
    return true;
  return newer_log(theirs.segments, theirs.head, mine->segments, mine->head)
         || theirs.promised > mine->promised
         || (theirs.positioned
             && (!mine->positioned || theirs.position < mine->position));
}

/// Whether what this replica holds changed, beyond its promise.
bool repaired(const room_version& before, const room_version& after) {
  return before.segments != after.segments || before.head != after.head
         || before.positioned != after.positioned
         || before.position != after.position;
}

struct wanted_room {
  std::string room;
  /// Where this replica's log and the peer's part.
  uint64_t from = 0;
  uint64_t promised = 0;
  room_version mine;
};

/// Fetches each of `wanted` from the peer and installs it here, one after
/// the other; `done(repaired)` or the first error.
void pull(sync_pointer self, node_actor gateway,
          std::shared_ptr<std::vector<wanted_room>> wanted, std::size_t next,
          uint64_t installed,
          std::function<void(caf::expected<uint64_t>)> done) {
  if (next == wanted->size())
    return done(installed);
  const auto& x = (*wanted)[next];
  auto timeout = self->state.settings.timeout;
  auto fail = [done](caf::error& err) { done(std::move(err)); };
  self
    ->request(gateway, timeout, replica_atom::value, room_atom::value,
              image_atom::value, x.room, x.from,
              stamp_now(self->state.settings))
    .then(
      [=](room_suffix& part) {
        const auto& x = (*wanted)[next];
        self
          ->request(self->state.local, timeout, replica_atom::value,
                    room_atom::value, install_atom::value, part, x.promised)
          .then(
            [=](room_answer& answer) {
              const auto& x = (*wanted)[next];
              auto took = outcome_of(answer) == replica_outcome::applied
                          && repaired(x.mine, answer.version);
              pull(self, gateway, wanted, next + 1,
                   installed + (took ? 1 : 0), done);
            },
            fail);
      },
      fail);
}

/// Of a peer's listing, fetches and installs what holds more than this
/// node does.
void fetch_newer(sync_pointer self, const node_actor& gateway,
                 std::vector<room_listing>& theirs,
                 std::function<void(caf::expected<uint64_t>)> done) {
  std::unordered_map<std::string, room_version> mine;
  auto err = storage::scan_room_versions(
    *self->state.db, [&](room_listing&& x) {
      mine.emplace(std::move(x.room), std::move(x.version));
    });
  if (err)
    return done(std::move(err));
  auto wanted = std::make_shared<std::vector<wanted_room>>();
  for (auto& x : theirs) {
    auto i = mine.find(x.room);
    const room_version* held = i == mine.end() ? nullptr : &i->second;
    if (!worth_fetching(x.version, held))
      continue;
    wanted_room w;
    w.room = std::move(x.room);
    w.promised = x.version.promised;
    if (held != nullptr) {
      w.mine = *held;
      w.from = shared_prefix(held->segments, held->head,
                             x.version.segments, x.version.head);
    }
    // Only the promise and the position: no events needed.
    if (held != nullptr
        && !newer_log(x.version.segments, x.version.head,
                      held->segments, held->head))
      w.from = x.version.head;
    wanted->push_back(std::move(w));
  }
  pull(self, gateway, wanted, 0, 0, done);
}

/// One exchange with `peer`: `done(rooms repaired)` or the error.
void exchange(sync_pointer self, std::size_t peer,
              std::function<void(caf::expected<uint64_t>)> done) {
  auto& st = self->state;
  const auto& where = st.settings.map.nodes()[peer];
  // Peers come from the peer watch, which connects; one it has not reached
  // is not compared with yet.
  if (!st.peers[peer])
    return done(make_error(errc::node_unreachable,
                           where.text() + " has not been reached yet"));
  auto gateway = st.peers[peer];
  auto fetch = [self, gateway, done](std::vector<room_listing>& theirs) {
    fetch_newer(self, gateway, theirs, done);
  };
  self
    ->request(gateway, st.settings.timeout, replica_atom::value,
              room_atom::value, digest_atom::value,
              st.settings.map.fingerprint(), uint64_t{st.settings.self})
    .then(fetch, [self, gateway, done, fetch](caf::error& err) {
      if (!refused_for_list(err))
        return done(std::move(err));
      // The peer serves under another list: a handoff under this one.
      const auto& settings = self->state.settings;
      self
        ->request(gateway, settings.timeout, replica_atom::value,
                  room_atom::value, handoff_atom::value,
                  handoff_asker_of(settings.map, settings.self,
                                   settings.replicas))
        .then(fetch, [done](caf::error& err) { done(std::move(err)); });
    });
}

/// Whether a peer's part from `mine.head` on (`theirs`) shows everything
/// `mine` holds: a log that continues this one (the same events up to its
/// head) and a position at least as far back.
bool holds_at_least(const room_suffix& theirs, const room_version& mine) {
  if (shared_prefix(theirs.segments, theirs.head(), mine.segments, mine.head)
      < mine.head)
    return false;
  return !mine.positioned
         || (theirs.positioned && theirs.position <= mine.position);
}

/// A release pass over the rooms this node holds and does not replicate,
/// unless one runs (it then answers the waiters too).
void release(sync_pointer self) {
  run_release_pass<room_listing>(
    self, "rooms", released_kind::rooms, storage::scan_room_versions,
    [](const room_listing& x) { return routing_key{key_kind::room, x.room}; },
    [self](const node_actor& gateway, const room_listing& x,
           std::function<void(caf::expected<bool>)> done) {
      auto mine = x.version;
      self
        ->request(gateway, self->state.settings.timeout, replica_atom::value,
                  room_atom::value, image_atom::value, x.room, mine.head,
                  stamp_now(self->state.settings))
        .then(
          [done, mine](room_suffix& theirs) {
            done(holds_at_least(theirs, mine));
          },
          [done](caf::error& err) { done(std::move(err)); });
    },
    [self](const room_listing& x,
           std::function<void(caf::expected<bool>)> done) {
      self
        ->request(self->state.local, self->state.settings.timeout,
                  replica_atom::value, room_atom::value, drop_atom::value,
                  x.room, x.version)
        .then([done](bool dropped) { done(dropped); },
              [done](caf::error& err) { done(std::move(err)); });
    });
}

timeline_sync_impl::behavior_type
timeline_sync(sync_pointer self, std::shared_ptr<storage::database> db,
              timeline_replica_store_actor local, caf::actor caught_up,
              repair_settings settings) {
  start_repair(self, std::move(db), std::move(local), std::move(caught_up),
               std::move(settings),
               {"rooms", "rooms", "rooms", released_kind::rooms,
                "taking part in rounds", "taking part in rounds"},
               [self](std::size_t peer, sync_rounds::report_fn done) {
                 exchange(self, peer, std::move(done));
               });
  return {
    [self](replica_atom, room_atom, digest_atom, uint64_t asked_under,
           uint64_t asker) -> caf::result<std::vector<room_listing>> {
      const auto& settings = self->state.settings;
      if (auto refusal = refuse_asker(settings.map, settings.self, asked_under,
                                      asker))
        return std::move(*refusal);
      auto listing = listing_for(self, settings.map, settings.replicas,
                                 asker);
      if (!listing)
        return std::move(listing.error());
      return std::move(*listing);
    },
    [self](replica_atom, room_atom, handoff_atom, handoff_asker& asker)
      -> caf::result<std::vector<room_listing>> {
      auto list = list_of_asker(asker);
      if (!list)
        return std::move(list.error());
      const auto& settings = self->state.settings;
      learn_asker_list(settings.lists.get(), settings.map, settings.self,
                       asker);
      auto listing = listing_for(self, *list, asker.replicas, asker.asker);
      if (!listing)
        return std::move(listing.error());
      note_handed_off(*self->state.settings.counters, "rooms", "rooms", asker,
                      listing->size());
      return std::move(*listing);
    },
    [self](peer_up_atom, uint64_t index, node_actor& gateway) {
      on_peer_up(self, index, gateway);
    },
    [self](peer_down_atom, uint64_t index) { on_peer_down(self, index); },
    [self](catch_up_atom, bool from_timer) { on_catch_up(self, from_timer); },
    [self](repair_atom) {
      on_repair(self);
      release(self);
    },
    [self](release_keys_atom) { return join_release_pass(self, release); },
  };
}

} // namespace

timeline_sync_actor
spawn_timeline_sync(caf::actor_system& sys,
                    std::shared_ptr<storage::database> db,
                    timeline_replica_store_actor local, caf::actor caught_up,
                    repair_settings settings) {
  auto actor = sys.spawn<caf::detached>(timeline_sync, std::move(db),
                                        std::move(local), std::move(caught_up),
                                        std::move(settings));
  return caf::actor_cast<timeline_sync_actor>(actor);
}

} // namespace coalesce
