#include <coalesce/actors/pending_secrets.hpp>

#include <algorithm>

#include <coalesce/storage/secret_merge.hpp>

namespace coalesce {

pending_secrets::pending_secrets(std::size_t limit, std::size_t max_batch)
  : limit_(limit),
    max_batch_(max_batch != 0 ? max_batch : std::max<std::size_t>(1, limit / 2)) {
  // nop
}

pending_secrets::queue_result
pending_secrets::queue(producer_ticket ticket,
                       std::vector<secret_write> writes) {
  waiter w{ticket, {}, 0};
  for (auto& write : writes) {
    if (!watches_.empty())
      record_for_watches(write);
    auto sequence = next_sequence_++;
    w.held.push_back(held_write{std::move(write), sequence, sequence});
  }
  w.last_sequence = w.held.empty() ? last_sequence()
                                   : w.held.back().sequence;
  auto last = w.last_sequence;
  while (!w.held.empty()) {
    switch (admit_front(w.held, true)) {
      case admission::admitted:
        continue;
      case admission::filled_last_slot:
      case admission::blocked:
        hold(std::move(w));
        return {false, last};
    }
  }
  return {true, last};
}

std::size_t pending_secrets::force_admit(producer_ticket ticket) {
  auto i = std::find_if(waiters_.begin(), waiters_.end(),
                        [&](const waiter& w) { return w.ticket == ticket; });
  if (i == waiters_.end())
    return 0;
  auto held = std::move(i->held);
  auto rescued = held.size();
  for (auto& capture : held) {
    auto key = capture.write.entry.key();
    unhold(key);
    // Admitting it now would let the older held capture be applied after
    // it, whenever its producer is admitted.
    if (auto* earlier = latest_hold_before(i, key)) {
      earlier->write
        = storage::coalesce_captures(earlier->write, capture.write);
      earlier->newest = capture.newest;
    } else {
      admit(std::move(key), std::move(capture));
    }
  }
  waiters_.erase(i);
  return rescued;
}

secret_batch pending_secrets::start_batch() {
  secret_batch batch;
  if (writing_ || unwritten_.empty())
    return batch;
  auto size = std::min(max_batch_, unwritten_.size());
  batch.reserve(size);
  in_flight_.reserve(size);
  for (std::size_t i = 0; i < size; ++i) {
    auto* entry = unwritten_.front();
    unwritten_.pop_front();
    in_flight_.emplace_back(entry, entry->second.version);
    batch.push_back(entry->second.row);
  }
  writing_ = true;
  return batch;
}

void pending_secrets::batch_written() {
  written_.insert(written_.end(), in_flight_.begin(), in_flight_.end());
  in_flight_.clear();
  writing_ = false;
}

std::vector<producer_release> pending_secrets::finish_batch() {
  batch_written();
  return release_written();
}

std::vector<producer_release> pending_secrets::release_written() {
  durable_below_.reset();
  std::size_t removed = 0;
  for (auto [entry, version] : written_) {
    if (entry->second.version == version) {
      pending_.erase(entry->first);
      ++removed;
    } else {
      // Recaptured during the write: every capture up to `version` is
      // durable, the newer ones still wait for a later batch.
      entry->second.oldest = std::max(entry->second.oldest, version + 1);
      unwritten_.push_back(entry);
    }
  }
  written_.clear();
  std::vector<producer_release> released;
  if (removed == 0)
    return released;
  while (!waiters_.empty()) {
    auto& head = waiters_.front();
    auto outcome = admission::admitted;
    while (!head.held.empty() && outcome == admission::admitted)
      outcome = admit_front(head.held, false);
    if (outcome != admission::admitted)
      break; // Still full; it waits for the next batch.
    released.push_back({head.ticket, head.last_sequence});
    waiters_.pop_front();
  }
  return released;
}

void pending_secrets::abandon_batch() {
  // Back to the front, in their order: they are older than anything else.
  for (auto i = in_flight_.rbegin(); i != in_flight_.rend(); ++i)
    unwritten_.push_front(i->first);
  in_flight_.clear();
  writing_ = false;
}

std::optional<secret_write>
pending_secrets::find(const secret_key& key) const {
  std::optional<secret_write> result;
  if (auto i = pending_.find(key); i != pending_.end())
    result = *i->second.row;
  if (held_keys_.count(key) == 0)
    return result;
  for (const auto& w : waiters_)
    for (const auto& capture : w.held)
      if (capture.write.entry.chat == key.chat
          && capture.write.entry.sender == key.sender
          && capture.write.entry.msg_id == key.msg_id)
        result = result ? storage::coalesce_captures(*result, capture.write)
                        : capture.write;
  return result;
}

read_watch pending_secrets::watch(const secret_key& key) {
  auto id = next_watch_++;
  watches_[key].push_back(watched{id, find(key)});
  return id;
}

std::optional<secret_write>
pending_secrets::end_watch(const secret_key& key, read_watch id) {
  std::optional<secret_write> result;
  auto i = watches_.find(key);
  if (i == watches_.end())
    return result;
  auto& list = i->second;
  auto w = std::find_if(list.begin(), list.end(),
                        [id](const watched& x) { return x.id == id; });
  if (w != list.end()) {
    result = std::move(w->value);
    list.erase(w);
  }
  if (list.empty())
    watches_.erase(i);
  return result;
}

void pending_secrets::record_for_watches(const secret_write& capture) {
  auto i = watches_.find(capture.entry.key());
  if (i == watches_.end())
    return;
  for (auto& w : i->second)
    w.value = w.value ? storage::coalesce_captures(*w.value, capture)
                      : capture;
}

uint64_t pending_secrets::durable_below() const {
  if (durable_below_)
    return *durable_below_;
  auto lowest = next_sequence_;
  for (const auto& [key, entry] : pending_)
    lowest = std::min(lowest, entry.oldest);
  for (const auto& w : waiters_)
    if (!w.held.empty())
      lowest = std::min(lowest, w.held.front().sequence);
  durable_below_ = lowest;
  return lowest;
}

uint64_t pending_secrets::version_of(const secret_key& key) const {
  auto i = pending_.find(key);
  return i == pending_.end() ? 0 : i->second.version;
}

pending_secrets::admission
pending_secrets::admit_front(std::deque<held_write>& held,
                             bool respect_earlier_holds) {
  auto key = held.front().write.entry.key();
  if (respect_earlier_holds && !held_keys_.empty()
      && held_keys_.count(key) > 0)
    return admission::blocked;
  auto i = pending_.find(key);
  bool refresh = i != pending_.end();
  if (!refresh && pending_.size() >= limit_)
    return admission::blocked;
  if (!respect_earlier_holds)
    unhold(key);
  if (refresh)
    merge_into(i->second, std::move(held.front()));
  else
    admit(std::move(key), std::move(held.front()));
  held.pop_front();
  if (!refresh && pending_.size() == limit_)
    return admission::filled_last_slot;
  return admission::admitted;
}

void pending_secrets::admit(secret_key&& key, held_write&& capture) {
  auto i = pending_.find(key);
  if (i == pending_.end()) {
    auto sequence = capture.sequence;
    auto added = pending_.emplace(
      std::move(key),
      slot{std::make_shared<const secret_write>(std::move(capture.write)),
           capture.newest, sequence});
    unwritten_.push_back(&*added.first);
    return;
  }
  merge_into(i->second, std::move(capture));
}

void pending_secrets::merge_into(slot& entry, held_write&& capture) {
  entry.row = std::make_shared<const secret_write>(
    storage::coalesce_captures(*entry.row, capture.write));
  entry.version = capture.newest;
  entry.oldest = std::min(entry.oldest, capture.sequence);
}

pending_secrets::held_write*
pending_secrets::latest_hold_before(std::deque<waiter>::iterator producer,
                                    const secret_key& key) {
  if (held_keys_.count(key) == 0)
    return nullptr;
  for (auto w = std::make_reverse_iterator(producer); w != waiters_.rend();
       ++w)
    for (auto h = w->held.rbegin(); h != w->held.rend(); ++h)
      if (h->write.entry.chat == key.chat && h->write.entry.sender == key.sender
          && h->write.entry.msg_id == key.msg_id)
        return &*h;
  return nullptr;
}

void pending_secrets::hold(waiter&& w) {
  for (const auto& capture : w.held)
    ++held_keys_[capture.write.entry.key()];
  held_count_ += w.held.size();
  waiters_.push_back(std::move(w));
}

void pending_secrets::unhold(const secret_key& key) {
  --held_count_;
  auto i = held_keys_.find(key);
  if (i != held_keys_.end() && --i->second == 0)
    held_keys_.erase(i);
}

} // namespace coalesce
