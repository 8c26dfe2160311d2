#pragma once

// The CPU time a benchmark's own process used, beside the wall clock: what
// each design costs, not only how fast it runs.

#include <sys/resource.h>

namespace coalesce::bench {

/// CPU seconds (user and system) this process used so far.
inline double own_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

} // namespace coalesce::bench
