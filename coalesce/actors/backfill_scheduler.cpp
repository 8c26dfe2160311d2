#include "coalesce/actors/backfill_scheduler.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "coalesce/messages/errc.hpp"

namespace coalesce {

namespace {

using result_promise = caf::typed_response_promise<backfill_result>;
using run_id = uint64_t;
using key_type = std::pair<std::string, priority>;

/// One page's events, held once and shared by the run and by every caller
/// whose part includes it. Its bytes count in `held` while it lives.
class shared_page {
public:
  shared_page(std::vector<timeline_event> events,
              std::shared_ptr<uint64_t> held)
    : events_(std::move(events)), held_(std::move(held)) {
    for (const auto& event : events_)
      bytes_ += held_bytes(event);
    *held_ += bytes_;
  }

  shared_page(const shared_page&) = delete;
  shared_page& operator=(const shared_page&) = delete;

  ~shared_page() {
    *held_ -= bytes_;
  }

  const std::vector<timeline_event>& events() const {
    return events_;
  }

  std::size_t bytes() const {
    return bytes_;
  }

  /// Kept results holding this page: while positive, its bytes count once
  /// in the results budget.
  std::size_t kept_by = 0;

private:
  std::vector<timeline_event> events_;
  std::size_t bytes_ = 0;
  std::shared_ptr<uint64_t> held_;
};

using page_ref = std::shared_ptr<shared_page>;

/// One caller's interest in a run.
struct caller {
  run_id run = 0;
  caf::actor_addr source;
  stop_condition stop;
  std::function<bool(const timeline_page&)> local;
  uint32_t max_batches = 0;
  /// Lets the run finish whatever the other callers do; cancel and death no
  /// longer withdraw this caller.
  bool detached = false;
  bool done = false;
  stop_reason reason = stop_reason::cancelled;
  uint32_t batches = 0;
  /// The index, among its run's pages, of the first page of its part.
  uint64_t first_page = 0;
  /// Its part once done: pages shared with the run and the other callers.
  std::vector<page_ref> pages;
  /// The one await parked until the part is done (the newest one).
  std::optional<result_promise> awaiting;
};

/// One run of pagination for a (room, priority).
struct run {
  key_type key;
  /// The batch size of the caller that started the run.
  uint32_t batch_size = 30;
  /// The callers whose part is not done; a finished caller leaves.
  std::vector<uint64_t> callers;
  /// The pages some caller still in the run needs, from index `first_page`
  /// on (older ones are dropped once every remaining caller joined later).
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

bool valid(const backfill_request& x, std::string& problem) {
  if (x.room.empty())
    problem = "the room is empty";
  else if (x.batch_size == 0)
    problem = "batch_size must be positive";
  else if (static_cast<uint8_t>(x.prio) >= priority_count)
    problem = "unknown priority " + std::to_string(static_cast<int>(x.prio));
  else if (static_cast<uint8_t>(x.stop.what) > 3)
    problem = "unknown stop condition "
              + std::to_string(static_cast<int>(x.stop.what));
  return problem.empty();
}

backfill_result result_of(const caller& c) {
  backfill_result result;
  result.reason = c.reason;
  result.batches = c.batches;
  for (const auto& page : c.pages)
    result.events.insert(result.events.end(), page->events().begin(),
                         page->events().end());
  return result;
}

} // namespace

struct backfill_scheduler_state {
  static inline const char* name = "backfill_scheduler";

  explicit backfill_scheduler_state(caf::local_actor*) : queue(run_limits{}) {
    // nop
  }

  backfill_scheduler_state(const backfill_scheduler_state&) = delete;
  backfill_scheduler_state& operator=(const backfill_scheduler_state&)
    = delete;

  /// CAF 0.17 has no broken-promise error: parked awaits are answered here.
  ~backfill_scheduler_state() {
    auto stopped = make_error(errc::service_stopped,
                              "the back-pagination scheduler stopped");
    for (auto& [id, c] : callers)
      if (c.awaiting)
        c.awaiting->deliver(stopped);
  }

