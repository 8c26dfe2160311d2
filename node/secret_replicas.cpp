#include <coalesce/node/secret_replicas.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <type_traits>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/capture_stamp.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/node/cluster_options.hpp>

namespace coalesce {

namespace {

struct secret_replicas_state {
  static inline const char* name = "secret_replicas";
  secret_buffer_actor local;
  secret_replica_settings settings;
  /// Each peer's gateway by its index in the cluster list; null while the
  /// peer watch does not know it up.
  std::vector<node_actor> peers;
  /// Whether each peer's last request failed: a failure is logged when a
  /// peer starts failing, not for every request.
  std::vector<bool> failing;
  /// How to fail each request under way, so that stopping answers it.
  uint64_t last_decision = 0;
  std::unordered_map<uint64_t, std::function<void(const caf::error&)>> open;
  capture_clock stamps;
};

static_assert(cluster_map::node_id_limit == capture_clock::client_source,
              "a stamp's source is a node's id or the client's");

using replicas_pointer
  = secret_replicas_actor::stateful_pointer<secret_replicas_state>;

/// Which nodes hold which items of a batch: `positions[node]` are the
/// items node `node` replicates, `chats[i]` the chat (quorum group) of item
/// i, `replicas_of[chat]` how many replicas the chat has.
struct replica_plan {
  std::map<std::size_t, std::vector<std::size_t>> positions;
  std::vector<std::size_t> chat_of;
  std::vector<std::size_t> replicas_of_chat;
};

template <class T, class ChatOf>
replica_plan plan_for(replicas_pointer self, const std::vector<T>& items,
                      ChatOf chat_of) {
  const auto& settings = self->state.settings;
  replica_plan plan;
  std::unordered_map<std::string, std::size_t> chats;
  std::vector<std::vector<std::size_t>> nodes_of_chat;
  plan.chat_of.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& chat = chat_of(items[i]);
    auto [where, added] = chats.emplace(chat, nodes_of_chat.size());
    if (added) {
      nodes_of_chat.push_back(settings.map.replica_indices(
        routing_key{key_kind::chat, chat}, settings.replicas));
      plan.replicas_of_chat.push_back(nodes_of_chat.back().size());
    }
    plan.chat_of.push_back(where->second);
    for (auto node : nodes_of_chat[where->second])
      plan.positions[node].push_back(i);
  }
  return plan;
}

/// Counts the answers of one replicated request per chat and decides it
/// once: `ok` when every chat has a majority, the failure when some chat
/// can no longer get one.
class quorum {
public:
  explicit quorum(const replica_plan& plan)
    : chat_of_(plan.chat_of),
      answered_(plan.replicas_of_chat.size(), 0),
      open_(plan.replicas_of_chat),
      needed_(plan.replicas_of_chat.size()) {
    for (std::size_t c = 0; c < needed_.size(); ++c)
      needed_[c] = plan.replicas_of_chat[c] / 2 + 1;
    short_ = needed_.size();
  }

  /// Node answered for the items at `positions`; true once every chat has
  /// its majority (the first time only).
  bool answered(const std::vector<std::size_t>& positions) {
    for (auto c : chats_in(positions)) {
      --open_[c];
      if (++answered_[c] == needed_[c])
        --short_;
    }
    return settle(short_ == 0);
  }

  /// Node `where` failed (`why`) for the items at `positions`; true once
  /// some chat can no longer reach its majority (the first time only).
  bool failed(const std::string& where, const std::string& why,
              const std::vector<std::size_t>& positions) {
    failures_ += (failures_.empty() ? "" : "; ") + where + " " + why;
    bool lost = false;
    for (auto c : chats_in(positions)) {
      --open_[c];
      if (answered_[c] < needed_[c] && answered_[c] + open_[c] < needed_[c])
        lost = true;
    }
    return settle(lost);
  }

