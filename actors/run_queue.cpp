#include <coalesce/actors/run_queue.hpp>

#include <utility>

namespace coalesce {

run_queue::run_queue(run_limits limits) : limits_(limits) {
  // nop
}

run_queue::admission run_queue::admit(const std::string& room,
                                      priority prio) {
  auto p = index(prio);
  auto i = rooms_.find(room);
  if (i != rooms_.end()) {
    if (i->second.queued[p] != none)
      return admission::joined_queued;
    if (i->second.running == prio)
      return admission::joined_running;
  }
  return queue_new(room, prio);
}

run_queue::admission run_queue::queue_behind_running(const std::string& room,
                                                     priority prio) {
  auto i = rooms_.find(room);
  if (i != rooms_.end() && i->second.queued[index(prio)] != none)
    return admission::joined_queued;
  return queue_new(room, prio);
}

run_queue::admission run_queue::queue_new(const std::string& room,
                                          priority prio) {
  auto p = index(prio);
  auto i = rooms_.find(room);
  if (queued_total_ >= limits_.max_queued)
    return admission::queue_full;
  if (i == rooms_.end())
    i = rooms_.emplace(room, room_state{}).first;
  auto sequence = next_sequence_++;
  i->second.queued[p] = sequence;
  // The newest sequence number goes last: a hinted insert at the end.
  if (!i->second.running)
    runnable_[p].emplace_hint(runnable_[p].end(), sequence, room);
  ++queued_[p];
  ++queued_total_;
  return admission::queued;
}

bool run_queue::withdraw(const std::string& room, priority prio) {
  auto p = index(prio);
  auto i = rooms_.find(room);
  if (i == rooms_.end() || i->second.queued[p] == none)
    return false;
  // A parked run is in no runnable queue.
  if (!i->second.running)
    runnable_[p].erase(i->second.queued[p]);
  i->second.queued[p] = none;
  --queued_[p];
  --queued_total_;
  erase_if_empty(i);
  return true;
}

std::vector<run_key> run_queue::start_runnable() {
  std::vector<run_key> started;
  // Highest priority first. Starting a run only parks runs of its own room,
  // never makes another one runnable, so one pass from high to low yields
  // the seed's order: each priority starts its oldest runnable runs until the
  // total or its own cap is reached, then the next lower priority gets the
  // remaining slots.
  for (auto p = priority_count; p-- > 0;) {
    while (running_total_ < limits_.max_concurrent && !at_cap(p)
           && !runnable_[p].empty())
      started.push_back(start_front(p));
    if (running_total_ >= limits_.max_concurrent)
      break;
  }
  return started;
}

void run_queue::finish(const std::string& room, priority prio) {
  auto i = rooms_.find(room);
  if (i == rooms_.end() || i->second.running != prio)
    return;
  auto p = index(prio);
  i->second.running.reset();
  --running_[p];
  --running_total_;
  // The room is idle again: its parked runs become runnable at the position
  // their sequence numbers give them, ahead of anything queued after them.
  for (std::size_t q = 0; q < priority_count; ++q)
    if (auto sequence = i->second.queued[q]; sequence != none)
      runnable_[q].emplace(sequence, room);
  erase_if_empty(i);
}

bool run_queue::queued(const std::string& room, priority prio) const {
  auto i = rooms_.find(room);
  return i != rooms_.end() && i->second.queued[index(prio)] != none;
}

bool run_queue::running(const std::string& room, priority prio) const {
  auto i = rooms_.find(room);
  return i != rooms_.end() && i->second.running == prio;
}

std::size_t run_queue::queued_count(priority prio) const {
  return queued_[index(prio)];
}

std::size_t run_queue::running_count(priority prio) const {
  return running_[index(prio)];
}

run_key run_queue::start_front(std::size_t p) {
  auto front = runnable_[p].begin();
  auto prio = static_cast<priority>(p);
  run_key key{std::move(front->second), prio};
  runnable_[p].erase(front);
  auto& state = rooms_.find(key.room)->second;
  state.queued[p] = none;
  state.running = prio;
  --queued_[p];
  --queued_total_;
  ++running_[p];
  ++running_total_;
  // The room is busy now: park its other queued runs (at most one per
  // priority) so later decisions never see them until it finishes.
  for (std::size_t q = 0; q < priority_count; ++q)
    if (auto sequence = state.queued[q]; sequence != none)
      runnable_[q].erase(sequence);
  return key;
}

void run_queue::erase_if_empty(room_map::iterator i) {
  if (i->second.empty())
    rooms_.erase(i);
}

} // namespace coalesce
