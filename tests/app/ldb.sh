#!/usr/bin/env bash
# coalesce-ldb over a stopped node's data directory: RocksDB's ldb with the
# secrets' merge operator and compaction filter (storage/ldb_tool.hpp).
#   tests/app/ldb.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

LDB="$BIN/coalesce-ldb"

hex_of() { # hex_of TEXT: its bytes in upper-case hex
  printf %s "$1" | od -An -tx1 | tr -d ' \n' | tr a-f A-F
}

# secret_key_hex CHAT SENDER MSG_ID: the secrets family's key, as ldb prints
# it with --hex (each part: a 4-byte big-endian length, then its bytes).
secret_key_hex() {
  local part out="0x"
  for part in "$@"; do
    out+="$(printf %08X "${#part}")$(hex_of "$part")"
  done
  echo "$out"
}

A_SECRET=$(printf 'a%.0s' {1..64})
B_SECRET=$(printf 'b%.0s' {1..64})
C_SECRET=$(printf 'c%.0s' {1..64})

# -- the tests ---------------------------------------------------------------

test_a_recaptured_secret_scans_and_compacts_as_the_node_reads_it() {
  start_node data || { CURRENT_OK=0; return; }
  check "a secret is captured" cli secret put chat1 alice m1 "$A_SECRET"
  check "and captured again with another secret" cli secret put chat1 alice m1 "$B_SECRET"
  check "another key once" cli secret put chat1 bob m2 "$C_SECRET"
  check "flushed" cli secret flush
  kill -TERM "$NODE_PID"
  check "the node stops cleanly" wait_exit "$NODE_PID" 60
  local key
  key=$(secret_key_hex chat1 alice m1)
  "$LDB" --db="$WORK/data.db" --column_family=secrets scan --hex \
    >"$WORK/scan.out" 2>"$WORK/scan.err"
  local rc=$?
  check "scan exits 0 (got $rc)" [ "$rc" = 0 ]
  check "it lists both keys" [ "$(wc -l <"$WORK/scan.out")" = 2 ]
  local line
  line=$(grep "^$key " "$WORK/scan.out")
  check "the recaptured key's value holds the later secret" \
    grep -q "0220${B_SECRET^^}" <<<"$line"
  check "and not the earlier one (no operands joined)" \
    bash -c "! grep -q '${A_SECRET^^}' <<<'$line'"
  "$LDB" --db="$WORK/data.db" --column_family=secrets get --hex "$key" \
    >"$WORK/get.out" 2>&1
  check "get shows the same value" \
    [ "$(cat "$WORK/get.out")" = "${line#* : }" ]
  "$LDB" --db="$WORK/data.db" --column_family=secrets compact >"$WORK/compact.out" 2>&1
  rc=$?
  check "compact exits 0 (got $rc)" [ "$rc" = 0 ]
  "$LDB" --db="$WORK/data.db" --column_family=secrets idump --hex \
    >"$WORK/idump.out" 2>&1
  check "after it the key is one merged row" \
    [ "$(grep -c "^'${key#0x}'" "$WORK/idump.out")" = 1 ]
  start_node data || { CURRENT_OK=0; return; }
  check "the node reads the later secret after the compaction" \
    [ "$(cli secret get chat1 alice m1)" = "$B_SECRET 0" ]
  check "and the other key" [ "$(cli secret get chat1 bob m2)" = "$C_SECRET 0" ]
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_reading_without_the_options_file_is_refused() {
  start_node plain || { CURRENT_OK=0; return; }
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
  "$LDB" --db="$WORK/plain.db" --try_load_options=false scan >"$WORK/plain.out" 2>&1
  local rc=$?
  check "exits 1 (got $rc)" [ "$rc" = 1 ]
  check "saying why" grep -q "without their merge operator" "$WORK/plain.out"
}

run_test "a recaptured secret scans and compacts as the node reads it"
run_test "reading without the options file is refused"
finish_tests
