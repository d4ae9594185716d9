#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Clients that a plain curl cannot be, for tests/e2e/relay.sh.

  relay_client.py PORT split PIECE...   sends the pieces (\\r\\n escapes
        allowed) 300 ms apart on one connection, each its own packet, then
        reads to the end; prints the answer
  relay_client.py PORT halfclose PATH BYTES   POSTs BYTES bytes to PATH,
        shuts its sending side, reads to the end; prints
        "status=N body_sha256=HEX body_len=N"
  relay_client.py PORT keepalive N      N x POST /prpc/Info?json on one
        connection; prints each answer's body, one a line
  relay_client.py PORT sequence PATH... one GET per path on one kept-alive
        connection; prints "STATUS SERVER" a line each (- for none)
  relay_client.py PORT trickle HEAD [MAX]   sends HEAD, then "a" every 100 ms
        until the agent closes (or MAX seconds, default 60); prints the
        seconds from connect to close
  relay_client.py PORT stall N [K]      N x GET / (1 MiB each) sent at once
        on each of K connections (default 1); reads a first piece of each
        one's answers, prints "stalled", reads no more, and closes them
        (unread bytes: a reset) when its standard input ends
  relay_client.py PORT segments PATH     GET PATH (Connection: close); once the
        whole answer and its end have arrived, prints "segs_in=N LEN" (the
        segments this socket received, from TCP_INFO, and the body length)
  relay_client.py PORT flood N SECONDS  N connections from 127.0.0.2 that
        each send "GET /logs/" and then one byte every 0.5 s, never ending
        the line, reopened when the agent closes them, for SECONDS; prints
        "opened=N closed_by_server=N"
  relay_client.py PORT ending PATH [KEEP]  GET PATH (kept alive), reads what
        comes until the connection ends (or 30 s); prints "reset N S" or
        "eof N S" ("open N S" at 30 s; bytes read, seconds from the
        request). KEEP: read the
        answer to PATH, then wait for the end without sending more
  relay_client.py PORT raw REQUEST     sends REQUEST (\\r\\n escapes allowed),
        reads to the end; prints the status line, then "body=N" (the bytes
        after the head)
  relay_client.py PORT hold N PATH [--from ADDR] [--line-only] [--partial]
                  [--reopen S] [--trickle S] [--proxy v1|v2] [--client ADDR]
        opens N connections (from ADDR, default 127.0.0.1), each sending
        "GET PATH HTTP/1.1" and its head (with --line-only, the request line
        and one header, no end of head; with --partial, "GET PATH" alone, no
        end of line; with --trickle, then one more byte
        every S seconds: a slowloris), and keeps them, reopening each one
        that is closed S seconds later (default 0.2), until SIGTERM; with
        --proxy, each connection starts with a PROXY header of that version
        naming ADDR (--client, default the --from address) and the
        connection's own port as its source; prints
        "opened=N" once the first N have sent their request, "answered=N"
        once N answers have come, then "opened=N closed_by_server=N
        reset=N answered=N" at the end
  relay_client.py PORT upload PATH BYTES GOT [GO]   POSTs to PATH a head that
        announces BYTES and the first 1000 of them, and waits for the file
        GOT (the stand-in has the request). Without GO it then resets the
        connection (SO_LINGER 0) and prints "reset-sent"; with GO it waits
        for the file GO, sends the rest and reads to the end; prints "reset
        N" or "eof N" (N the bytes of answer read)
  relay_client.py PORT drip N SECONDS BYTES [--from ADDR]
        N connections (from ADDR, default 127.0.0.1) that each send a
        relay-bound head's first line and a Cookie header, then one byte
        per send, as fast as the sockets take them, up to BYTES in all; one
        that reaches BYTES, or is closed, is reset and opened again; for
        SECONDS. Prints "bytes=N heads=N" (bytes sent, connections opened)
