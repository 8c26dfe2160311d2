#!/usr/bin/env bash
# examples/embedded built the way an application would build it: coalesce
# installed into a temporary prefix, the example configured and built out
# of tree against that package alone, then run with the services in
# process and against a real node on 127.0.0.1.
#   COALESCE_BUILD_DIR=BUILD tests/app/embedded_example.sh BIN_DIR [TEST_NAME_REGEX]
# (BUILD defaults to BIN_DIR's parent). The last line is "N passed, M failed".
set -u
BUILD_DIR="$(cd "${COALESCE_BUILD_DIR:-${1:?usage: embedded_example.sh BIN_DIR [FILTER]}/..}" && pwd)"
source "$(dirname "$0")/process_helpers.sh"

test_the_example_builds_against_the_installed_package_and_runs() {
  local prefix="$WORK/prefix"
  check "cmake --install into a temporary prefix" \
    cmake --install "$BUILD_DIR" --prefix "$prefix" >"$WORK/install.log" 2>&1 \
    || { cat "$WORK/install.log" >&2; return; }
  check "only coalesce/ lands on the include path" \
    [ "$(ls "$prefix/include")" = "coalesce" ]
  check "the package config is installed" \
    [ -f "$prefix/lib/cmake/coalesce/coalesce-config.cmake" ]
  check "the example configures against the package" \
    cmake -S "$ROOT/examples/embedded" -B "$WORK/example" \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log" >&2; return; }
  check "and builds" cmake --build "$WORK/example" -j2 \
    >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; return; }
  start_node example || { CURRENT_OK=0; return; }
  "$WORK/example/embedded" "$WORK/embedded.db" 127.0.0.1 "$PORT" \
    >"$WORK/example.out" 2>&1
  local rc=$?
  check "the example exits 0 (got $rc: $(cat "$WORK/example.out"))" [ "$rc" = 0 ]
  check "in process: the secret is read back" \
    grep -q "in-process: secret m2 found" "$WORK/example.out"
  check "in process: the backfill reaches the start with every event" \
    grep -q "in-process: backfill reached_timeline_start, 3 events" "$WORK/example.out"
  check "remote: the secret is read back" \
    grep -q "remote: secret m2 found" "$WORK/example.out"
  check "remote: the backfill reaches the start with every event" \
    grep -q "remote: backfill reached_timeline_start, 3 events" "$WORK/example.out"
  cli secret get family@g.us bob@s.whatsapp.net m2 >"$WORK/cli.out" 2>&1
  check "the node holds what the example queued remotely" \
    grep -q "^$(printf '2a%.0s' $(seq 1 32)) 1700000001$" "$WORK/cli.out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

run_test "the example builds against the installed package and runs"

finish_tests
