#include "storage/fault_injection.hpp"

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
    if (fail_append())
      return injected(*switches_, "append to " + name_);
    return target()->Append(data, options, dbg);
  }

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (fail_append())
      return injected(*switches_, "append to " + name_);
    return target()->Append(data, options, info, dbg);
  }

  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    if (wal_ && switches_->wal_sync)
      return injected(*switches_, "sync of " + name_);
    return count_wal_sync(target()->Sync(options, dbg));
  }

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (wal_ && switches_->wal_sync)
      return injected(*switches_, "fsync of " + name_);
    return count_wal_sync(target()->Fsync(options, dbg));
  }

private:
  rocksdb::IOStatus count_wal_sync(rocksdb::IOStatus status) {
    if (wal_ && status.ok())
      switches_->wal_syncs += 1;
    return status;
  }

  bool fail_append() const {
    return (wal_ && switches_->wal_append) || (sst_ && switches_->sst_append);
  }

  std::string name_;
  bool wal_;
  bool sst_;
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
    std::unique_ptr<rocksdb::FSWritableFile> file;
    auto status = target()->NewWritableFile(name, options, &file, dbg);
    if (status.ok())
      result->reset(new faulty_file(std::move(file), name, switches_));
    return status;
  }

private:
  std::shared_ptr<fault_switches> switches_;
};

} // namespace

std::shared_ptr<rocksdb::FileSystem>
make_fault_injecting_file_system(std::shared_ptr<fault_switches> switches) {
  return std::make_shared<faulty_file_system>(std::move(switches));
}

} // namespace coalesce::storage
