#include <coalesce/node/session_sync.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/sync_rounds.hpp>
#include <coalesce/storage/session_store.hpp>

namespace coalesce {

namespace {


/// What the actor handles: its interface plus its own timers.
using session_sync_impl = session_sync_actor::extend<
  caf::reacts_to<catch_up_atom, bool>, caf::reacts_to<repair_atom>>;

struct session_sync_state
  : repair_state<std::vector<session_replica_io_actor>> {
  static inline const char* name = "session_sync";
};

using sync_pointer = session_sync_impl::stateful_pointer<session_sync_state>;

const session_replica_io_actor& io_for(sync_pointer self,
                                       const std::string& session) {
  auto& io = self->state.local;
  return io[std::hash<std::string>{}(session) % io.size()];
}

/// What this node holds of the sessions node `asker` of `map` is a replica
/// of.
caf::expected<std::vector<session_listing>>
listing_for(sync_pointer self, const cluster_map& map, std::size_t replicas,
            std::size_t asker) {
  std::vector<session_listing> result;
  auto err = storage::scan_session_versions(
    *self->state.db, [&](session_listing&& x) {
      if (replica_of(map, replicas, routing_key{key_kind::session, x.session},
                     asker))
        result.push_back(std::move(x));
    });
  if (err)
    return err;
  return result;
}

/// Whether `theirs` holds something `mine` lacks: newer content or a
/// higher generation.
bool worth_fetching(const session_version& theirs,
                    const session_version* mine) {
  if (mine == nullptr)
    return true;
  return newer_content(theirs, *mine) || theirs.generation > mine->generation;
}

/// Fetches each of `wanted` from the peer and installs it here, one after
/// the other; `done(installed)` or the first error.
void pull(sync_pointer self, node_actor gateway,
          std::shared_ptr<std::vector<std::string>> wanted, std::size_t next,
          uint64_t installed, std::function<void(caf::expected<uint64_t>)> done) {
  if (next == wanted->size())
    return done(installed);
  const auto& session = (*wanted)[next];
  auto timeout = self->state.settings.timeout;
  auto fail = [done](caf::error& err) { done(std::move(err)); };
  self
    ->request(gateway, timeout, replica_atom::value, image_atom::value,
              session, stamp_now(self->state.settings))
    .then(
      [=](session_image& image) {
        self
          ->request(io_for(self, image.session), timeout,
                    replica_atom::value, install_atom::value,
                    storage::repair_ballot, image)
          .then(
            [=](replica_answer& answer) {
              auto took = outcome_of(answer) == replica_outcome::applied
                          && !newer_content(image.version, answer.version)
                          && !newer_content(answer.version, image.version);
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
                 std::vector<session_listing>& theirs,
                 std::function<void(caf::expected<uint64_t>)> done) {
  std::unordered_map<std::string, session_version> mine;
  auto err = storage::scan_session_versions(*self->state.db,
                                            [&](session_listing&& x) {
                                              mine.emplace(
                                                std::move(x.session),
                                                x.version);
                                            });
  if (err)
    return done(std::move(err));
  auto wanted = std::make_shared<std::vector<std::string>>();
  for (auto& x : theirs) {
    auto i = mine.find(x.session);
    if (worth_fetching(x.version, i == mine.end() ? nullptr : &i->second))
      wanted->push_back(std::move(x.session));
  }
  pull(self, gateway, wanted, 0, 0, std::move(done));
}

/// One exchange with `peer`: `done(sessions installed)` or the error.
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
  auto fetch = [self, gateway, done](std::vector<session_listing>& theirs) {
    fetch_newer(self, gateway, theirs, done);
  };
  self
    ->request(gateway, st.settings.timeout, replica_atom::value,
              digest_atom::value, st.settings.map.fingerprint(),
              uint64_t{st.settings.self})
    .then(fetch, [self, gateway, done, fetch](caf::error& err) {
      if (!refused_for_list(err))
        return done(std::move(err));
      // The peer serves under another list: a handoff under this one.
      const auto& settings = self->state.settings;
      self
        ->request(gateway, settings.timeout, replica_atom::value,
                  handoff_atom::value,
                  handoff_asker_of(settings.map, settings.self,
                                   settings.replicas))
        .then(fetch, [done](caf::error& err) { done(std::move(err)); });
    });
}

/// Whether `theirs` holds everything `mine` does: the same content or
/// newer, and the same generation claimed alike or a higher one.
bool holds_at_least(const session_version& theirs,
                    const session_version& mine) {
  if (newer_content(mine, theirs))
    return false;
  if (theirs.generation != mine.generation)
    return theirs.generation > mine.generation;
  return mine.claimant.empty() || theirs.claimant == mine.claimant;
}

/// A release pass over the sessions this node holds and does not
/// replicate, unless one runs (it then answers the waiters too).
void release(sync_pointer self) {
  run_release_pass<session_listing>(
    self, "sessions", released_kind::sessions, storage::scan_session_versions,
    [](const session_listing& x) {
      return routing_key{key_kind::session, x.session};
    },
    [self](const node_actor& gateway, const session_listing& x,
           std::function<void(caf::expected<bool>)> done) {
      auto mine = x.version;
      self
        ->request(gateway, self->state.settings.timeout, replica_atom::value,
                  version_atom::value, x.session,
                  stamp_now(self->state.settings))
        .then(
          [done, mine](replica_answer& theirs) {
            done(holds_at_least(theirs.version, mine));
          },
          [done](caf::error& err) { done(std::move(err)); });
    },
    [self](const session_listing& x,
           std::function<void(caf::expected<bool>)> done) {
      self
        ->request(io_for(self, x.session), self->state.settings.timeout,
                  replica_atom::value, drop_atom::value, x.session,
                  x.version)
        .then([done](bool dropped) { done(dropped); },
              [done](caf::error& err) { done(std::move(err)); });
    });
}

session_sync_impl::behavior_type
session_sync(sync_pointer self, std::shared_ptr<storage::database> db,
             std::vector<session_replica_io_actor> local, caf::actor caught_up,
             repair_settings settings) {
  start_repair(self, std::move(db), std::move(local), std::move(caught_up),
               std::move(settings),
               {"sessions", "sessions", "sessions", released_kind::sessions,
                "answering reads", "serving reads"},
               [self](std::size_t peer, sync_rounds::report_fn done) {
                 exchange(self, peer, std::move(done));
               });
  return {
    [self](replica_atom, digest_atom, uint64_t asked_under, uint64_t asker)
      -> caf::result<std::vector<session_listing>> {
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
    [self](replica_atom, handoff_atom, handoff_asker& asker)
      -> caf::result<std::vector<session_listing>> {
      auto list = list_of_asker(asker);
      if (!list)
        return std::move(list.error());
      const auto& settings = self->state.settings;
      learn_asker_list(settings.lists.get(), settings.map, settings.self,
                       asker);
      auto listing = listing_for(self, *list, asker.replicas, asker.asker);
      if (!listing)
        return std::move(listing.error());
      note_handed_off(*self->state.settings.counters, "sessions", "sessions",
                      asker, listing->size());
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

session_sync_actor
spawn_session_sync(caf::actor_system& sys,
                   std::shared_ptr<storage::database> db,
                   std::vector<session_replica_io_actor> local,
                   caf::actor caught_up, repair_settings settings) {
  auto actor = sys.spawn<caf::detached>(session_sync, std::move(db),
                                        std::move(local), std::move(caught_up),
                                        std::move(settings));
  return caf::actor_cast<session_sync_actor>(actor);
}

} // namespace coalesce
