#!/usr/bin/env python3
"""A fault campaign against replicated secrets and sessions, checked from
outside.

Starts N coalesce-node processes on 127.0.0.1 (one coalesce.cluster list,
`replicas` 3, mutual TLS), drives a load through the real CLI's cluster
client, and keeps its own record of every request made and every answer got.
Meanwhile it injects one fault at a time, at random moments, each healed
before the next:

- kill:      SIGKILL the hot chat's coordinator, restart it after a delay;
- catch-up:  SIGKILL a node, restart it, SIGKILL it again during its
             catch-up, restart it;
- stop:      SIGSTOP a node (a hung peer only timeouts show), SIGCONT it
             after a delay;
- wipe:      SIGKILL a node, delete its data directory, restart it empty.

With --membership the list changes under the load first, one step at a
time as docs/operating.md says (joining nodes start first with the new list
and an empty directory, then every other member restarts under it, each
caught up before the next, leaving nodes stop last), over a pool of six
nodes: 3 -> 4 (n3 joins), -> 5 (n4 joins while an old member is SIGKILLed
and restarted: a sender of its handoff), n1 replaced by n5 (n1 killed and
its directory deleted; n5 SIGKILLed during its catch-up and restarted: the
receiver), back to 4 and 3 (n3, then n4, removed). Each step's time is in
the result. The faults follow on the final three.

A second load puts sessions (`session put`: a register, then a persist of a
new blob with one new update row), hot ones and cold ones written once
before the faults. A third appends events to rooms (1-3 at a time, a hot
room among them) and backfills other rooms, filled before the faults, a
few events at a time; cold rooms are appended to once before the faults.

Then, with every node back and caught up, the checker reads every key
through the cluster client and through each of its replicas as coordinator:
each must answer the newest capture whose `put` was answered, or one
attempted after it (an unanswered attempt may or may not have landed),
never an older one and never nothing. Each session must give the blob of
its newest answered put, or of a put attempted after it, and hold the
update row of every answered put. Each appended room, read whole
(`timeline page`, which moves nothing) through the cluster client and
through each replica, must hold every answered append's events, together,
in the order the appends were answered. Each backfilled room, backfilled
to its start at the end, must have had every event delivered by some
backfill, but for at most one batch per backfill whose answer was lost
with its node (its run may have delivered them to nobody), and no
backfill may deliver an event at or above the oldest one a backfill
answered before it started (the answered position holds). Last, it
answers a flush, kills every node at once (everything held in memory is
gone), restarts them all, and checks that every capture answered before
that flush is still read, and every room holds every answered append.

It prints one JSON object of counts on its last line and exits 1 when an
answered write was lost or a stale value was read.
"""

import argparse
import json
import os
import re
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

CHATS = [f"campaign{i}@g.us" for i in range(12)]
# Written once before the faults and never again: only the replicas' copies,
# catch-up and repair keep them.
COLD_CHATS = [f"cold{i}@g.us" for i in range(16)]
HOT_CHAT = CHATS[0]
MSG_IDS = [f"m{i}" for i in range(8)]
SENDER = "s@s.whatsapp.net"
SESSIONS = [f"campaign-s{i}" for i in range(6)]
HOT_SESSION = SESSIONS[0]
COLD_SESSIONS = [f"cold-s{i}" for i in range(8)]
# Events one load backfill delivers at most (one batch of this size).
BACKFILL_BATCH = 3
APPEND_ROOMS = [f"!campaign-a{i}:x" for i in range(4)]
HOT_ROOM = APPEND_ROOMS[0]
BACKFILL_ROOMS = [f"!campaign-b{i}:x" for i in range(2)]
# Appended once before the faults and never again: only a replica's
# catch-up gives them back to a wiped node before the next one is wiped.
COLD_ROOMS = [f"!campaign-c{i}:x" for i in range(6)]
BACKFILL_EVENTS = 300


def hex32(n):
    return f"{n:064x}"


