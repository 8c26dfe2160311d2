#define CAF_SUITE actors.secret_buffer
#include <caf/test/dsl.hpp>

#include <coalesce/actors/secret_buffer.hpp>

#include <chrono>
#include <memory>

#include <coalesce/actors/secret_store_actors.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database.hpp>
#include <coalesce/storage/fault_injection.hpp>
#include <coalesce/storage/secret_merge.hpp>
#include <coalesce/storage/secret_store.hpp>

#include "mailbox.hpp"
#include "secret_fixtures.hpp"
#include "temp_dir.hpp"
#include "test_config.hpp"

using namespace caf;
using namespace coalesce;
using namespace coalesce::test;
using namespace std::chrono_literals;

namespace {

using entries = std::vector<secret_entry>;

/// Test seam for a failing disk, which cannot be provoked for real here: it
/// answers the first `failures` writes with the error a refused RocksDB
/// write produces, and passes every other request to the real drain worker.
struct failing_disk_state {
  int failures = 0;
};

secret_drain_actor::behavior_type
failing_disk_drain(secret_drain_actor::stateful_pointer<failing_disk_state> self,
                   int failures, secret_drain_actor real) {
  self->state.failures = failures;
  return {
    [self, real](write_atom, secret_batch& batch)
      -> result<ok_atom> {
      if (self->state.failures > 0) {
        --self->state.failures;
        return make_error(errc::storage_failed,
                          "injected by the failing-disk seam");
      }
      return self->delegate(real, write_atom::value, std::move(batch));
    },
    [real, self](drop_atom, std::vector<secret_write>& rows) {
      return self->delegate(real, drop_atom::value, std::move(rows));
    },
    [real, self](sync_atom) -> result<ok_atom> {
      return self->delegate(real, sync_atom::value);
    },
  };
}

/// A buffer over a real RocksDB in a fresh directory. The drain worker and
/// reader are scheduled actors here (production detaches them), so the test
/// coordinator decides when a batch reaches the disk.
///
/// RocksDB writes through the fault seam with every switch off, so a test can
/// count WAL syncs or fail one.
struct buffer_fixture : test_coordinator_fixture<test_config> {
  temp_dir dir;
  std::shared_ptr<storage::fault_switches> faults
    = std::make_shared<storage::fault_switches>();
  std::shared_ptr<storage::database> db;
  secret_drain_actor real_drain;
  secret_drain_actor drain;
  secret_reader_actor reader;
  secret_buffer_actor buf;

  buffer_fixture() {
    open(storage::durability::synced);
  }

  /// (Re)opens the database with `mode` and spawns fresh workers over it;
  /// before `start`.
  void open(storage::durability mode) {
    if (db) {
      anon_send_exit(real_drain, exit_reason::kill);
      anon_send_exit(reader, exit_reason::kill);
      sched.run();
      CAF_REQUIRE(!db->close());
    }
    auto opened = storage::database::open(
      {dir.sub("db"), mode, storage::make_fault_injecting_file_system(faults)});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
    real_drain = sys.spawn(secret_drain_worker, db);
    drain = real_drain;
    reader = sys.spawn(secret_reader, db);
    sched.run();
  }

  ~buffer_fixture() override {
    anon_send_exit(buf, exit_reason::kill);
    anon_send_exit(drain, exit_reason::kill);
    anon_send_exit(real_drain, exit_reason::kill);
    anon_send_exit(reader, exit_reason::kill);
    sched.run();
  }

  void start(std::size_t pending_limit = 4096) {
    secret_buffer_options options;
    options.pending_limit = pending_limit;
    start(options);
  }

  void start(const secret_buffer_options& options) {
    buf = spawn_secret_buffer(sys, drain, reader, options);
    sched.run();
  }

  /// With the production policy for dead workers: a replacement, here a
  /// scheduled one over the same database.
  void start_with_replacements() {
    secret_worker_factory workers{
      [db = db](actor_system& sys) { return sys.spawn(secret_drain_worker, db); },
      [db = db](actor_system& sys) { return sys.spawn(secret_reader, db); }};
    buf = spawn_secret_buffer(sys, drain, reader, secret_buffer_options{},
                              workers);
    sched.run();
  }

  void start_on_failing_disk(int failures, std::size_t pending_limit = 4096) {
    drain = sys.spawn(failing_disk_drain, failures, real_drain);
    start(pending_limit);
  }

  /// Runs every actor but the drain worker and the reader, which stall as
  /// behind a slow disk: the buffer and the relay of its drain wake-ups.
  void run_buffer() {
    auto* a = job_of(drain);
    auto* b = job_of(real_drain);
    auto* c = job_of(reader);
    sched.run_jobs_filtered(
      [=](resumable* x) { return x != a && x != b && x != c; });
  }

  template <class Handle>
  static resumable* job_of(const Handle& who) {
    return dynamic_cast<resumable*>(actor_cast<abstract_actor*>(who));
  }

  /// Runs only `who`'s messages.
  template <class Handle>
  void run_only(const Handle& who) {
    auto* job = dynamic_cast<resumable*>(actor_cast<abstract_actor*>(who));
    sched.run_jobs_filtered([=](resumable* x) { return x == job; });
  }

  /// Runs every actor but `stalled`, as behind a slow read.
  template <class Handle>
  void run_all_but(const Handle& stalled) {
    auto* stalled_job = dynamic_cast<resumable*>(
      actor_cast<abstract_actor*>(stalled));
    sched.run_jobs_filtered(
      [=](resumable* job) { return job != stalled_job; });
  }

  /// Sends a request from `self`, runs every actor, returns the reply.
  template <class T, class... Ts>
  T ask(Ts... xs) {
    self->request(buf, infinite, std::move(xs)...);
    sched.run();
    return next_reply<T>(sys, self);
  }

  void queue(entries xs) {
    CAF_CHECK(ask<ok_atom>(queue_atom::value, std::move(xs)) == ok_atom::value);
  }

  secret_lookup lookup(const std::string& msg_id,
                       const std::string& sender = "a@s.whatsapp.net") {
    return ask<secret_lookup>(lookup_atom::value, key_of(msg_id, sender));
  }

