#!/usr/bin/env python3
"""Hostile clients against a node's TLS port, its metrics port and its
plain port (127.0.0.1 only), for tests/app/hostile_clients.sh and
tests/app/tls.sh. Standard library only.

Every attack opens a bounded number of connections within a bounded time,
prints one line of counts ending in "N held, T s", then keeps the
connections it holds open while the HOLD file exists (at most 60 s), so
that the caller checks the node while they are held:

  garbage HOLD PORT COUNT           random bytes, a third opening with a
                                    BASP header claiming ~4 GiB (app.tls)
  tls HOLD PORT CERTS               random bytes, truncated and mutated
                                    handshakes, mutated records, garbage
                                    after a real mutual-TLS handshake
  tls-idle HOLD PORT CERTS COUNT    mutual-TLS handshakes, then nothing read
  metrics HOLD PORT                 random, truncated and oversized HTTP
                                    requests, idle connections, pipelined
                                    requests whose answers are never read
  never-read HOLD PORT RECORDING CONNECTIONS REPEATS
                                    a recorded CLI session, then its
                                    requests again, answers never read
  record PORT_FILE NODE_PORT OUT    a relay writing what one client sends
                                    the node to OUT (its port to PORT_FILE)
  undecodable - PORT                a BASP handshake as a new peer, then one
                                    message CAF 0.17.6 throws on while
                                    decoding it; prints whether the node
                                    closed the connection within 10 s
"""
import os
import random
import select
import socket
import ssl
import struct
import sys
import time

SEED = 14
BASP_HEADER = struct.Struct(">BBBBIQQQ")  # CAF 0.17's 32-byte BASP header
# CAF 0.17's basp::message_type: operations 0 to 6
BASP_CLIENT_HANDSHAKE, BASP_DIRECT_MESSAGE, BASP_DOWN_MESSAGE, BASP_OPERATIONS = 1, 2, 5, 7
# After a real handshake a peer with a certificate reaches BASP, which
# allocates the length a header claims: two 16 MiB claims show the cost.
CLAIMED_LENGTH, CLAIMED_LENGTH_CONNECTIONS = 16 << 20, 2


def connect(port, timeout=2.0):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def send(sock, data):
    """Sends what the node takes; a node closing a bad connection at once
    (as it should) cuts the send short. Returns the bytes sent."""
    try:
        sock.sendall(data)
        return len(data)
    except OSError:
        return 0


def random_bytes(rng, low, high):
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(low, high)))


def flip_bytes(rng, data, first=0):
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(min(first, len(data) - 1), len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


def hold_while(hold, held):
    deadline = time.monotonic() + 60
    while os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)
    for s in held:
        try:
            s.close()
        except OSError:
            pass


class Counts:
    def __init__(self, name):
        self.name, self.kinds, self.sent, self.started = name, {}, 0, time.monotonic()

    def add(self, kind, sent):
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.sent += sent

    def report(self, held):
        kinds = ", ".join(f"{kind} {n}" for kind, n in self.kinds.items())
        print(f"{self.name}: {sum(self.kinds.values())} connections ({kinds}), "
              f"{self.sent} bytes sent, {len(held)} held, "
              f"{time.monotonic() - self.started:.1f} s", flush=True)


# -- TLS ---------------------------------------------------------------------