class Node:
    def __init__(self, campaign, index, port):
        self.campaign = campaign
        self.index = index
        self.port = port
        self.where = f"127.0.0.1:{port}"
        self.db = os.path.join(campaign.work, f"n{index}.db")
        self.log = os.path.join(campaign.work, f"n{index}.log")
        self.proc = None
        self.starts = 0
        # The cluster list it starts with; the campaign's when None.
        self.cluster_list = None

    def start(self):
        c = self.campaign
        c.trace(f"n{self.index} starts ({self.cluster_list or c.cluster_list})")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [c.bin + "/coalesce-node",
                 f"--config-file={c.root}/config/coalesce.ini",
                 f"--coalesce.port={self.port}",
                 f"--coalesce.db-path={self.db}",
                 "--coalesce.stats-interval=0s",
                 f"--coalesce.cluster={self.cluster_list or c.cluster_list}",
                 f"--coalesce.peer-timeout={c.peer_timeout}",
                 "--coalesce.replicas=3",
                 f"--coalesce.log-level={c.log_level}"] + c.node_tls
                + c.membership_args,
                stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(self.log, errors="replace") as f:
                if f.read().count(f"listening on 127.0.0.1:{self.port}") >= self.starts:
                    c.trace(f"n{self.index} listens")
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.index} exited during start-up")
            time.sleep(0.05)
        raise RuntimeError(f"node {self.index} did not listen within 30 s")

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.campaign.trace(f"n{self.index} {signal.Signals(sig).name}")
            self.proc.send_signal(sig)

    def stop(self):
        """SIGTERM, and wait for the clean stop."""
        if self.proc and self.proc.poll() is None:
            self.campaign.trace(f"n{self.index} SIGTERM")
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.campaign.trace(f"n{self.index} SIGKILL")
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stats(self):
        """The node's stats, or None when it does not answer."""
        rc, out, _ = self.campaign.cli(["--port", str(self.port), "stats"],
                                       timeout="3s")
        if rc != 0:
            return None
        try:
            return json.loads(out)
        except ValueError:
            return None

    def caught_up(self):
        """Whether the node answers its stats and is not catching up."""
        stats = self.stats()
        return stats is not None and stats.get("catching_up") == 0


