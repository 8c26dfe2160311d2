#include <coalesce/node/pause_watch.hpp>

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

namespace coalesce {

pause_watch::pause_watch(std::shared_ptr<serving_lists> lists,
                         clock::duration peer_timeout, clock::time_point now)
  : lists_(std::move(lists)),
    longest_stall_(std::max(peer_timeout, 4 * tick_interval)),
    last_tick_(now) {
  // nop
}

void pause_watch::continued(clock::time_point now) {
  lists_->woke(now);
  last_tick_ = now;
  spdlog::warn("this node was stopped and continued (SIGCONT): its "
               "coordinators take no request until every peer answered "
               "again");
}

void pause_watch::tick(clock::time_point now) {
  auto gap = now - last_tick_;
  last_tick_ = now;
  if (gap <= longest_stall_)
    return;
  lists_->woke(now);
  spdlog::warn("this node did not run for {} ms (a stall or a frozen "
               "machine): its coordinators take no request until every peer "
               "answered again",
               std::chrono::duration_cast<std::chrono::milliseconds>(gap)
                 .count());
}

} // namespace coalesce
