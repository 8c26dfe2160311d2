#include <coalesce/actors/backfill_scheduler.hpp>

#include <string>
#include <unordered_map>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/caller_monitor.hpp>
#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/messages/errc.hpp>

// The decisions (runs, callers, results) are backfill_runs'; this actor
// routes requests and pager answers to it and carries out what it decides.

namespace coalesce {

namespace {

using result_promise = caf::typed_response_promise<backfill_result>;
using run_id = backfill_runs::run_id;

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
  // No event has an empty id or type: such a condition is never met and
  // silently turns into "never".
  else if (x.stop.what == stop_condition::kind::until_event
           && x.stop.event_id.empty())
    problem = "the stop condition until_event names no event";
  else if (x.stop.what == stop_condition::kind::until_type
           && x.stop.event_type.empty())
    problem = "the stop condition until_type names no event type";
  return problem.empty();
}

} // namespace

struct backfill_scheduler_state {
  static inline const char* name = "backfill_scheduler";

  explicit backfill_scheduler_state(caf::local_actor*) {
    // nop
  }

  backfill_scheduler_state(const backfill_scheduler_state&) = delete;
  backfill_scheduler_state& operator=(const backfill_scheduler_state&)
    = delete;

  pager_actor pager;
  backfill_scheduler_options options;
  std::unique_ptr<backfill_runs> runs;
  /// At most one await per ticket, by ticket; answered stopped_before_answer if
  /// the scheduler stops first.
  parked_requests<result_promise> awaits{"the back-pagination scheduler"};
  caller_monitor callers;

  /// A loaded page whose commit waits for a claim (backfill_runs::claim).
  struct held_commit {
    std::string room;
    page_cursor cursor;
    bool then_continue = false;
    /// Which hold of the run its deadline timer is for.
    uint64_t hold = 0;
  };
  std::unordered_map<run_id, held_commit> held_commits;
  uint64_t last_hold = 0;
};

