#!/usr/bin/env bash
# Bad configuration: every key of coalesce-node, read from its --long-help
# (so a key added tomorrow is tried too), with a value of the wrong type, a
# negative one and an out-of-range one, in the config file and on the
# command line; missing and broken files; a key set twice. Each must stop
# start-up with exit code 1 and a message naming the key: never a crash,
# never a node that starts with a value it did not understand. The ASan
# build tries every wrong value once per type, not once per key.
#   tests/app/bad_config.sh BIN_DIR [TEST_NAME_REGEX]
set -u
source "$(dirname "$0")/process_helpers.sh"

TRIED=0
CRASHES=0
STARTED=0
SANITIZED=
sanitizer_build && SANITIZED=1

# refuse_start WHAT NAME ARGS...: the node started with ARGS must exit 1
# within 30 s, naming NAME, without listening or creating its database.
refuse_start() {
  local what="$1" name="$2"
  shift 2
  local log="$WORK/refused.log" db="$WORK/never.db"
  TRIED=$((TRIED + 1))
  "$NODE" --coalesce.db-path="$db" --coalesce.port=0 "$@" >"$log" 2>&1 &
  local pid=$!
  NODE_PIDS+=("$pid")
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
    grep -q "listening on" "$log" && break
    sleep 0.02
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    STARTED=$((STARTED + 1))
    check "$what: start-up refused, but the node started" false
    rm -rf "$db"
    return
  fi
  wait "$pid"
  local rc=$?
  ((rc >= 128)) && CRASHES=$((CRASHES + 1))
  check "$what: exit 1 (got $rc: $(tail -n 3 "$log"))" [ "$rc" = 1 ]
  check "$what: the message names $name ($(tail -n 1 "$log"))" \
    grep -qF -- "$name" "$log"
  check "$what: no database was created" [ ! -e "$db" ]
  rm -rf "$db"
}

# KEY TYPE for every --coalesce.KEY=<TYPE> line of the node's --long-help.
keys_with_types() {
  "$NODE" --long-help 2>&1 | sed -n 's/^ *--coalesce\.\([a-z-]*\)=<\([^>]*\)>.*/\1 \2/p'
}

# The values of the wrong type for TYPE, one per line: a file's value
# (CAF's INI syntax) before the "|", the command line's after it.
wrong_type_values() {
  case "$1" in
    uint16) printf '%s\n' '"abc"|abc' '-1|-1' '1.5|1.5' '65536|65536' '[1]|[1]' ;;
    uint64) printf '%s\n' '"abc"|abc' '-1|-1' '1.5|1.5' \
      '18446744073709551616|18446744073709551616' '[1]|[1]' ;;
    timespan) printf '%s\n' '"5s"|soon' '5|5' '-1s|-1s' '[5s]|5x' ;;
    string) printf '%s\n' '5|' '[1]|' '1s|' ;;
    "list of string") printf '%s\n' '"127.0.0.1:4300"|' '[1, 2]|' '5|' ;;
    *) echo "no wrong values for type $1" >&2; return 1 ;;
  esac
}

test_every_key_with_a_wrong_type_is_refused_naming_it() {
  local key type file_value line_value values covered=0
  local file="$WORK/wrong-type.ini"
  # Types whose every wrong value was tried. Under ASan a start takes ten
  # times as long, and the parsing of a value depends on its type alone:
  # there every wrong value of a type goes to its first key, the first one
  # to every other key of the type.
  local -A tried_type=()
  while read -r key type; do
    covered=$((covered + 1))
    values=$(wrong_type_values "$type")
    [ -n "$SANITIZED" ] && [ -n "${tried_type[$type]:-}" ] \
      && values=$(head -n 1 <<<"$values")
    tried_type[$type]=1
    while IFS='|' read -r file_value line_value; do
      printf '[coalesce]\n%s = %s\n' "$key" "$file_value" >"$file"
      refuse_start "file: $key = $file_value" "coalesce.$key" --config-file="$file"
      # A string on the command line is never of the wrong type.
      [ -n "$line_value" ] || continue
      refuse_start "--coalesce.$key=$line_value" "coalesce.$key" \
        --config-file="$ROOT/config/coalesce.ini" "--coalesce.$key=$line_value"
    done <<<"$values"
  done < <(keys_with_types)
  echo "    $covered keys"
  check "the node's --long-help lists the keys (got $covered)" [ "$covered" -ge 20 ]
}

