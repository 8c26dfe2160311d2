#pragma once

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include <stdlib.h>

#include <coalesce/storage/database.hpp>

namespace coalesce::bench {

/// A fresh database directory, removed afterwards.
class fresh_db {
public:
  explicit fresh_db(const std::string& base) {
    std::string pattern = base + "/coalesce-bench-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::exit(EXIT_FAILURE);
    }
    path_ = pattern;
    auto opened = storage::database::open({path_ + "/db",
                                           storage::durability::synced});
    if (!opened) {
      std::cerr << "cannot open " << path_ << ": " << to_string(opened.error())
                << '\n';
      std::exit(EXIT_FAILURE);
    }
    db = std::move(*opened);
  }

  ~fresh_db() {
    static_cast<void>(db->close());
    db.reset();
    std::string cmd = "rm -rf '" + path_ + "'";
    static_cast<void>(std::system(cmd.c_str()));
  }

  std::shared_ptr<storage::database> db;

private:
  std::string path_;
};

} // namespace coalesce::bench