Every connection is to 127.0.0.1:PORT; every read has a 30 s deadline.
"""
import hashlib
import os
import select
import selectors
import signal
import socket
import struct
import sys
import time


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_all(s):
    out = []
    while True:
        b = s.recv(65536)
        if not b:
            return b"".join(out)
        out.append(b)


class Reader:
    """One HTTP/1.1 answer at a time from a kept-alive connection."""

    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self):
        b = self.s.recv(65536)
        if not b:
            raise EOFError("closed")
        self.buf += b

    def answer(self):
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            h[k.strip().lower()] = v.strip()
        n = int(h.get("content-length", "0"))
        while len(self.buf) < n:
            self.fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, h, body


def split_status(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def main():
    port, what, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if what == "split":
        s = connect(port)
        for i, piece in enumerate(args):
            if i:
                time.sleep(0.3)
            s.sendall(piece.encode().decode("unicode_escape").encode("latin-1"))
        sys.stdout.buffer.write(read_all(s))
    elif what == "halfclose":
        path, n = args[0], int(args[1])
        body = bytes(i & 0xFF for i in range(n))
        s = connect(port)
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                  % (path.encode(), n) + body)
        s.shutdown(socket.SHUT_WR)
        status, got = split_status(read_all(s))
        print("status=%d body_sha256=%s body_len=%d sent_sha256=%s" % (
            status, hashlib.sha256(got).hexdigest(), len(got),
            hashlib.sha256(body).hexdigest()))
    elif what == "keepalive":
        s = connect(port)
        r = Reader(s)
        for _ in range(int(args[0])):
            s.sendall(b"POST /prpc/Info?json HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 2\r\n\r\n{}")
            status, _, body = r.answer()
            print(status, body.decode())
    elif what == "sequence":
        s = connect(port)
        r = Reader(s)
        for path in args:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
            status, h, body = r.answer()
            print(status, h.get("server", "-"))
    elif what == "trickle":
        s = connect(port)
        t0 = time.monotonic()
        limit = float(args[1]) if len(args) > 1 else 60
        s.sendall(args[0].encode().decode("unicode_escape").encode("latin-1"))
        s.settimeout(0.1)
        while time.monotonic() - t0 < limit:
            try:
                if not s.recv(4096):
                    break
            except socket.timeout:
                pass
            except OSError:
                break
            try:
                s.sendall(b"a")
            except OSError:
                break
        print("%.2f" % (time.monotonic() - t0))
    elif what == "stall":
        conns = [connect(port) for _ in range(int(args[1]) if len(args) > 1 else 1)]
        for s in conns:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * int(args[0]))
        for s in conns:
            s.recv(4096)
        print("stalled", flush=True)
        sys.stdin.read()
        for s in conns:
            s.close()
    elif what == "upload":
        upload(port, args[0], int(args[1]), args[2], args[3] if len(args) > 3 else None)
    elif what == "segments":
        s = connect(port)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                  % args[0].encode())
        # The end of stream comes after the answer: once it is here, so is
        # every segment, and none is read before they are counted.
        p = select.poll()
        p.register(s, select.POLLRDHUP)
        deadline = time.monotonic() + 30
        while not any(ev & select.POLLRDHUP for _, ev in p.poll(1000)):
            if time.monotonic() > deadline:
                sys.exit("segments: no end of stream within 30 s")
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
        segs_in = struct.unpack_from("I", info, 140)[0]  # tcpi_segs_in
        _, body = split_status(read_all(s))
        print("segs_in=%d %d" % (segs_in, len(body)))
    elif what == "flood":
        flood(port, int(args[0]), float(args[1]))
    elif what == "ending":
        ending(port, args[0], len(args) > 1)
    elif what == "raw":
        s = connect(port)
        s.sendall(args[0].encode().decode("unicode_escape").encode("latin-1"))
        head, _, body = read_all(s).partition(b"\r\n\r\n")
        print(head.split(b"\r\n")[0].decode("latin-1"))
        print("body=%d" % len(body))
    elif what == "hold":
        hold(port, int(args[0]), args[1], args[2:])
    elif what == "drip":
        drip(port, int(args[0]), float(args[1]), int(args[2]), args[3:])
    else:
        sys.exit("unknown: " + what)


def ending(port, path, keep):
    """How a relayed connection ends: a reset, or a clean end of stream."""
    s = connect(port)
    t0 = time.monotonic()
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    got = 0
    if keep:
        status, _, body = Reader(s).answer()
        got = len(body)
    s.settimeout(30)
    how = "eof"
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
    except ConnectionResetError:
        how = "reset"
    except socket.timeout:
        how = "open"
    print("%s %d %.2f" % (how, got, time.monotonic() - t0))


def wait_file(path):
    deadline = time.monotonic() + 30
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit("upload: no %s within 30 s" % path)
        time.sleep(0.01)


def upload(port, path, n, got, go):
    """A request body cut by a reset, or sent on when GO appears."""
    s = connect(port)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % (path.encode(), n) + b"u" * 1000)
    wait_file(got)
    if not go:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        print("reset-sent")
        return
    wait_file(go)
    got, how = 0, "eof"
    try:
        s.sendall(b"u" * (n - 1000))
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
    except (ConnectionResetError, BrokenPipeError):
        how = "reset"
    print("%s %d" % (how, got))


def proxy_header(version, client, sport, dport):
    """A PROXY header (HAProxy's doc/proxy-protocol.txt) naming client:sport."""
    fam = socket.AF_INET6 if ":" in client else socket.AF_INET
    dst = "::1" if fam == socket.AF_INET6 else "127.0.0.1"
    if version == "v1":
        return b"PROXY %s %s %s %d %d\r\n" % (b"TCP6" if fam == socket.AF_INET6 else b"TCP4",
                                              client.encode(), dst.encode(), sport, dport)
    addrs = socket.inet_pton(fam, client) + socket.inet_pton(fam, dst) + struct.pack("!HH", sport, dport)
    return (b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x21 if fam == socket.AF_INET6 else 0x11]) +
            struct.pack("!H", len(addrs)) + addrs)


