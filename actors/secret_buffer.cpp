#include <coalesce/actors/secret_buffer.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <coalesce/actors/caller_monitor.hpp>
#include <coalesce/actors/durability_waiters.hpp>
#include <coalesce/actors/option_text.hpp>
#include <coalesce/actors/parked_requests.hpp>
#include <coalesce/actors/pending_secrets.hpp>
#include <coalesce/actors/retry_backoff.hpp>
#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/secret_merge.hpp>
#include <coalesce/storage/secret_store.hpp>

namespace coalesce {

namespace {

using ok_promise = caf::typed_response_promise<ok_atom>;
using lookup_promise = caf::typed_response_promise<secret_lookup>;
using lookups_promise
  = caf::typed_response_promise<std::vector<secret_lookup>>;
using steady_clock = std::chrono::steady_clock;

/// Storage's own check, so both refuse with the same words; the buffer adds
/// which entry of the request it was.
caf::error check_entry(const secret_entry& entry, std::size_t index) {
  auto what = storage::invalid_secret_entry(entry);
  if (what.empty())
    return caf::none;
  return make_error(errc::invalid_secret_entry,
                    what + " (entry " + std::to_string(index) + ")");
}

/// A key with an empty part names nothing a queue could have stored: a
/// lookup of it is a caller's bug, answered as such rather than "not found".
caf::error check_key(const secret_key& key, std::size_t index) {
  auto what = storage::invalid_secret_key(key);
  if (what.empty())
    return caf::none;
  return make_error(errc::invalid_secret_entry,
                    what + " (key " + std::to_string(index) + ")");
}

/// The answer a read after the next flush would give: the stored row with
/// what the buffer holds for the key applied on top.
secret_lookup resolve(const stored_secret* stored,
                      const std::optional<secret_write>& buffered,
                      int64_t now) {
  std::optional<secret_write> row;
  if (stored != nullptr && stored->found)
    row = stored->row;
  if (buffered)
    row = storage::apply_capture(row ? &*row : nullptr, *buffered);
  if (!row || storage::is_expired(*row, now))
    return secret_lookup{};
  return secret_lookup{true, row->entry.secret, row->entry.message_ts,
                       row->entry.stamp, row->entry.ts_stamp};
}

/// Whether the buffer alone knows the answer: the stored row can change it
/// only when the buffered message time is unknown or the buffered expiry
/// has passed (then an older row may still supply either), or when the
/// capture is stamped (a stored row of a greater stamp wins).
bool answerable_from_buffer(const std::optional<secret_write>& buffered,
                            int64_t now) {
  return buffered && buffered->entry.message_ts != 0
         && buffered->entry.stamp == 0
         && !storage::is_expired(*buffered, now);
}

} // namespace

struct secret_buffer_state {
  static inline const char* name = "secret_buffer";

  explicit secret_buffer_state(caf::local_actor*) : pending(1) {
    // nop
  }

  secret_buffer_state(const secret_buffer_state&) = delete;
  secret_buffer_state& operator=(const secret_buffer_state&) = delete;

  /// Every parked request is answered by its list (parked_requests.hpp);
  /// what the buffer spawned stops with it.
  ~secret_buffer_state() {
    if (drain_replaced)
      caf::anon_send_exit(drain, caf::exit_reason::user_shutdown);
    if (reader_replaced)
      caf::anon_send_exit(reader, caf::exit_reason::user_shutdown);
    if (wake_relay)
      caf::anon_send_exit(wake_relay, caf::exit_reason::user_shutdown);
  }

  pending_secrets pending;
  secret_drain_actor drain;
  secret_reader_actor reader;
  secret_buffer_options options;
  secret_worker_factory replace;
  /// Whether the worker is a replacement this buffer spawned (and stops).
  bool drain_replaced = false;
  bool reader_replaced = false;
  /// Reads whose reader died before answering, sent again to its successor.
  std::vector<std::function<void()>> reads_awaiting_reader;

  /// Producers waiting for capacity, by ticket, and who they are.
  parked_requests<ok_promise> producers{"the secret buffer"};
  std::unordered_map<producer_ticket, caf::actor_addr> producer_sources;
  producer_ticket next_ticket = 1;
  caller_monitor monitored;

