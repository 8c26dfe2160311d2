#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <coalesce/storage/fault_injection.hpp>

/// TEST SEAM of the test build of the node (coalesce-node-faulty), never in
/// coalesce-node: switches the fault-injecting file system from a control
/// file, so process tests can fail the disk of a running node.
///
/// The file holds words separated by white space: any of `wal_append`,
/// `wal_sync`, `sst_append` switch those faults on, `disk_full` fails every
/// write to every file with ENOSPC, `eio` (default),
/// `enospc` or `retryable` choose their kind; an empty or missing file
/// clears every fault. It is read every 50 ms.
namespace coalesce {

class fault_control {
public:
  fault_control(std::string path,
                std::shared_ptr<storage::fault_switches> switches);

  fault_control(const fault_control&) = delete;
  fault_control& operator=(const fault_control&) = delete;

  ~fault_control();

private:
  void apply(const std::string& text);

  std::string path_;
  std::shared_ptr<storage::fault_switches> switches_;
  std::atomic<bool> stop_{false};
  std::thread poller_;
};

} // namespace coalesce
