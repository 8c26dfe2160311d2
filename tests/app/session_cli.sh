#!/usr/bin/env bash
# The session persister through a real node on 127.0.0.1 and the real CLI.
#   tests/app/session_cli.sh BIN_DIR [TEST_NAME_REGEX]
# The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

# -- the tests ---------------------------------------------------------------

test_put_get_updates_delete_and_put_again() {
  start_node sessions || { CURRENT_OK=0; return; }
  printf 'state one\n' >"$WORK/one.blob"
  check "put exits 0" cli session put s1 "$WORK/one.blob" \
    --update u1:note:first --update "u2:note:second: with a colon"
  check "get prints the blob" cmp -s "$WORK/one.blob" <(cli session get s1)
  cli session updates s1 >"$WORK/updates.out"
  check "updates prints both rows" [ "$(wc -l <"$WORK/updates.out")" = 2 ]
  check "a row reads ID TIMESTAMP KIND PAYLOAD" \
    grep -Eq "^u2 [0-9]+ note second: with a colon$" "$WORK/updates.out"
  printf 'state two\n' >"$WORK/two.blob"
  check "a second put exits 0" cli session put s1 "$WORK/two.blob" --update u3:note:third
  check "get prints the newer blob" cmp -s "$WORK/two.blob" <(cli session get s1)
  check "the rows accumulate" [ "$(cli session updates s1 | wc -l)" = 3 ]
  check "delete exits 0" cli session delete s1
  cli session get s1 >/dev/null 2>"$WORK/deleted.err"
  local rc=$?
  check "get of a deleted session exits 1 (got $rc)" [ "$rc" = 1 ]
  check "stderr names the session" grep -q "no session s1" "$WORK/deleted.err"
  check "a put after the delete exits 0" cli session put s1 "$WORK/one.blob" --update u9:note:again
  check "the re-created session reads back" cmp -s "$WORK/one.blob" <(cli session get s1)
  check "only the new row is there" [ "$(cli session updates s1 | cut -d' ' -f1)" = u9 ]
  check "stats carries the persister's counters" \
    grep -q '"sessions":{"active_writers"' <(cli stats)
  kill -TERM "$NODE_PID"
  check "the node stops within its timeout" wait_exit "$NODE_PID" 60
  check "it exits 0 (got $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
  check "it logs that the persister flushed" grep -q "session persister flushed" "$WORK/sessions.log"
}

test_an_answered_put_survives_sigkill() {
  start_node killed || { CURRENT_OK=0; return; }
  head -c 100000 /dev/urandom >"$WORK/big.blob"
  check "put exits 0" cli session put big "$WORK/big.blob" --update a:k:1 --update b:k:2
  kill -KILL "$NODE_PID"
  wait_exit "$NODE_PID" 30
  start_node killed || { CURRENT_OK=0; return; }
  check "the blob is there after SIGKILL and restart" cmp -s "$WORK/big.blob" <(cli session get big)
  check "and so are its rows" [ "$(cli session updates big | cut -d' ' -f1 | paste -sd,)" = a,b ]
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

test_bad_session_input_is_refused_and_the_node_keeps_serving() {
  start_node bad || { CURRENT_OK=0; return; }
  printf 'x' >"$WORK/x.blob"
  cli session put "" "$WORK/x.blob" 2>"$WORK/empty.err"
  local rc=$?
  check "an empty session id exits 4 (got $rc)" [ "$rc" = 4 ]
  cli session put "$(printf 'a%.0s' {1..256})" "$WORK/x.blob" 2>"$WORK/long.err"
  rc=$?
  check "a 256-byte session id exits 4 (got $rc)" [ "$rc" = 4 ]
  cli session put s "$WORK/x.blob" --update nocolons 2>"$WORK/update.err"
  rc=$?
  check "a malformed --update exits 2 (got $rc)" [ "$rc" = 2 ]
  cli session get never >/dev/null 2>&1
  rc=$?
  check "get of an unknown session exits 1 (got $rc)" [ "$rc" = 1 ]
  check "the node still serves" cli session put ok "$WORK/x.blob"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

run_test "put get updates delete and put again"
run_test "an answered put survives sigkill"
run_test "bad session input is refused and the node keeps serving"
finish_tests
