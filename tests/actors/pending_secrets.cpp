#define CAF_SUITE actors.pending_secrets
#include <caf/test/unit_test.hpp>

#include <coalesce/actors/pending_secrets.hpp>

#include <random>
#include <sstream>

#include <coalesce/storage/database.hpp>
#include <coalesce/storage/secret_merge.hpp>
#include <coalesce/storage/secret_store.hpp>

#include "secret_fixtures.hpp"
#include "temp_dir.hpp"

using namespace coalesce;
using namespace coalesce::test;

namespace {

std::vector<secret_write> captures(std::vector<secret_entry> entries,
                                   int64_t captured_at = 100) {
  std::vector<secret_write> result;
  for (auto& entry : entries)
    result.push_back(capture(std::move(entry), captured_at));
  return result;
}

std::vector<producer_ticket> tickets(const std::vector<producer_release>& xs) {
  std::vector<producer_ticket> result;
  for (const auto& x : xs)
    result.push_back(x.ticket);
  return result;
}

} // namespace

CAF_TEST(an empty queue is a no op) {
  pending_secrets pending{4};
  auto result = pending.queue(1, {});
  CAF_CHECK(result.answer_now);
  CAF_CHECK_EQUAL(pending.size(), 0u);
  CAF_CHECK(pending.start_batch().empty());
}

CAF_TEST(a batch carries every pending entry and leaves them pending) {
  pending_secrets pending{8};
  pending.queue(1, captures({make_entry("M1", 1), make_entry("M2", 2)}));
  auto batch = pending.start_batch();
  CAF_CHECK_EQUAL(batch.size(), 2u);
  CAF_CHECK(pending.writing());
  CAF_CHECK_EQUAL(pending.size(), 2u);
  CAF_CHECK(pending.start_batch().empty());
  pending.finish_batch();
  CAF_CHECK_EQUAL(pending.size(), 0u);
  CAF_CHECK(!pending.writing());
}

/// Removal after a write is decided by version, not by content: a recapture
/// during the write (new secret, new metadata, or byte-identical) has a new
/// version and survives the older batch's clean-up.
CAF_TEST(every recapture during a write survives that write) {
  auto new_metadata = make_entry("META", 0x11);
  new_metadata.expires_at = 999;
  std::vector<std::pair<secret_entry, secret_entry>> cases{
    {make_entry("NEW", 0x11), make_entry("NEW", 0x22)},
    {make_entry("META", 0x11), new_metadata},
    {make_entry("SAME", 0x33), make_entry("SAME", 0x33)}};
  for (auto& [first, second] : cases) {
    pending_secrets pending{8};
    pending.queue(1, captures({first}));
    auto written_version = pending.version_of(first.key());
    CAF_CHECK_EQUAL(pending.start_batch().size(), 1u);
    pending.queue(2, captures({second}));
    CAF_CHECK_NOT_EQUAL(pending.version_of(first.key()), written_version);
    pending.finish_batch();
    CAF_CHECK_EQUAL(pending.size(), 1u);
    auto found = pending.find(first.key());
    CAF_REQUIRE(found.has_value());
    CAF_CHECK(found->entry.secret == second.secret);
    auto next = pending.start_batch();
    CAF_REQUIRE_EQUAL(next.size(), 1u);
    CAF_CHECK(next.front().entry.secret == second.secret);
    pending.finish_batch();
    CAF_CHECK_EQUAL(pending.size(), 0u);
  }
}

CAF_TEST(coalesced duplicates merge retention metadata) {
  pending_secrets pending{8};
  auto first = make_entry("PARENT", 0x11);
  first.expires_at = 0;
  first.message_ts = 50;
  auto second = make_entry("PARENT", 0x11);
  second.expires_at = 100;
  second.message_ts = 0;
  pending.queue(1, captures({first}));
  pending.queue(2, captures({second}));
  auto found = pending.find(first.key());
  CAF_REQUIRE(found.has_value());
  CAF_CHECK_EQUAL(found->entry.expires_at, 0);
  CAF_CHECK_EQUAL(found->entry.message_ts, 50);
  CAF_CHECK_EQUAL(pending.size(), 1u);
}

