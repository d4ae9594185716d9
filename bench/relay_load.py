#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The log streams of bench/run.sh's relay section (bench/README.md, 7).

  relay_load.py serve PORT
      a stand-in for the guest agent's /logs/<name>?follow=...: every
      request is answered with a chunked stream, one line every 100 ms,
      until the client goes; bench/run.sh's upstream nginx passes /logs/
      on to it.
  relay_load.py streams HOST:PORT N SECONDS
      opens N such streams (GET /logs/bench?follow=true, one connection
      each), reads them for SECONDS and prints one line:
        streams=N opened=N open_at_end=N bytes=N
      a stream that ends early or never answers is not open at the end.
"""
import asyncio
import sys

LINE_GAP = 0.1


async def serve_one(reader, writer):
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        n = 0
        while True:
            line = b"log line %d\n" % n
            writer.write(b"%x\r\n%s\r\n" % (len(line), line))
            await writer.drain()
            n += 1
            await asyncio.sleep(LINE_GAP)
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


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        asyncio.run(serve(int(sys.argv[2])))
    elif len(sys.argv) == 5 and sys.argv[1] == "streams":
        asyncio.run(streams(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
