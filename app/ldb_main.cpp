// coalesce-ldb: RocksDB's ldb with coalesce's options
// (coalesce/storage/ldb_tool.hpp says why stock ldb must not be used).

#include <coalesce/storage/ldb_tool.hpp>

int main(int argc, char** argv) {
  return coalesce::storage::run_ldb(argc, argv);
}
