#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A scripted Docker Engine API peer for the docker_list tests.

  docker_fake.py --listen unix:PATH | tcp:HOST:PORT [--port-file F]
                 [--tls CERT KEY [--client-ca CA]] [--log F]
                 [--routes-file F] ROUTE...

Each ROUTE is REGEX=ACTION; the first REGEX that fully matches the request
target wins (no match: 404 like dockerd's). ACTIONs:
  file:PATH            send PATH's bytes (a raw recorded response) as they are
  status:CODE:BODY     a JSON answer with Content-Length
  hang                 read the request, then never answer
  close                close without answering
  garbage              bytes that are not HTTP
  big:N                200 with Content-Length N, then N bytes
  bigchunked:N         200, chunked, N bytes in 64 KiB chunks
  drip:SECONDS:PATH    send PATH's bytes one at a time, SECONDS apart
  badchunk             200, chunked, with a chunk size that is not hex
  cutchunk             200, chunked, closed in the middle of a chunk
  reset:N              200 with Content-Length 1 MiB, N bytes, then a TCP
                       reset (RST on TCP; an abortive close on a unix socket)
With --routes-file, the file's ROUTE lines (one a line) are read afresh for
every request and come before the command line's, so that a test can change
the peer's behaviour while a client keeps talking to it.
Every request target is appended to the log, one a line.
"""
import argparse
import os
import re
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time


def parse_routes(specs):
    routes = []
    for spec in specs:
        rx, _, action = spec.partition("=")
        routes.append((re.compile(rx), action))
    return routes


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        b = conn.recv(4096)
        if not b:
            return None
        data += b
        if len(data) > 65536:
            return None
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    return parts[1] if len(parts) == 3 else None


def respond(conn, action):
    kind, _, arg = action.partition(":")
    if kind == "file":
        with open(arg, "rb") as f:
            conn.sendall(f.read())
    elif kind == "status":
        code, _, body = arg.partition(":")
        body = body.encode()
        conn.sendall(b"HTTP/1.1 %s X\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                     % (code.encode(), len(body), body))
    elif kind == "hang":
        while True:
            time.sleep(3600)
    elif kind == "close":
        pass
    elif kind == "garbage":
        conn.sendall(b"\x00\xffSSH-2.0-nonsense\r\n\r\n\x16\x03\x01")
    elif kind == "big":
        n = int(arg)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
        send_filler(conn, n, chunked=False)
    elif kind == "bigchunked":
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        send_filler(conn, int(arg), chunked=True)
        conn.sendall(b"0\r\n\r\n")
    elif kind == "drip":
        delay, _, path = arg.partition(":")
        with open(path, "rb") as f:
            data = f.read()
        for i in range(len(data)):
            conn.sendall(data[i:i + 1])
            time.sleep(float(delay))
    elif kind == "badchunk":
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"zz\r\n[]\r\n0\r\n\r\n")
    elif kind == "cutchunk":
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"100\r\n[{\"Id\":")
    elif kind == "reset":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n")
        conn.sendall(b"[" + b" " * (int(arg) - 1))
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
        conn.close()
    else:
        raise SystemExit("unknown action " + action)


def send_filler(conn, n, chunked):
    block = b"[" + b" " * 65534 + b"]"
    while n > 0:
        k = min(n, len(block))
        data = block[:k]
        if chunked:
            data = b"%x\r\n%s\r\n" % (k, data)
        conn.sendall(data)
        n -= k


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        conn = self.request
        srv = self.server
        try:
            if srv.tls:
                conn = srv.tls.wrap_socket(conn, server_side=True)
            target = read_request(conn)
            if target is None:
                return
            with srv.lock:
                if srv.log:
                    with open(srv.log, "a") as f:
                        f.write(target + "\n")
            routes = srv.routes
            if srv.routes_file:
                try:
                    with open(srv.routes_file) as f:
                        lines = [l.strip() for l in f if l.strip()]
                    routes = parse_routes(lines) + routes
                except FileNotFoundError:
                    pass
            for rx, action in routes:
                if rx.fullmatch(target):
                    respond(conn, action)
                    break
            else:
                respond(conn, 'status:404:{"message":"page not found"}')
            try:
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        except (OSError, ssl.SSLError):
            pass


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--port-file")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--client-ca")
    ap.add_argument("--log")
    ap.add_argument("--routes-file")
    ap.add_argument("routes", nargs="*")
    a = ap.parse_args()
    if a.listen.startswith("unix:"):
        srv = UnixServer(a.listen[5:], Handler)
    else:
        host, _, port = a.listen[4:].rpartition(":")
        srv = TCPServer((host, int(port)), Handler)
    srv.routes = parse_routes(a.routes)
    srv.log = a.log
    srv.routes_file = a.routes_file
    srv.lock = threading.Lock()
    srv.tls = None
    if a.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls[0], a.tls[1])
        if a.client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(a.client_ca)
        srv.tls = ctx
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % srv.server_address[1])
        os.rename(tmp, a.port_file)
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