  /// Flushes and post-seal queues waiting for their entries to become
  /// durable: their promises, and their marks (the sequence they wait for)
  /// and deadlines.
  parked_requests<ok_promise> awaiting_durability{"the secret buffer"};
  durability_waiters waiting;
  bool sync_in_flight = false;
  /// A failed WAL sync waits for its own retry timer; batches go on.
  bool sync_retry_scheduled = false;
  retry_backoff sync_backoff{caf::timespan{0}, caf::timespan{0}};

  /// Lookups waiting for the reader.
  parked_requests<lookup_promise> single_lookups{"the secret buffer"};
  parked_requests<lookups_promise> many_lookups{"the secret buffer"};

  /// A drain message is on its way to this actor (a wake-up or a retry).
  bool drain_scheduled = false;
  /// Passes the drain wake-up back (see `schedule_drain`).
  caf::actor wake_relay;
  retry_backoff write_backoff{caf::timespan{0}, caf::timespan{0}};
  steady_clock::time_point batch_started;
  bool sealed = false;
  secret_buffer_stats stats;
  /// When writes started failing; meaningful while `failing`.
  steady_clock::time_point failing_since;
  bool failing = false;
  /// `stats.retries` when the current streak of failures began.
  uint64_t streak_start_retries = 0;
};

namespace {

using buffer_pointer
  = secret_buffer_actor::stateful_pointer<secret_buffer_state>;

void on_drain(buffer_pointer self);

/// Answers a wake-up at once: the round trip through another actor lets
/// the buffer's turn end with its answers (see `schedule_drain`).
caf::behavior relay_wake_up() {
  return {[](drain_atom x) { return x; }};
}

void schedule_drain(buffer_pointer self) {
  auto& st = self->state;
  if (st.drain_scheduled || st.pending.writing() || !st.pending.has_unwritten())
    return;
  st.drain_scheduled = true;
  // A message, not a direct write: captures already in the mailbox are
  // admitted first and ride in the same batch. It goes around through the
  // relay rather than to this actor's own mailbox, so this turn ends with
  // the answer to the queue that woke the drain: the producer gets it
  // before the write wakes the drain worker's thread, which on a machine
  // with few cores would run ahead of it (measured: p99 of the queue round
  // trip 2.4 to 2.9 times a bare CAF round trip with a direct drain).
  self->request(st.wake_relay, caf::infinite, drain_atom::value)
    .then([self](drain_atom) { on_drain(self); },
          // The relay is gone (killed from outside): drain without it.
          [self](caf::error&) { on_drain(self); });
}

void check_durability(buffer_pointer self);

/// `promise` is answered once every capture up to `mark` is durable, or
/// at `deadline`. Returns the waiter's id.
uint64_t wait_durable(buffer_pointer self, ok_promise promise, uint64_t mark,
                      std::optional<steady_clock::time_point> deadline
                      = std::nullopt) {
  auto& st = self->state;
  auto id = st.awaiting_durability.park(std::move(promise));
  st.waiting.wait(id, mark, deadline);
  check_durability(self);
  return id;
}

void answer_producer(buffer_pointer self, ok_promise& promise,
                     uint64_t last_sequence) {
  if (!self->state.sealed)
    promise.deliver(ok_atom::value);
  else
    wait_durable(self, std::move(promise), last_sequence);
}

long long as_ms(caf::timespan x) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(x).count();
}

void on_sync_failed(buffer_pointer self, const caf::error& err) {
  auto& st = self->state;
  st.sync_in_flight = false;
  auto delay = st.sync_backoff.next();
  spdlog::warn("secret buffer: WAL sync failed, {} flush(es) wait for a retry "
               "in {} ms: {}",
               st.waiting.size(), as_ms(delay), self->system().render(err));
  // Its own timer, not the drain's: the next batch must not wait for it.
  st.sync_retry_scheduled = true;
  self->delayed_send(self, delay, sync_atom::value);
}

/// The sync that started when every capture below `written_below` was
/// written succeeded: those waiters are answered in one pass.
void on_synced(buffer_pointer self, uint64_t written_below) {
  auto& st = self->state;
  st.sync_in_flight = false;
  st.sync_backoff.reset();
  for (auto id : st.waiting.take_durable(written_below))
    st.awaiting_durability.answer(id, ok_atom::value);
  check_durability(self);
}

/// Starts a WAL sync when some waiter's captures are all written.
void check_durability(buffer_pointer self) {
  auto& st = self->state;
  if (st.sync_in_flight || st.sync_retry_scheduled)
    return;
  auto written_below = st.pending.durable_below();
  if (!st.waiting.any_durable_below(written_below))
    return;
  st.sync_in_flight = true;
  self
    ->request<caf::message_priority::high>(st.drain, caf::infinite,
                                           sync_atom::value)
    .then([self, written_below](ok_atom) { on_synced(self, written_below); },
          [self](caf::error& err) { on_sync_failed(self, err); });
}

void write_batch(buffer_pointer self);

void on_batch_written(buffer_pointer self, std::size_t size) {
  auto& st = self->state;
  auto took = steady_clock::now() - st.batch_started;
  st.stats.batches_written += 1;
  st.stats.entries_written += size;
  st.stats.last_batch_entries = size;
  st.stats.last_write_latency_us
    = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
  st.write_backoff.reset();
  if (st.failing) {
    st.failing = false;
    spdlog::info("secret buffer: writes succeed again after {} ms",
                 as_ms(steady_clock::now() - st.failing_since));
    st.stats.last_error.clear();
  }
  // The next batch goes out before the clean-up of this one, so the disk
  // does not wait for it; what the clean-up admits rides in the batch after.
  st.pending.batch_written();
  if (!st.drain_scheduled)
    write_batch(self);
  for (auto& released : st.pending.release_written()) {
    auto promise = st.producers.take(released.ticket);
    if (!promise)
      continue;
    st.producer_sources.erase(released.ticket);
    answer_producer(self, *promise, released.last_sequence);
  }
  check_durability(self);
  // Straight on with what the clean-up admitted: a drain message would
  // queue behind every producer message in the mailbox.
  if (!st.drain_scheduled)
    write_batch(self);
}

void on_batch_failed(buffer_pointer self, std::size_t size,
                     const caf::error& err) {
  auto& st = self->state;
  st.stats.failed_batches += 1;
  st.pending.abandon_batch();
  st.stats.last_error = self->system().render(err);
  if (!st.failing) {
    st.failing = true;
    st.failing_since = steady_clock::now();
    st.streak_start_retries = st.stats.retries;
  }
  auto delay = st.write_backoff.next();
  // The first failure of a streak is worth an operator's attention; the
  // retries that follow it are not.
  spdlog::log(st.stats.retries == st.streak_start_retries
                ? spdlog::level::warn
                : spdlog::level::debug,
              "secret buffer: writing a batch of {} entries failed, kept "
              "pending, retry in {} ms: {}",
              size, as_ms(delay), st.stats.last_error);
  st.drain_scheduled = true;
  self->delayed_send(self, delay, drain_atom::value);
}

void write_batch(buffer_pointer self) {
  auto& st = self->state;
  auto batch = st.pending.start_batch();
  if (batch.empty()) {
    check_durability(self);
    return;
  }
  auto size = batch.size();
  st.batch_started = steady_clock::now();
  // High priority, so the answer overtakes producer messages queued in the
  // mailbox: the next batch starts as soon as the disk is free.
  self
    ->request<caf::message_priority::high>(st.drain, caf::infinite,
                                           write_atom::value, std::move(batch))
    .then([self, size](ok_atom) { on_batch_written(self, size); },
          [self, size](caf::error& err) { on_batch_failed(self, size, err); });
}

caf::result<ok_atom> queue_entries(buffer_pointer self,
                                   std::vector<secret_entry> entries) {
  if (auto err = check_secret_entries(entries))
    return err;
  if (entries.empty())
    return ok_atom::value;
  auto& st = self->state;
  auto now = storage::unix_now();
  std::vector<secret_write> writes;
  writes.reserve(entries.size());
  for (auto& entry : entries)
    writes.push_back(secret_write{std::move(entry), now});
  auto ticket = st.next_ticket++;
  auto admitted = st.pending.queue(ticket, std::move(writes));
  schedule_drain(self);
  if (admitted.answer_now && !st.sealed)
    return ok_atom::value;
  // Before the promise: making it takes the sender out of the message.
  auto source = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto promise = self->make_response_promise<ok_atom>();
  if (admitted.answer_now) {
    answer_producer(self, promise, admitted.last_sequence);
    return promise;
  }
  st.monitored.watch(self, source);
  st.producers.park(ticket, promise);
  st.producer_sources.emplace(ticket, source);
  return promise;
}

caf::result<ok_atom>
flush(buffer_pointer self, std::optional<caf::timespan> deadline = std::nullopt) {
  auto promise = self->make_response_promise<ok_atom>();
  schedule_drain(self);
  std::optional<steady_clock::time_point> due;
  if (deadline)
    due = self->clock().now() + *deadline;
  auto id = wait_durable(self, promise, self->state.pending.last_sequence(),
                         due);
  if (deadline)
    self->delayed_send(self, *deadline, caf::timeout_atom::value, id);
  return promise;
}

/// A flush's deadline passed: it and every other waiter due by now are
/// answered with an error (their entries stay pending and are retried).
void on_flush_deadline(buffer_pointer self, uint64_t id) {
  auto& st = self->state;
  auto expired = st.waiting.take_expired(self->clock().now());
  if (st.waiting.remove(id)) // Its own timer fired: due whatever the clock.
    expired.push_back(id);
  if (expired.empty())
    return;
  auto reason = st.failing ? "writes are failing: " + st.stats.last_error
                           : std::string{"the write is still in flight"};
  auto err = make_error(errc::storage_failed,
                        "not durable by the flush's deadline; the entries "
                        "stay pending and are retried; "
                          + reason);
  for (auto waiter : expired)
    st.awaiting_durability.answer(waiter, err);
}

/// How many readers one read may go through: a read whose reader died before
/// answering goes to the successor instead of answering the bounce, but a
/// read that kills every reader it reaches must still get an answer.
constexpr int max_readers_per_read = 3;

/// Reads `keys` through the reader, retried on the reader's successor while
/// `attempts` last.
template <class OnRows, class OnError>
void read_stored(buffer_pointer self, std::vector<secret_key> keys,
                 OnRows on_rows, OnError on_error,
                 int attempts = max_readers_per_read) {
  auto reader = self->state.reader;
  self->request(reader, caf::infinite, read_atom::value, keys)
    .then(on_rows, [self, reader, keys, on_rows, on_error,
                    attempts](caf::error& err) mutable {
      if (err != caf::sec::request_receiver_down || attempts == 1) {
        on_error(err);
        return;
      }
      auto again = [self, keys, on_rows, on_error, attempts] {
        read_stored(self, keys, on_rows, on_error, attempts - 1);
      };
      auto& st = self->state;
      if (st.reader != reader)
        again(); // Already replaced.
      else
        st.reads_awaiting_reader.emplace_back(std::move(again));
    });
}

caf::result<secret_lookup> lookup_one(buffer_pointer self,
                                      const secret_key& key) {
  if (auto err = check_key(key, 0))
    return err;
  auto& st = self->state;
  auto now = storage::unix_now();
  auto buffered = st.pending.find(key);
  if (answerable_from_buffer(buffered, now))
    return resolve(nullptr, buffered, now);
  auto promise = self->make_response_promise<secret_lookup>();
  auto id = st.single_lookups.park(promise);
  auto watch = st.pending.watch(key);
  read_stored(
    self, std::vector<secret_key>{key},
    [self, id, key, watch](std::vector<stored_secret>& rows) {
      auto& st = self->state;
      st.single_lookups.answer(id, resolve(&rows.front(),
                                           st.pending.end_watch(key, watch),
                                           storage::unix_now()));
    },
    [self, id, key, watch](caf::error& err) {
      auto& st = self->state;
      st.pending.end_watch(key, watch);
      st.single_lookups.answer(id, std::move(err));
    });
  return promise;
}

/// The keys of a lookup the buffer cannot answer alone, with where their
/// answers go and what the buffer held for them while they were read.
struct stored_reads {
  std::vector<secret_key> keys;
  std::vector<std::size_t> answer_index;
  std::vector<read_watch> watches;

