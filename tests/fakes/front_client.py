#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Clients of the front for tests/e2e/front_faults.sh and relay_streams.sh,
beside relay_client.py's. Every connection is to 127.0.0.1:PORT.

  front_client.py PORT follow PATH      GET PATH (a followed log), reads its
        lines until SIGTERM; prints "a line" once one has come and "two
        lines" once two have, then at the end "lines=N maxgap=S end=E" (E:
        open, eof or reset; maxgap: the longest wait between two lines,
        seconds)
  front_client.py PORT ws EVERY         GET /ws, then "ping N" at once and every
        EVERY seconds, each answered back by the stand-in, until SIGTERM;
        prints "pong" once the first has come, then at the end
        "pings=N pongs=N end=E"
  front_client.py PORT ws EVERY quiet   the same with GET /ws?quiet: nothing
        comes back; prints "upgraded" once the 101 has come, then at the end
        "pings=N end=E"
  front_client.py PORT upload PATH BYTES CHUNK EVERY
        POST PATH announcing BYTES, sending CHUNK bytes of it every EVERY
        seconds (an upload that moves, with pauses), until SIGTERM or all
        sent; prints "sending" once the head has gone, then at the end
        "sent=N end=E"
  front_client.py PORT urgent           POST /echo with a 6-byte body sent as
        "abc", one urgent byte "X" (MSG_OOB), "def"; prints the answer's body
        (a receiver that does not take urgent data inline reads "abcdef")
  front_client.py PORT sink N           N connections that each POST /sink, a
        body that never ends, sent until the socket takes no more, and read
        nothing; prints "held" once every one is stuck both ways, then holds
        them until its standard input ends, and resets them
  front_client.py PORT resetafter PATH  sends a whole GET PATH head, prints
        "sent", and resets the connection (SO_LINGER 0) when its standard
        input ends (a test first sees the head routed)
  front_client.py PORT idle PATH        GET PATH on a kept-alive connection;
        prints "answered LPORT" (its local port); then for each line on its
        standard input, GET PATH again on it and prints "answered", "eof" or
        "reset"; resets the connection when its standard input ends
  front_client.py PORT heads N BYTES EVERY SECONDS [--from ADDR]
        N connections (from ADDR) that each send a relay-bound head's first
        line and a Cookie header of BYTES bytes, never ending it, then one
        more byte every EVERY seconds; one that is closed is opened again;
        for SECONDS. Prints "opened=N closed_by_server=N bytes=N"
  front_client.py grab PID LPORT RPORT  takes a copy of the agent PID's fd for
        its TCP connection between local port LPORT and remote port RPORT
        (pidfd_getfd(2), as a child that holds a copy between a fork and its
        exec does); prints "held FD" and keeps it until its standard input
        ends