/// The seed's high-water test as values: the map never exceeds the limit,
/// the producer filling the last slot waits with the ones that did not fit,
/// a refresh needs no capacity, and a finished batch admits the waiters in
/// arrival order.
CAF_TEST(the high water mark holds producers back in arrival order) {
  pending_secrets pending{2, 2};
  CAF_CHECK(pending.queue(1, captures({make_entry("M0", 0)})).answer_now);
  CAF_CHECK(!pending.queue(2, captures({make_entry("M1", 1)})).answer_now);
  CAF_CHECK(!pending.queue(3, captures({make_entry("M2", 2)})).answer_now);
  CAF_CHECK(!pending.queue(4, captures({make_entry("M3", 3)})).answer_now);
  CAF_CHECK_EQUAL(pending.size(), 2u);
  CAF_CHECK_EQUAL(pending.waiting_producers(), 3u);
  CAF_CHECK_EQUAL(pending.held_entries(), 2u);
  // Held entries are readable already.
  CAF_CHECK(pending.find(key_of("M3")).has_value());
  // A refresh of a pending key needs no capacity.
  CAF_CHECK(pending.queue(5, captures({make_entry("M0", 0xfe)})).answer_now);
  CAF_CHECK(pending.find(key_of("M0"))->entry.secret == secret_of(0xfe));
  CAF_CHECK_EQUAL(pending.size(), 2u);

  pending.start_batch();
  // The batch frees both slots. Producer 2 filled the last slot and is
  // released; producer 3's M2 fits; producer 4's M3 fills the last slot
  // again, so it waits for the next batch.
  CAF_CHECK_EQUAL(tickets(pending.finish_batch()),
                  (std::vector<producer_ticket>{2, 3}));
  CAF_CHECK_EQUAL(pending.size(), 2u);
  CAF_CHECK_EQUAL(pending.waiting_producers(), 1u);
  pending.start_batch();
  CAF_CHECK_EQUAL(tickets(pending.finish_batch()),
                  std::vector<producer_ticket>{4});
  CAF_CHECK_EQUAL(pending.size(), 0u);
  CAF_CHECK_EQUAL(pending.waiting_producers(), 0u);
}

/// A producer's entries are admitted in order up to the limit; the rest are
/// held, and it is answered only once all are in.
CAF_TEST(a producer with more entries than room is admitted in order) {
  pending_secrets pending{2, 2};
  auto result = pending.queue(
    1, captures({make_entry("A", 1), make_entry("B", 2), make_entry("C", 3),
                 make_entry("D", 4)}));
  CAF_CHECK(!result.answer_now);
  CAF_CHECK_EQUAL(pending.size(), 2u);
  CAF_CHECK_EQUAL(pending.held_entries(), 2u);
  CAF_CHECK(pending.version_of(key_of("A")) != 0);
  CAF_CHECK(pending.version_of(key_of("C")) == 0);
  pending.start_batch();
  CAF_CHECK(pending.finish_batch().empty());
  pending.start_batch();
  CAF_CHECK_EQUAL(tickets(pending.finish_batch()),
                  std::vector<producer_ticket>{1});
}

