#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/client/connect.hpp>
#include <coalesce/messages/capture_stamp.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/routing_key.hpp>
#include <coalesce/node/coordinator_settings.hpp>
#include <coalesce/node/serving_lists.hpp>

/// What the coordinators of replicated keys share (sessions:
/// session_replicas.cpp, rooms: timeline_replicas.cpp): calls of one key
/// one at a time, calls answered once (and when the coordinator stops), a
/// request to one replica, the majority a round waits for, and ballots.
/// Internal to node/.
namespace coalesce::replica_calls {

/// Runs the calls of each key one at a time, in arrival order.
class key_queues {
public:
  using call_fn = std::function<void(std::function<void()> finish)>;

  /// Runs `call` once every earlier call of `key` finished; `call` gets
  /// what ends it.
  void in_turn(const std::string& key, call_fn call) {
    auto& queue = queues_[key];
    auto finish = [this, key] {
      auto i = queues_.find(key);
      if (i == queues_.end())
        return;
      i->second.pop_front();
      if (i->second.empty()) {
        queues_.erase(i);
        return;
      }
      // Moved out, not copied (it may hold a whole blob); the empty
      // function stays in front until its call finishes.
      auto next = std::move(i->second.front());
      next();
    };
    queue.push_back(
      [call = std::move(call), finish]() mutable { call(finish); });
    if (queue.size() == 1) {
      auto first = std::move(queue.front());
      first();
    }
  }

  /// Whether a call of `key` runs or waits.
  bool busy(const std::string& key) const {
    return queues_.count(key) > 0;
  }

private:
  std::unordered_map<std::string, std::deque<std::function<void()>>> queues_;
};

/// The calls under way, each answered once: by its own answer, or by
/// `fail_all` when the coordinator stops (CAF 0.17 drops a parked promise
/// silently).
class open_calls {
public:
  /// The function that answers the call behind `promise`; false when it
  /// was answered already.
  template <class... Ts>
  auto open(caf::typed_response_promise<Ts...> promise) {
    auto id = ++last_;
    open_.emplace(id, [promise](const caf::error& err) mutable {
      promise.deliver(err);
    });
    return [this, id, promise](auto&&... xs) {
      if (open_.erase(id) == 0)
        return false;
      auto target = promise; // delivering needs a non-const promise
      target.deliver(std::forward<decltype(xs)>(xs)...);
      return true;
    };
  }

  void fail_all(const caf::error& err) {
    auto open = std::move(open_);
    open_.clear();
    for (auto& [id, fail] : open)
      fail(err);
  }

private:
  uint64_t last_ = 0;
  std::unordered_map<uint64_t, std::function<void(const caf::error&)>> open_;
};

/// The answers of one round to every replica of a key, decided once:
/// `decide(true, failures)` when a majority of every group succeeded,
/// `decide(false, failures)` when some group can reach a majority no
/// more. A group is the key's replicas under one cluster list (one group
/// but while a change runs: joint quorums, serving_lists.hpp). Each answer
/// names its node; a node counts in every group that holds it. The
/// decision gets the failures rather than the tally, so that it need not
/// hold the tally that holds it.
class tally {
public:
  using decision = std::function<void(bool, const std::string&)>;

  tally(std::vector<std::vector<std::size_t>> groups, decision decide)
    : groups_(std::move(groups)), decide_(std::move(decide)) {
    for (const auto& group : groups_)
      counts_.push_back({group.size(), group.size() / 2 + 1, 0});
  }

  void succeeded(std::size_t node) {
    count(node, true);
    bool all = true;
    for (const auto& c : counts_)
      all = all && c.ok >= c.needed;
    if (all)
      settle(true);
  }

  void failed(std::size_t node, const std::string& where,
              const std::string& why) {
    failures_ += (failures_.empty() ? "" : "; ") + where + " " + why;
    count(node, false);
    for (const auto& c : counts_)
      if (c.ok < c.needed && c.ok + c.open < c.needed) {
        settle(false);
        return;
      }
  }

private:
  struct group_count {
    std::size_t open;
    std::size_t needed;
    std::size_t ok;
  };

