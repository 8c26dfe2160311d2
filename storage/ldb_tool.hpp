#pragma once

/// coalesce-ldb: RocksDB's own `ldb` (its `LDBTool`) over a node's data
/// directory with the options the node opens it with: every family of
/// `known_families()` (storage/families.hpp) with its own merge operator
/// and compaction filter, so that `scan`, `get` and `dump` show a secret's
/// merged value and `compact` merges and filters as the node would. Stock
/// `ldb` knows none of them: it merges a recaptured secret's operands with
/// its string-append operator, and its `compact` writes that concatenation
/// back for good.
namespace coalesce::storage {

/// Runs one ldb command (`argv` as `ldb` takes it: `--db=DIR COMMAND
/// ...`); returns its exit status.
int run_ldb(int argc, char** argv);

} // namespace coalesce::storage
