#include <coalesce/node/secret_sync.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/node/sync_rounds.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/secret_codec.hpp>
#include <coalesce/storage/secret_merge.hpp>
#include <coalesce/storage/secret_store.hpp>

namespace coalesce {

namespace {


/// What the actor sends itself: a catch-up attempt (true: the retry timer's)
/// and a periodic repair.
using secret_sync_impl = secret_sync_actor::extend<
  caf::reacts_to<catch_up_atom, bool>, caf::reacts_to<repair_atom>>;

/// The most rows one copy message carries.
constexpr std::size_t rows_per_message = 4096;

constexpr uint64_t fnv_basis = 14695981039346656037ULL;

uint64_t fnv1a(uint64_t hash, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ULL;
  }
  return hash;
}

template <class Integer>
uint64_t fnv1a(uint64_t hash, Integer x) {
  return fnv1a(hash, &x, sizeof(x));
}

uint32_t bucket_of(const std::string& chat) {
  return static_cast<uint32_t>(fnv1a(fnv_basis, chat.data(), chat.size())
                               % secret_sync_buckets);
}

/// What two replicas holding the same row hash alike: its key and merged
/// value, not the local capture time.
uint64_t row_hash(const secret_entry& row) {
  auto key = storage::encode_secret_key(row.chat, row.sender, row.msg_id);
  auto hash = fnv1a(fnv_basis, key.data(), key.size());
  hash = fnv1a(hash, row.secret.data(), row.secret.size());
  hash = fnv1a(hash, row.expires_at);
  hash = fnv1a(hash, row.message_ts);
  hash = fnv1a(hash, row.stamp);
  return fnv1a(hash, row.ts_stamp);
}

struct secret_sync_state : repair_state<secret_buffer_actor> {
  static inline const char* name = "secret_sync";
};

/// The rows of one chat, as this node holds them.
struct held_chat {
  std::string chat;
  std::vector<secret_write> rows;
};

/// Calls `visit` with the rows of each chat stored, chat by chat.
caf::error scan_held_chats(storage::database& db,
                           const std::function<void(held_chat&&)>& visit) {
  held_chat current;
  auto err = storage::scan_secrets(db, [&](const secret_write& row) {
    if (row.entry.chat != current.chat && !current.rows.empty()) {
      visit(std::move(current));
      current = held_chat{};
    }
    current.chat = row.entry.chat;
    current.rows.push_back(row);
  });
  if (!err && !current.rows.empty())
    visit(std::move(current));
  return err;
}

/// Whether a replica's rows (`theirs`, in the order of `mine`) hold every
/// row of `mine` at least as new: merging this node's row into theirs
/// changes nothing.
bool holds_at_least(const std::vector<stored_secret>& theirs,
                    const std::vector<secret_write>& mine) {
  if (theirs.size() != mine.size())
    return false;
  auto now = storage::unix_now();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    // An expired row reads as none and counts as none under a later
    // capture: it holds nothing a replica lacks.
    if (storage::is_expired(mine[i], now))
      continue;
    if (!theirs[i].found)
      return false;
    auto merged = storage::apply_capture(&theirs[i].row, mine[i]);
    if (!(merged.entry == theirs[i].row.entry))
      return false;
  }
  return true;
}

using sync_pointer = secret_sync_impl::stateful_pointer<secret_sync_state>;

/// Calls `visit(row, bucket)` for every live row of the chats `wanted`
/// takes (asked once per chat: rows are scanned in key order, chat first).
template <class Wanted, class Visit>
caf::error scan_chats(sync_pointer self, Wanted wanted, Visit visit) {
  auto now = storage::unix_now();
  std::string chat;
  bool taken = false;
  uint32_t bucket = 0;
  return storage::scan_secrets(
    *self->state.db, [&](const secret_write& row) {
      if (row.entry.chat != chat || chat.empty()) {
        chat = row.entry.chat;
        taken = wanted(routing_key{key_kind::chat, chat});
        bucket = bucket_of(chat);
      }
      if (taken && !storage::is_expired(row, now))
        visit(row.entry, bucket);
    });
}