  const std::string& failures() const {
    return failures_;
  }

private:
  std::vector<std::size_t> chats_in(const std::vector<std::size_t>& positions) {
    std::vector<std::size_t> result;
    std::vector<bool> seen(needed_.size(), false);
    for (auto i : positions)
      if (!seen[chat_of_[i]]) {
        seen[chat_of_[i]] = true;
        result.push_back(chat_of_[i]);
      }
    return result;
  }

  bool settle(bool decided) {
    if (!decided || decided_)
      return false;
    decided_ = true;
    return true;
  }

  std::vector<std::size_t> chat_of_;
  std::vector<std::size_t> answered_;
  std::vector<std::size_t> open_;
  std::vector<std::size_t> needed_;
  std::size_t short_ = 0;
  bool decided_ = false;
  std::string failures_;
};

caf::error no_quorum(const quorum& q) {
  return make_error(errc::no_quorum, "failed replicas: " + q.failures());
}

std::string render_failure(replicas_pointer self, const caf::error& err) {
  if (err == caf::sec::request_timeout)
    return "did not answer within "
           + caf::deep_to_string(self->state.settings.timeout);
  return "failed: " + self->system().render(err);
}

/// Runs `then(gateway)` with peer `node`'s gateway, connecting first when
/// none is known (the peer watch dropped it, or never had it): CAF's
/// middleman actor answers at once for a node it is connected to.
template <class Then, class Failed>
void with_peer(replicas_pointer self, std::size_t node, Then then,
               Failed failed) {
  const auto& where = self->state.settings.map.nodes()[node];
  with_peer_gateway(self, self->state.peers, node, where.host, where.port,
                    self->state.settings.timeout, std::move(then),
                    std::move(failed));
}

/// Sends each replica its part of `items` (`replica_atom, part`: to this
/// node's buffer, or to a peer's gateway), then `on_answer(node, answer)`
/// or `on_failure(node, why)`.
template <class Answer, class T, class OnAnswer, class OnFailure>
void to_replicas(replicas_pointer self, const replica_plan& plan,
                 const std::vector<T>& items, OnAnswer on_answer,
                 OnFailure on_failure) {
  const auto& st = self->state;
  for (const auto& [node, positions] : plan.positions) {
    std::vector<T> part;
    part.reserve(positions.size());
    for (auto i : positions)
      part.push_back(items[i]);
    auto node_index = node;
    auto remote = node != st.settings.self;
    auto answered = [self, on_answer, node_index,
                     remote](Answer& answer) mutable {
      if (remote)
        self->state.failing[node_index] = false;
      on_answer(node_index, answer);
    };
    auto failed = [self, on_failure, node_index,
                   remote](const std::string& why) mutable {
      if (remote) {
        self->state.settings.counters->request_failed(node_index);
        if (!self->state.failing[node_index]) {
          self->state.failing[node_index] = true;
          spdlog::warn("secrets: replica {} failed a request: {}",
                       self->state.settings.map.nodes()[node_index].text(),
                       why);
        }
      }
      on_failure(node_index, why);
    };
    auto errored = [self, failed](caf::error& err) mutable {
      failed(render_failure(self, err));
    };
    if (node == st.settings.self) {
      if (std::is_same_v<Answer, std::vector<secret_lookup>>
          && st.settings.catching_up) {
        on_failure(node_index, "is catching up from its peers");
        continue;
      }
      // In process, it always answers (back-pressure may take a while).
      self->request(st.local, caf::infinite, replica_atom::value,
                    std::move(part))
        .then(answered, errored);
      continue;
    }
    st.settings.counters->request_sent(node);
    with_peer(
      self, node,
      [self, part = std::move(part), answered,
       errored](const node_actor& gateway) mutable {
        self->request(gateway, self->state.settings.timeout,
                      replica_atom::value, std::move(part))
          .then(answered, errored);
      },
      failed);
  }
}

/// Opens a decision: `done` gets the answer or the error once, and an exit
/// of the actor before that answers `stopped_before_answer` (CAF 0.17
/// drops a parked promise silently). Returns what decides it: false when it
/// was already decided.
template <class T>
auto open_decision(replicas_pointer self,
                   std::function<void(caf::expected<T>)> done) {
  auto id = ++self->state.last_decision;
  self->state.open.emplace(id, [done](const caf::error& err) {
    done(caf::expected<T>{err});
  });
  return [self, id, done](caf::expected<T> outcome) {
    if (self->state.open.erase(id) == 0)
      return false;
    done(std::move(outcome));
    return true;
  };
}

/// `open_decision` delivering to `promise`.
auto decision_for(replicas_pointer self,
                  caf::typed_response_promise<ok_atom> promise) {
  return open_decision<ok_atom>(
    self, [promise](caf::expected<ok_atom> outcome) mutable {
      if (outcome)
        promise.deliver(*outcome);
      else
        promise.deliver(outcome.error());
    });
}

/// The failure half of a replicated request: decides it `no_quorum` once
/// some chat can no longer get its majority.
template <class Decide>
auto failing_quorum(replicas_pointer self, std::shared_ptr<quorum> votes,
                    std::shared_ptr<replica_plan> plan, Decide decide) {
  return [self, votes, plan, decide](std::size_t node,
                                     const std::string& why) mutable {
    if (votes->failed(self->state.settings.map.nodes()[node].text(), why,
                      plan->positions[node]))
      decide(no_quorum(*votes));
  };
}

/// How far ahead of this node's clock a client's stamp may be.
constexpr uint64_t stamp_skew_limit_us = 60'000'000;

caf::result<ok_atom> replicate(replicas_pointer self,
                               std::vector<secret_entry> entries) {
  if (entries.empty())
    return ok_atom::value;
  // A capture the client stamped keeps its stamp, so that a retry of it
  // through another coordinator, or a copy that waited in a hung one, never
  // overtakes a later capture; a stamp from a clock far ahead is replaced.
  auto latest_accepted = (capture_clock::now_us() + stamp_skew_limit_us)
                         << capture_clock::source_bits;
  for (auto& entry : entries) {
    if (entry.stamp == 0 || entry.stamp > latest_accepted)
      entry.stamp = self->state.stamps.next(
        self->state.settings.map.id_of(self->state.settings.self));
    entry.ts_stamp = entry.message_ts != 0 ? entry.stamp : 0;
  }
  auto plan = plan_for(self, entries,
                       [](const secret_entry& x) -> const std::string& {
                         return x.chat;
                       });
  auto promise = self->make_response_promise<ok_atom>();
  auto decide = decision_for(self, promise);
  auto votes = std::make_shared<quorum>(plan);
  auto positions = std::make_shared<replica_plan>(plan);
  to_replicas<ok_atom>(
    self, plan, entries,
    [votes, positions, decide](std::size_t node, ok_atom) mutable {
      if (votes->answered(positions->positions[node]))
        decide(ok_atom::value);
    },
    failing_quorum(self, votes, positions, decide));
  return promise;
}

/// Two replicas' answers for one key, combined as their rows would merge
/// (coalesce/storage/secret_merge.hpp): the secret of the greater stamp,
/// the known message time of the greater stamp; equal stamps with
/// different values (unstamped rows) go to the greater value, so that every
/// coordinator picks alike.
secret_lookup merged(const secret_lookup& x, const secret_lookup& y) {
  if (!x.found)
    return y;
  if (!y.found)
    return x;
  auto y_wins = y.stamp > x.stamp || (y.stamp == x.stamp && y.secret > x.secret);
  auto result = y_wins ? y : x;
  const auto& other = y_wins ? x : y;
  if (other.message_ts != 0
      && (result.message_ts == 0 || other.ts_stamp > result.ts_stamp
          || (other.ts_stamp == result.ts_stamp
              && other.message_ts > result.message_ts))) {
    result.message_ts = other.message_ts;
    result.ts_stamp = other.ts_stamp;
  }
  return result;
}

using lookups_done
  = std::function<void(caf::expected<std::vector<secret_lookup>>)>;

/// Asks every replica of the keys' chats; `done` once a majority of each
/// chat's replicas answered, merged.
void read_quorum(replicas_pointer self, std::vector<secret_key> keys,
                 lookups_done done) {
  if (keys.empty())
    return done(std::vector<secret_lookup>{});
  auto plan = plan_for(self, keys,
                       [](const secret_key& x) -> const std::string& {
                         return x.chat;
                       });
  auto decide = open_decision<std::vector<secret_lookup>>(self,
                                                          std::move(done));
  auto votes = std::make_shared<quorum>(plan);
  auto positions = std::make_shared<replica_plan>(plan);
  auto result = std::make_shared<std::vector<secret_lookup>>(keys.size());
  to_replicas<std::vector<secret_lookup>>(
    self, plan, keys,
    [votes, positions, result,
     decide](std::size_t node, std::vector<secret_lookup>& found) mutable {
      const auto& where = positions->positions[node];
      for (std::size_t i = 0; i < where.size() && i < found.size(); ++i)
        (*result)[where[i]] = merged((*result)[where[i]], found[i]);
      if (votes->answered(where))
        decide(*result);
    },
    failing_quorum(self, votes, positions, decide));
}

/// Flushes every node (`replica_atom, flush_atom` to each peer, `flush` to
/// this node's buffer): answered `ok` once all but at most ⌊(r-1)/2⌋ of
/// them flushed, so that every chat's replica set (r nodes) has a majority
/// that flushed; `no_quorum` once more failed.
caf::result<ok_atom> flush_replicas(replicas_pointer self,
                                    std::optional<caf::timespan> deadline) {
  const auto& settings = self->state.settings;
  auto nodes = settings.map.size();
  auto copies = std::min(settings.replicas, nodes);
  auto may_fail = (copies - 1) / 2;
  struct tally {
    std::size_t answered = 0;
    std::size_t failed = 0;
    std::string failures;
  };
  auto counts = std::make_shared<tally>();
  auto promise = self->make_response_promise<ok_atom>();
  auto decide = decision_for(self, promise);
  auto answered = [counts, nodes, may_fail, decide](ok_atom) mutable {
    if (++counts->answered == nodes - may_fail)
      decide(ok_atom::value);
  };
  auto failed = [self, counts, may_fail, decide](std::size_t node,
                                                 const std::string& why) mutable {
    if (node != self->state.settings.self)
      self->state.settings.counters->request_failed(node);
    counts->failures += (counts->failures.empty() ? "" : "; ")
                        + self->state.settings.map.nodes()[node].text() + " "
                        + why;
    if (++counts->failed == may_fail + 1)
      decide(make_error(errc::no_quorum,
                        "failed replicas: " + counts->failures));
  };
  auto timeout = deadline ? *deadline : settings.flush_timeout;
  for (std::size_t node = 0; node < nodes; ++node) {
    auto errored = [self, failed, node](caf::error& err) mutable {
      failed(node, render_failure(self, err));
    };
    if (node == settings.self) {
      if (deadline)
        self->request(self->state.local, caf::infinite, flush_atom::value,
                      *deadline)
          .then(answered, errored);
      else
        self->request(self->state.local, caf::infinite, flush_atom::value)
          .then(answered, errored);
      continue;
    }
    settings.counters->request_sent(node);
    with_peer(
      self, node,
      [self, timeout, answered, errored](const node_actor& gateway) mutable {
        self->request(gateway, timeout, replica_atom::value, flush_atom::value)
          .then(answered, errored);
      },
      [failed, node](const std::string& why) mutable { failed(node, why); });
  }
  return promise;
}

/// Answers every request still under way, then stops.
void stop(replicas_pointer self, const caf::error& reason) {
  auto open = std::move(self->state.open);
  self->state.open.clear();
  for (auto& [id, fail] : open)
    fail(make_error(errc::stopped_before_answer,
                    "the node's secrets coordinator stopped"));
  self->quit(reason);
}

secret_replicas_actor::behavior_type
secret_replicas(replicas_pointer self, secret_buffer_actor local,
                secret_replica_settings settings) {
  auto& st = self->state;
  st.local = std::move(local);
  st.peers.resize(settings.map.size());
  st.failing.resize(settings.map.size(), false);
  self->set_exit_handler(
    [self](caf::exit_msg& msg) { stop(self, msg.reason); });
  st.settings = std::move(settings);
  return {
    [self](queue_atom, std::vector<secret_entry>& entries) {
      return replicate(self, std::move(entries));
    },
    [self](queue_atom, secret_entry& entry) {
      std::vector<secret_entry> entries;
      entries.push_back(std::move(entry));
      return replicate(self, std::move(entries));
    },
    [self](lookup_atom, std::vector<secret_key>& keys)
      -> caf::result<std::vector<secret_lookup>> {
      auto promise = self->make_response_promise<std::vector<secret_lookup>>();
      read_quorum(self, std::move(keys),
                  [promise](caf::expected<std::vector<secret_lookup>>
                              found) mutable {
                    if (found)
                      promise.deliver(std::move(*found));
                    else
                      promise.deliver(found.error());
                  });
      return promise;
    },
    [self](lookup_atom, secret_key& key) -> caf::result<secret_lookup> {
      auto promise = self->make_response_promise<secret_lookup>();
      std::vector<secret_key> keys;
      keys.push_back(std::move(key));
      read_quorum(self, std::move(keys),
                  [promise](caf::expected<std::vector<secret_lookup>>
                              found) mutable {
                    if (found)
                      promise.deliver(std::move(found->front()));
                    else
                      promise.deliver(found.error());
                  });
      return promise;
    },
    [self](replica_atom, std::vector<secret_entry>& entries) {
      return self->delegate(self->state.local, replica_atom::value,
                            std::move(entries));
    },
    [self](replica_atom, std::vector<secret_key>& keys)
      -> caf::result<std::vector<secret_lookup>> {
      if (self->state.settings.catching_up)
        return make_error(errc::catching_up,
                          "it restarted without a clean stop and answers no "
                          "read until it has compared with every peer");
      return self->delegate(self->state.local, replica_atom::value,
                            std::move(keys));
    },
    [self](flush_atom) { return flush_replicas(self, std::nullopt); },
    [self](flush_atom, caf::timespan deadline) -> caf::result<ok_atom> {
      if (deadline < caf::timespan{0})
        return self->delegate(self->state.local, flush_atom::value, deadline);
      return flush_replicas(self, deadline);
    },
    [self](replica_atom, flush_atom) {
      return self->delegate(self->state.local, flush_atom::value);
    },
    [self](seal_atom) {
      return self->delegate(self->state.local, seal_atom::value);
    },
    [self](stats_atom) {
      return self->delegate(self->state.local, stats_atom::value);
    },
    [self](peer_up_atom, uint64_t index, node_actor& gateway) {
      if (index < self->state.peers.size())
        self->state.peers[index] = std::move(gateway);
    },
    [self](peer_down_atom, uint64_t index) {
      if (index < self->state.peers.size())
        self->state.peers[index] = nullptr;
    },
    [self](caught_up_atom) { self->state.settings.catching_up = false; },
  };
}

} // namespace

secret_replicas_actor spawn_secret_replicas(caf::actor_system& sys,
                                            secret_buffer_actor local,
                                            secret_replica_settings settings) {
  return sys.spawn(secret_replicas, std::move(local), std::move(settings));
}

} // namespace coalesce
