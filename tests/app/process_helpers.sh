# Shared by the process tests (tests/app/*.sh): real node processes on
# 127.0.0.1 (port 0), driven with the real CLI. Source it with the test's
# arguments: BIN_DIR [TEST_NAME_REGEX].
# Every wait is for a real event (a log line, a process exit) with a
# generous deadline. A test script ends with `finish_tests`, whose last line
# is "N passed, M failed".
BIN="$(cd "${1:?usage: $(basename "$0") BIN_DIR [FILTER]}" && pwd)"
FILTER="${2:-.}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NODE="$BIN/coalesce-node"
CLI="$BIN/coalesce-cli"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/coalesce-$(basename "$0" .sh)-XXXXXX")"
PASSED=0
FAILED=0
NODE_PIDS=()

# A test script may define `extra_cleanup` (say, to unmount what it
# mounted); it runs after the nodes are killed, before $WORK is removed.
cleanup() {
  for pid in "${NODE_PIDS[@]}"; do
    kill -CONT "$pid" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
  done
  for pid in "${NODE_PIDS[@]}"; do
    wait "$pid" 2>/dev/null
  done
  declare -F extra_cleanup >/dev/null && extra_cleanup
  if [ -n "${KEEP_WORK:-}" ]; then
    echo "kept $WORK" >&2
    return
  fi
  # A failure that a rerun may not repeat needs its nodes' logs: they are
  # kept (not the databases) beside where the work directory was.
  if [ "$FAILED" -gt 0 ]; then
    local logs="$WORK-logs"
    mkdir -p "$logs"
    (cd "$WORK" && find . -name '*.log' | while read -r f; do
       mkdir -p "$logs/$(dirname "$f")" && cp "$f" "$logs/$f"; done)
    echo "kept the logs in $logs" >&2
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

check() { # check DESCRIPTION COMMAND...
  local what="$1"
  shift
  if "$@"; then
    return 0
  fi
  echo "    FAILED: $what" >&2
  CURRENT_OK=0
  return 1
}

# start_node NAME [ARGS...]: starts a node on a free port with its database
# in ${DB_DIR:-$WORK}/NAME.db; sets NODE_PID and PORT once it logs "listening on".
start_node() {
  local name="$1"
  shift
  local log="$WORK/$name.log"
  "$NODE" --config-file="$ROOT/config/coalesce.ini" --coalesce.port=0 \
    --coalesce.db-path="${DB_DIR:-$WORK}/$name.db" --coalesce.stats-interval=0s "$@" \
    >>"$log" 2>&1 &
  NODE_PID=$!
  NODE_PIDS+=("$NODE_PID")
  local deadline=$((SECONDS + 30))
  while [ $SECONDS -lt $deadline ]; do
    # One read of the log for both the count and the port: a restarted node
    # that logs in between must not leave PORT at the previous start's.
    local listening listening_lines
    listening=$(grep -o "listening on [0-9.]*:[0-9]*" "$log" 2>/dev/null)
    listening_lines=$(grep -c . <<<"$listening")
    PORT=$(tail -n 1 <<<"$listening" | sed 's/.*://')
    if [ -n "$PORT" ] && [ "$listening_lines" -ge "${EXPECTED_STARTS[$name]:-1}" ]; then
      EXPECTED_STARTS[$name]=$((listening_lines + 1))
      return 0
    fi
    if ! kill -0 "$NODE_PID" 2>/dev/null; then
      echo "    node $name exited during start-up:" >&2
      cat "$log" >&2
      return 1
    fi
    sleep 0.05
  done
  echo "    node $name did not log 'listening on' within 30s" >&2
  return 1
}
declare -A EXPECTED_STARTS

# sanitizer_build: whether the node is the ASan build, whose allocator keeps
# freed memory in quarantine (memory bounds hold for the normal build).
sanitizer_build() {
  ldd "$NODE" | grep -q libasan
}

# free_port: a port nothing listens on right now, from the kernel. Another
# process may take it before the node binds it: start_with_metrics retries.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_with_metrics NAME [ARGS...]: start_node with a free metrics port;
# sets METRICS_PORT. A port taken meanwhile (the node exits naming the
# key) is retried with another.
start_with_metrics() {
  local name="$1" attempt
  shift
  for attempt in 1 2 3; do
    METRICS_PORT=$(free_port)
    if start_node "$name" --coalesce.metrics-port="$METRICS_PORT" "$@" 2>/dev/null; then
      # "listening on" comes before the metrics start: wait for their line.
      local deadline=$((SECONDS + 30))
      while [ $SECONDS -lt $deadline ] && kill -0 "$NODE_PID" 2>/dev/null; do
        grep -q "metrics on 127.0.0.1:$METRICS_PORT" "$WORK/$name.log" && return 0
        sleep 0.05
      done
    fi
    wait_exit "$NODE_PID" 30
    grep -q "coalesce.metrics-port" "$WORK/$name.log" || break
  done
  echo "    node $name did not serve metrics:" >&2
  cat "$WORK/$name.log" >&2
  return 1
}

# wait_until SECONDS COMMAND...: until COMMAND succeeds (what it checks is
# the event waited for), for at most SECONDS.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  while [ $SECONDS -lt $deadline ]; do
    "$@" && return 0
    sleep 0.05
  done
  return 1
}

