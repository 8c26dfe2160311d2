#!/usr/bin/env bash
# The node's Prometheus metrics (coalesce.metrics-port) scraped with curl
# from a real node on 127.0.0.1, before and after traffic through the CLI.
#   tests/app/metrics.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

command -v curl >/dev/null || { echo "curl is missing: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }

scrape() { # scrape FILE: the metrics page into FILE
  curl -sS --max-time 20 "http://127.0.0.1:$METRICS_PORT/metrics" >"$1"
}

# value FILE SAMPLE: the value of the sample line starting with SAMPLE
# (name and labels exactly as exposed); empty when there is none.
value() {
  awk -v sample="$2" '$1 == sample { print $2; exit }' "$1"
}

has_type() { # has_type FILE NAME TYPE
  grep -qx "# TYPE $2 $3" "$1"
}

grew() { # grew BEFORE_FILE AFTER_FILE SAMPLE
  local before after
  before=$(value "$1" "$3")
  after=$(value "$2" "$3")
  [ -n "$before" ] && [ -n "$after" ] \
    && awk -v a="$after" -v b="$before" 'BEGIN { exit !(a > b) }'
}

# -- the tests ---------------------------------------------------------------

test_the_metrics_are_named_by_kind_and_move_with_traffic() {
  start_with_metrics traffic || { CURRENT_OK=0; return; }
  local before="$WORK/before.prom" after="$WORK/after.prom"
  check "the first scrape answers" scrape "$before"
  check "a counter of the secret buffer" \
    has_type "$before" coalesce_secret_batches_written_total counter
  check "a counter of the persister" \
    has_type "$before" coalesce_session_writes_total counter
  check "a counter per stop reason" \
    grep -q '^coalesce_scheduler_finished_total{reason="reached_timeline_start"} ' "$before"
  check "the scheduler's queue length is a gauge" \
    has_type "$before" coalesce_scheduler_queued gauge
  check "labelled by priority" grep -q '^coalesce_scheduler_queued{priority="low"} 0' "$before"
  check "pending secrets are a gauge" has_type "$before" coalesce_secret_pending gauge
  check "no uptime gauge" bash -c "! grep -q '^coalesce_uptime' '$before'"
  check "the start time is a gauge" has_type "$before" process_start_time_seconds gauge
  local started now
  started=$(value "$before" process_start_time_seconds)
  now=$(date +%s)
  check "within the last 10 minutes ($started, now $now)" \
    awk -v s="$started" -v n="$now" 'BEGIN { exit !(s > n - 600 && s <= n + 1) }'
  check "CPU seconds are a counter" has_type "$before" process_cpu_seconds_total counter
  check "resident memory in bytes is above 1 MiB" \
    awk -v x="$(value "$before" process_resident_memory_bytes)" 'BEGIN { exit !(x > 1048576) }'
  check "open file descriptors are counted" \
    awk -v x="$(value "$before" process_open_fds)" 'BEGIN { exit !(x > 3) }'
  check "the build names its version and commit" \
    grep -Eq '^coalesce_build_info\{version="[0-9.]+",commit="([0-9a-f]{12}(-dirty)?|unknown)"\} 1$' "$before"
  check "the node logs the same at start" \
    grep -Eq "coalesce-node [0-9.]+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)" "$WORK/traffic.log"
  check "every HELP says what its metric measures" \
    bash -c "! grep -E '^# HELP [a-z_]+ *$|node_stats field' '$before'"
  if command -v promtool >/dev/null; then
    promtool check metrics <"$before" >"$WORK/promtool.out" 2>&1
    local lint=$?
    check "promtool check metrics passes (exit $lint)" [ "$lint" = 0 ]
    check "with no warning" [ ! -s "$WORK/promtool.out" ]
  fi
  check "a stats metric's HELP is its field's doc comment" \
    grep -qx '# HELP coalesce_secret_pending Distinct keys waiting to be written. (coalesce-cli stats: secrets.pending)' "$before"
  check "the database is healthy" [ "$(value "$before" coalesce_database_healthy)" = 1 ]
  check "the stats were answered" [ "$(value "$before" coalesce_stats_up)" = 1 ]
  check "write latency is a histogram" has_type "$before" coalesce_write_seconds histogram
  check "fsync latency is a histogram" has_type "$before" coalesce_fsync_seconds histogram
  check "with an unbounded bucket" \
    grep -q '^coalesce_fsync_seconds_bucket{le="+Inf"} ' "$before"

  make_entries m 50 >"$WORK/entries.in"
  check "secret put exits 0" cli secret put - <"$WORK/entries.in"
  check "secret flush exits 0" cli secret flush
  printf 'state\n' >"$WORK/s.blob"
  check "session put exits 0" cli session put s1 "$WORK/s.blob" --update u1:note:hi
  printf 'e1 m.room.create 1000\ne2 m.room.message 1001 hi\n' >"$WORK/events.in"
  check "timeline append exits 0" cli timeline append '!room:m' <"$WORK/events.in"
  check "backfill exits 0" cli backfill '!room:m' >/dev/null

  check "the second scrape answers" scrape "$after"
  check "batches written grew" grew "$before" "$after" coalesce_secret_batches_written_total
  check "all 50 entries are counted" \
    [ "$(value "$after" coalesce_secret_entries_written_total)" = 50 ]
  check "session writes grew" grew "$before" "$after" coalesce_session_writes_total
  check "the backfill is counted by its stop reason" \
    grew "$before" "$after" 'coalesce_scheduler_finished_total{reason="reached_timeline_start"}'
  check "the write histogram counted the writes" \
    grew "$before" "$after" coalesce_write_seconds_count
  check "its unbounded bucket too" \
    grew "$before" "$after" 'coalesce_write_seconds_bucket{le="+Inf"}'
  check "the fsync histogram counted the syncs" \
    grew "$before" "$after" coalesce_fsync_seconds_count
  kill -TERM "$NODE_PID"
  check "the node stops" wait_exit "$NODE_PID" 60
  check "it exits 0 (got $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
}

test_a_metrics_port_in_use_stops_start_up_naming_the_key() {
  start_with_metrics first || { CURRENT_OK=0; return; }
  local first_pid="$NODE_PID" taken="$METRICS_PORT"
  "$NODE" --config-file="$ROOT/config/coalesce.ini" --coalesce.port=0 \
    --coalesce.db-path="$WORK/second.db" --coalesce.stats-interval=0s \
    --coalesce.metrics-port="$taken" >"$WORK/second.log" 2>&1 &
  local second_pid=$!
  NODE_PIDS+=("$second_pid")
  check "the second node exits" wait_exit "$second_pid" 60
  check "non-zero (got $EXIT_CODE)" [ "$EXIT_CODE" != 0 ]
  check "naming the key and the port" \
    grep -q "coalesce.metrics-port = $taken" "$WORK/second.log"
  check "the first node still serves metrics" scrape "$WORK/first.prom"
  kill -TERM "$first_pid"; wait_exit "$first_pid" 60
}

test_metrics_are_off_by_default() {
  start_node plain || { CURRENT_OK=0; return; }
  check "the node serves" cli stats >/dev/null
  check "it logs no metrics address" bash -c "! grep -q 'metrics on' '$WORK/plain.log'"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

run_test "the metrics are named by kind and move with traffic"
run_test "a metrics port in use stops start up naming the key"
run_test "metrics are off by default"
finish_tests
