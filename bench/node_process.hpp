#pragma once

// A real coalesce-node child process for the benchmarks that drive a node
// from outside (remote, soak): its temporary directory, starting it on
// 127.0.0.1 with port 0 and reading the port from its log, its CPU time
// and resident memory from /proc, and stopping it with SIGTERM.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace coalesce::bench {

/// The node children started and not yet stopped (`node_process`).
inline std::vector<pid_t>& live_children() {
  static std::vector<pid_t> pids;
  return pids;
}

/// Ends the benchmark at once with `what`, prefixed by its name. `exit`
/// skips the destructors of the `node_process` objects on the stack, whose
/// children would run on without a parent: they are killed here.
[[noreturn]] inline void fail_bench(const std::string& bench,
                                    const std::string& what) {
  std::cerr << "bench " << bench << ": " << what << '\n';
  for (auto pid : live_children()) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  std::exit(EXIT_FAILURE);
}

/// The directory this binary sits in (the build's bin/, where coalesce-node
/// is too).
inline std::string own_directory() {
  char path[PATH_MAX];
  auto n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0)
    return ".";
  std::string result(path, static_cast<std::size_t>(n));
  return result.substr(0, result.rfind('/'));
}

/// CPU seconds (user and system) process `pid` used so far, from
/// /proc/PID/stat (utime and stime, the 14th and 15th fields).
inline double cpu_seconds_of(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string text{std::istreambuf_iterator<char>{in}, {}};
  // The command name in parentheses may hold spaces: count after it.
  std::istringstream fields{text.substr(text.rfind(')') + 1)};
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i >= 14)
      ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// Resident memory of process `pid` in KiB (VmRSS of /proc/PID/status); 0
/// when it cannot be read.
inline uint64_t resident_kib_of(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

/// Ports the kernel hands out now, released at once: each node's fixed
/// entry of a cluster list. Ends benchmark `bench` when it cannot.
inline std::vector<uint16_t> free_ports(const std::string& bench,
                                        std::size_t count) {
  std::vector<int> sockets;
  std::vector<uint16_t> ports;
  for (std::size_t i = 0; i < count; ++i) {
    auto fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(addr);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), size) != 0
        || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) != 0)
      fail_bench(bench, "cannot get a free port");
    sockets.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (auto fd : sockets)
    close(fd);
  return ports;
}

/// `x` to two decimals, as the benchmarks print ratios and times.
inline double round2(double x) {
  return std::round(x * 100) / 100;
}

/// The machine's 1-minute load average: what else was running shapes the
/// figures on a shared 2-core machine.
inline double load_average() {
  double one_minute = 0;
  std::ifstream{"/proc/loadavg"} >> one_minute;
  return one_minute;
}

/// A fresh directory, removed afterwards.
class temp_dir {
public:
  temp_dir(const std::string& base, const char* what) {
    std::string pattern = base + "/coalesce-bench-" + what + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      fail_bench(what, "cannot create a directory under " + base);
    path_ = pattern;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  ~temp_dir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    static_cast<void>(std::system(cmd.c_str()));
  }

  const std::string& path() const {
    return path_;
  }

private:
  std::string path_;
};

/// A coalesce-node child (`binary`) on 127.0.0.1 with its database in
/// `dir`, a free port and its log in dir/node.log; stopped with SIGTERM on
/// destruction. `bench` names the benchmark in its messages.
class node_process {
public:
  node_process(std::string bench, const std::string& binary,
               const std::string& dir,
               const std::vector<std::string>& extra_args)
    : bench_(std::move(bench)), log_(dir + "/node.log") {
    std::vector<std::string> args{binary,
                                  "--coalesce.host=127.0.0.1",
                                  "--coalesce.port=0",
                                  "--coalesce.db-path=" + dir + "/db",
                                  "--coalesce.stats-interval=0s",
                                  "--coalesce.log-level=info"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
    auto spawned = posix_spawn(&pid_, binary.c_str(), &files, nullptr,
                               argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    if (spawned != 0)
      fail_bench(bench_, "cannot start " + binary + ": "
                           + std::strerror(spawned));
    live_children().push_back(pid_);
    port_ = await_listening();
  }

  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  /// SIGTERM, then waits for the node to write everything and exit.
  ~node_process() {
    static_cast<void>(stop());
  }

  /// SIGTERM, then waits for the node to write everything and exit;
  /// whether it exited 0 within 60 s (a note on stderr if not).
  bool stop() {
    if (pid_ < 0)
      return exited_cleanly_;
    kill(pid_, SIGTERM);
    int status = 0;
    if (!wait_exit(std::chrono::seconds{60}, status)) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      std::cerr << "bench " << bench_ << ": the node did not stop within 60s\n";
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::cerr << "bench " << bench_ << ": the node exited with status "
                << status << ":\n"
                << log_text();
    } else {
      exited_cleanly_ = true;
    }
    auto& live = live_children();
    live.erase(std::remove(live.begin(), live.end(), pid_), live.end());
    pid_ = -1;
    return exited_cleanly_;
  }

  pid_t pid() const {
    return pid_;
  }

  uint16_t port() const {
    return port_;
  }

  double cpu_seconds() const {
    return cpu_seconds_of(pid_);
  }

  /// Whether the node said it listens with mutual TLS.
  bool tls() const {
    return tls_;
  }

  std::string log_text() const {
    std::ifstream in{log_};
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

private:
  using clock_type = std::chrono::steady_clock;

  bool wait_exit(std::chrono::seconds limit, int& status) {
    auto deadline = clock_type::now() + limit;
    while (clock_type::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    return false;
  }

  /// Polls the log for the node's "listening on" line (a real event, with
  /// a generous deadline), as the process tests do.
  uint16_t await_listening() {
    static const std::regex listening{
      "listening on [0-9.]+:([0-9]+)( \\(mutual TLS\\))?"};
    auto deadline = clock_type::now() + std::chrono::seconds{30};
    while (clock_type::now() < deadline) {
      std::smatch found;
      auto text = log_text();
      if (std::regex_search(text, found, listening)) {
        tls_ = found[2].matched;
        return static_cast<uint16_t>(std::stoi(found[1].str()));
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        fail_bench(bench_, "the node exited during start-up:\n" + text);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    fail_bench(bench_, "the node did not log 'listening on' within 30s:\n"
                         + log_text());
  }

  std::string bench_;
  std::string log_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  bool tls_ = false;
  bool exited_cleanly_ = false;
};

} // namespace coalesce::bench
