#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>

#include <coalesce/client/cluster_map.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/messages/replica_protocol.hpp>

/// The cluster lists a node's coordinators count majorities under: its own,
/// and every other list a peer of its list serves under (joint quorums).
///
/// While the list changes, nodes serve under two lists at once, and a
/// majority of a key's replicas under one list need not meet a majority
/// under the other (old {A, B, C}, new {A, B, D}: {B, C} and {A, D}). A
/// coordinator that counts a majority under every list it sees served
/// meets any coordinator that counts one under a single one of them, so
/// what either answered, the other reads. Only two coordinators that each
/// count a single, different list could miss each other, and a node counts
/// a single list only once every peer of its list answered that it serves
/// the same one.
///
/// A peer's last answer can be stale: it may have restarted under the new
/// list since. A coordinator counting the old list alone could then take a
/// majority of old replicas after the restarted peer read them in its
/// catch-up, a majority no new one meets once every node counts the new
/// list alone. So a peer restarting under a new list tells each peer in
/// its catch-up's first request (the handoff, `learn_asker_list`), a
/// request counted under a view that changed before its majority answered
/// is not answered ok (`replica_calls::lists_generation`), and the catch-up
/// runs a second pass once every peer knows.
///
/// A replica also checks what a coordinator counted: each replica request
/// carries the lists its coordinator counted (`list_stamp`), and a node's
/// gateway refuses one that lacks a list the node serves under or sees a
/// peer of its list serve under (`refuse_uncounted`), naming them. The
/// coordinator counts the lists such a refusal names from then on
/// (`lists_named`, for `max_silence` after the last refusal that named
/// each), so that a coordinator that did not learn of a change (paused,
/// or a node being removed, which no handoff request reaches) gets no
/// majority from replicas that did, whatever the timing.
///
/// The peer watch writes it (what each peer's answers to its pings name);
/// the coordinators read it on each round. Until every peer was asked once
/// (answered, or failed to) since this node started, the node cannot know
/// the lists in use, and its coordinators take no call (`settled`).
///
/// A view also goes stale: a node paused (SIGSTOP, a long stall) while the
/// others changed lists wakes with the answers it had before, and a node
/// being removed is no peer of the new list's nodes, so no handoff request
/// tells it. Its peers are asked every ping interval and each ask ends (an
/// answer, a failure, a timeout) within a `peer-timeout`: a peer whose
/// last ended ask was made longer than `max_silence` ago means this node
/// was not running, and its coordinators take no call, and answer none ok,
/// until every peer was asked again (`stale`). An ask counts from when it
/// was made: an answer reaching a node that wakes was given before the
/// pause. A pause shorter than that silence is told by the node's pause
/// watch (coalesce/node/pause_watch.hpp): its main loop's runs (`ran`),
/// whose absence makes the view stale at once, and a SIGCONT or a gap
/// between two runs (`woke`), which keeps it stale until every peer was
/// asked again.
namespace coalesce {

struct serving_view {
  /// Lists other than this node's that its coordinators count, each once:
  /// those peers of its list serve under, and those replicas' refusals
  /// named lately.
  std::vector<cluster_map> others;
  /// Each of `others`'s fingerprint, in its order.
  std::vector<uint64_t> others_fingerprints;
  /// Of `others`, those peers of its list serve under: what this node's
  /// gateway refuses a replica request whose coordinator did not count
  /// (the lists a refusal named go no further, or two nodes could keep
  /// naming a list to each other long after anyone served it).
  std::vector<cluster_map> served;
  /// Each of `served`'s fingerprint, in its order.
  std::vector<uint64_t> served_fingerprints;
  /// Whether every peer was asked once since start.
  bool settled = false;
  /// One more with every change of `others` or `settled`: a coordinator
  /// prepared under an older view prepares again.
  uint64_t generation = 0;
};

class serving_lists {
public:
  using clock = std::chrono::steady_clock;
  using time_source = std::function<clock::time_point()>;

  /// A node's view over `peers` peers (its list's other nodes, by the
  /// peer watch's numbering), stale once a peer went unasked for longer
  /// than `max_silence` (zero: never) by `now` (the steady clock; a test's
  /// own, to make time pass).
  explicit serving_lists(std::size_t peers,
                         clock::duration max_silence = clock::duration::zero(),
                         time_source now = clock::now)
    : lists_(peers), asked_(peers, false), heard_(peers, now()),
      max_silence_(max_silence), now_(std::move(now)),
      view_(std::make_shared<const serving_view>()) {
    if (peers == 0)
      publish();
  }

