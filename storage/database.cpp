#include "storage/database.hpp"

#include <algorithm>
#include <utility>

#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include "messages/errc.hpp"
#include "storage/database_impl.hpp"

namespace coalesce::storage {

namespace {

const char* const format_version_key = "coalesce/format-version";

rocksdb::ColumnFamilyOptions family_options(const std::string& name) {
  if (name == secrets_family)
    return secrets_family_options();
  // A family this build does not know (written by a newer build) is opened
  // with plain options so the database still opens; it is never written.
  return rocksdb::ColumnFamilyOptions{};
}

/// Writes the format version into a new database, refuses a newer one.
caf::error check_format_version(database::impl& state) {
  std::string stored;
  auto status = state.db->Get(rocksdb::ReadOptions{}, state.meta,
                              format_version_key, &stored);
  if (status.IsNotFound()) {
    rocksdb::WriteOptions sync_write;
    sync_write.sync = true;
    return to_error(state.db->Put(sync_write, state.meta, format_version_key,
                                  std::to_string(database_format_version)),
                    "writing the format version");
  }
  if (!status.ok())
    return to_error(status, "reading the format version");
  if (stored != std::to_string(database_format_version))
    return make_error(errc::unsupported_format,
                      "format version " + stored + " in " + state.options.path
                        + ", this build reads "
                        + std::to_string(database_format_version));
  return caf::none;
}

} // namespace

caf::error to_error(const rocksdb::Status& status, const char* what) {
  if (status.ok())
    return caf::none;
  auto code = status.IsCorruption() ? errc::corrupt_record
                                    : errc::storage_failed;
  return make_error(code, std::string{what} + ": " + status.ToString());
}

caf::expected<std::shared_ptr<database>>
database::open(const database_options& options) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;

  std::vector<std::string> names;
  auto listed = rocksdb::DB::ListColumnFamilies(db_options, options.path,
                                                &names);
  if (!listed.ok())
    names.clear(); // A new directory has no families yet.
  for (const char* wanted : {meta_family, secrets_family, timeline_family})
    if (std::find(names.begin(), names.end(), wanted) == names.end())
      names.emplace_back(wanted);

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& name : names)
    descriptors.emplace_back(name, family_options(name));

  auto state = std::make_unique<impl>();
  state->options = options;
  state->write_options.sync = options.mode == durability::synced;
  rocksdb::DB* raw = nullptr;
  auto status = rocksdb::DB::Open(db_options, options.path, descriptors,
                                  &state->families, &raw);
  if (!status.ok())
    return to_error(status, "opening the database");
  state->db.reset(raw);
  for (auto* handle : state->families) {
    if (handle->GetName() == meta_family)
      state->meta = handle;
    else if (handle->GetName() == secrets_family)
      state->secrets = handle;
    else if (handle->GetName() == timeline_family)
      state->timeline = handle;
  }
  auto result = std::make_shared<database>(std::move(state));
  if (auto err = check_format_version(result->internals()))
    return err;
  return result;
}

database::database(std::unique_ptr<impl> state) : impl_(std::move(state)) {
  // nop
}

database::~database() {
  // Deliberately ignored: a destructor cannot report, and callers that care
  // call close() and read its error.
  static_cast<void>(close());
}

caf::error database::sync_wal() {
  if (!impl_->db)
    return make_error(errc::storage_failed, "the database is closed");
  return to_error(impl_->db->SyncWAL(), "syncing the WAL");
}

caf::error database::close() {
  if (!impl_->db)
    return caf::none;
  auto sync_error = to_error(impl_->db->SyncWAL(), "syncing the WAL");
  for (auto* handle : impl_->families)
    static_cast<void>(impl_->db->DestroyColumnFamilyHandle(handle));
  impl_->families.clear();
  impl_->meta = nullptr;
  impl_->secrets = nullptr;
  impl_->timeline = nullptr;
  auto close_error = to_error(impl_->db->Close(), "closing the database");
  impl_->db.reset();
  return sync_error ? sync_error : close_error;
}

durability database::mode() const {
  return impl_->options.mode;
}

const std::string& database::path() const {
  return impl_->options.path;
}

database::impl& database::internals() {
  return *impl_;
}

} // namespace coalesce::storage
