#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>

#include <coalesce/actors/run_queue.hpp>
#include <coalesce/messages/backfill.hpp>

/// The back-pagination scheduler's per-caller bookkeeping, as a plain value:
/// which run each caller joined, when each caller's part is done, which runs
/// are cancelled or wait behind a cancelled one, and which finished results
/// are kept. No actors, logging or I/O: the scheduler actor routes requests
/// and pager answers here and carries out what it decides (request a page,
/// commit one, answer an await). `run_queue` decides which runs start.
///
/// Invariants:
/// - A (room, priority) key has at most one active run (queued or running)
///   that callers join; a request joins it unless it was cancelled. Then a
///   fresh run is queued behind it (`run_queue::queue_behind_running`),
///   joined by later requests, and becomes the active run once the cancelled
///   one ended.
/// - A caller's part is done exactly once: by its own stop condition (data
///   or local), its own `max_batches` counted from when it joined, the run's
///   end (timeline start, empty page, failure), its cancel or death, or
///   shutdown. A done caller leaves its run; the run drops the pages no
///   remaining caller needs (each caller's part starts at the page it joined
///   at).
/// - A run is cancelled only when every caller left by cancel or death and
///   none detached: queued, it ends at once and never pages; at the pager,
///   it ends with that page's answer, which is not committed.
/// - A page's events go into the callers' parts before `on_page` says to
///   commit it, so every event the room's position passes was delivered.
/// - A page is committed only once one of the callers holding it has
///   claimed its ticket (`claim`): a caller on another node claims by
///   awaiting or detaching, since the answer to its enqueue can be lost
///   (its client timed out and asked another node); until then the page is
///   held, and if nobody claims it (`on_claim_deadline`) or every holder
///   left, it is not committed and the room's next run loads it again. So
///   the position never passes events whose only caller never learned its
///   ticket.
/// - A caller whose part ends with a page that is to be committed is done
///   (and answered) only once `on_commit` reports that commit: an answered
///   caller's position is durable, so a restarted node pages on from below
///   it. A failed commit ends such a part `failed`. Meanwhile its part counts
///   as pending and withdrawing it changes nothing.
/// - Done results are kept, oldest forgotten first, while they cost more
///   than `results_memory`: each shared page's bytes once plus
///   `result_bookkeeping_bytes` per result. A done caller with a parked await
///   has its answer in `take_answers` before it can be forgotten.
/// - After `shut_down` every caller is done (cancelled), no run is left and
///   `join` refuses.
namespace coalesce {

/// What a kept result costs besides its events, in `results_memory`: its
/// record (reason, counters, page references) at a fixed estimate, so that
/// results without events are bounded too.
constexpr std::size_t result_bookkeeping_bytes = 256;

class backfill_runs {
public:
  using run_id = uint64_t;
  using ticket_type = uint64_t;
  using local_condition = std::function<bool(const timeline_page&)>;

  backfill_runs(run_limits limits, std::size_t results_memory);

  backfill_runs(const backfill_runs&) = delete;
  backfill_runs& operator=(const backfill_runs&) = delete;

  /// A (valid) request from `source`: joins the key's run or queues a new
  /// one. Returns the caller's ticket, or 0 when the queue is full.
  /// `claimed`: the caller holds its ticket for sure (it is in this
  /// process), so its pages are committed without waiting for `claim`.
  ticket_type join(backfill_request& request, local_condition local,
                   caf::actor_addr source, bool claimed = true);

  /// Marks queued runs that may start now as started and returns them, in
  /// start order: each needs its first page requested.
  std::vector<run_id> start_runnable();

  /// What the actor does after a page for a run.
  struct page_step {
    /// Commit the page's cursor: its events were delivered.
    bool commit = false;
    /// Request the next page: after the commit succeeded when `commit`,
    /// else now (unless `held`).
    bool next_page = false;
    /// The page's events were delivered but no caller holding them has
    /// claimed its ticket: the commit (and the next page) wait for `claim`
    /// to return this run, or for `on_claim_deadline`.
    bool held = false;
  };

  /// The pager answered `page` for run `id` (a no-op for a run that ended).
  page_step on_page(run_id id, timeline_page& page);

  /// The commit that `on_page` asked for was answered (`committed`: the
  /// position moved). Ends the parts that waited for it; returns whether to
  /// request the next page (else the run ended).
  bool on_commit(run_id id, bool committed);

  /// The pager failed (or timed out) on run `id`: the run ends `failed`, or
  /// `cancelled` if every caller had left.
  void on_page_failed(run_id id);

  /// The pager is down: every started run ends like `on_page_failed`.
  void on_pager_down();

  /// A caller left (cancel or death): its part ends `cancelled` unless done
  /// or detached, and its run ends once nobody needs it. False for a ticket
  /// not known (never issued or forgotten).
  bool withdraw(ticket_type ticket);

  /// Every ticket of `source` whose part is not done is withdrawn.
  void withdraw_all_of(const caf::actor_addr& source);

  /// The caller's part goes on whatever the others do; cancel and death no
  /// longer withdraw it. False for a ticket not known.
  bool detach(ticket_type ticket);

  /// The caller holds its ticket for sure (it awaited or detached it).
  /// Returns the run whose held page may now be committed, if the caller
  /// holds that page.
  std::optional<run_id> claim(ticket_type ticket);

  /// Nobody claimed run `id`'s held page in time: the page is not
  /// committed, the parts that ended with it end `cancelled` (their events
  /// in their results) and the run ends `cancelled`. False when nothing was
  /// held for `id` any more.
  bool on_claim_deadline(run_id id);

  /// Ends every caller's part (`cancelled`), drops every run and refuses
  /// later joins. Returns the runs it ended.
  std::size_t shut_down();

