#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <coalesce/messages/secret_entry.hpp>

// Only for the suites that still reach test_config through this header
// (tests/node/bad_requests.cpp); a suite includes test_config.hpp itself.
#include "test_config.hpp"

/// Secrets for the suites of the secret buffer and its storage: one chat,
/// fixed senders, secrets filled with one byte.
namespace coalesce::test {

/// The seed's test entry: chat "g@g.us", a 32-byte secret filled with
/// `fill`, never expiring, message time 7.
inline secret_entry make_entry(const std::string& msg_id, uint8_t fill,
                               const std::string& sender = "a@s.whatsapp.net") {
  return secret_entry{"g@g.us", sender, msg_id,
                      std::vector<uint8_t>(secret_size, fill), 0, 7};
}

inline secret_key key_of(const std::string& msg_id,
                         const std::string& sender = "a@s.whatsapp.net") {
  return secret_key{"g@g.us", sender, msg_id};
}

inline std::vector<uint8_t> secret_of(uint8_t fill) {
  return std::vector<uint8_t>(secret_size, fill);
}

inline secret_write capture(secret_entry entry, int64_t captured_at) {
  return secret_write{std::move(entry), captured_at};
}

} // namespace coalesce::test
