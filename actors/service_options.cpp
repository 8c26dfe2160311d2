// The secret buffer's and the scheduler's settings: registration with CAF's
// config and validation, one place for each setting's key, description,
// default and rule. (Later services keep theirs beside their actors.)

#include <caf/config_option_adder.hpp>
#include <caf/make_config_option.hpp>
#include <caf/deep_to_string.hpp>

#include <coalesce/actors/backfill_scheduler.hpp>
#include <coalesce/actors/option_text.hpp>
#include <coalesce/actors/node_address.hpp>
#include <coalesce/actors/secret_buffer.hpp>

namespace coalesce {

void secret_buffer_options::add_to(caf::config_option_adder& adder) {
  adder
    .add(pending_limit, "secrets-pending-limit",
         described("distinct pending secrets before producers wait (> 0)",
                   pending_limit))
    .add(retry_base, "secrets-retry-base",
         described("first delay before a failed write is retried (> 0)",
                   retry_base))
    .add(retry_max, "secrets-retry-max",
         described("longest delay between retries of a failed write "
                   "(secrets-retry-base..5s)",
                   retry_max));
}

std::string secret_buffer_options::validate(const std::string& group) const {
  if (pending_limit == 0)
    return option_key(group, "secrets-pending-limit") + " = 0 must be positive";
  if (retry_base.count() <= 0)
    return option_key(group, "secrets-retry-base") + " = "
           + duration_text(retry_base) + " must be positive";
  if (retry_max < retry_base || retry_max > std::chrono::seconds{5})
    return option_key(group, "secrets-retry-max") + " = "
           + duration_text(retry_max) + " must lie between "
           + option_key(group, "secrets-retry-base") + " and 5s";
  return {};
}

void backfill_scheduler_options::add_to(caf::config_option_adder& adder) {
  adder
    .add(limits.max_concurrent, "scheduler-max-concurrent",
         described("back-pagination runs at once (> 0)",
                   limits.max_concurrent))
    .add(limits.max_queued, "scheduler-max-queued",
         described("distinct back-pagination runs that may wait (> 0)",
                   limits.max_queued))
    .add(limits.max_per_priority[0], "scheduler-max-concurrent-low",
         described("low-priority runs at once (0: no cap)",
                   limits.max_per_priority[0]))
    .add(limits.max_per_priority[1], "scheduler-max-concurrent-normal",
         described("normal-priority runs at once (0: no cap)",
                   limits.max_per_priority[1]))
    .add(limits.max_per_priority[2], "scheduler-max-concurrent-high",
         described("high-priority runs at once (0: no cap)",
                   limits.max_per_priority[2]))
    .add(pager_timeout, "scheduler-pager-timeout",
         described("how long one batch may take before a run fails (> 0)",
                   pager_timeout))
    .add(results_memory, "scheduler-results-memory",
         described("bytes of finished backfill results kept for a later "
                   "await (> 0)",
                   results_memory))
    .add(remote_pager, "scheduler-remote-pager",
         described("host:port of the node whose timeline the scheduler "
                   "pages (empty: this node's own)",
                   remote_pager));
}

std::string backfill_scheduler_options::validate(const std::string& group) const {
  if (limits.max_concurrent == 0)
    return option_key(group, "scheduler-max-concurrent") + " = 0 must be positive";
  if (limits.max_queued == 0)
    return option_key(group, "scheduler-max-queued") + " = 0 must be positive";
  if (results_memory == 0)
    return option_key(group, "scheduler-results-memory") + " = 0 must be positive";
  if (pager_timeout.count() <= 0)
    return option_key(group, "scheduler-pager-timeout") + " = "
           + duration_text(pager_timeout) + " must be positive";
  if (!remote_pager.empty() && !parse_node_address(remote_pager))
    return option_key(group, "scheduler-remote-pager") + " = \""
           + remote_pager
           + "\" must be host:port with a port in 1..65535, or empty for "
             "this node's own timeline";
  return {};
}

} // namespace coalesce
