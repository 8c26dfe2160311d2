#!/usr/bin/env bash
# A real full disk, not the seam: a real node's database on a small tmpfs
# whose rest is filled with a file, driven through the real CLI.
#   tests/app/disk_full.sh BIN_DIR [TEST_NAME_REGEX]
# Mounting needs root (CI runs as root). Where the mount is refused the
# script prints SKIPPED with the reason and exits 77, CTest's skip code:
# never a silent pass. The last line is "N passed, M failed".
set -u
source "$(dirname "$0")/process_helpers.sh"

DISK="$WORK/disk"
mkdir -p "$DISK"
if ! mount_error=$(mount -t tmpfs -o size=48m coalesce-disk-full "$DISK" 2>&1); then
  echo "SKIPPED: cannot mount a 48 MiB tmpfs: ${mount_error:-mount failed} (needs root)"
  exit 77
fi
extra_cleanup() {
  umount "$DISK" 2>/dev/null || umount -l "$DISK" 2>/dev/null
}

# fill_disk KIB: fills the tmpfs with a file, all but about KIB KiB.
fill_disk() {
  local avail
  avail=$(df --output=avail -k "$DISK" | tail -n 1 | tr -d ' ')
  local size=$((avail - $1))
  [ "$size" -gt 0 ] && fallocate -l "${size}K" "$DISK/filler"
}

# fill_disk_completely: takes every block still free, as a disk that stays
# full until an operator frees space. (A reopen after the first failure
# frees some: the failed WAL is deleted once its rows are flushed.)
fill_disk_completely() {
  dd if=/dev/zero of="$DISK/filler-rest" bs=64k 2>/dev/null
  true
}

free_disk() {
  rm -f "$DISK/filler" "$DISK/filler-rest"
}

# stat_of NAME: the first counter NAME in the node's stats.
stat_of() {
  cli stats 2>/dev/null | grep -o "\"$1\":[0-9]*" | head -n 1 | cut -d: -f2
}

stats_mention() {
  cli stats 2>/dev/null | grep -q "$1"
}

stat_positive() {
  [ "$(stat_of "$1")" -gt 0 ] 2>/dev/null
}

# wait_until DESCRIPTION SECONDS COMMAND...: polls COMMAND, a real event,
# until it succeeds or SECONDS pass.
wait_until() {
  local what="$1" limit="$2"
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then
      check "$what (within ${limit}s)" false
      return 1
    fi
    sleep 0.1
  done
  return 0
}

now_ms() {
  echo $(($(date +%s%N) / 1000000))
}

# found_prefix OUT EXPECTED: the lookups in OUT found a prefix of
# EXPECTED, exactly, and nothing after it; prints its length.
found_prefix() {
  local found
  found=$(grep -vc '^-$' "$1")
  cmp -s <(head -n "$found" "$2") <(head -n "$found" "$1") || return 1
  [ "$(tail -n +"$((found + 1))" "$1" | grep -vc '^-$')" = 0 ] || return 1
  echo "$found"
}