  secret_buffer_stats stats() {
    return ask<secret_buffer_stats>(stats_atom::value);
  }

  /// Stats with only the buffer running, so nothing in flight completes.
  secret_buffer_stats peek_stats() {
    self->request(buf, infinite, stats_atom::value);
    run_buffer();
    return next_reply<secret_buffer_stats>(sys, self);
  }

  stored_secret stored(const std::string& msg_id,
                       const std::string& sender = "a@s.whatsapp.net") {
    auto rows = storage::read_secrets(*db, {key_of(msg_id, sender)});
    CAF_REQUIRE(rows.engaged());
    return rows->front();
  }

  bool stored_as(const std::string& msg_id, uint8_t fill,
                 const std::string& sender = "a@s.whatsapp.net") {
    auto row = stored(msg_id, sender);
    return row.found && row.row.entry.secret == secret_of(fill);
  }

  static secret_lookup found(uint8_t fill, int64_t message_ts = 7) {
    return secret_lookup{true, secret_of(fill), message_ts};
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(secret_buffer_tests, buffer_fixture)

// -- visibility ---------------------------------------------------------------

/// The point of the buffer: a queued secret is readable before any write
/// ran, and after the write it lives in RocksDB and leaves the buffer.
CAF_TEST(a queued secret is readable before it is written) {
  start();
  self->request(buf, infinite, queue_atom::value, make_entry("M1", 0x11));
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  self->request(buf, infinite, lookup_atom::value, key_of("M1"));
  run_buffer();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(0x11));
  CAF_CHECK(!stored("M1").found);
  sched.run();
  CAF_CHECK(stored_as("M1", 0x11));
  CAF_CHECK_EQUAL(stats().pending, 0u);
  CAF_CHECK_EQUAL(lookup("M1"), found(0x11));
}

CAF_TEST(an empty queue is a no op) {
  start();
  queue({});
  auto st = stats();
  CAF_CHECK_EQUAL(st.pending, 0u);
  CAF_CHECK_EQUAL(st.batches_written, 0u);
}

CAF_TEST(lookup many answers pending stored and missing keys in order) {
  start();
  queue({make_entry("STORED", 0x01)});
  self->request(buf, infinite, queue_atom::value,
                entries{make_entry("PENDING", 0x02)});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  self->request(buf, infinite, lookup_atom::value,
                std::vector<secret_key>{key_of("MISSING"), key_of("PENDING"),
                                        key_of("STORED")});
  sched.run();
  auto answers = next_reply<std::vector<secret_lookup>>(sys, self);
  CAF_REQUIRE_EQUAL(answers.size(), 3u);
  CAF_CHECK(!answers[0].found);
  CAF_CHECK_EQUAL(answers[1], found(0x02));
  CAF_CHECK_EQUAL(answers[2], found(0x01));
}

/// A read after the next flush would merge the pending capture onto the
/// stored row, so a pending capture with an unknown message time answers
/// the stored one.
CAF_TEST(a pending capture with an unknown message time answers the stored one) {
  start();
  auto known = make_entry("P", 0x11);
  known.message_ts = 50;
  queue({known});
  auto unknown = make_entry("P", 0x22);
  unknown.message_ts = 0;
  self->request(buf, infinite, queue_atom::value, entries{unknown});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  self->request(buf, infinite, lookup_atom::value, key_of("P"));
  sched.run();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(0x22, 50));
  CAF_CHECK_EQUAL(stored("P").row.entry.message_ts, 50);
}

/// Of a cluster's stamped captures the greater stamp wins, so a pending
/// capture does not answer alone: a stored row of a greater stamp (a newer
/// capture this replica wrote before it restarted) wins over it.
CAF_TEST(a pending capture of a smaller stamp answers the stored newer one) {
  auto newer = make_entry("P", 0x11);
  newer.message_ts = 60;
  newer.stamp = newer.ts_stamp = 200 << 10;
  CAF_REQUIRE(!storage::write_secrets(
    *db, std::vector<secret_write>{capture(newer, storage::unix_now())}));
  start();
  auto older = make_entry("P", 0x22);
  older.message_ts = 50;
  older.stamp = older.ts_stamp = 100 << 10;
  self->request(buf, infinite, queue_atom::value, entries{older});
  run_buffer(); // Its batch waits at the drain worker.
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  self->request(buf, infinite, lookup_atom::value, key_of("P"));
  // The buffer and the reader run, the drain worker not: the capture is
  // still pending when the lookup is answered.
  auto* d = job_of(drain);
  auto* rd = job_of(real_drain);
  sched.run_jobs_filtered([=](resumable* x) { return x != d && x != rd; });
  auto answer = next_reply<secret_lookup>(sys, self);
  CAF_CHECK(answer.secret == secret_of(0x11));
  CAF_CHECK_EQUAL(answer.message_ts, 60);
  CAF_CHECK_EQUAL(answer.stamp, newer.stamp);
}

/// A pending capture whose own expiry passed still counts when the stored
/// row never expires: the merged row never expires either.
CAF_TEST(a pending capture past its expiry answers through the stored row) {
  start();
  queue({make_entry("P", 0x11)});
  auto expired = make_entry("P", 0x22);
  expired.expires_at = storage::unix_now() - 60;
  self->request(buf, infinite, queue_atom::value, entries{expired});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  self->request(buf, infinite, lookup_atom::value, key_of("P"));
  sched.run();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(0x22));
}

/// A lookup answers a state the key had. It arrives while a capture with an
/// unknown message time is pending, so it reads RocksDB; before the reader
/// answers, a newer capture of the key is queued and written. The answer
/// must be a state the key had (here the newest), never the older pending
/// secret combined with the newer row's message time.
CAF_TEST(a lookup never mixes its arrival state with a newer stored row) {
  start();
  auto base = make_entry("P", 0x11);
  base.message_ts = 50;
  queue({base});
  auto unknown_ts = make_entry("P", 0x22);
  unknown_ts.message_ts = 0;
  self->request(buf, infinite, queue_atom::value, entries{unknown_ts});
  run_buffer(); // Its batch waits at the drain worker.
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  scoped_actor client{sys};
  client->request(buf, infinite, lookup_atom::value, key_of("P"));
  run_buffer(); // The read waits at the reader.
  auto newer = make_entry("P", 0x33);
  newer.message_ts = 99;
  self->request(buf, infinite, queue_atom::value, entries{newer});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  run_all_but(reader); // Both captures are written while the read waits.
  CAF_CHECK(stored_as("P", 0x33));
  CAF_CHECK(client->mailbox().empty());
  sched.run();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, client), found(0x33, 99));
}

