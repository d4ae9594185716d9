#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Users of an app behind the gateway, and the count of what they lost.

  rollout_clients.py run --group NAME=ADDR:PORT,ADDR:PORT [...] --host HOST
                     --out FILE [--fresh RATE] [--keepalive N] [--ka-rate RATE]
                     [--slow N]
  rollout_clients.py count --out FILE --from T_MS --to T_MS [--group NAME]
                     [--gwlog FILE ...]

`run` sends, to every group (the nodes of one gateway, picked in turn per
connection, as DNS round robin would), until SIGTERM:
  fresh      GET / on a new connection each time, RATE a second (default 30),
             each started on time however long the others take (open loop)
  keepalive  N kept-alive connections (default 2), each GET / RATE a second
             (default 10); a request that fails before any byte of an answer
             on a connection that already carried one is sent once more on a
             new connection, as browsers retry an idempotent request
  slow       N loops (default 3) of GET /slow (1 s at the backend) on a new
             connection each, one a second (the next as soon as one ends)
Every request is a line of FILE: "START_MS END_MS GROUP KIND OUTCOME INSTANCE",
wall-clock milliseconds; OUTCOME is ok, or what failed: refused, reset, eof
(closed before an answer: the gateway connected nowhere, or the app closed),
truncated (an answer cut short), timeout (no answer in ANSWER_S, 15 s, or
3 s more for slow: a loaded machine was seen to stall an answer 5 s),
or the HTTP status of an answer that is not 200 (502, ...); INSTANCE is the
X-Instance of the answer, or -.

`count` reads FILE and prints, for requests that started in [from, to), a
line per group: "GROUP sent=N failed=N fresh=F/N keepalive=F/N slow=F/N
retried=N what=OUTCOME:N,..." (F failed of N sent); with --gwlog (the logs
of tests/fakes/gateway.py's nodes), also "out_of_rotation=S": the seconds of
the window during which an instance was not healthy on a node, summed over
the instances, the mean of the nodes.
"""
import argparse
import collections
import signal
import socket
import sys
import threading
import time

# How long a request may wait for its answer (and a connect for the
# gateway) before it counts as a timeout: a rule, not the machine, decides.
ANSWER_S = 15

stop = threading.Event()
out_lock = threading.Lock()


def now_ms():
    return int(time.time() * 1000)


class Failed(Exception):
    def __init__(self, outcome, before_answer):
        super().__init__(outcome)
        self.outcome = outcome
        self.before_answer = before_answer


def read_answer(s, timeout):
    """One HTTP/1.1 answer with a Content-Length: (status, instance, close)."""
    deadline = time.monotonic() + timeout
    buf = b""
    got_any = False

    def more():
        nonlocal buf, got_any
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failed("timeout", not got_any)
        s.settimeout(left)
        try:
            b = s.recv(65536)
        except socket.timeout:
            raise Failed("timeout", not got_any)
        except ConnectionResetError:
            raise Failed("reset", not got_any)
        except OSError:
            raise Failed("reset", not got_any)
        if not b:
            raise Failed("eof" if not got_any else "truncated", not got_any)
        got_any = True
        buf += b

    while b"\r\n\r\n" not in buf:
        more()
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise Failed("garbage", False)
    length, inst, close = None, "-", False
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        k = k.strip().lower()
        if k == b"content-length":
            length = int(v)
        elif k == b"x-instance":
            inst = v.strip().decode("ascii", "replace")
        elif k == b"connection" and v.strip().lower() == b"close":
            close = True
    if length is None:
        raise Failed("garbage", False)
    while len(body) < length:
        try:
            more()
        except Failed as f:
            raise Failed("truncated" if f.outcome in ("eof", "reset") else f.outcome, False)
        body = buf.partition(b"\r\n\r\n")[2]
    return status, inst, close


def record(out, start, group, kind, outcome, inst):
    with out_lock:
        if out.closed:  # a request still open when the run ended
            return
        out.write("%d %d %s %s %s %s\n" % (start, now_ms(), group, kind, outcome, inst))


class Group:
    def __init__(self, name, nodes, host):
        self.name = name
        self.nodes = nodes
        self.host = host
        self.k = 0
        self.lock = threading.Lock()

    def node(self):
        with self.lock:
            self.k += 1
            return self.nodes[self.k % len(self.nodes)]

    def connect(self):
        h, _, p = self.node().rpartition(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(ANSWER_S)
        try:
            s.connect((h, int(p)))
        except OSError:
            s.close()
            raise Failed("refused", True)
        return s

    def request(self, path, close):
        return (b"GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rollout\r\n%s\r\n"
                % (path.encode(), self.host.encode(), b"Connection: close\r\n" if close else b""))


def paced(period, body):
    due = time.monotonic()
    while not stop.is_set():
        body()
        due += period
        left = due - time.monotonic()
        if left > 0:
            stop.wait(left)
        else:
            due = time.monotonic()  # late: no burst to catch up


def once(g, out, kind, path, timeout):
    start = now_ms()
    s = None
    try:
        s = g.connect()
        s.sendall(g.request(path, True))
        status, inst, _ = read_answer(s, timeout)
        record(out, start, g.name, kind, "ok" if status == 200 else str(status), inst)
    except Failed as f:
        record(out, start, g.name, kind, f.outcome, "-")
    except OSError:
        record(out, start, g.name, kind, "reset", "-")
    finally:
        if s:
            s.close()


def keepalive(g, out, rate):
    s = None
    used = False

    def one():
        nonlocal s, used
        start = now_ms()
        outcome, inst, retried = "ok", "-", False
        for attempt in (1, 2):
            try:
                if s is None:
                    s, used = g.connect(), False
                try:
                    s.sendall(g.request("/", False))
                except OSError:
                    raise Failed("reset", True)
                status, inst, close = read_answer(s, ANSWER_S)
                used = True
                outcome = "ok" if status == 200 else str(status)
                if close:
                    s.close()
                    s = None
                break
            except Failed as f:
                was_used = used
                if s:
                    s.close()
                s = None
                outcome = f.outcome
                # A browser retries once when a connection it had used
                # before fails before any byte of the answer.
                if attempt == 1 and was_used and f.before_answer:
                    retried = True
                    continue
                break
        record(out, start, g.name, "keepalive" + ("-retried" if retried else ""), outcome, inst)

    paced(1.0 / rate, one)
    if s:
        s.close()


def run(a):
    out = open(a.out, "a", buffering=1)
    groups = []
    for spec in a.group:
        name, _, nodes = spec.partition("=")
        groups.append(Group(name, nodes.split(","), a.host))
    threads = []
    for g in groups:
        # Fresh connections open loop: each in a thread of its own, started
        # on time whatever the ones before are waiting for.
        threads.append(threading.Thread(target=paced, args=(1.0 / a.fresh, lambda g=g: threading.Thread(
            target=once, args=(g, out, "fresh", "/", ANSWER_S), daemon=True).start())))
        for _ in range(a.keepalive):
            threads.append(threading.Thread(target=keepalive, args=(g, out, a.ka_rate)))
        for _ in range(a.slow):
            threads.append(threading.Thread(
                target=paced, args=(1.0, lambda g=g: once(g, out, "slow", "/slow", ANSWER_S + 3))))
    for t in threads:
        t.daemon = True
        t.start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("running", flush=True)
    while not stop.is_set():
        stop.wait(0.5)
    for t in threads:
        t.join(10)
    with out_lock:
        out.close()


def out_of_rotation(logs, frm, to):
    """Instance-seconds not healthy in [frm, to), mean over the nodes' logs."""
    total = 0.0
    for path in logs:
        state, since = {}, {}
        out = 0.0
        start = None
        for line in open(path):
            f = line.split()
            t = int(f[0])
            if f[1] == "started" and start is None:
                start = t
            if f[1] != "health":
                continue
            iid, new = f[2], f[4]
            old_t = since.get(iid, start if start is not None else t)
            if state.get(iid, "unknown") != "healthy":
                out += max(0, min(t, to) - max(old_t, frm))
            state[iid], since[iid] = new, t
        for iid, st in state.items():
            if st != "healthy":
                out += max(0, to - max(since[iid], frm))
        total += out / 1000.0
    return total / len(logs)


