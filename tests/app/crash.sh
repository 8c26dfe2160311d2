#!/usr/bin/env bash
# Crash test: a real node under load from all three services is killed with
# SIGKILL at a random moment, restarted, and checked against what the
# clients recorded, outside the node, as acknowledged durable:
#   - a secret once a `secret flush` after its `put` answered;
#   - a session's state once its `session put` answered;
#   - a room's back-pagination position once its `backfill` answered.
# After each restart: every acknowledged value is there, with the newest
# acknowledged content or a newer attempted one (an unanswered write may
# have landed); no session is torn (its blob and its update rows come from
# the same writes); the node listens and serves again within a few seconds.
#   tests/app/crash.sh BIN_DIR [TEST_NAME_REGEX]
#   CRASH_CYCLES=N (default 20), CRASH_SEED=S (default: random, printed)
# The last line is "N passed, M failed"; the line before it the counts.
set -u
source "$(dirname "$0")/process_helpers.sh"

CYCLES="${CRASH_CYCLES:-20}"
SEED="${CRASH_SEED:-$((RANDOM * 32768 + RANDOM))}"
RANDOM=$SEED
SESSIONS=4
KEYS=5000
SECRET_BATCH=2048
# Seconds a restarted node may take to serve its first request.
SERVE_WITHIN=5

# -- the clients: each appends what it attempted, then what was acknowledged --

# Secrets: a put of SECRET_BATCH writes to keys drawn from KEYS, its
# second half recapturing keys of its first half (the CLI sends a put in
# pipelined messages, so recaptures reach the buffer while the older values
# are being written), then a flush. Every write carries a new sequence number
# as its secret, so a stored value tells which write it came from.
drive_secrets() { # drive_secrets DIR
  local dir="$1" seq i key half=$((SECRET_BATCH / 2))
  local -a keys pairs
  seq=$(cat "$dir/secret.seq" 2>/dev/null || echo 0)
  while [ ! -e "$dir/stop" ]; do
    keys=()
    pairs=()
    for ((i = 0; i < SECRET_BATCH; i++)); do
      if ((i < half)); then
        key=$(((RANDOM * 32768 + RANDOM) % KEYS))
        keys+=("$key")
      else
        key=${keys[RANDOM % half]}
      fi
      seq=$((seq + 1))
      pairs+=("$key" "$seq")
    done
    echo "$seq" >"$dir/secret.seq"
    printf 'm%s %s\n' "${pairs[@]}" >"$dir/secret.batch"
    cat "$dir/secret.batch" >>"$dir/secret.attempted"
    printf 'crash@g.us s m%s %064x\n' "${pairs[@]}" | cli secret put - >/dev/null 2>&1 || return 0
    cli secret flush >/dev/null 2>&1 || return 0
    cat "$dir/secret.batch" >>"$dir/secret.acked"
  done
}

# Sessions: each put makes the blob "ID write W" and adds one update row uW.
drive_sessions() { # drive_sessions DIR
  local dir="$1" write id
  write=$(cat "$dir/session.seq" 2>/dev/null || echo 0)
  while [ ! -e "$dir/stop" ]; do
    write=$((write + 1))
    echo "$write" >"$dir/session.seq"
    id="s$((write % SESSIONS))"
    echo "$id $write" >>"$dir/session.attempted"
    printf '%s write %s\n' "$id" "$write" >"$dir/session.blob"
    cli session put "$id" "$dir/session.blob" --update "u$write:crash:$write" \
      >/dev/null 2>&1 || return 0
    echo "$id $write" >>"$dir/session.acked"
  done
}

# Back-pagination: one small batch at a time through the cycle's room; the
# oldest event a run delivered is the position it acknowledged.
drive_backfills() { # drive_backfills DIR ROOM
  local dir="$1" room="$2" out oldest
  while [ ! -e "$dir/stop" ]; do
    out=$(cli backfill "$room" --max-batches 1 --batch-size 7 2>/dev/null) || return 0
    oldest=$(tail -n 1 <<<"$out" | grep -o '^e[0-9]*' | tr -d e)
    [ -n "$oldest" ] && echo "$room $oldest" >>"$dir/backfill.acked"
    grep -q reached_timeline_start <<<"$out" && return 0
  done
}

# -- the checks after a restart ------------------------------------------------

LOST=0
TORN=0
CHECKED_SECRETS=0
CHECKED_SESSIONS=0
CHECKED_POSITIONS=0

problem() {
  echo "    cycle $CYCLE: $*" >&2
  CURRENT_OK=0
}