  void count(std::size_t node, bool ok) {
    for (std::size_t g = 0; g < groups_.size(); ++g)
      if (std::find(groups_[g].begin(), groups_[g].end(), node)
          != groups_[g].end()) {
        --counts_[g].open;
        if (ok)
          ++counts_[g].ok;
      }
  }

  void settle(bool ok) {
    if (decided_)
      return;
    decided_ = true;
    // Released once used: what it holds goes with it.
    auto decide = std::move(decide_);
    decide_ = nullptr;
    decide(ok, failures_);
  }

  std::vector<std::vector<std::size_t>> groups_;
  std::vector<group_count> counts_;
  bool decided_ = false;
  std::string failures_;
  decision decide_;
};

/// A tally the replies of one round share: `make_tally(set, decide)` and
/// then `(*votes)->succeeded(node)` or `failed(node, ...)` from each reply.
using shared_tally = std::shared_ptr<std::unique_ptr<tally>>;

/// The replicas one round asks: every node of `groups`, each once, and
/// the groups a majority of each of which it needs.
struct replica_set {
  /// This node's list's replicas first, in their order.
  std::vector<std::size_t> nodes;
  std::vector<std::vector<std::size_t>> groups;
};

inline shared_tally make_tally(const replica_set& set,
                               tally::decision decide) {
  auto votes = std::make_shared<std::unique_ptr<tally>>();
  *votes = std::make_unique<tally>(set.groups, std::move(decide));
  return votes;
}

/// A ballot above every one seen (`seen`) and every one this clock gave:
/// microseconds with the node's id (`self`, which no other node of any
/// version of the list has) in the low bits.
inline uint64_t next_ballot(capture_clock& ballots, uint32_t self,
                            uint64_t seen) {
  auto above_seen = (((seen >> capture_clock::source_bits) + 1)
                     << capture_clock::source_bits)
                    | self;
  return std::max(ballots.next(self), above_seen);
}

/// What a coordinator of either kind keeps; `Local` is this node's replica
/// (a session I/O actor, the timeline store).
template <class Local>
struct coordinator_base {
  Local local;
  coordinator_settings settings;
  /// Each peer's gateway by its index in the cluster list; null while the
  /// peer watch does not know it up.
  std::vector<node_actor> peers;
  std::vector<bool> failing;
  /// The nodes past the end of the list, named by other lists in use.
  std::vector<node_endpoint> extra_nodes;
  key_queues queues;
  open_calls calls;
  /// Ballots: microseconds with this node's index in the low bits.
  capture_clock ballots;
};

// The coordinator's side of one request. `Self`'s state is a
// `coordinator_base` with a static `kind` naming the replicated data in the
// log ("sessions").

/// The node at `node`: in this node's list, or past its end one of the
/// nodes only another list served by a peer names (`extra_nodes`).
template <class Self>
const node_endpoint& node_at(Self* self, std::size_t node) {
  const auto& st = self->state;
  auto listed = st.settings.map.size();
  return node < listed ? st.settings.map.nodes()[node]
                       : st.extra_nodes[node - listed];
}

template <class Self>
std::string node_text(Self* self, std::size_t node) {
  return node_at(self, node).text();
}

/// The index a coordinator addresses `where` by: its place in this node's
/// list, or a place past the end kept for it from now on (its gateway,
/// whether it fails, its batches: `grow`).
template <class Self, class Grow>
std::size_t index_for(Self* self, const node_endpoint& where, Grow grow) {
  auto& st = self->state;
  if (auto listed = st.settings.map.index_of(where))
    return *listed;
  auto& extra = st.extra_nodes;
  auto i = std::find(extra.begin(), extra.end(), where);
  auto index = st.settings.map.size()
               + static_cast<std::size_t>(i - extra.begin());
  if (i == extra.end()) {
    extra.push_back(where);
    st.peers.resize(index + 1);
    st.failing.resize(index + 1, false);
    grow(index + 1);
  }
  return index;
}

/// The lists in use as this node sees them (`settings.lists`); null for
/// its own list alone.
template <class Self>
std::shared_ptr<const serving_view> lists_in_use(Self* self) {
  const auto& lists = self->state.settings.lists;
  return lists ? lists->current() : nullptr;
}

/// The generation of the lists in use as this node sees them (0 for its
/// own list alone): a request counted under one generation is answered ok
/// only while it is still the current one.
template <class Self>
uint64_t lists_generation(Self* self) {
  auto view = lists_in_use(self);
  return view ? view->generation : 0;
}

/// Whether a request counted under the lists of generation `counted_under`
/// may no longer be answered ok: the lists in use changed since, or this
/// node's view of them went stale (it was paused: serving_lists.hpp).
template <class Self>
bool lists_moved_on(Self* self, uint64_t counted_under) {
  const auto& lists = self->state.settings.lists;
  return lists_generation(self) != counted_under
         || (lists && lists->stale());
}

/// Whether a round counted under `counted_under` that failed with `err` is
/// made once more, counted anew: it got no majority (or one counted under
/// lists that moved on) while the lists in use changed, most often because
/// a replica refused it for a list this node had not counted yet and this
/// node counts it now. The client would only send the same request again;
/// a round made again answers it instead. Not while the lists are unknown
/// (the second round would be refused at once), and once only: a change
/// under way may take several rounds of refusals, and a request's answer
/// must come within its timeout.
template <class Self>
bool worth_another_round(Self* self, uint64_t counted_under,
                         const caf::error& err) {
  const auto& lists = self->state.settings.lists;
  return lists && err.category() == errc_category
         && err.code() == static_cast<uint8_t>(errc::no_quorum)
         && lists_moved_on(self, counted_under) && lists->current()->settled
         && lists->staleness().empty();
}

/// What failed in an outcome: `err` itself, or the error of an
/// expected; none when it succeeded.
inline caf::error failure_of(const caf::error& err) {
  return err;
}

template <class T>
caf::error failure_of(const caf::expected<T>& outcome) {
  return outcome ? caf::error{} : outcome.error();
}

/// Runs `round(done)`, and once more when its outcome failed as
/// `worth_another_round` takes it (counted from before the first round);
/// `done` gets the last round's outcome. For rounds that may run twice
/// (reads, claims a replica takes again alike); a session's write keeps
/// its delta for the second round itself (session_replicas.cpp).
/// `Outcome` is `caf::error` (none: ok) or a `caf::expected`.
template <class Outcome, class Self>
void in_rounds(Self* self, const char* what,
               std::function<void(std::function<void(Outcome)>)> round,
               std::function<void(Outcome)> done) {
  auto counted_under = lists_generation(self);
  round([self, what, round, done, counted_under](Outcome outcome) {
    auto err = failure_of(outcome);
    if (err && worth_another_round(self, counted_under, err)) {
      spdlog::debug("{}: {} is made once more, counted under the lists in "
                    "use now: {}",
                    std::decay_t<decltype(self->state)>::kind, what,
                    self->system().render(err));
      round(done);
      return;
    }
    done(std::move(outcome));
  });
}

/// An error while this node does not know which lists its peers serve
/// under, yet or any more (it was paused: its view is stale): a majority
/// under its own list alone may miss what was answered under another, so
/// it coordinates nothing then (the client goes to the next replica).
/// `what` names the key ("session s").
template <class Self>
std::optional<caf::error> lists_unknown(Self* self, const std::string& what) {
  const auto& lists = self->state.settings.lists;
  if (!lists)
    return std::nullopt;
  if (!lists->current()->settled)
    return make_error(errc::catching_up,
                      what
                        + ": this node has not yet heard from every peer "
                          "which cluster list it serves under; the next "
                          "replica serves it");
  if (auto why = lists->staleness(); !why.empty())
    return make_error(errc::catching_up,
                      what + ": this node " + why
                        + ", so it may not know which cluster list each "
                          "serves under; the next replica serves it");
  return std::nullopt;
}

/// The replicas of `key` a round asks, under this node's list and every
/// other list `settings.lists` sees served (joint quorums); `grow(n)`
/// makes room for `n` nodes in what the coordinator keeps by index.
template <class Self, class Grow>
replica_set replicas_under_every_list(Self* self, const routing_key& key,
                                      const serving_view* view, Grow grow) {
  const auto& settings = self->state.settings;
  replica_set result;
  result.nodes = settings.map.replica_indices(key, settings.replicas);
  result.groups.push_back(result.nodes);
  if (view == nullptr)
    return result;
  for (const auto& other : view->others) {
    std::vector<std::size_t> group;
    for (auto i : other.replica_indices(key, settings.replicas)) {
      auto index = index_for(self, other.nodes()[i], grow);
      group.push_back(index);
      if (std::find(result.nodes.begin(), result.nodes.end(), index)
          == result.nodes.end())
        result.nodes.push_back(index);
    }
    // A group of none could never be decided.
    if (!group.empty())
      result.groups.push_back(std::move(group));
  }
  return result;
}

template <class Self>
std::string render_failure(Self* self, const caf::error& err) {
  if (err == caf::sec::request_timeout)
    return "did not answer within "
           + caf::deep_to_string(self->state.settings.timeout);
  return "failed: " + self->system().render(err);
}

/// Counts a failed request to peer `node` and logs it when the peer
/// starts failing.
template <class Self>
void count_failure(Self* self, std::size_t node, const std::string& why) {
  self->state.settings.counters->request_failed(node);
  // No peer watch follows a node of another list: the next request
  // connects again rather than use a connection that may be gone.
  if (node >= self->state.settings.map.size())
    self->state.peers[node] = nullptr;
  if (!self->state.failing[node]) {
    self->state.failing[node] = true;
    spdlog::warn("{}: replica {} failed a request: {}",
                 std::decay_t<decltype(self->state)>::kind,
                 node_text(self, node), why);
  }
}

/// The stamp of a replica request sent now: the lists this node counts.
template <class Self>
list_stamp stamp_now(Self* self) {
  auto view = lists_in_use(self);
  return stamp_of(self->state.settings.map, view.get());
}

/// Whether `err` is replica `node`'s refusal of a request whose lists did
/// not include every one it counts (`errc::lists_not_counted`): this
/// node's coordinators count those lists from now on (a round counted
/// without them is answered ok no more: `lists_moved_on`). Such a refusal
/// is no failure of the peer.
template <class Self>
bool learn_uncounted(Self* self, std::size_t node, const caf::error& err) {
  auto named = uncounted_lists_of(err);
  if (!named)
    return false;
  const auto& settings = self->state.settings;
  if (!settings.lists)
    return true;
  std::vector<std::string> own;
  for (const auto& x : settings.map.nodes())
    own.push_back(x.text());
  named->erase(std::remove(named->begin(), named->end(), own), named->end());
  for (const auto& list : settings.lists->lists_named(std::move(*named))) {
    std::string text;
    for (const auto& x : list)
      text += (text.empty() ? "" : ", ") + x;
    spdlog::info("{}: replica {} counts cluster list {} that this node's "
                 "coordinators did not: they count it too from now on",
                 std::decay_t<decltype(self->state)>::kind,
                 node_text(self, node), text);
  }
  return true;
}

/// Sends `node` one replica request (`replica_atom, xs...`): to the local
/// replica, or to the peer's gateway (connecting first when the peer watch
/// knows none) with the lists this node counts (`list_stamp`), counting it
/// and its failure; then `answered(answer)` or `failed(why)`.
template <class Answer, class Self, class Answered, class Failed, class... Ts>
void ask(Self* self, std::size_t node, Answered answered, Failed failed,
         Ts... xs) {
  auto& st = self->state;
  if (node == st.settings.self) {
    self->request(st.local, caf::infinite, replica_atom::value, xs...)
      .then([answered](Answer& answer) mutable { answered(answer); },
            [self, failed](caf::error& err) mutable {
              failed(render_failure(self, err));
            });
    return;
  }
  st.settings.counters->request_sent(node);
  auto on_failure = [self, node, failed](const std::string& why) mutable {
    count_failure(self, node, why);
    failed(why);
  };
  const auto& where = node_at(self, node);
  with_peer_gateway(
    self, st.peers, node, where.host, where.port, st.settings.timeout,
    [self, node, answered, failed, on_failure,
     xs...](const node_actor& gateway) {
      self->request(gateway, self->state.settings.timeout,
                    replica_atom::value, xs..., stamp_now(self))
        .then(
          [self, node, answered](Answer& answer) mutable {
            self->state.failing[node] = false;
            answered(answer);
          },
          [self, node, failed, on_failure](caf::error& err) mutable {
            if (learn_uncounted(self, node, err))
              failed(render_failure(self, err));
            else
              on_failure(render_failure(self, err));
          });
    },
    on_failure);
}

/// The items a coordinator sends one peer in batches
/// (`replica_atom, Verb, std::vector<Item>`, answered by one `Answer` per
/// item in order), one batch at a time: the items that queue while a batch
/// is under way leave together once it is answered, so that the writes of
/// many keys cross the network in one message (group commit, as the
/// replica's own I/O actor does with the disk).
template <class Item, class Answer>
struct peer_batches {
  struct queued {
    Item item;
    std::function<void(Answer&)> answered;
    std::function<void(const std::string&)> failed;
  };