/// A later refresh of a key that an earlier producer still holds must not
/// overtake it, or the older capture would be applied last.
CAF_TEST(a refresh of a held key waits behind the producer holding it) {
  pending_secrets pending{1};
  pending.queue(1, captures({make_entry("A", 1)}));
  pending.queue(2, captures({make_entry("B", 2), make_entry("A", 0x21)}));
  CAF_CHECK(!pending.queue(3, captures({make_entry("A", 0x31)})).answer_now);
  CAF_CHECK(pending.find(key_of("A"))->entry.secret == secret_of(0x31));
  std::vector<uint8_t> written_a;
  for (int round = 0; round < 10 && pending.size() > 0; ++round) {
    for (const auto& write : pending.start_batch())
      if (write.entry.msg_id == "A")
        written_a.push_back(write.entry.secret.front());
    pending.finish_batch();
  }
  CAF_CHECK_EQUAL(written_a, (std::vector<uint8_t>{1, 0x21, 0x31}));
  CAF_CHECK_EQUAL(pending.waiting_producers(), 0u);
  CAF_CHECK_EQUAL(pending.size(), 0u);
}

CAF_TEST(a dead producers entries are admitted past the limit) {
  pending_secrets pending{1, 8};
  pending.queue(1, captures({make_entry("M1", 0x11)}));
  pending.queue(2, captures({make_entry("M2", 0x22), make_entry("M3", 0x33)}));
  CAF_CHECK_EQUAL(pending.force_admit(2), 2u);
  CAF_CHECK_EQUAL(pending.size(), 3u);
  CAF_CHECK_EQUAL(pending.held_entries(), 0u);
  CAF_CHECK_EQUAL(pending.waiting_producers(), 1u);
  CAF_CHECK_EQUAL(pending.start_batch().size(), 3u);
  CAF_CHECK_EQUAL(tickets(pending.finish_batch()),
                  std::vector<producer_ticket>{1});
  CAF_CHECK_EQUAL(pending.force_admit(1), 0u);
}

/// A flush waits for the captures that arrived before it, held ones
/// included, and for the newer value of a key recaptured during a write.
CAF_TEST(durability is tracked per capture) {
  pending_secrets pending{1};
  CAF_CHECK(pending.durable_through(pending.last_sequence()));
  pending.queue(1, captures({make_entry("A", 1)}));
  pending.queue(2, captures({make_entry("B", 2)}));
  auto through_b = pending.last_sequence();
  CAF_CHECK(!pending.durable_through(1));
  pending.start_batch();
  pending.queue(3, captures({make_entry("A", 3)}));
  auto through_a_again = pending.last_sequence();
  pending.finish_batch();
  // A's first capture is written; B is now pending; A's recapture is not.
  CAF_CHECK(pending.durable_through(1));
  CAF_CHECK(!pending.durable_through(through_b));
  pending.start_batch();
  pending.finish_batch();
  CAF_CHECK(!pending.durable_through(through_a_again));
  pending.start_batch();
  pending.finish_batch();
  CAF_CHECK(pending.durable_through(through_a_again));
}

/// Batches stay below the limit so the next one fills while one is being
/// written, and take the oldest entries first so none waits behind newer.
CAF_TEST(a batch takes at most half the limit by default) {
  pending_secrets pending{4};
  CAF_CHECK(pending.queue(1, captures({make_entry("X", 1), make_entry("Y", 2),
                                       make_entry("Z", 3)}))
              .answer_now);
  CAF_CHECK_EQUAL(pending.start_batch().size(), 2u);
  pending.finish_batch();
  CAF_CHECK_EQUAL(pending.start_batch().size(), 1u);
}

CAF_TEST(batches take the oldest entries first) {
  pending_secrets pending{6, 2};
  pending.queue(1, captures({make_entry("A", 1), make_entry("B", 2)}));
  pending.queue(2, captures({make_entry("C", 3)}));
  auto first = pending.start_batch();
  CAF_REQUIRE_EQUAL(first.size(), 2u);
  CAF_CHECK_EQUAL(first[0].entry.msg_id, "A");
  CAF_CHECK_EQUAL(first[1].entry.msg_id, "B");
  // Room for the next batch's entries while this one is written.
  CAF_CHECK(pending.queue(3, captures({make_entry("D", 4)})).answer_now);
  pending.queue(4, captures({make_entry("A", 5)}));
  pending.finish_batch();
  auto second = pending.start_batch();
  CAF_REQUIRE_EQUAL(second.size(), 2u);
  CAF_CHECK_EQUAL(second[0].entry.msg_id, "C");
  CAF_CHECK_EQUAL(second[1].entry.msg_id, "D");
  pending.finish_batch();
  auto third = pending.start_batch();
  CAF_REQUIRE_EQUAL(third.size(), 1u);
  CAF_CHECK(third[0].entry.secret == secret_of(5));
}

