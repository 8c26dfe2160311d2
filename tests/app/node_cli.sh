#!/usr/bin/env bash
# Real node processes on 127.0.0.1 (port 0), driven with the real CLI.
#   tests/app/node_cli.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

# -- the tests ---------------------------------------------------------------

test_bulk_put_and_get_through_stdin() {
  start_node bulk || { CURRENT_OK=0; return; }
  make_entries B 3000 >"$WORK/bulk.in"
  check "put - exits 0" cli secret put - <"$WORK/bulk.in"
  { keys_of B 1500; echo "nochat nobody missing"; keys_of B 3000 | tail -n 1500; } >"$WORK/bulk.keys"
  { expected_lookups B 1500; echo "-"; expected_lookups B 3000 | tail -n 1500; } >"$WORK/bulk.expected"
  check "get - exits 0" cli secret get - <"$WORK/bulk.keys" >"$WORK/bulk.out"
  check "get - answers every key in order, - for the missing one" \
    cmp -s "$WORK/bulk.expected" "$WORK/bulk.out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_flushed_entries_survive_sigkill() {
  start_node killed || { CURRENT_OK=0; return; }
  make_entries K 800 | cli secret put -
  check "flush exits 0" cli secret flush
  kill -KILL "$NODE_PID"
  wait_exit "$NODE_PID" 30
  start_node killed || { CURRENT_OK=0; return; }
  keys_of K 800 | cli secret get - >"$WORK/killed.out"
  expected_lookups K 800 >"$WORK/killed.expected"
  check "every flushed entry is there after SIGKILL and restart" \
    cmp -s "$WORK/killed.expected" "$WORK/killed.out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_sigterm_without_flush_writes_everything() {
  start_node termed || { CURRENT_OK=0; return; }
  make_entries T 1200 | cli secret put -
  kill -TERM "$NODE_PID"
  check "the node exits within its shutdown timeout" wait_exit "$NODE_PID" 60
  check "the node exits 0 when everything was written (got $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
  check "the node logs that everything was written" grep -q "everything written" "$WORK/termed.log"
  start_node termed || { CURRENT_OK=0; return; }
  keys_of T 1200 | cli secret get - >"$WORK/termed.out"
  expected_lookups T 1200 >"$WORK/termed.expected"
  check "every entry is there after SIGTERM and restart" \
    cmp -s "$WORK/termed.expected" "$WORK/termed.out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_sighup_is_logged_and_the_node_goes_on() {
  start_node hup || { CURRENT_OK=0; return; }
  make_entries H 600 | cli secret put -
  kill -HUP "$NODE_PID"
  check "the node logs the SIGHUP" wait_log_count "$WORK/hup.log" "received SIGHUP: ignored" 1 30
  check "the node is still running" kill -0 "$NODE_PID"
  make_entries G 600 | cli secret put -
  keys_of H 600 | cli secret get - >"$WORK/hup.out"
  expected_lookups H 600 >"$WORK/hup.expected"
  check "it serves what was put before the SIGHUP" \
    cmp -s "$WORK/hup.expected" "$WORK/hup.out"
  kill -TERM "$NODE_PID"
  check "SIGTERM still stops it" wait_exit "$NODE_PID" 60
  check "with everything written (exit $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
  start_node hup || { CURRENT_OK=0; return; }
  { keys_of H 600; keys_of G 600; } | cli secret get - >"$WORK/hup.after"
  { expected_lookups H 600; expected_lookups G 600; } >"$WORK/hup.after.expected"
  check "every entry is there after the restart" \
    cmp -s "$WORK/hup.after.expected" "$WORK/hup.after"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_a_missing_key_exits_1() {
  start_node missing || { CURRENT_OK=0; return; }
  cli secret get g@g.us nobody NOPE >/dev/null 2>"$WORK/missing.err"
  local rc=$?
  check "exit 1 for a missing key (got $rc)" [ "$rc" = 1 ]
  check "stderr says what is missing" grep -q "no secret for g@g.us nobody NOPE" "$WORK/missing.err"
  cli secret put g@g.us a M1 "$(hex32 5)" 0 42
  check "a put secret is printed as SECRET_HEX MESSAGE_TS" \
    [ "$(cli secret get g@g.us a M1)" = "$(hex32 5) 42" ]
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_bad_input_is_refused_and_the_node_keeps_serving() {
  start_node bad || { CURRENT_OK=0; return; }
  cli secret put g@g.us a M1 1122 2>"$WORK/short.err"
  local rc=$?
  check "a short secret exits 4 (got $rc)" [ "$rc" = 4 ]
  check "the sentence names the secret's length" grep -q "32 bytes, got 2" "$WORK/short.err"
  cli secret put "" a M1 "$(hex32 1)" 2>"$WORK/chat.err"
  rc=$?
  check "an empty chat exits 4 (got $rc)" [ "$rc" = 4 ]
  check "the sentence names the empty chat" grep -q "chat is empty" "$WORK/chat.err"
  cli secret put g@g.us a M1 zz 2>"$WORK/hex.err"
  rc=$?
  check "a secret that is not hex exits 2 (got $rc)" [ "$rc" = 2 ]
  check "the node still serves" cli stats
  check "nothing of the refused puts was stored" \
    [ "$(echo "g@g.us a M1" | cli secret get -)" = "-" ]
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_an_unreachable_node_exits_3_within_the_timeout() {
  # A port that was just free: nothing listens there.
  start_node gone || { CURRENT_OK=0; return; }
  local port=$PORT
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
  local started=$SECONDS
  "$CLI" --port="$port" --timeout=2s stats 2>"$WORK/gone.err"
  local rc=$?
  check "exit 3 for an unreachable node (got $rc)" [ "$rc" = 3 ]
  check "within the timeout" [ $((SECONDS - started)) -le 4 ]
  check "one sentence on stderr" [ "$(wc -l <"$WORK/gone.err")" = 1 ]
}

test_a_stopped_node_exits_3_within_the_timeout() {
  start_node stopped || { CURRENT_OK=0; return; }
  kill -STOP "$NODE_PID"
  local started=$SECONDS
  cli --timeout=1s stats 2>"$WORK/stopped.err"
  local rc=$?
  check "exit 3 for a stopped node (got $rc)" [ "$rc" = 3 ]
  check "within the timeout, no hang" [ $((SECONDS - started)) -le 4 ]
  kill -CONT "$NODE_PID"
  check "the node serves again once continued" cli stats
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_a_node_schedules_with_work_sharing_unless_told_otherwise() {
  # What CAF reads when it starts the scheduler: --dump-config prints the
  # effective settings.
  local ini="$ROOT/config/coalesce.ini" out
  out=$("$NODE" --config-file="$ini" --dump-config 2>&1)
  check "the default policy is work sharing" grep -q "policy = 'sharing'" <<<"$out"
  out=$("$NODE" --config-file="$ini" --scheduler.policy=stealing --dump-config 2>&1)
  check "--scheduler.policy=stealing brings work stealing back" \
    grep -q "policy = 'stealing'" <<<"$out"
}

test_stats_is_one_json_object() {
  start_node stats || { CURRENT_OK=0; return; }
  cli secret put g@g.us a M1 "$(hex32 9)"
  cli secret flush
  local out
  out=$(cli stats)
  check "stats prints one line" [ "$(echo "$out" | wc -l)" = 1 ]
  check "with the buffer's counters" grep -q '"entries_written":1' <<<"$out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_the_timeout_reads_durations_as_the_config_file_does() {
  start_node durations || { CURRENT_OK=0; return; }
  local duration rc
  for duration in 1min 1h 250ms 2s; do
    cli --timeout="$duration" stats >/dev/null 2>"$WORK/duration.err"
    rc=$?
    check "--timeout=$duration is accepted (got $rc: $(cat "$WORK/duration.err"))" [ "$rc" = 0 ]
  done
  for duration in 5 soon 5sec 0s -1s; do
    cli --timeout="$duration" stats >/dev/null 2>"$WORK/duration.err"
    rc=$?
    check "--timeout=$duration is a usage error (got $rc)" [ "$rc" = 2 ]
    check "--timeout=$duration: the sentence names --timeout" grep -q -- "--timeout" "$WORK/duration.err"
    check "--timeout=$duration: one sentence on stderr" [ "$(wc -l <"$WORK/duration.err")" = 1 ]
  done
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_stats_json_carries_every_counter_of_the_stats_types() {
  start_node counters || { CURRENT_OK=0; return; }
  local out
  out=$(cli stats)
  local field
  for field in uptime_s shutting_down refused_requests pending waiting_producers \
      held_entries batches_written entries_written failed_batches last_batch_entries \
      last_write_latency_us force_buffered sealed retries failing_for_ms last_error \
      running coalesced_joins events_bytes_held parked_awaits results_kept \
      results_bytes results_forgotten; do
    check "stats carry \"$field\" (got: $out)" grep -q "\"$field\":" <<<"$out"
  done
  check "the scheduler's queued runs by priority, then the newer counters" \
    grep -q '"scheduler":{"queued":{"low":0,"normal":0,"high":0},"running":0,"coalesced_joins":0,"finished":{"stop_condition_met":0,"reached_timeline_start":0,"no_data_available":0,"batch_limit_reached":0,"failed":0,"cancelled":0},"events_bytes_held":0,"parked_awaits":0,"results_kept":0,"results_bytes":0,"results_forgotten":0}' <<<"$out"
  check "the last error is a string" grep -q '"last_error":""' <<<"$out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_load_prints_a_json_summary() {
  start_node load || { CURRENT_OK=0; return; }
  local out
  out=$(cli load secrets --count=5000 --concurrency=8 2>/dev/null)
  local rc=$?
  check "load exits 0 (got $rc)" [ "$rc" = 0 ]
  check "the summary counts every entry" grep -q '"entries":5000' <<<"$out"
  check "with throughput and latency" grep -q '"entries_per_s":.*"latency_p50_us":.*"latency_p99_us":.*"errors":0' <<<"$out"
  if command -v script >/dev/null; then
    script -qec "$CLI --port=$PORT load secrets --count=20000 --concurrency=4 --batch=16" /dev/null >"$WORK/tty.out" 2>&1
    check "a terminal sees a progress bar" grep -q '100% 20000/20000 entries' "$WORK/tty.out"
  fi
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_timeline_append_and_backfill_through_the_cli() {
  start_node timeline || { CURRENT_OK=0; return; }
  local i
  for ((i = 1; i <= 10; i++)); do
    echo "e$i m.room.message $((1000 + i)) message number $i, with spaces"
  done >"$WORK/events.in"
  check "timeline append exits 0" cli timeline append '!room:x' <"$WORK/events.in"
  cli backfill '!room:x' --batch-size=3 --until-event=e4 >"$WORK/backfill1.out"
  local rc=$?
  check "backfill exits 0 (got $rc)" [ "$rc" = 0 ]
  { echo stop_condition_met
    for ((i = 10; i >= 2; i--)); do
      echo "e$i m.room.message $((1000 + i)) message number $i, with spaces"
    done; } >"$WORK/backfill1.expected"
  check "the stop reason, then the loaded events newest first" \
    cmp -s "$WORK/backfill1.expected" "$WORK/backfill1.out"
  check "a second backfill goes on from there to the start" \
    [ "$(cli backfill '!room:x' | head -n 2 | tr '\n' '|')" = "reached_timeline_start|e1 m.room.message 1001 message number 1, with spaces|" ]
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
  start_node timeline || { CURRENT_OK=0; return; }
  check "the position survives a restart" \
    [ "$(cli backfill '!room:x')" = "reached_timeline_start" ]
  for ((i = 1; i <= 6; i++)); do
    echo "n$i m.room.message $((2000 + i))"
  done | cli timeline append '!other:x'
  echo "n7 m.room.create 2007" | cli timeline append '!other:x'
  check "--max-batches ends with batch_limit_reached" \
    [ "$(cli backfill '!other:x' --batch-size=2 --max-batches=1 | head -n 1)" = "batch_limit_reached" ]
  check "--older-than stops at the first older event" \
    [ "$(cli backfill '!other:x' --batch-size=1 --older-than=2005 | tr '\n' '|')" = "stop_condition_met|n5 m.room.message 2005|n4 m.room.message 2004|" ]
  cli backfill '!other:x' --priority=urgent >/dev/null 2>&1
  rc=$?
  check "an unknown priority is a usage error (got $rc)" [ "$rc" = 2 ]
  cli backfill '!other:x' --until-event=a --until-type=b >/dev/null 2>&1
  rc=$?
  check "two stop conditions are a usage error (got $rc)" [ "$rc" = 2 ]
  local stats
  stats=$(cli stats 2>&1)
  check "stats include the scheduler (got: $stats)" \
    grep -q '"scheduler":{"queued":{"low":0,"normal":0,"high":0},"running":0' <<<"$stats"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_a_node_whose_disk_never_recovers_exits_non_zero_and_counts_the_loss() {
  local control="$WORK/faults"
  : >"$control"
  local log="$WORK/faulty.log"
  COALESCE_FAULT_CONTROL="$control" "$BIN/coalesce-node-faulty" \
    --config-file="$ROOT/config/coalesce.ini" --coalesce.port=0 \
    --coalesce.db-path="$WORK/faulty.db" --coalesce.stats-interval=0s \
    --coalesce.shutdown-timeout=2s >"$log" 2>&1 &
  local pid=$!
  NODE_PIDS+=("$pid")
  local deadline=$((SECONDS + 30))
  until grep -q "listening on" "$log"; do
    if [ $SECONDS -ge $deadline ] || ! kill -0 "$pid" 2>/dev/null; then
      check "the faulty node starts" false
      cat "$log" >&2
      return
    fi
    sleep 0.05
  done
  PORT=$(grep -o "listening on [0-9.]*:[0-9]*" "$log" | sed 's/.*://')
  make_entries OK 20 | cli secret put -
  check "a flush before the fault succeeds" cli secret flush
  echo "wal_append eio" >"$control"
  # The node reads the control file every 50 ms: entries put before it did
  # would be written, and no write would fail.
  check "the node takes the fault" \
    wait_log_count "$log" 'fault seam: faults now "wal_append eio' 1 10
  make_entries LOST 100 | cli secret put -
  deadline=$((SECONDS + 30))
  until grep -q '"failed_batches":[1-9]' <<<"$(cli stats)"; do
    if [ $SECONDS -ge $deadline ]; then
      check "writes fail under the fault" false
      return
    fi
    sleep 0.05
  done
  keys_of LOST 100 | cli secret get - >"$WORK/lost.out"
  expected_lookups LOST 100 >"$WORK/lost.expected"
  check "the node keeps serving lookups during the fault" \
    cmp -s "$WORK/lost.expected" "$WORK/lost.out"
  cli --timeout=3s secret flush 2>"$WORK/flush.err"
  local rc=$?
  check "a flush during the fault answers an error (exit 4, got $rc)" [ "$rc" = 4 ]
  check "naming the failure" grep -q "writes are failing" "$WORK/flush.err"
  local started=$SECONDS
  kill -TERM "$pid"
  check "SIGTERM stops it" wait_exit "$pid" 30
  check "within its shutdown timeout (2s, took $((SECONDS - started))s)" \
    [ $((SECONDS - started)) -le 10 ]
  check "with a non-zero exit (got $EXIT_CODE)" [ "$EXIT_CODE" != 0 ]
  check "saying how many entries were not written" \
    grep -q "100 secrets could not be written" "$log"
}

test_scripts_run_starts_a_node_that_stops_cleanly() {
  local log="$WORK/run.log"
  COALESCE_BUILD="$(dirname "$BIN")" "$ROOT/scripts/run" --coalesce.port=0 \
    --coalesce.db-path="$WORK/run.db" >"$log" 2>&1 &
  local pid=$!
  NODE_PIDS+=("$pid")
  local deadline=$((SECONDS + 300))
  until grep -q "listening on" "$log" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ] || ! kill -0 "$pid" 2>/dev/null; then
      check "scripts/run starts a node" false
      cat "$log" >&2
      return
    fi
    sleep 0.1
  done
  PORT=$(grep -o "listening on [0-9.]*:[0-9]*" "$log" | sed 's/.*://')
  cli secret put g@g.us a RUN "$(hex32 3)" 0 9
  check "the node started by scripts/run serves" [ "$(cli secret get g@g.us a RUN)" = "$(hex32 3) 9" ]
  kill -INT "$pid"
  check "SIGINT stops it" wait_exit "$pid" 60
  check "with exit 0 (got $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
}

test_scripts_run_builds_only_the_node_and_the_cli() {
  # A fresh build directory, and make's dry run (-n, and -k to go on past
  # the links whose libraries a dry run does not make): the compile commands
  # scripts/run would run, without running them.
  local build="$WORK/fresh-build"
  check "a fresh build directory configures" \
    cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  MAKEFLAGS=-nk COALESCE_BUILD="$build" "$ROOT/scripts/run" --coalesce.port=0 \
    --coalesce.db-path="$WORK/dry.db" >"$WORK/dry.log" 2>&1
  local compiled
  compiled=$(grep -o -- "-c $ROOT/[^ ]*\.cpp" "$WORK/dry.log" | sed "s|-c $ROOT/||" | sort -u)
  check "it compiles the node (got: $compiled)" grep -qx "app/main.cpp" <<<"$compiled"
  check "it compiles the CLI" grep -qx "app/cli_main.cpp" <<<"$compiled"
  check "no test" [ -z "$(grep "^tests/" <<<"$compiled")" ]
  check "no benchmark" [ -z "$(grep "^bench/" <<<"$compiled")" ]
}

run_test "bulk put and get through stdin"
run_test "flushed entries survive sigkill"
run_test "sigterm without flush writes everything"
run_test "sighup is logged and the node goes on"
run_test "a missing key exits 1"
run_test "bad input is refused and the node keeps serving"
run_test "an unreachable node exits 3 within the timeout"
run_test "a stopped node exits 3 within the timeout"
run_test "stats is one json object"
run_test "stats json carries every counter of the stats types"
run_test "the timeout reads durations as the config file does"
run_test "load prints a json summary"
run_test "timeline append and backfill through the cli"
run_test "a node whose disk never recovers exits non zero and counts the loss"
run_test "a node schedules with work sharing unless told otherwise"
run_test "scripts run starts a node that stops cleanly"
run_test "scripts run builds only the node and the cli"

finish_tests
