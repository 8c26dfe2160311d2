#include <coalesce/storage/database.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <utility>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <spdlog/spdlog.h>

#include <coalesce/messages/errc.hpp>
#include <coalesce/storage/database_impl.hpp>
#include <coalesce/storage/rocksdb_logger.hpp>

namespace coalesce::storage {

namespace {

const char* const format_version_key = "coalesce/format-version";
const char* const clean_stop_key = "coalesce/clean-stop";
const char* const cluster_list_key = "coalesce/cluster-list";

/// The row named `name`, null for a family this build does not know.
const family_spec* find_family(const std::string& name) {
  for (const auto& row : family_table)
    if (name == row.name)
      return &row;
  return nullptr;
}

rocksdb::ColumnFamilyOptions family_options(const std::string& name) {
  // A family this build does not know (written by a newer build) is opened
  // with plain options so the database still opens, and is never written.
  auto row = find_family(name);
  return row ? row->options() : plain_family_options();
}

/// Writes the format version into a new database, refuses a newer one.
caf::error check_format_version(database::impl& state) {
  std::string stored;
  auto meta = state.handle(family::meta);
  auto status = state.db->Get(rocksdb::ReadOptions{}, meta, format_version_key,
                              &stored);
  if (status.IsNotFound()) {
    return to_error(state.db->Put(state.write_options(durability::synced),
                                  meta, format_version_key,
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

rocksdb::ColumnFamilyOptions plain_family_options() {
  return rocksdb::ColumnFamilyOptions{};
}

const char* family_name(family x) {
  return family_table[static_cast<std::size_t>(x)].name;
}

caf::error to_error(const rocksdb::Status& status, const char* what) {
  if (status.ok())
    return caf::none;
  auto code = status.IsCorruption() ? errc::corrupt_record
                                    : errc::storage_failed;
  return make_error(code, std::string{what} + ": " + status.ToString());
}

namespace {

/// Records the duration of every file sync RocksDB makes. RocksDB measures
/// them itself once a listener asks for file I/O events.
class sync_listener : public rocksdb::EventListener {
public:
  explicit sync_listener(latency_recorder& recorder) : recorder_(recorder) {
    // nop
  }

  bool ShouldBeNotifiedOnFileIO() override {
    return true;
  }

  void OnFileSyncFinish(const rocksdb::FileOperationInfo& info) override {
    recorder_.record(info.duration);
  }

private:
  latency_recorder& recorder_;
};

/// Opens the RocksDB instance of `state.options` into `state`: every family
/// the directory has, plus the ones this build needs. Read-only when a
/// writable open failed during a fault, so reads keep working meanwhile.
caf::error open_into(database::impl& state, bool read_only = false) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  if (state.options.file_system)
    state.env = rocksdb::NewCompositeEnv(state.options.file_system);
  if (state.env)
    db_options.env = state.env.get();
  if (!state.info_log)
    state.info_log = make_rocksdb_logger();
  db_options.info_log = state.info_log;
  // The recorder outlives every instance: it is a member of `state`.
  db_options.listeners.push_back(
    std::make_shared<sync_listener>(state.fsync_latency));
  // No automatic resume after a retryable error: the owner reopens after
  // every failed write (see `reopen`), and a Close() while RocksDB's own
  // resume thread runs hangs in RocksDB 7.8 (measured: CloseHelper waited
  // forever with the retryable fault still present).
  db_options.max_bgerror_resume_count = 0;
  std::vector<std::string> names;
  auto listed = rocksdb::DB::ListColumnFamilies(db_options, state.options.path,
                                                &names);
  if (!listed.ok())
    names.clear(); // A new directory has no families yet.
  for (const auto& row : family_table)
    if (std::find(names.begin(), names.end(), row.name) == names.end())
      names.emplace_back(row.name);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& name : names)
    descriptors.emplace_back(name, family_options(name));
  rocksdb::DB* raw = nullptr;
  if (read_only)
    descriptors.erase(
      std::remove_if(descriptors.begin(), descriptors.end(),
                     [&](const rocksdb::ColumnFamilyDescriptor& x) {
                       return listed.ok()
                              && std::find(names.begin(), names.end(), x.name)
                                   == names.end();
                     }),
      descriptors.end());
  auto status = read_only
                  ? rocksdb::DB::OpenForReadOnly(db_options, state.options.path,
                                                 descriptors, &state.families,
                                                 &raw)
                  : rocksdb::DB::Open(db_options, state.options.path,
                                      descriptors, &state.families, &raw);
  if (!status.ok())
    return to_error(status, "opening the database");
  state.read_only = read_only;
  state.db.reset(raw);
  for (auto* handle : state.families)
    if (auto row = find_family(handle->GetName()))
      state.known[static_cast<std::size_t>(row->id)] = handle;
  return read_only ? caf::none : check_format_version(state);
}

/// Releases the handles and the instance. Close() may itself fail after a
/// fault (measured); that must not keep the instance alive, so its error is
/// only reported.
caf::error close_state(database::impl& state, bool sync_first) {
  if (!state.db)
    return caf::none;
  caf::error sync_error;
  if (sync_first)
    sync_error = to_error(state.db->SyncWAL(), "syncing the WAL");
  for (auto* handle : state.families)
    static_cast<void>(state.db->DestroyColumnFamilyHandle(handle));
  state.families.clear();
  state.known = {};
  auto close_error = to_error(state.db->Close(), "closing the database");
  state.db.reset();
  return sync_error ? sync_error : close_error;
}

} // namespace

caf::expected<std::shared_ptr<database>>
database::open(const database_options& options) {
  auto state = std::make_unique<impl>();
  state->options = options;
  if (auto err = open_into(*state)) {
    static_cast<void>(close_state(*state, false));
    return err;
  }
  return std::make_shared<database>(std::move(state));
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
  return with_open_database(*this, [](impl& state) {
    return to_error(state.db->SyncWAL(), "syncing the WAL");
  });
}

caf::error database::mark_clean_stop() {
  return with_open_database(*this, [](impl& state) {
    return to_error(state.db->Put(state.write_options(durability::synced),
                                  state.handle(family::meta), clean_stop_key,
                                  "1"),
                    "marking the clean stop");
  });
}

caf::expected<bool> database::take_clean_stop_mark() {
  using result_type = caf::expected<bool>;
  return with_open_database(*this, [](impl& state) -> result_type {
    std::string stored;
    auto meta = state.handle(family::meta);
    auto status = state.db->Get(rocksdb::ReadOptions{}, meta, clean_stop_key,
                                &stored);
    if (status.IsNotFound())
      return false;
    if (auto err = to_error(status, "reading the clean stop mark"))
      return err;
    if (auto err = to_error(state.db->Delete(
                              state.write_options(durability::synced), meta,
                              clean_stop_key),
                            "removing the clean stop mark"))
      return err;
    return true;
  });
}

caf::expected<std::string> database::stored_cluster_list() {
  using result_type = caf::expected<std::string>;
  return with_open_database(*this, [](impl& state) -> result_type {
    std::string stored;
    auto status = state.db->Get(rocksdb::ReadOptions{},
                                state.handle(family::meta), cluster_list_key,
                                &stored);
    if (status.IsNotFound())
      return std::string{};
    if (auto err = to_error(status, "reading the cluster list"))
      return err;
    return stored;
  });
}

caf::error database::store_cluster_list(const std::string& encoded) {
  return with_open_database(*this, [&encoded](impl& state) {
    return to_error(state.db->Put(state.write_options(durability::synced),
                                  state.handle(family::meta), cluster_list_key,
                                  encoded),
                    "storing the cluster list");
  });
}

caf::error database::close() {
  std::unique_lock<std::shared_mutex> owner{impl_->mutex};
  impl_->closed_by_owner = true;
  // Syncing a WAL in an error state trips an assertion in RocksDB 7.8.
  auto sync_first = !impl_->read_only
                    && impl_->current_health == health::healthy;
  return close_state(*impl_, sync_first);
}

bool database::impl::writable() const {
  return current_health == health::healthy && !read_only
         && failed_generation != generation;
}

bool database::healthy() const {
  std::shared_lock<std::shared_mutex> in_use{impl_->mutex};
  return impl_->writable();
}

caf::error database::ready_for_writes() {
  uint64_t seen = 0;
  {
    std::shared_lock<std::shared_mutex> in_use{impl_->mutex};
    if (impl_->writable())
      return caf::none;
    seen = impl_->generation;
  }
  return reopen(seen, "for writes");
}

void database::recover_after(const caf::error& failure) {
  // The write noted the instance it failed on (with_open_database): when
  // another writer has reopened since, this failure is already dealt with.
  if (failure.category() == errc_category
      && failure.code() == static_cast<uint8_t>(errc::storage_failed))
    static_cast<void>(reopen(impl_->failed_generation,
                             "after a failed write: " + to_string(failure)));
}

caf::error database::recover() {
  return reopen(generation(), "for writes");
}

caf::error database::reopen(uint64_t failed_generation,
                            const std::string& why) {
  std::unique_lock<std::shared_mutex> owner{impl_->mutex};
  auto& state = *impl_;
  if (state.closed_by_owner)
    return make_error(errc::storage_failed, "the database is closed");
  // Checked again under the exclusive lock: writers that failed on one
  // instance all ask, and only the first reopens it.
  if (state.generation != failed_generation)
    return state.outcome_of_last_reopen();
  // Always a reopen, never a wait for RocksDB's own recovery or Resume():
  // - a fatal error (EIO on the WAL) fails Resume() (measured);
  // - a retryable error would start RocksDB's resume thread, and a Close()
  //   during it hangs (measured), so that thread is off (open_into);
  // - RocksDB clears a no-space error by itself only once the disk has as
  //   much free space as its write buffers may need (64 MiB by default):
  //   on a filled 48 MiB tmpfs it never did, and Resume() answered Busy
  //   throughout (measured), so the node waited forever;
  // - a WAL writer that failed an append keeps its error even when Resume()
  //   clears the database's, and RocksDB 7.8 as Debian builds it aborts on
  //   the next append to it (measured with ENOSPC).
  // A reopen starts a fresh WAL; while the disk is still full it fails
  // (it needs a new MANIFEST, WAL and OPTIONS file), and a read-only
  // instance serves reads until the next attempt succeeds.
  ++state.reopens;
  state.set_health(health::reopening, "reopening " + why);
  if (auto err = close_state(state, false); err && !state.read_only)
    spdlog::warn("database {}: closing after a failure also failed "
                 "(reopening anyway): {}",
                 state.options.path, to_string(err));
  ++state.generation;
  if (auto err = open_into(state)) {
    static_cast<void>(close_state(state, false));
    state.set_health(health::down, "reopening failed, serving reads only: "
                                     + to_string(err));
    state.last_reopen_error = err;
    if (open_into(state, true))
      static_cast<void>(close_state(state, false));
    return err;
  }
  state.last_reopen_error = caf::none;
  state.set_health(health::healthy, "reopened");
  return caf::none;
}

caf::error database::impl::outcome_of_last_reopen() const {
  if (writable())
    return caf::none;
  if (last_reopen_error)
    return last_reopen_error;
  return make_error(errc::storage_failed,
                    "an operation failed on the reopened database");
}

void database::impl::note_failure(const caf::error& failure) {
  if (failure.category() == errc_category
      && failure.code() == static_cast<uint8_t>(errc::storage_failed))
    failed_generation = generation;
}

void database::impl::set_health(health next, const std::string& detail) {
  // A fault that persists repeats the same cycle at every retry (reopen,
  // fail, reopen): each distinct transition is logged once a minute at
  // most, repeats go to debug. File numbers are ignored when comparing.
  std::string shape = std::to_string(static_cast<int>(next)) + ":";
  for (char c : detail)
    if (c < '0' || c > '9')
      shape.push_back(c);
  auto now = std::chrono::steady_clock::now();
  auto last = logged_shapes.find(shape);
  auto level = spdlog::level::debug;
  if (last == logged_shapes.end() || now - last->second > std::chrono::minutes{1}) {
    level = spdlog::level::info;
    logged_shapes[shape] = now;
  }
  current_health = next;
  switch (next) {
    case health::healthy:
      spdlog::log(level, "database {}: healthy{}", options.path,
                  detail.empty() ? "" : " (" + detail + ")");
      break;
    case health::reopening:
    case health::down:
      spdlog::log(level == spdlog::level::info ? spdlog::level::err : level,
                  "database {}: {}", options.path, detail);
      break;
  }
}

uint64_t database::generation() const {
  std::shared_lock<std::shared_mutex> in_use{impl_->mutex};
  return impl_->generation;
}

uint64_t database::reopens() const {
  return impl_->reopens;
}

database_status database::status() const {
  std::shared_lock<std::shared_mutex> in_use{impl_->mutex};
  database_status result;
  result.state = impl_->current_health;
  result.writable = impl_->writable();
  result.read_only = impl_->read_only;
  result.generation = impl_->generation;
  result.reopens = impl_->reopens;
  return result;
}

const latency_recorder& database::write_latency() const {
  return impl_->write_latency;
}

const latency_recorder& database::fsync_latency() const {
  return impl_->fsync_latency;
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