  /// A view for tests and for a node that watches nobody: settled, with
  /// `others` served.
  static std::shared_ptr<serving_lists>
  fixed(std::vector<cluster_map> others) {
    auto result = std::make_shared<serving_lists>(others.size());
    for (std::size_t i = 0; i < others.size(); ++i) {
      std::vector<std::string> nodes;
      for (const auto& node : others[i].nodes())
        nodes.push_back(node.text());
      result->peer_serves(i, std::move(nodes), true);
    }
    return result;
  }

  std::shared_ptr<const serving_view> current() {
    std::unique_lock<std::mutex> guard{mtx_};
    auto forgot = forget_named();
    auto view = view_;
    guard.unlock();
    if (forgot)
      tell_named();
    return view;
  }

  /// Calls `f` (not under the view's lock) after each change of the lists
  /// replicas' refusals named (`lists_named`, or one forgotten): the peer
  /// watch then reports what the coordinators count.
  void on_named(std::function<void()> f) {
    std::lock_guard<std::mutex> guard{mtx_};
    on_named_ = std::move(f);
  }

  /// Calls `f` (not under the view's lock) after each end of an ask is
  /// recorded (`peer_serves`, `peer_unanswered`, `peer_lost`): what waits
  /// for the view to settle or to be fresh again waits on.
  void on_heard(std::function<void()> f) {
    std::lock_guard<std::mutex> guard{mtx_};
    on_heard_ = std::move(f);
  }

  /// A replica refused a request because its coordinator did not count
  /// `lists` (each one's nodes, "host:port", in list order; none of them
  /// this node's own): its coordinators count them for `max_silence`
  /// (from the last refusal that named each; for good when that is zero).
  /// Returns those it did not count before.
  std::vector<std::vector<std::string>>
  lists_named(std::vector<std::vector<std::string>> lists) {
    std::unique_lock<std::mutex> guard{mtx_};
    std::vector<std::vector<std::string>> added;
    auto now = now_();
    for (auto& list : lists) {
      if (list.empty())
        continue;
      auto known = std::find_if(named_.begin(), named_.end(),
                                [&](const auto& x) { return x.first == list; });
      if (known != named_.end()) {
        known->second = now;
        continue;
      }
      added.push_back(list);
      named_.emplace_back(std::move(list), now);
    }
    if (added.empty())
      return added;
    publish();
    guard.unlock();
    tell_named();
    return added;
  }

