#define CAF_SUITE messages.decoding
#include <caf/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/sec.hpp>

#include <coalesce/messages/registration.hpp>
#include <coalesce/messages/secret_entry.hpp>

using namespace coalesce;

namespace {

struct decoding_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;

  static caf::actor_system_config& registered(caf::actor_system_config& cfg) {
    register_message_types(cfg);
    return cfg;
  }

  decoding_fixture() : sys(registered(cfg)) {
    // nop
  }

  template <class T>
  std::vector<char> encode(T x) {
    std::vector<char> bytes;
    caf::binary_serializer sink{sys, bytes};
    CAF_REQUIRE(!sink(x));
    return bytes;
  }

  template <class T>
  caf::error decode(const std::vector<char>& bytes, T& x) {
    caf::binary_deserializer source{sys, bytes};
    return source(x);
  }
};

secret_entry entry_with(std::size_t secret_bytes) {
  return {"chat@g.us", "sender", "m1", std::vector<uint8_t>(secret_bytes, 7),
          0, 1700000000};
}

} // namespace

CAF_TEST_FIXTURE_SCOPE(decoding, decoding_fixture)

CAF_TEST(an entry decodes to itself with a wrong secret length too) {
  for (auto length : {std::size_t{32}, std::size_t{3}, max_decoded_secret}) {
    secret_entry decoded;
    CAF_CHECK(!decode(encode(entry_with(length)), decoded));
    CAF_CHECK(decoded == entry_with(length));
  }
}

CAF_TEST(a secret longer than the decoding limit is refused before it is read) {
  // Only the claimed length is over the limit: the bytes behind it are few,
  // so a decoder that sized the vector first would fail at the stream's
  // end instead, after allocating what the peer claimed.
  auto bytes = encode(entry_with(max_decoded_secret + 1));
  bytes.resize(bytes.size() - max_decoded_secret);
  secret_entry decoded;
  auto err = decode(bytes, decoded);
  CAF_CHECK_EQUAL(err, caf::sec::invalid_argument);
  secret_lookup lookup{true, std::vector<uint8_t>(max_decoded_secret + 1, 1), 9};
  auto lookup_bytes = encode(lookup);
  secret_lookup decoded_lookup;
  CAF_CHECK_EQUAL(decode(lookup_bytes, decoded_lookup), caf::sec::invalid_argument);
}

CAF_TEST_FIXTURE_SCOPE_END()