namespace {

using scheduler_pointer
  = backfill_scheduler_actor::stateful_pointer<backfill_scheduler_state>;

void request_page(scheduler_pointer self, run_id id);

/// Carries out what the last decision left to do: answers the awaits whose
/// part ended, logs the runs that ended, starts the runs that may start.
void carry_out(scheduler_pointer self) {
  auto& st = self->state;
  for (auto& [ticket, result] : st.runs->take_answers())
    st.awaits.answer(ticket, std::move(result));
  for (auto& ended : st.runs->take_ended())
    spdlog::debug("scheduler: run for room {} at {} priority ended: {}",
                  ended.room, to_string(ended.prio), to_string(ended.reason));
  for (auto id : st.runs->start_runnable())
    request_page(self, id);
}

/// Tells the pager that `page` was delivered, so that it moves the room's
/// position past it; the callers whose part ended with it are answered once
/// it did. With `then_continue`, the run asks for its next page then.
void commit_delivered(scheduler_pointer self, run_id id,
                      const std::string& room, const page_cursor& cursor,
                      bool then_continue) {
  auto& st = self->state;
  self
    ->request(st.pager, st.options.pager_timeout, commit_atom::value, room,
              cursor)
    .then(
      [self, id, then_continue](ok_atom) {
        if (self->state.runs->on_commit(id, true) && then_continue)
          request_page(self, id);
        carry_out(self);
      },
      [self, id, room](caf::error& err) {
        spdlog::warn("scheduler: moving the position of room {} failed, "
                     "its delivered events will be loaded again: {}",
                     room, self->system().render(err));
        self->state.runs->on_commit(id, false);
        carry_out(self);
      });
}

/// Keeps the commit of run `id`'s page until a caller holding it claims
/// its ticket, for at most `pager_timeout`.
void hold_commit(scheduler_pointer self, run_id id, const std::string& room,
                 const page_cursor& cursor, bool then_continue) {
  auto& st = self->state;
  auto hold = ++st.last_hold;
  st.held_commits[id]
    = backfill_scheduler_state::held_commit{room, cursor, then_continue, hold};
  self->delayed_send(self, st.options.pager_timeout,
                     claim_deadline_atom::value, id, hold);
}

/// `ticket` is known to be held by its caller: commits the page that waited
/// for it, if any.
void claim(scheduler_pointer self, const backfill_ticket& ticket) {
  auto& st = self->state;
  auto id = st.runs->claim(ticket.id);
  if (!id)
    return;
  auto held = st.held_commits.find(*id);
  if (held == st.held_commits.end())
    return;
  auto commit = std::move(held->second);
  st.held_commits.erase(held);
  commit_delivered(self, *id, commit.room, commit.cursor,
                   commit.then_continue);
}

void on_claim_deadline(scheduler_pointer self, run_id id, uint64_t hold) {
  auto& st = self->state;
  auto held = st.held_commits.find(id);
  if (held == st.held_commits.end() || held->second.hold != hold)
    return;
  auto room = std::move(held->second.room);
  st.held_commits.erase(held);
  if (!st.runs->on_claim_deadline(id))
    return;
  spdlog::info("scheduler: no caller of a run for room {} claimed its "
               "ticket within {}: its loaded page is not committed and will "
               "be loaded again",
               room, caf::deep_to_string(st.options.pager_timeout));
  carry_out(self);
}

void on_page(scheduler_pointer self, run_id id, timeline_page& page) {
  auto room = self->state.runs->page_request(id);
  auto step = self->state.runs->on_page(id, page);
  if (step.commit)
    commit_delivered(self, id, room->first, page.cursor, step.next_page);
  else if (step.held)
    hold_commit(self, id, room->first, page.cursor, step.next_page);
  else if (step.next_page)
    request_page(self, id);
  carry_out(self);
}

void request_page(scheduler_pointer self, run_id id) {
  auto& st = self->state;
  auto [room, batch_size] = *st.runs->page_request(id);
  self
    ->request(st.pager, st.options.pager_timeout, page_atom::value, room,
              batch_size)
    .then([self, id](timeline_page& page) { on_page(self, id, page); },
          [self, id, room = room](caf::error& err) {
            if (!self->state.runs->page_request(id))
              return;
            spdlog::warn("scheduler: paging room {} failed: {}", room,
                         self->system().render(err));
            self->state.runs->on_page_failed(id);
            carry_out(self);
          });
}

caf::result<backfill_ticket> enqueue(scheduler_pointer self,
                                     backfill_request& request,
                                     backfill_runs::local_condition local) {
  auto& st = self->state;
  if (st.runs->is_shut_down())
    return make_error(errc::closed_to_new_requests,
                      "the back-pagination scheduler no longer takes requests");
  std::string problem;
  if (!valid(request, problem))
    return make_error(errc::invalid_request, problem);
  auto source = caf::actor_cast<caf::actor_addr>(self->current_sender());
  // A caller elsewhere may never get this answer: it claims its ticket
  // later (backfill_runs.hpp).
  auto claimed = !source
                 || (!st.options.local_callers_claim
                     && source.node() == self->node());
  auto ticket = st.runs->join(request, std::move(local), source, claimed);
  if (ticket == 0)
    return make_error(errc::queue_full,
                      std::to_string(st.options.limits.max_queued)
                        + " runs are already waiting");
  st.callers.watch(self, source);
  carry_out(self);
  return backfill_ticket{ticket};
}

caf::error unknown(const backfill_ticket& ticket,
                   backfill_runs::ticket_state state) {
  auto name = "ticket " + std::to_string(ticket.id);
  if (state == backfill_runs::ticket_state::never_issued)
    return make_error(errc::unknown_ticket, name + " was never issued");
  return make_error(errc::unknown_ticket,
                    name
                      + " finished and its result was forgotten: "
                        "scheduler-results-memory keeps the newest results");
}

bool known(backfill_runs::ticket_state state) {
  return state == backfill_runs::ticket_state::pending
         || state == backfill_runs::ticket_state::done;
}

caf::result<backfill_result> await(scheduler_pointer self,
                                   const backfill_ticket& ticket) {
  auto& st = self->state;
  auto state = st.runs->state_of(ticket.id);
  if (!known(state))
    return unknown(ticket, state);
  if (state == backfill_runs::ticket_state::done)
    return st.runs->result(ticket.id);
  st.runs->await_parked(ticket.id);
  claim(self, ticket);
  auto promise = self->make_response_promise<backfill_result>();
  // One parked await per ticket: the earlier one's requester has usually
  // timed out and re-sent it, and then drops this answer.
  if (auto earlier = st.awaits.park(ticket.id, promise))
    earlier->deliver(make_error(errc::await_replaced,
                                "ticket " + std::to_string(ticket.id)));
  return promise;
}

caf::result<ok_atom> cancel(scheduler_pointer self,
                            const backfill_ticket& ticket) {
  auto state = self->state.runs->state_of(ticket.id);
  if (!known(state))
    return unknown(ticket, state);
  self->state.runs->withdraw(ticket.id);
  carry_out(self);
  return ok_atom::value;
}

caf::result<ok_atom> detach(scheduler_pointer self,
                            const backfill_ticket& ticket) {
  auto state = self->state.runs->state_of(ticket.id);
  if (!known(state))
    return unknown(ticket, state);
  self->state.runs->detach(ticket.id);
  claim(self, ticket);
  carry_out(self);
  return ok_atom::value;
}

ok_atom shut_down(scheduler_pointer self) {
  auto& st = self->state;
  if (!st.runs->is_shut_down()) {
    spdlog::info("scheduler: shutting down, cancelling {} runs",
                 st.runs->run_count());
    st.runs->shut_down();
    st.held_commits.clear();
    carry_out(self);
  }
  return ok_atom::value;
}

void on_down(scheduler_pointer self, caf::down_msg& msg) {
  auto& st = self->state;
  if (msg.source == st.pager) {
    spdlog::error("scheduler: the pager is down: {}",
                  self->system().render(msg.reason));
    st.runs->on_pager_down();
  } else {
    st.callers.forget(msg.source);
    st.runs->withdraw_all_of(msg.source);
  }
  carry_out(self);
}

backfill_scheduler_stats current_stats(const backfill_scheduler_state& st) {
  auto stats = st.runs->stats();
  stats.parked_awaits = st.awaits.size();
  return stats;
}

backfill_scheduler_actor::behavior_type
backfill_scheduler(scheduler_pointer self, pager_actor pager,
                   backfill_scheduler_options options) {
  auto& st = self->state;
  st.runs = std::make_unique<backfill_runs>(options.limits,
                                            options.results_memory);
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
    [self](cancel_atom, const backfill_ticket& ticket) {
      return cancel(self, ticket);
    },
    [self](detach_atom, const backfill_ticket& ticket) {
      return detach(self, ticket);
    },
    [self](stats_atom) { return current_stats(self->state); },
    [self](shutdown_atom) { return shut_down(self); },
    [self](claim_deadline_atom, uint64_t id, uint64_t hold) {
      on_claim_deadline(self, id, hold);
    },
  };
}

} // namespace

backfill_scheduler_actor spawn_backfill_scheduler(caf::actor_system& sys,
                                         pager_actor pager,
                                         backfill_scheduler_options options) {
  return sys.spawn(backfill_scheduler, std::move(pager), std::move(options));
}

} // namespace coalesce
