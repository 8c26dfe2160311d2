#include <coalesce/storage/ldb_tool.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include <rocksdb/ldb_tool.h>
#include <rocksdb/options.h>

#include <coalesce/storage/families.hpp>

namespace coalesce::storage {

int run_ldb(int argc, char** argv) {
  // ldb opens a directory with the options its OPTIONS file names (its
  // default, `--try_load_options`): the secrets' merge operator and
  // compaction filter are created by those names. Without that file's
  // options ldb puts its string-append operator on every family (RocksDB
  // 7.8 ignores the families LDBTool is handed), so that is refused.
  for (int i = 1; i < argc; ++i) {
    std::string arg{argv[i]};
    std::transform(arg.begin(), arg.end(), arg.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (arg == "--try_load_options=false") {
      std::fprintf(stderr,
                   "coalesce-ldb: --try_load_options=false would read the "
                   "secrets without their merge operator; leave it out\n");
      return 1;
    }
  }
  register_family_options_by_name();
  rocksdb::LDBOptions tool;
  tool.print_help_header
    = "coalesce-ldb: RocksDB's ldb over a coalesce node's data directory "
      "(stopped), with coalesce's secrets merge operator and compaction "
      "filter. Families: default (the format version, the clean-stop mark, "
      "the cluster list), secrets, timeline, sessions, session_updates";
  // `Run` exits the process with the command's status.
  rocksdb::LDBTool{}.Run(argc, argv, rocksdb::Options{}, tool);
  return 0;
}

} // namespace coalesce::storage
