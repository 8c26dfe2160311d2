#include "fault_control.hpp"

#include <chrono>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

namespace coalesce {

fault_control::fault_control(std::string path,
                             std::shared_ptr<storage::fault_switches> switches)
  : path_(std::move(path)), switches_(std::move(switches)) {
  poller_ = std::thread{[this] {
    std::string last;
    while (!stop_) {
      std::ifstream file{path_};
      std::stringstream text;
      if (file)
        text << file.rdbuf();
      if (text.str() != last) {
        last = text.str();
        apply(last);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{50});
    }
  }};
}

fault_control::~fault_control() {
  stop_ = true;
  poller_.join();
}

void fault_control::apply(const std::string& text) {
  bool wal_append = false;
  bool wal_sync = false;
  bool sst_append = false;
  bool disk_full = false;
  auto kind = storage::fault_kind::eio;
  std::istringstream words{text};
  std::string word;
  while (words >> word) {
    if (word == "wal_append")
      wal_append = true;
    else if (word == "wal_sync")
      wal_sync = true;
    else if (word == "sst_append")
      sst_append = true;
    else if (word == "disk_full")
      disk_full = true;
    else if (word == "enospc")
      kind = storage::fault_kind::enospc;
    else if (word == "retryable")
      kind = storage::fault_kind::retryable;
  }
  switches_->kind = static_cast<int>(kind);
  switches_->wal_append = wal_append;
  switches_->wal_sync = wal_sync;
  switches_->sst_append = sst_append;
  switches_->disk_full = disk_full;
  spdlog::warn("fault seam: faults now \"{}\"", text);
}

} // namespace coalesce