/// Which chats this node shares with node `peer` (both are replicas).
auto shared_with(sync_pointer self, std::size_t peer) {
  return [self, peer](const routing_key& key) {
    const auto& settings = self->state.settings;
    return replica_of(settings.map, settings.replicas, key, settings.self)
           && replica_of(settings.map, settings.replicas, key, peer);
  };
}

/// Which chats node `asker` of `list` is a replica of (`replicas` each).
auto replicated_by(const cluster_map& list, std::size_t replicas,
                   std::size_t asker) {
  return [&list, replicas, asker](const routing_key& key) {
    return replica_of(list, replicas, key, asker);
  };
}

/// The digests of the live rows of the chats `wanted` takes.
template <class Wanted>
caf::expected<secret_digest> digest_where(sync_pointer self, Wanted wanted) {
  secret_digest result;
  result.buckets.resize(secret_sync_buckets, 0);
  if (auto err = scan_chats(self, wanted,
                            [&](const secret_entry& row, uint32_t bucket) {
                              result.buckets[bucket] += row_hash(row);
                            }))
    return err;
  return result;
}

/// The refusal of a peer's digest that does not have one sum per bucket.
std::optional<caf::error> malformed(const secret_digest& theirs) {
  if (theirs.buckets.size() == secret_sync_buckets)
    return std::nullopt;
  return make_error(errc::invalid_request,
                    "the peer's digest has "
                      + std::to_string(theirs.buckets.size()) + " buckets");
}

/// The buckets whose sums differ between two well-formed digests.
secret_buckets buckets_differing(const secret_digest& mine,
                                 const secret_digest& theirs) {
  secret_buckets result;
  for (uint32_t b = 0; b < secret_sync_buckets; ++b)
    if (mine.buckets[b] != theirs.buckets[b])
      result.buckets.push_back(b);
  return result;
}

/// The live rows of the chats `wanted` takes in the buckets named.
template <class Wanted>
caf::expected<std::vector<secret_entry>>
rows_where(sync_pointer self, Wanted wanted,
           const std::vector<uint32_t>& buckets) {
  std::vector<bool> in_bucket(secret_sync_buckets, false);
  for (auto b : buckets)
    if (b < secret_sync_buckets)
      in_bucket[b] = true;
  std::vector<secret_entry> result;
  if (auto err = scan_chats(self, wanted,
                            [&](const secret_entry& row, uint32_t bucket) {
                              if (in_bucket[bucket])
                                result.push_back(row);
                            }))
    return err;
  return result;
}

/// Answers `promise` with `compute()` once the local buffer flushed, so
/// that what it acknowledged from memory counts; or with the flush's error.
template <class T, class Compute>
void answer_after_flush(sync_pointer self,
                        caf::typed_response_promise<T> promise,
                        Compute compute) {
  self
    ->request(self->state.local, self->state.settings.timeout,
              flush_atom::value)
    .then(
      [promise, compute](ok_atom) mutable {
        caf::expected<T> result = compute();
        if (result)
          promise.deliver(std::move(*result));
        else
          promise.deliver(result.error());
      },
      [promise](caf::error& err) mutable { promise.deliver(err); });
}

using exchange_done = std::function<void(caf::expected<uint64_t>)>;

/// Sends `rows` to `to` in messages of at most `rows_per_message`; `done`
/// once all were taken, or with the first error.
template <class Handle>
void send_rows(sync_pointer self, const Handle& to,
               std::vector<secret_entry> rows,
               std::function<void(caf::error)> done) {
  if (rows.empty())
    return done(caf::none);
  struct progress {
    std::size_t open = 0;
    bool decided = false;
  };
  auto state = std::make_shared<progress>();
  for (std::size_t first = 0; first < rows.size();
       first += rows_per_message) {
    auto last = std::min(rows.size(), first + rows_per_message);
    std::vector<secret_entry> part(
      std::make_move_iterator(rows.begin() + first),
      std::make_move_iterator(rows.begin() + last));
    ++state->open;
    self
      ->request(to, self->state.settings.timeout, replica_atom::value,
                std::move(part), stamp_now(self->state.settings))
      .then(
        [state, done](ok_atom) {
          if (--state->open == 0 && !state->decided) {
            state->decided = true;
            done(caf::none);
          }
        },
        [state, done](caf::error& err) {
          if (!state->decided) {
            state->decided = true;
            done(std::move(err));
          }
        });
  }
}