/// The same with the read done before the writes land (its answer handled
/// after them): the state at arrival or the newest, nothing else.
CAF_TEST(a lookup read before newer writes answers a state the key had) {
  start();
  auto base = make_entry("P", 0x11);
  base.message_ts = 50;
  queue({base});
  auto unknown_ts = make_entry("P", 0x22);
  unknown_ts.message_ts = 0;
  self->request(buf, infinite, queue_atom::value, entries{unknown_ts});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  scoped_actor client{sys};
  client->request(buf, infinite, lookup_atom::value, key_of("P"));
  run_buffer();
  auto newer = make_entry("P", 0x33);
  newer.message_ts = 99;
  self->request(buf, infinite, queue_atom::value, entries{newer});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  sched.run_jobs_filtered([&](resumable* job) {
    return job == dynamic_cast<resumable*>(actor_cast<abstract_actor*>(reader));
  });
  sched.run();
  auto answer = next_reply<secret_lookup>(sys, client);
  CAF_CHECK(answer == found(0x22, 50) || answer == found(0x33, 99));
  CAF_MESSAGE("answered " << to_string(answer));
}

/// A lookup of many keys takes the same care for each key it reads.
CAF_TEST(a lookup of many keys never mixes states either) {
  start();
  auto base = make_entry("P", 0x11);
  base.message_ts = 50;
  queue({base, make_entry("Q", 0x44)});
  auto unknown_ts = make_entry("P", 0x22);
  unknown_ts.message_ts = 0;
  self->request(buf, infinite, queue_atom::value, entries{unknown_ts});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  scoped_actor client{sys};
  client->request(buf, infinite, lookup_atom::value,
                  std::vector<secret_key>{key_of("Q"), key_of("P")});
  run_buffer();
  auto newer = make_entry("P", 0x33);
  newer.message_ts = 99;
  self->request(buf, infinite, queue_atom::value, entries{newer});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  run_all_but(reader);
  CAF_CHECK(stored_as("P", 0x33));
  sched.run();
  auto answers = next_reply<std::vector<secret_lookup>>(sys, client);
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK_EQUAL(answers[0], found(0x44));
  CAF_CHECK_EQUAL(answers[1], found(0x33, 99));
}

CAF_TEST(expired secrets are invisible to lookups) {
  start();
  auto expired = make_entry("OLD", 0x11);
  expired.expires_at = storage::unix_now() - 60;
  self->request(buf, infinite, queue_atom::value, entries{expired});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  self->request(buf, infinite, lookup_atom::value, key_of("OLD"));
  sched.run();
  CAF_CHECK(!next_reply<secret_lookup>(sys, self).found);
  CAF_CHECK(stored("OLD").found);
  CAF_CHECK(!lookup("OLD").found);
}

// -- batching -----------------------------------------------------------------

/// A burst queued before the drain runs must land in one batch.
CAF_TEST(a burst coalesces into one batch) {
  start();
  for (uint8_t i = 0; i < 20; ++i)
    self->request(buf, infinite, queue_atom::value,
                  entries{make_entry("M" + std::to_string(i), i)});
  sched.run();
  for (int i = 0; i < 20; ++i)
    CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  auto st = stats();
  CAF_CHECK_EQUAL(st.batches_written, 1u);
  CAF_CHECK_EQUAL(st.last_batch_entries, 20u);
  for (uint8_t i = 0; i < 20; ++i)
    CAF_CHECK(stored_as("M" + std::to_string(i), i));
}

/// The drain must serve every later capture, not only the first burst.
CAF_TEST(captures across turns all reach rocksdb) {
  start();
  for (uint8_t i = 0; i < 8; ++i) {
    queue({make_entry("T" + std::to_string(i), i)});
    CAF_CHECK_EQUAL(stats().pending, 0u);
  }
  CAF_CHECK_EQUAL(stats().batches_written, 8u);
  for (uint8_t i = 0; i < 8; ++i)
    CAF_CHECK(stored_as("T" + std::to_string(i), i));
}

/// At most one batch is at the drain worker; what arrives meanwhile waits
/// for the next batch.
CAF_TEST(one batch is in flight and later entries go into the next) {
  start();
  self->request(buf, infinite, queue_atom::value,
                entries{make_entry("FIRST", 1)});
  run_buffer(); // The batch carrying FIRST is at the drain worker, unwritten.
  self->request(buf, infinite, queue_atom::value,
                entries{make_entry("SECOND", 2)});
  run_buffer(); // SECOND arrives while that batch is in flight.
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  expect((write_atom, secret_batch), from(buf).to(drain));
  // No second batch reached the drain worker while the first was in flight.
  CAF_CHECK(!sched.prioritize(drain));
  CAF_CHECK(stored_as("FIRST", 1));
  CAF_CHECK(!stored("SECOND").found);
  sched.run();
  CAF_CHECK(stored_as("SECOND", 2));
  auto st = stats();
  CAF_CHECK_EQUAL(st.batches_written, 2u);
  CAF_CHECK_EQUAL(st.last_batch_entries, 1u);
  CAF_CHECK_EQUAL(st.pending, 0u);
}