CAF_TEST(a failed batch keeps everything pending) {
  pending_secrets pending{4};
  pending.queue(1, captures({make_entry("A", 1)}));
  pending.queue(2, captures({make_entry("B", 2)}));
  CAF_CHECK_EQUAL(pending.start_batch().size(), 2u);
  pending.queue(3, captures({make_entry("C", 3)}));
  pending.abandon_batch();
  CAF_CHECK(!pending.writing());
  CAF_CHECK_EQUAL(pending.size(), 3u);
  // The failed entries are retried first, in their order.
  auto retry = pending.start_batch();
  CAF_REQUIRE_EQUAL(retry.size(), 2u);
  CAF_CHECK_EQUAL(retry[0].entry.msg_id, "A");
  CAF_CHECK_EQUAL(retry[1].entry.msg_id, "B");
}

/// Captures of one key land in their order even when the newer one's
/// producer dies first (the actor's version is in actors.secret_buffer).
/// Limit 1: P0 fills the slot, A holds K (older), B holds K (newer) and
/// dies. B's capture is newer, so it must be applied after A's whenever A
/// is admitted: the value last written for K is B's.
CAF_TEST(a dead producers capture of a key held earlier is applied after it) {
  pending_secrets pending{1};
  CAF_CHECK(!pending.queue(1, captures({make_entry("M0", 0)})).answer_now);
  CAF_CHECK(!pending.queue(2, captures({make_entry("K", 0xA1)})).answer_now);
  CAF_CHECK(!pending.queue(3, captures({make_entry("K", 0xB1),
                                        make_entry("FREE", 0xB2)}))
               .answer_now);
  CAF_CHECK_EQUAL(pending.force_admit(3), 2u);
  // FREE no earlier producer holds: admitted past the limit at once.
  CAF_CHECK(pending.version_of(key_of("FREE")) != 0);
  CAF_CHECK(pending.find(key_of("K"))->entry.secret == secret_of(0xB1));
  std::vector<uint8_t> written_k;
  std::vector<producer_ticket> released;
  for (int round = 0; round < 10 && pending.size() > 0; ++round) {
    for (const auto& write : pending.start_batch())
      if (write.entry.msg_id == "K")
        written_k.push_back(write.entry.secret.front());
    for (auto ticket : tickets(pending.finish_batch()))
      released.push_back(ticket);
  }
  CAF_REQUIRE(!written_k.empty());
  CAF_CHECK_EQUAL(written_k.back(), 0xB1);
  CAF_CHECK_EQUAL(released, (std::vector<producer_ticket>{1, 2}));
  CAF_CHECK_EQUAL(pending.size(), 0u);
  CAF_CHECK_EQUAL(pending.held_entries(), 0u);
}

/// The same with the dead producer holding the key twice, and with the
/// older producer dying after it or staying alive: B's second capture is the
/// newest, so it is the value that lands either way.
CAF_TEST(captures of one key keep arrival order whoever dies) {
  for (bool older_dies_too : {false, true}) {
    pending_secrets pending{1};
    pending.queue(1, captures({make_entry("M0", 0)}));
    pending.queue(2, captures({make_entry("K", 0xA1)}));
    pending.queue(3, captures({make_entry("K", 0xB1), make_entry("K", 0xB2)}));
    CAF_CHECK_EQUAL(pending.force_admit(3), 2u);
    CAF_CHECK(pending.find(key_of("K"))->entry.secret == secret_of(0xB2));
    if (older_dies_too) {
      CAF_CHECK_EQUAL(pending.force_admit(2), 1u);
      CAF_CHECK(pending.find(key_of("K"))->entry.secret == secret_of(0xB2));
    }
    std::vector<uint8_t> written_k;
    for (int round = 0; round < 10 && pending.size() > 0; ++round) {
      for (const auto& write : pending.start_batch())
        if (write.entry.msg_id == "K")
          written_k.push_back(write.entry.secret.front());
      pending.finish_batch();
    }
    CAF_REQUIRE(!written_k.empty());
    CAF_CHECK_EQUAL(written_k.back(), 0xB2);
    CAF_CHECK_EQUAL(pending.waiting_producers(), 0u);
    CAF_CHECK_EQUAL(pending.held_entries(), 0u);
  }
}

