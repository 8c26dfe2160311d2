#define CAF_SUITE storage.secret_merge
#include <caf/test/unit_test.hpp>

#include "storage/secret_merge.hpp"

#include "secret_fixtures.hpp"

using namespace coalesce;
using namespace coalesce::storage;
using namespace coalesce::test;

namespace {

secret_write row(uint8_t fill, int64_t expires_at, int64_t message_ts,
                 int64_t captured_at) {
  auto entry = make_entry("PARENT", fill);
  entry.expires_at = expires_at;
  entry.message_ts = message_ts;
  return capture(std::move(entry), captured_at);
}

bool same_row(const secret_write& x, const secret_write& y) {
  return x.entry == y.entry && x.captured_at == y.captured_at;
}

} // namespace

CAF_TEST(never expire wins over any expiry and otherwise the later expiry) {
  CAF_CHECK_EQUAL(merge_expiry(0, 100), 0);
  CAF_CHECK_EQUAL(merge_expiry(100, 0), 0);
  CAF_CHECK_EQUAL(merge_expiry(100, 50), 100);
  CAF_CHECK_EQUAL(merge_expiry(50, 100), 100);
}

CAF_TEST(a known message time survives an unknown one and the later wins) {
  CAF_CHECK_EQUAL(merge_message_ts(50, 0), 50);
  CAF_CHECK_EQUAL(merge_message_ts(0, 50), 50);
  CAF_CHECK_EQUAL(merge_message_ts(50, 60), 60);
  CAF_CHECK_EQUAL(merge_message_ts(60, 50), 50);
}

CAF_TEST(a capture keeps its secret and merges metadata with the row) {
  auto existing = row(0x11, 0, 50, 10);
  auto result = apply_capture(&existing, row(0x22, 100, 0, 20));
  CAF_CHECK(result.entry.secret == secret_of(0x22));
  CAF_CHECK_EQUAL(result.entry.expires_at, 0);
  CAF_CHECK_EQUAL(result.entry.message_ts, 50);
}

/// The row had expired when the capture was made: it no longer counts, so
/// the result is the same whether or not a compaction purged it first.
CAF_TEST(a row expired at capture time counts as absent) {
  auto expired = row(0x11, 15, 50, 10);
  auto late = row(0x22, 100, 0, 20);
  CAF_CHECK(same_row(apply_capture(&expired, late),
                     apply_capture(nullptr, late)));
  auto early = row(0x22, 100, 0, 12);
  CAF_CHECK_EQUAL(apply_capture(&expired, early).entry.message_ts, 50);
}

/// A batch that reported failure may still have reached the WAL, and is
/// written again: applying a capture twice must equal applying it once.
CAF_TEST(applying a capture twice equals applying it once) {
  std::vector<secret_write> bases{row(0x11, 0, 50, 10), row(0x11, 15, 0, 10),
                                  row(0x11, 500, 40, 10)};
  std::vector<secret_write> captures{row(0x22, 0, 0, 20), row(0x22, 100, 70, 20),
                                     row(0x22, 18, 0, 20), row(0x22, 5, 0, 20)};
  for (const auto& capture : captures) {
    auto once = apply_capture(nullptr, capture);
    CAF_CHECK(same_row(apply_capture(&once, capture), once));
    for (const auto& base : bases) {
      auto once_on_base = apply_capture(&base, capture);
      CAF_CHECK(same_row(apply_capture(&once_on_base, capture), once_on_base));
    }
  }
}

/// The buffer coalesces captures before writing them: the coalesced capture
/// must merge onto any stored row as the captures one by one would.
CAF_TEST(a coalesced run of live captures merges like sequential writes) {
  std::vector<secret_write> bases{row(0x11, 0, 50, 1), row(0x11, 15, 30, 1),
                                  row(0x11, 500, 0, 1), row(0x11, 5, 9, 1)};
  auto first = row(0x22, 300, 60, 10);
  auto second = row(0x33, 200, 0, 20);
  auto coalesced = apply_capture(&first, second);
  for (const auto& base : bases) {
    auto one_by_one = apply_capture(&base, first);
    one_by_one = apply_capture(&one_by_one, second);
    auto at_once = apply_capture(&base, coalesced);
    CAF_CHECK(one_by_one.entry == at_once.entry);
  }
}

CAF_TEST(expiry is compared with the given time) {
  CAF_CHECK(!is_expired(row(0x11, 0, 0, 0), 1'000'000));
  CAF_CHECK(!is_expired(row(0x11, 100, 0, 0), 99));
  CAF_CHECK(is_expired(row(0x11, 100, 0, 0), 100));
}