/// A recapture while the older value is being written (a new secret, the
/// same secret with new metadata, or byte-identical content) must survive
/// that batch's clean-up and reach RocksDB next.
CAF_TEST(a recapture during a write survives the write and is written next) {
  start();
  auto new_metadata = make_entry("META", 0x11);
  new_metadata.message_ts = 99;
  std::vector<std::pair<secret_entry, secret_entry>> cases{
    {make_entry("NEW", 0x11), make_entry("NEW", 0x22)},
    {make_entry("META", 0x11), new_metadata},
    {make_entry("SAME", 0x33), make_entry("SAME", 0x33)}};
  for (auto& [first, second] : cases) {
    auto batches_before = stats().batches_written;
    self->request(buf, infinite, queue_atom::value, entries{first});
    run_buffer();
    // The batch carrying `first` is at the drain worker, not yet written.
    self->request(buf, infinite, queue_atom::value, entries{second});
    run_buffer();
    CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
    CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
    expect((write_atom, secret_batch), from(buf).to(drain));
    expect((ok_atom), from(drain).to(buf));
    CAF_CHECK_EQUAL(peek_stats().pending, 1u);
    self->request(buf, infinite, lookup_atom::value, first.key());
    run_buffer();
    CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self).secret, second.secret);
    sched.run();
    CAF_CHECK_EQUAL(stats().batches_written, batches_before + 2);
    auto row = stored(first.msg_id);
    CAF_CHECK(row.row.entry.secret == second.secret);
    CAF_CHECK_EQUAL(row.row.entry.message_ts, second.message_ts);
    CAF_CHECK_EQUAL(stats().pending, 0u);
  }
}

CAF_TEST(coalesced duplicates merge retention metadata) {
  start();
  auto first = make_entry("PARENT", 0x11);
  first.expires_at = 0;
  first.message_ts = 50;
  auto second = make_entry("PARENT", 0x11);
  second.expires_at = storage::unix_now() + 100;
  second.message_ts = 0;
  self->request(buf, infinite, queue_atom::value, entries{first});
  self->request(buf, infinite, queue_atom::value, entries{second});
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(lookup("PARENT"), found(0x11, 50));
  sched.run();
  auto row = stored("PARENT");
  CAF_CHECK_EQUAL(row.row.entry.expires_at, 0);
  CAF_CHECK_EQUAL(row.row.entry.message_ts, 50);
  CAF_CHECK_EQUAL(stats().batches_written, 1u);
}

// -- back-pressure --------------------------------------------------------------

/// The seed's high-water test: with the disk stalled, the pending map stops
/// at the limit; the producer filling the last slot waits with everyone who
/// did not fit; a refresh needs no capacity; then every producer is answered
/// and every entry written.
CAF_TEST(the high water mark back pressures concurrent producers) {
  start(2);
  self->request(buf, infinite, queue_atom::value, make_entry("M0", 0));
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  std::vector<std::unique_ptr<scoped_actor>> producers;
  for (uint8_t i = 1; i <= 8; ++i) {
    producers.push_back(std::make_unique<scoped_actor>(sys));
    (*producers.back())
      ->request(buf, infinite, queue_atom::value,
                make_entry("M" + std::to_string(i), i));
    run_buffer();
  }
  auto st = peek_stats();
  CAF_CHECK_EQUAL(st.pending, 2u);
  CAF_CHECK_EQUAL(st.waiting_producers, 8u);
  CAF_CHECK_EQUAL(st.held_entries, 7u);
  for (auto& producer : producers)
    CAF_CHECK((*producer)->mailbox().empty());
  // Held entries are readable already.
  self->request(buf, infinite, lookup_atom::value, key_of("M5"));
  run_buffer();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(5));
  // Refreshing a pending key needs no new capacity.
  self->request(buf, infinite, queue_atom::value, make_entry("M0", 0xfe));
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  self->request(buf, infinite, lookup_atom::value, key_of("M0"));
  run_buffer();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(0xfe));
  // The disk comes back.
  sched.run();
  for (auto& producer : producers)
    CAF_CHECK(next_reply<ok_atom>(sys, *producer) == ok_atom::value);
  CAF_CHECK(stored_as("M0", 0xfe));
  for (uint8_t i = 1; i <= 8; ++i)
    CAF_CHECK(stored_as("M" + std::to_string(i), i));
  CAF_CHECK_EQUAL(stats().waiting_producers, 0u);
}

/// The seed force-buffers a producer dropped mid-back-pressure; here the
/// producer is an actor, and its death is what the buffer monitors.
CAF_TEST(a producer that dies while waiting has its entries buffered) {
  start(1);
  scoped_actor filler{sys};
  filler->request(buf, infinite, queue_atom::value, make_entry("M1", 0x11));
  run_buffer();
  {
    scoped_actor doomed{sys};
    doomed->request(buf, infinite, queue_atom::value,
                    make_entry("M2", 0x22, "b@s.whatsapp.net"));
    run_buffer();
    CAF_CHECK_EQUAL(peek_stats().pending, 1u);
  }
  run_buffer();
  auto st = peek_stats();
  CAF_CHECK_EQUAL(st.pending, 2u);
  CAF_CHECK_EQUAL(st.force_buffered, 1u);
  self->request(buf, infinite, lookup_atom::value,
                key_of("M2", "b@s.whatsapp.net"));
  run_buffer();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(0x22));
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, filler) == ok_atom::value);
  CAF_CHECK(stored_as("M1", 0x11));
  CAF_CHECK(stored_as("M2", 0x22, "b@s.whatsapp.net"));
}

/// Captures of one key land in their order even when the newer one's
/// producer dies first, through the actor (the decision alone is in
/// actors.pending_secrets): limit 1, a filler takes the slot, A holds K
/// (older), B holds K (newer) and dies. B's capture must be the one
/// readable and the one that lands.
CAF_TEST(a dead producers newer capture is not overtaken by an older held one) {
  start(1);
  scoped_actor filler{sys};
  filler->request(buf, infinite, queue_atom::value, make_entry("M0", 0));
  run_buffer();
  scoped_actor older{sys};
  older->request(buf, infinite, queue_atom::value, make_entry("K", 0xA1));
  run_buffer();
  {
    scoped_actor doomed{sys};
    doomed->request(buf, infinite, queue_atom::value, make_entry("K", 0xB1));
    run_buffer();
    CAF_CHECK_EQUAL(peek_stats().held_entries, 2u);
  }
  run_buffer(); // The down message.
  CAF_CHECK_EQUAL(peek_stats().force_buffered, 1u);
  self->request(buf, infinite, lookup_atom::value, key_of("K"));
  run_buffer();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(0xB1));
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, filler) == ok_atom::value);
  CAF_CHECK(next_reply<ok_atom>(sys, older) == ok_atom::value);
  CAF_CHECK(stored_as("K", 0xB1));
  CAF_CHECK_EQUAL(lookup("K"), found(0xB1));
}

