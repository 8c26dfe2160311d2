#include <coalesce/actors/session_queue.hpp>

#include <algorithm>

namespace coalesce {

void session_rows::merge(session_rows later) {
  if (later.source)
    source = std::move(later.source);
  auto cancelled = [&](const session_update& x) {
    return std::find(later.removed.begin(), later.removed.end(), x.id)
           != later.removed.end();
  };
  updates.erase(std::remove_if(updates.begin(), updates.end(), cancelled),
                updates.end());
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
  kept_.reset();
  return result;
}

void session_queue::push(session_job job) {
  jobs_.push_back(std::move(job));
}

bool session_queue::remove_lease(uint64_t lease) {
  auto i = std::find_if(jobs_.begin(), jobs_.end(), [&](const session_job& x) {
    return x.kind == session_job::lease && x.lease_id == lease;
  });
  if (i == jobs_.end())
    return false;
  jobs_.erase(i);
  return true;
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
