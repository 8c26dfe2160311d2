#include <coalesce/node/key_release.hpp>

#include <utility>

#include <spdlog/spdlog.h>

namespace coalesce {

bool may_release(bool catching_up, serving_lists* lists) {
  if (catching_up || lists == nullptr)
    return false;
  auto view = lists->current();
  return view->settled && view->others.empty() && !lists->stale();
}

key_release::key_release(std::string kind, std::string unit,
                         released_kind slot,
                         std::shared_ptr<peer_counters> counters,
                         std::function<std::string(const caf::error&)> render)
  : kind_(std::move(kind)),
    unit_(std::move(unit)),
    slot_(slot),
    counters_(std::move(counters)),
    render_(std::move(render)) {
  // nop
}

void key_release::start(std::vector<std::vector<std::size_t>> replicas,
                        check_fn check, drop_fn drop,
                        std::function<bool()> allowed, report_fn report) {
  running_ = true;
  replicas_ = std::move(replicas);
  check_ = std::move(check);
  drop_ = std::move(drop);
  allowed_ = std::move(allowed);
  report_ = std::move(report);
  next_ = 0;
  in_flight_ = 0;
  dropped_ = 0;
  kept_ = 0;
  failure_.clear();
  stopped_ = false;
  counters_->keys_to_hand_off[static_cast<std::size_t>(slot_)]
    = replicas_.size();
  run();
}

void key_release::run() {
  if (in_run_) {
    run_again_ = true;
    return;
  }
  in_run_ = true;
  do {
    run_again_ = false;
    if (stopped_ || next_ == replicas_.size()) {
      if (in_flight_ == 0) {
        in_run_ = false;
        finish();
        return;
      }
      break;
    }
    if (in_flight_ == window)
      break;
    auto key = next_++;
    ++in_flight_;
    const auto& set = replicas_[key];
    struct tally {
      std::size_t holding = 0;
      std::size_t answered = 0;
      bool decided = false;
    };
    auto counted = std::make_shared<tally>();
    const auto needed = set.size() / 2 + 1;
    const auto asked = set.size();
    for (auto replica : set)
      check_(replica, key,
             [this, counted, needed, asked, key](caf::expected<bool> holds) {
               if (counted->decided)
                 return;
               ++counted->answered;
               if (!holds && failure_.empty())
                 failure_ = render_(holds.error());
               if (holds && *holds)
                 ++counted->holding;
               if (counted->holding >= needed) {
                 counted->decided = true;
                 if (!allowed_()) {
                   stopped_ = true;
                   decided(false);
                   return;
                 }
                 drop_(key, [this](caf::expected<bool> dropped) {
                   if (!dropped && failure_.empty())
                     failure_ = render_(dropped.error());
                   decided(dropped && *dropped);
                 });
               } else if (counted->answered == asked) {
                 counted->decided = true;
                 decided(false);
               }
             });
    // A key of no replica (none listed) is kept: nothing can be asked.
    if (set.empty()) {
      --in_flight_;
      ++kept_;
    }
    // The next key, up to the window.
    run_again_ = true;
  } while (run_again_);
  in_run_ = false;
}

void key_release::decided(bool dropped) {
  --in_flight_;
  if (dropped) {
    ++dropped_;
    ++counters_->keys_dropped;
    --counters_->keys_to_hand_off[static_cast<std::size_t>(slot_)];
  } else {
    ++kept_;
  }
  run();
}

void key_release::finish() {
  running_ = false;
  // Keys a stopped pass never reached are still held.
  kept_ += replicas_.size() - next_;
  counters_->keys_to_hand_off[static_cast<std::size_t>(slot_)] = kept_;
  if (dropped_ > 0)
    spdlog::info("{}: dropped {} {} this node no longer replicates: a "
                 "majority of each one's replicas under its cluster list "
                 "holds it at least as new; {} still held until they do",
                 kind_, dropped_, unit_, kept_);
  else if (kept_ > 0 && kept_ != last_kept_)
    spdlog::info("{}: {} {} this node no longer replicates are still held "
                 "until a majority of their replicas holds them{}{}",
                 kind_, kept_, unit_, failure_.empty() ? "" : "; ",
                 failure_);
  last_kept_ = kept_;
  auto report = std::move(report_);
  check_ = nullptr;
  drop_ = nullptr;
  allowed_ = nullptr;
  replicas_.clear();
  if (report)
    report(dropped_, kept_);
}

} // namespace coalesce
