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

void merge_message_time(const secret_entry& existing, secret_entry& result) {
  if (existing.message_ts == 0)
    return;
  // Equal stamps of two clients' captures: the greater time, alike
  // everywhere. Unstamped (0), the capture's, as sequential writes.
  auto tie_wins = existing.ts_stamp == result.ts_stamp && existing.ts_stamp != 0
                  && existing.message_ts > result.message_ts;
  if (result.message_ts == 0 || existing.ts_stamp > result.ts_stamp
      || tie_wins) {
    result.message_ts = existing.message_ts;
    result.ts_stamp = existing.ts_stamp;
  }
}

secret_write apply_capture(const secret_write* existing,
                           const secret_write& capture) {
  if (existing == nullptr || is_expired(*existing, capture.captured_at))
    return capture;
  auto result = capture;
  auto tie_wins = existing->entry.stamp == capture.entry.stamp
                  && existing->entry.stamp != 0
                  && existing->entry.secret > capture.entry.secret;
  if (existing->entry.stamp > capture.entry.stamp || tie_wins) {
    result.entry.secret = existing->entry.secret;
    result.entry.stamp = existing->entry.stamp;
  }
  result.entry.expires_at
    = merge_expiry(existing->entry.expires_at, capture.entry.expires_at);
  merge_message_time(existing->entry, result.entry);
  result.captured_at = existing->captured_at;
  return result;
}

secret_write coalesce_captures(const secret_write& earlier,
                               const secret_write& later) {
  auto result = apply_capture(&earlier, later);
  if (is_expired(earlier, later.captured_at)) {
    // Onto a row still live for both captures, `earlier` is applied first
    // and its message time survives an unknown later one.
    merge_message_time(earlier.entry, result.entry);
    result.captured_at = std::max(earlier.captured_at, later.captured_at);
  }
  return result;
}

int64_t unix_now() {
  using namespace std::chrono;
  return duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
}

} // namespace coalesce::storage
