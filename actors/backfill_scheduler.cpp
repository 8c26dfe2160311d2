#include "actors/backfill_scheduler.hpp"

#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "messages/errc.hpp"

namespace coalesce {

namespace {

using result_promise = caf::typed_response_promise<backfill_result>;
using run_id = uint64_t;
using key_type = std::pair<std::string, priority>;

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
  /// Grows with every batch until the caller's part is done.
  backfill_result result;
  /// Awaits parked until the caller's part is done.
  std::vector<result_promise> awaiting;
};

/// One run of pagination for a (room, priority).
struct run {
  key_type key;
  /// The batch size of the caller that started the run.
  uint32_t batch_size = 30;
  std::vector<uint64_t> callers;
  bool started = false;
  /// Every caller left while the run was at the pager: it ends with the
  /// answer to that batch, and nobody may join it any more.
  bool cancelled = false;
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
      for (auto& promise : c.awaiting)
        promise.deliver(stopped);
  }

  run_queue queue;
  pager_actor pager;
  scheduler_options options;
  std::unordered_map<run_id, run> runs;
  /// The run holding each key's place in `queue` (queued or running).
  std::map<key_type, run_id> active;
  /// A fresh run for a key whose active run was cancelled while running:
  /// it queues once that run has ended, keeping one run per room at a time.
  std::map<key_type, run_id> deferred;
  std::unordered_map<uint64_t, caller> callers;
  /// Finished tickets, oldest first, forgotten past `finished_tickets_kept`.
  std::deque<uint64_t> finished;
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

void complete(scheduler_pointer self, uint64_t ticket, stop_reason reason) {
  auto& st = self->state;
  auto& c = st.callers.at(ticket);
  if (c.done)
    return;
  c.done = true;
  c.result.reason = reason;
  for (auto& promise : c.awaiting)
    promise.deliver(c.result);
  c.awaiting.clear();
  st.finished.push_back(ticket);
  while (st.finished.size() > st.options.finished_tickets_kept) {
    st.stats.results_forgotten += 1;
    st.callers.erase(st.finished.front());
    st.finished.pop_front();
  }
}

bool has_active_callers(backfill_scheduler_state& st, const run& r) {
  for (auto ticket : r.callers) {
    auto i = st.callers.find(ticket);
    if (i != st.callers.end() && !i->second.done)
      return true;
  }
  return false;
}

void finish_run(scheduler_pointer self, run_id id, stop_reason reason) {
  auto& st = self->state;
  auto i = st.runs.find(id);
  if (i == st.runs.end())
    return;
  auto key = i->second.key;
  for (auto ticket : i->second.callers)
    if (st.callers.count(ticket) > 0)
      complete(self, ticket, reason);
  if (i->second.started)
    st.queue.finish(key.first, key.second);
  else
    st.queue.withdraw(key.first, key.second);
  st.stats.finished[static_cast<std::size_t>(reason)] += 1;
  spdlog::debug("scheduler: run for room {} at {} priority ended: {}",
                key.first, to_string(key.second), to_string(reason));
  if (auto a = st.active.find(key); a != st.active.end() && a->second == id)
    st.active.erase(a);
  st.runs.erase(i);
  // A fresh run waited for this one to leave the room.
  if (auto d = st.deferred.find(key); d != st.deferred.end()) {
    auto fresh = d->second;
    st.deferred.erase(d);
    if (st.queue.admit(key.first, key.second) == run_queue::admission::queued)
      st.active.emplace(key, fresh);
    else
      finish_run(self, fresh, stop_reason::failed);
  }
  schedule(self);
}

/// A caller left (cancel or death): the run ends once nobody needs it.
void withdraw(scheduler_pointer self, uint64_t ticket) {
  auto& st = self->state;
  auto c = st.callers.find(ticket);
  if (c == st.callers.end() || c->second.done || c->second.detached)
    return;
  auto id = c->second.run;
  complete(self, ticket, stop_reason::cancelled);
  auto r = st.runs.find(id);
  if (r == st.runs.end() || has_active_callers(st, r->second))
    return;
  if (!r->second.started) {
    finish_run(self, id, stop_reason::cancelled);
    return;
  }
  // At the pager right now: it stops before its next batch.
  r->second.cancelled = true;
}

void on_page(scheduler_pointer self, run_id id, timeline_page& page) {
  auto& st = self->state;
  auto r = st.runs.find(id);
  if (r == st.runs.end())
    return; // Shut down meanwhile.
  if (r->second.cancelled) {
    finish_run(self, id, stop_reason::cancelled);
    return;
  }
  auto last = stop_reason::cancelled;
  for (auto ticket : r->second.callers) {
    auto i = st.callers.find(ticket);
    if (i == st.callers.end() || i->second.done)
      continue;
    auto& c = i->second;
    c.result.batches += 1;
    c.result.events.insert(c.result.events.end(), page.events.begin(),
                           page.events.end());
    std::optional<stop_reason> reason;
    if (c.stop.met_by(page) || (c.local && c.local(page)))
      reason = stop_reason::stop_condition_met;
    else if (page.reached_start)
      reason = stop_reason::reached_timeline_start;
    else if (page.events.empty())
      reason = stop_reason::no_data_available;
    else if (c.max_batches != 0 && c.result.batches >= c.max_batches)
      reason = stop_reason::batch_limit_reached;
    if (reason) {
      last = *reason;
      complete(self, ticket, *reason);
    }
  }
  if (has_active_callers(st, r->second))
    request_page(self, id);
  else
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

caf::result<backfill_ticket> enqueue(scheduler_pointer self,
                                     backfill_request& request,
                                     std::function<bool(const timeline_page&)>
                                       local) {
  auto& st = self->state;
  if (st.shut_down)
    return make_error(errc::shut_down,
                      "the back-pagination scheduler no longer takes requests");
  std::string problem;
  if (!valid(request, problem))
    return make_error(errc::invalid_request, problem);
  key_type key{request.room, request.prio};
  run_id id = 0;
  auto joined = [&](run_id existing) {
    id = existing;
    st.stats.coalesced_joins += 1;
  };
  if (auto a = st.active.find(key); a != st.active.end()) {
    if (!st.runs.at(a->second).cancelled) {
      joined(a->second);
    } else if (auto d = st.deferred.find(key); d != st.deferred.end()) {
      joined(d->second);
    } else {
      id = st.next_run++;
      st.runs.emplace(id, run{key, request.batch_size, {}, false, false});
      st.deferred.emplace(key, id);
    }
  } else {
    if (st.queue.admit(request.room, request.prio)
        == run_queue::admission::queue_full)
      return make_error(errc::queue_full,
                        std::to_string(st.options.limits.max_queued)
                          + " runs are already waiting");
    id = st.next_run++;
    st.runs.emplace(id, run{key, request.batch_size, {}, false, false});
    st.active.emplace(key, id);
  }
  auto ticket = st.next_ticket++;
  auto source = caf::actor_cast<caf::actor_addr>(self->current_sender());
  caller c;
  c.run = id;
  c.source = source;
  c.stop = std::move(request.stop);
  c.local = std::move(local);
  c.max_batches = request.max_batches;
  st.callers.emplace(ticket, std::move(c));
  st.runs.at(id).callers.push_back(ticket);
  if (source && st.monitored.insert(source).second)
    self->monitor(source);
  schedule(self);
  return backfill_ticket{ticket};
}

caller* find_caller(scheduler_pointer self, const backfill_ticket& ticket) {
  auto i = self->state.callers.find(ticket.id);
  return i == self->state.callers.end() ? nullptr : &i->second;
}

caf::error unknown(const backfill_ticket& ticket) {
  return make_error(errc::unknown_ticket,
                    "ticket " + std::to_string(ticket.id)
                      + " is not known (never issued, or long finished)");
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
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (msg.source == st.pager) {
      spdlog::error("scheduler: the pager is down: {}",
                    self->system().render(msg.reason));
      std::vector<run_id> started;
      for (auto& [id, r] : st.runs)
        if (r.started)
          started.push_back(id);
      for (auto id : started)
        finish_run(self, id, st.runs.count(id) > 0 && st.runs.at(id).cancelled
                               ? stop_reason::cancelled
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
  });
  return {
    [self](enqueue_atom, backfill_request& request) {
      return enqueue(self, request, nullptr);
    },
    [self](enqueue_atom, backfill_request& request, local_stop& local) {
      return enqueue(self, request, std::move(local.met_by));
    },
    [self](await_atom,
           const backfill_ticket& ticket) -> caf::result<backfill_result> {
      auto c = find_caller(self, ticket);
      if (c == nullptr)
        return unknown(ticket);
      if (c->done)
        return c->result;
      c->awaiting.push_back(self->make_response_promise<backfill_result>());
      return c->awaiting.back();
    },
    [self](cancel_atom, const backfill_ticket& ticket) -> caf::result<ok_atom> {
      if (find_caller(self, ticket) == nullptr)
        return unknown(ticket);
      withdraw(self, ticket.id);
      return ok_atom::value;
    },
    [self](detach_atom, const backfill_ticket& ticket) -> caf::result<ok_atom> {
      auto c = find_caller(self, ticket);
      if (c == nullptr)
        return unknown(ticket);
      c->detached = true;
      return ok_atom::value;
    },
    [self](stats_atom) {
      auto& st = self->state;
      auto stats = st.stats;
      for (std::size_t p = 0; p < priority_count; ++p)
        stats.queued[p] = st.queue.queued_count(static_cast<priority>(p));
      stats.running = st.queue.running_count();
      for (auto& [ticket, c] : st.callers) {
        uint64_t bytes = 0;
        for (auto& e : c.result.events)
          bytes += held_bytes(e);
        stats.events_bytes_held += bytes;
        stats.parked_awaits += c.awaiting.size();
        if (c.done) {
          stats.results_kept += 1;
          stats.results_bytes += bytes;
        }
      }
      return stats;
    },
    [self](shutdown_atom) {
      auto& st = self->state;
      if (!st.shut_down) {
        st.shut_down = true;
        std::vector<run_id> ids;
        for (auto& [id, r] : st.runs)
          ids.push_back(id);
        spdlog::info("scheduler: shutting down, cancelling {} runs",
                     ids.size());
        for (auto id : ids) {
          auto r = st.runs.find(id);
          if (r == st.runs.end())
            continue;
          for (auto ticket : r->second.callers)
            if (st.callers.count(ticket) > 0)
              complete(self, ticket, stop_reason::cancelled);
          st.stats.finished[static_cast<std::size_t>(stop_reason::cancelled)]
            += 1;
        }
        st.runs.clear();
        st.active.clear();
        st.deferred.clear();
        st.queue = run_queue{st.options.limits};
      }
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
