#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 peers for the agent's gRPC probes (issue 34): one that answers
Health/Check as a gRPC server does, and hostile ones.

  h2_peer.py PORT=MODE [PORT=MODE...] [--ready FILE]

On 127.0.0.1:PORT, every connection gets MODE, the client's bytes read and
dropped meanwhile:
  serving        SETTINGS, the answer's headers, DATA with SERVING, trailers
  notserving     the same with NOT_SERVING
  framed         serving, its message cut into DATA frames of one byte
  trickle        serving, the DATA frame's bytes sent one at a time, 5 ms apart
  slow           serving, the DATA frame's bytes 1 s apart (past any timeout)
  continuation   HEADERS without END_HEADERS, then CONTINUATION without end
  huge           SETTINGS, then a frame header saying 16 MiB - 1 bytes
  nosettings     sends nothing at all
  headersfirst   the answer's HEADERS before any SETTINGS
  winupdate      SETTINGS, then WINDOW_UPDATE frames without end
  rst            SETTINGS, then RST_STREAM (REFUSED_STREAM) on stream 1
  goaway         SETTINGS, then GOAWAY (ENHANCE_YOUR_CALM)
  trailersonly   SETTINGS, then one header block that ends the stream
  notrailers     the message in DATA that ends the stream: no trailers
  http1          an HTTP/1.1 400 answer
--ready FILE is written once every port listens.
"""
import socket
import struct
import sys
import threading
import time

HEADERS_BLOCK = b"\x88"  # :status 200, HPACK's static index 8
TRAILERS_BLOCK = b"\x40\x0bgrpc-status\x010"  # literal with indexing


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def message(status):
    body = b"" if status == 0 else bytes([0x08, status])
    return b"\x00" + struct.pack(">I", len(body)) + body


SETTINGS = frame(4, 0, 0, b"")
RESP_HEADERS = frame(1, 4, 1, HEADERS_BLOCK)
TRAILERS = frame(1, 5, 1, TRAILERS_BLOCK)


def answer(status):
    return SETTINGS + RESP_HEADERS + frame(0, 0, 1, message(status)) + TRAILERS


def drain(c):
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass


def endless(c, piece, first=b""):
    try:
        c.sendall(first)
        while True:
            c.sendall(piece * 64)
    except OSError:
        pass


def serve(c, mode):
    threading.Thread(target=drain, args=(c,), daemon=True).start()
    try:
        if mode == "serving":
            c.sendall(answer(1))
        elif mode == "notserving":
            c.sendall(answer(2))
        elif mode == "framed":
            c.sendall(SETTINGS + RESP_HEADERS)
            for b in message(1):
                c.sendall(frame(0, 0, 1, bytes([b])))
            c.sendall(TRAILERS)
        elif mode in ("trickle", "slow"):
            c.sendall(SETTINGS + RESP_HEADERS)
            for b in frame(0, 0, 1, message(1)):
                c.sendall(bytes([b]))
                time.sleep(0.005 if mode == "trickle" else 1)
            c.sendall(TRAILERS)
        elif mode == "continuation":
            endless(c, frame(9, 0, 1, b"\x00" * 16), SETTINGS + frame(1, 0, 1, HEADERS_BLOCK))
        elif mode == "huge":
            c.sendall(SETTINGS + b"\xff\xff\xff\x00\x00\x00\x00\x00\x01")
            endless(c, b"\x00" * 1024)
        elif mode == "nosettings":
            pass
        elif mode == "headersfirst":
            c.sendall(RESP_HEADERS + SETTINGS)
        elif mode == "winupdate":
            endless(c, frame(8, 0, 0, struct.pack(">I", 1)), SETTINGS)
        elif mode == "rst":
            c.sendall(SETTINGS + frame(3, 0, 1, struct.pack(">I", 7)))
        elif mode == "goaway":
            c.sendall(SETTINGS + frame(7, 0, 0, struct.pack(">II", 0, 11)))
        elif mode == "trailersonly":
            c.sendall(SETTINGS + TRAILERS)
        elif mode == "notrailers":
            c.sendall(SETTINGS + RESP_HEADERS + frame(0, 1, 1, message(1)))
        elif mode == "http1":
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        # Held open: the client decides, or its timeout does.
        time.sleep(30)
    except OSError:
        pass
    finally:
        c.close()


def listen(port, mode):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)

    def loop():
        while True:
            c, _ = s.accept()
            threading.Thread(target=serve, args=(c, mode), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def main():
    args = sys.argv[1:]
    ready = None
    if "--ready" in args:
        i = args.index("--ready")
        ready = args[i + 1]
        del args[i:i + 2]
    for a in args:
        port, _, mode = a.partition("=")
        listen(int(port), mode)
    if ready:
        with open(ready, "w") as f:
            f.write("ready\n")
    threading.Event().wait()


if __name__ == "__main__":
    main()
