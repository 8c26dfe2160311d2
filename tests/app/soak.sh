#!/usr/bin/env bash
# The soak (bench/soak.cpp, scripts/soak) kept from rotting: 20 s at a low
# rate against a real node, its JSON checked: every service served, no
# error or timeout, no backfill out of history, the node stopped cleanly,
# and the node's RSS within the soak's bound.
#   tests/app/soak.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }
SOAK="$BIN/coalesce-bench-soak"
[ -x "$SOAK" ] || { echo "$SOAK is not built: skipped"; exit 77; }

# json_check FILE EXPRESSION: EXPRESSION (Python, over `j`) holds for the
# last line of FILE.
json_check() {
  python3 -c 'import json, sys
j = json.loads(open(sys.argv[1]).read().splitlines()[-1])
sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"
}

# ASan's allocator keeps freed memory in quarantine (hundreds of MB): the
# memory bound holds for the normal build, the sanitizer build lifts it.
SANITIZED=
sanitizer_build && SANITIZED=1

test_a_short_soak_serves_every_request_within_its_memory_bound() {
  local out="$WORK/soak.out" rc=0 lifted=()
  [ -n "$SANITIZED" ] && lifted=(--soak.slack-mib=100000)
  "$SOAK" "${lifted[@]}" --soak.seconds=20 --soak.rate=60 --soak.warmup=6 --soak.window=5 \
    --soak.sample-interval=2 --soak.progress-interval=10 --soak.dir="$WORK" \
    >"$out" 2>"$WORK/soak.err" || rc=$?
  cat "$out"
  check "the soak exits 0 (got $rc)" [ "$rc" = 0 ] || cat "$WORK/soak.err" >&2
  check "its last line is one JSON object" json_check "$out" 'j["bench"] == "soak"' || return
  check "a progress line every 10 s" [ "$(grep -c '^soak [0-9]* s: ' "$out")" = 2 ]
  check "every service got requests" \
    json_check "$out" 'all(j["requests"][s] > 100 for s in ("secrets", "sessions", "backfill"))'
  check "no request failed" json_check "$out" 'sum(j["errors"].values()) == 0'
  check "no request timed out" json_check "$out" 'sum(j["timeouts"].values()) == 0'
  check "every backfill kept paging" json_check "$out" 'j["exhausted_backfills"] == 0'
  check "the percentiles of both windows are there" \
    json_check "$out" 'all(j["latency_ms"][s][w]["p99"] > 0 for s in j["latency_ms"] for w in ("first", "last"))'
  check "the node stopped cleanly" json_check "$out" 'j["node_exit_clean"]'
  check "RSS was sampled after warm-up" json_check "$out" 'j["rss_samples"] >= 5 and j["rss_kib_start"] > 0'
  if [ -n "$SANITIZED" ]; then
    echo "    (sanitizer build: the memory bound is checked in the normal build)"
  else
    check "the node's RSS stayed within the bound" json_check "$out" 'j["bounded"]'
  fi
}

run_test "a short soak serves every request within its memory bound"
finish_tests