// -- coalescing against sequential writes, through RocksDB ---------------------

namespace {

std::string describe(const secret_write& w) {
  std::ostringstream out;
  out << "{secret " << int{w.entry.secret.front()} << ", expires "
      << w.entry.expires_at << ", ts " << w.entry.message_ts << ", captured "
      << w.captured_at << "}";
  return out.str();
}

std::string describe(const stored_secret& row) {
  return row.found ? describe(row.row) : std::string{"absent"};
}

/// Secret, expiry and message time: what a row holds for its key.
bool same_content(const secret_entry& x, const secret_entry& y) {
  return x.secret == y.secret && x.expires_at == y.expires_at
         && x.message_ts == y.message_ts;
}

/// The one case coalescing does not reproduce (README, "Retention metadata"):
/// a capture whose expiry had passed when a later one was made, the later
/// ones leaving the message time unknown; the sequential row then forgot the
/// earlier known message time, the coalesced one keeps the latest known.
bool documented_difference(const std::vector<secret_write>& run,
                           const stored_secret& sequential,
                           const stored_secret& coalesced) {
  bool earlier_expired = false;
  int64_t latest_known_ts = 0;
  for (std::size_t i = 0; i < run.size(); ++i) {
    if (run[i].entry.message_ts != 0)
      latest_known_ts = run[i].entry.message_ts;
    for (std::size_t j = i + 1; j < run.size(); ++j)
      earlier_expired |= storage::is_expired(run[i], run[j].captured_at);
  }
  auto expected = sequential.row.entry;
  expected.message_ts = latest_known_ts;
  return earlier_expired && sequential.found && coalesced.found
         && sequential.row.entry.message_ts == 0 && latest_known_ts != 0
         && same_content(coalesced.row.entry, expected);
}

} // namespace

