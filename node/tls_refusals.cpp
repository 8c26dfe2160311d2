#include <coalesce/node/tls_refusals.hpp>

#include <chrono>
#include <mutex>

#include <spdlog/spdlog.h>

namespace coalesce {

namespace {

/// At most `refusal_lines_per_minute` lines in any minute from the first.
class refusal_log {
public:
  void note(const std::string& line) {
    using clock = std::chrono::steady_clock;
    std::lock_guard<std::mutex> guard{mutex_};
    auto now = clock::now();
    if (lines_ == 0 || now - window_start_ >= std::chrono::minutes{1}) {
      window_start_ = now;
      lines_ = 0;
    }
    if (lines_ >= refusal_lines_per_minute) {
      ++left_out_;
      return;
    }
    ++lines_;
    if (left_out_ > 0) {
      spdlog::warn("{} ({} refused handshakes before it were not logged)",
                   line, left_out_);
      left_out_ = 0;
    } else {
      spdlog::warn("{}", line);
    }
  }

private:
  std::mutex mutex_;
  std::chrono::steady_clock::time_point window_start_{};
  int lines_ = 0;
  uint64_t left_out_ = 0;
};

} // namespace

std::atomic<uint64_t>& tls_handshakes_refused() {
  static std::atomic<uint64_t> count{0};
  return count;
}

void log_tls_refusal(const std::string& peer, bool accepting,
                     const std::string& reason) {
  static refusal_log log;
  tls_handshakes_refused() += 1;
  log.note(std::string{"TLS handshake "} + (accepting ? "from " : "with ")
           + peer + " refused: " + reason);
}

} // namespace coalesce
