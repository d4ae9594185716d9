#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Abusive HTTP clients for tests/e2e/abuse.sh, one attack per run, bounded
in time. Connections come from the loopback addresses given in --sources
(127.0.0.0/8 is all loopback on Linux), so that the server's per-address
limits see one attacker or several, and the legitimate poller (127.0.0.1)
is not one of them.

  abuse_client.py --target HOST:PORT --attack NAME --duration S
                  --sources A[,B...] [--conns N]

Attacks:
  slowloris   N connections that send a request line and 3000 bytes of
              header (near the largest head the server takes, so that each
              connection's memory is in use), then one header byte every
              0.5 s, reopened when the server closes them
  idle        N connections that send nothing, reopened when closed
  bigheaders  requests with 64 KiB of headers, one after another
  bigbody     POSTs that announce and send 8 MiB, and chunked ones that never
              end, one after another
  garbage     invalid methods, paths outside the mount, 8 KiB paths, bytes
              that are not HTTP, and 200 pipelined requests then garbage
  burst       every second, N concurrent fresh gateway polls from the
              sources; adds burst_ok=ANSWERED_200_WITHIN_2S/SENT, p50, p99
  deadline    a request head trickled at 1 byte per 100 ms, on a fresh
              connection and after a first request on a kept-alive one;
              adds fresh_ms= and keepalive_ms=, when the server closed each
              (from the accept or from the end of the first answer)
  nul         a request line of binary garbage starting with a NUL, then a
              blank line; adds nul_ms= (when it was answered or closed)
Prints one line: attack=NAME opened=N closed_by_server=N answers=STATUS:N,...
"""
import argparse
import collections
import errno
import selectors
import socket
import time

HEAD = b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: agent\r\n"


class Stats:
    def __init__(self):
        self.opened = 0
        self.closed = 0
        self.answers = collections.Counter()

    def answer(self, data):
        try:
            self.answers[data.split(b" ", 2)[1].decode()] += 1
        except (IndexError, UnicodeDecodeError):
            self.answers["none"] += 1


def connect(target, source, block=False):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    if block:
        s.settimeout(5)
        s.connect(target)
        return s
    s.setblocking(False)
    try:
        s.connect(target)
    except BlockingIOError:
        pass
    return s


def hold(a, target, sources, st, trickle):
    """slowloris and idle: keep N connections open until the deadline."""
    sel = selectors.DefaultSelector()
    conns = {}  # socket -> [source, next send time, bytes sent]
    deadline = time.monotonic() + a.duration

    def open_one(i):
        src = sources[i % len(sources)]
        try:
            s = connect(target, src)
        except OSError:
            return
        st.opened += 1
        conns[s] = [src, time.monotonic() + (0.05 if trickle else 1e9), 0]
        sel.register(s, selectors.EVENT_READ)

    for i in range(a.conns):
        open_one(i)
    n = a.conns
    while time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.05):
            if time.monotonic() >= deadline:
                break
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                st.answer(data)
            sel.unregister(s)
            s.close()
            del conns[s]
            st.closed += 1
            open_one(n)
            n += 1
            # An attacker over its per-address limit is closed at once;
            # reopening at full speed would measure the loop, not the server.
            time.sleep(0.002)
        if trickle:
            now = time.monotonic()
            for s, c in list(conns.items()):
                if now < c[1]:
                    continue
                msg = (HEAD if c[2] == 0 else b"X-Pad: " + b"a" * 3000 if c[2] == 1 else
                       b"\r\nX-Pad: " if c[2] % 40 == 0 else b"a")
                try:
                    s.send(msg)
                except OSError:
                    pass
                c[1] = now + 0.5
                c[2] += 1
    for s in conns:
        s.close()


def one_request(target, source, payload, st, read=True):
    try:
        s = connect(target, source, block=True)
    except OSError:
        return
    st.opened += 1
    try:
        for i in range(0, len(payload), 65536):
            s.sendall(payload[i:i + 65536])
        if read:
            data = s.recv(4096)
            if data:
                st.answer(data)
            else:
                st.closed += 1
    except OSError as e:
        if e.errno in (errno.ECONNRESET, errno.EPIPE):
            st.closed += 1
    finally:
        s.close()


def loop(a, target, sources, st, payloads):
    deadline = time.monotonic() + a.duration
    i = 0
    while time.monotonic() < deadline:
        one_request(target, sources[i % len(sources)], payloads[i % len(payloads)], st)
        i += 1


def chunked_forever(target, source, st, seconds):
    try:
        s = connect(target, source, block=True)
    except OSError:
        return
    st.opened += 1
    s.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b"{" * 65536 + b"\r\n"
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            s.sendall(chunk)
        st.answer(s.recv(4096))
    except OSError:
        st.closed += 1
    finally:
        s.close()


POLL = (b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: agent\r\n"
        b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")


def burst(target, sources, n, st, lat):
    """n fresh polls at once; each counts when it reads a 200 within 2 s."""
    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    for i in range(n):
        try:
            s = connect(target, sources[i % len(sources)])
        except OSError:
            continue
        st.opened += 1
        sel.register(s, selectors.EVENT_WRITE, [b"", False])
    ok = 0
    while sel.get_map() and time.monotonic() - t0 < 2:
        for key, ev in sel.select(timeout=0.05):
            s, c = key.fileobj, key.data
            try:
                if not c[1]:
                    s.send(POLL)
                    c[1] = True
                    sel.modify(s, selectors.EVENT_READ, c)
                    continue
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                c[0] += data
                if c[0].startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in c[0]:
                    ok += 1
                    lat.append((time.monotonic() - t0) * 1000)
                    st.answer(c[0])
                    data = b""
                else:
                    continue
            if not c[0]:
                st.closed += 1
            sel.unregister(s)
            s.close()
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    return ok


def trickle_until_closed(s, t0):
    """1 byte every 100 ms of an endless header; ms from t0 to the close."""
    s.setblocking(False)
    msg = HEAD + b"X-Pad: " + b"a" * 600
    for b in msg:
        try:
            if s.recv(4096) == b"":
                break
        except BlockingIOError:
            pass
        except OSError:
            break
        try:
            s.send(bytes([b]))
        except OSError:
            break
        time.sleep(0.1)
    return (time.monotonic() - t0) * 1000


def deadline_attack(target, source):
    s = connect(target, source, block=True)
    fresh = trickle_until_closed(s, time.monotonic())
    s.close()
    s = connect(target, source, block=True)
    s.sendall(b"GET /prpc/v1/Version HTTP/1.1\r\nHost: a\r\n\r\n")
    first = s.recv(4096)
    ka = trickle_until_closed(s, time.monotonic()) if first.startswith(b"HTTP/1.1 200") else -1
    s.close()
    return fresh, ka


def nul(target, source):
    s = connect(target, source, block=True)
    # Longer than the agent's header_timeout: a connection held until it
    # must show as held, not as a recv that gave up first.
    s.settimeout(45)
    t0 = time.monotonic()
    try:
        s.sendall(b"\x00\x01\x02 garbage \xff\xfe\r\n\r\n")
        s.recv(4096)
    except OSError:
        pass
    s.close()
    return (time.monotonic() - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--attack", required=True)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--sources", default="127.0.0.2")
    ap.add_argument("--conns", type=int, default=300)
    a = ap.parse_args()
    host, _, port = a.target.rpartition(":")
    target = (host, int(port))
    sources = a.sources.split(",")
    st = Stats()
    extra = ""
    if a.attack == "slowloris":
        hold(a, target, sources, st, trickle=True)
    elif a.attack == "idle":
        hold(a, target, sources, st, trickle=False)
    elif a.attack == "bigheaders":
        hdrs = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(64))
        loop(a, target, sources, st, [HEAD + hdrs + b"Content-Length: 2\r\n\r\n{}",
                                      b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\n\r\n"])
    elif a.attack == "bigbody":
        body = b"{" * (8 << 20)
        deadline = time.monotonic() + a.duration
        i = 0
        while time.monotonic() < deadline:
            if i % 2:
                chunked_forever(target, sources[i % len(sources)], st, 1)
            else:
                one_request(target, sources[i % len(sources)],
                            HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body, st)
                one_request(target, sources[i % len(sources)],
                            HEAD + b"Content-Length: 99999999999999999999\r\n\r\n{}", st)
            i += 1
    elif a.attack == "garbage":
        pipelined = b"GET /prpc/v1/Health HTTP/1.1\r\nHost: a\r\n\r\n" * 200
        loop(a, target, sources, st, [
            b"FOO /prpc/v1/Health HTTP/1.1\r\nHost: a\r\n\r\n",
            b"DELETE /prpc/v1/Health HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET /../../etc/passwd HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET /prpc/v1/" + b"%00" * 2700 + b" HTTP/1.1\r\nHost: a\r\n\r\n",
            b"POST /prpc/v1/Health HTTP/1.1\r\nContent-Length: 5\r\n\r\n\xff\xff\xff\xff\xff",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) * 4,
            b"GET /prpc/v1/Health HTTP/9.9\r\n\r\n",
            b"POST /prpc/v1/Health?json HTTP/1.1\r\nContent-Length: -1\r\n\r\n{}",
            b"POST /prpc/v1/Health?json HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            pipelined + b"\x00\xff garbage \r\n\r\n" * 50,
        ])
    elif a.attack == "burst":
        deadline_t = time.monotonic() + a.duration
        sent = ok = 0
        lat = []
        while time.monotonic() < deadline_t:
            t = time.monotonic()
            ok += burst(target, sources, a.conns, st, lat)
            sent += a.conns
            time.sleep(max(0, 1 - (time.monotonic() - t)))
        lat.sort()
        pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else 0
        extra = " burst_ok=%d/%d burst_p50=%.0f burst_p99=%.0f" % (ok, sent, pick(0.5), pick(0.99))
    elif a.attack == "deadline":
        fresh, ka = deadline_attack(target, sources[0])
        extra = " fresh_ms=%.0f keepalive_ms=%.0f" % (fresh, ka)
    elif a.attack == "nul":
        extra = " nul_ms=%.0f" % nul(target, sources[0])
    else:
        raise SystemExit("unknown attack " + a.attack)
    print("attack=%s opened=%d closed_by_server=%d answers=%s%s" % (
        a.attack, st.opened, st.closed,
        ",".join("%s:%d" % kv for kv in sorted(st.answers.items())) or "-", extra))


if __name__ == "__main__":
    main()
