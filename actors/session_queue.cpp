#include <coalesce/actors/session_queue.hpp>

#include <algorithm>

namespace coalesce {

namespace {

template <class T>
bool contains(const std::vector<T>& xs, const T& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

} // namespace

void session_rows::merge(session_rows later) {
  if (later.source) {
    source = std::move(later.source);
    generation = later.generation;
    snapshot = std::move(later.snapshot);
  }
  // The later request wins: a row it removes or writes again replaces the
  // queued one, and a row it writes again is no longer removed.
  auto replaced = [&](const session_update& x) {
    return contains(later.removed, x.id)
           || std::any_of(later.updates.begin(), later.updates.end(),
                          [&](const session_update& y) { return y.id == x.id; });
  };
  updates.erase(std::remove_if(updates.begin(), updates.end(), replaced),
                updates.end());
  auto written_again = [&](const std::string& id) {
    return std::any_of(later.updates.begin(), later.updates.end(),
                       [&](const session_update& y) { return y.id == id; });
  };
  removed.erase(std::remove_if(removed.begin(), removed.end(), written_again),
                removed.end());
  for (auto& x : later.updates)
    updates.push_back(std::move(x));
  for (auto& x : later.removed)
    removed.push_back(std::move(x));
  for (auto x : later.waiters)
    waiters.push_back(x);
}

void session_queue::persist(session_rows rows) {
  if (!jobs_.empty() && jobs_.back().kind == session_job::write) {
    jobs_.back().rows.merge(std::move(rows));
    return;
  }
  session_job job;
  job.rows = std::move(rows);
  jobs_.push_back(std::move(job));
}

std::vector<uint64_t> session_queue::drop_writes() {
  kept_.reset();
  return refuse_queued_writes();
}

std::vector<uint64_t> session_queue::refuse_queued_writes() {
  std::vector<uint64_t> result;
  std::deque<session_job> kept_jobs;
  for (auto& job : jobs_) {
    if (job.kind == session_job::write)
      result.insert(result.end(), job.rows.waiters.begin(),
                    job.rows.waiters.end());
    else
      kept_jobs.push_back(std::move(job));
  }
  jobs_ = std::move(kept_jobs);
  return result;
}

void session_queue::change_source(const session_handle_actor& source,
                                  std::optional<uint64_t> generation) {
  for (auto& job : jobs_) {
    if (job.kind != session_job::write)
      continue;
    if (job.rows.source != source)
      job.rows.snapshot.reset();
    job.rows.source = source;
    job.rows.generation = generation;
  }
}

bool session_queue::write_queued() const {
  return std::any_of(jobs_.begin(), jobs_.end(), [](const session_job& x) {
    return x.kind == session_job::write;
  });
}

void session_queue::push(session_job job) {
  jobs_.push_back(std::move(job));
}

std::optional<uint64_t> session_queue::remove_lease(uint64_t lease) {
  auto i = std::find_if(jobs_.begin(), jobs_.end(), [&](const session_job& x) {
    return x.kind == session_job::lease && x.lease_id == lease;
  });
  if (i == jobs_.end())
    return std::nullopt;
  auto waiter = i->rows.waiters.front();
  jobs_.erase(i);
  return waiter;
}

std::optional<session_job> session_queue::start_next() {
  if (running_ || jobs_.empty())
    return std::nullopt;
  auto job = std::move(jobs_.front());
  jobs_.pop_front();
  if (job.kind == session_job::write && kept_) {
    auto rows = std::move(*kept_);
    kept_.reset();
    rows.waiters.clear(); // answered when their write failed
    rows.merge(std::move(job.rows));
    job.rows = std::move(rows);
  }
  running_ = true;
  return job;
}

void session_queue::finish(caf::error result) {
  running_ = false;
  last_result_ = std::move(result);
}

void session_queue::keep_failed(session_rows rows) {
  rows.waiters.clear();
  if (kept_) {
    kept_->merge(std::move(rows));
    return;
  }
  kept_ = std::move(rows);
}

} // namespace coalesce