def hold(port, n, path, opts):
    """Many connections from one address, each holding a slot if it can."""
    src = opts[opts.index("--from") + 1] if "--from" in opts else "127.0.0.1"
    proxy = opts[opts.index("--proxy") + 1] if "--proxy" in opts else None
    client = opts[opts.index("--client") + 1] if "--client" in opts else src
    later = float(opts[opts.index("--reopen") + 1]) if "--reopen" in opts else 0.2
    trickle = float(opts[opts.index("--trickle") + 1]) if "--trickle" in opts else 0
    next_trickle = time.monotonic() + trickle
    req = b"GET %s HTTP/1.1\r\nHost: x\r\n" % path.encode()
    if "--partial" in opts:
        req = b"GET %s" % path.encode()
    elif "--line-only" not in opts:
        req += b"\r\n"
    sel = selectors.DefaultSelector()
    stats = {"opened": 0, "sent": 0, "closed": 0, "reset": 0, "answered": 0}

    def one():
        s = socket.socket()
        s.bind((src, 0))
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        stats["opened"] += 1
        sel.register(s, selectors.EVENT_WRITE, "connecting")

    for _ in range(n):
        one()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    announced = told = False
    due = []  # reopening times, oldest first
    while not stop:
        if not announced and stats["sent"] >= n:
            print("opened=%d" % n, flush=True)
            announced = True
        while due and due[0] <= time.monotonic():
            due.pop(0)
            one()
        if trickle and time.monotonic() >= next_trickle:
            next_trickle = time.monotonic() + trickle
            for key in list(sel.get_map().values()):
                if key.data == "open":
                    try:
                        key.fileobj.send(b"a")
                    except OSError:
                        pass
        for key, _ in sel.select(0.05 if due else 1):
            s = key.fileobj
            if key.data == "connecting":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                sel.unregister(s)
                if err:
                    s.close()
                    due.append(time.monotonic() + later)
                    continue
                try:
                    hdr = proxy_header(proxy, client, s.getsockname()[1], port) if proxy else b""
                    s.send(hdr + req)
                except OSError:
                    s.close()
                    due.append(time.monotonic() + later)
                    continue
                stats["sent"] += 1
                sel.register(s, selectors.EVENT_READ, "open")
                continue
            try:
                b = s.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                stats["reset"] += 1
                b = b""
            except OSError:
                b = b""
            if b.startswith(b"HTTP/1.1 200"):
                stats["answered"] += 1
                if not told and stats["answered"] >= n:
                    print("answered=%d" % n, flush=True)
                    told = True
            if not b:
                stats["closed"] += 1
                sel.unregister(s)
                s.close()
                due.append(time.monotonic() + later)
    print("opened=%d closed_by_server=%d reset=%d answered=%d" % (
        stats["opened"], stats["closed"], stats["reset"], stats["answered"]))


def drip(port, n, seconds, most, opts):
    """A head a byte at a time on each of n connections, as fast as it goes."""
    src = opts[opts.index("--from") + 1] if "--from" in opts else "127.0.0.1"
    first = b"GET /logs/drip HTTP/1.1\r\nHost: x\r\nCookie: "
    total = heads = 0

    def one():
        nonlocal heads
        s = socket.socket()
        s.bind((src, 0))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            pass
        s.setblocking(False)
        heads += 1
        return [s, 0]

    conns = [one() for _ in range(n)]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for c in conns:
            s, sent = c
            try:
                if sent >= most:
                    raise ConnectionResetError
                sent += s.send(first if sent == 0 else b"a")
                c[1] = sent
                total += 1 if sent > len(first) else len(first)
            except BlockingIOError:
                pass
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
                c[:] = one()
    for s, _ in conns:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    print("bytes=%d heads=%d" % (total, heads))


def flood(port, n, seconds):
    opened = closed = 0
    conns = []

    def one():
        nonlocal opened
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        opened += 1
        return [s, False]

    end = time.monotonic() + seconds
    conns = [one() for _ in range(n)]
    while time.monotonic() < end:
        for c in conns:
            s, started = c
            try:
                s.send(b"a" if started else b"GET /logs/")
                c[1] = True
                if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    raise ConnectionResetError
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                if e.errno in (11, 107):  # EAGAIN, ENOTCONN: not yet
                    continue
                closed += 1
                s.close()
                c[:] = one()
        time.sleep(0.5)
    # A reset, not an end of stream: a line ended by the peer's close
    # would be routed on what it has.
    for s, _ in conns:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    print("opened=%d closed_by_server=%d" % (opened, closed))


if __name__ == "__main__":
    main()
