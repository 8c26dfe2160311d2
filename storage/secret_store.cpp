#include <coalesce/storage/secret_store.hpp>

#include <memory>
#include <optional>
#include <string>

#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/utilities/object_registry.h>
#include <rocksdb/write_batch.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database_impl.hpp>
#include <coalesce/storage/secret_codec.hpp>
#include <coalesce/storage/secret_merge.hpp>

namespace coalesce::storage {

namespace {

/// Applies captures in order onto the stored row (secret_merge.hpp). No
/// partial merge: RocksDB keeps operands apart until it has the base row or
/// knows there is none, so every capture meets exactly the row it would have
/// met as a sequential write.
class secret_merge_operator : public rocksdb::MergeOperator {
public:
  bool FullMergeV2(const MergeOperationInput& in,
                   MergeOperationOutput* out) const override {
    std::optional<secret_write> row;
    if (in.existing_value != nullptr) {
      row = decode_secret_value(
        std::string_view{in.existing_value->data(), in.existing_value->size()});
      if (!row)
        return false; // Reported by RocksDB as corruption.
    }
    for (const auto& operand : in.operand_list) {
      auto capture
        = decode_secret_value(std::string_view{operand.data(), operand.size()});
      if (!capture)
        return false;
      row = apply_capture(row ? &*row : nullptr, *capture);
    }
    out->new_value = encode_secret_value(*row);
    return true;
  }

  const char* Name() const override {
    return "coalesce.secret_merge.v1";
  }
};

/// Purges full rows whose expiry has passed; keeps every merge operand (the
/// default of FilterMergeOperand) for the reason in secret_store.hpp.
class expired_secret_filter : public rocksdb::CompactionFilter {
public:
  bool Filter(int, const rocksdb::Slice&, const rocksdb::Slice& value,
              std::string*, bool*) const override {
    auto row = decode_secret_value(std::string_view{value.data(), value.size()});
    // An undecodable row is kept for an operator to look at, not erased.
    return row && is_expired(*row, unix_now());
  }