# log_count_reaches FILE PATTERN COUNT: whether FILE has COUNT lines
# matching PATTERN.
log_count_reaches() {
  [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "$3" ]
}

# wait_log_count FILE PATTERN COUNT SECONDS: until FILE has COUNT lines
# matching PATTERN (a node's log line is the event waited for).
wait_log_count() {
  wait_until "$4" log_count_reaches "$1" "$2" "$3"
}

# use_test_certificates: makes a CA, node and client certificates in
# $WORK/certs (scripts/make-certs) and sets NODE_TLS and CLI_TLS, the
# node's and the CLI's mutual-TLS arguments; exits the test if it cannot.
use_test_certificates() {
  CERTS="$WORK/certs"
  "$ROOT/scripts/make-certs" "$CERTS" >/dev/null || { echo "make-certs failed"; exit 1; }
  NODE_TLS=(--openssl.certificate="$CERTS/node.pem" --openssl.key="$CERTS/node-key.pem"
            --openssl.cafile="$CERTS/ca.pem")
  CLI_TLS=(--openssl-certificate "$CERTS/client.pem" --openssl-key "$CERTS/client-key.pem"
           --openssl-cafile "$CERTS/ca.pem")
}

# wait_exit PID SECONDS: waits for the process to end; sets EXIT_CODE.
wait_exit() {
  local pid="$1" limit="$2"
  local deadline=$((SECONDS + limit))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      EXIT_CODE=timeout
      return 1
    fi
    sleep 0.05
  done
  wait "$pid"
  EXIT_CODE=$?
  return 0
}

cli() {
  "$CLI" --port="$PORT" "$@"
}

hex32() { # hex32 N: a 32-byte secret derived from N
  printf '%064x' "$1"
}

# The secrets are printf's own %064x, not $(hex32 ...): a subshell per line
# costs several milliseconds where fork is slow, minutes for 60,000 lines.
make_entries() { # make_entries PREFIX COUNT: entry lines on stdout
  local i
  for ((i = 0; i < $2; i++)); do
    printf 'chat%d@g.us sender%d %s-%d %064x 0 %d\n' $((i % 7)) $((i % 3)) \
      "$1" "$i" $((i + 1)) $((1700000000 + i))
  done
}

expected_lookups() { # the `secret get -` output for make_entries
  local i
  for ((i = 0; i < $2; i++)); do
    printf '%064x %d\n' $((i + 1)) $((1700000000 + i))
  done
}

keys_of() { # keys_of PREFIX COUNT
  local i
  for ((i = 0; i < $2; i++)); do
    echo "chat$((i % 7))@g.us sender$((i % 3)) $1-$i"
  done
}

run_test() {
  local name="$1"
  [[ "$name" =~ $FILTER ]] || return 0
  CURRENT_OK=1
  echo "- $name"
  "test_${name// /_}"
  if [ "$CURRENT_OK" = 1 ]; then
    PASSED=$((PASSED + 1))
  else
    FAILED=$((FAILED + 1))
  fi
}

# finish_tests: prints the closing line; fails when a test failed or none ran.
finish_tests() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" = 0 ] && [ "$PASSED" -gt 0 ]
}
