#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A client that starts its connection with a PROXY header it writes itself
(HAProxy's doc/proxy-protocol.txt), for tests/e2e/relay_proxy.sh.

  proxy_client.py PORT [--host H] [--from ADDR] [--header KIND] [--client ADDR]
                  [--cut] [--end] [--path P] [--post BODY] [--json]

Connects to H:PORT (127.0.0.1 by default; ::1 for IPv6) from ADDR, sends the
header KIND, then a request (GET P, or POST P with BODY; Connection: close,
Host: x) and reads to the end. KIND:
  none       no header
  v1, v2     the client ADDR (default: this socket's own address and port)
  v2tlv      v2 with TLVs after the addresses (authority, a NOOP, a unique id)
  v2local    v2 LOCAL, no address
  v2unspec   v2 PROXY, family UNSPEC
  v1unknown  "PROXY UNKNOWN"
  hex:HEX    those bytes; text:TEXT those (\\r \\n escapes allowed)
--cut sends the header a byte at a time, 10 ms apart, then the request;
--end shuts the sending side after the header and sends no request;
--repeat N makes N such connections, one after the other.
Prints "local=ADDR:PORT", then the answer's status line and "server=NAME
body=LEN" with the body's first 120 bytes (repr), or "closed" (no answer)
or "reset".
"""
import argparse
import socket
import struct
import sys
import time

SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def header(kind, src, sport, dst, dport):
    fam = socket.AF_INET6 if ":" in src else socket.AF_INET
    if fam == socket.AF_INET6 and ":" not in dst:
        dst = "::1"  # an IPv6 client's header names an IPv6 destination
    if kind == "none":
        return b""
    if kind == "v1":
        return b"PROXY %s %s %s %d %d\r\n" % (b"TCP6" if fam == socket.AF_INET6 else b"TCP4",
                                              src.encode(), dst.encode(), sport, dport)
    if kind == "v1unknown":
        return b"PROXY UNKNOWN\r\n"
    if kind in ("v2", "v2tlv"):
        addrs = socket.inet_pton(fam, src) + socket.inet_pton(fam, dst) + struct.pack("!HH", sport, dport)
        tlvs = b""
        if kind == "v2tlv":
            tlvs = (b"\x02" + struct.pack("!H", 11) + b"example.com" + b"\x04\x00\x00" +
                    b"\x05" + struct.pack("!H", 4) + b"id42")
        famb = 0x21 if fam == socket.AF_INET6 else 0x11
        return SIG + bytes([0x21, famb]) + struct.pack("!H", len(addrs) + len(tlvs)) + addrs + tlvs
    if kind == "v2local":
        return SIG + bytes([0x20, 0x00, 0x00, 0x00])
    if kind == "v2unspec":
        return SIG + bytes([0x21, 0x00, 0x00, 0x00])
    if kind.startswith("hex:"):
        return bytes.fromhex(kind[4:])
    if kind.startswith("text:"):
        return kind[5:].encode().decode("unicode_escape").encode("latin-1")
    raise SystemExit("unknown header kind " + kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--from", dest="src", default=None)
    ap.add_argument("--header", default="none")
    ap.add_argument("--client", default=None)
    ap.add_argument("--cut", action="store_true")
    ap.add_argument("--end", action="store_true")
    ap.add_argument("--path", default="/small")
    ap.add_argument("--post", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    for _ in range(a.repeat):
        one(a)


def one(a):
    fam = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    s = socket.socket(fam)
    s.settimeout(30)
    if a.src:
        s.bind((a.src, 0))
    s.connect((a.host, a.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    me = s.getsockname()
    print("local=%s:%d" % (me[0], me[1]), flush=True)
    client = a.client or me[0]
    hdr = header(a.header, client, me[1], a.host, a.port)
    if a.post is not None:
        body = a.post.encode()
        req = (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
               % (a.path.encode(), len(body), body))
    else:
        req = b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % a.path.encode()
    try:
        if a.cut:
            for i in range(len(hdr)):
                s.send(hdr[i:i + 1])
                time.sleep(0.01)
        else:
            s.sendall(hdr)
        if not a.end:
            s.sendall(req)
    except OSError as e:
        print("send failed: %s" % e.strerror)
        return
    if a.end:
        s.shutdown(socket.SHUT_WR)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except ConnectionResetError:
        print("reset" if not got else "reset after %d bytes" % len(got))
        return
    except socket.timeout:
        print("timeout after %d bytes" % len(got))
        return
    if not got:
        print("closed")
        return
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    server = b"-"
    for line in lines[1:]:
        if line.lower().startswith(b"server:"):
            server = line.split(b":", 1)[1].strip()
    print(lines[0].decode("latin-1"))
    print("server=%s body=%d %r" % (server.decode("latin-1"), len(body), body[:120]))


if __name__ == "__main__":
    sys.exit(main())