/// Step 3: with the peer's rows of the differing buckets, gives each side
/// what it lacks or holds older.
void repair_buckets(sync_pointer self, std::size_t peer, node_actor gateway,
                    std::vector<uint32_t> buckets,
                    std::vector<secret_entry> theirs, exchange_done done) {
  auto mine = rows_where(self, shared_with(self, peer), buckets);
  if (!mine)
    return done(mine.error());
  std::unordered_map<secret_key, const secret_entry*, secret_key_hash> own;
  for (const auto& row : *mine)
    own.emplace(row.key(), &row);
  std::unordered_map<secret_key, const secret_entry*, secret_key_hash> other;
  for (const auto& row : theirs)
    other.emplace(row.key(), &row);
  std::vector<secret_entry> to_local;
  std::vector<secret_entry> to_peer;
  for (const auto& row : theirs) {
    auto i = own.find(row.key());
    if (i == own.end() || !(*i->second == row))
      to_local.push_back(row);
  }
  for (const auto& row : *mine) {
    auto i = other.find(row.key());
    if (i == other.end() || !(*i->second == row))
      to_peer.push_back(row);
  }
  // A key both hold differently is one repair, sent both ways.
  uint64_t repaired = to_local.size();
  for (const auto& row : to_peer)
    if (other.count(row.key()) == 0)
      ++repaired;
  auto open = std::make_shared<int>(2);
  auto failure = std::make_shared<caf::error>();
  auto finish = [open, failure, done, repaired](caf::error err) {
    if (err && !*failure)
      *failure = std::move(err);
    if (--*open == 0) {
      if (*failure)
        done(*failure);
      else
        done(repaired);
    }
  };
  send_rows(self, self->state.local, std::move(to_local), finish);
  send_rows(self, gateway, std::move(to_peer), finish);
}

/// Of the rows a peer handed off, queues on the local buffer (as copies)
/// those this node lacks or holds differently; `done(keys taken)`.
void take_handoff(sync_pointer self, std::vector<secret_entry> theirs,
                  exchange_done done) {
  std::unordered_map<secret_key, const secret_entry*, secret_key_hash> other;
  for (const auto& row : theirs)
    other.emplace(row.key(), &row);
  std::unordered_set<secret_key, secret_key_hash> same;
  auto err = scan_chats(
    self, [](const routing_key&) { return true; },
    [&](const secret_entry& row, uint32_t) {
      auto i = other.find(row.key());
      if (i != other.end() && *i->second == row)
        same.insert(row.key());
    });
  if (err)
    return done(std::move(err));
  std::vector<secret_entry> taken;
  for (auto& row : theirs)
    if (same.count(row.key()) == 0)
      taken.push_back(std::move(row));
  uint64_t count = taken.size();
  send_rows(self, self->state.local, std::move(taken),
            [done, count](caf::error err) {
              if (err)
                done(std::move(err));
              else
                done(count);
            });
}

/// The exchange with a peer under another cluster list: a pull of what it
/// holds of the chats this node is a replica of under its own list. The
/// peer's digests of those chats first, then, after a local flush (so that
/// what the buffer holds counts), the rows of the buckets where this node's
/// own rows of its chats digest differently: a second peer that holds what
/// the first handed off sends nothing.
void handoff(sync_pointer self, const node_actor& gateway,
             exchange_done done) {
  const auto& settings = self->state.settings;
  auto asker = handoff_asker_of(settings.map, settings.self, settings.replicas);
  auto timeout = settings.timeout;
  auto fail = [done](caf::error& err) { done(std::move(err)); };
  auto take_rows = [self, gateway, asker, timeout, done,
                    fail](secret_buckets differing) {
    self
      ->request(gateway, timeout, handoff_atom::value, asker,
                std::move(differing))
      .then(
        [self, done](std::vector<secret_entry>& theirs) {
          take_handoff(self, std::move(theirs), done);
        },
        fail);
  };
  self->request(gateway, timeout, handoff_atom::value, asker)
    .then(
      [self, timeout, done, fail, take_rows](secret_digest& theirs) {
        if (auto bad = malformed(theirs))
          return done(std::move(*bad));
        self->request(self->state.local, timeout, flush_atom::value)
          .then(
            [self, done, take_rows, theirs = std::move(theirs)](ok_atom) {
              const auto& settings = self->state.settings;
              auto mine = digest_where(
                self,
                replicated_by(settings.map, settings.replicas, settings.self));
              if (!mine)
                return done(mine.error());
              auto differing = buckets_differing(*mine, theirs);
              if (differing.buckets.empty())
                return done(uint64_t{0});
              take_rows(std::move(differing));
            },
            fail);
      },
      fail);
}

