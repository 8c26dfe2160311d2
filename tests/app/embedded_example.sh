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

# The package installed once, for the tests below.
install_package() {
  PREFIX="$WORK/prefix"
  [ -d "$PREFIX" ] && return 0
  cmake --install "$BUILD_DIR" --prefix "$PREFIX" >"$WORK/install.log" 2>&1 \
    || { cat "$WORK/install.log" >&2; return 1; }
}

test_the_install_is_under_100_MB() {
  install_package || { CURRENT_OK=0; return; }
  local size_mb
  size_mb=$(du -sm "$PREFIX" | cut -f1)
  echo "    installed: ${size_mb} MB"
  check "the install takes ${size_mb} MB, at most 100" [ "$size_mb" -le 100 ]
  check "the installed programs carry no debug information" \
    bash -c "! readelf -S '$PREFIX/bin/coalesce-node' | grep -q debug_line"
}

# An application of the client component alone finds the package with
# RocksDB, spdlog and prometheus-cpp made unfindable.
test_a_client_only_application_needs_no_RocksDB_or_prometheus() {
  install_package || { CURRENT_OK=0; return; }
  check "the client example configures against the client component alone" \
    cmake -S "$ROOT/examples/client" -B "$WORK/client" \
      -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_DISABLE_FIND_PACKAGE_RocksDB=ON \
      -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=ON \
      -DCMAKE_DISABLE_FIND_PACKAGE_prometheus-cpp=ON \
      >"$WORK/client-configure.log" 2>&1 \
    || { cat "$WORK/client-configure.log" >&2; return; }
  check "and builds" cmake --build "$WORK/client" -j2 \
    >"$WORK/client-build.log" 2>&1 || { cat "$WORK/client-build.log" >&2; return; }
  check "it links no RocksDB" \
    bash -c "! ldd '$WORK/client/client' | grep -q rocksdb"
  start_node client || { CURRENT_OK=0; return; }
  "$WORK/client/client" 127.0.0.1 "$PORT" >"$WORK/client.out" 2>&1
  local rc=$?
  check "the client exits 0 (got $rc: $(cat "$WORK/client.out"))" [ "$rc" = 0 ]
  check "the client reads its secret back" \
    grep -q "client: secret c1 found" "$WORK/client.out"
  cli secret get client@g.us carol@s.whatsapp.net c1 >"$WORK/client-cli.out" 2>&1
  check "the node holds what the client queued" \
    grep -q "^$(printf '2b%.0s' $(seq 1 32)) 1700000002$" "$WORK/client-cli.out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

# Every installed header is a translation unit of its own, compiled against
# the package as a consumer sees it: messages/ and client/ against the
# client component alone, the other layers against the whole package.
test_every_installed_header_compiles_alone() {
  install_package || { CURRENT_OK=0; return; }
  local project="$WORK/headers" count=0
  mkdir -p "$project/client" "$project/node"
  for header in "$PREFIX"/include/coalesce/*/*.hpp; do
    local relative="${header#$PREFIX/include/}" layer
    layer=$(basename "$(dirname "$header")")
    local side=node
    case "$layer" in messages|client) side=client ;; esac
    printf '#include <%s>\n' "$relative" \
      >"$project/$side/$(tr '/.' '__' <<<"$relative").cpp"
    count=$((count + 1))
  done
  cat >"$project/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(coalesce_headers LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
# Parsing and instantiating is the check; no object is needed.
add_compile_options(-fsyntax-only -Wall -Wextra -Werror)
find_package(coalesce REQUIRED COMPONENTS ${SIDE})
file(GLOB sources ${CMAKE_CURRENT_SOURCE_DIR}/${SIDE}/*.cpp)
add_library(headers OBJECT ${sources})
target_link_libraries(headers PRIVATE ${TARGET})
CMAKE
  echo "    installed headers: $count"
  check "some headers are installed" [ "$count" -gt 40 ]
  local side target extra
  for side in client node; do
    target=coalesce::client
    extra=(-DCMAKE_DISABLE_FIND_PACKAGE_RocksDB=ON
           -DCMAKE_DISABLE_FIND_PACKAGE_prometheus-cpp=ON)
    if [ "$side" = node ]; then
      target=coalesce::coalesce
      extra=()
    fi
    check "the $side headers configure" \
      cmake -S "$project" -B "$project/build-$side" -DSIDE="$side" \
        -DTARGET="$target" -DCMAKE_PREFIX_PATH="$PREFIX" "${extra[@]}" \
        >"$project/$side-configure.log" 2>&1 \
      || { cat "$project/$side-configure.log" >&2; continue; }
    check "each $side header compiles alone" \
      cmake --build "$project/build-$side" -j2 \
        >"$project/$side-build.log" 2>&1 \
      || grep -B2 -A8 'error' "$project/$side-build.log" | head -40 >&2
  done
}

# The bound is for the build a user installs: the sanitizer build's
# instrumented libraries are six times larger.
sanitizer_build || run_test "the install is under 100 MB"
run_test "a client only application needs no RocksDB or prometheus"
# The headers are the same in every build: the sanitizer build leaves the
# check to the normal one (it costs two minutes of the two cores).
sanitizer_build || run_test "every installed header compiles alone"

finish_tests
