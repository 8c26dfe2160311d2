#!/usr/bin/env bash
# Three coalesce-node processes on 127.0.0.1 with one coalesce.cluster list,
# each on mutual TLS (certificates from scripts/make-certs) and with its
# metrics port, driven by the real CLI with --nodes (the cluster client).
#   tests/app/cluster.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

command -v curl >/dev/null || { echo "curl is missing: skipped"; exit 77; }
CERTS="$WORK/certs"
"$ROOT/scripts/make-certs" "$CERTS" >/dev/null || { echo "make-certs failed"; exit 1; }
NODE_TLS=(--openssl.certificate="$CERTS/node.pem" --openssl.key="$CERTS/node-key.pem"
          --openssl.cafile="$CERTS/ca.pem")
CLI_TLS=(--openssl-certificate "$CERTS/client.pem" --openssl-key "$CERTS/client-key.pem"
         --openssl-cafile "$CERTS/ca.pem")

# Six ports free right now (the kernel's choice, released at once): each
# node listens on its own, fixed in the list every node and client shares,
# and serves its metrics on another.
PORTS=($(python3 -c '
import socket
socks = [socket.socket() for _ in range(6)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))'))
NODES="127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"
CLUSTER="[\"127.0.0.1:${PORTS[0]}\",\"127.0.0.1:${PORTS[1]}\",\"127.0.0.1:${PORTS[2]}\"]"
declare -A PID_OF

start_member() { # start_member I [ARGS...]: node ${GROUP}nI on PORTS[I], data in its .db
  local index="$1"
  shift
  start_node "${GROUP}n$index" --coalesce.port="${PORTS[$index]}" --coalesce.cluster="$CLUSTER" \
    --coalesce.metrics-port="${PORTS[$index + 3]}" "${NODE_TLS[@]}" "$@" || return 1
  set -- "$index"
  grep -q "listening on 127.0.0.1:${PORTS[$1]} (mutual TLS)" "$WORK/${GROUP}n$1.log" \
    || { echo "    node $1 does not listen with mutual TLS" >&2; return 1; }
  PID_OF[$1]=$NODE_PID
}

start_cluster() { # start_cluster GROUP [ARGS...]: three fresh nodes named GROUPn0..2
  GROUP="$1"
  shift
  start_member 0 "$@" && start_member 1 "$@" && start_member 2 "$@"
}

stop_cluster() {
  local i
  for i in 0 1 2; do
    kill -TERM "${PID_OF[$i]}" 2>/dev/null
  done
  for i in 0 1 2; do
    wait_exit "${PID_OF[$i]}" 60
  done
}

ccli() { # the CLI through the cluster client
  "$CLI" "${CLI_TLS[@]}" --nodes="$NODES" "$@"
}

tcli() { # the CLI with its certificate, to one node: tcli PORT ARGS...
  local port="$1"
  shift
  "$CLI" "${CLI_TLS[@]}" --port="$port" "$@"
}

metric() { # metric I NAME: node I's value of NAME, scraped now
  curl -sS --max-time 20 "http://127.0.0.1:${PORTS[$1 + 3]}/metrics" \
    | awk -v name="$2" '$1 == name { print $2 }'
}

index_of() { # index_of HOST:PORT: the member's index
  local i
  for i in 0 1 2; do
    [ "127.0.0.1:${PORTS[$i]}" = "$1" ] && echo "$i"
  done
}

# -- the tests ---------------------------------------------------------------

test_secrets_sessions_and_backfills_are_routed_to_their_owners() {
  local rc
  start_cluster routed- || { CURRENT_OK=0; return; }
  make_entries c 300 >"$WORK/entries.txt"
  check "put - through --nodes exits 0" ccli secret put - <"$WORK/entries.txt"
  check "get - reads every entry back in order" \
    cmp -s <(expected_lookups c 300) <(keys_of c 300 | ccli secret get -)
  check "flush reaches every node" ccli secret flush
  # Each node holds only its own chats: its written counter is the entries
  # of the chats it owns.
  local i chat owner
  declare -A expected=([0]=0 [1]=0 [2]=0)
  for ((i = 0; i < 7; i++)); do
    owner=$(index_of "$(ccli owner secret "chat$i@g.us")")
    expected[$owner]=$((expected[$owner] + $(grep -c "^chat$i@g.us " "$WORK/entries.txt")))
  done
  ccli stats --all >"$WORK/all.json"
  check "stats --all exits 0" [ $? = 0 ]
  for i in 0 1 2; do
    local written
    written=$(python3 -c "import json,sys; print(json.load(open('$WORK/all.json'))['127.0.0.1:${PORTS[$i]}']['secrets']['entries_written'])")
    check "node $i wrote exactly its chats' ${expected[$i]} entries (got $written)" \
      [ "$written" = "${expected[$i]}" ]
    written=$(metric "$i" coalesce_secret_entries_written_total)
    check "and its metrics say so (got $written)" [ "$written" = "${expected[$i]}" ]
  done
  # A client without a certificate is refused by every member.
  "$CLI" --nodes="$NODES" --timeout=3s secret get chat0@g.us sender0 c-0 2>"$WORK/plain.err"
  rc=$?
  check "a client without a certificate is refused (exit $rc)" [ "$rc" = 3 ]
  # A node asked directly for a key it does not own names the owner.
  owner=$(ccli owner secret chat0@g.us)
  local other=$(( ($(index_of "$owner") + 1) % 3 ))
  tcli "${PORTS[$other]}" secret get chat0@g.us sender0 c-0 2>"$WORK/foreign.err"
  rc=$?
  check "a direct get on a non-owner exits 4 (got $rc)" [ "$rc" = 4 ]
  check "it names the owner" grep -q "chat chat0@g.us belongs to $owner" "$WORK/foreign.err"
  # Sessions.
  printf 'state of s1\n' >"$WORK/s1.blob"
  check "session put through --nodes" ccli session put s1 "$WORK/s1.blob" --update u1:note:one
  check "session get reads it back" cmp -s "$WORK/s1.blob" <(ccli session get s1)
  owner=$(ccli owner session s1)
  other=$(( ($(index_of "$owner") + 1) % 3 ))
  tcli "${PORTS[$other]}" session get s1 2>"$WORK/foreign-session.err"
  check "a non-owner refuses the session naming $owner" \
    grep -q "session s1 belongs to $owner" "$WORK/foreign-session.err"
  # A room's timeline and its backfill.
  printf 'e1 m.room.create 1000 start\ne2 m.room.message 1001 hello\n' \
    | ccli timeline append '!r:x' >/dev/null
  check "timeline append through --nodes" [ "${PIPESTATUS[1]}" = 0 ]
  ccli backfill '!r:x' >"$WORK/backfill.out"
  check "the backfill through --nodes pages the room" grep -q "^e1 m.room.create 1000 start$" "$WORK/backfill.out"
  owner=$(ccli owner room '!r:x')
  check "the room's owner ran the backfill" \
    [ "$(python3 -c "import json; print(sum(json.load(open('/dev/stdin'))['127.0.0.1:${PORTS[$(index_of "$owner")]}']['scheduler']['finished'].values()))" < <(ccli stats --all))" = 1 ]
  stop_cluster
}

test_a_killed_node_fails_its_callers_the_others_serve_and_it_comes_back() {
  start_cluster killed- || { CURRENT_OK=0; return; }
  make_entries k 210 >"$WORK/entries.txt"
  check "put - exits 0" ccli secret put - <"$WORK/entries.txt"
  check "flush exits 0" ccli secret flush
  local dead_where dead
  dead_where=$(ccli owner secret chat0@g.us)
  dead=$(index_of "$dead_where")
  kill -KILL "${PID_OF[$dead]}"
  wait_exit "${PID_OF[$dead]}" 30
  local started=$SECONDS
  ccli --timeout=3s secret get chat0@g.us sender0 k-0 2>"$WORK/dead.err"
  local rc=$?
  check "a get for the dead node's key exits 3 (got $rc)" [ "$rc" = 3 ]
  check "within the timeout" [ $((SECONDS - started)) -le 5 ]
  check "the error names the dead node" grep -q "$dead_where" "$WORK/dead.err"
  local i served=0
  for ((i = 0; i < 7; i++)); do
    [ "$(ccli owner secret "chat$i@g.us")" = "$dead_where" ] && continue
    ccli secret get "chat$i@g.us" "sender$((i % 3))" "k-$i" >/dev/null && served=$((served + 1))
  done
  check "the other nodes serve their keys (served $served)" [ "$served" -gt 0 ]
  ccli stats --all >"$WORK/partial.json" 2>/dev/null
  rc=$?
  check "stats --all with a dead node exits 3 (got $rc)" [ "$rc" = 3 ]
  check "and still prints the others" \
    python3 -c "
import json; d = json.load(open('$WORK/partial.json'))
assert 'error' in d['$dead_where'], d
assert sum('uptime_s' in v for v in d.values()) == 2, d"
  start_member "$dead" || { CURRENT_OK=0; return; }
  check "restarted, its durable data is back" \
    [ "$(ccli secret get chat0@g.us sender0 k-0)" = "$(hex32 1) 1700000000" ]
  stop_cluster
}

# wait_log_count FILE PATTERN COUNT SECONDS: until FILE has COUNT lines
# matching PATTERN (a node's log line is the event waited for).
wait_log_count() {
  local deadline=$((SECONDS + $4))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
    sleep 0.05
  done
  return 1
}

test_a_node_counts_a_stopped_or_killed_peer_down_and_up_again() {
  start_cluster watch- --coalesce.peer-timeout=2s || { CURRENT_OK=0; return; }
  local log0="$WORK/watch-n0.log" peer2="127.0.0.1:${PORTS[2]}" started
  check "node 0 reaches both peers" wait_log_count "$log0" "peer .* is up" 2 30
  check "its stats count no peer down" \
    grep -q '"peers_down":0,"peer_losses":0' <<<"$(tcli "${PORTS[0]}" stats)"
  kill -STOP "${PID_OF[2]}"
  started=$SECONDS
  # A stopped process keeps its socket: only the 2 s ping timeout shows it.
  check "node 0 counts the stopped node down within 10 s" \
    wait_log_count "$log0" "peer $peer2 is down: did not answer a ping within 2s" 1 10
  echo "    counted down after $((SECONDS - started)) s"
  check "its stats: one peer down, one loss" \
    grep -q '"peers_down":1,"peer_losses":1' <<<"$(tcli "${PORTS[0]}" stats)"
  check "its metric coalesce_peers_down is 1" [ "$(metric 0 coalesce_peers_down)" = 1 ]
  check "and coalesce_peer_losses_total 1" [ "$(metric 0 coalesce_peer_losses_total)" = 1 ]
  kill -CONT "${PID_OF[2]}"
  check "the resumed node is up again within 10 s" \
    wait_log_count "$log0" "peer $peer2 is up" 2 10
  kill -KILL "${PID_OF[2]}"
  wait "${PID_OF[2]}" 2>/dev/null
  check "node 0 counts the killed node down within 10 s" \
    wait_log_count "$log0" "peer $peer2 is down: its connection was lost" 1 10
  start_member 2 --coalesce.peer-timeout=2s || { CURRENT_OK=0; return; }
  check "the restarted node is up again within 10 s" \
    wait_log_count "$log0" "peer $peer2 is up" 3 10
  check "its stats: no peer down, two losses" \
    grep -q '"peers_down":0,"peer_losses":2' <<<"$(tcli "${PORTS[0]}" stats)"
  stop_cluster
}

run_test "secrets sessions and backfills are routed to their owners"
run_test "a killed node fails its callers the others serve and it comes back"
run_test "a node counts a stopped or killed peer down and up again"

finish_tests