"""
import ctypes
import os
import select
import signal
import socket
import struct
import sys
import time


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def until_term():
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    return stop


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            raise EOFError("closed before the head ended")
        buf += b
    return buf.split(b"\r\n\r\n", 1)


def recv_some(s):
    """(bytes, None) as they come; (b"", None) when none came before the
    socket's timeout; (b"", "eof" or "reset") at the connection's end."""
    try:
        b = s.recv(65536)
    except socket.timeout:
        return b"", None
    except ConnectionResetError:
        return b"", "reset"
    return b, None if b else "eof"


def follow(port, path):
    s = connect(port)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    _, buf = read_head(s)
    stop = until_term()
    lines, last, maxgap, end = 0, time.monotonic(), 0.0, "open"
    s.settimeout(0.5)
    while not stop:
        b, gone = recv_some(s)
        if gone:
            end = gone
            break
        buf += b
        n = buf.count(b"line ")
        if n:
            now = time.monotonic()
            if lines:
                maxgap = max(maxgap, now - last)
            else:
                print("a line", flush=True)
            if lines < 2 <= lines + n:
                print("two lines", flush=True)
            lines, last, buf = lines + n, now, b""
    print("lines=%d maxgap=%.1f end=%s" % (lines, maxgap, end), flush=True)


def upload(port, path, total, chunk, every):
    s = connect(port)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (path.encode(), total))
    print("sending", flush=True)
    stop = until_term()
    sent, end = 0, "open"
    s.settimeout(0.2)
    while not stop and sent < total:
        try:
            s.sendall(b"u" * min(chunk, total - sent))
        except OSError:
            end = "reset"
            break
        sent += min(chunk, total - sent)
        due = time.monotonic() + every
        while not stop and time.monotonic() < due:
            _, gone = recv_some(s)
            if gone:
                end = gone
                break
        if end != "open":
            break
    print("sent=%d end=%s" % (sent, end), flush=True)


def ws(port, every, quiet=False):
    s = connect(port)
    s.sendall(b"GET /ws%s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
              % (b"?quiet" if quiet else b""))
    head, buf = read_head(s)
    if not head.startswith(b"HTTP/1.1 101"):
        print("pings=0 pongs=0 end=refused", flush=True)
        return
    if quiet:
        print("upgraded", flush=True)
    stop = until_term()
    pings = pongs = 0
    end = "open"
    due = time.monotonic()
    s.settimeout(0.2)
    while not stop:
        if time.monotonic() >= due:
            try:
                s.sendall(b"ping %d\n" % pings)
            except OSError:
                end = "reset"
                break
            pings += 1
            due = time.monotonic() + every
        b, gone = recv_some(s)
        if gone:
            end = gone
            break
        buf += b
        if not pongs and b"\n" in buf:
            print("pong", flush=True)
        pongs += buf.count(b"\n")
        buf = buf[buf.rfind(b"\n") + 1:]
    if quiet:
        print("pings=%d end=%s" % (pings, end), flush=True)
    else:
        print("pings=%d pongs=%d end=%s" % (pings, pongs, end), flush=True)


def urgent(port):
    s = connect(port)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 6\r\n\r\n")
    s.sendall(b"abc")
    time.sleep(0.05)  # three segments, the urgent byte alone in its own
    s.send(b"X", socket.MSG_OOB)
    time.sleep(0.05)
    s.sendall(b"def")
    head, body = read_head(s)
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            body += b
    except OSError:
        pass
    sys.stdout.buffer.write(body + b"\n")


def sink(port, n):
    conns = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
        s.setblocking(False)
        conns.append(s)
    chunk = b"u" * 65536
    # Each sends until the socket has taken nothing for 2 s: the stand-in
    # reads nothing, so the relay's pipe and both sockets fill.
    quiet = {s: 0 for s in conns}
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and any(q < 40 for q in quiet.values()):
        for s in conns:
            try:
                s.send(chunk)
                quiet[s] = 0
            except BlockingIOError:
                quiet[s] += 1
            except OSError:
                quiet[s] = 40
        time.sleep(0.05)
    print("held", flush=True)
    sys.stdin.read()
    for s in conns:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


def resetafter(port, path):
    s = connect(port)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    print("sent", flush=True)
    sys.stdin.read()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def idle(port, path):
    s = connect(port)
    req = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode()

    def ask():
        try:
            s.sendall(req)
            head, body = read_head(s)
            n = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < n:
                b = s.recv(65536)
                if not b:
                    return "eof"
                body += b
            return "answered"
        except (ConnectionResetError, BrokenPipeError):
            return "reset"
        except (EOFError, OSError):
            return "eof"

    print("%s %d" % (ask(), s.getsockname()[1]), flush=True)
    for _ in sys.stdin:
        print(ask(), flush=True)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def heads(port, n, size, every, seconds, src):
    first = b"GET /logs/heads HTTP/1.1\r\nHost: x\r\nCookie: " + b"a" * size
    stats = {"opened": 0, "closed": 0, "bytes": 0}

    def one():
        s = socket.socket()
        s.bind((src, 0))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(first)
        except OSError:
            pass
        s.setblocking(False)
        stats["opened"] += 1
        stats["bytes"] += len(first)
        return s

    conns = [one() for _ in range(n)]
    end = time.monotonic() + seconds
    due = time.monotonic()
    while time.monotonic() < end:
        for i, s in enumerate(conns):
            try:
                s.send(b"a")
                stats["bytes"] += 1
                if s.recv(1, socket.MSG_PEEK) == b"":
                    raise ConnectionResetError
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                stats["closed"] += 1
                s.close()
                conns[i] = one()
        due += every
        time.sleep(max(0.0, due - time.monotonic()))
    for s in conns:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    print("opened=%d closed_by_server=%d bytes=%d" % (stats["opened"], stats["closed"], stats["bytes"]))


def socket_fd(pid, lport, rport):
    """The agent's fd number for the TCP connection lport <-> rport."""
    inode = None
    with open("/proc/%d/net/tcp" % pid) as f:
        next(f)
        for line in f:
            p = line.split()
            if int(p[1].split(":")[1], 16) == lport and int(p[2].split(":")[1], 16) == rport:
                inode = p[9]
    if inode is None:
        return None
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "socket:[%s]" % inode:
                return int(fd)
        except OSError:
            pass
    return None


def grab(pid, lport, rport):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = socket_fd(pid, lport, rport)
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    got = libc.syscall(438, pidfd, fd, 0) if fd is not None and pidfd >= 0 else -1  # pidfd_getfd
    if got < 0:
        print("failed fd=%s errno=%d" % (fd, ctypes.get_errno()), flush=True)
        return
    print("held %d" % fd, flush=True)
    sys.stdin.read()
    os.close(got)


def main():
    if sys.argv[1] == "grab":
        return grab(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    port, what, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if what == "follow":
        follow(port, args[0])
    elif what == "ws":
        ws(port, float(args[0]), args[1:2] == ["quiet"])
    elif what == "upload":
        upload(port, args[0], int(args[1]), int(args[2]), float(args[3]))
    elif what == "urgent":
        urgent(port)
    elif what == "sink":
        sink(port, int(args[0]))
    elif what == "resetafter":
        resetafter(port, args[0])
    elif what == "idle":
        idle(port, args[0])
    elif what == "heads":
        src = args[args.index("--from") + 1] if "--from" in args else "127.0.0.1"
        heads(port, int(args[0]), int(args[1]), float(args[2]), float(args[3]), src)
    else:
        sys.exit("front_client.py: unknown mode %s" % what)


if __name__ == "__main__":
    main()
