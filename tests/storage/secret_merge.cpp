#define CAF_SUITE storage.secret_merge
#include <caf/test/unit_test.hpp>

#include <coalesce/storage/secret_merge.hpp>

#include <algorithm>
#include <optional>
#include <random>
#include <sstream>

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
  auto coalesced = coalesce_captures(first, second);
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

namespace {

std::string describe(const std::optional<secret_write>& w) {
  if (!w)
    return "absent";
  std::ostringstream out;
  out << "{secret " << int{w->entry.secret.front()} << ", expires "
      << w->entry.expires_at << ", ts " << w->entry.message_ts
      << ", captured " << w->captured_at << "}";
  return out.str();
}

std::optional<secret_write> apply_on(const std::optional<secret_write>& row,
                                     const secret_write& capture) {
  return apply_capture(row ? &*row : nullptr, capture);
}

} // namespace

/// Coalescing leaves the row sequential writes would leave, on the functions
/// alone (the RocksDB version is in actors.pending_secrets): over random
/// runs of captures and random rows, a coalesced run applied once leaves the
/// row the run applied in turn leaves, but for the documented case; and
/// applying it twice equals once.
CAF_TEST(a coalesced run merges like sequential writes on any row) {
  constexpr uint32_t seed = 0x5eed0007;
  constexpr int cases = 200000;
  std::mt19937 rng{seed};
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>{lo, hi}(rng);
  };
  auto random_capture = [&](uint8_t fill) {
    return row(fill, pick(0, 2) == 0 ? 0 : pick(1, 120),
               pick(0, 1) == 0 ? 0 : pick(1, 100), pick(1, 100));
  };
  int failures = 0;
  for (int n = 0; n < cases && failures < 5; ++n) {
    std::optional<secret_write> base;
    if (pick(0, 3) != 0)
      base = random_capture(0x01);
    std::vector<secret_write> run;
    auto length = pick(1, 6);
    for (int i = 0; i < length; ++i)
      run.push_back(random_capture(static_cast<uint8_t>(0x10 + i)));
    auto sequential = base;
    auto coalesced = run.front();
    bool earlier_expired = false;
    int64_t latest_known_ts = 0;
    for (std::size_t i = 0; i < run.size(); ++i) {
      sequential = apply_on(sequential, run[i]);
      if (i > 0)
        coalesced = coalesce_captures(coalesced, run[i]);
      if (run[i].entry.message_ts != 0)
        latest_known_ts = run[i].entry.message_ts;
      for (std::size_t j = i + 1; j < run.size(); ++j)
        earlier_expired |= is_expired(run[i], run[j].captured_at);
    }
    auto once = apply_on(base, coalesced);
    auto twice = apply_on(once, coalesced);
    auto expected = sequential->entry;
    if (earlier_expired && expected.message_ts == 0
        && once->entry.message_ts == latest_known_ts)
      expected.message_ts = latest_known_ts; // The documented difference.
    if (once->entry == expected && twice->entry == once->entry)
      continue;
    ++failures;
    std::ostringstream out;
    out << "seed " << seed << ", case " << n << ": base " << describe(base)
        << ", captures";
    for (const auto& c : run)
      out << " " << describe(c);
    out << "; sequential " << describe(sequential) << ", coalesced once "
        << describe(once) << ", twice " << describe(twice);
    CAF_ERROR(out.str());
  }
  CAF_CHECK_EQUAL(failures, 0);
}

/// Stamped captures (a cluster's) form a join: over random sets of live
/// captures, some under equal stamps (two clients' clocks), every order of
/// applying them leaves one row, whose secret is the greatest stamp's (of
/// equal stamps, the greater secret) and whose message time is the known
/// one of the greatest ts_stamp (of equal ones, the greater time); applying
/// one again changes nothing.
CAF_TEST(stamped captures leave the same row in any order) {
  constexpr uint32_t seed = 0x5eed0022;
  std::mt19937 rng{seed};
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>{lo, hi}(rng);
  };
  int failures = 0;
  for (int n = 0; n < 20000 && failures < 5; ++n) {
    std::vector<secret_write> captures;
    auto count = pick(2, 6);
    for (int i = 0; i < count; ++i) {
      // Nothing expires before the captures are made: expiry would make an
      // earlier row absent, which the order decides.
      auto w = row(static_cast<uint8_t>(0x10 + i),
                   pick(0, 2) == 0 ? 0 : pick(1000, 2000),
                   pick(0, 1) == 0 ? 0 : pick(1, 100), pick(1, 100));
      w.entry.stamp = static_cast<uint64_t>(pick(1, 4)) << 10;
      w.entry.ts_stamp = w.entry.message_ts != 0 ? w.entry.stamp : 0;
      captures.push_back(w);
    }
    std::shuffle(captures.begin(), captures.end(), rng);
    std::optional<secret_write> first;
    for (const auto& c : captures)
      first = apply_on(first, c);
    std::shuffle(captures.begin(), captures.end(), rng);
    std::optional<secret_write> second;
    for (const auto& c : captures)
      second = apply_on(second, c);
    second = apply_on(second, captures.front());
    const secret_write* newest = &captures.front();
    const secret_write* newest_known = nullptr;
    for (const auto& c : captures) {
      if (c.entry.stamp > newest->entry.stamp
          || (c.entry.stamp == newest->entry.stamp
              && c.entry.secret > newest->entry.secret))
        newest = &c;
      if (c.entry.message_ts != 0
          && (!newest_known || c.entry.ts_stamp > newest_known->entry.ts_stamp
              || (c.entry.ts_stamp == newest_known->entry.ts_stamp
                  && c.entry.message_ts > newest_known->entry.message_ts)))
        newest_known = &c;
    }
    auto agree = first->entry == second->entry
                 && first->entry.secret == newest->entry.secret
                 && first->entry.stamp == newest->entry.stamp
                 && first->entry.message_ts
                      == (newest_known ? newest_known->entry.message_ts : 0);
    if (agree)
      continue;
    ++failures;
    CAF_ERROR("seed " << seed << ", case " << n << ": " << describe(first)
                      << " vs " << describe(second));
  }
  CAF_CHECK_EQUAL(failures, 0);
}

CAF_TEST(of two captures the greater stamp wins in either order) {
  auto older = row(0x11, 0, 40, 1);
  older.entry.stamp = older.entry.ts_stamp = 5 << 10;
  auto newer = row(0x22, 0, 0, 1);
  newer.entry.stamp = 9 << 10;
  auto one_way = apply_capture(&older, newer);
  auto other_way = apply_capture(&newer, older);
  CAF_CHECK(one_way.entry.secret == newer.entry.secret);
  CAF_CHECK(other_way.entry.secret == newer.entry.secret);
  CAF_CHECK_EQUAL(one_way.entry.message_ts, 40);
  CAF_CHECK_EQUAL(other_way.entry.message_ts, 40);
  CAF_CHECK(one_way.entry == other_way.entry);
}
