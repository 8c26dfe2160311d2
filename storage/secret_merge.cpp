#include <coalesce/storage/secret_merge.hpp>

#include <algorithm>
#include <chrono>

namespace coalesce::storage {

int64_t merge_expiry(int64_t existing, int64_t incoming) {
  if (existing == 0 || incoming == 0)
    return 0;
  return std::max(existing, incoming);
}

int64_t merge_message_ts(int64_t existing, int64_t incoming) {
  return incoming != 0 ? incoming : existing;
}

bool is_expired(const secret_write& row, int64_t now) {
  return row.entry.expires_at != 0 && row.entry.expires_at <= now;
}

secret_write apply_capture(const secret_write* existing,
                           const secret_write& capture) {
  if (existing == nullptr || is_expired(*existing, capture.captured_at))
    return capture;
  auto result = capture;
  result.entry.expires_at
    = merge_expiry(existing->entry.expires_at, capture.entry.expires_at);
  result.entry.message_ts
    = merge_message_ts(existing->entry.message_ts, capture.entry.message_ts);
  result.captured_at = existing->captured_at;
  return result;
}

secret_write coalesce_captures(const secret_write& earlier,
                               const secret_write& later) {
  auto result = apply_capture(&earlier, later);
  if (is_expired(earlier, later.captured_at)) {
    // Onto a row still live for both captures, `earlier` is applied first
    // and its message time survives an unknown later one.
    result.entry.message_ts
      = merge_message_ts(earlier.entry.message_ts, later.entry.message_ts);
    result.captured_at = std::max(earlier.captured_at, later.captured_at);
  }
  return result;
}

int64_t unix_now() {
  using namespace std::chrono;
  return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

} // namespace coalesce::storage
