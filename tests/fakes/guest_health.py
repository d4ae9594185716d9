#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for a stock guest agent's Health over an app's status file.

  guest_health.py --file STATUS (--unix PATH | --listen HOST:PORT)
                  [--reread SECONDS] [--log F]

As upstream's guest agent (Dstack-TEE/dstack guest-agent/src/health.rs)
does for requirements.health_status_file: the file is read on a timer of
its own (REFRESH_INTERVAL, 5 s; --reread to change it), and Health only
serves what the last read found: healthy when line 1 is "healthy"
(any case) and line 2 a Unix time at most 60 s old; anything else is
unhealthy. GET or POST /prpc/v1/Health answers JSON. Each read that changes
the verdict is a line "TIME healthy|unhealthy" in --log (TIME: Unix seconds
with fractions), so a test can tell when the guest agent heard it.
"""
import argparse
import http.server
import json
import os
import socketserver
import sys
import threading
import time

STATE = {"healthy": False, "why": "health has not been determined yet"}


def judge(path):
    try:
        with open(path, "rb") as f:
            lines = f.read(4096).decode().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        return False, "cannot read: %s" % e.__class__.__name__
    if len(lines) < 2 or not lines[1].strip().isdigit():
        return False, "malformed"
    if time.time() - int(lines[1].strip()) > 60:
        return False, "stale"
    word = lines[0].strip().lower()
    return word == "healthy", "the app reports %s" % word


def reader(path, every, log):
    last = None
    while True:
        ok, why = judge(path)
        STATE.update(healthy=ok, why=why)
        if ok != last and log:
            with open(log, "a") as f:
                f.write("%.3f %s\n" % (time.time(), "healthy" if ok else "unhealthy"))
        last = ok
        time.sleep(every)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self):
        if self.path.split("?", 1)[0] != "/prpc/v1/Health":
            body = b"not found"
            self.send_response(404)
        else:
            v = {"healthy": STATE["healthy"], "error": "",
                 "unhealthy": [] if STATE["healthy"] else
                 [{"name": "<health_file>", "status": STATE["why"]}]}
            body = json.dumps(v).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.answer()


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        s, _ = self.socket.accept()
        return s, ("unix", 0)


class TCPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", required=True)
    ap.add_argument("--unix")
    ap.add_argument("--listen")
    ap.add_argument("--reread", type=float, default=5.0)
    ap.add_argument("--log")
    a = ap.parse_args()
    threading.Thread(target=reader, args=(a.file, a.reread, a.log), daemon=True).start()
    if a.unix:
        if os.path.exists(a.unix):
            os.unlink(a.unix)
        srv = UnixServer(a.unix, Handler)
        os.chmod(a.unix, 0o666)
    else:
        host, port = a.listen.rsplit(":", 1)
        srv = TCPServer((host, int(port)), Handler)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
