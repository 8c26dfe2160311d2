// libFuzzer harness: any bytes as coalesce-node's config file, read the way
// the node reads it (load_node_config, app/node_config.hpp). Start-up is
// either accepted or refused with a sentence; reading never crashes or
// aborts, and a refusal always says something.
// Seeds: the project's own config/coalesce.ini (scripts/fuzz passes it).

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include "app/node_config.hpp"

namespace {

std::string config_path() {
  static const std::string path = [] {
    char name[] = "/tmp/coalesce-fuzz-config-XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0)
      std::abort();
    close(fd);
    return std::string{name};
  }();
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto path = config_path();
  {
    std::ofstream out{path, std::ios::binary | std::ios::trunc};
    out.write(reinterpret_cast<const char*>(data),
              static_cast<std::streamsize>(size));
  }
  std::string program = "coalesce-node";
  std::string file_flag = "--config-file=" + path;
  char* argv[] = {program.data(), file_flag.data(), nullptr};
  coalesce::node_config cfg;
  auto problem = coalesce::load_node_config(cfg, 2, argv);
  if (!problem.empty())
    return 0; // Refused, with its sentence.
  // Accepted: the settings must pass their own validation again.
  if (!cfg.settings.validate().empty())
    std::abort();
  return 0;
}
