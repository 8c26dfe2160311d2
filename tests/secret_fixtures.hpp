#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>

#include <coalesce/messages/registration.hpp>
#include <coalesce/messages/secret_entry.hpp>

namespace coalesce::test {

/// The config every test system uses: coalesce's types registered as a node
/// registers them.
struct test_config : caf::actor_system_config {
  test_config() {
    register_message_types(*this);
  }
};

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
