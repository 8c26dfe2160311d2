#include <coalesce/node/secret_replicas.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/secret_buffer.hpp>
#include <coalesce/client/connect.hpp>
#include <coalesce/messages/capture_stamp.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/node/cluster_options.hpp>
#include <coalesce/node/replica_calls.hpp>

namespace coalesce {

namespace {

/// The copies a coordinator sends one peer, one message at a time: the
/// parts of requests that queue while a message is under way leave together
/// once it is answered, so that the copies of many requests cross the
/// network in one message (as sessions' writes do:
/// replica_calls::peer_batches). A peer that is failing gets each part at
/// once, so that no part waits for a silent peer's timeout before its own;
/// while the lists change, each part leaves at once in a message of its
/// own (`lists_changing`).
struct copy_outbox {
  struct part {
    std::vector<secret_entry> entries;
    /// When its request gives up on this peer: a message carrying it
    /// waits no longer, whatever waited with it.
    std::chrono::steady_clock::time_point due;
    std::function<void()> answered;
    std::function<void(const std::string&)> failed;
  };
  std::vector<part> waiting;
  std::size_t under_way = 0;
};

/// Entries per message at most (unless one part alone has more), so that
/// no message grows without bound.
constexpr std::size_t max_copies_per_message = 4096;

struct secret_replicas_state {
  static inline const char* name = "secret_replicas";
  /// What the shared coordinator calls (replica_calls.hpp) name in logs.
  static inline const char* kind = "secrets";
  secret_buffer_actor local;
  secret_replica_settings settings;
  /// Each peer's gateway by its index in the cluster list; null while the
  /// peer watch does not know it up.
  std::vector<node_actor> peers;
  /// Whether each peer's last request failed: a failure is logged when a
  /// peer starts failing, not for every request.
  std::vector<bool> failing;
  /// The nodes past the end of the list, named by other lists in use.
  std::vector<node_endpoint> extra_nodes;
  /// Each peer's copies waiting and under way, by index.
  std::vector<copy_outbox> outboxes;
  /// How to fail each request under way, so that stopping answers it.
  uint64_t last_decision = 0;
  std::unordered_map<uint64_t, std::function<void(const caf::error&)>> open;
  capture_clock stamps;
};

static_assert(cluster_map::node_id_limit == capture_clock::client_source,
              "a stamp's source is a node's id or the client's");

using replicas_pointer
  = secret_replicas_actor::stateful_pointer<secret_replicas_state>;

using replica_calls::count_failure;
using replica_calls::render_failure;

/// Which nodes hold which items of a batch: `positions[node]` are the
/// items node `node` replicates; each group is the replicas of one chat
/// under one of the lists in use (one list but while it changes:
/// serving_lists.hpp), and a request needs a majority of every group.
struct replica_plan {
  std::map<std::size_t, std::vector<std::size_t>> positions;
  /// The size of each group.
  std::vector<std::size_t> group_sizes;
  /// The groups each node is one of.
  std::map<std::size_t, std::vector<std::size_t>> groups_of_node;
};

template <class T, class ChatOf>
replica_plan plan_for(replicas_pointer self, const std::vector<T>& items,
                      ChatOf chat_of) {
  auto view = replica_calls::lists_in_use(self);
  replica_plan plan;
  std::unordered_map<std::string, std::vector<std::size_t>> nodes_of_chat;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& chat = chat_of(items[i]);
    auto [where, added] = nodes_of_chat.emplace(chat,
                                                std::vector<std::size_t>{});
    if (added) {
      auto set = replica_calls::replicas_under_every_list(
        self, routing_key{key_kind::chat, chat}, view.get(),
        [](std::size_t) {});
      where->second = set.nodes;
      for (const auto& group : set.groups) {
        for (auto node : group)
          plan.groups_of_node[node].push_back(plan.group_sizes.size());
        plan.group_sizes.push_back(group.size());
      }
    }
    for (auto node : where->second)
      plan.positions[node].push_back(i);
  }
  return plan;
}

/// Counts the answers of one replicated request per group and decides it
/// once: `ok` when every group has a majority, the failure when some group
/// can no longer get one.
class quorum {
public:
  explicit quorum(const replica_plan& plan)
    : groups_of_node_(plan.groups_of_node),
      answered_(plan.group_sizes.size(), 0),
      open_(plan.group_sizes),
      needed_(plan.group_sizes.size()) {
    for (std::size_t g = 0; g < needed_.size(); ++g)
      needed_[g] = plan.group_sizes[g] / 2 + 1;
    short_ = needed_.size();
  }

