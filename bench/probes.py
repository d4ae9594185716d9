#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The probed side of the probe benchmark (bench/probes.sh, issue 27).

  probes.py serve PORT N MODEFILE
      answers HTTP on 127.0.0.1:PORT..PORT+N-1: 200, or 500 while MODEFILE
      holds "500" (read at most every 2 ms, so a flip is seen at once).
  probes.py flips SOCK MODEFILE FLIPS [BAD GOOD]
      flips the answer FLIPS times at random phases (writing BAD, then GOOD,
      500 and 200 unless given, into MODEFILE) and measures, for each,
      the time from the flip to the agent's served verdict (POST
      /prpc/v1/Health on the unix socket SOCK, polled every 2 ms): failing,
      then recovering. Prints "fail_ms=... rec_ms=..." lists.
"""
import json
import os
import random
import selectors
import socket
import sys
import time


def serve(port, n, modefile):
    sel = selectors.DefaultSelector()
    for i in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port + i))
        s.listen(128)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, "listen")
    mode, seen = "200", 0.0
    while True:
        for key, _ in sel.select(1.0):
            if key.data == "listen":
                try:
                    c, _ = key.fileobj.accept()
                except OSError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, "conn")
                continue
            c = key.fileobj
            try:
                data = c.recv(4096)
            except OSError:
                data = b""
            if data:
                now = time.monotonic()
                if now - seen > 0.002:
                    try:
                        with open(modefile) as f:
                            mode = f.read().strip() or "200"
                    except OSError:
                        mode = "200"
                    seen = now
                st = b"500 Oops" if mode == "500" else b"200 OK"
                try:
                    c.sendall(b"HTTP/1.1 " + st + b"\r\nContent-Length: 2\r\n"
                              b"Connection: close\r\n\r\nok")
                except OSError:
                    pass
            sel.unregister(c)
            c.close()


def health(sock):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    try:
        s.connect(sock)
        s.sendall(b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                  b"Connection: close\r\n\r\n{}")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        return json.loads(data.split(b"\r\n\r\n", 1)[1])["healthy"]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    finally:
        s.close()


def wait_for(sock, want, limit=30.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if health(sock) is want:
            return time.monotonic()
        time.sleep(0.002)
    return None


def write_mode(modefile, mode):
    with open(modefile + ".tmp", "w") as f:
        f.write(mode + "\n")
    os.rename(modefile + ".tmp", modefile)


def flips(sock, modefile, n, bad="500", good="200"):
    fails, recs = [], []
    if wait_for(sock, True, 60) is None:
        print("error=never-healthy")
        return
    for _ in range(n):
        time.sleep(random.uniform(0.3, 1.7))
        write_mode(modefile, bad)
        t0 = time.monotonic()
        t = wait_for(sock, False)
        fails.append(-1 if t is None else round((t - t0) * 1000))
        time.sleep(random.uniform(0.3, 1.7))
        write_mode(modefile, good)
        t0 = time.monotonic()
        t = wait_for(sock, True)
        recs.append(-1 if t is None else round((t - t0) * 1000))
    print("fail_ms=%s rec_ms=%s" % (",".join(map(str, fails)), ",".join(map(str, recs))))


def main():
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        flips(sys.argv[2], sys.argv[3], int(sys.argv[4]), *sys.argv[5:7])


if __name__ == "__main__":
    main()
