#include <coalesce/node/build_info.hpp>

// Rewritten at every build when the commit changes: only this file
// recompiles then.
#include "build_stamp.hpp"

namespace coalesce {

const char* build_version() {
  return COALESCE_VERSION;
}

const char* build_commit() {
  return COALESCE_COMMIT;
}

} // namespace coalesce