  const char* Name() const override {
    return "coalesce.expired_secret_filter.v1";
  }
};

} // namespace

namespace {

/// Why a key made of these parts names nothing; empty when it is valid.
/// Taking the parts, not a `secret_key`, spares an entry's check (twice per
/// row queued) copying them.
std::string invalid_key_parts(const std::string& chat,
                              const std::string& sender,
                              const std::string& msg_id) {
  if (chat.empty())
    return "the chat is empty";
  if (sender.empty())
    return "the sender is empty";
  if (msg_id.empty())
    return "the msg_id is empty";
  return {};
}

} // namespace

std::string invalid_secret_key(const secret_key& key) {
  return invalid_key_parts(key.chat, key.sender, key.msg_id);
}

std::string invalid_secret_entry(const secret_entry& entry) {
  if (auto what = invalid_key_parts(entry.chat, entry.sender, entry.msg_id);
      !what.empty())
    return what;
  if (entry.secret.size() != secret_size)
    return "the secret must be " + std::to_string(secret_size) + " bytes, got "
           + std::to_string(entry.secret.size());
  return {};
}

void register_family_options_by_name() {
  auto& library = *rocksdb::ObjectLibrary::Default();
  library.AddFactory<rocksdb::MergeOperator>(
    secret_merge_operator{}.Name(),
    [](const std::string&, std::unique_ptr<rocksdb::MergeOperator>* guard,
       std::string*) {
      guard->reset(new secret_merge_operator);
      return guard->get();
    });
  library.AddFactory<rocksdb::CompactionFilter>(
    expired_secret_filter{}.Name(),
    [](const std::string&, std::unique_ptr<rocksdb::CompactionFilter>*,
       std::string*) -> rocksdb::CompactionFilter* {
      // A compaction filter is shared, never owned by the options.
      static expired_secret_filter filter;
      return &filter;
    });
}

rocksdb::ColumnFamilyOptions secrets_family_options() {
  rocksdb::ColumnFamilyOptions options;
  options.merge_operator = std::make_shared<secret_merge_operator>();
  // Stateless and thread-safe, so one instance serves every compaction.
  static expired_secret_filter filter;
  options.compaction_filter = &filter;
  return options;
}

namespace {

template <class Writes>
caf::error write_all(database& db, const Writes& writes,
                     std::optional<durability> mode) {
  return with_open_database(db, [&](database::impl& state) -> caf::error {
    rocksdb::WriteBatch batch;
    for (const auto& write : writes) {
      if (auto what = invalid_secret_entry(write.entry); !what.empty())
        return make_error(errc::invalid_secret_entry, std::move(what));
      auto status = batch.Merge(state.handle(family::secrets),
                                encode_secret_key(write.entry.chat,
                                                  write.entry.sender,
                                                  write.entry.msg_id),
                                encode_secret_value(write));
      if (!status.ok())
        return to_error(status, "building the secrets batch");
    }
    return to_error(state.write(mode, &batch),
                    "writing the secrets batch");
  });
}

} // namespace

caf::error write_secrets(database& db, const std::vector<secret_write>& writes,
                         std::optional<durability> mode) {
  return write_all(db, writes, mode);
}

caf::error write_secrets(database& db, const secret_batch& writes,
                         std::optional<durability> mode) {
  return write_all(db, writes, mode);
}

caf::expected<std::vector<stored_secret>>
read_secrets(database& db, const std::vector<secret_key>& keys) {
  using result_type = caf::expected<std::vector<stored_secret>>;
  return with_open_database(db, [&](database::impl& state) -> result_type {
    std::vector<std::string> encoded;
    encoded.reserve(keys.size());
    for (const auto& key : keys)
      encoded.push_back(encode_secret_key(key));
    std::vector<rocksdb::Slice> slices(encoded.begin(), encoded.end());
    std::vector<rocksdb::ColumnFamilyHandle*> families(
      keys.size(), state.handle(family::secrets));
    std::vector<std::string> values;
    auto statuses = state.db->MultiGet(rocksdb::ReadOptions{}, families,
                                       slices, &values);
    std::vector<stored_secret> result(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (statuses[i].IsNotFound())
        continue;
      if (!statuses[i].ok())
        return to_error(statuses[i], "reading a secret");
      auto row = decode_secret_value(values[i]);
      if (!row)
        return make_error(errc::corrupt_record,
                          "undecodable secret row for message "
                            + keys[i].msg_id);
      row->entry.chat = keys[i].chat;
      row->entry.sender = keys[i].sender;
      row->entry.msg_id = keys[i].msg_id;
      result[i].found = true;
      result[i].row = std::move(*row);
    }
    return result;
  });
}

caf::expected<uint64_t> drop_secrets(database& db,
                                     const std::vector<secret_write>& compared) {
  std::vector<secret_key> keys;
  keys.reserve(compared.size());
  for (const auto& x : compared)
    keys.push_back(x.entry.key());
  auto stored = read_secrets(db, keys);
  if (!stored)
    return std::move(stored.error());
  using result_type = caf::expected<uint64_t>;
  return with_open_database(db, [&](database::impl& state) -> result_type {
    rocksdb::WriteBatch batch;
    uint64_t dropped = 0;
    for (std::size_t i = 0; i < compared.size(); ++i) {
      const auto& held = (*stored)[i];
      if (!held.found || !(held.row.entry == compared[i].entry)
          || held.row.captured_at != compared[i].captured_at)
        continue;
      auto status = batch.Delete(state.handle(family::secrets),
                                 encode_secret_key(keys[i]));
      if (!status.ok())
        return to_error(status, "building the drop of secrets");
      ++dropped;
    }
    if (dropped == 0)
      return dropped;
    if (auto err = to_error(state.write(std::nullopt, &batch),
                            "dropping secrets"))
      return err;
    return dropped;
  });
}

caf::error compact_secrets(database& db) {
  return with_open_database(db, [](database::impl& state) -> caf::error {
    auto secrets = state.handle(family::secrets);
    if (auto err = to_error(state.db->Flush(rocksdb::FlushOptions{}, secrets),
                            "flushing the secrets memtable"))
      return err;
    rocksdb::CompactRangeOptions options;
    options.bottommost_level_compaction
      = rocksdb::BottommostLevelCompaction::kForce;
    return to_error(state.db->CompactRange(options, secrets, nullptr, nullptr),
                    "compacting the secrets");
  });
}

caf::expected<uint64_t> count_secret_rows(database& db) {
  using result_type = caf::expected<uint64_t>;
  return with_open_database(db, [](database::impl& state) -> result_type {
    std::unique_ptr<rocksdb::Iterator> it{state.db->NewIterator(
      rocksdb::ReadOptions{}, state.handle(family::secrets))};
    uint64_t rows = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next())
      ++rows;
    if (auto err = to_error(it->status(), "scanning the secrets"))
      return err;
    return rows;
  });
}

caf::expected<bool> secrets_empty(database& db) {
  using result_type = caf::expected<bool>;
  return with_open_database(db, [](database::impl& state) -> result_type {
    std::unique_ptr<rocksdb::Iterator> it{state.db->NewIterator(
      rocksdb::ReadOptions{}, state.handle(family::secrets))};
    it->SeekToFirst();
    if (auto err = to_error(it->status(), "scanning the secrets"))
      return err;
    return !it->Valid();
  });
}

caf::error scan_secrets(database& db,
                        const std::function<void(const secret_write&)>& visit) {
  return with_open_database(db, [&](database::impl& state) -> caf::error {
    rocksdb::ReadOptions options;
    // A full scan should not push the hot rows out of the block cache.
    options.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it{
      state.db->NewIterator(options, state.handle(family::secrets))};
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto key = decode_secret_key(
        std::string_view{it->key().data(), it->key().size()});
      auto row = decode_secret_value(
        std::string_view{it->value().data(), it->value().size()});
      if (!key || !row)
        return make_error(errc::corrupt_record,
                          "undecodable secret row during a scan");
      row->entry.chat = std::move(key->chat);
      row->entry.sender = std::move(key->sender);
      row->entry.msg_id = std::move(key->msg_id);
      visit(*row);
    }
    return to_error(it->status(), "scanning the secrets");
  });
}

} // namespace coalesce::storage