  std::vector<std::optional<secret_write>> end_watches(pending_secrets& p) {
    std::vector<std::optional<secret_write>> result;
    result.reserve(keys.size());
    for (std::size_t j = 0; j < keys.size(); ++j)
      result.push_back(p.end_watch(keys[j], watches[j]));
    return result;
  }
};

caf::result<std::vector<secret_lookup>>
lookup_many(buffer_pointer self, const std::vector<secret_key>& keys) {
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (auto err = check_key(keys[i], i))
      return err;
  auto& st = self->state;
  auto now = storage::unix_now();
  std::vector<secret_lookup> answers(keys.size());
  stored_reads reads;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto buffered = st.pending.find(keys[i]);
    if (answerable_from_buffer(buffered, now)) {
      answers[i] = resolve(nullptr, buffered, now);
    } else {
      reads.keys.push_back(keys[i]);
      reads.answer_index.push_back(i);
    }
  }
  if (reads.keys.empty())
    return answers;
  auto promise = self->make_response_promise<std::vector<secret_lookup>>();
  auto id = st.many_lookups.park(promise);
  for (const auto& key : reads.keys)
    reads.watches.push_back(st.pending.watch(key));
  auto keys_to_read = reads.keys;
  read_stored(
    self, std::move(keys_to_read),
    [self, id, answers, reads](std::vector<stored_secret>& rows) mutable {
      auto& st = self->state;
      auto now = storage::unix_now();
      auto buffered = reads.end_watches(st.pending);
      for (std::size_t j = 0; j < reads.answer_index.size(); ++j)
        answers[reads.answer_index[j]] = resolve(&rows[j], buffered[j], now);
      st.many_lookups.answer(id, std::move(answers));
    },
    [self, id, reads](caf::error& err) mutable {
      auto& st = self->state;
      reads.end_watches(st.pending);
      st.many_lookups.answer(id, std::move(err));
    });
  return promise;
}

