#include <coalesce/storage/fault_injection.hpp>

#include <optional>
#include <string>

#include <rocksdb/file_system.h>

namespace coalesce::storage {

namespace {

bool ends_with(const std::string& x, const std::string& suffix) {
  return x.size() >= suffix.size()
         && x.compare(x.size() - suffix.size(), suffix.size(), suffix) == 0;
}

rocksdb::IOStatus injected(fault_switches& switches, const std::string& what) {
  switches.injected += 1;
  switch (static_cast<fault_kind>(switches.kind.load())) {
    case fault_kind::enospc:
      return rocksdb::IOStatus::NoSpace("injected ENOSPC: " + what);
    case fault_kind::retryable: {
      auto status = rocksdb::IOStatus::IOError("injected retryable: " + what);
      status.SetRetryable(true);
      return status;
    }
    case fault_kind::eio:
      break;
  }
  return rocksdb::IOStatus::IOError("injected EIO: " + what);
}

/// What a full disk answers, as RocksDB's POSIX file system reports ENOSPC.
rocksdb::IOStatus no_space(fault_switches& switches, const std::string& what) {
  switches.injected += 1;
  return rocksdb::IOStatus::NoSpace("injected full disk: " + what);
}

/// ENOSPC while the disk is full, else nothing.
std::optional<rocksdb::IOStatus> when_full(fault_switches& switches,
                                           const std::string& what) {
  if (switches.disk_full)
    return no_space(switches, what);
  return std::nullopt;
}

class faulty_file : public rocksdb::FSWritableFileOwnerWrapper {
public:
  faulty_file(std::unique_ptr<rocksdb::FSWritableFile>&& file, std::string name,
              std::shared_ptr<fault_switches> switches)
    : FSWritableFileOwnerWrapper(std::move(file)),
      name_(std::move(name)),
      wal_(ends_with(name_, ".log")),
      sst_(ends_with(name_, ".sst")),
      switches_(std::move(switches)) {
    // nop
  }

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (auto fault = append_fault(data.size()))
      return *fault;
    return target()->Append(data, options, dbg);
  }

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (auto fault = append_fault(data.size()))
      return *fault;
    return target()->Append(data, options, info, dbg);
  }

  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    if (auto fault = append_fault(data.size()))
      return *fault;
    return target()->PositionedAppend(data, offset, options, dbg);
  }

  rocksdb::IOStatus
  PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                   const rocksdb::IOOptions& options,
                   const rocksdb::DataVerificationInfo& info,
                   rocksdb::IODebugContext* dbg) override {
    if (auto fault = append_fault(data.size()))
      return *fault;
    return target()->PositionedAppend(data, offset, options, info, dbg);
  }

  rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "flush of " + name_))
      return *full;
    return target()->Flush(options, dbg);
  }

  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    if (auto fault = sync_fault("sync of "))
      return *fault;
    return count_wal_sync(target()->Sync(options, dbg));
  }

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (auto fault = sync_fault("fsync of "))
      return *fault;
    return count_wal_sync(target()->Fsync(options, dbg));
  }

  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "range sync of " + name_))
      return *full;
    return target()->RangeSync(offset, nbytes, options, dbg);
  }

  rocksdb::IOStatus Allocate(uint64_t offset, uint64_t len,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "allocate in " + name_))
      return *full;
    return target()->Allocate(offset, len, options, dbg);
  }

private:
  rocksdb::IOStatus count_wal_sync(rocksdb::IOStatus status) {
    if (wal_ && status.ok())
      switches_->wal_syncs += 1;
    return status;
  }

  std::optional<rocksdb::IOStatus> append_fault(size_t bytes) const {
    if ((wal_ && switches_->wal_append) || (sst_ && switches_->sst_append))
      return injected(*switches_, "append to " + name_);
    if (!switches_->disk_full && switches_->space_left >= 0) {
      auto needed = static_cast<long long>(bytes);
      if (switches_->space_left.fetch_sub(needed) < needed)
        switches_->disk_full = true;
    }
    if (auto full = when_full(*switches_, "append to " + name_))
      return *full;
    return std::nullopt;
  }

  std::optional<rocksdb::IOStatus> sync_fault(const char* what) const {
    if (wal_ && switches_->wal_sync)
      return injected(*switches_, what + name_);
    if (auto full = when_full(*switches_, what + name_))
      return *full;
    return std::nullopt;
  }

  std::string name_;
  bool wal_;
  bool sst_;
  std::shared_ptr<fault_switches> switches_;
};

