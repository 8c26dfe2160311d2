#!/usr/bin/env bash
# The replicas' fault campaign (tests/app/replica_campaign.py) with three and
# with five coalesce-node processes on mutual TLS: one fault at a time
# (SIGKILL of the hot chat's coordinator, SIGKILL during catch-up,
# SIGSTOP/SIGCONT, a wiped data directory), then a whole-cluster crash after
# a flush; the checker compares what the nodes answer with the record kept
# outside them.
#   tests/app/replica_faults.sh BIN_DIR [TEST_NAME_REGEX]
# CYCLES (default 20) sets the faults per campaign, RESTART_DELAY ("MIN MAX"
# seconds, default "1 3") how long a killed or stopped node stays so, SEED
# the campaigns' seed, CAMPAIGNS (default "3 5 membership") which campaigns
# run, by their number of nodes, or "membership": the list changed under
# load first (3 -> 4 -> 5 nodes with an old member SIGKILLed as one joins,
# one replaced with its successor SIGKILLed during its catch-up, back to 3),
# then the faults on the three nodes left.
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

CERTS="$WORK/certs"
"$ROOT/scripts/make-certs" "$CERTS" >/dev/null || { echo "make-certs failed"; exit 1; }
CYCLES="${CYCLES:-20}"
read -r MIN_DELAY MAX_DELAY <<<"${RESTART_DELAY:-1 3}"
SEED="${SEED:-$(date +%s)}"
CAMPAIGNS=" ${CAMPAIGNS:-3 5 membership} "

campaign() { # campaign NAME NODES [ARGS...]: its work in $WORK/nodes-NAME
  local name="$1" nodes="$2"
  shift 2
  mkdir -p "$WORK/nodes-$name"
  python3 "$ROOT/tests/app/replica_campaign.py" --bin "$BIN" --root "$ROOT" \
    --work "$WORK/nodes-$name" --certs "$CERTS" --nodes "$nodes" --cycles "$CYCLES" \
    --seed "$SEED" --min-delay "$MIN_DELAY" --max-delay "$MAX_DELAY" "$@" \
    >"$WORK/campaign-$name.out" 2>&1
  local rc=$?
  tail -n 1 "$WORK/campaign-$name.out"
  if [ "$rc" != 0 ]; then
    tail -n 20 "$WORK/campaign-$name.out" >&2
    for log in "$WORK/nodes-$name"/n*.log; do
      echo "--- $log (last lines)" >&2
      tail -n 15 "$log" >&2
    done
  fi
  return "$rc"
}

test_three_nodes_lose_no_answered_write_under_faults() {
  check "the campaign with three nodes (seed $SEED) found nothing lost or stale" campaign 3 3
}

test_five_nodes_lose_no_answered_write_under_faults() {
  check "the campaign with five nodes (seed $SEED) found nothing lost or stale" campaign 5 5
}

test_a_list_changed_under_load_loses_no_answered_write() {
  check "the membership campaign (seed $SEED) found nothing lost or stale" \
    campaign membership 3 --membership
}

[[ "$CAMPAIGNS" == *" 3 "* ]] && run_test "three nodes lose no answered write under faults"
[[ "$CAMPAIGNS" == *" 5 "* ]] && run_test "five nodes lose no answered write under faults"
[[ "$CAMPAIGNS" == *" membership "* ]] && run_test "a list changed under load loses no answered write"

finish_tests
