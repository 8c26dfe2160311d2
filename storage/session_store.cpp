#include <coalesce/storage/session_store.hpp>

#include <algorithm>
#include <limits>
#include <memory>
#include <tuple>
#include <unordered_map>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/byte_codec.hpp>
#include <coalesce/storage/database_impl.hpp>

namespace coalesce::storage {

namespace {

constexpr uint8_t blob_format = 1;
constexpr uint8_t tombstone_format = 2;
/// A replica's value: its version, then the blob (replica_value below).
constexpr uint8_t replica_format = 3;
constexpr uint8_t update_format = 1;
/// A blob value starts with its format byte and its generation.
constexpr std::size_t head_size = 1 + 8;

std::string update_key(const std::string& session, const std::string& id) {
  return session_key_prefix(session) + id;
}

/// The first key after every key starting with `prefix`. The prefix starts
/// with a length below 2^32 - 1, so it is never all 0xFF bytes.
std::string prefix_end(std::string prefix) {
  while (!prefix.empty() && static_cast<uint8_t>(prefix.back()) == 0xFF)
    prefix.pop_back();
  prefix.back() = static_cast<char>(static_cast<uint8_t>(prefix.back()) + 1);
  return prefix;
}

std::string encode_blob(const session_write& write, uint64_t generation) {
  std::string out;
  out.reserve(head_size + write.blob.size());
  out.push_back(static_cast<char>(blob_format));
  bytes::put_u64_be(out, generation);
  out += write.blob;
  return out;
}

std::string encode_tombstone(uint64_t generation) {
  std::string out;
  out.push_back(static_cast<char>(tombstone_format));
  bytes::put_u64_be(out, generation);
  return out;
}

/// A stored blob value or tombstone, decoded.
struct stored_head {
  bool tombstone = false;
  /// Format 3 without content: a claim or promise only, no session.
  bool empty = false;
  uint64_t generation = 0;
  /// Where the blob starts in the value.
  std::size_t blob_offset = head_size;
  /// What a replica holds (formats 1 and 2: version (0, 0)).
  session_version version;
};

bool decode_head(std::string_view value, stored_head& head) {
  bytes::reader in{value};
  uint8_t format = 0;
  if (!in.u8(format))
    return false;
  if (format == replica_format) {
    auto& v = head.version;
    if (!in.u64_be(v.generation) || !in.u64_be(v.promised)
        || !in.u64_be(v.ballot) || !in.u64_be(v.seq) || !in.u8(v.content)
        || v.content > static_cast<uint8_t>(session_content::deleted)
        || !in.string(v.claimant))
      return false;
    head.generation = v.generation;
    head.tombstone = v.content == static_cast<uint8_t>(session_content::deleted);
    head.empty = v.content == static_cast<uint8_t>(session_content::none);
    head.blob_offset = in.position();
    return head.tombstone || head.empty ? in.at_end() : true;
  }
  if ((format != blob_format && format != tombstone_format)
      || !in.u64_be(head.generation))
    return false;
  head.tombstone = format == tombstone_format;
  head.version.generation = head.generation;
  head.version.content = static_cast<uint8_t>(
    head.tombstone ? session_content::deleted : session_content::blob);
  return !head.tombstone || in.at_end();
}

/// The stored value of `session` (its blob after the head, or a
/// tombstone), decoded into `head`; false when nothing is stored.
caf::expected<bool> read_stored(database::impl& state,
                                const std::string& session, std::string& value,
                                stored_head& head) {
  auto status = state.db->Get(rocksdb::ReadOptions{},
                              state.handle(family::sessions),
                              session_key_prefix(session), &value);
  if (status.IsNotFound())
    return false;
  if (!status.ok())
    return to_error(status, "reading the session blob");
  if (!decode_head(value, head))
    return make_error(errc::corrupt_record,
                      "undecodable blob of session " + session);
  return true;
}

/// The stored head of `session`: none when nothing is stored.
caf::expected<std::optional<stored_head>>
read_head(database::impl& state, const std::string& session) {
  std::string value;
  stored_head head;
  auto found = read_stored(state, session, value, head);
  if (!found)
    return std::move(found.error());
  if (!*found)
    return std::optional<stored_head>{};
  return std::optional<stored_head>{head};
}

/// `f(state, head)` with the stored head of `session` (none: nothing is
/// stored), once the id is checked and the database is open.
template <class T, class F>
caf::expected<T> with_stored_head(database& db, const std::string& session,
                                  F f) {
  if (auto what = invalid_session_id(session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  return with_open_database(db, [&](database::impl& state) -> caf::expected<T> {
    auto head = read_head(state, session);
    if (!head)
      return std::move(head.error());
    return f(state, *head);
  });
}

std::string encode_update(const session_update& update) {
  std::string out;
  out.push_back(static_cast<char>(update_format));
  bytes::put_i64_le(out, update.timestamp);
  bytes::put_string(out, update.kind);
  bytes::put_string(out, update.payload);
  return out;
}

bool decode_update(std::string_view value, session_update& update) {
  bytes::reader in{value};
  uint8_t format = 0;
  return in.u8(format) && format == update_format
         && in.i64_le(update.timestamp) && in.string(update.kind)
         && in.string(update.payload) && in.at_end();
}

caf::error check_write(const session_write& write) {
  if (auto what = invalid_session_id(write.session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  constexpr auto max_field = std::numeric_limits<uint32_t>::max();
  for (const auto& update : write.updates) {
    if (update.id.empty())
      return make_error(errc::invalid_request, "an update has an empty id");
    if (update.kind.size() > max_field || update.payload.size() > max_field)
      return make_error(errc::invalid_request, "an update is too large");
  }
  for (const auto& id : write.removed)
    if (id.empty())
      return make_error(errc::invalid_request,
                        "a removed update has an empty id");
  return caf::none;
}

} // namespace

std::string invalid_session_id(const std::string& session) {
  if (session.empty())
    return "the session id is empty";
  if (session.size() > max_session_id)
    return "the session id has " + std::to_string(session.size())
           + " bytes, at most " + std::to_string(max_session_id)
           + " are allowed";
  return {};
}

std::string session_key_prefix(const std::string& session) {
  std::string out;
  bytes::put_string(out, session);
  return out;
}

caf::error save_session(database& db, const session_write& write,
                        std::optional<durability> mode) {
  auto result = save_session_group(db, {write}, mode);
  if (result.refused.front())
    return std::move(result.refused.front());
  return std::move(result.failure);
}

namespace {

caf::error stale(const session_write& write, uint64_t stored) {
  return make_error(errc::stale_generation,
                    "session " + write.session + ": the write has generation "
                      + std::to_string(write.generation) + ", storage holds "
                      + std::to_string(stored));
}

/// Puts `updates` and deletes `removed` of `session` in `batch`, after
/// `status` (returned as is when it failed).
rocksdb::Status add_rows(database::impl& state, rocksdb::WriteBatch& batch,
                         const std::string& session,
                         const std::vector<session_update>& updates,
                         const std::vector<std::string>& removed,
                         rocksdb::Status status) {
  auto family = state.handle(family::session_updates);
  for (const auto& update : updates)
    if (status.ok())
      status = batch.Put(family, update_key(session, update.id),
                         encode_update(update));
  // After the puts: a row written and removed by one write ends removed.
  for (const auto& id : removed)
    if (status.ok())
      status = batch.Delete(family, update_key(session, id));
  return status;
}

rocksdb::Status add_to_batch(database::impl& state, rocksdb::WriteBatch& batch,
                             const session_write& write, uint64_t generation) {
  auto status = batch.Put(state.handle(family::sessions),
                          session_key_prefix(write.session),
                          encode_blob(write, generation));
  return add_rows(state, batch, write.session, write.updates, write.removed,
                  status);
}

} // namespace

session_group_result
save_session_group(database& db, const std::vector<session_write>& writes,
                   std::optional<durability> mode, known_generations* known) {
  session_group_result result;
  result.refused.resize(writes.size());
  // The generation each session holds once the batch lands: a second
  // write of one session in the group is checked against the first.
  std::unordered_map<std::string, uint64_t> in_group;
  result.failure = with_open_database(db, [&](database::impl& state)
                                            -> caf::error {
    rocksdb::WriteBatch batch;
    for (std::size_t i = 0; i < writes.size(); ++i) {
      const auto& write = writes[i];
      if (auto err = check_write(write)) {
        result.refused[i] = std::move(err);
        continue;
      }
      std::optional<uint64_t> stored;
      if (auto i = in_group.find(write.session); i != in_group.end()) {
        stored = i->second;
      } else if (known != nullptr && known->count(write.session) > 0) {
        stored = known->at(write.session);
      } else {
        auto head = read_head(state, write.session);
        if (!head)
          return std::move(head.error());
        if (*head)
          stored = (*head)->generation;
      }
      auto generation = write.generation;
      if (write.generation_from_storage)
        generation = stored.value_or(0);
      if (stored && generation < *stored) {
        result.refused[i] = stale(write, *stored);
        continue;
      }
      if (auto status = add_to_batch(state, batch, write, generation);
          !status.ok())
        return to_error(status, "building the session batch");
      in_group[write.session] = generation;
    }
    if (batch.Count() == 0)
      return caf::none;
    result.written = true;
    return to_error(state.write(mode, &batch),
                    "writing the session batch");
  });
  if (known != nullptr) {
    // A failed batch may or may not have landed: its sessions are read
    // again next time.
    for (const auto& [session, generation] : in_group)
      if (result.failure)
        known->erase(session);
      else
        (*known)[session] = generation;
  }
  return result;
}

caf::error erase_session(database& db, const std::string& session,
                         std::optional<uint64_t> tombstone,
                         std::optional<durability> mode) {
  if (auto what = invalid_session_id(session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  return with_open_database(db, [&](database::impl& state) -> caf::error {
    auto prefix = session_key_prefix(session);
    rocksdb::WriteBatch batch;
    rocksdb::Status status;
    if (tombstone) {
      auto head = read_head(state, session);
      if (!head)
        return std::move(head.error());
      auto generation = *tombstone;
      if (*head)
        generation = std::max(generation, (*head)->generation);
      status = batch.Put(state.handle(family::sessions), prefix,
                         encode_tombstone(generation));
    } else {
      status = batch.Delete(state.handle(family::sessions), prefix);
    }
    if (status.ok())
      status = batch.DeleteRange(state.handle(family::session_updates), prefix,
                                 prefix_end(prefix));
    if (!status.ok())
      return to_error(status, "building the session delete");
    return to_error(state.write(mode, &batch),
                    "deleting the session");
  });
}

caf::expected<bool> purge_tombstone(database& db, const std::string& session,
                                    uint64_t generation,
                                    std::optional<durability> mode) {
  return with_stored_head<bool>(
    db, session,
    [&](database::impl& state,
        const std::optional<stored_head>& head) -> caf::expected<bool> {
      if (!head || !head->tombstone || head->generation > generation)
        return false;
      rocksdb::WriteBatch batch;
      auto status = batch.Delete(state.handle(family::sessions),
                                 session_key_prefix(session));
      if (!status.ok())
        return to_error(status, "building the tombstone purge");
      if (auto err = to_error(state.write(mode, &batch),
                              "purging the tombstone"))
        return err;
      return true;
    });
}

namespace {

/// Every update row of `session`, by timestamp, then id.
caf::error load_rows(database::impl& state, const std::string& session,
                     std::vector<session_update>& rows) {
  auto prefix = session_key_prefix(session);
  auto end = prefix_end(prefix);
  rocksdb::Slice upper{end};
  rocksdb::ReadOptions options;
  options.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it{
    state.db->NewIterator(options, state.handle(family::session_updates))};
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    session_update update;
    auto key = it->key();
    update.id.assign(key.data() + prefix.size(), key.size() - prefix.size());
    if (!decode_update({it->value().data(), it->value().size()}, update))
      return make_error(errc::corrupt_record, "undecodable update row "
                                                + update.id + " of session "
                                                + session);
    rows.push_back(std::move(update));
  }
  if (auto err = to_error(it->status(), "scanning the session's updates"))
    return err;
  std::sort(rows.begin(), rows.end(),
            [](const session_update& x, const session_update& y) {
              return std::tie(x.timestamp, x.id) < std::tie(y.timestamp, y.id);
            });
  return caf::none;
}

} // namespace

caf::expected<session_record> load_session(database& db,
                                           const std::string& session) {
  using result_type = caf::expected<session_record>;
  if (auto what = invalid_session_id(session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  return with_open_database(db, [&](database::impl& state) -> result_type {
    std::string value;
    stored_head head;
    auto found = read_stored(state, session, value, head);
    if (!found)
      return std::move(found.error());
    if (!*found)
      return make_error(errc::not_found, "no session " + session);
    if (head.tombstone)
      return make_error(errc::not_found, "session " + session + " was deleted");
    if (head.empty)
      return make_error(errc::not_found, "no session " + session);
    session_record record;
    record.blob.assign(value, head.blob_offset, std::string::npos);
    if (auto err = load_rows(state, session, record.updates))
      return err;
    return record;
  });
}

caf::expected<std::optional<uint64_t>>
stored_generation(database& db, const std::string& session) {
  using generation = std::optional<uint64_t>;
  return with_stored_head<generation>(
    db, session,
    [](database::impl&, const std::optional<stored_head>& head)
      -> caf::expected<generation> {
      if (!head)
        return generation{};
      return generation{head->generation};
    });
}

// -- replicas ------------------------------------------------------------------

namespace {

std::string encode_replica_value(const session_version& v,
                                 const std::string& blob) {
  std::string out;
  out.reserve(1 + 4 * 8 + 1 + 4 + v.claimant.size() + blob.size());
  out.push_back(static_cast<char>(replica_format));
  bytes::put_u64_be(out, v.generation);
  bytes::put_u64_be(out, v.promised);
  bytes::put_u64_be(out, v.ballot);
  bytes::put_u64_be(out, v.seq);
  out.push_back(static_cast<char>(v.content));
  bytes::put_string(out, v.claimant);
  if (v.content == static_cast<uint8_t>(session_content::blob))
    out += blob;
  return out;
}

/// What a replica holds of one session: its version and its blob.
struct replica_state {
  session_version version;
  std::string blob;
};

caf::expected<replica_state> read_replica(database::impl& state,
                                          const std::string& session) {
  std::string value;
  stored_head head;
  auto found = read_stored(state, session, value, head);
  if (!found)
    return std::move(found.error());
  replica_state result;
  if (!*found)
    return result;
  result.version = head.version;
  if (!head.tombstone && !head.empty)
    result.blob.assign(value, head.blob_offset, std::string::npos);
  return result;
}

replica_answer answer(replica_outcome outcome, const session_version& v) {
  return replica_answer{static_cast<uint8_t>(outcome), v};
}

/// Removes every update row of `session` in `batch`.
rocksdb::Status clear_rows(database::impl& state, rocksdb::WriteBatch& batch,
                           const std::string& session) {
  auto prefix = session_key_prefix(session);
  return batch.DeleteRange(state.handle(family::session_updates), prefix,
                           prefix_end(prefix));
}

/// `f(state, replica)` for a valid session id; `f` returns the answer and
/// fills `batch`, written with `mode` when it holds anything.
template <class F>
caf::expected<replica_answer>
change_replica(database& db, const std::string& session,
               std::optional<durability> mode, F f) {
  using result_type = caf::expected<replica_answer>;
  if (auto what = invalid_session_id(session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  return with_open_database(db, [&](database::impl& state) -> result_type {
    auto replica = read_replica(state, session);
    if (!replica)
      return std::move(replica.error());
    rocksdb::WriteBatch batch;
    auto result = f(state, *replica, batch);
    if (!result || batch.Count() == 0)
      return result;
    if (auto err = to_error(state.write(mode, &batch),
                            "writing the session replica"))
      return err;
    return result;
  });
}

/// Checks a delta against what the replica holds (the stored version or an
/// earlier delta of the same group); none when it applies.
std::optional<replica_outcome> refusal(const session_delta& delta,
                                       const session_version& v) {
  if (delta.ballot < v.promised)
    return replica_outcome::preempted;
  if (!delta.erase && delta.generation < v.generation)
    return replica_outcome::stale;
  if (v.ballot != delta.base_ballot || v.seq != delta.base_seq)
    return replica_outcome::out_of_sync;
  return std::nullopt;
}

/// The version after `delta` applied on `v`.
session_version applied(const session_delta& delta, session_version v) {
  if (delta.generation > v.generation) {
    // The claim of this generation did not reach this replica (it is on a
    // majority, so a coordinator's prepare still finds it elsewhere).
    v.generation = delta.generation;
    v.claimant.clear();
  }
  v.promised = std::max(v.promised, delta.ballot);
  v.ballot = delta.ballot;
  v.seq = delta.base_seq + 1;
  v.content = static_cast<uint8_t>(delta.erase ? session_content::deleted
                                               : session_content::blob);
  return v;
}

rocksdb::Status add_delta(database::impl& state, rocksdb::WriteBatch& batch,
                          const session_delta& delta,
                          const session_version& after) {
  auto key = session_key_prefix(delta.session);
  auto status = batch.Put(state.handle(family::sessions), key,
                          encode_replica_value(after, delta.blob));
  if (delta.erase) {
    if (status.ok())
      status = clear_rows(state, batch, delta.session);
    return status;
  }
  return add_rows(state, batch, delta.session, delta.updates, delta.removed,
                  status);
}

/// The version `known` holds for `session`, if any.
const session_version* version_in(const known_versions* known,
                                  const std::string& session) {
  if (known == nullptr)
    return nullptr;
  auto i = known->find(session);
  return i != known->end() ? &i->second : nullptr;
}

caf::error check_delta(const session_delta& delta) {
  session_write write;
  write.session = delta.session;
  write.updates = delta.updates;
  write.removed = delta.removed;
  return check_write(write);
}

} // namespace

caf::expected<replica_answer> replica_version(database& db,
                                              const std::string& session) {
  using result_type = caf::expected<replica_answer>;
  if (auto what = invalid_session_id(session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  return with_open_database(db, [&](database::impl& state) -> result_type {
    auto replica = read_replica(state, session);
    if (!replica)
      return std::move(replica.error());
    return answer(replica_outcome::applied, replica->version);
  });
}

caf::expected<replica_answer> replica_prepare(database& db,
                                              const std::string& session,
                                              uint64_t ballot,
                                              std::optional<durability> mode) {
  return change_replica(
    db, session, mode,
    [&](database::impl& state, replica_state& replica,
        rocksdb::WriteBatch& batch) -> caf::expected<replica_answer> {
      auto& v = replica.version;
      if (ballot < v.promised)
        return answer(replica_outcome::preempted, v);
      if (ballot > v.promised) {
        v.promised = ballot;
        auto status = batch.Put(state.handle(family::sessions),
                                session_key_prefix(session),
                                encode_replica_value(v, replica.blob));
        if (!status.ok())
          return to_error(status, "building the promise");
      }
      return answer(replica_outcome::applied, v);
    });
}

caf::expected<replica_answer>
replica_claim(database& db, const std::string& session, uint64_t ballot,
              uint64_t generation, const std::string& claimant,
              std::optional<durability> mode) {
  return change_replica(
    db, session, mode,
    [&](database::impl& state, replica_state& replica,
        rocksdb::WriteBatch& batch) -> caf::expected<replica_answer> {
      auto& v = replica.version;
      if (ballot < v.promised)
        return answer(replica_outcome::preempted, v);
      if (generation < v.generation
          || (generation == v.generation && !v.claimant.empty()
              && v.claimant != claimant))
        return answer(replica_outcome::stale, v);
      if (generation == v.generation && v.claimant == claimant
          && ballot == v.promised)
        return answer(replica_outcome::applied, v); // a retry
      v.generation = generation;
      v.claimant = claimant;
      v.promised = ballot;
      auto status = batch.Put(state.handle(family::sessions),
                              session_key_prefix(session),
                              encode_replica_value(v, replica.blob));
      if (!status.ok())
        return to_error(status, "building the claim");
      return answer(replica_outcome::applied, v);
    });
}

replica_group_result
replica_apply_group(database& db, const std::vector<session_delta>& deltas,
                    std::optional<durability> mode, known_versions* known) {
  replica_group_result result;
  result.answers.reserve(deltas.size());
  // What each session holds once the batch lands, for a later delta of
  // the same session in the group.
  std::unordered_map<std::string, replica_state> in_group;
  result.failure = with_open_database(db, [&](database::impl& state)
                                            -> caf::error {
    rocksdb::WriteBatch batch;
    for (std::size_t i = 0; i < deltas.size(); ++i) {
      const auto& delta = deltas[i];
      if (auto err = check_delta(delta)) {
        result.answers.emplace_back(std::move(err));
        continue;
      }
      auto j = in_group.find(delta.session);
      if (j == in_group.end()) {
        replica_state held;
        if (auto cached = version_in(known, delta.session)) {
          // The blob is not needed: a delta carries the whole new one.
          held.version = *cached;
        } else {
          auto replica = read_replica(state, delta.session);
          if (!replica)
            return std::move(replica.error());
          held = std::move(*replica);
        }
        j = in_group.emplace(delta.session, std::move(held)).first;
      }
      auto& current = j->second.version;
      if (auto outcome = refusal(delta, current)) {
        result.answers.emplace_back(answer(*outcome, current));
        continue;
      }
      auto after = applied(delta, current);
      if (auto status = add_delta(state, batch, delta, after); !status.ok())
        return to_error(status, "building the replica batch");
      current = after;
      result.answers.emplace_back(answer(replica_outcome::applied, after));
    }
    if (batch.Count() == 0)
      return caf::none;
    result.written = true;
    return to_error(state.write(mode, &batch), "writing the replica batch");
  });
  if (known != nullptr) {
    // A failed batch may or may not have landed: its sessions are read
    // again next time.
    for (auto& [session, held] : in_group)
      if (result.failure)
        known->erase(session);
      else
        (*known)[session] = held.version;
  }
  return result;
}

caf::expected<replica_answer> replica_install(database& db, uint64_t ballot,
                                              const session_image& image,
                                              std::optional<durability> mode) {
  return change_replica(
    db, image.session, mode,
    [&](database::impl& state, replica_state& replica,
        rocksdb::WriteBatch& batch) -> caf::expected<replica_answer> {
      auto& v = replica.version;
      if (ballot != repair_ballot && ballot < v.promised)
        return answer(replica_outcome::preempted, v);
      const auto& x = image.version;
      session_version after = v;
      auto raises_floor
        = x.generation > v.generation
          || (x.generation == v.generation && v.claimant.empty()
              && !x.claimant.empty());
      if (raises_floor) {
        after.generation = x.generation;
        after.claimant = x.claimant;
      }
      if (!newer_content(x, v)) {
        if (!raises_floor)
          return answer(replica_outcome::applied, v);
        // A claim this replica missed: the floor alone moves.
        auto status = batch.Put(state.handle(family::sessions),
                                session_key_prefix(image.session),
                                encode_replica_value(after, replica.blob));
        if (!status.ok())
          return to_error(status, "building the floor's repair");
        return answer(replica_outcome::applied, after);
      }
      after.promised = std::max(v.promised, ballot);
      after.ballot = x.ballot;
      after.seq = x.seq;
      after.content = x.content;
      auto status = batch.Put(state.handle(family::sessions),
                              session_key_prefix(image.session),
                              encode_replica_value(after, image.record.blob));
      if (status.ok())
        status = clear_rows(state, batch, image.session);
      if (x.content == static_cast<uint8_t>(session_content::blob))
        status = add_rows(state, batch, image.session, image.record.updates,
                          {}, status);
      if (!status.ok())
        return to_error(status, "building the install");
      return answer(replica_outcome::applied, after);
    });
}

caf::expected<session_image> replica_image(database& db,
                                           const std::string& session) {
  using result_type = caf::expected<session_image>;
  if (auto what = invalid_session_id(session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  return with_open_database(db, [&](database::impl& state) -> result_type {
    auto replica = read_replica(state, session);
    if (!replica)
      return std::move(replica.error());
    session_image image;
    image.session = session;
    image.version = replica->version;
    if (image.version.content
        == static_cast<uint8_t>(session_content::blob)) {
      image.record.blob = std::move(replica->blob);
      if (auto err = load_rows(state, session, image.record.updates))
        return err;
    }
    return image;
  });
}

caf::expected<replica_answer>
replica_drop(database& db, const std::string& session,
             const session_version& expected) {
  return change_replica(
    db, session, std::nullopt,
    [&](database::impl& state, replica_state& replica,
        rocksdb::WriteBatch& batch) -> caf::expected<replica_answer> {
      const auto& v = replica.version;
      if (v.generation != expected.generation
          || v.claimant != expected.claimant
          || v.promised != expected.promised || v.ballot != expected.ballot
          || v.seq != expected.seq || v.content != expected.content)
        return answer(replica_outcome::out_of_sync, v);
      auto status = batch.Delete(state.handle(family::sessions),
                                 session_key_prefix(session));
      if (status.ok())
        status = clear_rows(state, batch, session);
      if (!status.ok())
        return to_error(status, "building the drop");
      return answer(replica_outcome::applied, session_version{});
    });
}

caf::error
scan_session_versions(database& db,
                      const std::function<void(session_listing&&)>& visit) {
  return with_open_database(db, [&](database::impl& state) -> caf::error {
    rocksdb::ReadOptions options;
    // A full scan should not push the hot rows out of the block cache.
    options.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it{
      state.db->NewIterator(options, state.handle(family::sessions))};
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      session_listing listing;
      bytes::reader key{{it->key().data(), it->key().size()}};
      stored_head head;
      if (!key.string(listing.session) || !key.at_end()
          || !decode_head({it->value().data(), it->value().size()}, head))
        return make_error(errc::corrupt_record,
                          "undecodable session value during a scan");
      listing.version = head.version;
      visit(std::move(listing));
    }
    return to_error(it->status(), "scanning the sessions");
  });
}

} // namespace coalesce::storage