test_secrets_survive_a_full_disk() {
  DB_DIR="$DISK" start_node secrets || { CURRENT_OK=0; return; }
  make_entries A 1000 | cli secret put -
  check "a flush before the disk fills succeeds" cli secret flush
  fill_disk 512
  make_entries F 60000 >"$WORK/stream.in"
  cli --timeout=300s secret put - <"$WORK/stream.in" 2>"$WORK/stream.err" &
  local put_pid=$!
  wait_until "writes fail once the disk is full" 120 stat_positive failed_batches
  fill_disk_completely
  wait_until "the streaming put is back-pressured: producers wait" 60 \
    stat_positive waiting_producers
  wait_until "stats name the full disk" 30 stats_mention "No space left"
  check "the node process stays up" kill -0 "$NODE_PID"
  check "the streaming put is held, not failed" kill -0 "$put_pid"
  keys_of A 1000 | cli secret get - >"$WORK/a.out"
  expected_lookups A 1000 >"$WORK/a.expected"
  check "entries written before the fault are looked up during it" \
    cmp -s "$WORK/a.expected" "$WORK/a.out"
  local written pending
  written=$(stat_of entries_written)
  pending=$(stat_of pending)
  keys_of F 60000 | cli secret get - >"$WORK/f.out"
  expected_lookups F 60000 >"$WORK/f.expected"
  local found
  found=$(found_prefix "$WORK/f.out" "$WORK/f.expected")
  check "lookups during the fault answer the admitted prefix of the stream" [ -n "$found" ]
  check "pending entries included ($found found, $((written - 1000)) written, $pending pending)" \
    [ "${found:-0}" -ge $((written - 1000 + pending)) ] && [ "$pending" -gt 0 ]
  free_disk
  local freed
  freed=$(now_ms)
  check "a flush succeeds within 10 s of the space returning" \
    cli --timeout=10s secret flush
  echo "    recovery: a flush confirmed everything $(($(now_ms) - freed)) ms after the space returned"
  check "the streaming put finishes" wait_exit "$put_pid" 240
  check "with exit 0 (got $EXIT_CODE: $(cat "$WORK/stream.err"))" [ "$EXIT_CODE" = 0 ]
  check "a final flush succeeds" cli --timeout=30s secret flush
  keys_of F 60000 | cli secret get - >"$WORK/f.out"
  check "every streamed entry is present" cmp -s "$WORK/f.expected" "$WORK/f.out"
  kill -TERM "$NODE_PID"
  check "SIGTERM stops the node" wait_exit "$NODE_PID" 60
  check "with exit 0 (got $EXIT_CODE)" [ "$EXIT_CODE" = 0 ]
  DB_DIR="$DISK" start_node secrets || { CURRENT_OK=0; return; }
  keys_of A 1000 | cli secret get - >"$WORK/a.out"
  keys_of F 60000 | cli secret get - >"$WORK/f.out"
  check "after a restart, every entry is present" \
    cmp -s "$WORK/a.expected" "$WORK/a.out" && cmp -s "$WORK/f.expected" "$WORK/f.out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

# events PREFIX FROM TO: timeline event lines with about 1 KiB of text each.
events() {
  local body i
  body=$(printf 'x%.0s' $(seq 1 1000))
  for ((i = $2; i <= $3; i++)); do
    echo "$1$i m.room.message $((100000 + i)) $body"
  done
}

test_timeline_survives_a_full_disk() {
  rm -rf "$DISK"/secrets.db
  DB_DIR="$DISK" start_node timeline || { CURRENT_OK=0; return; }
  events e 1 10 >"$WORK/first.in"
  check "an append before the fault succeeds" cli timeline append '!full:x' <"$WORK/first.in"
  events o 1 5 | cli timeline append '!other:x'
  fill_disk 1024
  # Appends of 300 events (about 300 KiB) until the disk refuses one.
  local next=11 rc=0 calls=0
  while [ $calls -lt 40 ]; do
    events e "$next" $((next + 299)) >"$WORK/more.in"
    cli timeline append '!full:x' <"$WORK/more.in" 2>"$WORK/append.err"
    rc=$?
    calls=$((calls + 1))
    [ "$rc" != 0 ] && break
    next=$((next + 300))
  done
  check "the full disk refuses an append (exit $rc after $calls calls)" \
    [ "$rc" != 0 ] && [ "$rc" != 3 ]
  fill_disk_completely
  cli timeline append '!full:x' <"$WORK/more.in" 2>"$WORK/append.err"
  rc=$?
  check "a disk that stays full refuses appends (exit $rc)" \
    [ "$rc" != 0 ] && [ "$rc" != 3 ]
  check "with an error naming the storage failure: $(cat "$WORK/append.err")" \
    grep -qi "storage\|space\|recover" "$WORK/append.err"
  check "the node process stays up" kill -0 "$NODE_PID"
  cli --timeout=30s backfill '!other:x' >/dev/null 2>"$WORK/backfill.err"
  rc=$?
  check "a backfill during the fault is answered (exit $rc)" [ "$rc" != 3 ]
  check "the node still answers stats" cli stats >/dev/null
  free_disk
  local freed
  freed=$(now_ms)
  wait_until "an append succeeds within 10 s of the space returning" 10 \
    cli timeline append '!full:x' <"$WORK/more.in"
  echo "    recovery: an append succeeded $(($(now_ms) - freed)) ms after the space returned"
  kill -TERM "$NODE_PID"
  check "SIGTERM stops the node" wait_exit "$NODE_PID" 60
  DB_DIR="$DISK" start_node timeline || { CURRENT_OK=0; return; }
  { echo reached_timeline_start
    events e 1 $((next + 299)) | tac; } >"$WORK/backfill.expected"
  cli --timeout=60s backfill '!full:x' --batch-size=500 >"$WORK/backfill.out"
  check "after a restart, a backfill returns every appended event" \
    cmp -s "$WORK/backfill.expected" "$WORK/backfill.out"
  kill -TERM "$NODE_PID"; wait_exit "$NODE_PID" 60
}

run_test "secrets survive a full disk"
run_test "timeline survives a full disk"

finish_tests
