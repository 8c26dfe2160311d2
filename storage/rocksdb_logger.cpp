#include <coalesce/storage/rocksdb_logger.hpp>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <string_view>
#include <mutex>
#include <unordered_map>

#include <rocksdb/env.h>
#include <spdlog/spdlog.h>

namespace coalesce::storage {

namespace {

spdlog::level::level_enum to_spdlog(rocksdb::InfoLogLevel level) {
  switch (level) {
    case rocksdb::InfoLogLevel::DEBUG_LEVEL:
      return spdlog::level::debug;
    case rocksdb::InfoLogLevel::INFO_LEVEL:
      return spdlog::level::info;
    case rocksdb::InfoLogLevel::WARN_LEVEL:
      return spdlog::level::warn;
    case rocksdb::InfoLogLevel::ERROR_LEVEL:
      return spdlog::level::err;
    case rocksdb::InfoLogLevel::FATAL_LEVEL:
      return spdlog::level::critical;
    case rocksdb::InfoLogLevel::HEADER_LEVEL:
    case rocksdb::InfoLogLevel::NUM_INFO_LOG_LEVELS:
      break;
  }
  return spdlog::level::debug;
}

/// The lowest RocksDB level spdlog's default logger lets through, so that
/// RocksDB skips building messages nobody reads.
rocksdb::InfoLogLevel from_spdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return rocksdb::InfoLogLevel::DEBUG_LEVEL;
    case spdlog::level::info:
      return rocksdb::InfoLogLevel::INFO_LEVEL;
    case spdlog::level::warn:
      return rocksdb::InfoLogLevel::WARN_LEVEL;
    case spdlog::level::err:
      return rocksdb::InfoLogLevel::ERROR_LEVEL;
    default:
      return rocksdb::InfoLogLevel::FATAL_LEVEL;
  }
}

/// Info messages an operator does not read: the periodic statistics dump
/// (a banner line, then one message of many lines that starts with
/// "** DB Stats **"), the EVENT_LOG_v1 JSON lines, which repeat for tools
/// what the prose lines beside them say, and MANIFEST edit dumps.
bool is_routine_dump(std::string_view text) {
  return text.find("DUMPING STATS") != std::string_view::npos
         || text.find("** DB Stats **") != std::string_view::npos
         || text.find("** Compaction Stats") != std::string_view::npos
         || text.find("EVENT_LOG_v1") != std::string_view::npos
         || text.find("VersionEdit {") != std::string_view::npos;
}

/// RocksDB logs an error for the directory of a database it is about to
/// create; a node starting on a fresh path is no error.
bool is_new_directory(std::string_view text) {
  return text.find("Error when reading") != std::string_view::npos
         && text.find("dir NotFound") != std::string_view::npos;
}

/// RocksDB repeats its warnings at every retry while a fault lasts (a
/// failed open every few seconds while a disk is full): each shape of
/// message (digits ignored, so file numbers do not count) reaches the
/// operator once a minute at most; repeats go to debug.
class repeat_filter {
public:
  bool seen_recently(const std::string& text) {
    std::string shape;
    for (char c : text)
      if (c < '0' || c > '9')
        shape.push_back(c);
    auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> guard{mutex_};
    if (last_logged_.size() > 1000)
      last_logged_.clear(); // Bounded: forgetting only lets a repeat through.
    auto [at, inserted] = last_logged_.emplace(shape, now);
    if (inserted || now - at->second > std::chrono::minutes{1}) {
      at->second = now;
      return false;
    }
    return true;
  }

private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::chrono::steady_clock::time_point>
    last_logged_;
};

class spdlog_logger : public rocksdb::Logger {
public:
  using rocksdb::Logger::Logv;

  void LogHeader(const char* format, va_list ap) override {
    forward(spdlog::level::debug, format, ap);
  }

  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    forward(to_spdlog(level), format, ap);
  }

  void Logv(const char* format, va_list ap) override {
    forward(spdlog::level::info, format, ap);
  }

  rocksdb::InfoLogLevel GetInfoLogLevel() const override {
    return from_spdlog(spdlog::default_logger_raw()->level());
  }

private:
  void forward(spdlog::level::level_enum level, const char* format,
                      va_list ap) {
    auto* target = spdlog::default_logger_raw();
    if (!target->should_log(level))
      return;
    char small[512];
    va_list copy;
    va_copy(copy, ap);
    auto needed = std::vsnprintf(small, sizeof(small), format, copy);
    va_end(copy);
    if (needed < 0)
      return;
    std::string text;
    if (static_cast<size_t>(needed) < sizeof(small)) {
      text.assign(small, static_cast<size_t>(needed));
    } else {
      text.resize(static_cast<size_t>(needed) + 1);
      std::vsnprintf(text.data(), text.size(), format, ap);
      text.resize(static_cast<size_t>(needed));
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back(); // spdlog ends the line itself.
    if (level == spdlog::level::info && is_routine_dump(text))
      level = spdlog::level::debug;
    if (level == spdlog::level::err && is_new_directory(text))
      level = spdlog::level::debug;
    if (level >= spdlog::level::warn && repeats_.seen_recently(text))
      level = spdlog::level::debug;
    if (level > spdlog::level::debug)
      std::replace(text.begin(), text.end(), '\n', ' ');
    target->log(level, "rocksdb: {}", text);
  }

  repeat_filter repeats_;
};

} // namespace

std::shared_ptr<rocksdb::Logger> make_rocksdb_logger() {
  return std::make_shared<spdlog_logger>();
}

} // namespace coalesce::storage
