#include "log_format.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <syslog.h>

namespace coalesce {

namespace {

/// `%*` in a journal pattern: the syslog priority of the line's level.
class syslog_priority : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    auto digit = '0' + priority_of(msg.level);
    dest.push_back(static_cast<char>(digit));
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<syslog_priority>();
  }

private:
  static int priority_of(spdlog::level::level_enum level) {
    switch (level) {
      case spdlog::level::critical:
        return LOG_CRIT;
      case spdlog::level::err:
        return LOG_ERR;
      case spdlog::level::warn:
        return LOG_WARNING;
      case spdlog::level::info:
        return LOG_INFO;
      default:
        return LOG_DEBUG;
    }
  }
};

/// `%*` in the JSON pattern: the message as a JSON string (escaped; bytes
/// that are not UTF-8 replaced, never an exception).
class json_message : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    auto text = nlohmann::json(std::string{msg.payload.data(),
                                           msg.payload.size()})
                  .dump(-1, ' ', false,
                        nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_message>();
  }
};

/// Whether stdout is the stream JOURNAL_STREAM ("DEVICE:INODE") names:
/// systemd sets it for a service whose output goes to the journal, and a
/// child that redirected its output does not match it.
bool stdout_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr)
    return false;
  struct stat out {};
  if (fstat(fileno(stdout), &out) != 0)
    return false;
  return std::string{stream}
         == std::to_string(out.st_dev) + ":" + std::to_string(out.st_ino);
}

} // namespace

void configure_logging(const node_settings& settings) {
  spdlog::set_level(spdlog::level::from_str(settings.log_level));
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (settings.log_format == "json") {
    formatter->add_flag<json_message>('*').set_pattern(
      R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","message":%*})");
  } else if (stdout_is_journal()) {
    formatter->add_flag<syslog_priority>('*').set_pattern("<%*>%v");
  } else {
    return; // spdlog's own: [time] [level] message
  }
  spdlog::set_formatter(std::move(formatter));
}

} // namespace coalesce