/// A worker died: without a successor, every write or read would bounce
/// and be retried forever.
void on_worker_down(buffer_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  bool is_drain = msg.source == st.drain.address();
  const char* which = is_drain ? "drain worker" : "reader";
  auto reason = self->system().render(msg.reason);
  if (is_drain ? !st.replace.drain : !st.replace.reader) {
    spdlog::error("secret buffer: the {} died ({}) and cannot be replaced; "
                  "the buffer stops",
                  which, reason);
    self->quit(msg.reason);
    return;
  }
  if (is_drain) {
    st.drain = st.replace.drain(self->system());
    st.drain_replaced = true;
    self->monitor(st.drain);
  } else {
    st.reader = st.replace.reader(self->system());
    st.reader_replaced = true;
    self->monitor(st.reader);
  }
  spdlog::error("secret buffer: the {} died ({}); replaced it, what it was "
                "doing is retried",
                which, reason);
  if (!is_drain)
    for (auto& read : std::exchange(st.reads_awaiting_reader, {}))
      read();
  // The write or sync in flight bounces and comes back as a failure, which
  // retries it on the successor.
}

/// A drain wake-up or a retry arrived.
void on_drain(buffer_pointer self) {
  auto& st = self->state;
  st.drain_scheduled = false;
  if (st.failing)
    st.stats.retries += 1;
  write_batch(self);
}

