#!/usr/bin/env bash
# A scheduler paging another node's timeline (coalesce.scheduler-remote-pager):
# real node processes on 127.0.0.1 and the real CLI.
#   tests/app/remote_pager.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

events() { # events FROM TO: event lines e FROM..TO, oldest first
  local i
  for ((i = $1; i <= $2; i++)); do
    echo "e$i m.room.message $((1000 + i)) event $i"
  done
}

newest_first() { # newest_first FROM TO: event lines e TO..FROM
  local i
  for ((i = $2; i >= $1; i--)); do
    echo "e$i m.room.message $((1000 + i)) event $i"
  done
}

# backfill_on PORT OUT ARGS...: a backfill through the node at PORT, its
# output in OUT; sets RC and ELAPSED (whole seconds).
backfill_on() {
  local port="$1" out="$2"
  shift 2
  local started=$SECONDS
  "$CLI" --port="$port" backfill '!r' "$@" >"$out" 2>"$out.err"
  RC=$?
  ELAPSED=$((SECONDS - started))
  return $RC
}

now_ms() {
  echo $(($(date +%s%N) / 1000000))
}

running_reaches() { # running_reaches PORT N: whether the node has N runs running
  "$CLI" --port="$1" stats 2>/dev/null | grep -q "\"running\":$2[,}]"
}

# wait_running PORT N: waits until the node's scheduler has N runs running
# (their page asked of the pager), for at most 30s.
wait_running() {
  wait_until 30 running_reaches "$1" "$2"
}

# wait_resent ERR N: waits until a CLI's stderr ERR says N times that it
# re-sent its await, for at most 30s.
wait_resent() {
  wait_log_count "$1" 'waiting again' "$2" 30
}

# -- the tests ---------------------------------------------------------------

test_a_dead_remote_pager_fails_runs_and_a_restarted_one_serves_again() {
  start_node b || { CURRENT_OK=0; return; }
  local b_pid=$NODE_PID b_port=$PORT
  check "history is appended to room !r on B" \
    cli timeline append '!r' < <(events 1 300)
  start_node a --coalesce.scheduler-remote-pager="127.0.0.1:$b_port" \
    --coalesce.scheduler-pager-timeout=2s || { CURRENT_OK=0; return; }
  local a_port=$PORT
  check "A still hosts its own timeline" \
    cli timeline append '!own' < <(events 1 3)

  backfill_on "$a_port" "$WORK/first.out" --batch-size=10 --max-batches=2
  check "a backfill on A exits 0 (got $RC)" [ "$RC" = 0 ]
  check "it loaded B's newest 20 events of !r" \
    cmp -s "$WORK/first.out" <({ echo batch_limit_reached; newest_first 281 300; })

  # B frozen holds the page A asks for; killed, it never answers it.
  kill -STOP "$b_pid"
  local started
  started=$(now_ms)
  backfill_on "$a_port" "$WORK/frozen.out" --batch-size=10 --max-batches=1 &
  local waiting=$!
  check "the run is at B's pager" wait_running "$a_port" 1 || return
  kill -KILL "$b_pid"
  wait_exit "$b_pid" 30
  wait "$waiting"
  local rc=$? elapsed=$(($(now_ms) - started))
  check "the run waiting when B died exits 4 (got $rc)" [ "$rc" = 4 ]
  check "it is answered failed" [ "$(head -n 1 "$WORK/frozen.out")" = failed ]
  check "its CLI names the failure" grep -q "the run for room !r failed" "$WORK/frozen.out.err"
  check "by the pager timeout (2s; took ${elapsed}ms)" [ "$elapsed" -ge 2000 ]
  check "within a generous margin of it" [ "$elapsed" -le 10000 ]

  backfill_on "$a_port" "$WORK/dead.out" --batch-size=10 --max-batches=1
  check "a run while B is down exits 4 (got $RC)" [ "$RC" = 4 ]
  check "it is answered failed" [ "$(head -n 1 "$WORK/dead.out")" = failed ]
  check "within the pager timeout and a generous margin (${ELAPSED}s)" [ "$ELAPSED" -le 10 ]
  check "A's log names B's address" grep -q "127.0.0.1:$b_port" "$WORK/a.log"

  start_node b --coalesce.port="$b_port" || { CURRENT_OK=0; return; }
  backfill_on "$a_port" "$WORK/again.out" --batch-size=10 --max-batches=1
  check "after B's restart a backfill on A exits 0 (got $RC)" [ "$RC" = 0 ]
  check "it goes on from B's committed position" \
    cmp -s "$WORK/again.out" <({ echo batch_limit_reached; newest_first 271 280; })
}

test_a_backfill_waits_past_its_timeout_while_the_node_answers_and_wait_bounds_it() {
  start_node slow_b || { CURRENT_OK=0; return; }
  local b_pid=$NODE_PID b_port=$PORT
  check "history is appended to room !r on B" \
    cli timeline append '!r' < <(events 1 30)
  start_node waiting_a --coalesce.scheduler-remote-pager="127.0.0.1:$b_port" \
    --coalesce.scheduler-pager-timeout=60s || { CURRENT_OK=0; return; }
  local a_port=$PORT
  # B frozen holds every page A asks for, within A's 60 s pager timeout.
  kill -STOP "$b_pid"
  local started=$SECONDS
  "$CLI" --port="$a_port" --timeout=1s backfill '!r' --batch-size=10 \
    --max-batches=1 --wait=3s >"$WORK/bounded.out" 2>"$WORK/bounded.err"
  local rc=$? elapsed=$((SECONDS - started))
  check "a run that outlasts --wait exits 3 (got $rc)" [ "$rc" = 3 ]
  check "after --wait 3s (took ${elapsed}s)" [ "$elapsed" -ge 3 ]
  check "well before the pager timeout (60s)" [ "$elapsed" -le 20 ]
  check "its CLI says the run had not ended" \
    grep -q "had not ended after --wait 3s" "$WORK/bounded.err"
  check "and each await it re-sent" grep -q "waiting again" "$WORK/bounded.err"

  "$CLI" --port="$a_port" --timeout=1s backfill '!r' --batch-size=10 \
    --max-batches=1 --wait=60s >"$WORK/waited.out" 2>"$WORK/waited.err" &
  local waiting=$!
  check "a run with a longer --wait re-sends its await twice" \
    wait_resent "$WORK/waited.err" 2
  kill -CONT "$b_pid"
  wait "$waiting"
  rc=$?
  check "once B answers it exits 0 (got $rc)" [ "$rc" = 0 ]
  check "with the run's result" [ "$(head -n 1 "$WORK/waited.out")" = batch_limit_reached ]
  check "and a batch of 10 events" [ "$(tail -n +2 "$WORK/waited.out" | wc -l)" = 10 ]
}

test_a_malformed_remote_pager_stops_start_up_naming_the_key() {
  "$NODE" --config-file="$ROOT/config/coalesce.ini" --coalesce.port=0 \
    --coalesce.db-path="$WORK/bad.db" --coalesce.scheduler-remote-pager=nohost \
    >"$WORK/bad.log" 2>&1
  local rc=$?
  check "the node exits non-zero (got $rc)" [ "$rc" != 0 ]
  check "the message names the key" \
    grep -q 'coalesce.scheduler-remote-pager = "nohost"' "$WORK/bad.log"
}

run_test "a dead remote pager fails runs and a restarted one serves again"
run_test "a backfill waits past its timeout while the node answers and wait bounds it"
run_test "a malformed remote pager stops start up naming the key"
finish_tests
