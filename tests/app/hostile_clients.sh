#!/usr/bin/env bash
# Hostile clients against real node processes on 127.0.0.1 (port 0): a
# mutual-TLS node with a metrics port takes random bytes, truncated and
# mutated handshakes, mutated records, garbage after a real handshake,
# broken HTTP requests and connections that never read; a plain node takes
# a recorded CLI session's requests replayed by clients that never read the
# answers, and a peer's message CAF cannot decode. Each attack is bounded
# in connections and time and comes from tests/app/hostile_clients.py,
# which holds its connections open while the node is checked: alive, a
# legitimate client served with the right values, /metrics answering,
# resident memory within 100 MiB of the start.
#   tests/app/hostile_clients.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

command -v openssl >/dev/null || { echo "openssl is missing: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }
command -v curl >/dev/null || { echo "curl is missing: skipped"; exit 77; }

ATTACKER="$ROOT/tests/app/hostile_clients.py"
CERTS="$WORK/certs"
"$ROOT/scripts/make-certs" "$CERTS" >/dev/null || { echo "make-certs failed"; exit 1; }
NODE_TLS=(--openssl.certificate="$CERTS/node.pem"
          --openssl.key="$CERTS/node-key.pem"
          --openssl.cafile="$CERTS/ca.pem")
RSS_BOUND_KIB=102400
CRASHES=0

tls_cli() { # the CLI with the CA-signed client certificate
  "$CLI" --port="$PORT" --timeout=10s --openssl-certificate "$CERTS/client.pem" \
    --openssl-key "$CERTS/client-key.pem" --openssl-cafile "$CERTS/ca.pem" "$@"
}

status_kb() { # status_kb PID FIELD: VmRSS or VmHWM (the peak) in KiB
  awk -v field="$2:" '$1 == field { print $2 }' "/proc/$1/status"
}


# within_bound WHAT KIB_ABOVE_START: ASan's allocator keeps freed memory in
# quarantine, so the bound is checked in the normal build only (as app.tls).
within_bound() {
  if sanitizer_build; then
    echo "    (sanitizer build: $1 is not bounded here)"
  else
    check "$1: $2 KiB above the start, under $RSS_BOUND_KIB" [ "$2" -lt "$RSS_BOUND_KIB" ]
  fi
}

# attack NAME COMMAND ARGS...: runs the attacker's COMMAND with a hold file;
# returns once it printed its counts, its connections still held.
attack() {
  local name="$1" command="$2"
  shift 2
  touch "$WORK/$name.hold"
  python3 "$ATTACKER" "$command" "$WORK/$name.hold" "$@" >"$WORK/$name.out" 2>&1 &
  ATTACKER_PID=$!
  local deadline=$((SECONDS + 60))
  until grep -q " held, " "$WORK/$name.out" || [ $SECONDS -ge $deadline ] \
        || ! kill -0 "$ATTACKER_PID" 2>/dev/null; do sleep 0.05; done
  sed 's/^/    /' "$WORK/$name.out"
  check "$name: the attacker printed its counts" grep -q " held, " "$WORK/$name.out"
}

release() { # release NAME: the attacker closes what it holds and ends
  rm -f "$WORK/$1.hold"
  wait "$ATTACKER_PID"
}

node_alive() { # node_alive WHEN: counts a crash
  check "$1: the node is alive" kill -0 "$NODE_PID" || CRASHES=$((CRASHES + 1))
}

# legitimate_clients_served WHEN: a put, its get, stats and /metrics.
legitimate_clients_served() {
  local when="$1" n=$((++LEGIT_ROUND))
  check "$when: a legitimate put" tls_cli secret put g@g.us a "H$n" "$(hex32 "$n")" 0 "$n"
  check "$when: its get answers the put secret" \
    [ "$(tls_cli secret get g@g.us a "H$n")" = "$(hex32 "$n") $n" ]
  check "$when: the first put is still there" \
    [ "$(tls_cli secret get g@g.us a H0)" = "$(hex32 99) 99" ]
  tls_cli stats >"$WORK/stats.json"
  check "$when: stats answers" grep -q '^{"uptime_s":' "$WORK/stats.json"
  curl -sS --max-time 20 "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/scrape.prom"
  check "$when: /metrics answers" grep -q '^coalesce_stats_up 1' "$WORK/scrape.prom"
}
LEGIT_ROUND=0

# hostile_phase NAME COMMAND ARGS...: the attack, the checks while it is
# held and after it closed, the memory at both moments.
hostile_phase() {
  local name="$1"
  attack "$@"
  node_alive "$name held"
  legitimate_clients_served "$name held"
  local held=$(status_kb "$NODE_PID" VmRSS)
  release "$name"
  node_alive "$name closed"
  legitimate_clients_served "$name closed"
  local after=$(status_kb "$NODE_PID" VmRSS)
  echo "    VmRSS: ${held} KiB held, ${after} KiB after, peak $(status_kb "$NODE_PID" VmHWM) KiB"
  within_bound "$name held" $((held - RSS_START))
  within_bound "$name closed" $((after - RSS_START))
}

# -- the tests ---------------------------------------------------------------

test_hostile_tls_and_http_leave_the_node_serving_within_100_mib() {
  start_with_metrics hostile "${NODE_TLS[@]}" || { CURRENT_OK=0; return; }
  check "a first legitimate put" tls_cli secret put g@g.us a H0 "$(hex32 99)" 0 99
  legitimate_clients_served "before"
  RSS_START=$(status_kb "$NODE_PID" VmRSS)
  echo "    VmRSS at the start: $RSS_START KiB"
  hostile_phase tls tls "$PORT" "$CERTS"
  hostile_phase tls-idle tls-idle "$PORT" "$CERTS" 50
  hostile_phase metrics metrics "$METRICS_PORT"
  local peak=$(status_kb "$NODE_PID" VmHWM)
  echo "    VmRSS: $RSS_START KiB before, peak $peak KiB," \
       "$(status_kb "$NODE_PID" VmRSS) KiB after; crashes: $CRASHES"
  within_bound "the peak (VmHWM)" $((peak - RSS_START))
  kill -TERM "$NODE_PID"
  check "the node still stops cleanly" wait_exit "$NODE_PID" 60
  check "and exits 0 (got $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
}

# A CLI session reading a session of 1 MiB, recorded through a relay on a
# plain node, replayed by clients that never read: each repeat of its
# requests is one more 1 MiB answer the node has to keep.
test_clients_that_never_read_their_answers_leave_the_node_serving() {
  start_node plain || { CURRENT_OK=0; return; }
  head -c 1048576 /dev/urandom >"$WORK/blob"
  check "a session of 1 MiB is put" cli session put s1 "$WORK/blob"
  python3 "$ATTACKER" record "$WORK/relay.port" "$PORT" "$WORK/session.basp" &
  local relay=$!
  local deadline=$((SECONDS + 30))
  until [ -f "$WORK/relay.port" ] || [ $SECONDS -ge $deadline ]; do sleep 0.05; done
  "$CLI" --port="$(cat "$WORK/relay.port")" session get s1 >"$WORK/through-relay"
  wait "$relay"
  check "the recorded session read the blob" cmp -s "$WORK/blob" "$WORK/through-relay"
  local answers=$((NEVER_READ_CONNECTIONS * NEVER_READ_REPEATS))
  RSS_START=$(status_kb "$NODE_PID" VmRSS)
  attack never-read never-read "$PORT" "$WORK/session.basp" \
    "$NEVER_READ_CONNECTIONS" "$NEVER_READ_REPEATS"
  node_alive "never-read held"
  cli --timeout=10s session get s1 >"$WORK/legit"
  check "while held a reading client gets the whole session" cmp -s "$WORK/blob" "$WORK/legit"
  check "and stats" bash -c "'$CLI' --port=$PORT --timeout=10s stats | grep -q '^{\"uptime_s\":'"
  local held=$(status_kb "$NODE_PID" VmRSS)
  release never-read
  node_alive "never-read closed"
  cli --timeout=10s session get s1 >"$WORK/legit"
  check "after they closed a reading client gets the whole session" \
    cmp -s "$WORK/blob" "$WORK/legit"
  local after=$(status_kb "$NODE_PID" VmRSS) peak=$(status_kb "$NODE_PID" VmHWM)
  echo "    $answers answers of 1 MiB never read: VmRSS $RSS_START KiB before," \
       "$held KiB held (+$(((held - RSS_START) / answers)) KiB per unread answer)," \
       "peak $peak KiB, $after KiB after; crashes: $CRASHES"
  within_bound "never-read held" $((held - RSS_START))
  within_bound "never-read closed" $((after - RSS_START))
  kill -TERM "$NODE_PID"
  check "the node still stops cleanly" wait_exit "$NODE_PID" 60
  check "and exits 0 (got $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
}
NEVER_READ_CONNECTIONS=2
NEVER_READ_REPEATS=16

# CAF 0.17.6 throws while decoding a CAF config_value with an unknown type
# index, and no actor of ours sees the message (docs/operating.md, "Known
# limits of CAF 0.17"). What the node owes then: the reason in its log, an
# exit with a failed status for its supervisor to restart it, and
# everything it answered still there after the restart.
# undecodable_stops_the_node NAME STATUS LOG_LINE [NODE_ARGS...]
undecodable_stops_the_node() {
  local name="$1" status="$2" line="$3"
  shift 3
  start_node "$name" "$@" || { CURRENT_OK=0; return; }
  head -c 65536 /dev/urandom >"$WORK/blob"
  check "a session is put (answered once durable)" cli session put s1 "$WORK/blob"
  python3 "$ATTACKER" undecodable - "$PORT" >"$WORK/$name.out" 2>&1
  sed 's/^/    /' "$WORK/$name.out"
  check "the attacker completed the handshake and sent the message" \
    grep -q "^undecodable: sent to actor" "$WORK/$name.out"
  check "the node stops within 30 s" wait_exit "$NODE_PID" 30
  check "with status $status, for a supervisor to restart it (got $EXIT_CODE)" \
    [ "$EXIT_CODE" = "$status" ]
  check "its log names why and where the limit is described" \
    grep -q "$line.*Known limits of CAF 0.17" "$WORK/$name.log"
  start_node "$name" "$@" || { CURRENT_OK=0; return; }
  cli --timeout=10s session get s1 >"$WORK/after-restart"
  check "restarted on its data, it answers the session it had answered" \
    cmp -s "$WORK/blob" "$WORK/after-restart"
  kill -TERM "$NODE_PID"
  check "the restarted node stops cleanly" wait_exit "$NODE_PID" 60
}

# Decoded by a BASP worker, on a scheduler thread that catches nothing: the
# process ends in std::terminate, SIGABRT's status.
test_a_message_caf_cannot_decode_stops_the_node_naming_why_and_loses_nothing() {
  undecodable_stops_the_node undecodable 134 \
    "\\[critical\\] the node stops: an exception no actor caught: invalid type found"
}

# Decoded by the BASP broker itself (CAF does when no worker is free; with
# none configured, always): CAF stops the broker and the node would live
# on without a connection. It stops instead, writing what it holds.
test_a_message_that_stops_the_basp_broker_stops_the_node_cleanly() {
  undecodable_stops_the_node broker-decodes 1 \
    "\\[critical\\] the node stops: CAF's BASP broker, which carries every connection to peers and clients, stopped" \
    --middleman.workers=0
  check "and it wrote everything before it stopped" \
    grep -q "stopped (everything written; its connections were lost)" \
    "$WORK/broker-decodes.log"
}

run_test "hostile tls and http leave the node serving within 100 mib"
run_test "clients that never read their answers leave the node serving"
run_test "a message caf cannot decode stops the node naming why and loses nothing"
run_test "a message that stops the basp broker stops the node cleanly"

finish_tests