/// One exchange with `peer` (steps 1 to 3 of the header).
void exchange(sync_pointer self, std::size_t peer, exchange_done done) {
  const auto& settings = self->state.settings;
  const auto& where = settings.map.nodes()[peer];
  auto timeout = settings.timeout;
  auto fail = [done](caf::error& err) { done(std::move(err)); };
  auto compare = [self, peer, timeout, done,
                  fail](const node_actor& gateway) {
    self
      ->request(gateway, timeout, digest_atom::value,
                self->state.settings.map.fingerprint(),
                uint64_t{self->state.settings.self})
      .then(
        [self, peer, timeout, done, fail, gateway](secret_digest& theirs) {
          if (auto bad = malformed(theirs))
            return done(std::move(*bad));
          self->request(self->state.local, timeout, flush_atom::value)
            .then(
              [self, peer, timeout, done, fail, gateway,
               theirs = std::move(theirs)](ok_atom) {
                auto mine = digest_where(self, shared_with(self, peer));
                if (!mine)
                  return done(mine.error());
                auto differing = buckets_differing(*mine, theirs);
                if (differing.buckets.empty())
                  return done(uint64_t{0});
                auto wanted = differing.buckets;
                self
                  ->request(gateway, timeout, digest_atom::value,
                            self->state.settings.map.fingerprint(),
                            uint64_t{self->state.settings.self},
                            std::move(differing))
                  .then(
                    [self, peer, done, gateway,
                     wanted](std::vector<secret_entry>& rows) {
                      repair_buckets(self, peer, gateway, wanted,
                                     std::move(rows), done);
                    },
                    fail);
              },
              fail);
        },
        [self, gateway, done](caf::error& err) {
          if (refused_for_list(err))
            return handoff(self, gateway, done);
          done(std::move(err));
        });
  };
  // Peers come from the peer watch, which connects; one it has not reached
  // is not compared with yet.
  if (!self->state.peers[peer])
    return done(make_error(errc::node_unreachable,
                           where.text() + " has not been reached yet"));
  compare(self->state.peers[peer]);
}

/// A release pass over the chats this node holds and does not replicate,
/// unless one runs (it then answers the waiters too).
void release(sync_pointer self) {
  run_release_pass<held_chat>(
    self, "secrets", released_kind::secrets, scan_held_chats,
    [](const held_chat& x) { return routing_key{key_kind::chat, x.chat}; },
    [self](const node_actor& gateway, const held_chat& x,
           std::function<void(caf::expected<bool>)> done) {
      std::vector<secret_key> keys;
      keys.reserve(x.rows.size());
      for (const auto& row : x.rows)
        keys.push_back(row.entry.key());
      auto mine = x.rows;
      self
        ->request(gateway, self->state.settings.timeout, replica_atom::value,
                  read_atom::value, std::move(keys))
        .then(
          [done, mine](std::vector<stored_secret>& theirs) {
            done(holds_at_least(theirs, mine));
          },
          [done](caf::error& err) { done(std::move(err)); });
    },
    [self](const held_chat& x, std::function<void(caf::expected<bool>)> done) {
      auto count = x.rows.size();
      self
        ->request(self->state.local, self->state.settings.timeout,
                  replica_atom::value, drop_atom::value, x.rows)
        .then([done, count](uint64_t dropped) { done(dropped == count); },
              [done](caf::error& err) { done(std::move(err)); });
    });
}

