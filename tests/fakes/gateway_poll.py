#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Polls the agent the way the gateway does, and times every poll.

  gateway_poll.py (--unix PATH | --tcp HOST:PORT) [--duration S] [--gap MS]
                  [--timeout S] [--until-unhealthy] [--out FILE]
                  [--control-unix PATH]

Each poll is a fresh connection, `POST /prpc/v1/Health?json` with body `{}`
and no Content-Type, read to the end of the connection within --timeout (the
gateway's is 2 s). One line per poll goes to --out:
  T_MS LATENCY_MS STATUS BODY      (STATUS 0 when the poll failed)
and a summary to stdout:
  polls=N ok=N p50=MS p99=MS max=MS first_unhealthy_ms=MS|-
A poll counts as ok when it got HTTP 200 and a JSON body with a boolean
"healthy". --until-unhealthy stops at the first answer with healthy false.
With --control-unix, every poll is followed by one of a second agent that
is under no fault, and the summary adds its p99 (control_p99=MS): the
scheduler noise of a loaded machine, measured at the same moments.
"""
import argparse
import json
import socket
import sys
import time

REQUEST = (b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: agent\r\n"
           b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")


def poll(addr, timeout):
    fam = socket.AF_UNIX if isinstance(addr, str) else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        s.connect(addr)
        s.sendall(REQUEST)
        data = b""
        while time.monotonic() < deadline:
            b = s.recv(65536)
            if not b:
                break
            data += b
            if len(data) > 1 << 20:
                return 0, "response over 1 MiB"
        else:
            return 0, "timed out"
    except OSError as e:
        return 0, type(e).__name__
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
        v = json.loads(body)
        if not isinstance(v.get("healthy"), bool):
            return 0, "no healthy field"
    except (IndexError, ValueError, AttributeError):
        return 0, "undecodable answer"
    return status, body.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--unix")
    ap.add_argument("--tcp")
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--gap", type=float, default=20)
    ap.add_argument("--timeout", type=float, default=2)
    ap.add_argument("--until-unhealthy", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--control-unix")
    a = ap.parse_args()
    if a.unix:
        addr = a.unix
    else:
        host, _, port = a.tcp.rpartition(":")
        addr = (host, int(port))
    out = open(a.out, "w") if a.out else None
    lat, ok, first_bad, ctl = [], 0, None, []
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.duration:
        start = time.monotonic()
        status, body = poll(addr, a.timeout)
        end = time.monotonic()
        ms = (end - start) * 1000
        lat.append(ms)
        t_ms = (start - t0) * 1000
        unhealthy = status == 200 and '"healthy":false' in body
        if status == 200:
            ok += 1
        if unhealthy and first_bad is None:
            first_bad = t_ms
        if out:
            out.write("%d %.2f %d %s\n" % (t_ms, ms, status, body.replace("\n", " ")))
        if unhealthy and a.until_unhealthy:
            break
        if a.control_unix:
            c0 = time.monotonic()
            poll(a.control_unix, a.timeout)
            ctl.append((time.monotonic() - c0) * 1000)
        rest = a.gap / 1000 - (time.monotonic() - start)
        if rest > 0:
            time.sleep(rest)
    lat.sort()
    ctl.sort()
    pick = lambda v, q: v[min(len(v) - 1, int(q * len(v)))] if v else 0
    print("polls=%d ok=%d p50=%.1f p99=%.1f max=%.1f first_unhealthy_ms=%s%s" % (
        len(lat), ok, pick(lat, 0.5), pick(lat, 0.99), lat[-1] if lat else 0,
        "%d" % first_bad if first_bad is not None else "-",
        " control_p99=%.1f" % pick(ctl, 0.99) if ctl else ""))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