  struct of_peer {
    std::vector<queued> waiting;
    bool under_way = false;
  };

  /// Items per message at most, so that no message grows without bound.
  static constexpr std::size_t max_items = 128;

  /// By node index.
  std::vector<of_peer> peers;
};

template <class Answer, class Self, class Verb>
void send_batch(Self* self, std::size_t node, Verb verb);

/// Sends peer `node` (never this node) `item` in its next batch of
/// `self->state.batches`; then `answered(answer)` or `failed(why)`. A peer
/// that is failing gets each item at once, in a batch of its own, so that
/// an item never waits for a silent peer's timeout before its own.
template <class Answer, class Self, class Verb, class Item, class Answered,
          class Failed>
void ask_batched(Self* self, std::size_t node, Verb verb, Item item,
                 Answered answered, Failed failed) {
  auto& peer = self->state.batches.peers[node];
  peer.waiting.push_back({std::move(item), std::move(answered),
                          std::move(failed)});
  if (!peer.under_way || self->state.failing[node])
    send_batch<Answer>(self, node, verb);
}

template <class Answer, class Self, class Verb>
void send_batch(Self* self, std::size_t node, Verb verb) {
  auto& st = self->state;
  auto& peer = st.batches.peers[node];
  using queued = typename std::decay_t<decltype(peer.waiting)>::value_type;
  auto count = std::min(peer.waiting.size(),
                        std::decay_t<decltype(st.batches)>::max_items);
  if (count == 0)
    return;
  std::vector<decltype(queued::item)> items;
  auto callers = std::make_shared<std::vector<queued>>();
  for (std::size_t i = 0; i < count; ++i) {
    items.push_back(std::move(peer.waiting[i].item));
    callers->push_back(std::move(peer.waiting[i]));
  }
  peer.waiting.erase(peer.waiting.begin(),
                     peer.waiting.begin() + static_cast<std::ptrdiff_t>(count));
  peer.under_way = true;
  st.settings.counters->request_sent(node);
  // The next batch leaves when this one is answered, whichever way.
  auto next = [self, node, verb] {
    auto& peer = self->state.batches.peers[node];
    peer.under_way = false;
    if (!peer.waiting.empty())
      send_batch<Answer>(self, node, verb);
  };
  auto refused = [callers, next](const std::string& why) {
    for (auto& caller : *callers)
      caller.failed(why);
    next();
  };
  auto fail_all = [self, node, refused](const std::string& why) {
    count_failure(self, node, why);
    refused(why);
  };
  const auto& where = node_at(self, node);
  with_peer_gateway(
    self, st.peers, node, where.host, where.port, st.settings.timeout,
    [self, node, verb, callers, next, fail_all, refused,
     items = std::move(items)](const node_actor& gateway) mutable {
      self->request(gateway, self->state.settings.timeout,
                    replica_atom::value, verb, std::move(items),
                    stamp_now(self))
        .then(
          [self, node, callers, next,
           fail_all](std::vector<Answer>& answers) mutable {
            if (answers.size() != callers->size()) {
              fail_all("answered " + std::to_string(answers.size()) + " of "
                       + std::to_string(callers->size())
                       + " items of a batch");
              return;
            }
            self->state.failing[node] = false;
            for (std::size_t i = 0; i < answers.size(); ++i)
              (*callers)[i].answered(answers[i]);
            next();
          },
          [self, node, fail_all, refused](caf::error& err) mutable {
            if (learn_uncounted(self, node, err))
              refused(render_failure(self, err));
            else
              fail_all(render_failure(self, err));
          });
    },
    fail_all);
}

} // namespace coalesce::replica_calls
