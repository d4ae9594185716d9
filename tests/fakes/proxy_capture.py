#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A server that writes down every byte a connection sends it, to see the
PROXY headers a real proxy (haproxy's send-proxy, send-proxy-v2) puts before
a request.

  proxy_capture.py --listen HOST:PORT --ready FILE --dir DIR

Each connection is read until its request head ends (its bytes end with
"Host: x\\r\\n\\r\\n", what tests/fakes/proxy_client.py sends) or 10 s pass;
its bytes go to DIR/N.bin (N counting from 1) and it is answered 200 "ok".
Once listening, writes its port to --ready.
"""
import argparse
import os
import socket
import socketserver
import threading

COUNT = [0]
LOCK = threading.Lock()


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.settimeout(10)
        got = b""
        try:
            while not got.endswith(b"Host: x\r\n\r\n") and len(got) < 65536:
                b = self.request.recv(65536)
                if not b:
                    break
                got += b
        except OSError:
            pass
        with LOCK:
            COUNT[0] += 1
            n = COUNT[0]
        path = os.path.join(self.server.dir, "%d.bin" % n)
        with open(path + ".tmp", "wb") as f:
            f.write(got)
        os.rename(path + ".tmp", path)
        try:
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        except OSError:
            pass


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    srv = Server((host, int(port)), Handler)
    srv.dir = a.dir
    with open(a.ready + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(a.ready + ".tmp", a.ready)
    srv.serve_forever()


if __name__ == "__main__":
    main()