// -- flush and seal -------------------------------------------------------------

CAF_TEST(flush answers once everything queued before it is durable) {
  start();
  for (uint8_t i = 0; i < 3; ++i) {
    self->request(buf, infinite, queue_atom::value,
                  make_entry("F" + std::to_string(i), i));
    run_buffer();
    CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  }
  self->request(buf, infinite, flush_atom::value);
  run_buffer();
  CAF_CHECK(self->mailbox().empty());
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  for (uint8_t i = 0; i < 3; ++i)
    CAF_CHECK(stored_as("F" + std::to_string(i), i));
  CAF_CHECK_EQUAL(stats().pending, 0u);
}

CAF_TEST(a flush with nothing pending still answers) {
  start();
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
}

/// After seal, a queue is answered only once its entries are durable.
CAF_TEST(a sealed buffer answers a queue only once it is durable) {
  start();
  CAF_CHECK(ask<ok_atom>(seal_atom::value) == ok_atom::value);
  self->request(buf, infinite, queue_atom::value, make_entry("LATE", 0x55));
  run_buffer();
  CAF_CHECK(self->mailbox().empty());
  CAF_CHECK(!stored("LATE").found);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(stored_as("LATE", 0x55));
  CAF_CHECK_EQUAL(stats().pending, 0u);
  CAF_CHECK(stats().sealed);
}

/// A producer waiting since before the seal whose death comes after it is
/// swept by the terminal flush.
CAF_TEST(a producer dying after the seal is swept by the terminal flush) {
  start(1);
  scoped_actor filler{sys};
  filler->request(buf, infinite, queue_atom::value, make_entry("M1", 0x11));
  run_buffer();
  auto doomed = std::make_unique<scoped_actor>(sys);
  (*doomed)->request(buf, infinite, queue_atom::value,
                     make_entry("M2", 0x22, "b@s.whatsapp.net"));
  run_buffer();
  self->request(buf, infinite, seal_atom::value);
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  doomed.reset();
  run_buffer();
  CAF_CHECK_EQUAL(peek_stats().force_buffered, 1u);
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
  CAF_CHECK(stored_as("M2", 0x22, "b@s.whatsapp.net"));
  CAF_CHECK(next_reply<ok_atom>(sys, filler) == ok_atom::value);
}

/// The same with the death before the seal.
CAF_TEST(a producer dying before the seal is swept by the terminal flush) {
  start(1);
  scoped_actor filler{sys};
  filler->request(buf, infinite, queue_atom::value, make_entry("M1", 0x11));
  run_buffer();
  {
    scoped_actor doomed{sys};
    doomed->request(buf, infinite, queue_atom::value,
                    make_entry("M2", 0x22, "b@s.whatsapp.net"));
    run_buffer();
  }
  run_buffer();
  CAF_CHECK_EQUAL(peek_stats().force_buffered, 1u);
  self->request(buf, infinite, seal_atom::value);
  run_buffer();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
  CAF_CHECK(stored_as("M2", 0x22, "b@s.whatsapp.net"));
  CAF_CHECK(stored_as("M1", 0x11));
}

/// With durability `buffered` a batch write does not sync the WAL, so only
/// the end of a flush, of a queue after seal, and of the terminal flush (a
/// flush after seal) can: each must be seen to sync it through the seam.
CAF_TEST(flush sealed queue and terminal flush each end with a wal sync) {
  open(storage::durability::buffered);
  start();
  auto syncs = [&] { return faults->wal_syncs.load(); };
  auto before = syncs();
  queue({make_entry("A", 1)});
  CAF_CHECK(stored_as("A", 1));
  CAF_CHECK_EQUAL(syncs(), before); // A buffered write alone does not sync.
  before = syncs();
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
  CAF_CHECK_GREATER(syncs(), before);
  CAF_CHECK(ask<ok_atom>(seal_atom::value) == ok_atom::value);
  before = syncs();
  queue({make_entry("B", 2)});
  CAF_CHECK(stored_as("B", 2));
  CAF_CHECK_GREATER(syncs(), before);
  before = syncs();
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
  CAF_CHECK_GREATER(syncs(), before);
}

/// After seal every queue waits for durability. Checking the waiters must
/// cost one pass per check, not one pass per waiter: many refreshes of one
/// key queued after seal, all waiting at once, took quadratic time. Timed
/// as a ratio of two sizes on one machine: 8 times the waiters may take
/// about 8 times as long, not 64 times.
/// Every sealed queue is a durability waiter, answered when its write
/// syncs; that each waiter costs one visit however many wait is pinned on
/// the waiter list itself (actors.service_patterns: "answering waiters
/// over many passes visits each waiter once"), not by timing this.
CAF_TEST(many sealed queues are each answered once their writes are durable) {
  start();
  CAF_CHECK(ask<ok_atom>(seal_atom::value) == ok_atom::value);
  constexpr int waiters = 20'000;
  for (int i = 0; i < waiters; ++i)
    self->request(buf, infinite, queue_atom::value,
                  make_entry("HOT", static_cast<uint8_t>(i)));
  sched.run();
  for (int i = 0; i < waiters; ++i)
    CAF_REQUIRE(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(stored_as("HOT", static_cast<uint8_t>(waiters - 1)));
}

/// A flush also covers entries held by a producer still waiting for room.
CAF_TEST(a flush waits for entries held by waiting producers) {
  start(1);
  scoped_actor producer{sys};
  producer->request(buf, infinite, queue_atom::value,
                    entries{make_entry("A", 1), make_entry("B", 2),
                            make_entry("C", 3)});
  run_buffer();
  CAF_CHECK_EQUAL(peek_stats().held_entries, 2u);
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
  CAF_CHECK(stored_as("A", 1));
  CAF_CHECK(stored_as("B", 2));
  CAF_CHECK(stored_as("C", 3));
  CAF_CHECK(next_reply<ok_atom>(sys, producer) == ok_atom::value);
}

// -- failures -------------------------------------------------------------------

/// The seed drops a failed batch with a warning; coalesce keeps it pending
/// and readable, and writes it on a retry with exponential backoff.
CAF_TEST(a failed batch stays pending and is retried until written) {
  start_on_failing_disk(2);
  self->request(buf, infinite, queue_atom::value, make_entry("M1", 0x11));
  sched.run(); // Runs messages only: the retry timer does not fire.
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK_EQUAL(peek_stats().failed_batches, 1u);
  CAF_CHECK_EQUAL(peek_stats().pending, 1u);
  self->request(buf, infinite, lookup_atom::value, key_of("M1"));
  run_buffer();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(0x11));
  CAF_CHECK(!stored("M1").found);
  // First retry after 10ms, which fails again; the next waits 20ms.
  CAF_CHECK_EQUAL(sched.advance_time(9ms), 0u);
  CAF_CHECK_EQUAL(sched.advance_time(1ms), 1u);
  sched.run();
  CAF_CHECK_EQUAL(peek_stats().failed_batches, 2u);
  CAF_CHECK_EQUAL(sched.advance_time(19ms), 0u);
  CAF_CHECK_EQUAL(sched.advance_time(1ms), 1u);
  sched.run();
  CAF_CHECK(stored_as("M1", 0x11));
  auto st = peek_stats();
  CAF_CHECK_EQUAL(st.pending, 0u);
  CAF_CHECK_EQUAL(st.batches_written, 1u);
}

