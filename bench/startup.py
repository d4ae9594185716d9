#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Start-up time of the agent, as systemd would see it.

  startup.py RUNS PORT AGENT [AGENT OPTIONS...]

Each run binds a NOTIFY_SOCKET datagram listener (no systemd is PID 1 here),
starts the agent with posix_spawn and measures from just before the spawn
to: READY=1 arriving; the first 200 answer to POST /prpc/v1/Health?json on
127.0.0.1:PORT; the first answer that is a verdict, not "health has not been
determined yet". The agent is stopped with SIGTERM after each run. Prints
the median and the maximum of each, in milliseconds, as key=value.
"""
import os
import signal
import socket
import statistics
import sys
import tempfile
import time

REQ = (b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
       b"Connection: close\r\n\r\n{}")


def ask(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(REQ)
            data = b""
            while True:
                b = s.recv(4096)
                if not b:
                    return data
                data += b
    except OSError:
        return None


def one(port, argv, d):
    path = os.path.join(d, "notify")
    if os.path.exists(path):
        os.unlink(path)
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(path)
    ns.settimeout(10)
    env = dict(os.environ, NOTIFY_SOCKET=path)
    log = os.open(os.path.join(d, "agent.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    t0 = time.monotonic()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[
        (os.POSIX_SPAWN_DUP2, log, 1), (os.POSIX_SPAWN_DUP2, log, 2)])
    os.close(log)
    ready = first = verdict = None
    try:
        while ready is None:
            msg = ns.recv(4096)
            if b"READY=1" in msg.split(b"\n"):
                ready = time.monotonic() - t0
        deadline = time.monotonic() + 10
        while verdict is None and time.monotonic() < deadline:
            r = ask(port)
            now = time.monotonic() - t0
            if r and r.startswith(b"HTTP/1.1 200"):
                if first is None:
                    first = now
                if b"not been determined" not in r:
                    verdict = now
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        ns.close()
    if verdict is None:
        raise SystemExit("startup.py: no verdict within 10 s")
    return ready, first, verdict


def main():
    runs, port, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    with tempfile.TemporaryDirectory() as d:
        res = [one(port, argv, d) for _ in range(runs)]
    out = []
    for i, name in enumerate(["ready", "first_answer", "first_verdict"]):
        v = [r[i] * 1000 for r in res]
        out.append("%s_ms_median=%.2f %s_ms_max=%.2f" % (name, statistics.median(v), name, max(v)))
    print("runs=%d %s" % (runs, " ".join(out)))


if __name__ == "__main__":
    main()
