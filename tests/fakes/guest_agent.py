#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for dstack-guest-agent's public port, behind the agent's relay.

  guest_agent.py --listen HOST:PORT | --unix PATH  [--ready FILE] [--keepalive S]
                 [--backlog N] [--hold FILE]

A real HTTP/1.1 server (http.server, a thread per connection) serving:
  GET  /                 1 MiB of random bytes, the same until a restart (sha256 in
                         /page.sha256, so a test compares without a copy)
  GET  /page.sha256      that sha256, hex
  GET  /logs/NAME[?every=S]  chunked, "line N" every 100 ms (every S
                         seconds) until the client goes (a followed container log)
  GET  /ws               "101 Switching Protocols", then every byte read is
                         sent back as it comes (a WebSocket's pings and pongs,
                         unparsed), with no keep-alive deadline, until the
                         client goes; /ws?quiet reads them and sends nothing
                         back (a server that only speaks when it has news)
  POST /sink             answers a 4 MiB body at once without reading the
                         request body, then waits for the client to go (both
                         directions of a relayed connection held full)
  POST /prpc/Info?json   {"app_id":"stand-in","n":N} with keep-alive (N counts
                         the requests on this connection)
  GET  /prpc/v1/Version  {"version":"stand-in"}
  GET  /closing          a short answer, then the connection closed: the answer
                         and the FIN in one segment
  GET  /reset?F          a short answer, then the connection reset (SO_LINGER 0);
                         it writes F.got when the request is in, answers once F.go
                         exists, and writes F.sent after the reset (a test holds the
                         agent still meanwhile, so both arrive in one event)
  GET  /cut              an answer delimited by the close (no length, not chunked):
                         its head and half its body, then, 300 ms later, a reset
                         (a guest agent that fails mid-answer)
  GET  /small            "small\n", kept alive
  GET  /slow?S           "slow\n" after S seconds (a request the guest agent takes
                         its time over: its link awaits the answer)
  POST /echo             the request body back (an upload echo)
  POST /upload?F         reads the body (Content-Length); writes F.got once the head
                         is in, and F.end once the body has ended: "whole N", "eof N"
                         (the stream ended first) or "reset N" (a reset), N the bytes
                         read; answers "got N" when whole
  anything else          404 "stand-in: not found"