class Campaign:
    def __init__(self, args):
        self.bin = os.path.abspath(args.bin)
        self.root = os.path.abspath(args.root)
        self.work = args.work
        # What the campaign did when, stamped like the nodes' logs so that
        # a failure's diagnosis can lay the two side by side (a name ending
        # in .log: a failed run keeps it).
        self.trace_lock = threading.Lock()
        self.trace_file = open(os.path.join(self.work, "campaign-trace.log"),
                               "a", buffering=1)
        # Faults and load draw from their own generators, so that the seed
        # alone decides which faults come in which order.
        self.rng = random.Random(args.seed)
        self.load_rng = random.Random(args.seed + 1)
        self.args = args
        self.peer_timeout = "1s"
        certs = args.certs
        self.node_tls = [f"--openssl.certificate={certs}/node.pem",
                         f"--openssl.key={certs}/node-key.pem",
                         f"--openssl.cafile={certs}/ca.pem"]
        self.cli_tls = ["--openssl-certificate", f"{certs}/client.pem",
                        "--openssl-key", f"{certs}/client-key.pem",
                        "--openssl-cafile", f"{certs}/ca.pem"]
        # A membership campaign grows and shrinks the list over a pool of
        # six nodes, three listed at first.
        pool = 6 if args.membership else args.nodes
        ports = free_ports(pool)
        self.pool = [Node(self, i, p) for i, p in enumerate(ports)]
        self.nodes = self.pool[:args.nodes]
        self.cluster_list = json.dumps([n.where for n in self.nodes])
        self.nodes_arg = ",".join(n.where for n in self.nodes)
        self.changes = []
        # While the list changes, each node looks every 5 s for keys it
        # holds but no longer replicates and drops them once their replicas
        # hold them (the release pass), so the faults after the changes
        # meet nodes that dropped what they handed off. (Every 5 s still
        # makes several passes per change, at less load on five nodes than
        # every 2 s.)
        # NODE_LOG_LEVEL=debug keeps each session replica's history in the
        # nodes' logs (what a lost row's diagnosis reads).
        self.log_level = os.environ.get("NODE_LOG_LEVEL", "info")
        self.membership_args = (["--coalesce.anti-entropy-interval=5s"]
                                if args.membership else [])
        # The record kept outside the nodes: every write attempted, per key,
        # in the order the load made them, with whether it was answered ok.
        self.writes = {}
        self.record_lock = threading.Lock()
        self.counter = 0
        self.answered_puts = 0
        self.failed_puts = 0
        self.answered_flushes = 0
        self.failed_flushes = 0
        self.faults = {"kill": 0, "catch-up": 0, "stop": 0, "wipe": 0}
        # Sessions: every put attempted, per session, in order, as
        # [blob, row id, answered ok].
        self.session_writes = {}
        self.session_counter = 0
        self.answered_session_puts = 0
        self.failed_session_puts = 0
        # Rooms: every append attempted, per room, in order, as [event ids,
        # answered ok]; every backfill as a dict (start, end, rc, events).
        self.room_appends = {}
        self.room_counter = 0
        self.answered_appends = 0
        self.failed_appends = 0
        self.backfills = {r: [] for r in BACKFILL_ROOMS}
        self.stop_load = threading.Event()

    def cli(self, args, stdin=None, timeout="4s"):
        proc = subprocess.run(
            [self.bin + "/coalesce-cli"] + self.cli_tls
            + [f"--timeout={timeout}"] + args,
            input=stdin, capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr

    def ccli(self, args, stdin=None, timeout="4s"):
        return self.cli(["--nodes", self.nodes_arg] + args, stdin, timeout)

    # -- load ----------------------------------------------------------------

    def put_batch(self):
        keys = set()
        while len(keys) < 6:
            chat = HOT_CHAT if self.load_rng.random() < 0.4 else self.load_rng.choice(CHATS)
            keys.add((chat, self.load_rng.choice(MSG_IDS)))
        lines = []
        batch = []
        for chat, msg in sorted(keys):
            self.counter += 1
            secret = hex32(self.counter)
            lines.append(f"{chat} {SENDER} {msg} {secret} 0 {1700000000 + self.counter}")
            batch.append(((chat, msg), secret))
        with self.record_lock:
            for key, secret in batch:
                self.writes.setdefault(key, []).append([secret, None])
        rc, _, err = self.ccli(["secret", "put", "-"], stdin="\n".join(lines) + "\n")
        if rc != 0:
            why = err.strip().splitlines()
            self.trace(f"put batch rc={rc} {why[-1] if why else ''}")
        with self.record_lock:
            for key, secret in batch:
                for w in reversed(self.writes[key]):
                    if w[0] == secret:
                        w[1] = rc == 0
                        break
        if rc == 0:
            self.answered_puts += 1
        else:
            self.failed_puts += 1

    def put_cold(self):
        lines = []
        for chat in COLD_CHATS:
            for msg in MSG_IDS:
                self.counter += 1
                secret = hex32(self.counter)
                lines.append(f"{chat} {SENDER} {msg} {secret} 0 {1700000000 + self.counter}")
                self.writes[(chat, msg)] = [[secret, None]]
        rc, _, err = self.ccli(["secret", "put", "-"], stdin="\n".join(lines) + "\n",
                               timeout="20s")
        if rc != 0:
            raise RuntimeError(f"the cold keys' put failed: {err.strip()}")
        for chat in COLD_CHATS:
            for msg in MSG_IDS:
                self.writes[(chat, msg)][0][1] = True

    def put_session(self, sid, timeout="4s"):
        self.session_counter += 1
        n = self.session_counter
        blob = f"state {n} of {sid}\n"
        row = f"u{n}"
        path = os.path.join(self.work, f"blob-{n}")
        with open(path, "w") as f:
            f.write(blob)
        with self.record_lock:
            entry = [blob, row, None]
            self.session_writes.setdefault(sid, []).append(entry)
        rc, _, err = self.ccli(["session", "put", sid, path,
                                "--update", f"{row}:note:{n}"], timeout=timeout)
        os.unlink(path)
        if rc != 0:
            why = err.strip().splitlines()
            self.trace(f"session put {sid} rc={rc} {why[-1] if why else ''}")
        with self.record_lock:
            entry[2] = rc == 0
        return rc, err

    def put_cold_sessions(self):
        for sid in COLD_SESSIONS:
            rc, err = self.put_session(sid, timeout="20s")
            if rc != 0:
                raise RuntimeError(f"the cold session {sid}'s put failed: {err.strip()}")

    def session_load(self):
        rng = random.Random(self.args.seed + 2)
        while not self.stop_load.is_set():
            sid = HOT_SESSION if rng.random() < 0.4 else rng.choice(SESSIONS)
            rc, _ = self.put_session(sid)
            if rc == 0:
                self.answered_session_puts += 1
            else:
                self.failed_session_puts += 1

    def trace(self, what):
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        with self.trace_lock:
            self.trace_file.write(f"[{stamp}.{int(now * 1000) % 1000:03d}] {what}\n")

    def append_events(self, room, count, timeout="4s"):
        ids = []
        lines = []
        for _ in range(count):
            self.room_counter += 1
            ids.append(f"ev{self.room_counter}")
            lines.append(f"ev{self.room_counter} m.room.message "
                         f"{1700000000 + self.room_counter} body")
        with self.record_lock:
            entry = [ids, None]
            self.room_appends.setdefault(room, []).append(entry)
        self.trace(f"append {room} {ids[0]}..{ids[-1]} sent")
        rc, out, err = self.ccli(["timeline", "append", room],
                                 stdin="\n".join(lines) + "\n", timeout=timeout)
        self.trace(f"append {room} {ids[0]}..{ids[-1]} rc={rc} "
                   f"{(out or err).strip()[:300]}")
        with self.record_lock:
            entry[1] = rc == 0
        return rc, err

    def backfill(self, room):
        started = time.time()
        # --wait keeps a CLI call within the campaign's bound on one
        # (a run whose node stays silent is then an answer lost).
        rc, out, _ = self.ccli(["backfill", room, "--batch-size", str(BACKFILL_BATCH),
                                "--max-batches", "1", "--wait", "60s"],
                               timeout="4s")
        lines = out.splitlines()
        events = [line.split(" ")[0] for line in lines[1:]]
        self.backfills[room].append({"start": started, "end": time.time(),
                                     "rc": rc, "events": events,
                                     "reason": lines[0] if lines else None})

    def room_load(self):
        rng = random.Random(self.args.seed + 3)
        while not self.stop_load.is_set():
            if rng.random() < 0.6:
                room = HOT_ROOM if rng.random() < 0.4 else rng.choice(APPEND_ROOMS)
                rc, _ = self.append_events(room, rng.randint(1, 3))
                if rc == 0:
                    self.answered_appends += 1
                else:
                    self.failed_appends += 1
            else:
                self.backfill(rng.choice(BACKFILL_ROOMS))

    def fill_cold_rooms(self):
        for room in COLD_ROOMS:
            rc, err = self.append_events(room, 3, timeout="20s")
            if rc != 0:
                raise RuntimeError(f"the cold room {room}'s append failed: {err.strip()}")

    def fill_backfill_rooms(self):
        for room in BACKFILL_ROOMS:
            rc, err = self.append_events(room, BACKFILL_EVENTS, timeout="20s")
            if rc != 0:
                raise RuntimeError(f"filling room {room} failed: {err.strip()}")

    def load(self):
        n = 0
        while not self.stop_load.is_set():
            self.put_batch()
            n += 1
            if n % 8 == 0:
                rc, _, _ = self.ccli(["secret", "flush"], timeout="10s")
                if rc == 0:
                    self.answered_flushes += 1
                else:
                    self.failed_flushes += 1

    # -- faults --------------------------------------------------------------

    def delay(self):
        return self.rng.uniform(self.args.min_delay, self.args.max_delay)

    def hot_coordinator(self):
        rc, out, _ = self.ccli(["owner", "secret", HOT_CHAT])
        first = out.split()[0] if rc == 0 and out.split() else None
        for n in self.nodes:
            if n.where == first:
                return n
        return self.rng.choice(self.nodes)

    def wait_caught_up(self, limit=60):
        deadline = time.time() + limit
        pending = list(self.nodes)
        while pending and time.time() < deadline:
            pending = [n for n in pending if not n.caught_up()]
            if pending:
                time.sleep(0.2)
        if pending:
            raise RuntimeError("nodes not caught up within %d s: %s"
                               % (limit, [n.index for n in pending]))

    def inject(self, kind):
        self.trace(f"fault {kind}")
        self.faults[kind] += 1
        if kind == "kill":
            node = self.hot_coordinator()
            node.kill()
            time.sleep(self.delay())
            node.start()
        elif kind == "catch-up":
            node = self.rng.choice(self.nodes)
            node.kill()
            time.sleep(self.delay())
            node.start()
            # Killed again while it compares with its peers.
            time.sleep(self.rng.uniform(0.0, 0.3))
            node.kill()
            time.sleep(self.rng.uniform(0.5, 1.5))
            node.start()
        elif kind == "stop":
            node = self.rng.choice(self.nodes)
            node.signal(signal.SIGSTOP)
            time.sleep(self.delay())
            node.signal(signal.SIGCONT)
        elif kind == "wipe":
            # Each in turn: wiping every node once over loses everything
            # unless each was refilled before the next.
            node = self.nodes[self.faults["wipe"] % len(self.nodes)]
            node.kill()
            shutil.rmtree(node.db, ignore_errors=True)
            self.trace(f"n{node.index} directory wiped")
            time.sleep(self.delay())
            node.start()
        self.wait_caught_up()

    # -- membership ----------------------------------------------------------

    def use_list(self, members):
        """Clients route by `members` from now on (a client with an older
        list would adopt it from the nodes' refusals)."""
        self.nodes = list(members)
        self.nodes_arg = ",".join(n.where for n in members)

    def restart_under(self, node, members):
        node.stop()
        node.cluster_list = json.dumps([n.where for n in members])
        node.start()

    def change(self, name, members, joining=(), leaving=(), sender_kill=False,
               receiver_kill=False, wiped=()):
        """One change of the list, done as docs/operating.md says: the
        joining nodes start first with the new list and an empty directory
        and catch up (handed off by nodes under the old list); then every
        other member restarts under it, one at a time, each caught up before
        the next; the leaving nodes stop last. `sender_kill`: an old member
        is SIGKILLed as a joining node starts, and restarted after a delay;
        `receiver_kill`: the joining node is SIGKILLed during its catch-up
        and restarted from its directory. `wiped`: nodes gone for good
        (killed, their directories deleted) before the change."""
        started = time.time()
        self.trace(f"change {name} begins")
        for node in wiped:
            node.kill()
            shutil.rmtree(node.db, ignore_errors=True)
            self.trace(f"n{node.index} directory wiped")
            self.faults["wipe"] += 1
        listed = json.dumps([n.where for n in members])
        for node in joining:
            shutil.rmtree(node.db, ignore_errors=True)
            self.trace(f"n{node.index} directory wiped")
            node.cluster_list = listed
            node.start()
            if sender_kill:
                sender = self.rng.choice([n for n in self.nodes
                                          if n not in wiped])
                sender.kill()
                self.faults["kill"] += 1
                time.sleep(self.delay())
                sender.start()
            if receiver_kill:
                time.sleep(self.rng.uniform(0.0, 0.3))
                node.kill()
                self.faults["catch-up"] += 1
                time.sleep(self.rng.uniform(0.5, 1.5))
                node.start()
        self.use_list(members)
        self.wait_caught_up()
        for node in members:
            if node not in joining:
                self.restart_under(node, members)
                self.wait_caught_up()
        for node in leaving:
            node.stop()
        self.trace(f"change {name} ends")
        self.changes.append({"change": name,
                             "nodes": len(members),
                             "seconds": round(time.time() - started, 1)})

    def membership(self):
        """3 -> 4 -> 5 nodes, one replaced, and back to 3."""
        n = self.pool
        self.change("join n3", n[:4], joining=[n[3]])
        self.change("join n4, a sender killed", n[:5], joining=[n[4]],
                    sender_kill=True)
        replaced = [n[0], n[5], n[2], n[3], n[4]]
        self.change("replace n1 by n5, the receiver killed", replaced,
                    joining=[n[5]], receiver_kill=True, wiped=[n[1]])
        self.change("remove n3", [n[0], n[5], n[2], n[4]], leaving=[n[3]])
        self.change("remove n4", [n[0], n[5], n[2]], leaving=[n[4]])

    # -- checks --------------------------------------------------------------

    def allowed(self, key, before=None):
        """The values a read of `key` may give: the newest answered write's
        secret and every later attempt's, or nothing when none was answered.
        With `before` (a count of writes per key), only those writes count as
        answered."""
        writes = self.writes.get(key, [])
        last_ok = None
        for i, (secret, ok) in enumerate(writes):
            if ok and (before is None or i < before.get(key, 0)):
                last_ok = i
        if last_ok is None:
            return {""} | {w[0] for w in writes}
        return {w[0] for w in writes[last_ok:]}

    def read_all(self, via, chats):
        keys = [(c, m) for c in chats for m in MSG_IDS]
        stdin = "".join(f"{c} {SENDER} {m}\n" for c, m in keys)
        rc, out, err = self.cli(via + ["secret", "get", "-"], stdin=stdin,
                                timeout="10s")
        if rc != 0:
            raise RuntimeError(f"read through {via} failed: {err.strip()}")
        # A key without a secret reads as "- 0".
        got = [line.split(" ")[0].strip("-") for line in out.splitlines()]
        return dict(zip(keys, got))

    def read_session(self, via, sid):
        rc, blob, err = self.cli(via + ["session", "get", sid], timeout="10s")
        if rc == 1:
            return None, []
        if rc != 0:
            raise RuntimeError(f"session get {sid} through {via} failed: {err.strip()}")
        rc, rows, err = self.cli(via + ["session", "updates", sid], timeout="10s")
        if rc != 0:
            raise RuntimeError(f"session updates {sid} through {via} failed: {err.strip()}")
        return blob, [line.split(" ")[0] for line in rows.splitlines()]

    def check_sessions(self, before=None):
        """Every session through the cluster client and each of its
        replicas: the blob of its newest answered put or a later attempt,
        and the row of every answered put."""
        lost = stale = reads = 0
        problems = []
        for sid in SESSIONS + COLD_SESSIONS:
            writes = self.session_writes.get(sid, [])
            count = before.get(sid, 0) if before is not None else len(writes)
            answered = [i for i, w in enumerate(writes) if w[2] and i < count]
            allowed = ({w[0] for w in writes[answered[-1]:]} if answered
                       else {None} | {w[0] for w in writes})
            rc, out, _ = self.ccli(["owner", "session", sid])
            vias = [["--nodes", self.nodes_arg]] + [
                ["--port", str(n.port)] for n in self.nodes
                if rc == 0 and n.where in out.split()]
            for via in vias:
                reads += 1
                blob, rows = self.read_session(via, sid)
                missing = [writes[i][1] for i in answered if writes[i][1] not in rows]
                if blob in allowed and not missing:
                    continue
                if blob is None or missing:
                    lost += 1
                else:
                    stale += 1
                if len(problems) < 10:
                    problems.append({"via": " ".join(via), "session": sid,
                                     "read": blob, "rows missing": missing[:5],
                                     "newest answered": writes[answered[-1]][0]
                                     if answered else None})
        return lost, stale, reads, problems

    def read_room(self, via, room):
        rc, out, err = self.cli(via + ["timeline", "page", room,
                                       "--max-events", "100000"],
                                timeout="10s")
        if rc != 0:
            raise RuntimeError(f"timeline page {room} through {via} failed: {err.strip()}")
        lines = out.splitlines()
        return [line.split(" ")[0] for line in reversed(lines[1:])]

    def check_appended_rooms(self):
        """Every appended room through the cluster client and each replica:
        each answered append's events together, in answer order."""
        lost = disordered = reads = 0
        problems = []
        for room in APPEND_ROOMS + COLD_ROOMS:
            appends = self.room_appends.get(room, [])
            answered = [ids for ids, ok in appends if ok]
            rc, out, _ = self.ccli(["owner", "room", room])
            vias = [["--nodes", self.nodes_arg]] + [
                ["--port", str(n.port)] for n in self.nodes
                if rc == 0 and n.where in out.split()]
            for via in vias:
                reads += 1
                log = self.read_room(via, room)
                where = {}
                for i, x in enumerate(log):
                    where.setdefault(x, i)
                last = -1
                for ids in answered:
                    if any(x not in where for x in ids):
                        lost += 1
                        if len(problems) < 10:
                            problems.append({"via": " ".join(via), "room": room,
                                             "append lost": ids})
                        continue
                    first = where[ids[0]]
                    together = [where[x] for x in ids] == list(
                        range(first, first + len(ids)))
                    if not together or first < last:
                        disordered += 1
                        if len(problems) < 10:
                            problems.append({"via": " ".join(via), "room": room,
                                             "append out of order": ids})
                    last = max(last, first)
        return lost, disordered, reads, problems

    def check_backfilled_rooms(self):
        """Every backfilled room, backfilled to its start: no event skipped
        beyond one batch per backfill whose answer was lost (a run that
        committed its batch and lost its answer skips at most that batch;
        callers joining one run share it), and no backfill above an
        answered one's oldest event."""
        skipped = repeated = unknown = 0
        problems = []
        for room in BACKFILL_ROOMS:
            rc, out, err = self.ccli(["backfill", room, "--batch-size", "50"],
                                     timeout="30s")
            if rc != 0:
                raise RuntimeError(f"the final backfill of {room} failed: {err.strip()}")
            lines = out.splitlines()
            final = [line.split(" ")[0] for line in lines[1:]]
            runs = self.backfills[room]
            lost_answers = sum(1 for b in runs if b["reason"] is None)
            unknown += lost_answers
            seen = set(final)
            for b in runs:
                seen.update(b["events"])
            ids = self.room_appends[room][0][0]
            missing = [x for x in ids if x not in seen]
            if len(missing) > BACKFILL_BATCH * lost_answers:
                skipped += len(missing)
                if len(problems) < 10:
                    problems.append({"room": room, "never delivered": missing[:5],
                                     "backfills without answer": lost_answers})
            # The position an answered backfill committed holds for every
            # backfill that started after its answer.
            order = {x: i for i, x in enumerate(ids)}
            for a in runs:
                if a["rc"] != 0 or not a["events"]:
                    continue
                oldest = min(order[x] for x in a["events"])
                for b in runs + [{"start": float("inf"), "events": final}]:
                    if b["start"] <= a["end"]:
                        continue
                    above = [x for x in b["events"] if order[x] >= oldest]
                    if above:
                        repeated += 1
                        if len(problems) < 10:
                            problems.append({"room": room,
                                             "delivered again": above[:5]})
                        break
        return skipped, repeated, unknown, problems

    def views(self):
        """Who reads what: the cluster client every key, and each node, as
        coordinator, the keys of the chats it is a replica of."""
        chats = CHATS + COLD_CHATS
        result = [(["--nodes", self.nodes_arg], chats)]
        for n in self.nodes:
            mine = []
            for chat in chats:
                rc, out, _ = self.ccli(["owner", "secret", chat])
                if rc == 0 and n.where in out.split():
                    mine.append(chat)
            result.append((["--port", str(n.port)], mine))
        return result

    def check(self, before=None):
        lost = stale = reads = 0
        problems = []
        for via, chats in self.views():
            for key, value in self.read_all(via, chats).items():
                reads += 1
                if value in self.allowed(key, before):
                    continue
                newest_ok = [w for w in self.writes.get(key, []) if w[1]]
                if value == "":
                    lost += 1
                else:
                    stale += 1
                if len(problems) < 10:
                    problems.append({"via": " ".join(via), "key": list(key),
                                     "read": value[-8:],
                                     "newest answered": newest_ok[-1][0][-8:]
                                     if newest_ok else None})
        return lost, stale, reads, problems

    def run(self):
        for n in self.nodes:
            n.start()
        self.wait_caught_up()
        self.put_cold()
        self.put_cold_sessions()
        self.fill_backfill_rooms()
        self.fill_cold_rooms()
        loader = threading.Thread(target=self.load, daemon=True)
        loader.start()
        session_loader = threading.Thread(target=self.session_load, daemon=True)
        session_loader.start()
        room_loader = threading.Thread(target=self.room_load, daemon=True)
        room_loader.start()
        kinds = ["kill", "catch-up", "stop", "wipe"]
        started = time.time()
        if self.args.membership:
            self.membership()
        for cycle in range(self.args.cycles):
            time.sleep(self.rng.uniform(0.2, 1.0))
            self.inject(kinds[cycle % 4] if cycle < 4 else self.rng.choice(kinds))
        self.stop_load.set()
        loader.join(timeout=180)
        session_loader.join(timeout=180)
        room_loader.join(timeout=180)
        self.wait_caught_up()
        lost, stale, reads, problems = self.check()
        s_lost, s_stale, s_reads, s_problems = self.check_sessions()
        r_lost, r_disordered, r_reads, r_problems = self.check_appended_rooms()
        skipped, repeated, unknown, b_problems = self.check_backfilled_rooms()
        # What old replicas dropped, from every node's log (a restart
        # starts its counters again), and what the nodes still hold for
        # others now.
        dropped = held = 0
        for n in self.pool:
            if os.path.exists(n.log):
                with open(n.log, errors="replace") as f:
                    dropped += sum(int(x) for x in re.findall(
                        r"(?:secrets|sessions|rooms): dropped (\d+) ", f.read()))
        for n in self.nodes:
            held += (n.stats() or {}).get("keys_to_hand_off", 0)
        # Whole-cluster crash after an answered flush.
        rc, _, err = self.ccli(["secret", "flush"], timeout="30s")
        flushed = rc == 0
        before = {k: len(v) for k, v in self.writes.items()}
        sessions_before = {k: len(v) for k, v in self.session_writes.items()}
        for n in self.nodes:
            n.kill()
        for n in self.nodes:
            n.start()
        self.wait_caught_up()
        crash_lost, crash_stale, crash_reads, crash_problems = (
            self.check(before) if flushed else (0, 0, 0, []))
        # An answered persist is durable on a majority, flush or not.
        cs_lost, cs_stale, cs_reads, cs_problems = self.check_sessions(
            sessions_before)
        # And an answered append is durable on a majority.
        cr_lost, cr_disordered, cr_reads, cr_problems = (
            self.check_appended_rooms())
        for n in self.nodes:
            n.signal(signal.SIGTERM)
        for n in self.nodes:
            try:
                n.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                n.kill()
        result = {
            "campaign": "replicas", "nodes": len(self.nodes),
            "seed": self.args.seed, "cycles": self.args.cycles,
            "faults": self.faults, "seconds": round(time.time() - started),
            "changes": self.changes,
            "keys_dropped_by_old_replicas": dropped,
            "keys_still_held_for_others": held,
            "put_batches_answered": self.answered_puts,
            "put_batches_failed": self.failed_puts,
            "flushes_answered": self.answered_flushes,
            "flushes_failed": self.failed_flushes,
            "keys_read": reads, "answered_writes_lost": lost,
            "stale_reads": stale,
            "session_puts_answered": self.answered_session_puts,
            "session_puts_failed": self.failed_session_puts,
            "sessions_read": s_reads, "answered_persists_lost": s_lost,
            "stale_session_reads": s_stale,
            "appends_answered": self.answered_appends,
            "appends_failed": self.failed_appends,
            "rooms_read": r_reads, "answered_appends_lost": r_lost,
            "appends_out_of_order": r_disordered,
            "backfills": sum(len(v) for v in self.backfills.values()),
            "backfills_answered": sum(1 for v in self.backfills.values()
                                      for b in v if b["rc"] == 0),
            "backfills_without_answer": unknown,
            "events_skipped": skipped,
            "events_delivered_above_answered_position": repeated,
            "final_flush_answered": flushed,
            "after_whole_cluster_crash": {"keys_read": crash_reads,
                                          "lost": crash_lost,
                                          "stale": crash_stale,
                                          "sessions_read": cs_reads,
                                          "sessions_lost": cs_lost,
                                          "sessions_stale": cs_stale,
                                          "rooms_read": cr_reads,
                                          "appends_lost": cr_lost,
                                          "appends_out_of_order":
                                              cr_disordered},
            "problems": (problems + crash_problems + s_problems + cs_problems
                         + r_problems + b_problems + cr_problems),
        }
        print(json.dumps(result))
        ok = (lost == 0 and stale == 0 and crash_lost == 0
              and crash_stale == 0 and flushed and self.answered_puts > 0
              and s_lost == 0 and s_stale == 0 and cs_lost == 0
              and cs_stale == 0 and self.answered_session_puts > 0
              and r_lost == 0 and r_disordered == 0 and skipped == 0
              and repeated == 0 and self.answered_appends > 0
              and cr_lost == 0 and cr_disordered == 0)
        return 0 if ok else 1


def free_ports(count):
    import socket
    socks = [socket.socket() for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--certs", required=True)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--min-delay", type=float, default=1.0)
    p.add_argument("--max-delay", type=float, default=3.0)
    p.add_argument("--membership", action="store_true",
                   help="change the list under load first: 3 -> 4 -> 5 "
                        "nodes, one replaced, back to 3")
    args = p.parse_args()
    campaign = Campaign(args)
    try:
        code = campaign.run()
    finally:
        for n in campaign.pool:
            n.kill()
    sys.exit(code)


if __name__ == "__main__":
    main()
