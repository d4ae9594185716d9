#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One node of the dstack gateway, as far as health gating and routing go.

  gateway.py --listen ADDR:PORT --app APP_ID --instance ID=IP [...]
             [--agent-port 8090] [--interval 5] [--timeout 2]
             [--failure-threshold 2] [--concurrency 16] [--connect-top-n 3]
             [--cache-top-n 30] [--connect-timeout 5] [--control ADDR:PORT]
             [--log FILE] [--name NAME]

A test tool, not a product part. Taken from Dstack-TEE/dstack at 205f0dd
(read through the search tools; no code copied, the behaviour re-written):

* The poller, dstack/gateway/src/proxy/health_check.rs (`poll_forever`,
  `poll_round`, `apply_hysteresis`, `poll_instance`): a round every
  `interval` on tokio's interval with MissedTickBehavior::Delay; each round
  polls every gated instance, `concurrency` at a time, starting where the
  last round stopped, and gets one interval at most; each poll is a fresh
  connection to the agent port, `POST /prpc/v1/Health?json`, under `timeout`.
  An answer with `healthy` true is Healthy, false is Unhealthy, both believed
  at once; no usable answer (refused, timed out, a non-200 status, not the
  JSON of a HealthResponse, over the response bound) counts only when it is
  the `failure_threshold`th in a row, and until then the instance keeps what
  it had. Each verdict is applied as its poll lands. Defaults: interval 5 s,
  timeout 2 s, concurrency 16, failure_threshold 2 (the `[core.proxy.
  health_check]` section of upstream's health check documentation and the
  tests' `config()` there).
* The health state, dstack/gateway/src/models.rs (`HealthState`): an instance
  that asked for gating starts Unknown, which is not healthy; a change of
  state drops the app's cached selection (main_service.rs,
  `record_instance_health`).
* The routing, dstack/gateway/src/main_service.rs (`select_top_n_hosts`,
  `retain_healthy`, `random_select_a_host`): an id that names an instance
  goes to that instance whatever its health (instance-id routing is not
  gated); an app id takes the app's instances, keeps the healthy ones unless
  none is (fail-open: then all of them), sorts them by WireGuard handshake
  age, freshest first, keeps `connect_top_n` and caches that selection for
  `cache_top_n` (30 s; an empty one is not reused); `connect_top_n` 0 picks
  one at random per connection, with the same fail-open.
* The connection, dstack/gateway/src/proxy/tls_passthough.rs
  (`connect_multiple_hosts`, `proxy_to_app`; not stored at 205f0dd, read at
  18f1b1c and at 312dc60, the same race in both): connects to every selected
  instance at once and keeps the first connection that succeeds (the others
  are dropped), all under `timeouts.connect` (5 s); when none connects the
  client's connection is closed. Then the bytes read so far are written and
  both directions are copied until both have ended.

Where it differs, on purpose:
* Plain TCP in place of TLS passthrough. Upstream reads the SNI from the
  ClientHello and looks the app up in DNS; here the first request head is
  read and its Host header, `<id>-<port>.<anything>`, names the app or
  instance id and the port; everything read is passed on, as upstream passes
  the ClientHello on.
* WireGuard handshake ages: no WireGuard. Every instance has a handshake time,
  first the order of --instance (the first freshest); `POST /handshake?id=X`
  on the control port makes X's handshake now (what a rekey does every 2
  minutes). No instance is ever stale.
* On loopback the connects of a race complete together; among those done at
  the same moment the stand-in keeps the first of the selection (the
  freshest handshake). Over real paths the nearest instance wins.
* Everything on loopback: each instance is its own 127.x address; this
  node's polls leave from the node's own listen address, as each gateway
  node polls from its own WireGuard address.
* No limits on a bridged connection: upstream ends one after `timeouts.total`
  (5 h) and after `timeouts.idle` with no byte either way (10 min; proxy.rs
  `conn_task`, proxy/idle.rs, gateway.toml), both far longer than a
  rollout's step, so no request here could meet them.
* Not modelled, since no rollout touches them: the instance's own
  `health_check` flag (every instance here is gated), the saved health
  snapshot (`health_store`), Admin.SetInstanceReady, port policy and
  connection limits.

