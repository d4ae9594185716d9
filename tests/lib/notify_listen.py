#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for systemd's end of NOTIFY_SOCKET (sd_notify(3)).

    notify_listen.py SOCKET OUT [PROBE]

Binds an AF_UNIX datagram socket at SOCKET and appends every assignment of
every datagram to OUT as one line "<realtime ms> <datagram no> KEY=value", so
a shell test can order them, time them and tell which arrived together.

With PROBE (the agent's unix:PATH listener, as a path), the moment a datagram
carrying READY=1 arrives the listener asks PROBE for /prpc/v1/Health and logs
"PROBE=<status line>" (or "PROBE=failed: <reason>") under the same datagram
number: READY must only be sent once the listener answers.

Runs until SIGTERM.
"""
import os
import signal
import socket
import sys
import time


def now_ms():
    return time.time_ns() // 1_000_000


def probe(path):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(path)
            s.sendall(b"GET /prpc/v1/Health HTTP/1.0\r\nHost: probe\r\n\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            line = data.split(b"\r\n", 1)[0].decode("ascii", "replace")
            return line or "failed: empty answer"
    except OSError as e:
        return "failed: %s" % e


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    path, out_path = sys.argv[1], sys.argv[2]
    probe_path = sys.argv[3] if len(sys.argv) == 4 else None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    # Bind under a temporary name and rename: the test waits for SOCKET to
    # exist, and it must not exist before it can receive.
    tmp = path + ".tmp"
    sock.bind(tmp)
    os.rename(tmp, path)
    n = 0
    with open(out_path, "a", buffering=1) as out:
        while True:
            data = sock.recv(65536)
            t = now_ms()
            n += 1
            lines = data.decode("utf-8", "replace").split("\n")
            for a in lines:
                if a:
                    out.write("%d %d %s\n" % (t, n, a))
            if probe_path and "READY=1" in lines:
                out.write("%d %d PROBE=%s\n" % (now_ms(), n, probe(probe_path)))


if __name__ == "__main__":
    main()