/// A failed WAL sync is retried on its own timer: the next batch does not
/// wait for it (the seed's buffer held every write back by the retry base).
CAF_TEST(a failed wal sync does not hold back the next batch) {
  secret_buffer_options options;
  options.retry_base = 10s;
  options.retry_max = 10s;
  start(options);
  queue({make_entry("A", 1)});
  self->request(buf, infinite, flush_atom::value);
  run_buffer(); // The sync request is at the drain worker.
  faults->wal_sync = true;
  sched.run(); // Runs messages only: no timer fires.
  CAF_CHECK_GREATER(faults->injected.load(), 0);
  CAF_CHECK(self->mailbox().empty()); // The flush waits for a retry.
  faults->clear();
  self->request(buf, infinite, queue_atom::value, make_entry("B", 2));
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  CAF_CHECK(stored_as("B", 2));
  CAF_CHECK(self->mailbox().empty());
  // The sync is retried after the retry base and the flush answered.
  sched.advance_time(10s);
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
}

/// A batch the drain worker had not written when it was killed bounces; the
/// buffer keeps it pending and retries it on the replacement.
CAF_TEST(a write in flight when the drain worker dies is retried on its successor) {
  start_with_replacements();
  self->request(buf, infinite, queue_atom::value, make_entry("W", 2));
  expect((queue_atom, secret_entry), from(_).to(buf));
  CAF_CHECK(next_reply<ok_atom>(sys, self) == ok_atom::value);
  // The relay passes the drain wake-up back; the buffer has yet to read it.
  auto* buffer_job = job_of(buf);
  auto* drain_job = job_of(drain);
  sched.run_jobs_filtered(
    [=](resumable* x) { return x != buffer_job && x != drain_job; });
  // The drain worker dies before the buffer sends the batch, which bounces;
  // the buffer hears of the death only after sending it.
  anon_send_exit(drain, exit_reason::kill);
  run_only(drain);
  sched.run();
  CAF_CHECK(!stored("W").found);
  CAF_CHECK_EQUAL(peek_stats().failed_batches, 1u);
  CAF_CHECK_EQUAL(lookup("W"), found(2)); // Still pending and readable.
  sched.advance_time(10ms); // The retry, to the replacement.
  sched.run();
  CAF_CHECK(stored_as("W", 2));
  CAF_CHECK(ask<ok_atom>(flush_atom::value) == ok_atom::value);
  CAF_CHECK_EQUAL(stats().pending, 0u);
}

/// A read waiting in the mailbox of a reader that is killed bounces; the
/// buffer sends it to the replacement instead of answering the bounce.
CAF_TEST(a read in flight when the reader dies is answered by its successor) {
  start_with_replacements();
  queue({make_entry("R", 1)}); // Written: only RocksDB answers it now.
  self->request(buf, infinite, lookup_atom::value, key_of("R"));
  run_buffer(); // The read waits in the reader's mailbox.
  anon_send_exit(reader, exit_reason::kill);
  sched.run();
  CAF_CHECK_EQUAL(next_reply<secret_lookup>(sys, self), found(1));
  CAF_CHECK_EQUAL(lookup("R"), found(1));
}

/// Without a way to replace a dead worker the buffer stops, answering what
/// waits, instead of bouncing every request forever.
CAF_TEST(a buffer that cannot replace a dead worker stops and answers) {
  start();
  self->request(buf, infinite, flush_atom::value);
  anon_send_exit(drain, exit_reason::kill);
  run_only(drain); // Dead before the buffer sees the flush.
  sched.run();
  auto err = next_error(self);
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::stopped_before_answer));
}

CAF_TEST(bad input is answered with an error and nothing is stored) {
  start();
  auto empty_chat = make_entry("M1", 1);
  empty_chat.chat.clear();
  auto empty_sender = make_entry("M1", 1);
  empty_sender.sender.clear();
  auto empty_id = make_entry("", 1);
  auto short_secret = make_entry("M1", 1);
  short_secret.secret.resize(3);
  auto long_secret = make_entry("M1", 1);
  long_secret.secret.resize(33, 1);
  for (const auto& bad :
       {empty_chat, empty_sender, empty_id, short_secret, long_secret}) {
    self->request(buf, infinite, queue_atom::value,
                  entries{make_entry("GOOD", 9), bad});
    sched.run();
    auto err = next_error(self);
    CAF_CHECK_EQUAL(err.category(), errc_category);
    CAF_CHECK_EQUAL(err.code(),
                    static_cast<uint8_t>(errc::invalid_secret_entry));
    CAF_MESSAGE("rejected: " << sys.render(err));
  }
  // A longer secret is refused exactly like a shorter one, naming the entry.
  for (std::size_t size : {std::size_t{3}, std::size_t{33}}) {
    auto bad = make_entry("M1", 1);
    bad.secret.resize(size, 1);
    self->request(buf, infinite, queue_atom::value,
                  entries{make_entry("GOOD", 9), bad});
    sched.run();
    CAF_CHECK_EQUAL(sys.render(next_error(self)),
                    "invalid secret entry: the secret must be 32 bytes, got "
                      + std::to_string(size) + " (entry 1)");
  }
  auto st = stats();
  CAF_CHECK_EQUAL(st.pending, 0u);
  CAF_CHECK_EQUAL(st.batches_written, 0u);
  CAF_CHECK(!lookup("GOOD").found);
  CAF_CHECK(!stored("GOOD").found);
}