def count(a):
    per = collections.OrderedDict()
    for line in open(a.out):
        f = line.split()
        if len(f) != 6:
            continue
        start = int(f[0])
        if start < a.frm or start >= a.to:
            continue
        g = per.setdefault(f[2], {"sent": 0, "failed": 0, "retried": 0,
                                  "kinds": collections.Counter(), "bad": collections.Counter(),
                                  "what": collections.Counter()})
        kind = f[3].replace("-retried", "")
        g["sent"] += 1
        g["kinds"][kind] += 1
        if f[3].endswith("-retried"):
            g["retried"] += 1
        if f[4] != "ok":
            g["failed"] += 1
            g["bad"][kind] += 1
            g["what"][f[4]] += 1
    rot = ""
    if a.gwlog:
        rot = " out_of_rotation=%.1f" % out_of_rotation(a.gwlog, a.frm, a.to)
    for name, g in per.items():
        if a.group and name != a.group:
            continue
        print("%s sent=%d failed=%d %s retried=%d what=%s%s" % (
            name, g["sent"], g["failed"],
            " ".join("%s=%d/%d" % (k, g["bad"][k], g["kinds"][k])
                     for k in ("fresh", "keepalive", "slow")),
            g["retried"],
            ",".join("%s:%d" % kv for kv in sorted(g["what"].items())) or "-", rot))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--group", action="append", required=True)
    r.add_argument("--host", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--fresh", type=float, default=30)
    r.add_argument("--keepalive", type=int, default=2)
    r.add_argument("--ka-rate", type=float, default=10)
    r.add_argument("--slow", type=int, default=3)
    c = sub.add_parser("count")
    c.add_argument("--out", required=True)
    c.add_argument("--from", dest="frm", type=int, required=True)
    c.add_argument("--to", type=int, required=True)
    c.add_argument("--group")
    c.add_argument("--gwlog", action="append")
    a = ap.parse_args()
    run(a) if a.cmd == "run" else count(a)


if __name__ == "__main__":
    main()