# Every key written so far: its stored write must be one that was attempted,
# and no older than the newest acknowledged one. Afterwards only what a later
# check needs is kept: per key its newest acknowledged write and the attempts
# after it.
check_secrets() { # check_secrets DIR
  local dir="$1"
  [ -s "$dir/secret.attempted" ] || return 0
  touch "$dir/secret.acked"
  cut -d' ' -f1 "$dir/secret.attempted" "$dir/secret.acked" | sort -u >"$dir/keys"
  sed 's/^/crash@g.us s /' "$dir/keys" | cli secret get - >"$dir/stored" \
    || { problem "secret get failed"; return; }
  local verdict
  verdict=$(paste -d' ' "$dir/keys" "$dir/stored" | awk \
    -v attempted="$dir/secret.attempted" -v acked="$dir/secret.acked" \
    -v kept_attempts="$dir/attempted.next" -v kept_acks="$dir/acked.next" '
    function from_hex(text,   i, n) {
      n = 0
      for (i = 1; i <= length(text); i++) n = n * 16 + index("0123456789abcdef", substr(text, i, 1)) - 1
      return n
    }
    BEGIN {
      while ((getline line < attempted) > 0) { split(line, f, " "); tried[f[1] " " f[2]] = 1 }
      while ((getline line < acked) > 0) {
        split(line, f, " "); if (f[2] + 0 > newest[f[1]] + 0) newest[f[1]] = f[2]
      }
    }
    {
      key = $1; checked++
      if ($2 == "-") {
        if (key in newest) { lost++; print "lost " key " (acknowledged write " newest[key] ")" > "/dev/stderr" }
        next
      }
      stored = from_hex(substr($2, 49))
      if (!((key " " stored) in tried)) { lost++; print "key " key " holds write " stored ", neither its newest acknowledged write nor a later attempt" > "/dev/stderr" }
      else if (key in newest && stored < newest[key] + 0) {
        lost++; print "key " key " holds write " stored ", older than acknowledged " newest[key] > "/dev/stderr"
      }
    }
    END {
      for (k in newest) print k, newest[k] > kept_acks
      for (t in tried) { split(t, f, " "); if (f[2] + 0 >= newest[f[1]] + 0) print t > kept_attempts }
      close(kept_acks); close(kept_attempts)
      print checked + 0, lost + 0
    }')
  mv "$dir/attempted.next" "$dir/secret.attempted"
  if [ -e "$dir/acked.next" ]; then mv "$dir/acked.next" "$dir/secret.acked"; else : >"$dir/secret.acked"; fi
  CHECKED_SECRETS=$((CHECKED_SECRETS + ${verdict% *}))
  [ "${verdict#* }" = 0 ] || { LOST=$((LOST + ${verdict#* })); problem "${verdict#* } secrets lost"; }
}

# Each session: the blob's write is attempted and no older than the newest
# acknowledged; its rows are exactly the writes up to the blob's that made
# it, which include every acknowledged one (rows and blob go in one batch).
check_sessions() { # check_sessions DIR
  local dir="$1" i id blob_write rows newest
  for ((i = 0; i < SESSIONS; i++)); do
    id="s$i"
    grep -q "^$id " "$dir/session.attempted" 2>/dev/null || continue
    CHECKED_SESSIONS=$((CHECKED_SESSIONS + 1))
    newest=$(awk -v id="$id" '$1 == id { n = $2 } END { print n + 0 }' "$dir/session.acked" 2>/dev/null)
    blob_write=$(cli session get "$id" 2>/dev/null | awk -v id="$id" '$1 == id && $2 == "write" { print $3 }')
    if [ -z "$blob_write" ]; then
      [ "$newest" -gt 0 ] && { LOST=$((LOST + 1)); problem "session $id lost (acknowledged write $newest)"; }
      continue
    fi
    if ! grep -qx "$id $blob_write" "$dir/session.attempted"; then
      LOST=$((LOST + 1)); problem "session $id holds write $blob_write, never attempted"
    elif [ "$blob_write" -lt "$newest" ]; then
      LOST=$((LOST + 1)); problem "session $id holds write $blob_write, older than acknowledged $newest"
    fi
    rows=$(cli session updates "$id" 2>/dev/null | cut -d' ' -f1 | tr -d u | sort -n | paste -sd' ')
    local last=${rows##* } row
    if [ "$last" != "$blob_write" ]; then
      TORN=$((TORN + 1)); problem "session $id torn: blob from write $blob_write, newest row from $last"
    fi
    for row in $(awk -v id="$id" '$1 == id { print $2 }' "$dir/session.acked" 2>/dev/null); do
      [[ " $rows " == *" $row "* ]] || { LOST=$((LOST + 1)); problem "session $id lost the row of acknowledged write $row"; }
    done
  done
}

# The room's next run starts right below the oldest event an answered run
# delivered (or finds the timeline's start if that was e1): neither the
# position nor the appended events below it were lost.
check_position() { # check_position DIR ROOM
  local dir="$1" room="$2" acked next
  acked=$(awk -v r="$room" '$1 == r { p = $2 } END { print p }' "$dir/backfill.acked" 2>/dev/null)
  [ -n "$acked" ] || return 0
  CHECKED_POSITIONS=$((CHECKED_POSITIONS + 1))
  next=$(cli backfill "$room" --max-batches 1 --batch-size 7 2>/dev/null | sed -n 2p | grep -o '^e[0-9]*' | tr -d e)
  if [ -n "$next" ] && [ "$next" -ge "$acked" ]; then
    LOST=$((LOST + 1)); problem "room $room pages from e$next again, acknowledged down to e$acked"
  elif [ -z "$next" ] && [ "$acked" -gt 1 ]; then
    LOST=$((LOST + 1)); problem "room $room has nothing below e$acked, where e1..e$((acked - 1)) were appended"
  fi
}

# -- the test ------------------------------------------------------------------

# A restarted node serves within SERVE_WITHIN seconds (its first stats answer).
serves_within() {
  local deadline=$((SECONDS + SERVE_WITHIN))
  until cli --timeout=1s stats >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

test_acknowledged_writes_survive_kill_9_under_load() {
  local dir="$WORK/clients" room events
  mkdir -p "$dir"
  DB_DIR="$WORK" start_node crash || { CURRENT_OK=0; return; }
  for ((CYCLE = 1; CYCLE <= CYCLES; CYCLE++)); do
    room="room$CYCLE"
    for ((events = 1; events <= 200; events++)); do
      echo "e$events m.text $((1700000000 + events)) body $events"
    done | cli timeline append "$room" >/dev/null || { problem "timeline append failed"; return; }
    rm -f "$dir/stop"
    local acked_before
    acked_before=$(wc -l <"$dir/secret.acked" 2>/dev/null || echo 0)
    drive_secrets "$dir" & local secrets_pid=$!
    drive_sessions "$dir" & local sessions_pid=$!
    drive_backfills "$dir" "$room" & local backfills_pid=$!
    # The load is under way once a flush of this cycle was acknowledged (a
    # loaded sanitizer build took longer than the kill's whole window to get
    # there, 20 cycles in a row, and the run checked nothing acknowledged).
    local deadline=$((SECONDS + 60))
    until [ "$(wc -l <"$dir/secret.acked" 2>/dev/null || echo 0)" -gt "$acked_before" ] \
          || [ $SECONDS -ge $deadline ]; do
      sleep 0.05
    done
    # The kill's moment is the random part of the test, not a wait for
    # anything: 0.2 to 1.5 s further into the load.
    sleep "0.$((RANDOM % 13 + 2))"
    # (bash's "Killed" job notice goes to the group's stderr)
    { kill -KILL "$NODE_PID"; wait_exit "$NODE_PID" 30; } 2>/dev/null
    touch "$dir/stop"
    wait "$secrets_pid" "$sessions_pid" "$backfills_pid"
    local started=$SECONDS
    DB_DIR="$WORK" start_node crash || { problem "the node did not start again"; return; }
    serves_within || { problem "the restarted node did not serve within ${SERVE_WITHIN}s"; return; }
    RESTART_SECONDS=$((SECONDS - started))
    check_secrets "$dir"
    check_sessions "$dir"
    check_position "$dir" "$room"
    ((CYCLE % 50 == 0)) && echo "  after $CYCLE cycles: $LOST lost, $TORN torn"
  done
  echo "  seed $SEED: $CYCLES cycles; checked $CHECKED_SECRETS secrets," \
       "$CHECKED_SESSIONS sessions, $CHECKED_POSITIONS positions; $LOST lost, $TORN torn"
  check "nothing acknowledged was lost" [ "$LOST" = 0 ]
  check "no session was torn" [ "$TORN" = 0 ]
  check "some secrets were acknowledged" [ -s "$dir/secret.acked" ]
  check "some session writes were acknowledged" [ -s "$dir/session.acked" ]
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

run_test "acknowledged writes survive kill 9 under load"
finish_tests