# KEY VALUE pairs the types allow but the node must not: a zero, a value
# beyond its range, a name it does not know. Given on the command line.
out_of_range_values() {
  cat <<'EOF'
db-path|
durability|fast
secrets-pending-limit|0
secrets-retry-base|0s
secrets-retry-max|6s
secrets-retry-max|1ms
scheduler-max-concurrent|0
scheduler-max-queued|0
scheduler-pager-timeout|0s
scheduler-results-memory|0
scheduler-remote-pager|nohost
scheduler-remote-pager|127.0.0.1:0
scheduler-remote-pager|127.0.0.1:70000
persister-max-blob|0
persister-max-update|0
persister-io-workers|0
persister-io-workers|65
persister-snapshot-timeout|0s
persister-idle-writers|1000001
log-level|loud
log-format|xml
tls-min-version|1.1
tls-ciphers|NOPE
host|
host|10.1.2.3
shutdown-timeout|0s
stats-interval|-1s
metrics-port|4300
cluster|["nohost"]
cluster|["127.0.0.1:0"]
cluster|["127.0.0.1:4301"]
peer-timeout|0s
EOF
}

test_every_out_of_range_value_is_refused_naming_its_key() {
  local key value known
  known=$(keys_with_types | cut -d' ' -f1)
  while IFS='|' read -r key value; do
    check "$key is a key of the node" grep -qx -- "$key" <<<"$known" || continue
    # The node's own port is fixed here so that metrics-port and cluster
    # can be compared with it.
    refuse_start "--coalesce.$key=$value" "coalesce.$key" \
      --config-file="$ROOT/config/coalesce.ini" --coalesce.port=4300 \
      "--coalesce.$key=$value"
  done < <(out_of_range_values)
}

# refuse_file WHAT NAME CONTENT: a config file holding CONTENT (printf's
# escapes); FILE in NAME stands for the file's path.
refuse_file() {
  local file="$WORK/file-$((TRIED + 1)).ini"
  printf '%b' "$3" >"$file"
  refuse_start "$1" "${2//FILE/$file}" --config-file="$file"
}

# refuse_database WHAT DIR: a database directory that cannot be opened; the
# node gets as far as opening it, so the database check of refuse_start
# does not apply.
refuse_database() {
  local log="$WORK/db.log"
  TRIED=$((TRIED + 1))
  "$NODE" --config-file="$ROOT/config/coalesce.ini" --coalesce.port=0 \
    --coalesce.db-path="$2" >"$log" 2>&1
  local rc=$?
  check "$1: exit 1 (got $rc)" [ "$rc" = 1 ]
  check "$1: naming coalesce.db-path ($(tail -n 1 "$log"))" \
    grep -qF "coalesce.db-path = \"$2\"" "$log"
}

