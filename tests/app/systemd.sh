#!/usr/bin/env bash
# coalesce-node under a service manager: sd_notify readiness and stop, log
# lines the journal files by priority, JSON log lines, and the shipped unit
# (config/coalesce-node.service.in) checked by systemd-analyze.
#   tests/app/systemd.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

command -v python3 >/dev/null || { echo "python3 is missing: skipped"; exit 77; }

# listen_notify SOCKET OUT: receives what is sent to the datagram socket
# SOCKET (as systemd's NOTIFY_SOCKET), one message per line in OUT, in the
# background for at most 120 s; sets LISTENER.
listen_notify() {
  python3 - "$1" "$2" <<'PY' &
import socket, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(sys.argv[1])
sock.settimeout(1)
deadline = time.time() + 120
with open(sys.argv[2], "a", buffering=1) as out:
    while time.time() < deadline:
        try:
            message = sock.recv(4096).decode()
        except socket.timeout:
            continue
        out.write(message.replace("\n", " ") + "\n")
PY
  LISTENER=$!
  local deadline=$((SECONDS + 10))
  while [ ! -S "$1" ] && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
}

wait_line() { # wait_line FILE PATTERN: until FILE has a line matching it (30 s)
  wait_log_count "$1" "$2" 1 30
}

# -- the tests ---------------------------------------------------------------

test_the_node_tells_the_service_manager_it_is_ready_and_stopping() {
  listen_notify "$WORK/notify.sock" "$WORK/notify.out"
  NOTIFY_SOCKET="$WORK/notify.sock" start_node notified || { CURRENT_OK=0; kill "$LISTENER"; return; }
  check "READY=1 arrives" wait_line "$WORK/notify.out" "^READY=1 "
  check "naming the address the node listens on" \
    grep -q "^READY=1 STATUS=listening on 127.0.0.1:$PORT$" "$WORK/notify.out"
  check "after the node listened" grep -q "listening on 127.0.0.1:$PORT" "$WORK/notified.log"
  check "the node logs it told the service manager" \
    grep -q "told the service manager the node is ready" "$WORK/notified.log"
  check "nothing says it is stopping yet" bash -c "! grep -q STOPPING '$WORK/notify.out'"
  kill -TERM "$NODE_PID"
  check "STOPPING=1 arrives on SIGTERM" wait_line "$WORK/notify.out" "^STOPPING=1"
  check "the node stops cleanly" wait_exit "$NODE_PID" 60
  check "with exit 0 (got $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
  kill "$LISTENER" 2>/dev/null; wait "$LISTENER" 2>/dev/null
}

test_without_a_notify_socket_the_node_says_nothing_of_it() {
  start_node alone || { CURRENT_OK=0; return; }
  check "no line about a service manager" \
    bash -c "! grep -q 'service manager' '$WORK/alone.log'"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_under_the_journal_each_line_carries_its_syslog_priority() {
  : >"$WORK/journal.log"
  local stream
  stream=$(stat -c '%d:%i' "$WORK/journal.log")
  JOURNAL_STREAM="$stream" start_node journal || { CURRENT_OK=0; return; }
  local port=$PORT
  check "info is priority 6" grep -q "^<6>listening on 127.0.0.1:$port" "$WORK/journal.log"
  check "a warning is priority 4" grep -q "^<4>no TLS" "$WORK/journal.log"
  check "no line has the text format's time (the journal adds its own)" \
    bash -c "! grep -q '^\\[' '$WORK/journal.log'"
  # A second node on the same port cannot listen: a critical line.
  : >"$WORK/busy.log"
  stream=$(stat -c '%d:%i' "$WORK/busy.log")
  JOURNAL_STREAM="$stream" "$NODE" --config-file="$ROOT/config/coalesce.ini" \
    --coalesce.port="$port" --coalesce.db-path="$WORK/busy.db" >"$WORK/busy.log" 2>&1
  check "a critical line is priority 2" grep -q "^<2>cannot listen" "$WORK/busy.log"
  # Output redirected elsewhere than the stream JOURNAL_STREAM names is no
  # journal: the text format.
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
  JOURNAL_STREAM="$stream" start_node redirected || { CURRENT_OK=0; return; }
  check "another file keeps the text format" \
    grep -Eq '^\[[0-9-]+ [0-9:.]+\] \[info\] listening on' "$WORK/redirected.log"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_json_log_lines_are_one_object_each() {
  start_node json --coalesce.log-format=json || { CURRENT_OK=0; return; }
  kill -TERM "$NODE_PID"
  check "the node stops cleanly" wait_exit "$NODE_PID" 60
  check "every line is an object with time, level and message" python3 - "$WORK/json.log" <<'PY'
import json, re, sys
# Sanitizer builds report on stderr, which the log file shares: those lines
# are not the node's log.
lines = [line for line in open(sys.argv[1], encoding="utf-8").read().splitlines()
         if ": runtime error: " not in line]
assert len(lines) > 5, len(lines)
levels = set()
for line in lines:
    entry = json.loads(line)
    assert set(entry) == {"time", "level", "message"}, entry
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d",
                        entry["time"]), entry["time"]
    levels.add(entry["level"])
assert {"info", "warning"} <= levels, levels
assert any(e.startswith("listening on 127.0.0.1:")
           for e in (json.loads(l)["message"] for l in lines))
PY
}

test_the_shipped_unit_verifies() {
  command -v systemd-analyze >/dev/null || { echo "    (no systemd-analyze: not checked)"; return; }
  sed -e "s|@CMAKE_INSTALL_FULL_BINDIR@|$BIN|" \
      -e "s|@CMAKE_INSTALL_FULL_SYSCONFDIR@|$ROOT/config|" \
      "$ROOT/config/coalesce-node.service.in" >"$WORK/coalesce-node.service"
  systemd-analyze verify "$WORK/coalesce-node.service" >"$WORK/verify.out" 2>&1
  local rc=$?
  check "systemd-analyze verify exits 0 (got $rc)" [ "$rc" = 0 ]
  check "and reports nothing" [ ! -s "$WORK/verify.out" ]
  check "it waits for the node's notification" grep -qx "Type=notify" "$WORK/coalesce-node.service"
  local stop
  stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$WORK/coalesce-node.service")
  local shutdown
  shutdown=$(sed -n 's/^shutdown-timeout = \([0-9]*\)s$/\1/p' "$ROOT/config/coalesce.ini")
  check "its stop timeout (${stop}s) exceeds the config's shutdown-timeout (${shutdown}s)" \
    [ "$stop" -gt "$shutdown" ]
}

run_test "the node tells the service manager it is ready and stopping"
run_test "without a notify socket the node says nothing of it"
run_test "under the journal each line carries its syslog priority"
run_test "json log lines are one object each"
run_test "the shipped unit verifies"
finish_tests
