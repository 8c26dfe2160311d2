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
  uint64_t generation = 0;
};

bool decode_head(std::string_view value, stored_head& head) {
  bytes::reader in{value};
  uint8_t format = 0;
  if (!in.u8(format) || (format != blob_format && format != tombstone_format)
      || !in.u64_be(head.generation))
    return false;
  head.tombstone = format == tombstone_format;
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

rocksdb::Status add_to_batch(database::impl& state, rocksdb::WriteBatch& batch,
                             const session_write& write, uint64_t generation) {
  auto updates = state.handle(family::session_updates);
  auto status = batch.Put(state.handle(family::sessions),
                          session_key_prefix(write.session),
                          encode_blob(write, generation));
  for (const auto& update : write.updates)
    if (status.ok())
      status = batch.Put(updates, update_key(write.session, update.id),
                         encode_update(update));
  // After the puts: a row written and removed by one write ends removed.
  for (const auto& id : write.removed)
    if (status.ok())
      status = batch.Delete(updates, update_key(write.session, id));
  return status;
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

caf::expected<session_record> load_session(database& db,
                                           const std::string& session) {
  using result_type = caf::expected<session_record>;
  if (auto what = invalid_session_id(session); !what.empty())
    return make_error(errc::invalid_request, std::move(what));
  return with_open_database(db, [&](database::impl& state) -> result_type {
    auto prefix = session_key_prefix(session);
    std::string value;
    stored_head head;
    auto found = read_stored(state, session, value, head);
    if (!found)
      return std::move(found.error());
    if (!*found)
      return make_error(errc::not_found, "no session " + session);
    if (head.tombstone)
      return make_error(errc::not_found, "session " + session + " was deleted");
    session_record record;
    record.blob.assign(value, head_size, std::string::npos);
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
      record.updates.push_back(std::move(update));
    }
    if (auto err = to_error(it->status(), "scanning the session's updates"))
      return err;
    std::sort(record.updates.begin(), record.updates.end(),
              [](const session_update& x, const session_update& y) {
                return std::tie(x.timestamp, x.id) < std::tie(y.timestamp, y.id);
              });
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

} // namespace coalesce::storage
