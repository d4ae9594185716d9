#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The log streams of bench/run.sh's relay section (bench/README.md, 7).

  relay_load.py serve PORT
      a stand-in for the guest agent's /logs/<name>?follow=...: every
      request is answered with a chunked stream, one line every 100 ms
      (every S seconds with every=S in the query), until the client goes; bench/run.sh's upstream nginx passes /logs/
      on to it. /slow/<name>?s=S is answered "slow" after S seconds (a
      request the guest agent takes its time over), then closed.
  relay_load.py streams HOST:PORT N SECONDS
      opens N such streams (GET /logs/bench?follow=true, one connection
      each), reads them for SECONDS and prints one line:
        streams=N opened=N open_at_end=N bytes=N
      a stream that ends early or never answers is not open at the end.
  relay_load.py poll HOST:PORT PATH SECONDS GAP_MS [ADDR]
      GET PATH on a fresh connection (Connection: close) every GAP_MS for
      SECONDS, each read to its end within 2 s, as a user loads the
      dashboard; with ADDR, each connection is made from ADDR and starts
      with a PROXY header (version 2, as the dstack gateway writes it)
      naming ADDR and its own port; prints one line:
        polls=N ok=N p50=MS p99=MS max=MS
      a poll is ok when it got a 200 and its whole body (Content-Length).
"""
import asyncio
import sys
import time

LINE_GAP = 0.1


async def serve_one(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0]
        if b" /slow/" in line:
            wait = float(line.split(b"s=")[1].split(b" ")[0]) if b"s=" in line else 30
            await asyncio.sleep(wait)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nslow\n")
            await writer.drain()
            return
        gap = LINE_GAP
        if b"every=" in line:
            gap = float(line.split(b"every=")[1].split(b" ")[0].split(b"&")[0])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        n = 0
        while True:
            line = b"log line %d\n" % n
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            await writer.drain()
            n += 1
            await asyncio.sleep(gap)
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def serve(port):
    srv = await asyncio.start_server(serve_one, "127.0.0.1", port, backlog=1024)
    async with srv:
        await srv.serve_forever()


async def one_stream(host, port, seconds, stats):
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return
    writer.write(b"GET /logs/bench?follow=true HTTP/1.1\r\nHost: bench\r\n\r\n")
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    got = 0
    try:
        while loop.time() < end:
            try:
                data = await asyncio.wait_for(reader.read(65536), end - loop.time())
            except asyncio.TimeoutError:
                break
            if not data:
                stats["bytes"] += got
                writer.close()
                return
            if got == 0 and data.startswith(b"HTTP/1.1 200"):
                stats["opened"] += 1
            got += len(data)
    except ConnectionError:
        stats["bytes"] += got
        return
    stats["bytes"] += got
    if got:
        stats["open_at_end"] += 1
    writer.close()


async def streams(target, n, seconds):
    host, port = target.rsplit(":", 1)
    stats = {"opened": 0, "open_at_end": 0, "bytes": 0}
    await asyncio.gather(*(one_stream(host, int(port), seconds, stats) for _ in range(n)))
    print("streams=%d opened=%d open_at_end=%d bytes=%d" % (
        n, stats["opened"], stats["open_at_end"], stats["bytes"]))


def proxy_v2(client, sport, dport):
    """The PROXY header the dstack gateway writes: version 2, TCP over IPv4."""
    import socket
    import struct
    return (b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c" + socket.inet_aton(client) +
            socket.inet_aton("127.0.0.1") + struct.pack("!HH", sport, dport))


def poll_once(host, port, path, timeout, client=None):
    import socket
    t0 = time.monotonic()
    s = socket.socket()
    s.settimeout(timeout)
    data = b""
    try:
        if client:
            s.bind((client, 0))
        s.connect((host, port))
        hdr = proxy_v2(client, s.getsockname()[1], port) if client else b""
        s.sendall(hdr + b"GET %s HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n" % path.encode())
        while time.monotonic() - t0 < timeout:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except OSError:
        return False, time.monotonic() - t0
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    ok = head.startswith(b"HTTP/1.1 200")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            ok = ok and len(body) == int(line.split(b":")[1])
    return ok, time.monotonic() - t0


def poll(target, path, seconds, gap_ms, client=None):
    host, port = target.rsplit(":", 1)
    lat, ok = [], 0
    end = time.monotonic() + seconds
    due = time.monotonic()
    # Polls that failed slowly (2 s each) do not run past the window.
    while due < end and time.monotonic() < end:
        good, took = poll_once(host, int(port), path, 2.0, client)
        ok += good
        lat.append(took * 1000)
        due += gap_ms / 1000
        left = due - time.monotonic()
        if left > 0:
            time.sleep(left)
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else 0
    print("polls=%d ok=%d p50=%.1f p99=%.1f max=%.1f" % (len(lat), ok, pick(0.5), pick(0.99),
                                                        lat[-1] if lat else 0))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        asyncio.run(serve(int(sys.argv[2])))
    elif len(sys.argv) == 5 and sys.argv[1] == "streams":
        asyncio.run(streams(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
    elif len(sys.argv) in (6, 7) and sys.argv[1] == "poll":
        poll(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]),
             sys.argv[6] if len(sys.argv) == 7 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
