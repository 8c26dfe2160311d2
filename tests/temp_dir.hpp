#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace coalesce::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
/// when the object goes away: one per test, so no test sees another's data.
class temp_dir {
public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string{base != nullptr ? base : "/tmp"}
                          + "/coalesce-test-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }

  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  const std::string& path() const {
    return path_;
  }

  std::string sub(const std::string& name) const {
    return path_ + "/" + name;
  }

private:
  std::string path_;
};

} // namespace coalesce::test