Every answer carries "Server: stand-in", so a test tells it from the agent.
Once listening, writes its port to --ready.
--keepalive S: like the guest agent (Rocket, dstack.toml keep_alive = 10), a
connection that sends nothing for S seconds between or inside requests is
closed, and "keep-alive close" written to stderr; no deadline for a head as
such (rwf2/Rocket issue 1405). Without it, connections are kept as long as
the client keeps them.
--backlog N: the listen backlog (default 1024). --hold FILE: accepts nothing while FILE
exists (a guest agent slow to accept), then serves.
"""
import argparse
import hashlib
import http.server
import os
import socket
import socketserver
import struct
import sys
import time

PAGE = os.urandom(1 << 20)  # a new page each start: compare within one run
PAGE_SHA = hashlib.sha256(PAGE).hexdigest().encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "stand-in"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def log_error(self, fmt, *args):
        # http.server's one word for a connection closed at --keepalive.
        if fmt.startswith("Request timed out"):
            sys.stderr.write("keep-alive close\n")
            sys.stderr.flush()

    def setup(self):
        super().setup()
        self.calls = 0

    def send(self, code, body, ctype="application/octet-stream"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        chunks = []
        while n > 0:
            b = self.rfile.read(min(n, 65536))
            if not b:
                break
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/":
            self.send(200, PAGE)
        elif path == "/page.sha256":
            self.send(200, PAGE_SHA, "text/plain")
        elif path == "/prpc/v1/Version":
            self.send(200, b'{"version":"stand-in"}', "application/json")
        elif path.startswith("/logs/"):
            self.logs()
        elif path == "/ws":
            self.ws()
        elif path == "/closing":
            self.closing()
        elif path == "/reset":
            self.reset()
        elif path == "/cut":
            self.cut()
        elif path == "/small":
            self.send(200, b"small\n", "text/plain")
        elif path == "/slow":
            time.sleep(float(self.path.partition("?")[2] or 30))
            self.send(200, b"slow\n", "text/plain")
        else:
            self.send(404, b"stand-in: not found", "text/plain")

    def closing(self):
        body = b"the answer and its end in one segment\n"
        head = (b"HTTP/1.1 200 OK\r\nServer: stand-in\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n" % len(body))
        # Held (MSG_MORE) until the shutdown, which sends it with the FIN.
        self.connection.send(head + body, socket.MSG_MORE)
        self.connection.shutdown(socket.SHUT_WR)
        self.close_connection = True

    def reset(self):
        flag = self.path.partition("?")[2]
        if flag:
            open(flag + ".got", "w").close()
            end = time.monotonic() + 30
            while not os.path.exists(flag + ".go") and time.monotonic() < end:
                time.sleep(0.01)
        body = b"the answer before a reset\n"
        self.connection.sendall(b"HTTP/1.1 200 OK\r\nServer: stand-in\r\nContent-Length: %d\r\n"
                                b"Connection: close\r\n\r\n%s" % (len(body), body))
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True
        if flag:
            open(flag + ".sent", "w").close()

    def cut(self):
        self.connection.sendall(b"HTTP/1.1 200 OK\r\nServer: stand-in\r\n"
                                b"Connection: close\r\n\r\nthe first half, ")
        time.sleep(0.3)
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def ws(self):
        self.connection.settimeout(None)
        self.connection.sendall(b"HTTP/1.1 101 Switching Protocols\r\nServer: stand-in\r\n"
                                b"Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        self.close_connection = True
        quiet = self.path.endswith("?quiet")
        try:
            while True:
                b = self.connection.recv(65536)
                if not b:
                    break
                if not quiet:
                    self.connection.sendall(b)
        except OSError:
            pass

    def sink(self):
        self.close_connection = True
        try:
            self.connection.sendall(b"HTTP/1.1 200 OK\r\nServer: stand-in\r\nContent-Length: %d"
                                    b"\r\n\r\n" % (4 << 20) + b"s" * (4 << 20))
        except OSError:
            pass

    def logs(self):
        every = 0.1
        query = self.path.partition("?")[2]
        if query.startswith("every="):
            every = float(query[len("every="):])
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        n = 0
        try:
            while True:
                line = b"line %d\n" % n
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                n += 1
                time.sleep(every)
        except OSError:
            pass

    def upload(self, flag):
        open(flag + ".got", "w").close()
        want, n, how = int(self.headers.get("Content-Length") or 0), 0, "whole"
        try:
            while n < want:
                b = self.rfile.read1(min(want - n, 65536))
                if not b:
                    how = "eof"
                    break
                n += len(b)
        except ConnectionResetError:
            how = "reset"
        with open(flag + ".end.tmp", "w") as f:
            f.write("%s %d\n" % (how, n))
        os.rename(flag + ".end.tmp", flag + ".end")
        if how == "whole":
            self.send(200, b"got %d" % n, "text/plain")
        else:
            self.close_connection = True

    def do_POST(self):
        path, _, query = self.path.partition("?")
        if path == "/upload":
            return self.upload(query)
        if path == "/sink":
            return self.sink()
        data = self.body()
        self.calls += 1
        if path == "/prpc/Info":
            self.send(200, b'{"app_id":"stand-in","n":%d}' % self.calls, "application/json")
        elif path == "/echo":
            self.send(200, data)
        else:
            self.send(404, b"stand-in: not found", "text/plain")


class TCPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        s, _ = self.socket.accept()
        return s, ("unix", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen")
    ap.add_argument("--unix")
    ap.add_argument("--ready")
    ap.add_argument("--keepalive", type=float)
    ap.add_argument("--backlog", type=int, default=1024)
    ap.add_argument("--hold")
    a = ap.parse_args()
    Handler.timeout = a.keepalive
    TCPServer.request_queue_size = UnixServer.request_queue_size = a.backlog
    if a.unix:
        if os.path.exists(a.unix):
            os.unlink(a.unix)
        srv = UnixServer(a.unix, Handler)
        port = a.unix
    else:
        host, port = a.listen.rsplit(":", 1)
        srv = TCPServer((host, int(port)), Handler)
        port = srv.server_address[1]
    if a.ready:
        with open(a.ready + ".tmp", "w") as f:
            f.write("%s\n" % port)
        os.rename(a.ready + ".tmp", a.ready)
    while a.hold and os.path.exists(a.hold):
        time.sleep(0.05)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