/// A waiting producer died: its held entries must not be lost with it.
void on_producer_down(buffer_pointer self, const caf::down_msg& msg) {
  auto& st = self->state;
  st.monitored.forget(msg.source);
  std::size_t rescued = 0;
  for (auto i = st.producer_sources.begin(); i != st.producer_sources.end();) {
    if (i->second == msg.source) {
      rescued += st.pending.force_admit(i->first);
      st.producers.take(i->first); // Nobody left to answer.
      i = st.producer_sources.erase(i);
    } else {
      ++i;
    }
  }
  if (rescued == 0)
    return;
  st.stats.force_buffered += rescued;
  spdlog::warn("secret buffer: producer {} died while waiting for capacity; "
               "force-buffered {} entries past the high-water mark",
               to_string(msg.source), rescued);
  schedule_drain(self);
  check_durability(self);
}

ok_atom seal(buffer_pointer self) {
  auto& st = self->state;
  if (!st.sealed) {
    st.sealed = true;
    st.stats.sealed = true;
    spdlog::info("secret buffer: sealed with {} pending entries; every later "
                 "queue writes inline",
                 st.pending.size());
  }
  return ok_atom::value;
}

secret_buffer_stats current_stats(const secret_buffer_state& st) {
  auto stats = st.stats;
  if (st.failing)
    stats.failing_for_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             steady_clock::now() - st.failing_since)
                             .count();
  stats.pending = st.pending.size();
  stats.waiting_producers = st.pending.waiting_producers();
  stats.held_entries = st.pending.held_entries();
  return stats;
}