/// Coalescing leaves the stored row sequential writes would leave: the
/// buffer writes one coalesced capture per key where sequential writes would
/// have written each capture in turn. Over random runs of captures (times
/// out of order included) on random stored rows, the row RocksDB ends with
/// must be the same both ways, but for the one documented difference.
CAF_TEST(coalescing then writing equals writing each capture in turn) {
  temp_dir dir;
  auto opened = storage::database::open({dir.sub("db"),
                                         storage::durability::buffered});
  CAF_REQUIRE(opened.engaged());
  auto db = std::move(*opened);
  constexpr uint32_t seed = 0x9c0a1e5;
  constexpr int cases = 3000;
  std::mt19937 rng{seed};
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>{lo, hi}(rng);
  };
  auto random_capture = [&](const std::string& msg_id, uint8_t fill) {
    auto entry = make_entry(msg_id, fill);
    entry.expires_at = pick(0, 2) == 0 ? 0 : pick(1, 120);
    entry.message_ts = pick(0, 1) == 0 ? 0 : pick(1, 100);
    return capture(std::move(entry), pick(1, 100));
  };
  int mismatches = 0;
  for (int n = 0; n < cases && mismatches < 5; ++n) {
    auto sequential_id = "S" + std::to_string(n);
    auto coalesced_id = "C" + std::to_string(n);
    std::vector<secret_write> run;
    auto length = pick(1, 5);
    for (int i = 0; i < length; ++i)
      run.push_back(random_capture(coalesced_id, static_cast<uint8_t>(0x10 + i)));
    std::optional<secret_write> base;
    if (pick(0, 3) != 0)
      base = random_capture(coalesced_id, 0x01);
    auto for_key = [](secret_write w, const std::string& msg_id) {
      w.entry.msg_id = msg_id;
      return w;
    };
    // Sequential: every capture is its own write, merged in turn.
    if (base)
      CAF_REQUIRE(!storage::write_secrets(*db, {for_key(*base, sequential_id)}));
    for (const auto& c : run)
      CAF_REQUIRE(!storage::write_secrets(*db, {for_key(c, sequential_id)}));
    // Coalesced: the buffer's decision core merges the run into one entry.
    if (base)
      CAF_REQUIRE(!storage::write_secrets(*db, {*base}));
    pending_secrets pending{8};
    for (const auto& c : run)
      pending.queue(1, {c});
    auto batch = pending.start_batch();
    CAF_REQUIRE_EQUAL(batch.size(), 1u);
    CAF_REQUIRE(!storage::write_secrets(*db, batch));
    auto rows = storage::read_secrets(*db, {key_of(sequential_id),
                                            key_of(coalesced_id)});
    CAF_REQUIRE(rows.engaged());
    const auto& sequential = (*rows)[0];
    const auto& coalesced = (*rows)[1];
    // The entries (secret, expiry, message time) are what a row holds; the
    // captured_at of a stored row is never read.
    bool same = sequential.found == coalesced.found
                && (!sequential.found
                    || same_content(sequential.row.entry, coalesced.row.entry));
    if (same || documented_difference(run, sequential, coalesced))
      continue;
    ++mismatches;
    std::ostringstream out;
    out << "seed " << seed << ", case " << n << ": base "
        << (base ? describe(*base) : std::string{"absent"}) << ", captures";
    for (const auto& c : run)
      out << " " << describe(c);
    out << "; sequential " << describe(sequential) << ", coalesced "
        << describe(coalesced);
    CAF_ERROR(out.str());
  }
  CAF_CHECK_EQUAL(mismatches, 0);
}

/// A watch carries the buffer's value at its start and every capture of the
/// key since, in arrival order, whether admitted, held, or written and
/// released meanwhile; other keys do not touch it.
CAF_TEST(a watch follows every capture of its key until it ends) {
  pending_secrets pending{1};
  pending.queue(1, captures({make_entry("A", 0x11)}));
  auto first = pending.watch(key_of("A"));
  auto unseen = pending.watch(key_of("NONE"));
  pending.start_batch();
  pending.queue(2, captures({make_entry("A", 0x22)}));
  pending.finish_batch();
  pending.start_batch();
  pending.finish_batch();
  CAF_CHECK_EQUAL(pending.size(), 0u);
  auto second = pending.watch(key_of("A"));
  pending.queue(3, captures({make_entry("B", 0x44)}));
  pending.queue(4, captures({make_entry("A", 0x33)})); // Held: B is pending.
  CAF_CHECK_EQUAL(pending.held_entries(), 1u);
  CAF_CHECK(!pending.end_watch(key_of("NONE"), unseen).has_value());
  auto seen_by_first = pending.end_watch(key_of("A"), first);
  CAF_REQUIRE(seen_by_first.has_value());
  CAF_CHECK(seen_by_first->entry.secret == secret_of(0x33));
  auto seen_by_second = pending.end_watch(key_of("A"), second);
  CAF_REQUIRE(seen_by_second.has_value());
  CAF_CHECK(seen_by_second->entry.secret == secret_of(0x33));
  // Ended: a later capture is no longer recorded, and ending again is a no-op.
  pending.queue(5, captures({make_entry("A", 0x55)}));
  CAF_CHECK(!pending.end_watch(key_of("A"), first).has_value());
}
