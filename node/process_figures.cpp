#include <coalesce/node/process_figures.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <sys/resource.h>
#include <unistd.h>

namespace coalesce {

namespace {

/// The seconds since the epoch at which the machine booted (`btime`).
std::optional<double> boot_time() {
  std::ifstream in{"/proc/stat"};
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value)
      return value;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

} // namespace

std::optional<process_figures> read_process_figures() {
  std::ifstream stat_file{"/proc/self/stat"};
  std::string stat;
  if (!std::getline(stat_file, stat))
    return std::nullopt;
  // The command name, field 2, may hold spaces: fields count from its ')'.
  auto after_name = stat.rfind(')');
  if (after_name == std::string::npos)
    return std::nullopt;
  std::istringstream fields{stat.substr(after_name + 2)};
  std::string field;
  double utime = 0, stime = 0, starttime = 0, vsize = 0, rss = 0;
  // Fields 3 on: state is 3, utime 14, stime 15, starttime 22, vsize 23,
  // rss 24.
  for (int number = 3; number <= 24 && fields >> field; ++number) {
    switch (number) {
      case 14: utime = std::stod(field); break;
      case 15: stime = std::stod(field); break;
      case 22: starttime = std::stod(field); break;
      case 23: vsize = std::stod(field); break;
      case 24: rss = std::stod(field); break;
      default: break;
    }
  }
  auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  auto page = static_cast<double>(sysconf(_SC_PAGESIZE));
  auto booted = boot_time();
  if (ticks <= 0 || page <= 0 || !booted)
    return std::nullopt;
  process_figures result;
  result.cpu_seconds = (utime + stime) / ticks;
  result.resident_bytes = rss * page;
  result.virtual_bytes = vsize;
  result.start_time_seconds = *booted + starttime / ticks;
  std::error_code ignored;
  for (auto i = std::filesystem::directory_iterator{"/proc/self/fd", ignored};
       i != std::filesystem::directory_iterator{}; i.increment(ignored))
    result.open_fds += 1;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0)
    result.max_fds = static_cast<double>(limit.rlim_cur);
  return result;
}

} // namespace coalesce