void init_buffer(buffer_pointer self, secret_drain_actor drain,
                 secret_reader_actor reader, secret_buffer_options options,
                 secret_worker_factory replace) {
  auto& st = self->state;
  st.pending = pending_secrets{options.pending_limit, options.max_batch};
  st.drain = std::move(drain);
  st.reader = std::move(reader);
  st.options = options;
  st.write_backoff = retry_backoff{options.retry_base, options.retry_max};
  st.sync_backoff = retry_backoff{options.retry_base, options.retry_max};
  st.replace = std::move(replace);
  st.wake_relay = self->spawn(relay_wake_up);
  self->monitor(st.drain);
  self->monitor(st.reader);
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (msg.source == st.drain.address() || msg.source == st.reader.address())
      on_worker_down(self, msg);
    else
      on_producer_down(self, msg);
  });
}

secret_buffer_actor::behavior_type
secret_buffer(buffer_pointer self, secret_drain_actor drain,
              secret_reader_actor reader, secret_buffer_options options,
              secret_worker_factory replace) {
  init_buffer(self, std::move(drain), std::move(reader), options,
              std::move(replace));
  return {
    [self](queue_atom, std::vector<secret_entry>& entries) {
      return queue_entries(self, std::move(entries));
    },
    [self](queue_atom, secret_entry& entry) {
      std::vector<secret_entry> entries;
      entries.push_back(std::move(entry));
      return queue_entries(self, std::move(entries));
    },
    [self](lookup_atom, const secret_key& key) {
      return lookup_one(self, key);
    },
    [self](lookup_atom, const std::vector<secret_key>& keys) {
      return lookup_many(self, keys);
    },
    // A replica's copies: the buffer alone is one replica; passing them on
    // is the coordinator's (coalesce/node/secret_replicas.hpp).
    // Which lists the coordinator counted is its node's gateway's to check.
    [self](replica_atom, std::vector<secret_entry>& entries,
           const list_stamp&) {
      return queue_entries(self, std::move(entries));
    },
    [self](replica_atom, const std::vector<secret_key>& keys,
           const list_stamp&) {
      return lookup_many(self, keys);
    },
    [self](flush_atom) { return flush(self); },
    [self](replica_atom, flush_atom, const list_stamp&) {
      return flush(self);
    },
    [self](replica_atom, drop_atom, std::vector<secret_write>& rows) {
      // The drain worker is the family's one writer: a batch it writes
      // before the drop changes the rows, so they stay; one after it
      // writes its captures again.
      return self->delegate(self->state.drain, drop_atom::value,
                            std::move(rows));
    },
    [self](seal_atom) { return seal(self); },
    [self](stats_atom) { return current_stats(self->state); },
    [self](drain_atom) { on_drain(self); },
    [self](flush_atom, caf::timespan deadline) -> caf::result<ok_atom> {
      // A deadline already past would race the flush against its own timer.
      if (deadline < caf::timespan{0})
        return make_error(errc::invalid_request,
                          "the flush deadline " + duration_text(deadline)
                            + " is negative");
      return flush(self, deadline);
    },
    [self](caf::timeout_atom, uint64_t id) { on_flush_deadline(self, id); },
    [self](sync_atom) {
      self->state.sync_retry_scheduled = false;
      check_durability(self);
    },
  };
}

} // namespace

caf::error check_secret_entries(const std::vector<secret_entry>& entries) {
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (auto err = check_entry(entries[i], i))
      return err;
  return caf::none;
}


secret_buffer_actor spawn_secret_buffer(caf::actor_system& sys,
                                        secret_drain_actor drain,
                                        secret_reader_actor reader,
                                        secret_buffer_options options,
                                        secret_worker_factory replace) {
  return sys.spawn(secret_buffer, std::move(drain), std::move(reader),
                   options, std::move(replace));
}

secret_buffer_actors spawn_secret_buffer_actors(caf::actor_system& sys,
                                    std::shared_ptr<storage::database> db,
                                    secret_buffer_options options) {
  secret_worker_factory workers{
    [db](caf::actor_system& sys) {
      return sys.spawn<caf::detached>(secret_drain_worker, db);
    },
    [db](caf::actor_system& sys) {
      return sys.spawn<caf::detached>(secret_reader, db);
    }};
  secret_buffer_actors service;
  service.drain = workers.drain(sys);
  service.reader = workers.reader(sys);
  service.buffer = spawn_secret_buffer(sys, service.drain, service.reader,
                                       options, workers);
  service.buffer->attach_functor(
    [drain = service.drain, reader = service.reader](const caf::error&) {
      caf::anon_send_exit(drain, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(reader, caf::exit_reason::user_shutdown);
    });
  return service;
}

} // namespace coalesce