/// The deadline is the flush's own: a flush without one, waiting for the
/// same entries, is answered once they are durable.
CAF_TEST(a flush past its deadline is answered with the failure and the others wait on) {
  start();
  queue({make_entry("D2", 2)});
  // Written; both flushes wait for the WAL sync of a drain worker that
  // stalls from now on.
  self->request(buf, infinite, flush_atom::value, timespan{50ms});
  scoped_actor patient{sys};
  patient->request(buf, infinite, flush_atom::value);
  run_buffer();
  CAF_CHECK(self->mailbox().empty());
  sched.advance_time(49ms);
  run_buffer();
  CAF_CHECK(self->mailbox().empty());
  sched.advance_time(1ms);
  run_buffer();
  auto err = next_error(self);
  CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::storage_failed));
  CAF_CHECK(patient->mailbox().empty());
  sched.run();
  CAF_CHECK(next_reply<ok_atom>(sys, patient) == ok_atom::value);
  CAF_CHECK(stored_as("D2", 2));
}

/// CAF 0.17 has no broken-promise error: a buffer that stops must answer
/// every parked request itself.
CAF_TEST(a stopping buffer answers every parked request with an error) {
  start(1);
  scoped_actor producer{sys};
  producer->request(buf, infinite, queue_atom::value, make_entry("M1", 1));
  run_buffer();
  self->request(buf, infinite, flush_atom::value);
  run_buffer();
  scoped_actor reader_client{sys};
  reader_client->request(buf, infinite, lookup_atom::value, key_of("NOPE"));
  run_buffer();
  anon_send_exit(buf, exit_reason::user_shutdown);
  run_buffer();
  for (auto* who : {&producer, &self, &reader_client}) {
    auto err = next_error(*who);
    CAF_CHECK_EQUAL(err.code(), static_cast<uint8_t>(errc::stopped_before_answer));
  }
}

CAF_TEST(stats count batches entries and waiting producers) {
  start(4);
  queue({make_entry("A", 1), make_entry("B", 2)});
  auto st = stats();
  CAF_CHECK_EQUAL(st.batches_written, 1u);
  CAF_CHECK_EQUAL(st.entries_written, 2u);
  CAF_CHECK_EQUAL(st.last_batch_entries, 2u);
  CAF_CHECK_EQUAL(st.failed_batches, 0u);
  CAF_CHECK(!st.sealed);
  scoped_actor producer{sys};
  producer->request(buf, infinite, queue_atom::value,
                    entries{make_entry("C", 3), make_entry("D", 4),
                            make_entry("E", 5), make_entry("F", 6),
                            make_entry("G", 7)});
  run_buffer();
  st = peek_stats();
  CAF_CHECK_EQUAL(st.pending, 4u);
  CAF_CHECK_EQUAL(st.waiting_producers, 1u);
  CAF_CHECK_EQUAL(st.held_entries, 1u);
  sched.run();
  st = stats();
  CAF_CHECK_EQUAL(st.entries_written, 7u);
  CAF_CHECK_EQUAL(st.waiting_producers, 0u);
  CAF_CHECK(next_reply<ok_atom>(sys, producer) == ok_atom::value);
}

CAF_TEST_FIXTURE_SCOPE_END()

// -- the production wiring --------------------------------------------------------

namespace {

/// A real actor system: the drain worker and reader run detached on their
/// own threads, as in a node. Real time, so every wait has a generous bound.
struct threaded_fixture {
  test_config cfg;
  caf::actor_system sys{cfg};
  temp_dir dir;
  std::shared_ptr<storage::database> db;
  secret_buffer_actors service;

  threaded_fixture() {
    auto opened = storage::database::open({dir.sub("db"),
                                           storage::durability::buffered});
    CAF_REQUIRE(opened.engaged());
    db = std::move(*opened);
    secret_buffer_options options;
    options.pending_limit = 64;
    service = spawn_secret_buffer_actors(sys, db, options);
  }