  /// Peer `peer` answered an ask made at `asked_at` that it serves `nodes`
  /// ("host:port" in list order); `other` tells whether that differs from
  /// this node's list.
  void peer_serves(std::size_t peer, std::vector<std::string> nodes,
                   bool other,
                   std::optional<clock::time_point> asked_at = std::nullopt) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      // A view made for fewer peers (`fixed`) follows none past them.
      if (peer >= asked_.size())
        return;
      asked_[peer] = true;
      heard(peer, asked_at);
      if (other)
        lists_[peer] = std::move(nodes);
      else
        lists_[peer].reset();
      publish();
    }
    tell(on_heard_);
  }

  /// Peer `peer` could not be asked at `asked_at` (down, unreachable): it
  /// counts as asked, and the list it last named stays (it may serve under
  /// it yet).
  void peer_unanswered(std::size_t peer,
                       std::optional<clock::time_point> asked_at
                       = std::nullopt) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (peer >= asked_.size())
        return;
      heard(peer, asked_at);
      mark_asked(peer);
    }
    tell(on_heard_);
  }

  /// The connection to peer `peer` was lost: it counts as asked, but this
  /// tells nothing of when (a loss noticed on waking from a pause may be a
  /// restart under another list meanwhile): the view is no fresher.
  void peer_lost(std::size_t peer) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (peer >= asked_.size())
        return;
      mark_asked(peer);
    }
    tell(on_heard_);
  }

  /// This node was paused and woke at `at` (it was stopped and continued,
  /// or its own clock shows it did not run: coalesce/node/pause_watch.hpp).
  /// What its peers answered before may be out of date however short the
  /// pause was, so the view is stale until every peer was asked again
  /// since (an answer or a failure of an ask made at `at` or later).
  void woke(clock::time_point at) {
    std::lock_guard<std::mutex> guard{mtx_};
    woke_at_ = std::max(woke_at_.value_or(at), at);
  }

  /// The node's main loop ran at `at` (the pause watch's ticks). From the
  /// first call on, the view is stale while the last run lies more than
  /// `longest_gap` back by its clock: a node that was paused is stale from
  /// the moment it runs again, before its main loop could call `woke`.
  void ran(clock::time_point at, clock::duration longest_gap) {
    std::lock_guard<std::mutex> guard{mtx_};
    last_ran_ = std::max(last_ran_.value_or(at), at);
    ran_gap_ = longest_gap;
  }

  /// Whether this node's view of what its peers serve under may be out of
  /// date because it was paused: its main loop has not run for longer
  /// than `ran` allows, or it woke (`woke`) and some peer was not asked
  /// since, or some peer's last ended ask (an answer or a failure) was
  /// made longer ago than the view allows.
  bool stale() const {
    return !staleness().empty();
  }

  /// Why the view is stale, completing "this node ...": empty when it is
  /// not.
  std::string staleness() const {
    std::lock_guard<std::mutex> guard{mtx_};
    if (last_ran_ && now_() - *last_ran_ > ran_gap_)
      return "has not run its main loop for over "
             + std::to_string(std::chrono::duration_cast<
                                std::chrono::milliseconds>(ran_gap_)
                                .count())
             + " ms (was it paused?)";
    if (woke_at_)
      for (auto heard : heard_)
        if (heard < *woke_at_)
          return "was paused and has not heard from every peer since it "
                 "woke";
    if (max_silence_ == clock::duration::zero())
      return {};
    auto now = now_();
    for (auto heard : heard_)
      if (now - heard > max_silence_)
        return "has not heard from every peer within "
               + silence_text() + " (was it paused?)";
    return {};
  }

  clock::duration max_silence() const {
    return max_silence_;
  }

  /// The time by this view's clock: what the peer watch dates its asks by.
  clock::time_point now() const {
    return now_();
  }

private:
  /// `max_silence_` as "9s" (whole seconds) or "1500ms".
  std::string silence_text() const {
    using namespace std::chrono;
    auto ms = duration_cast<milliseconds>(max_silence_).count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s"
                          : std::to_string(ms) + "ms";
  }

  /// Answers may end out of the order their asks were made in: the latest
  /// ask counts.
  void heard(std::size_t peer, std::optional<clock::time_point> asked_at) {
    heard_[peer] = std::max(heard_[peer], asked_at ? *asked_at : now_());
  }

  void mark_asked(std::size_t peer) {
    if (asked_[peer])
      return;
    asked_[peer] = true;
    publish();
  }

  void tell_named() {
    tell(on_named_);
  }

  /// Calls the callback `which` (one of the `on_` members) outside the
  /// lock, so that it may read the view.
  void tell(const std::function<void()>& which) {
    std::function<void()> f;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      f = which;
    }
    if (f)
      f();
  }

  /// Drops the lists refusals named that no refusal named for longer
  /// than `max_silence_`; returns whether it dropped one.
  bool forget_named() {
    if (named_.empty() || max_silence_ == clock::duration::zero())
      return false;
    auto now = now_();
    auto before = named_.size();
    named_.erase(std::remove_if(named_.begin(), named_.end(),
                                [&](const auto& x) {
                                  return now - x.second > max_silence_;
                                }),
                 named_.end());
    if (named_.size() == before)
      return false;
    publish();
    return true;
  }

  void publish() {
    auto next = std::make_shared<serving_view>();
    next->settled = true;
    for (bool asked : asked_)
      next->settled = next->settled && asked;
    std::vector<std::vector<std::string>> seen;
    auto add = [&](const std::vector<std::string>& list, bool served) {
      if (std::find(seen.begin(), seen.end(), list) != seen.end())
        return;
      seen.push_back(list);
      cluster_map parsed;
      if (cluster_map::parse(list, "a peer's cluster list", parsed))
        return;
      next->others_fingerprints.push_back(parsed.fingerprint());
      if (served) {
        next->served_fingerprints.push_back(parsed.fingerprint());
        next->served.push_back(parsed);
      }
      next->others.push_back(std::move(parsed));
    };
    for (const auto& list : lists_) {
      // A peer that names no list (started without `coalesce.cluster`)
      // keeps no replica of anything.
      if (list && !list->empty())
        add(*list, true);
    }
    for (const auto& [list, at] : named_)
      add(list, false);
    if (next->settled == view_->settled && same_lists(next->others)) {
      // Which of them peers serve changes what this node refuses, not
      // what its coordinators count: no new generation.
      if (next->served_fingerprints != view_->served_fingerprints) {
        next->generation = view_->generation;
        view_ = std::move(next);
      }
      return;
    }
    next->generation = view_->generation + 1;
    view_ = std::move(next);
  }

  bool same_lists(const std::vector<cluster_map>& others) const {
    if (others.size() != view_->others.size())
      return false;
    for (std::size_t i = 0; i < others.size(); ++i)
      if (others[i].nodes() != view_->others[i].nodes())
        return false;
    return true;
  }

  mutable std::mutex mtx_;
  std::vector<std::optional<std::vector<std::string>>> lists_;
  std::vector<bool> asked_;
  /// When each peer last answered a ping, or an ask of it last failed.
  std::vector<clock::time_point> heard_;
  /// When this node last woke from a pause (`woke`), if it did.
  std::optional<clock::time_point> woke_at_;
  /// When its main loop last ran (`ran`), once it told, and the longest
  /// gap between two runs that is no pause.
  std::optional<clock::time_point> last_ran_;
  clock::duration ran_gap_{};
  const clock::duration max_silence_;
  const time_source now_;
  /// The lists replicas' refusals named, each with when one last did.
  std::vector<std::pair<std::vector<std::string>, clock::time_point>> named_;
  std::function<void()> on_named_;
  std::function<void()> on_heard_;
  std::shared_ptr<const serving_view> view_;
};