The control port (--control) answers GET /state with this node's view as
JSON: {"name", "health": {id: state}, "top": [ids of the cached selection],
"polls": rounds done};
--log gets a line per health change ("T_MS health ID OLD NEW REASON", T_MS
wall-clock milliseconds) and per new selection ("T_MS select ID,ID").
"""
import argparse
import http.server
import json
import random
import select
import socket
import sys
import threading
import time

# upstream's bound on a guest agent's answer (dstack/gateway/src/proxy.rs,
# MAX_GUEST_RESPONSE_BYTES at 205f0dd: sized for Info, which Health shares)
MAX_RESPONSE = 16 * 1024 * 1024
HEAD_MAX = 16 * 1024


class Node:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.instances = {}  # id -> ip
        self.order = []
        for spec in a.instance:
            iid, _, ip = spec.partition("=")
            self.instances[iid] = ip
            self.order.append(iid)
        now = time.monotonic()
        # The first freshest: a handshake a millisecond older per place.
        self.handshake = {iid: now - k * 0.001 for k, iid in enumerate(self.order)}
        self.health = {iid: "unknown" for iid in self.order}
        self.failures = {}
        self.top = None  # (selection, monotonic time it was made)
        self.cursor = 0
        self.polls = 0
        self.log = open(a.log, "a", buffering=1) if a.log else None
        self.src = a.listen.rpartition(":")[0]

    def note(self, line):
        if self.log:
            self.log.write("%d %s\n" % (time.time() * 1000, line))

    # --- the poller ------------------------------------------------------

    def poll_instance(self, ip):
        """One Health call: ("healthy"|"unhealthy"|"unreachable", reason)."""
        deadline = time.monotonic() + self.a.timeout
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((self.src, 0))
            s.settimeout(self.a.timeout)
            s.connect((ip, self.a.agent_port))
            s.sendall(b"POST /prpc/v1/Health?json HTTP/1.1\r\nHost: %s:%d\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 2\r\n"
                      b"Connection: close\r\n\r\n{}" % (ip.encode(), self.a.agent_port))
            data = b""
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "unreachable", "health poll timed out"
                s.settimeout(left)
                b = s.recv(65536)
                if not b:
                    break
                data += b
                if len(data) > MAX_RESPONSE:
                    return "unreachable", "response over the bound"
        except socket.timeout:
            return "unreachable", "health poll timed out"
        except OSError as e:
            return "unreachable", "health poll failed: %s" % e.strerror
        finally:
            s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        try:
            status = int(head.split(b" ", 2)[1])
            if status != 200:
                return "unreachable", "status %d" % status
            v = json.loads(body)
            if not isinstance(v.get("healthy"), bool):
                return "unreachable", "no healthy field"
        except (IndexError, ValueError, AttributeError):
            return "unreachable", "undecodable answer"
        return ("healthy", "") if v["healthy"] else ("unhealthy", "answered unhealthy")

    def apply(self, iid, result, reason):
        """apply_hysteresis, then record_instance_health."""
        if result == "unreachable":
            n = self.failures.get(iid, 0) + 1
            self.failures[iid] = n
            if n < self.a.failure_threshold:
                return
            result, reason = "unhealthy", "%s (%d consecutive failures)" % (reason, n)
        else:
            self.failures.pop(iid, None)
        with self.lock:
            old = self.health[iid]
            if old == result:
                return
            self.health[iid] = result
            self.top = None  # the cached selection predates this
        self.note("health %s %s %s %s" % (iid, old, result, reason.replace(" ", "_") or "-"))

    def round(self):
        started = time.monotonic()
        targets = list(self.order)
        k = self.cursor % len(targets)
        targets = targets[k:] + targets[:k]
        pending = list(targets)
        landed = []
        cond = threading.Condition()

        def worker():
            while True:
                with cond:
                    if not pending:
                        return
                    iid = pending.pop(0)
                r = self.poll_instance(self.instances[iid])
                with cond:
                    landed.append((iid, r))
                    cond.notify()

        for _ in range(min(self.a.concurrency, len(targets))):
            threading.Thread(target=worker, daemon=True).start()
        polled = 0
        deadline = started + self.a.interval
        while polled < len(targets):
            with cond:
                while not landed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    cond.wait(left)
                if not landed:
                    break
                iid, (result, reason) = landed.pop(0)
            polled += 1
            self.apply(iid, result, reason)
        self.polls += 1
        if polled < len(targets):
            self.note("round polled %d of %d" % (polled, len(targets)))
        self.cursor += polled

    def poll_forever(self):
        period = self.a.interval
        due = time.monotonic()
        while True:
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            fired = time.monotonic()
            # tokio's Interval: on time (within 5 ms) the next tick is one
            # period after this one's; late, Delay makes it a period from now.
            due = due + period if fired <= due + 0.005 else fired + period
            self.round()

    # --- routing ---------------------------------------------------------

    def healthy(self, iid):
        return self.health[iid] == "healthy"

    def select(self, ident):
        """select_top_n_hosts: the ids to race for a connection to ident."""
        with self.lock:
            if ident in self.instances:
                return [ident]
            if ident != self.a.app:
                return []
            n = self.a.connect_top_n
            cands = list(self.order)
            if any(self.healthy(i) for i in cands):
                cands = [i for i in cands if self.healthy(i)]
            if n == 0:
                return [random.choice(cands)]
            if self.top and self.top[0] and time.monotonic() - self.top[1] < self.a.cache_top_n:
                return list(self.top[0])
            cands.sort(key=lambda i: -self.handshake[i])
            sel = cands[:n]
            self.top = (sel, time.monotonic())
        self.note("select %s" % ",".join(sel))
        return sel

    def connect_first(self, ids, port):
        """connect_multiple_hosts: every connect at once, the first that
        succeeds kept, the rest closed; None when none does in time."""
        socks = {}
        for iid in ids:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect((self.instances[iid], port))
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                continue
            socks[s] = iid
        won = None
        deadline = time.monotonic() + self.a.connect_timeout
        while socks and won is None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            _, w, _ = select.select([], list(socks), [], left)
            for s in w:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    won = s
                    break
                del socks[s]
                s.close()
        for s in list(socks):
            if s is not won:
                s.close()
        if won is not None:
            won.setblocking(True)
            won.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return won

    def handle(self, c):
        try:
            c.settimeout(5)  # upstream's handshake timeout, for the SNI
            buf = b""
            while b"\r\n\r\n" not in buf and len(buf) < HEAD_MAX:
                b = c.recv(HEAD_MAX)
                if not b:
                    return
                buf += b
            host = ""
            for line in buf.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"host":
                    host = v.strip().decode("ascii", "replace")
            ident, _, rest = host.partition(".")[0].rpartition("-")
            try:
                port = int(rest)
            except ValueError:
                return
            ids = self.select(ident)
            up = self.connect_first(ids, port) if ids else None
            if up is None:
                self.note("no connection to %s" % ",".join(ids) if ids else "unknown %s" % ident)
                return
            c.settimeout(None)
            try:
                up.sendall(buf)
                bridge(c, up)
            finally:
                up.close()
        except OSError:
            pass
        finally:
            c.close()

    def serve(self):
        host, _, port = self.a.listen.rpartition(":")
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((host, int(port)))
        ls.listen(1024)
        while True:
            c, _ = ls.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.handle, args=(c,), daemon=True).start()


def bridge(a, b):
    """Both directions until both have ended; an end is passed on as a
    shutdown of the other side's writing, an error ends both."""
    open_ = {a: b, b: a}
    while open_:
        r, _, _ = select.select(list(open_), [], [])
        for s in r:
            try:
                data = s.recv(65536)
            except OSError:
                return
            peer = open_[s]
            if data:
                try:
                    peer.sendall(data)
                except OSError:
                    return
                continue
            del open_[s]
            try:
                peer.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def control(node, addr):
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def answer(self, obj):
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            with node.lock:
                top = list(node.top[0]) if node.top else []
                self.answer({"name": node.a.name, "health": dict(node.health), "top": top,
                             "polls": node.polls})

        def do_POST(self):
            iid = self.path.partition("id=")[2]
            with node.lock:
                if iid not in node.instances:
                    self.send_error(404)
                    return
                node.handshake[iid] = time.monotonic()
            node.note("handshake %s" % iid)
            self.answer({"handshake": iid})

    host, _, port = addr.rpartition(":")
    srv = http.server.ThreadingHTTPServer((host, int(port)), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--instance", action="append", required=True)
    ap.add_argument("--agent-port", type=int, default=8090)
    ap.add_argument("--interval", type=float, default=5)
    ap.add_argument("--timeout", type=float, default=2)
    ap.add_argument("--failure-threshold", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--connect-top-n", type=int, default=3)
    ap.add_argument("--cache-top-n", type=float, default=30)
    ap.add_argument("--connect-timeout", type=float, default=5)
    ap.add_argument("--control")
    ap.add_argument("--log")
    ap.add_argument("--name", default="gateway")
    a = ap.parse_args()
    node = Node(a)
    if a.control:
        control(node, a.control)
    threading.Thread(target=node.poll_forever, daemon=True).start()
    node.note("started %s connect_top_n=%d interval=%g" % (a.name, a.connect_top_n, a.interval))
    sys.stdout.write("listening on %s\n" % a.listen)
    sys.stdout.flush()
    node.serve()


if __name__ == "__main__":
    main()