def client_context(certs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # CAF checks no names either; the CA is the trust
    ctx.load_verify_locations(os.path.join(certs, "ca.pem"))
    ctx.load_cert_chain(os.path.join(certs, "client.pem"),
                        os.path.join(certs, "client-key.pem"))
    return ctx


def client_hello(ctx):
    """The first flight of a real client, made without a socket."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


class Session:
    """A client's TLS session over a socket through python's SSLObject, so
    that its bytes can be changed before they are sent."""

    def __init__(self, sock, ctx):
        self.sock, self.incoming, self.outgoing = sock, ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing)
        self.sent = 0

    def handshake(self, change_flight=None):
        """Drives the handshake; change_flight(index, bytes) may return other
        bytes for a flight (None: send nothing more and stop). True once the
        client finished its part."""
        flight = 0
        while True:
            try:
                self.obj.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            data = self.outgoing.read()
            if data:
                if change_flight is not None:
                    data = change_flight(flight, data)
                    if data is None:
                        return False
                self.sent += send(self.sock, data)
                flight += 1
            if done:
                return True
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.incoming.write(chunk)

    def records(self, plaintext):
        """The encrypted records of plaintext, not sent."""
        self.obj.write(plaintext)
        return self.outgoing.read()


def tls_attack(port, certs, hold):
    rng = random.Random(SEED)
    ctx = client_context(certs)
    hello = client_hello(ctx)
    counts, held = Counts("tls"), []
    started = time.monotonic()
    handshakes = 0

    def one(kind, attack):
        nonlocal handshakes
        if time.monotonic() - started > 20:
            return
        try:
            s = connect(port)
        except OSError:
            return
        sent = 0
        try:
            sent, keep, shook = attack(s)
            handshakes += shook
        except (OSError, ssl.SSLError):
            keep = False
        counts.add(kind, sent)
        (held.append if keep else lambda x: x.close())(s)

    def random_garbage(s):
        return send(s, random_bytes(rng, 1, 4096)), rng.random() < 0.5, 0

    def truncated_hello(s):
        return send(s, hello[:rng.randrange(1, len(hello))]), rng.random() < 0.5, 0

    def truncated_second_flight(s):
        session = Session(s, ctx)
        cut = lambda i, data: data if i == 0 else data[:rng.randrange(1, len(data))]
        session.handshake(lambda i, data: cut(i, data) if i < 2 else None)
        return session.sent, True, 0

    def mutated_flight(s):
        session = Session(s, ctx)
        target = rng.randrange(2)
        session.handshake(lambda i, data: flip_bytes(rng, data) if i == target else data)
        return session.sent, False, 0

    def mutated_record(s):
        session = Session(s, ctx)
        if not session.handshake():
            return session.sent, False, 0
        records = session.records(random_bytes(rng, 1, 2048))
        return session.sent + send(s, flip_bytes(rng, records, first=5)), False, 1

    def garbage_after_handshake(s):
        # The first byte is no BASP operation, so the node refuses the first
        # header: a header that passes claims a length CAF 0.17 allocates
        # up front (up to 4 GiB), which "claimed length" measures apart.
        session = Session(s, ctx)
        if not session.handshake():
            return session.sent, False, 0
        garbage = bytes([rng.randrange(BASP_OPERATIONS, 256)]) + random_bytes(rng, 0, 4095)
        return session.sent + send(s, session.records(garbage)), rng.random() < 0.5, 1

    def claimed_length(s):
        session = Session(s, ctx)
        if not session.handshake():
            return session.sent, False, 0
        header = BASP_HEADER.pack(BASP_CLIENT_HANDSHAKE, 0, 0, 0, CLAIMED_LENGTH, 0, 0, 0)
        return session.sent + send(s, session.records(header)), True, 1

    plan = [("random bytes", random_garbage, 100),
            ("truncated ClientHello", truncated_hello, 60),
            ("truncated client flight", truncated_second_flight, 20),
            ("mutated handshake", mutated_flight, 40),
            ("mutated record", mutated_record, 40),
            ("garbage after handshake", garbage_after_handshake, 40),
            ("claimed length", claimed_length, CLAIMED_LENGTH_CONNECTIONS)]
    for kind, attack, n in plan:
        for _ in range(n):
            one(kind, attack)
    counts.report(held)
    print(f"tls: {handshakes} mutual-TLS handshakes completed; "
          f"{CLAIMED_LENGTH_CONNECTIONS} held headers claim {CLAIMED_LENGTH >> 20} MiB each",
          flush=True)
    hold_while(hold, held)


def tls_idle(port, certs, hold, count):
    """Connections that complete the handshake and then never read."""
    ctx = client_context(certs)
    counts, held = Counts("tls-idle"), []
    for _ in range(count):
        try:
            s = connect(port)
            session = Session(s, ctx)
            if session.handshake():
                counts.add("handshake then never read", session.sent)
                held.append(s)
                continue
        except (OSError, ssl.SSLError):
            pass
        counts.add("refused", 0)
    counts.report(held)
    hold_while(hold, held)


# -- metrics port (HTTP) -----------------------------------------------------

def metrics_attack(port, hold):
    rng = random.Random(SEED)
    request = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    counts, held = Counts("metrics"), []

    def one(kind, attack, keep):
        try:
            s = connect(port)
        except OSError:
            return
        counts.add(kind, attack(s))
        (held.append if keep else lambda x: x.close())(s)

    def oversized(prefix, size):
        def attack(s):
            sent = send(s, prefix)
            chunk = b"a" * 65536
            for _ in range(size // len(chunk)):
                n = send(s, chunk)
                if n == 0:
                    break
                sent += n
            return sent
        return attack

    for _ in range(60):
        one("random bytes", lambda s: send(s, random_bytes(rng, 1, 4096)), False)
    for _ in range(20):
        one("truncated request", lambda s: send(s, request[:rng.randrange(1, len(request))]), True)
    for _ in range(3):
        one("4 MiB request line", oversized(b"GET /", 4 << 20), False)
        one("4 MiB header line", oversized(b"GET /metrics HTTP/1.1\r\nX-Long: ", 4 << 20), False)
    for _ in range(20):
        one("idle", lambda s: 0, True)
    for _ in range(4):
        one("pipelined, never read", lambda s: send(s, request * 500), True)
    counts.report(held)
    hold_while(hold, held)


# -- plain port: a recorded session replayed without reading ------------------

def record(node_port, out, port_file):
    """Relays one client connection to the node, writing what the client
    sends to OUT; ends when either side closes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    server.settimeout(60)
    client, _ = server.accept()
    node = connect(node_port, timeout=60)
    recorded = bytearray()
    open_ = True
    while open_:
        readable, _, _ = select.select([client, node], [], [], 60)
        if not readable:
            break
        for s in readable:
            data = s.recv(65536)
            if not data:
                open_ = False
                break
            (node if s is client else client).sendall(data)
            if s is client:
                recorded += data
    with open(out, "wb") as f:
        f.write(recorded)


def basp_frames(data):
    """(operation, bytes) of each BASP message in a recorded stream."""
    frames, at = [], 0
    while at + BASP_HEADER.size <= len(data):
        header = BASP_HEADER.unpack_from(data, at)
        end = at + BASP_HEADER.size + header[4]
        frames.append((header[0], data[at:end]))
        at = end
    return frames


def never_read(port, recording, hold, connections, repeats):
    """The recorded session without its closing down message (after which
    the node would drop answers to the client's actor), then its direct
    messages (the requests) REPEATS - 1 times more."""
    with open(recording, "rb") as f:
        frames = basp_frames(f.read())
    session = b"".join(b for op, b in frames if op != BASP_DOWN_MESSAGE)
    requests = b"".join(b for op, b in frames if op == BASP_DIRECT_MESSAGE)
    counts, held = Counts("never-read"), []
    for _ in range(connections):
        try:
            s = connect(port)
        except OSError:
            continue
        sent = send(s, session)
        for _ in range(repeats - 1):
            sent += send(s, requests)
        counts.add("requests sent, answers never read", sent)
        held.append(s)
    print(f"never-read: {len(frames)} BASP messages recorded, {len(requests)} bytes "
          f"of requests, {len(held) * repeats} sessions' requests sent", flush=True)
    counts.report(held)
    hold_while(hold, held)


# -- plain port: a message CAF cannot decode ---------------------------------

# A message of one CAF `config_value` whose variant type index (0x96) names
# none of its nine types: CAF 0.17.6's variant reader throws
# std::runtime_error("invalid type found") instead of failing the decode.
# The encoding is CAF's message format: a zero, the element types' names,
# then each element.
UNDECODABLE_TYPES = b"@<>+@config_value"
UNDECODABLE_MESSAGE = b"\x00\x00" + bytes([len(UNDECODABLE_TYPES)]) + UNDECODABLE_TYPES + b"\x96"
BASP_NODE_ID_DEFAULT_DATA = 8 + 4 + 20  # its kind (an atom), a pid, a host hash


def read_exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError("the node closed the connection")
        data += chunk
    return data


def varbyte(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def undecodable(port):
    """Completes the BASP handshake as a peer of its own node id, then sends
    the node's published actor UNDECODABLE_MESSAGE."""
    s = connect(port, timeout=10)
    header = BASP_HEADER.unpack(read_exactly(s, BASP_HEADER.size))
    version, payload = header[5], read_exactly(s, header[4])
    # The server handshake: the node's id, its application ids, then the
    # published actor's id.
    at = BASP_NODE_ID_DEFAULT_DATA
    app_ids, at = varbyte(payload, at)
    for _ in range(app_ids):
        length, at = varbyte(payload, at)
        at += length
    (published,) = struct.unpack_from(">Q", payload, at)
    peer = payload[:8] + struct.pack(">I", os.getpid()) + os.urandom(20)
    s.sendall(BASP_HEADER.pack(BASP_CLIENT_HANDSHAKE, 0, 0, 0, len(peer), version, 0, 0) + peer)
    message = b"\x00" + UNDECODABLE_MESSAGE  # no stages, then the message
    s.sendall(BASP_HEADER.pack(BASP_DIRECT_MESSAGE, 0, 0, 0, len(message), 0, 0, published)
              + message)
    try:
        while s.recv(65536):
            pass
        closed = True
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        closed = False
    print(f"undecodable: sent to actor {published}; the node "
          f"{'closed the connection' if closed else 'kept the connection open'}", flush=True)


# -- random bytes (app.tls) --------------------------------------------------

def garbage(port, hold, connections):
    rng = random.Random(13)
    held = []
    started = time.monotonic()
    for i in range(connections):
        if time.monotonic() - started > 10:
            break
        try:
            s = connect(port)
        except OSError:
            continue
        held.append(s)
        if i % 3 == 0:  # what a plain BASP port allocates up front
            send(s, struct.pack(">BBBBI", 1, 0, 0, 0, 0xFFFFFFF0))
        send(s, random_bytes(rng, 1, 4096))
    print("sent", len(held), "connections in",
          round(time.monotonic() - started, 2), "s", flush=True)
    hold_while(hold, held)


def main(argv):
    command, hold, args = argv[1], argv[2], argv[3:]
    if command == "garbage":
        garbage(int(args[0]), hold, int(args[1]))
    elif command == "tls":
        tls_attack(int(args[0]), args[1], hold)
    elif command == "tls-idle":
        tls_idle(int(args[0]), args[1], hold, int(args[2]))
    elif command == "metrics":
        metrics_attack(int(args[0]), hold)
    elif command == "never-read":
        never_read(int(args[0]), args[1], hold, int(args[2]), int(args[3]))
    elif command == "undecodable":
        undecodable(int(args[0]))
    elif command == "record":  # HOLD is the file its port is written to
        record(int(args[0]), args[1], hold)
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