/// The stamp of a replica request a coordinator of `own` sends while it
/// counts `view` (null: `own` alone).
inline list_stamp stamp_of(const cluster_map& own, const serving_view* view) {
  list_stamp stamp;
  stamp.lists.push_back(own.fingerprint());
  if (view != nullptr)
    stamp.lists.insert(stamp.lists.end(), view->others_fingerprints.begin(),
                       view->others_fingerprints.end());
  return stamp;
}

/// The refusal of a replica request stamped `stamp` by a node serving
/// under `own` and seeing `view` served, when the stamp lacks one of those
/// lists (named in full, its own first); none otherwise.
inline std::optional<caf::error> refuse_uncounted(const cluster_map& own,
                                                  uint64_t own_fingerprint,
                                                  const serving_view& view,
                                                  const list_stamp& stamp) {
  auto counted = [&](uint64_t fingerprint) {
    return std::find(stamp.lists.begin(), stamp.lists.end(), fingerprint)
           != stamp.lists.end();
  };
  bool all = counted(own_fingerprint);
  for (auto fingerprint : view.served_fingerprints)
    all = all && counted(fingerprint);
  if (all)
    return std::nullopt;
  std::vector<std::vector<std::string>> lists;
  std::string text;
  auto name = [&](const cluster_map& list) {
    std::vector<std::string> nodes;
    for (const auto& node : list.nodes())
      nodes.push_back(node.text());
    std::string names;
    for (const auto& node : nodes)
      names += (names.empty() ? "" : ", ") + node;
    text += (lists.empty() ? "[" : " and [") + names + "]";
    lists.push_back(std::move(nodes));
  };
  name(own);
  for (const auto& list : view.served)
    name(list);
  return make_lists_not_counted(
    "this replica counts majorities under the cluster lists " + text
      + " (its own first), and the coordinator did not count each: it "
        "counts them from now on, and the request may be made again",
    std::move(lists));
}

/// The check a node's gateway makes of each replica request's stamp: the
/// node serves under `own` and `lists` tells what its peers serve under.
inline std::function<std::optional<caf::error>(const list_stamp&)>
uncounted_check(cluster_map own, std::shared_ptr<serving_lists> lists) {
  auto fingerprint = own.fingerprint();
  return [own = std::move(own), fingerprint,
          lists = std::move(lists)](const list_stamp& stamp) {
    return refuse_uncounted(own, fingerprint, *lists->current(), stamp);
  };
}

} // namespace coalesce