  bool is_shut_down() const {
    return shut_down_;
  }

  enum class ticket_state {
    /// Never issued.
    never_issued,
    /// Done, and its result was forgotten to stay within the budget.
    forgotten,
    /// Known, its part not done yet.
    pending,
    /// Done; `result` answers it.
    done,
  };

  ticket_state state_of(ticket_type ticket) const;

  /// The result of a done ticket.
  backfill_result result(ticket_type ticket) const;

  /// A pending ticket has an await parked: its result goes into
  /// `take_answers` when its part is done.
  void await_parked(ticket_type ticket);

  /// The results of parked awaits whose part ended since the last call.
  std::vector<std::pair<ticket_type, backfill_result>> take_answers();

  /// A run that ended: for the log.
  struct ended_run {
    std::string room;
    priority prio;
    stop_reason reason;
  };

  /// The runs that ended since the last call.
  std::vector<ended_run> take_ended();

  /// The room and batch size of run `id`, for its page request; nullopt
  /// when the run ended.
  std::optional<std::pair<std::string, uint32_t>> page_request(run_id id) const;

  /// The counters; `parked_awaits` is the actor's.
  backfill_scheduler_stats stats() const;

  std::size_t run_count() const {
    return runs_.size();
  }

  std::size_t results_kept() const {
    return kept_.size();
  }

  std::size_t results_bytes() const {
    return results_bytes_;
  }

private:
  using key_type = std::pair<std::string, priority>;

  /// One page's events, held once and shared by the run and by every caller
  /// whose part includes it. Its bytes count in `held` while it lives.
  class shared_page;

  using page_ref = std::shared_ptr<shared_page>;

  /// One caller's interest in a run.
  struct caller {
    run_id run = 0;
    caf::actor_addr source;
    stop_condition stop;
    local_condition local;
    uint32_t max_batches = 0;
    bool detached = false;
    /// It holds its ticket for sure (`join`'s `claimed`, or `claim`).
    bool claimed = true;
    bool done = false;
    /// Its part ended with a page whose commit is not answered yet: the
    /// reason it ends with once it is (its pages are settled already).
    std::optional<stop_reason> ending;
    /// An await is parked: the answer goes out when the part is done.
    bool awaited = false;
    stop_reason reason = stop_reason::cancelled;
    uint32_t batches = 0;
    /// The index, among its run's pages, of the first page of its part.
    uint64_t first_page = 0;
    /// Its part once done: pages shared with the run and the other callers.
    std::vector<page_ref> pages;
  };

  /// One run of pagination for a (room, priority).
  struct run {
    key_type key;
    /// The batch size of the caller that started the run.
    uint32_t batch_size = 30;
    /// The callers whose part is not done; a done caller leaves.
    std::vector<ticket_type> callers;
    /// The pages some caller still in the run needs, from index
    /// `first_page` on.
    std::deque<page_ref> pages;
    uint64_t first_page = 0;
    bool started = false;
    /// Every caller left while the run was at the pager: it ends with the
    /// answer to that request, and nobody may join it any more.
    bool cancelled = false;

    uint64_t end_page() const {
      return first_page + pages.size();
    }
  };

  /// The run a request for `key` joins or starts, 0 when the queue is full.
  run_id run_for(const key_type& key, uint32_t batch_size);

  /// Ends a caller's part; the caller stays in its run's list.
  void complete(ticket_type ticket, stop_reason reason);

  /// Copies the caller's part out of its run's pages.
  void settle_part(caller& c);

  /// Ends the caller's part with `reason` once run `id`'s commit is answered.
  void complete_after_commit(run_id id, ticket_type ticket, stop_reason reason);

  void keep_result(ticket_type ticket);

  void forget_beyond_budget();

  void drop_unneeded_pages(run& r);

  void finish_run(run_id id, stop_reason reason);
  /// Ends run `id`'s wait for a claim: nothing committed, its waiting parts
  /// and the run (if not ended yet) end `cancelled`.
  void end_unclaimed(run_id id);

  void count_finished(stop_reason reason);

  std::optional<stop_reason> part_done(const caller& c,
                                       const timeline_page& page) const;

  backfill_result result_of(const caller& c) const;

  run_queue queue_;
  run_limits limits_;
  std::size_t results_memory_;
  std::unordered_map<run_id, run> runs_;
  /// Per run with a commit in flight or held, the callers whose part ended
  /// with it.
  std::unordered_map<run_id, std::vector<ticket_type>> awaiting_commit_;
  /// Per run whose loaded page waits for a claim, the index of that page
  /// among the run's pages.
  std::unordered_map<run_id, uint64_t> unclaimed_commits_;
  /// The run holding each key's place in `queue_` (queued or running).
  std::map<key_type, run_id> active_;
  /// A fresh run queued behind a key's cancelled running run.
  std::map<key_type, run_id> fresh_;
  std::unordered_map<ticket_type, caller> callers_;
  /// Done tickets whose results are kept, oldest first.
  std::deque<ticket_type> kept_;
  std::size_t results_bytes_ = 0;
  /// Bytes of every shared page alive, updated by the pages themselves.
  std::shared_ptr<uint64_t> held_ = std::make_shared<uint64_t>(0);
  std::vector<std::pair<ticket_type, backfill_result>> answers_;
  std::vector<ended_run> ended_;
  run_id next_run_ = 1;
  ticket_type next_ticket_ = 1;
  bool shut_down_ = false;
  uint64_t coalesced_joins_ = 0;
  uint64_t results_forgotten_ = 0;
  std::vector<uint64_t> finished_ = std::vector<uint64_t>(6, 0);
};

} // namespace coalesce
