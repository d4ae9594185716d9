#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The health side of upstream's dstack-guest-agent: a verdict refreshed on its
own timer, served as Worker.Health.

  guest_health.py (--listen ADDR:PORT | --unix PATH)
                  (--status-file PATH | --docker SOCKET --project NAME)
                  [--interval 5] [--log FILE]
  (--file is --status-file, --reread is --interval)

A test tool, not a product part: "upstream's judging" in tests/e2e/rollout.sh
and bench/rollout.sh, and the guest agent that reads a sidecar's verdict file
(there and in tests/e2e/sidecar.sh).
Taken from Dstack-TEE/dstack at 205f0dd (read through the search tools; no
code copied, the behaviour re-written):

* dstack/guest-agent/src/health.rs (`HealthMonitor`, `refresh_forever`,
  `read_health_file`, `judge_health_file`): the verdict starts as `<health>`
  "health has not been determined yet"; a refresh, then a sleep of
  REFRESH_INTERVAL (5 s), for ever; a refresh that fails keeps the previous
  verdict until the third failure in a row (MAX_CONSECUTIVE_FAILURES), whose
  error is then served; a refresh runs under REFRESH_TIMEOUT (10 s). The
  status file: a missing, unreadable or non-regular file is unhealthy; its
  first 4096 bytes, first line the state, second the Unix time (both
  trimmed); older than 60 s (HEALTH_FILE_MAX_AGE_SECS) is unhealthy, a time
  ahead of now is not; `healthy`/`unhealthy` in any case.
* dstack/guest-agent/src/container_health.rs (`collect_docker`, `judge`,
  `is_running`): list every container, stopped ones included, with the
  label com.docker.compose.project=NAME, then inspect each (one gone
  meanwhile is skipped); no container is `<compose>` "no container has been
  created yet"; a container without a health status is not judged; one with
  a health status that is not running is unhealthy whatever that status
  says; otherwise anything but `healthy` is unhealthy. No Docker events, no
  stopping rule, no drain, no memory of a service that had a container.

--interval shortens the 5 s timer (tests/e2e/rollout.sh says by how much).
Health is `POST|GET /prpc/v1/Health[?json]`, JSON, a fresh verdict copy per
request; --log gets a line per verdict change, "TIME healthy|unhealthy JSON"
(TIME: Unix seconds with fractions), so that a test can tell when the guest
agent heard it.
"""
import argparse
import http.client
import http.server
import json
import os
import socket
import socketserver
import stat
import threading
import time
import urllib.parse

MAX_FAILURES = 3
REFRESH_TIMEOUT = 10
MAX_AGE = 60


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def verdict(healthy, entries=(), error=""):
    return {"healthy": healthy,
            "unhealthy": [{"name": n, "status": s} for n, s in entries],
            "error": error}


def judge_file(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return verdict(False, [("<health_file>", "%s has not been written yet" % path)])
    except OSError as e:
        return verdict(False, [("<health_file>", "cannot read %s: %s" % (path, e.strerror))])
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return verdict(False, [("<health_file>", "cannot read %s: not a regular file" % path)])
        raw = os.read(fd, 4096)
    finally:
        os.close(fd)
    lines = raw.decode("utf-8", "replace").splitlines()
    if not lines:
        return verdict(False, [("<health_file>", "health file is empty")])
    if len(lines) < 2:
        return verdict(False, [("<health_file>", "health file must have two lines")])
    try:
        written = int(lines[1].strip())
        if written < 0:
            raise ValueError
    except ValueError:
        return verdict(False, [("<health_file>", "health file line 2 is not a unix time")])
    age = max(0, int(time.time()) - written)
    if age > MAX_AGE:
        return verdict(False, [("<health_file>", "health file is stale")])
    state = lines[0].strip().lower()
    if state == "healthy":
        return verdict(True)
    if state == "unhealthy":
        return verdict(False, [("<health_file>", "app reports unhealthy")])
    return verdict(False, [("<health_file>", "line 1 is neither healthy nor unhealthy")])


def docker_get(sock, path):
    c = UnixHTTP(sock, REFRESH_TIMEOUT)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def judge_docker(sock, project):
    filt = json.dumps({"label": ["com.docker.compose.project=%s" % project]})
    status, body = docker_get(sock, "/containers/json?all=1&filters=" + urllib.parse.quote(filt))
    if status != 200:
        raise RuntimeError("failed to list containers: %d" % status)
    seen = []
    for c in json.loads(body):
        status, body = docker_get(sock, "/containers/%s/json" % c["Id"])
        if status == 404:
            continue  # gone between the list and the inspect
        if status != 200:
            raise RuntimeError("failed to inspect container: %d" % status)
        st = json.loads(body).get("State") or {}
        health = (st.get("Health") or {}).get("Status")
        names = c.get("Names") or [c["Id"]]
        seen.append((names[0].lstrip("/"), health, st.get("Status")))
    if not seen:
        return verdict(False, [("<compose>", "no container has been created yet")])
    bad = []
    for name, health, state in seen:
        if health in (None, "", "none"):
            continue
        if state is not None and state != "running":
            bad.append((name, "%s (last health check: %s)" % (state, health)))
        elif health != "healthy":
            bad.append((name, health))
    return verdict(not bad, bad)


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        s, _ = self.socket.accept()
        return s, ("unix", 0)  # http.server wants an address it can print


class Monitor:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.latest = verdict(False, [("<health>", "health has not been determined yet")])
        self.log = open(a.log, "a", buffering=1) if a.log else None

    def store(self, v):
        with self.lock:
            changed = v != self.latest
            self.latest = v
        if changed and self.log:
            self.log.write("%.3f %s %s\n" % (time.time(),
                                           "healthy" if v["healthy"] else "unhealthy",
                                           json.dumps(v, separators=(",", ":"))))

    def refresh(self):
        if self.a.status_file:
            return judge_file(self.a.status_file)
        return judge_docker(self.a.docker, self.a.project)

    def forever(self):
        failures = 0
        while True:
            try:
                v = self.refresh()
                failures = 0
                self.store(v)
            except (OSError, RuntimeError, ValueError) as e:
                failures += 1
                if failures >= MAX_FAILURES:
                    self.store(verdict(False, error=str(e)))
            time.sleep(self.a.interval)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen")
    ap.add_argument("--unix")
    ap.add_argument("--status-file", "--file")
    ap.add_argument("--docker")
    ap.add_argument("--project")
    ap.add_argument("--interval", "--reread", type=float, default=5)
    ap.add_argument("--log")
    a = ap.parse_args()
    if bool(a.status_file) == bool(a.docker and a.project):
        ap.error("one of --status-file or --docker with --project")
    if bool(a.listen) == bool(a.unix):
        ap.error("one of --listen or --unix")
    mon = Monitor(a)

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self):
            if urllib.parse.urlsplit(self.path).path != "/prpc/v1/Health":
                self.send_error(404)
                return
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            with mon.lock:
                body = json.dumps(mon.latest, separators=(",", ":")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = answer

    if a.unix:
        if os.path.exists(a.unix):
            os.unlink(a.unix)
        srv = UnixServer(a.unix, H)
        os.chmod(a.unix, 0o666)
    else:
        host, _, port = a.listen.rpartition(":")
        srv = http.server.ThreadingHTTPServer((host, int(port)), H)
    threading.Thread(target=mon.forever, daemon=True).start()
    print("listening on %s" % (a.listen or a.unix), flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
