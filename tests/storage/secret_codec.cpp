#define CAF_SUITE storage.secret_codec
#include <caf/test/unit_test.hpp>

#include <coalesce/storage/secret_codec.hpp>

#include "secret_fixtures.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;

/// Keys are length-prefixed: without that, ("ab", "c") and ("a", "bc") would
/// name the same row.
CAF_TEST(key components cannot bleed into each other) {
  CAF_CHECK_NOT_EQUAL(encode_secret_key("ab", "c", "m"),
                      encode_secret_key("a", "bc", "m"));
  CAF_CHECK_NOT_EQUAL(encode_secret_key("a", "b", "cm"),
                      encode_secret_key("a", "bc", "m"));
}

CAF_TEST(keys round trip whatever bytes they contain) {
  secret_key key{std::string{"g\0@", 3}, "sender", std::string(300, 'x')};
  auto decoded = decode_secret_key(encode_secret_key(key));
  CAF_REQUIRE(decoded.has_value());
  CAF_CHECK(*decoded == key);
}

CAF_TEST(values round trip with their retention metadata) {
  auto row = capture(make_entry("M1", 0x11), 1234);
  row.entry.expires_at = -5;
  row.entry.message_ts = 99;
  auto decoded = decode_secret_value(encode_secret_value(row));
  CAF_REQUIRE(decoded.has_value());
  CAF_CHECK(decoded->entry.secret == row.entry.secret);
  CAF_CHECK_EQUAL(decoded->entry.expires_at, -5);
  CAF_CHECK_EQUAL(decoded->entry.message_ts, 99);
  CAF_CHECK_EQUAL(decoded->captured_at, 1234);
}

CAF_TEST(values round trip with their stamps) {
  auto row = capture(make_entry("M1", 0x11), 1234);
  row.entry.stamp = ~uint64_t{0} - 3;
  row.entry.ts_stamp = 77;
  auto decoded = decode_secret_value(encode_secret_value(row));
  CAF_REQUIRE(decoded.has_value());
  CAF_CHECK_EQUAL(decoded->entry.stamp, row.entry.stamp);
  CAF_CHECK_EQUAL(decoded->entry.ts_stamp, 77u);
}

/// Rows written before stamps existed (format 1) still read, unstamped.
CAF_TEST(a value of the unstamped format reads with stamps 0) {
  auto row = capture(make_entry("M1", 0x11), 1234);
  row.entry.stamp = 5;
  auto bytes = encode_secret_value(row);
  auto old_format = bytes.substr(0, bytes.size() - 16);
  old_format[0] = 1;
  auto decoded = decode_secret_value(old_format);
  CAF_REQUIRE(decoded.has_value());
  CAF_CHECK(decoded->entry.secret == row.entry.secret);
  CAF_CHECK_EQUAL(decoded->captured_at, 1234);
  CAF_CHECK_EQUAL(decoded->entry.stamp, 0u);
  CAF_CHECK(!decode_secret_value(old_format + std::string(16, '\0')));
}

/// A damaged row must be reported, never read as a different secret.
CAF_TEST(truncated or unknown values are rejected) {
  auto bytes = encode_secret_value(capture(make_entry("M1", 0x11), 1));
  CAF_CHECK(!decode_secret_value(bytes.substr(0, bytes.size() - 1)));
  CAF_CHECK(!decode_secret_value(bytes + "x"));
  auto unknown_format = bytes;
  unknown_format[0] = 9;
  CAF_CHECK(!decode_secret_value(unknown_format));
  CAF_CHECK(!decode_secret_value(""));
  CAF_CHECK(!decode_secret_key("\x00\x00\x00\x05" "ab"));
}
