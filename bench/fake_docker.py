#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A Docker Engine API peer serving one Compose project of N containers, for
the benchmarks.

  fake_docker.py --listen PATH --api 1.41|1.52 --containers N
                 [--project P] [--unhealthy K] [--delay S] [--log F]
                 [--probe-port P [--probe-interval D] [--probe-label T]
                  [--probe-retries N]]

Every container is made from the responses recorded from a real dockerd in
tests/fakes/docker/ (the list item and the inspect body of "demo-web-1", a
running container with a passing healthcheck): only its Id, name and labels
change, so the agent parses bodies of the real size and shape. The last K
containers report "unhealthy". --api picks what /_ping announces: 1.41 makes
the agent inspect every container, 1.52 gives it the health in the list.
--delay S holds every answer S seconds (a runtime that takes the whole
refresh timeout). Framing is dockerd's (Go net/http): Content-Length below
2 KiB, otherwise one chunk. HEAD /_ping and 12-hex ID prefixes are served
too, for the docker CLI reference; /events opens a stream that stays silent
(a quiet project) until the client hangs up. The request log (--log) has one
target a line; the benchmark counts refreshes by its container list lines.
"""
import argparse
import json
import os
import re
import socket
import socketserver
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REC = os.path.join(HERE, "..", "tests", "fakes", "docker")


def recorded_body(name):
    with open(os.path.join(REC, name), "rb") as f:
        raw = f.read()
    head, _, body = raw.partition(b"\r\n\r\n")
    if b"chunked" not in head.lower():
        return body
    out = b""
    while True:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            return out
        out += rest[:n]
        body = rest[n + 2:]


def go_json(obj):
    # Docker's encoder: compact, HTML-escaped, one newline at the end.
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    s = s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (s + "\n").encode()


def frame(api, body, status="200 OK"):
    head = ("HTTP/1.1 %s\r\nApi-Version: %s\r\nContent-Type: application/json\r\n"
            "Docker-Experimental: false\r\nOstype: linux\r\n"
            "Server: Docker/20.10.24+dfsg1 (linux)\r\n"
            "Date: Sun, 29 Nov 2026 20:29:56 GMT\r\nConnection: close\r\n"
            % (status, api)).encode()
    if len(body) < 2048:
        return head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    return head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def build(api, n, project, unhealthy, probe_port=0, probe_interval="1s",
          probe_label="http://:{port}/healthz", probe_retries=None):
    items = json.loads(recorded_body("list-1.41.http"))
    item_t = next(i for i in items if i["Names"] == ["/demo-web-1"])
    insp_t = json.loads(recorded_body("inspect-web.http"))
    listing, inspects = [], {}
    for i in range(n):
        cid = "%064x" % (0x5eed0000 + i * 7919)
        cid = (cid[-12:] * 6)[:64]
        svc = "svc%d" % i
        name = "%s-%s-1" % (project, svc)
        health = "unhealthy" if i >= n - unhealthy else "healthy"
        labels = {"com.docker.compose.project": project,
                  "com.docker.compose.service": svc}
        it = json.loads(json.dumps(item_t))
        it.update(Id=cid, Names=["/" + name], Labels=labels)
        if api >= (1, 52):
            it["Health"] = {"Status": health, "FailingStreak": 0 if health == "healthy" else 3}
        listing.append(it)
        ins = json.loads(json.dumps(insp_t))
        ins.update(Id=cid, Name="/" + name)
        ins["Config"]["Labels"] = labels
        ins["Config"]["Hostname"] = cid[:12]
        ins["State"]["Health"]["Status"] = health
        if probe_port:
            # A probed container with no healthcheck (issue 27), whose own
            # address is loopback: the benchmark's peer listens there.
            labels = dict(labels)
            labels["dstack.healthd.probe"] = probe_label.format(port=probe_port + i, i=i)
            labels["dstack.healthd.probe.interval"] = probe_interval
            labels["dstack.healthd.probe.timeout"] = "500ms"
            if probe_retries:
                labels["dstack.healthd.probe.retries"] = probe_retries
            it["Labels"] = labels
            ins["Config"]["Labels"] = labels
            ins["Config"].pop("Healthcheck", None)
            ins["State"].pop("Health", None)
            it.pop("Health", None)
            # network_mode: host, the one way a container's own address is
            # loopback: a bridge network reporting 127.0.0.1 is refused
            # (runtime/probes.c), as a runtime's address never meant for
            # a container.
            ins["HostConfig"]["NetworkMode"] = "host"
            ins["NetworkSettings"]["Networks"] = {"host": {"IPAddress": "", "IPPrefixLen": 0}}
        inspects[cid] = go_json(ins)
    return go_json(listing), inspects


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        b = conn.recv(4096)
        if not b or len(data) > 65536:
            return None, None
        data += b
    parts = data.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    return (parts[0], parts[1]) if len(parts) == 3 else (None, None)


INSPECT = re.compile(r"(?:/v[0-9.]+)?/containers/([0-9a-f]{12,64})/json")
LIST = re.compile(r"(?:/v[0-9.]+)?/containers/json(\?.*)?")
EVENTS = re.compile(r"(?:/v[0-9.]+)?/events")


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        srv = self.server
        conn = self.request
        try:
            method, target = read_request(conn)
            if target is None:
                return
            if srv.log:
                with srv.lock:
                    srv.log.write(target + "\n")
                    srv.log.flush()
            if srv.delay:
                time.sleep(srv.delay)
            if EVENTS.fullmatch(target.split("?", 1)[0]):
                # A quiet project: the stream opens and stays silent until
                # the agent hangs up, as dockerd's does.
                conn.sendall(frame(srv.api_s, b"").split(b"Content-Length")[0] +
                             b"Transfer-Encoding: chunked\r\n\r\n")
                while conn.recv(4096):
                    pass
                return
            conn.sendall(self.answer(method, target))
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def answer(self, method, target):
        srv = self.server
        path = target.split("?", 1)[0]
        if path.endswith("/_ping"):
            r = frame(srv.api_s, b"OK").replace(b"application/json", b"text/plain; charset=utf-8")
            return r.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n" if method == "HEAD" else r
        if LIST.fullmatch(target):
            return srv.list_resp
        m = INSPECT.fullmatch(path)
        if m:
            key = m.group(1)
            body = srv.inspects.get(key) or srv.inspects.get(srv.prefix.get(key[:12], ""))
            if body:
                return frame(srv.api_s, body)
        return frame(srv.api_s, b'{"message":"page not found"}\n', "404 Not Found")


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--api", default="1.41", choices=["1.41", "1.52"])
    ap.add_argument("--containers", type=int, default=1)
    ap.add_argument("--project", default="bench")
    ap.add_argument("--unhealthy", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--log")
    ap.add_argument("--probe-port", type=int, default=0,
                    help="probe container i on 127.0.0.1:PORT+i (issue 27)")
    ap.add_argument("--probe-interval", default="1s")
    ap.add_argument("--probe-label", default="http://:{port}/healthz",
                    help="the probe label, {port} and {i} filled (issue 34: grpc://)")
    ap.add_argument("--probe-retries", default=None)
    a = ap.parse_args()
    api = tuple(int(x) for x in a.api.split("."))
    listing, inspects = build(api, a.containers, a.project, a.unhealthy, a.probe_port,
                              a.probe_interval, a.probe_label, a.probe_retries)
    if os.path.exists(a.listen):
        os.unlink(a.listen)
    srv = Server(a.listen, Handler)
    srv.api_s = a.api
    srv.list_resp = frame(a.api, listing)
    srv.inspects = inspects
    srv.prefix = {k[:12]: k for k in inspects}
    srv.delay = a.delay
    srv.lock = threading.Lock()
    srv.log = open(a.log, "a") if a.log else None
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