  run_queue queue;
  pager_actor pager;
  scheduler_options options;
  std::unordered_map<run_id, run> runs;
  /// The run holding each key's place in `queue` (queued or running).
  std::map<key_type, run_id> active;
  /// A fresh run for a key whose active run was cancelled while running:
  /// queued behind it (run_queue::queue_behind_running), it becomes the
  /// key's active run once that one has ended.
  std::map<key_type, run_id> fresh;
  std::unordered_map<uint64_t, caller> callers;
  /// Finished tickets whose results are kept, oldest first.
  std::deque<uint64_t> kept;
  /// What the kept results cost: each shared page once, plus
  /// result_bookkeeping_bytes per result.
  std::size_t results_bytes = 0;
  /// Bytes of every shared page alive, updated by the pages themselves.
  std::shared_ptr<uint64_t> held = std::make_shared<uint64_t>(0);
  uint64_t parked_awaits = 0;
  std::unordered_set<caf::actor_addr> monitored;
  run_id next_run = 1;
  uint64_t next_ticket = 1;
  bool shut_down = false;
  scheduler_stats stats;
};

namespace {

using scheduler_pointer
  = scheduler_actor::stateful_pointer<backfill_scheduler_state>;

void request_page(scheduler_pointer self, run_id id);
void schedule(scheduler_pointer self);

/// Drops the oldest kept results until the rest fit the budget.
void forget_beyond_budget(backfill_scheduler_state& st) {
  while (st.results_bytes > st.options.results_memory && !st.kept.empty()) {
    auto i = st.callers.find(st.kept.front());
    st.kept.pop_front();
    for (const auto& page : i->second.pages)
      if (--page->kept_by == 0)
        st.results_bytes -= page->bytes();
    st.results_bytes -= result_bookkeeping_bytes;
    st.callers.erase(i);
    st.stats.results_forgotten += 1;
  }
}

/// Ends a caller's part: takes its pages from the run, answers its parked
/// await and keeps the result for a later one. The caller stays in its
/// run's caller list; whoever calls this removes it.
void complete(backfill_scheduler_state& st, uint64_t ticket,
              stop_reason reason) {
  auto& c = st.callers.at(ticket);
  if (c.done)
    return;
  c.done = true;
  c.reason = reason;
  c.stop = stop_condition{};
  c.local = nullptr;
  if (auto r = st.runs.find(c.run); r != st.runs.end()) {
    auto& pages = r->second.pages;
    auto skip = c.first_page - r->second.first_page;
    if (skip < pages.size())
      c.pages.assign(pages.begin() + static_cast<std::ptrdiff_t>(skip),
                     pages.end());
  }
  if (c.awaiting) {
    c.awaiting->deliver(result_of(c));
    c.awaiting.reset();
    st.parked_awaits -= 1;
  }
  for (const auto& page : c.pages)
    if (page->kept_by++ == 0)
      st.results_bytes += page->bytes();
  st.results_bytes += result_bookkeeping_bytes;
  st.kept.push_back(ticket);
  forget_beyond_budget(st);
}

/// Drops the pages no caller left in the run still needs.
void drop_unneeded_pages(backfill_scheduler_state& st, run& r) {
  auto needed = r.end_page();
  for (auto ticket : r.callers)
    needed = std::min(needed, st.callers.at(ticket).first_page);
  while (r.first_page < needed) {
    r.pages.pop_front();
    r.first_page += 1;
  }
}

void finish_run(scheduler_pointer self, run_id id, stop_reason reason) {
  auto& st = self->state;
  auto i = st.runs.find(id);
  if (i == st.runs.end())
    return;
  auto key = i->second.key;
  for (auto ticket : i->second.callers)
    complete(st, ticket, reason);
  if (i->second.started)
    st.queue.finish(key.first, key.second);
  else
    st.queue.withdraw(key.first, key.second);
  st.stats.finished[static_cast<std::size_t>(reason)] += 1;
  spdlog::debug("scheduler: run for room {} at {} priority ended: {}",
                key.first, to_string(key.second), to_string(reason));
  if (auto a = st.active.find(key); a != st.active.end() && a->second == id) {
    st.active.erase(a);
    // The fresh run queued behind this one holds the key's place now.
    if (auto f = st.fresh.find(key); f != st.fresh.end()) {
      st.active.emplace(key, f->second);
      st.fresh.erase(f);
    }
  } else if (auto f = st.fresh.find(key);
             f != st.fresh.end() && f->second == id) {
    st.fresh.erase(f);
  }
  st.runs.erase(i);
  schedule(self);
}

/// A caller left (cancel or death): the run ends once nobody needs it.
void withdraw(scheduler_pointer self, uint64_t ticket) {
  auto& st = self->state;
  auto c = st.callers.find(ticket);
  if (c == st.callers.end() || c->second.done || c->second.detached)
    return;
  auto id = c->second.run;
  complete(st, ticket, stop_reason::cancelled);
  auto r = st.runs.find(id);
  if (r == st.runs.end())
    return;
  auto& callers = r->second.callers;
  callers.erase(std::find(callers.begin(), callers.end(), ticket));
  drop_unneeded_pages(st, r->second);
  if (!callers.empty())
    return;
  if (!r->second.started) {
    finish_run(self, id, stop_reason::cancelled);
    return;
  }
  // At the pager right now: it stops before its next batch.
  r->second.cancelled = true;
}

std::optional<stop_reason> part_done(const caller& c,
                                     const timeline_page& page) {
  if (c.stop.met_by(page) || (c.local && c.local(page)))
    return stop_reason::stop_condition_met;
  if (page.reached_start)
    return stop_reason::reached_timeline_start;
  if (page.events.empty())
    return stop_reason::no_data_available;
  if (c.max_batches != 0 && c.batches >= c.max_batches)
    return stop_reason::batch_limit_reached;
  return std::nullopt;
}

/// Tells the pager that `page` was delivered, so that it moves the room's
/// position past it. With `then_continue`, the run asks for its next page
/// once the position moved (a failed commit fails the run: its next page
/// would repeat this one).
void commit_delivered(scheduler_pointer self, run_id id, const std::string& room,
            const page_cursor& cursor, bool then_continue) {
  auto& st = self->state;
  self
    ->request(st.pager, st.options.pager_timeout, commit_atom::value, room,
              cursor)
    .then(
      [self, id, then_continue](ok_atom) {
        if (!then_continue)
          return;
        auto r = self->state.runs.find(id);
        if (r == self->state.runs.end())
          return;
        if (r->second.cancelled)
          finish_run(self, id, stop_reason::cancelled);
        else
          request_page(self, id);
      },
      [self, id, room, then_continue](caf::error& err) {
        spdlog::warn("scheduler: moving the position of room {} failed, "
                     "its delivered events will be loaded again: {}",
                     room, self->system().render(err));
        auto r = self->state.runs.find(id);
        if (!then_continue || r == self->state.runs.end())
          return;
        finish_run(self, id, r->second.cancelled ? stop_reason::cancelled
                                                 : stop_reason::failed);
      });
}

void on_page(scheduler_pointer self, run_id id, timeline_page& page) {
  auto& st = self->state;
  auto i = st.runs.find(id);
  if (i == st.runs.end())
    return; // Shut down meanwhile: never delivered, so never committed.
  auto& r = i->second;
  if (r.cancelled) {
    finish_run(self, id, stop_reason::cancelled);
    return;
  }
  std::vector<std::pair<uint64_t, stop_reason>> ended;
  std::vector<uint64_t> remaining;
  for (auto ticket : r.callers) {
    auto& c = st.callers.at(ticket);
    c.batches += 1;
    if (auto reason = part_done(c, page))
      ended.emplace_back(ticket, *reason);
    else
      remaining.push_back(ticket);
  }
  auto loaded = !page.events.empty();
  if (loaded)
    r.pages.push_back(
      std::make_shared<shared_page>(std::move(page.events), st.held));
  auto last = stop_reason::cancelled;
  for (auto& [ticket, reason] : ended) {
    complete(st, ticket, reason);
    last = reason;
  }
  r.callers.swap(remaining);
  drop_unneeded_pages(st, r);
  auto more = !r.callers.empty();
  if (loaded)
    commit_delivered(self, id, r.key.first, page.cursor, more);
  else if (more)
    request_page(self, id);
  if (!more)
    finish_run(self, id, last);
}

void request_page(scheduler_pointer self, run_id id) {
  auto& st = self->state;
  auto& r = st.runs.at(id);
  self
    ->request(st.pager, st.options.pager_timeout, page_atom::value,
              r.key.first, r.batch_size)
    .then([self, id](timeline_page& page) { on_page(self, id, page); },
          [self, id](caf::error& err) {
            auto& st = self->state;
            auto r = st.runs.find(id);
            if (r == st.runs.end())
              return;
            spdlog::warn("scheduler: paging room {} failed: {}",
                         r->second.key.first, self->system().render(err));
            finish_run(self, id, r->second.cancelled ? stop_reason::cancelled
                                                     : stop_reason::failed);
          });
}

void schedule(scheduler_pointer self) {
  auto& st = self->state;
  for (auto& key : st.queue.start_runnable()) {
    auto a = st.active.find({key.room, key.prio});
    if (a == st.active.end())
      continue;
    auto& r = st.runs.at(a->second);
    r.started = true;
    request_page(self, a->second);
  }
}

caf::error queue_full(const backfill_scheduler_state& st) {
  return make_error(errc::queue_full,
                    std::to_string(st.options.limits.max_queued)
                      + " runs are already waiting");
}

/// The run a request for `key` joins or starts, 0 when the queue is full.
run_id run_for(backfill_scheduler_state& st, const key_type& key,
               uint32_t batch_size) {
  auto a = st.active.find(key);
  if (a != st.active.end() && !st.runs.at(a->second).cancelled) {
    st.stats.coalesced_joins += 1;
    return a->second;
  }
  if (auto f = st.fresh.find(key); f != st.fresh.end()) {
    st.stats.coalesced_joins += 1;
    return f->second;
  }
  auto admission = a == st.active.end()
                     ? st.queue.admit(key.first, key.second)
                     : st.queue.queue_behind_running(key.first, key.second);
  if (admission != run_queue::admission::queued)
    return 0;
  auto id = st.next_run++;
  st.runs.emplace(id, run{key, batch_size, {}, {}, 0, false, false});
  (a == st.active.end() ? st.active : st.fresh).emplace(key, id);
  return id;
}

caf::result<backfill_ticket> enqueue(scheduler_pointer self,
                                     backfill_request& request,
                                     std::function<bool(const timeline_page&)>
                                       local) {
  auto& st = self->state;
  if (st.shut_down)
    return make_error(errc::service_shut_down,
                      "the back-pagination scheduler no longer takes requests");
  std::string problem;
  if (!valid(request, problem))
    return make_error(errc::invalid_request, problem);
  auto id = run_for(st, {request.room, request.prio}, request.batch_size);
  if (id == 0)
    return queue_full(st);
  auto& r = st.runs.at(id);
  auto ticket = st.next_ticket++;
  auto source = caf::actor_cast<caf::actor_addr>(self->current_sender());
  caller c;
  c.run = id;
  c.source = source;
  c.stop = std::move(request.stop);
  c.local = std::move(local);
  c.max_batches = request.max_batches;
  c.first_page = r.end_page();
  st.callers.emplace(ticket, std::move(c));
  r.callers.push_back(ticket);
  if (source && st.monitored.insert(source).second)
    self->monitor(source);
  schedule(self);
  return backfill_ticket{ticket};
}

caller* find_caller(scheduler_pointer self, const backfill_ticket& ticket) {
  auto i = self->state.callers.find(ticket.id);
  return i == self->state.callers.end() ? nullptr : &i->second;
}

caf::error unknown(scheduler_pointer self, const backfill_ticket& ticket) {
  auto name = "ticket " + std::to_string(ticket.id);
  if (ticket.id == 0 || ticket.id >= self->state.next_ticket)
    return make_error(errc::unknown_ticket, name + " was never issued");
  return make_error(errc::unknown_ticket,
                    name
                      + " finished and its result was forgotten: "
                        "scheduler-results-memory keeps the newest results");
}

caf::result<backfill_result> await(scheduler_pointer self,
                                   const backfill_ticket& ticket) {
  auto c = find_caller(self, ticket);
  if (c == nullptr)
    return unknown(self, ticket);
  if (c->done)
    return result_of(*c);
  // One parked await per ticket: the earlier one's requester has usually
  // timed out and re-sent it, and then drops this answer.
  if (c->awaiting)
    c->awaiting->deliver(make_error(
      errc::await_replaced, "ticket " + std::to_string(ticket.id)));
  else
    self->state.parked_awaits += 1;
  c->awaiting = self->make_response_promise<backfill_result>();
  return *c->awaiting;
}

void shut_down_all(scheduler_pointer self) {
  auto& st = self->state;
  st.shut_down = true;
  spdlog::info("scheduler: shutting down, cancelling {} runs", st.runs.size());
  for (auto& [id, r] : st.runs) {
    for (auto ticket : r.callers)
      complete(st, ticket, stop_reason::cancelled);
    st.stats.finished[static_cast<std::size_t>(stop_reason::cancelled)] += 1;
  }
  // Pages answered from now on find no run: never delivered, never
  // committed, so the pager loads them again for the next run.
  st.runs.clear();
  st.active.clear();
  st.fresh.clear();
  st.queue = run_queue{st.options.limits};
}

void on_down(scheduler_pointer self, caf::down_msg& msg) {
  auto& st = self->state;
  if (msg.source == st.pager) {
    spdlog::error("scheduler: the pager is down: {}",
                  self->system().render(msg.reason));
    std::vector<run_id> started;
    for (auto& [id, r] : st.runs)
      if (r.started)
        started.push_back(id);
    for (auto id : started)
      if (auto r = st.runs.find(id); r != st.runs.end())
        finish_run(self, id, r->second.cancelled ? stop_reason::cancelled
                                                 : stop_reason::failed);
    return;
  }
  st.monitored.erase(msg.source);
  std::vector<uint64_t> tickets;
  for (auto& [ticket, c] : st.callers)
    if (c.source == msg.source && !c.done)
      tickets.push_back(ticket);
  for (auto ticket : tickets)
    withdraw(self, ticket);
}

scheduler_stats current_stats(const backfill_scheduler_state& st) {
  auto stats = st.stats;
  for (std::size_t p = 0; p < priority_count; ++p)
    stats.queued[p] = st.queue.queued_count(static_cast<priority>(p));
  stats.running = st.queue.running_count();
  stats.events_bytes_held = *st.held;
  stats.parked_awaits = st.parked_awaits;
  stats.results_kept = st.kept.size();
  stats.results_bytes = st.results_bytes;
  return stats;
}

scheduler_actor::behavior_type
backfill_scheduler(scheduler_pointer self, pager_actor pager,
                   scheduler_options options) {
  auto& st = self->state;
  st.queue = run_queue{options.limits};
  st.pager = std::move(pager);
  st.options = options;
  // A pager that dies holding a request never answers it (CAF 0.17 has no
  // broken-promise error): its runs fail when it goes down, not at timeout.
  self->monitor(st.pager);
  self->set_down_handler(
    [self](caf::down_msg& msg) { on_down(self, msg); });
  return {
    [self](enqueue_atom, backfill_request& request) {
      return enqueue(self, request, nullptr);
    },
    [self](enqueue_atom, backfill_request& request, local_stop& local) {
      return enqueue(self, request, std::move(local.met_by));
    },
    [self](await_atom, const backfill_ticket& ticket) {
      return await(self, ticket);
    },
    [self](cancel_atom, const backfill_ticket& ticket) -> caf::result<ok_atom> {
      if (find_caller(self, ticket) == nullptr)
        return unknown(self, ticket);
      withdraw(self, ticket.id);
      return ok_atom::value;
    },
    [self](detach_atom, const backfill_ticket& ticket) -> caf::result<ok_atom> {
      auto c = find_caller(self, ticket);
      if (c == nullptr)
        return unknown(self, ticket);
      c->detached = true;
      return ok_atom::value;
    },
    [self](stats_atom) { return current_stats(self->state); },
    [self](shutdown_atom) {
      if (!self->state.shut_down)
        shut_down_all(self);
      return ok_atom::value;
    },
  };
}

} // namespace

scheduler_actor spawn_backfill_scheduler(caf::actor_system& sys,
                                         pager_actor pager,
                                         scheduler_options options) {
  return sys.spawn(backfill_scheduler, std::move(pager), std::move(options));
}

} // namespace coalesce