test_missing_and_broken_files_are_refused_naming_them() {
  local ini="$ROOT/config/coalesce.ini"
  refuse_start "a config file that does not exist" "$WORK/none.ini" \
    --config-file="$WORK/none.ini"
  mkdir -p "$WORK/a-directory.ini"
  refuse_start "a config file that is a directory" "$WORK/a-directory.ini" \
    --config-file="$WORK/a-directory.ini"
  refuse_file "a section left open" FILE '[coalesce\nport = 1\n'
  refuse_file "a key without a value" FILE '[coalesce]\nport = \n'
  refuse_file "a nested section" coalesce.nested '[coalesce]\n[coalesce.nested]\nport = 1\n'
  refuse_file "an unknown key in the file" coalesce.nope '[coalesce]\nnope = 1\n'
  refuse_start "an unknown key on the command line" "coalesce.nope" \
    --config-file="$ini" --coalesce.nope=1
  refuse_start "a key without its value" "coalesce.port" \
    --config-file="$ini" --coalesce.port
  refuse_start "a stray argument" "stray" --config-file="$ini" stray
  # CAF would fall back to work stealing with a line on stderr.
  refuse_start "a scheduler policy CAF does not know" "scheduler.policy" \
    --config-file="$ini" --scheduler.policy=fastest
  refuse_file "a scheduler policy CAF does not know, in the file" \
    scheduler.policy "[scheduler]\npolicy = 'fastest'\n"
  refuse_file "a scheduler policy in double quotes, which CAF ignores" \
    scheduler.policy '[scheduler]\npolicy = "stealing"\n'
  refuse_database "a database under a missing directory" "$WORK/no/such/parent/db"
  : >"$WORK/a-file"
  refuse_database "a database where a file is" "$WORK/a-file"
}

test_a_port_in_use_is_refused_naming_the_key() {
  start_node holder || { CURRENT_OK=0; return; }
  local log="$WORK/port-in-use.log"
  TRIED=$((TRIED + 1))
  "$NODE" --config-file="$ROOT/config/coalesce.ini" --coalesce.port="$PORT" \
    --coalesce.db-path="$WORK/second.db" >"$log" 2>&1
  local rc=$?
  check "a second node on a taken port exits 1 (got $rc)" [ "$rc" = 1 ]
  check "naming coalesce.port ($(tail -n 1 "$log"))" \
    grep -q "coalesce.host:coalesce.port = 127.0.0.1:$PORT" "$log"
}

test_a_key_set_twice_is_refused_naming_it() {
  # CAF's reader keeps one of the two values without a word.
  refuse_file "a key set twice" "coalesce.secrets-pending-limit is set twice" \
    '[coalesce]\nsecrets-pending-limit = 1\nsecrets-pending-limit = 2\n'
  refuse_file "a key set twice in two sections" "coalesce.port is set twice" \
    '[coalesce]\nport = 1\n[openssl]\ncafile = "a"\n[coalesce]\nport = 2\n'
}

test_every_tls_file_that_is_missing_is_refused_naming_its_key() {
  local certs="$WORK/certs"
  "$ROOT/scripts/make-certs" "$certs" >/dev/null 2>&1 \
    || { check "scripts/make-certs makes the certificates" false; return; }
  local -A good=([certificate]="$certs/node.pem" [key]="$certs/node-key.pem"
                 [cafile]="$certs/ca.pem")
  local missing name args
  for missing in certificate key cafile; do
    args=()
    for name in certificate key cafile; do
      if [ "$name" = "$missing" ]; then
        args+=("--openssl.$name=$WORK/none.pem")
      else
        args+=("--openssl.$name=${good[$name]}")
      fi
    done
    refuse_start "openssl.$missing missing" "openssl.$missing" \
      --config-file="$ROOT/config/coalesce.ini" "${args[@]}"
    printf '[openssl]\n%s = 5\n' "$missing" >"$WORK/tls-type.ini"
    refuse_start "file: openssl.$missing = 5" "openssl.$missing" \
      --config-file="$WORK/tls-type.ini"
  done
}

run_test "every key with a wrong type is refused naming it"
run_test "every out of range value is refused naming its key"
run_test "missing and broken files are refused naming them"
run_test "a port in use is refused naming the key"
run_test "a key set twice is refused naming it"
run_test "every tls file that is missing is refused naming its key"
echo "bad configurations tried: $TRIED, crashes: $CRASHES, nodes that started: $STARTED"
finish_tests