  ~threaded_fixture() {
    anon_send_exit(service.buffer, exit_reason::user_shutdown);
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(secret_service_tests, threaded_fixture)

/// Producers far past the high-water mark, detached workers, a flush, and
/// every entry readable from RocksDB afterwards.
CAF_TEST(the detached service writes every entry and reads it back) {
  constexpr int producers = 4;
  constexpr int per_producer = 500;
  std::vector<std::unique_ptr<scoped_actor>> clients;
  for (int p = 0; p < producers; ++p) {
    clients.push_back(std::make_unique<scoped_actor>(sys));
    entries batch;
    for (int i = 0; i < per_producer; ++i)
      batch.push_back(make_entry("M" + std::to_string(p * per_producer + i),
                                 static_cast<uint8_t>(i),
                                 "p" + std::to_string(p)));
    (*clients.back())->send(service.buffer, queue_atom::value, std::move(batch));
  }
  scoped_actor self{sys};
  bool flushed = false;
  self->request(service.buffer, std::chrono::seconds{60}, flush_atom::value)
    .receive([&](ok_atom) { flushed = true; },
             [&](error& err) { CAF_FAIL(sys.render(err)); });
  CAF_REQUIRE(flushed);
  std::vector<secret_key> keys;
  for (int p = 0; p < producers; ++p)
    for (int i = 0; i < per_producer; ++i)
      keys.push_back(key_of("M" + std::to_string(p * per_producer + i),
                            "p" + std::to_string(p)));
  auto rows = storage::read_secrets(*db, keys);
  CAF_REQUIRE(rows.engaged());
  CAF_CHECK(std::all_of(rows->begin(), rows->end(),
                        [](const stored_secret& x) { return x.found; }));
  self->request(service.buffer, std::chrono::seconds{60}, lookup_atom::value,
                keys)
    .receive(
      [&](std::vector<secret_lookup>& answers) {
        CAF_CHECK_EQUAL(answers.size(), keys.size());
        CAF_CHECK(std::all_of(answers.begin(), answers.end(),
                              [](const secret_lookup& x) { return x.found; }));
      },
      [&](error& err) { CAF_FAIL(sys.render(err)); });
  self->request(service.buffer, std::chrono::seconds{60}, stats_atom::value)
    .receive(
      [&](secret_buffer_stats& st) {
        CAF_CHECK_EQUAL(st.pending, 0u);
        CAF_CHECK_GREATER_OR_EQUAL(st.entries_written,
                                   uint64_t{producers * per_producer});
        CAF_MESSAGE(st.batches_written << " batches for "
                                       << st.entries_written << " entries");
      },
      [&](error& err) { CAF_FAIL(sys.render(err)); });
}

/// A worker can die on its own (a crash, an operator's kill); the buffer
/// monitors both and replaces a dead one. Killing the drain worker with
/// captures pending and producers back-pressured past the limit must lose
/// nothing: the flush completes and every entry is in RocksDB.
CAF_TEST(a killed drain worker is replaced and nothing is lost) {
  scoped_actor self{sys};
  auto entries_of = [](const std::string& prefix, int n) {
    entries xs;
    for (int i = 0; i < n; ++i)
      xs.push_back(make_entry(prefix + std::to_string(i),
                              static_cast<uint8_t>(i)));
    return xs;
  };
  auto flush = [&] {
    error result;
    self->request(service.buffer, 60s, flush_atom::value, timespan{20s})
      .receive([](ok_atom) {}, [&](error& err) { result = std::move(err); });
    return result;
  };
  auto before = entries_of("before-", 100);
  self->send(service.buffer, queue_atom::value, before);
  self->send_exit(service.drain, exit_reason::kill);
  self->wait_for(service.drain);
  // Far past the pending limit of 64: the producer waits for writes.
  auto after = entries_of("after-", 500);
  scoped_actor producer{sys};
  producer->send(service.buffer, queue_atom::value, after);
  CAF_CHECK_EQUAL(flush(), error{});
  for (auto* xs : {&before, &after}) {
    std::vector<secret_key> keys;
    for (auto& x : *xs)
      keys.push_back(x.key());
    auto rows = storage::read_secrets(*db, keys);
    CAF_REQUIRE(rows.engaged());
    std::size_t missing = 0;
    for (std::size_t i = 0; i < xs->size(); ++i)
      if (!(*rows)[i].found || (*rows)[i].row.entry.secret != (*xs)[i].secret)
        ++missing;
    CAF_CHECK_EQUAL(missing, 0u);
  }
  // Once the drain worker was replaced, writes go on as before.
  auto later = entries_of("later-", 10);
  self->send(service.buffer, queue_atom::value, later);
  CAF_CHECK_EQUAL(flush(), error{});
  auto rows = storage::read_secrets(*db, {later.back().key()});
  CAF_REQUIRE(rows.engaged());
  CAF_CHECK(rows->front().found);
}

/// The same for the reader: a lookup that needs RocksDB after the reader
/// was killed is answered from a replacement, not bounced.
CAF_TEST(a killed reader is replaced and lookups keep working) {
  scoped_actor self{sys};
  entries xs;
  for (uint8_t i = 0; i < 20; ++i)
    xs.push_back(make_entry("R" + std::to_string(i), i));
  self->request(service.buffer, 60s, queue_atom::value, xs)
    .receive([](ok_atom) {}, [&](error& err) { CAF_FAIL(sys.render(err)); });
  self->request(service.buffer, 60s, flush_atom::value)
    .receive([](ok_atom) {}, [&](error& err) { CAF_FAIL(sys.render(err)); });
  self->send_exit(service.reader, exit_reason::kill);
  self->wait_for(service.reader);
  std::vector<secret_key> keys;
  for (auto& x : xs)
    keys.push_back(x.key());
  // Written and gone from the buffer: only RocksDB can answer these.
  for (int round = 0; round < 2; ++round) {
    self->request(service.buffer, 60s, lookup_atom::value, keys)
      .receive(
        [&](std::vector<secret_lookup>& answers) {
          CAF_REQUIRE_EQUAL(answers.size(), xs.size());
          for (std::size_t i = 0; i < xs.size(); ++i)
            CAF_CHECK(answers[i].found && answers[i].secret == xs[i].secret);
        },
        [&](error& err) { CAF_FAIL(sys.render(err)); });
    self->request(service.buffer, 60s, lookup_atom::value, keys.front())
      .receive([&](secret_lookup& answer) { CAF_CHECK(answer.found); },
               [&](error& err) { CAF_FAIL(sys.render(err)); });
  }
}

CAF_TEST_FIXTURE_SCOPE_END()

// -- messages cross nodes ---------------------------------------------------------

CAF_TEST_FIXTURE_SCOPE(secret_message_tests, test_coordinator_fixture<test_config>)

/// Every message a remote caller sends or receives survives the serializer
/// the middleman uses.
CAF_TEST(secret messages survive serialization) {
  auto entry = make_entry("M1", 0x11);
  entry.expires_at = 123;
  CAF_CHECK(roundtrip(entry) == entry);
  CAF_CHECK(roundtrip(key_of("M1")) == key_of("M1"));
  secret_lookup answer{true, secret_of(3), 9};
  CAF_CHECK(roundtrip(answer) == answer);
  secret_buffer_stats st;
  st.pending = 3;
  st.sealed = true;
  auto copy = roundtrip(st);
  CAF_CHECK_EQUAL(copy.pending, 3u);
  CAF_CHECK(copy.sealed);
  auto err = roundtrip(make_error(errc::invalid_secret_entry, "the chat is empty"));
  CAF_CHECK_EQUAL(sys.render(err), "invalid secret entry: the chat is empty");
}

CAF_TEST_FIXTURE_SCOPE_END()
