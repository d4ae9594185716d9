#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 peers for the agent's gRPC probes (issues 34, 42): ones that answer
Health/Check as gRPC servers do, some written with python3-h2, and hostile
ones.

  h2_peer.py PORT=MODE [PORT=MODE...] [--ready FILE]

On 127.0.0.1:PORT, every connection gets MODE, the client's bytes read and
dropped meanwhile:
  serving        SETTINGS, the answer's headers, DATA with SERVING, trailers
                 (grpc-status 0)
  notserving     the same with NOT_SERVING
  unavailable    the same with SERVING, then grpc-status 14 (what grpcio sends
                 for a handler that returns SERVING with code UNAVAILABLE),
                 with a grpc-message of control bytes and UTF-8
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
  trailersonly   SETTINGS, then one header block that ends the stream: 200,
                 gRPC, grpc-status 5 (NOT_FOUND, an unknown service)
  notrailers     the message in DATA that ends the stream: no trailers
  http1          an HTTP/1.1 400 answer
  http502        a proxy's page on an h2c port: :status 502, text/html
  pingfirst      python3-h2: SETTINGS and a PING, and the answer only once
                 the PING is acknowledged with its 8 bytes
  goawayfirst    a graceful GOAWAY (NO_ERROR, last stream 1) as the request
                 comes, then python3-h2's answer (h2 itself sends nothing
                 after its own GOAWAY, so that frame is written here)
  goawayafter    python3-h2: the answer, then a graceful GOAWAY, and the end
  goawayzero     a graceful GOAWAY whose last stream is 0: the call not taken
  tablegrow      a header block whose table size update asks for 8192 bytes
  manyentries    header blocks adding entries past 4096 bytes, then the
                 trailers naming one the table has evicted
  hufpad         trailers with a Huffman string padded with zeros, not EOS
  intoverflow    trailers with an integer over every bound
--ready FILE is written once every port listens.
"""
import socket
import struct
import sys
import threading
import time

# :status 200 (HPACK's static index 8), content-type (static 31) without
# indexing.
HEADERS_BLOCK = b"\x88\x0f\x10\x10application/grpc"
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


def literal(name, value):
    """A literal field without indexing, new name, no Huffman (short strings)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def trailers(status, message=b""):
    block = literal(b"grpc-status", status)
    if message:
        block += literal(b"grpc-message", message)
    return frame(1, 5, 1, block)


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
    if mode not in H2_MODES:  # those read the client's bytes themselves
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
        elif mode == "unavailable":
            c.sendall(SETTINGS + RESP_HEADERS + frame(0, 0, 1, message(1)) +
                      trailers(b"14", b"backend%0Adown %C3%BC\x01"))
        elif mode == "trailersonly":
            c.sendall(SETTINGS + frame(1, 5, 1, HEADERS_BLOCK + literal(b"grpc-status", b"5") +
                                       literal(b"grpc-message", b"unknown service")))
        elif mode == "notrailers":
            c.sendall(SETTINGS + RESP_HEADERS + frame(0, 1, 1, message(1)))
        elif mode == "http1":
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        elif mode == "http502":
            c.sendall(SETTINGS + frame(1, 4, 1, b"\x08\x03502\x0f\x10\x09text/html") +
                      frame(0, 1, 1, b"<html>502 Bad Gateway</html>"))
        elif mode == "goawayzero":
            c.sendall(SETTINGS + frame(7, 0, 0, struct.pack(">II", 0, 0)))
        elif mode == "tablegrow":
            c.sendall(SETTINGS + frame(1, 4, 1, b"\x3f\xe1\x3f" + HEADERS_BLOCK))
        elif mode == "manyentries":
            # 120 entries "etag: " (static name 34) of 36 bytes each: the
            # table keeps 113 of them, and the trailers name the oldest
            # (index 61 + 120), which it has evicted.
            c.sendall(SETTINGS + frame(1, 4, 1, HEADERS_BLOCK + b"\x62\x00" * 120) +
                      frame(0, 0, 1, message(1)) + frame(1, 5, 1, b"\xff\x36"))
        elif mode == "hufpad":
            c.sendall(SETTINGS + RESP_HEADERS + frame(0, 0, 1, message(1)) +
                      frame(1, 5, 1, b"\x00\x81\x18\x00"))
        elif mode == "intoverflow":
            c.sendall(SETTINGS + RESP_HEADERS + frame(0, 0, 1, message(1)) +
                      frame(1, 5, 1, b"\xff\xff\xff\xff\x0f"))
        elif mode in H2_MODES:
            h2_serve(c, mode)
        # Held open: the client decides, or its timeout does.
        time.sleep(30)
    except OSError:
        pass
    finally:
        c.close()


H2_MODES = ("pingfirst", "goawayfirst", "goawayafter")
PING_DATA = b"probe?ok"


def h2_serve(c, mode):
    """A gRPC answer written by python3-h2, as mode says."""
    import h2.config
    import h2.connection
    import h2.events
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    if mode == "pingfirst":
        conn.ping(PING_DATA)
    c.sendall(conn.data_to_send())
    asked = answered = False
    acked = mode != "pingfirst"
    while not answered:
        data = c.recv(65536)
        if not data:
            return
        for e in conn.receive_data(data):
            if isinstance(e, h2.events.PingAckReceived) and e.ping_data == PING_DATA:
                acked = True
            if isinstance(e, h2.events.RequestReceived) and e.stream_id == 1:
                asked = True
                if mode == "goawayfirst":
                    c.sendall(conn.data_to_send() + frame(7, 0, 0, struct.pack(">II", 1, 0)))
        if asked and acked:
            conn.send_headers(1, [(":status", "200"), ("content-type", "application/grpc")])
            conn.send_data(1, message(1))
            conn.send_headers(1, [("grpc-status", "0"), ("grpc-message", "")], end_stream=True)
            if mode == "goawayafter":
                conn.close_connection(error_code=0, last_stream_id=1)
            answered = True
        c.sendall(conn.data_to_send())
    if mode == "goawayafter":
        c.shutdown(socket.SHUT_WR)


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
