#!/usr/bin/env bash
# A network partition between real coalesce-node processes: three nodes on
# mutual TLS, each in a network namespace of its own (made by the test, on
# this machine only) joined by a bridge, and one of them cut off by taking
# its link down. Needs root and `ip` (netns, veth, bridge): skipped (77)
# where they are not available.
#   tests/app/partition.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

command -v ip >/dev/null || { echo "ip is missing: skipped"; exit 77; }
TAG=$(( $$ % 100000 ))
NET="10.213.$(( $$ % 250 ))"
BRIDGE="cbr$TAG"
ns_of() { echo "coal$TAG-$1"; }
ip netns add "$(ns_of probe)" 2>/dev/null || { echo "cannot make network namespaces: skipped"; exit 77; }
ip netns del "$(ns_of probe)"

extra_cleanup() {
  local i
  for i in 0 1 2; do ip netns del "$(ns_of $i)" 2>/dev/null; done
  ip link del "$BRIDGE" 2>/dev/null
}

# The bridge in this namespace (the clients' side, $NET.254) and one
# namespace per node ($NET.1 to .3), each joined by a veth pair whose outer
# end, cv${TAG}o$i, is the link a partition takes down.
make_network() {
  ip link add "$BRIDGE" type bridge || return 1
  ip addr add "$NET.254/24" dev "$BRIDGE" && ip link set "$BRIDGE" up || return 1
  local i
  for i in 0 1 2; do
    ip netns add "$(ns_of $i)" || return 1
    ip link add "cv${TAG}o$i" type veth peer name "cv${TAG}i$i" || return 1
    ip link set "cv${TAG}i$i" netns "$(ns_of $i)" || return 1
    ip link set "cv${TAG}o$i" master "$BRIDGE" && ip link set "cv${TAG}o$i" up || return 1
    ip -n "$(ns_of $i)" addr add "$NET.$((i + 1))/24" dev "cv${TAG}i$i" || return 1
    ip -n "$(ns_of $i)" link set "cv${TAG}i$i" up && ip -n "$(ns_of $i)" link set lo up || return 1
  done
}
make_network || { echo "cannot build the test network: skipped"; exit 77; }

use_test_certificates
ADDR=("$NET.1:4301" "$NET.2:4301" "$NET.3:4301")
NODES="${ADDR[0]},${ADDR[1]},${ADDR[2]}"
CLUSTER="[\"${ADDR[0]}\",\"${ADDR[1]}\",\"${ADDR[2]}\"]"
declare -A PID_OF

start_member() { # start_member I: node I in its namespace, logging to nI.log
  local i="$1" log="$WORK/n$1.log"
  ip netns exec "$(ns_of "$i")" "$NODE" --config-file="$ROOT/config/coalesce.ini" \
    --coalesce.host="$NET.$((i + 1))" --coalesce.port=4301 \
    --coalesce.db-path="$WORK/n$i.db" --coalesce.stats-interval=0s \
    --coalesce.cluster="$CLUSTER" --coalesce.peer-timeout=1s \
    --coalesce.anti-entropy-interval=2s "${NODE_TLS[@]}" >>"$log" 2>&1 &
  PID_OF[$i]=$!
  NODE_PIDS+=("$!")
  wait_log_count "$log" "listening on $NET.$((i + 1)):4301" 1 30
}

# Every CLI run is bounded from outside too: one that outlives its own
# --timeout is a failure of the test, not a hang of it.
ccli() { timeout 60 "$CLI" "${CLI_TLS[@]}" --nodes="$NODES" "$@"; }

# inside I ARGS...: the CLI run in node I's namespace, to node I alone.
inside() {
  local i="$1"
  shift
  timeout 60 ip netns exec "$(ns_of "$i")" "$CLI" "${CLI_TLS[@]}" --host="$NET.$((i + 1))" --port=4301 "$@"
}

index_of() {
  local i
  for i in 0 1 2; do [ "${ADDR[$i]}" = "$1" ] && echo "$i"; done
}

written_by() { # written_by I: entries node I wrote itself
  inside "$1" stats | python3 -c "import json,sys; print(json.load(sys.stdin)['secrets']['entries_written'])"
}

test_a_cut_off_replica_refuses_and_catches_up_once_the_partition_heals() {
  local i
  for i in 0 1 2; do start_member "$i" || { CURRENT_OK=0; return; }; done
  for i in 0 1 2; do
    check "node $i caught up" wait_log_count "$WORK/n$i.log" "secrets: \(caught up\|refilled\)" 1 30 \
      || return
  done
  make_entries p 60 | sed 's/^chat[0-9]*@g.us/part@g.us/' >"$WORK/before.txt"
  check "a put before the partition is answered" ccli secret put - <"$WORK/before.txt"
  local cut
  cut=$(index_of "$(ccli owner secret part@g.us | head -n 1)")
  check "a flush before the partition is answered" ccli secret flush
  local before
  before=$(written_by "$cut")
  ip link set "cv${TAG}o$cut" down
  # The majority side serves the chat: the client fails over from the cut
  # node after its share of the timeout.
  make_entries q 60 | sed 's/^chat[0-9]*@g.us/part@g.us/' >"$WORK/during.txt"
  check "through the majority side, a put during the partition is answered" \
    ccli --timeout=9s secret put - <"$WORK/during.txt"
  check "and read back" \
    cmp -s <(expected_lookups q 60) \
           <(keys_of q 60 | sed 's/^chat[0-9]*@g.us/part@g.us/' | ccli --timeout=9s secret get -)
  # The cut-off node acknowledges nothing: it cannot reach a majority.
  local started=$SECONDS rc
  inside "$cut" --timeout=4s secret put part@g.us sender0 minority "$(hex32 77)" 0 1700000077 \
    2>"$WORK/minority-put.err"
  rc=$?
  check "on the cut-off side a put is refused, exit 4 (got $rc)" [ "$rc" = 4 ]
  check "saying no majority answered" grep -q "no majority of the key's replicas answered" "$WORK/minority-put.err"
  inside "$cut" --timeout=4s secret get part@g.us sender0 q-0 2>"$WORK/minority-get.err" >/dev/null
  rc=$?
  check "and so is a get, exit 4 (got $rc)" [ "$rc" = 4 ]
  check "both within their timeout" [ $((SECONDS - started)) -le 10 ]
  ip link set "cv${TAG}o$cut" up
  # Healed, the cut-off node gets the 60 captures it missed: the copies its
  # peers sent meanwhile (TCP kept them; their requests had timed out), or
  # else its next anti-entropy pass (every 2 s here).
  local after=0 deadline=$((SECONDS + 30))
  while [ $SECONDS -lt $deadline ]; do
    inside "$cut" --timeout=20s secret flush >/dev/null 2>&1
    after=$(written_by "$cut")
    [ $((after - before)) -ge 60 ] && break
    sleep 0.5
  done
  check "healed, the cut-off node wrote the 60 it missed within 30 s ($before before, $after after)" \
    [ $((after - before)) -ge 60 ]
  check "and it reads every capture of both sides back" \
    cmp -s <(expected_lookups q 60) \
           <(keys_of q 60 | sed 's/^chat[0-9]*@g.us/part@g.us/' | inside "$cut" secret get -)
  for i in 0 1 2; do kill -TERM "${PID_OF[$i]}"; done
  for i in 0 1 2; do wait_exit "${PID_OF[$i]}" 60; done
}

run_test "a cut off replica refuses and catches up once the partition heals"

finish_tests