class faulty_random_rw_file : public rocksdb::FSRandomRWFileOwnerWrapper {
public:
  faulty_random_rw_file(std::unique_ptr<rocksdb::FSRandomRWFile>&& file,
                        std::string name,
                        std::shared_ptr<fault_switches> switches)
    : FSRandomRWFileOwnerWrapper(std::move(file)),
      name_(std::move(name)),
      switches_(std::move(switches)) {
    // nop
  }

  rocksdb::IOStatus Write(uint64_t offset, const rocksdb::Slice& data,
                          const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "write to " + name_))
      return *full;
    return target()->Write(offset, data, options, dbg);
  }

  rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "flush of " + name_))
      return *full;
    return target()->Flush(options, dbg);
  }

  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "sync of " + name_))
      return *full;
    return target()->Sync(options, dbg);
  }

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "fsync of " + name_))
      return *full;
    return target()->Fsync(options, dbg);
  }

private:
  std::string name_;
  std::shared_ptr<fault_switches> switches_;
};

class faulty_file_system : public rocksdb::FileSystemWrapper {
public:
  explicit faulty_file_system(std::shared_ptr<fault_switches> switches)
    : FileSystemWrapper(rocksdb::FileSystem::Default()),
      switches_(std::move(switches)) {
    // nop
  }

  const char* Name() const override {
    return "coalesce.fault_injecting_file_system";
  }

  rocksdb::IOStatus
  NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                  std::unique_ptr<rocksdb::FSWritableFile>* result,
                  rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "creating " + name))
      return *full;
    return wrap(target()->NewWritableFile(name, options, result, dbg), name,
                result);
  }

  rocksdb::IOStatus
  ReopenWritableFile(const std::string& name,
                     const rocksdb::FileOptions& options,
                     std::unique_ptr<rocksdb::FSWritableFile>* result,
                     rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "reopening " + name))
      return *full;
    return wrap(target()->ReopenWritableFile(name, options, result, dbg), name,
                result);
  }

  rocksdb::IOStatus
  ReuseWritableFile(const std::string& name, const std::string& old_name,
                    const rocksdb::FileOptions& options,
                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                    rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "reusing " + old_name + " as " + name))
      return *full;
    return wrap(target()->ReuseWritableFile(name, old_name, options, result,
                                            dbg),
                name, result);
  }

  rocksdb::IOStatus
  NewRandomRWFile(const std::string& name, const rocksdb::FileOptions& options,
                  std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                  rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "creating " + name))
      return *full;
    auto status = target()->NewRandomRWFile(name, options, result, dbg);
    if (status.ok())
      result->reset(
        new faulty_random_rw_file(std::move(*result), name, switches_));
    return status;
  }

  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "renaming " + from + " to " + to))
      return *full;
    return target()->RenameFile(from, to, options, dbg);
  }

  rocksdb::IOStatus LinkFile(const std::string& from, const std::string& to,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "linking " + from + " to " + to))
      return *full;
    return target()->LinkFile(from, to, options, dbg);
  }

  rocksdb::IOStatus CreateDir(const std::string& name,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (auto full = when_full(*switches_, "creating directory " + name))
      return *full;
    return target()->CreateDir(name, options, dbg);
  }

  rocksdb::IOStatus CreateDirIfMissing(const std::string& name,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override {
    // An existing directory needs no space, on a full disk too.
    if (switches_->disk_full && !target()->FileExists(name, options, dbg).ok())
      return no_space(*switches_, "creating directory " + name);
    return target()->CreateDirIfMissing(name, options, dbg);
  }

private:
  rocksdb::IOStatus wrap(rocksdb::IOStatus status, const std::string& name,
                         std::unique_ptr<rocksdb::FSWritableFile>* result) {
    if (status.ok())
      result->reset(new faulty_file(std::move(*result), name, switches_));
    return status;
  }

  std::shared_ptr<fault_switches> switches_;
};

} // namespace

std::shared_ptr<rocksdb::FileSystem>
make_fault_injecting_file_system(std::shared_ptr<fault_switches> switches) {
  return std::make_shared<faulty_file_system>(std::move(switches));
}

} // namespace coalesce::storage
