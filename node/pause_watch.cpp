#include <coalesce/node/pause_watch.hpp>

#include <utility>

#include <spdlog/spdlog.h>

namespace coalesce {

pause_watch::pause_watch(std::shared_ptr<serving_lists> lists,
                         clock::time_point now)
  : lists_(std::move(lists)), last_tick_(now) {
  lists_->ran(now, longest_stall);
}

void pause_watch::continued(clock::time_point now) {
  lists_->woke(now);
  // After `woke`: a coordinator reading the view between the two still
  // sees it stale.
  lists_->ran(now, longest_stall);
  last_tick_ = now;
  spdlog::warn("this node was stopped and continued (SIGCONT): its "
               "coordinators take no request until every peer answered "
               "again");
}

void pause_watch::tick(clock::time_point now) {
  auto gap = now - last_tick_;
  last_tick_ = now;
  if (gap > longest_stall) {
    lists_->woke(now);
    spdlog::warn("this node did not run for {} ms (a stall or a frozen "
                 "machine): its coordinators take no request until every "
                 "peer answered again",
                 std::chrono::duration_cast<std::chrono::milliseconds>(gap)
                   .count());
  }
  // After `woke`, as above.
  lists_->ran(now, longest_stall);
}

} // namespace coalesce
