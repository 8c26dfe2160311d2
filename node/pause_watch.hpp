#pragma once

#include <chrono>
#include <memory>

#include <coalesce/node/serving_lists.hpp>

/// Tells a clustered node's view of its peers' lists (serving_lists.hpp)
/// that the node was paused, however briefly: its peers may have changed
/// cluster lists while it slept, and what they answered before says
/// nothing of that. The node's main thread feeds it:
/// - `continued`: the process received SIGCONT (it was stopped, by SIGSTOP,
///   SIGTSTP or a debugger, and continued); exact, whatever the pause's
///   length;
/// - `tick`: the main thread's own regular wake-ups; one later than
///   `longest_stall` (1 s) after the one before means the process did not
///   run meanwhile (a frozen VM, a stall), or ran too starved to tell.
/// Either makes the view stale until every peer was asked again
/// (`serving_lists::woke`), and logs one line. Each tick also tells the
/// view that the loop ran (`serving_lists::ran`): a view whose loop has
/// not run for `longest_stall` is stale already, so a coordinator that
/// runs again after a pause before the main loop does answers nothing ok
/// on its old view.
///
/// Without it only a silence of three peer timeouts showed a pause, so a
/// node paused for less than that across a whole change of the cluster
/// list woke trusting its peers' old answers (operating.md, "A node that
/// was paused").
namespace coalesce {

class pause_watch {
public:
  using clock = serving_lists::clock;

  /// How often the main thread wakes to `tick`.
  static constexpr clock::duration tick_interval
    = std::chrono::milliseconds{250};

  /// The longest gap between two ticks that is no stall: four ticks. Not
  /// tied to `peer-timeout`: a stall need only be shorter than the
  /// quickest change of the list to matter (the membership campaign's
  /// quickest took 1.1 s), and a main thread kept from running for a second
  /// is rare enough that re-asking the peers then costs little.
  static constexpr clock::duration longest_stall = 4 * tick_interval;

  /// Watches for `lists`, the first tick at `now`.
  pause_watch(std::shared_ptr<serving_lists> lists, clock::time_point now);

  void continued(clock::time_point now);

  void tick(clock::time_point now);

private:
  std::shared_ptr<serving_lists> lists_;
  clock::time_point last_tick_;
};

} // namespace coalesce