secret_sync_impl::behavior_type
secret_sync(sync_pointer self, std::shared_ptr<storage::database> db,
            secret_buffer_actor local, caf::actor caught_up,
            repair_settings settings) {
  start_repair(self, std::move(db), std::move(local), std::move(caught_up),
               std::move(settings),
               {"secrets", "keys", "chats", released_kind::secrets,
                "answering reads", "serving reads"},
               [self](std::size_t peer, sync_rounds::report_fn done) {
                 exchange(self, peer, std::move(done));
               });
  return {
    [self](digest_atom, uint64_t asked_under,
           uint64_t asker) -> caf::result<secret_digest> {
      const auto& settings = self->state.settings;
      if (auto refusal = refuse_asker(settings.map, settings.self, asked_under,
                                      asker))
        return std::move(*refusal);
      auto promise = self->make_response_promise<secret_digest>();
      answer_after_flush(self, promise, [self, asker] {
        return digest_where(self, shared_with(self, asker));
      });
      return promise;
    },
    [self](digest_atom, uint64_t asked_under, uint64_t asker,
           secret_buckets& buckets)
      -> caf::result<std::vector<secret_entry>> {
      const auto& settings = self->state.settings;
      if (auto refusal = refuse_asker(settings.map, settings.self, asked_under,
                                      asker))
        return std::move(*refusal);
      auto rows = rows_where(self, shared_with(self, asker), buckets.buckets);
      if (!rows)
        return std::move(rows.error());
      return std::move(*rows);
    },
    [self](handoff_atom, handoff_asker& asker)
      -> caf::result<secret_digest> {
      auto list = list_of_asker(asker);
      if (!list)
        return std::move(list.error());
      const auto& settings = self->state.settings;
      learn_asker_list(settings.lists.get(), settings.map, settings.self,
                       asker);
      auto promise = self->make_response_promise<secret_digest>();
      answer_after_flush(self, promise,
                         [self, asker, list = std::move(*list)] {
                           return digest_where(
                             self, replicated_by(list, asker.replicas,
                                                 asker.asker));
                         });
      return promise;
    },
    [self](handoff_atom, handoff_asker& asker, secret_buckets& buckets)
      -> caf::result<std::vector<secret_entry>> {
      auto list = list_of_asker(asker);
      if (!list)
        return std::move(list.error());
      auto promise = self->make_response_promise<std::vector<secret_entry>>();
      answer_after_flush(
        self, promise,
        [self, asker, list = std::move(*list),
         wanted = std::move(buckets.buckets)] {
          auto rows = rows_where(
            self, replicated_by(list, asker.replicas, asker.asker), wanted);
          if (rows)
            note_handed_off(*self->state.settings.counters, "secrets", "keys",
                            asker, rows->size());
          return rows;
        });
      return promise;
    },
    [self](peer_up_atom, uint64_t index, node_actor& gateway) {
      on_peer_up(self, index, gateway);
    },
    [self](peer_down_atom, uint64_t index) { on_peer_down(self, index); },
    [self](catch_up_atom, bool from_timer) { on_catch_up(self, from_timer); },
    [self](replica_atom, read_atom, std::vector<secret_key>& keys)
      -> caf::result<std::vector<stored_secret>> {
      auto promise = self->make_response_promise<std::vector<stored_secret>>();
      answer_after_flush(self, promise, [self, keys = std::move(keys)] {
        return storage::read_secrets(*self->state.db, keys);
      });
      return promise;
    },
    [self](repair_atom) {
      on_repair(self);
      release(self);
    },
    [self](release_keys_atom) { return join_release_pass(self, release); },
  };
}

} // namespace

secret_sync_actor spawn_secret_sync(caf::actor_system& sys,
                                    std::shared_ptr<storage::database> db,
                                    secret_buffer_actor local,
                                    caf::actor caught_up,
                                    repair_settings settings) {
  auto actor = sys.spawn<caf::detached>(secret_sync, std::move(db),
                                        std::move(local), std::move(caught_up),
                                        std::move(settings));
  return caf::actor_cast<secret_sync_actor>(actor);
}

} // namespace coalesce