  /// Node `node` answered; true once every group has its majority (the
  /// first time only).
  bool answered(std::size_t node) {
    for (auto g : groups_of_node_[node]) {
      --open_[g];
      if (++answered_[g] == needed_[g])
        --short_;
    }
    return settle(short_ == 0);
  }

  /// Node `node` at `where` failed (`why`); true once some group can no
  /// longer reach its majority (the first time only).
  bool failed(std::size_t node, const std::string& where,
              const std::string& why) {
    failures_ += (failures_.empty() ? "" : "; ") + where + " " + why;
    bool lost = false;
    for (auto g : groups_of_node_[node]) {
      --open_[g];
      if (answered_[g] < needed_[g] && answered_[g] + open_[g] < needed_[g])
        lost = true;
    }
    return settle(lost);
  }

  const std::string& failures() const {
    return failures_;
  }

private:
  bool settle(bool decided) {
    if (!decided || decided_)
      return false;
    decided_ = true;
    return true;
  }

  std::map<std::size_t, std::vector<std::size_t>> groups_of_node_;
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

/// Runs `then(gateway)` with peer `node`'s gateway, connecting first when
/// none is known (the peer watch dropped it, or never had it): CAF's
/// middleman actor answers at once for a node it is connected to.
template <class Then, class Failed>
void with_peer(replicas_pointer self, std::size_t node, Then then,
               Failed failed) {
  const auto& where = replica_calls::node_at(self, node);
  with_peer_gateway(self, self->state.peers, node, where.host, where.port,
                    self->state.settings.timeout, std::move(then),
                    std::move(failed));
}

copy_outbox& outbox_of(replicas_pointer self, std::size_t node) {
  auto& boxes = self->state.outboxes;
  if (node >= boxes.size())
    boxes.resize(node + 1);
  return boxes[node];
}

/// Whether peers serve under another list than this node's: a peer may
/// then refuse a chat it does not replicate under its own list
/// (`not_replica`), and a refusal fails the whole message it came in.
bool lists_changing(replicas_pointer self) {
  auto view = replica_calls::lists_in_use(self);
  return view && !view->others.empty();
}

void send_message(replicas_pointer self, std::size_t node,
                  std::size_t max_parts);

/// Sends peer `node` what waits in its outbox: in one message (up to
/// `max_copies_per_message` entries), or while the lists change each part
/// in its own, so that a refusal fails only the request it concerns.
void send_copies(replicas_pointer self, std::size_t node) {
  if (!lists_changing(self)) {
    send_message(self, node, std::numeric_limits<std::size_t>::max());
    return;
  }
  while (!outbox_of(self, node).waiting.empty())
    send_message(self, node, 1);
}

/// Sends peer `node` up to `max_parts` of the parts waiting in its outbox
/// (up to `max_copies_per_message` entries, one part at least) in one
/// message.
void send_message(replicas_pointer self, std::size_t node,
                  std::size_t max_parts) {
  auto& box = outbox_of(self, node);
  if (box.waiting.empty())
    return;
  std::vector<secret_entry> entries;
  entries.reserve(box.waiting.front().entries.size());
  auto parts = std::make_shared<std::vector<copy_outbox::part>>();
  auto due = box.waiting.front().due;
  std::size_t taken = 0;
  for (; taken < box.waiting.size() && taken < max_parts; ++taken) {
    auto& part = box.waiting[taken];
    if (taken > 0
        && entries.size() + part.entries.size() > max_copies_per_message)
      break;
    due = std::min(due, part.due);
    std::move(part.entries.begin(), part.entries.end(),
              std::back_inserter(entries));
    parts->push_back(std::move(part));
  }
  box.waiting.erase(box.waiting.begin(),
                    box.waiting.begin() + static_cast<std::ptrdiff_t>(taken));
  ++box.under_way;
  self->state.settings.counters->request_sent(node);
  // The parts that waited meanwhile leave once this message is answered,
  // whichever way (at once while the peer is failing).
  auto next = [self, node] {
    auto& box = outbox_of(self, node);
    --box.under_way;
    if (box.under_way == 0 || self->state.failing[node])
      send_copies(self, node);
  };
  auto refused = [parts, next](const std::string& why) {
    for (auto& part : *parts)
      part.failed(why);
    next();
  };
  auto fail_all = [self, node, refused](const std::string& why) {
    count_failure(self, node, why);
    refused(why);
  };
  auto timeout = std::max<caf::timespan>(
    std::chrono::duration_cast<caf::timespan>(
      due - std::chrono::steady_clock::now()),
    std::chrono::milliseconds{1});
  with_peer(
    self, node,
    [self, node, timeout, parts, next, fail_all, refused,
     entries = std::move(entries)](const node_actor& gateway) mutable {
      self
        ->request(gateway, timeout, replica_atom::value, std::move(entries),
                  replica_calls::stamp_now(self))
        .then(
          [self, node, parts, next](ok_atom) mutable {
            self->state.failing[node] = false;
            for (auto& part : *parts)
              part.answered();
            next();
          },
          [self, node, fail_all, refused](caf::error& err) mutable {
            if (replica_calls::learn_uncounted(self, node, err))
              refused(render_failure(self, err));
            else
              fail_all(render_failure(self, err));
          });
    },
    fail_all);
}

/// Sends each replica its part of `items` (`replica_atom, part`: to this
/// node's buffer, or to a peer's gateway; a queue's copies through the
/// peer's outbox), then `on_answer(node, answer)` or `on_failure(node,
/// why)`.
template <class Answer, class T, class OnAnswer, class OnFailure>
void to_replicas(replicas_pointer self, const replica_plan& plan,
                 const std::vector<T>& items, OnAnswer on_answer,
                 OnFailure on_failure) {
  const auto& st = self->state;
  auto changing = lists_changing(self);
  for (const auto& [node, positions] : plan.positions) {
    std::vector<T> part;
    part.reserve(positions.size());
    for (auto i : positions)
      part.push_back(items[i]);
    auto node_index = node;
    auto errored = [self, on_failure, node_index](caf::error& err) mutable {
      on_failure(node_index, render_failure(self, err));
    };
    if (node == st.settings.self) {
      if (std::is_same_v<Answer, std::vector<secret_lookup>>
          && st.settings.catching_up) {
        on_failure(node_index, "is catching up from its peers");
        continue;
      }
      // In process, it always answers (back-pressure may take a while);
      // no gateway checks its stamp.
      self->request(st.local, caf::infinite, replica_atom::value,
                    std::move(part), list_stamp{})
        .then([on_answer, node_index](Answer& answer) mutable {
                on_answer(node_index, answer);
              },
              errored);
      continue;
    }
    if constexpr (std::is_same_v<Answer, ok_atom>) {
      auto& box = outbox_of(self, node);
      box.waiting.push_back(copy_outbox::part{
        std::move(part),
        std::chrono::steady_clock::now() + st.settings.timeout,
        [on_answer, node_index]() mutable {
          ok_atom ok;
          on_answer(node_index, ok);
        },
        [on_failure, node_index](const std::string& why) mutable {
          on_failure(node_index, why);
        }});
      if (box.under_way == 0 || st.failing[node] || changing)
        send_copies(self, node);
    } else {
      st.settings.counters->request_sent(node);
      auto failed = [self, on_failure,
                     node_index](const std::string& why) mutable {
        count_failure(self, node_index, why);
        on_failure(node_index, why);
      };
      with_peer(
        self, node,
        [self, part = std::move(part), on_answer, on_failure, node_index,
         failed](const node_actor& gateway) mutable {
          self
            ->request(gateway, self->state.settings.timeout,
                      replica_atom::value, std::move(part),
                      replica_calls::stamp_now(self))
            .then(
              [self, on_answer, node_index](Answer& answer) mutable {
                self->state.failing[node_index] = false;
                on_answer(node_index, answer);
              },
              [self, on_failure, node_index,
               failed](caf::error& err) mutable {
                if (replica_calls::learn_uncounted(self, node_index, err))
                  on_failure(node_index, render_failure(self, err));
                else
                  failed(render_failure(self, err));
              });
        },
        failed);
    }
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
    if (votes->failed(node, replica_calls::node_text(self, node), why))
      decide(no_quorum(*votes));
  };
}

/// Copies `entries` to a majority of each chat's replicas, then `done`
/// (once). A round that failed while the lists in use moved on is made
/// once more (`replica_calls::in_rounds`): the entries keep their stamps,
/// and a replica that took a copy merges the same capture again to the
/// same row.
void queue_round(replicas_pointer self,
                 std::shared_ptr<const std::vector<secret_entry>> entries,
                 std::function<void(caf::expected<ok_atom>)> done) {
  auto counted_under = replica_calls::lists_generation(self);
  auto plan = plan_for(self, *entries,
                       [](const secret_entry& x) -> const std::string& {
                         return x.chat;
                       });
  auto votes = std::make_shared<quorum>(plan);
  auto positions = std::make_shared<replica_plan>(plan);
  auto ended = std::make_shared<bool>(false);
  auto end_round = [done, ended](caf::expected<ok_atom> outcome) {
    if (*ended)
      return;
    *ended = true;
    done(std::move(outcome));
  };
  to_replicas<ok_atom>(
    self, plan, *entries,
    [self, votes, end_round, counted_under](std::size_t node,
                                            ok_atom) mutable {
      if (!votes->answered(node))
        return;
      // Majorities counted under lists that changed meanwhile may be ones
      // the new list's replicas never meet (session_replicas.cpp says
      // how): not answered ok.
      if (replica_calls::lists_moved_on(self, counted_under))
        end_round(make_error(errc::no_quorum,
                             "the cluster lists the chats' replicas serve "
                             "under changed during the request (or this "
                             "node was paused meanwhile); queue the entries "
                             "again"));
      else
        end_round(ok_atom::value);
    },
    failing_quorum(self, votes, positions, end_round));
}

/// How far ahead of this node's clock a client's stamp may be.
constexpr uint64_t stamp_skew_limit_us = 60'000'000;

caf::result<ok_atom> replicate(replicas_pointer self,
                               std::vector<secret_entry> entries) {
  if (entries.empty())
    return ok_atom::value;
  // Checked here, not only by each replica: its copies may travel with
  // other requests' copies, which a bad entry must not fail.
  if (auto err = check_secret_entries(entries))
    return err;
  if (auto refusal = replica_calls::lists_unknown(self, "secrets"))
    return std::move(*refusal);
  // A capture the client stamped keeps its stamp, so that a retry of it
  // through another coordinator, or a copy that waited in a hung one, never
  // overtakes a later capture; a stamp from a clock far ahead is replaced.
  auto now = capture_clock::now_us();
  auto latest_accepted = (now + stamp_skew_limit_us)
                         << capture_clock::source_bits;
  auto source = self->state.settings.map.id_of(self->state.settings.self);
  for (auto& entry : entries) {
    if (entry.stamp == 0 || entry.stamp > latest_accepted)
      entry.stamp = self->state.stamps.next(source, now);
    entry.ts_stamp = entry.message_ts != 0 ? entry.stamp : 0;
  }
  auto promise = self->make_response_promise<ok_atom>();
  auto kept = std::make_shared<const std::vector<secret_entry>>(
    std::move(entries));
  replica_calls::in_rounds<caf::expected<ok_atom>>(
    self, "a queue",
    [self, kept](auto done) { queue_round(self, kept, done); },
    decision_for(self, promise));
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
void read_round(replicas_pointer self,
                std::shared_ptr<const std::vector<secret_key>> keys,
                lookups_done done) {
  if (keys->empty())
    return done(std::vector<secret_lookup>{});
  if (auto refusal = replica_calls::lists_unknown(self, "secrets"))
    return done(std::move(*refusal));
  auto plan = plan_for(self, *keys,
                       [](const secret_key& x) -> const std::string& {
                         return x.chat;
                       });
  auto decide = open_decision<std::vector<secret_lookup>>(self,
                                                          std::move(done));
  auto votes = std::make_shared<quorum>(plan);
  auto positions = std::make_shared<replica_plan>(plan);
  auto result = std::make_shared<std::vector<secret_lookup>>(keys->size());
  to_replicas<std::vector<secret_lookup>>(
    self, plan, *keys,
    [votes, positions, result,
     decide](std::size_t node, std::vector<secret_lookup>& found) mutable {
      const auto& where = positions->positions[node];
      for (std::size_t i = 0; i < where.size() && i < found.size(); ++i)
        (*result)[where[i]] = merged((*result)[where[i]], found[i]);
      if (votes->answered(node))
        decide(*result);
    },
    failing_quorum(self, votes, positions, decide));
}

/// `read_round`, made once more when it failed while the lists in use
/// moved on (`replica_calls::in_rounds`).
void read_quorum(replicas_pointer self, std::vector<secret_key> keys,
                 lookups_done done) {
  auto kept = std::make_shared<const std::vector<secret_key>>(std::move(keys));
  replica_calls::in_rounds<caf::expected<std::vector<secret_lookup>>>(
    self, "a lookup",
    [self, kept](auto round_done) { read_round(self, kept, round_done); },
    std::move(done));
}

/// Flushes every node of every list in use (`replica_atom, flush_atom` to
/// each peer, `flush` to this node's buffer): answered `ok` once, in each
/// list, all but at most ⌊(r-1)/2⌋ of its nodes flushed, so that every
/// chat's replica set (r nodes) under each list has a majority that
/// flushed; `no_quorum` once more failed in some list.
caf::result<ok_atom> flush_replicas(replicas_pointer self,
                                    std::optional<caf::timespan> deadline) {
  const auto& settings = self->state.settings;
  auto view = replica_calls::lists_in_use(self);
  // Each list's nodes, by the index this coordinator addresses them by.
  std::vector<std::vector<std::size_t>> lists(1);
  for (std::size_t node = 0; node < settings.map.size(); ++node)
    lists[0].push_back(node);
  if (view)
    for (const auto& other : view->others) {
      lists.emplace_back();
      for (const auto& where : other.nodes())
        lists.back().push_back(
          replica_calls::index_for(self, where, [](std::size_t) {}));
    }
  std::vector<std::size_t> nodes;
  for (const auto& list : lists)
    for (auto node : list)
      if (std::find(nodes.begin(), nodes.end(), node) == nodes.end())
        nodes.push_back(node);
  struct tally {
    std::vector<std::vector<std::size_t>> lists;
    std::vector<std::size_t> may_fail;
    std::vector<std::size_t> answered;
    std::vector<std::size_t> failed;
    std::string failures;
  };
  auto counts = std::make_shared<tally>();
  for (const auto& list : lists) {
    auto copies = std::min(settings.replicas, list.size());
    counts->may_fail.push_back((copies - 1) / 2);
  }
  counts->lists = std::move(lists);
  counts->answered.resize(counts->lists.size(), 0);
  counts->failed.resize(counts->lists.size(), 0);
  auto promise = self->make_response_promise<ok_atom>();
  auto decide = decision_for(self, promise);
  auto count = [counts](std::size_t node, std::vector<std::size_t>& of_list) {
    for (std::size_t i = 0; i < counts->lists.size(); ++i) {
      const auto& list = counts->lists[i];
      if (std::find(list.begin(), list.end(), node) != list.end())
        ++of_list[i];
    }
  };
  auto answered_by = [counts, count, decide](std::size_t node) mutable {
    count(node, counts->answered);
    for (std::size_t i = 0; i < counts->lists.size(); ++i)
      if (counts->answered[i] < counts->lists[i].size() - counts->may_fail[i])
        return;
    decide(ok_atom::value);
  };
  auto failed = [self, counts, count, decide](std::size_t node,
                                              const std::string& why) mutable {
    if (node != self->state.settings.self)
      self->state.settings.counters->request_failed(node);
    counts->failures += (counts->failures.empty() ? "" : "; ")
                        + replica_calls::node_text(self, node) + " " + why;
    count(node, counts->failed);
    for (std::size_t i = 0; i < counts->lists.size(); ++i)
      if (counts->failed[i] > counts->may_fail[i]) {
        decide(make_error(errc::no_quorum,
                          "failed replicas: " + counts->failures));
        return;
      }
  };
  auto timeout = deadline ? *deadline : settings.flush_timeout;
  for (auto node : nodes) {
    auto answered = [answered_by, node](ok_atom) mutable {
      answered_by(node);
    };
    auto errored = [self, failed, node](caf::error& err) mutable {
      replica_calls::learn_uncounted(self, node, err);
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
    // Copies answered to their clients may still wait in the peer's
    // outbox: they leave first, so that the flush covers them (a peer
    // handles one sender's messages in order).
    send_copies(self, node);
    settings.counters->request_sent(node);
    with_peer(
      self, node,
      [self, timeout, answered, errored](const node_actor& gateway) mutable {
        self
          ->request(gateway, timeout, replica_atom::value, flush_atom::value,
                    replica_calls::stamp_now(self))
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
    // Which lists the coordinator counted (`list_stamp`) the gateway
    // checked.
    [self](replica_atom, std::vector<secret_entry>& entries,
           list_stamp& stamp) {
      return self->delegate(self->state.local, replica_atom::value,
                            std::move(entries), std::move(stamp));
    },
    [self](replica_atom, std::vector<secret_key>& keys, list_stamp& stamp)
      -> caf::result<std::vector<secret_lookup>> {
      if (self->state.settings.catching_up)
        return make_error(errc::catching_up,
                          "it restarted without a clean stop and answers no "
                          "read until it has compared with every peer");
      return self->delegate(self->state.local, replica_atom::value,
                            std::move(keys), std::move(stamp));
    },
    [self](flush_atom) -> caf::result<ok_atom> {
      if (auto refusal = replica_calls::lists_unknown(self, "secrets"))
        return std::move(*refusal);
      return flush_replicas(self, std::nullopt);
    },
    [self](flush_atom, caf::timespan deadline) -> caf::result<ok_atom> {
      if (deadline < caf::timespan{0})
        return self->delegate(self->state.local, flush_atom::value, deadline);
      if (auto refusal = replica_calls::lists_unknown(self, "secrets"))
        return std::move(*refusal);
      return flush_replicas(self, deadline);
    },
    [self](replica_atom, flush_atom, const list_stamp&) {
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
