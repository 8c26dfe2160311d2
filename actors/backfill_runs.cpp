#include <coalesce/actors/backfill_runs.hpp>

#include <algorithm>

namespace coalesce {

class backfill_runs::shared_page {
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

backfill_runs::backfill_runs(run_limits limits, std::size_t results_memory)
  : queue_(limits), limits_(limits), results_memory_(results_memory) {
  // nop
}

backfill_runs::run_id backfill_runs::run_for(const key_type& key,
                                             uint32_t batch_size) {
  auto a = active_.find(key);
  if (a != active_.end() && !runs_.at(a->second).cancelled) {
    coalesced_joins_ += 1;
    return a->second;
  }
  if (auto f = fresh_.find(key); f != fresh_.end()) {
    coalesced_joins_ += 1;
    return f->second;
  }
  auto admission = a == active_.end()
                     ? queue_.admit(key.first, key.second)
                     : queue_.queue_behind_running(key.first, key.second);
  if (admission != run_queue::admission::queued)
    return 0;
  auto id = next_run_++;
  run r;
  r.key = key;
  r.batch_size = batch_size;
  runs_.emplace(id, std::move(r));
  (a == active_.end() ? active_ : fresh_).emplace(key, id);
  return id;
}

backfill_runs::ticket_type backfill_runs::join(backfill_request& request,
                                               local_condition local,
                                               caf::actor_addr source,
                                               bool claimed) {
  if (shut_down_)
    return 0;
  auto id = run_for({request.room, request.prio}, request.batch_size);
  if (id == 0)
    return 0;
  auto& r = runs_.at(id);
  auto ticket = next_ticket_++;
  caller c;
  c.run = id;
  c.source = std::move(source);
  c.stop = std::move(request.stop);
  c.local = std::move(local);
  c.max_batches = request.max_batches;
  c.claimed = claimed;
  c.first_page = r.end_page();
  callers_.emplace(ticket, std::move(c));
  r.callers.push_back(ticket);
  return ticket;
}

std::vector<backfill_runs::run_id> backfill_runs::start_runnable() {
  std::vector<run_id> started;
  for (auto& key : queue_.start_runnable()) {
    auto a = active_.find({key.room, key.prio});
    if (a == active_.end())
      continue;
    runs_.at(a->second).started = true;
    started.push_back(a->second);
  }
  return started;
}

backfill_result backfill_runs::result_of(const caller& c) const {
  backfill_result result;
  result.reason = c.reason;
  result.batches = c.batches;
  for (const auto& page : c.pages)
    result.events.insert(result.events.end(), page->events().begin(),
                         page->events().end());
  return result;
}

void backfill_runs::forget_beyond_budget() {
  while (results_bytes_ > results_memory_ && !kept_.empty()) {
    auto i = callers_.find(kept_.front());
    kept_.pop_front();
    for (const auto& page : i->second.pages)
      if (--page->kept_by == 0)
        results_bytes_ -= page->bytes();
    results_bytes_ -= result_bookkeeping_bytes;
    callers_.erase(i);
    results_forgotten_ += 1;
  }
}

void backfill_runs::keep_result(ticket_type ticket) {
  auto& c = callers_.at(ticket);
  for (const auto& page : c.pages)
    if (page->kept_by++ == 0)
      results_bytes_ += page->bytes();
  results_bytes_ += result_bookkeeping_bytes;
  kept_.push_back(ticket);
  forget_beyond_budget();
}

void backfill_runs::complete(ticket_type ticket, stop_reason reason) {
  auto& c = callers_.at(ticket);
  if (c.done)
    return;
  if (!c.ending)
    settle_part(c);
  c.ending.reset();
  c.done = true;
  c.reason = reason;
  c.stop = stop_condition{};
  c.local = nullptr;
  // Answered before it is kept: keeping may forget it at once.
  if (c.awaited) {
    c.awaited = false;
    answers_.emplace_back(ticket, result_of(c));
  }
  keep_result(ticket);
}

void backfill_runs::settle_part(caller& c) {
  if (auto r = runs_.find(c.run); r != runs_.end()) {
    auto& pages = r->second.pages;
    auto skip = c.first_page - r->second.first_page;
    if (skip < pages.size())
      c.pages.assign(pages.begin() + static_cast<std::ptrdiff_t>(skip),
                     pages.end());
  }
}

void backfill_runs::complete_after_commit(run_id id, ticket_type ticket,
                                          stop_reason reason) {
  auto& c = callers_.at(ticket);
  settle_part(c);
  c.ending = reason;
  awaiting_commit_[id].push_back(ticket);
}

void backfill_runs::drop_unneeded_pages(run& r) {
  auto needed = r.end_page();
  for (auto ticket : r.callers)
    needed = std::min(needed, callers_.at(ticket).first_page);
  while (r.first_page < needed) {
    r.pages.pop_front();
    r.first_page += 1;
  }
}

void backfill_runs::count_finished(stop_reason reason) {
  finished_[static_cast<std::size_t>(reason)] += 1;
}

void backfill_runs::finish_run(run_id id, stop_reason reason) {
  auto i = runs_.find(id);
  if (i == runs_.end())
    return;
  auto key = i->second.key;
  for (auto ticket : i->second.callers)
    complete(ticket, reason);
  if (i->second.started)
    queue_.finish(key.first, key.second);
  else
    queue_.withdraw(key.first, key.second);
  count_finished(reason);
  ended_.push_back(ended_run{key.first, key.second, reason});
  if (auto a = active_.find(key); a != active_.end() && a->second == id) {
    active_.erase(a);
    // The fresh run queued behind this one holds the key's place now.
    if (auto f = fresh_.find(key); f != fresh_.end()) {
      active_.emplace(key, f->second);
      fresh_.erase(f);
    }
  } else if (auto f = fresh_.find(key); f != fresh_.end() && f->second == id) {
    fresh_.erase(f);
  }
  runs_.erase(i);
}

bool backfill_runs::withdraw(ticket_type ticket) {
  auto c = callers_.find(ticket);
  if (c == callers_.end())
    return false;
  auto id = c->second.run;
  if (c->second.ending && !c->second.done
      && unclaimed_commits_.count(id) > 0) {
    // Its page waits for a claim that will not come from it: its part ends
    // now, uncommitted.
    auto& waiting = awaiting_commit_[id];
    waiting.erase(std::find(waiting.begin(), waiting.end(), ticket));
    complete(ticket, stop_reason::cancelled);
    if (waiting.empty()) {
      awaiting_commit_.erase(id);
      if (runs_.count(id) == 0)
        unclaimed_commits_.erase(id);
    }
    return true;
  }
  if (c->second.done || c->second.detached || c->second.ending)
    return true;
  complete(ticket, stop_reason::cancelled);
  auto r = runs_.find(id);
  if (r == runs_.end())
    return true;
  auto& callers = r->second.callers;
  callers.erase(std::find(callers.begin(), callers.end(), ticket));
  drop_unneeded_pages(r->second);
  if (!callers.empty())
    return true;
  if (!r->second.started)
    finish_run(id, stop_reason::cancelled);
  else if (unclaimed_commits_.count(id) > 0) {
    // Nothing at the pager: the run waited for a claim, and nobody needs
    // another page. The parts that ended with the held page may still
    // claim it.
    if (awaiting_commit_.count(id) > 0)
      finish_run(id, stop_reason::cancelled);
    else
      end_unclaimed(id);
  } else { // At the pager right now: it stops before its next batch.
    r->second.cancelled = true;
  }
  return true;
}

void backfill_runs::withdraw_all_of(const caf::actor_addr& source) {
  std::vector<ticket_type> tickets;
  for (auto& [ticket, c] : callers_)
    if (c.source == source && !c.done)
      tickets.push_back(ticket);
  for (auto ticket : tickets)
    withdraw(ticket);
}

bool backfill_runs::detach(ticket_type ticket) {
  auto c = callers_.find(ticket);
  if (c == callers_.end())
    return false;
  c->second.detached = true;
  return true;
}

std::optional<stop_reason>
backfill_runs::part_done(const caller& c, const timeline_page& page) const {
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

backfill_runs::page_step backfill_runs::on_page(run_id id,
                                                timeline_page& page) {
  auto i = runs_.find(id);
  if (i == runs_.end())
    return {}; // Shut down meanwhile: never delivered, so never committed.
  auto& r = i->second;
  if (r.cancelled) {
    finish_run(id, stop_reason::cancelled);
    return {};
  }
  std::vector<std::pair<ticket_type, stop_reason>> ended;
  std::vector<ticket_type> remaining;
  auto claimed = false;
  for (auto ticket : r.callers) {
    auto& c = callers_.at(ticket);
    claimed = claimed || c.claimed;
    c.batches += 1;
    if (auto reason = part_done(c, page))
      ended.emplace_back(ticket, *reason);
    else
      remaining.push_back(ticket);
  }
  auto loaded = !page.events.empty();
  if (loaded)
    r.pages.push_back(
      std::make_shared<shared_page>(std::move(page.events), held_));
  auto last = stop_reason::cancelled;
  for (auto& [ticket, reason] : ended) {
    if (loaded)
      complete_after_commit(id, ticket, reason);
    else
      complete(ticket, reason);
    last = reason;
  }
  r.callers.swap(remaining);
  auto page_index = r.end_page() - 1;
  drop_unneeded_pages(r);
  page_step step{loaded, !r.callers.empty()};
  if (loaded && !claimed) {
    unclaimed_commits_[id] = page_index;
    step.commit = false;
    step.held = true;
  }
  if (!step.next_page)
    finish_run(id, last);
  return step;
}

std::optional<backfill_runs::run_id>
backfill_runs::claim(ticket_type ticket) {
  auto i = callers_.find(ticket);
  if (i == callers_.end() || i->second.claimed)
    return std::nullopt;
  auto& c = i->second;
  c.claimed = true;
  if (c.done)
    return std::nullopt;
  auto held = unclaimed_commits_.find(c.run);
  // A caller that joined after the held page does not hold its events.
  if (held == unclaimed_commits_.end()
      || (!c.ending && c.first_page > held->second))
    return std::nullopt;
  auto id = held->first;
  unclaimed_commits_.erase(held);
  return id;
}

bool backfill_runs::on_claim_deadline(run_id id) {
  if (unclaimed_commits_.count(id) == 0)
    return false;
  end_unclaimed(id);
  return true;
}

void backfill_runs::end_unclaimed(run_id id) {
  unclaimed_commits_.erase(id);
  if (auto held = awaiting_commit_.find(id); held != awaiting_commit_.end()) {
    auto tickets = std::move(held->second);
    awaiting_commit_.erase(held);
    for (auto ticket : tickets)
      complete(ticket, stop_reason::cancelled);
  }
  finish_run(id, stop_reason::cancelled);
}

bool backfill_runs::on_commit(run_id id, bool committed) {
  if (auto held = awaiting_commit_.find(id); held != awaiting_commit_.end()) {
    auto tickets = std::move(held->second);
    awaiting_commit_.erase(held);
    for (auto ticket : tickets)
      complete(ticket, committed ? *callers_.at(ticket).ending
                                 : stop_reason::failed);
  }
  auto r = runs_.find(id);
  if (r == runs_.end())
    return false;
  if (r->second.cancelled) {
    finish_run(id, stop_reason::cancelled);
    return false;
  }
  // A failed commit fails the run: its next page would repeat this one.
  if (!committed) {
    finish_run(id, stop_reason::failed);
    return false;
  }
  return true;
}

void backfill_runs::on_page_failed(run_id id) {
  auto r = runs_.find(id);
  if (r == runs_.end())
    return;
  finish_run(id, r->second.cancelled ? stop_reason::cancelled
                                     : stop_reason::failed);
}

void backfill_runs::on_pager_down() {
  std::vector<run_id> started;
  for (auto& [id, r] : runs_)
    if (r.started)
      started.push_back(id);
  for (auto id : started)
    on_page_failed(id);
}

std::size_t backfill_runs::shut_down() {
  shut_down_ = true;
  auto count = runs_.size();
  for (auto& [id, r] : runs_) {
    for (auto ticket : r.callers)
      complete(ticket, stop_reason::cancelled);
    count_finished(stop_reason::cancelled);
  }
  // A commit in flight may never be answered now: its waiting parts end
  // `cancelled`, as nothing says their position is durable.
  for (auto& [id, tickets] : awaiting_commit_)
    for (auto ticket : tickets)
      complete(ticket, stop_reason::cancelled);
  awaiting_commit_.clear();
  unclaimed_commits_.clear();
  // Pages answered from now on find no run: never delivered, never
  // committed, so the pager loads them again for the next run.
  runs_.clear();
  active_.clear();
  fresh_.clear();
  queue_ = run_queue{limits_};
  return count;
}

backfill_runs::ticket_state backfill_runs::state_of(ticket_type ticket) const {
  auto i = callers_.find(ticket);
  if (i != callers_.end())
    return i->second.done ? ticket_state::done : ticket_state::pending;
  if (ticket == 0 || ticket >= next_ticket_)
    return ticket_state::never_issued;
  return ticket_state::forgotten;
}

backfill_result backfill_runs::result(ticket_type ticket) const {
  return result_of(callers_.at(ticket));
}

void backfill_runs::await_parked(ticket_type ticket) {
  callers_.at(ticket).awaited = true;
}

std::vector<std::pair<backfill_runs::ticket_type, backfill_result>>
backfill_runs::take_answers() {
  return std::exchange(answers_, {});
}

std::vector<backfill_runs::ended_run> backfill_runs::take_ended() {
  return std::exchange(ended_, {});
}

std::optional<std::pair<std::string, uint32_t>>
backfill_runs::page_request(run_id id) const {
  auto i = runs_.find(id);
  if (i == runs_.end())
    return std::nullopt;
  return std::make_pair(i->second.key.first, i->second.batch_size);
}

backfill_scheduler_stats backfill_runs::stats() const {
  backfill_scheduler_stats stats;
  for (std::size_t p = 0; p < priority_count; ++p)
    stats.queued[p] = queue_.queued_count(static_cast<priority>(p));
  stats.running = queue_.running_count();
  stats.coalesced_joins = coalesced_joins_;
  stats.finished = finished_;
  stats.events_bytes_held = *held_;
  stats.results_kept = kept_.size();
  stats.results_bytes = results_bytes_;
  stats.results_forgotten = results_forgotten_;
  return stats;
}

} // namespace coalesce
