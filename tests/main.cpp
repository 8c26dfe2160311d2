// The runner of coalesce-test: every suite in tests/ links into this binary,
// and CTest runs each suite on its own with `-s "^suite$"`.
#define CAF_SUITE coalesce
#include <caf/test/unit_test_impl.hpp>
