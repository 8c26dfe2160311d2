#pragma once

// The CPU time a benchmark's own process used, beside the wall clock: what
// each design costs, not only how fast it runs; and per thread, which of
// its threads a design keeps busy.

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

namespace coalesce::bench {

/// CPU seconds (user and system) this process used so far.
inline double own_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// One thread of this process: its name and the CPU seconds it used.
struct thread_cpu {
  std::string name;
  double seconds = 0;
};

/// The CPU seconds each live thread of this process used so far, by thread
/// id, from /proc (Linux; empty elsewhere). The kernel counts in clock
/// ticks, so a phase of a few seconds is measured to about 1%.
inline std::map<long, thread_cpu> threads_cpu_seconds() {
  std::map<long, thread_cpu> out;
  auto* dir = opendir("/proc/self/task");
  if (dir == nullptr)
    return out;
  auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  while (auto* entry = readdir(dir)) {
    if (entry->d_name[0] == '.')
      continue;
    auto path = std::string{"/proc/self/task/"} + entry->d_name + "/stat";
    auto* file = std::fopen(path.c_str(), "r");
    if (file == nullptr)
      continue; // the thread ended meanwhile
    char buf[1024];
    auto size = std::fread(buf, 1, sizeof(buf) - 1, file);
    std::fclose(file);
    std::string stat{buf, size};
    // "tid (name) state ppid ...": the name may hold spaces and parentheses,
    // so it ends at the last ')'; utime and stime are fields 14 and 15.
    auto open = stat.find('(');
    auto close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos)
      continue;
    unsigned long utime = 0;
    unsigned long stime = 0;
    if (std::sscanf(stat.c_str() + close + 1,
                    " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                    &utime, &stime)
        != 2)
      continue;
    out[std::stol(entry->d_name)]
      = {stat.substr(open + 1, close - open - 1), (utime + stime) / ticks};
  }
  closedir(dir);
  return out;
}

/// The thread that used the most CPU between two `threads_cpu_seconds`
/// snapshots (a thread born between them counts from zero).
inline thread_cpu busiest_thread(const std::map<long, thread_cpu>& before,
                                 const std::map<long, thread_cpu>& after) {
  thread_cpu busiest;
  for (const auto& [tid, now] : after) {
    auto then = before.find(tid);
    auto used = now.seconds - (then == before.end() ? 0 : then->second.seconds);
    if (used > busiest.seconds)
      busiest = {now.name, used};
  }
  return busiest;
}

} // namespace coalesce::bench
