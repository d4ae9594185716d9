#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Header blocks made by encoders nobody here wrote (Debian's python3-hpack
and python3-h2), with the header lists they encode, for
tests/unit/test_hpack.c (issue 42). Run at test time; the same output on
every run (the random cases have a fixed seed).

  hpack_vectors.py

Prints, one item a line:
  seq NAME              a new decoder: the blocks after it share one table
  block HEX             a header block ("-": empty)
  field NAMEHEX VALUEHEX   the fields it decodes to, in order ("-": empty)
  refuse                the block must be refused (a bound of the agent's)
"""
import random
import sys

import h2.config
import h2.connection
from hpack import Encoder, NeverIndexedHeaderTuple


def hexs(b):
    return b.hex() if b else "-"


def as_bytes(s):
    return s if isinstance(s, bytes) else s.encode()


class Out:
    def __init__(self):
        self.lines = []

    def seq(self, name):
        self.lines.append("seq " + name)

    def block(self, data, fields, refuse=False):
        self.lines.append("block " + hexs(data))
        if refuse:
            self.lines.append("refuse")
            return
        for f in fields:
            self.lines.append("field %s %s" % (hexs(as_bytes(f[0])), hexs(as_bytes(f[1]))))


GRPC_HEADERS = [(":status", "200"), ("content-type", "application/grpc"),
                ("grpc-accept-encoding", "identity,deflate,gzip"),
                ("grpc-encoding", "identity")]
GRPC_TRAILERS = [("grpc-status", "0"), ("grpc-message", "")]
GRPC_ERROR = [("grpc-status", "14"), ("grpc-message", "upstream%20connect%20error")]


def encoded(out, enc, fields, huffman):
    out.block(enc.encode(fields, huffman=huffman), fields)


def fixed(out):
    for huffman in (False, True):
        out.seq("gRPC answers, %s Huffman" % ("with" if huffman else "without"))
        enc = Encoder()
        for _ in range(3):
            for fields in (GRPC_HEADERS, GRPC_TRAILERS, GRPC_HEADERS, GRPC_ERROR):
                encoded(out, enc, fields, huffman)
    out.seq("never indexed")
    enc = Encoder()
    fields = [NeverIndexedHeaderTuple("authorization", "secret"),
              NeverIndexedHeaderTuple("grpc-status", "0"), ("grpc-status", "0")]
    for huffman in (False, True, False):
        encoded(out, enc, fields, huffman)
    out.seq("every byte in a value, and in a name")
    enc = Encoder()
    every = bytes(range(256))
    name = bytes(range(0x21, 0x7f)).lower()
    for huffman in (False, True):
        encoded(out, enc, [("x-bytes", every), (name, "v"), (name, every[:200])], huffman)
        encoded(out, enc, [(name, every[:200])], huffman)


def evictions(out):
    out.seq("a small table: evictions")
    enc = Encoder()
    enc.header_table_size = 256
    rnd = random.Random(7)
    for i in range(40):
        fields = [("x-key-%d" % rnd.randrange(12), "v" * rnd.randrange(0, 90)),
                  ("grpc-status", str(rnd.randrange(17)))]
        encoded(out, enc, fields, i % 2 == 1)
    enc.header_table_size = 4096
    for i in range(10):
        encoded(out, enc, [("x-key-%d" % i, "w" * 300)], True)
    out.seq("table size updates between blocks")
    enc = Encoder()
    for i, size in enumerate((4096, 0, 64, 4096, 1000, 100, 4096, 0, 4096)):
        enc.header_table_size = size
        encoded(out, enc, [("x-a", "a" * 40), ("x-b", "b" * 10), ("x-a", "a" * 40)], i % 2 == 0)


def randomized(out):
    rnd = random.Random(42)
    names = ["grpc-status", "grpc-message", "content-type", ":status", "x-trace", "date",
             "server", "grpc-status-details-bin"]
    out.seq("random lists, one table")
    enc = Encoder()
    for i in range(300):
        if rnd.random() < 0.05:
            enc.header_table_size = rnd.choice((0, 32, 100, 512, 1024, 4096))
        fields = []
        for _ in range(rnd.randrange(0, 8)):
            if rnd.random() < 0.3:
                name = "x-" + "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz-0123456789")
                                      for _ in range(rnd.randrange(1, 60)))
            else:
                name = rnd.choice(names)
            if rnd.random() < 0.2:
                value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
            else:
                value = "".join(chr(rnd.randrange(0x20, 0x7f)) for _ in range(rnd.randrange(0, 120)))
            f = (name, value)
            if rnd.random() < 0.1:
                f = NeverIndexedHeaderTuple(name, value)
            fields.append(f)
        encoded(out, enc, fields, rnd.random() < 0.6)


def bounds(out):
    out.seq("a value of 1024 bytes, then one over")
    enc = Encoder()
    encoded(out, enc, [("x-v", "v" * 1024)], False)
    out.block(enc.encode([("x-v", "v" * 1025)], huffman=False), None, refuse=True)
    out.seq("a name of 256 bytes, then one over (Huffman)")
    enc = Encoder()
    encoded(out, enc, [("n" * 256, "v")], True)
    out.block(enc.encode([("n" * 257, "v")], huffman=True), None, refuse=True)


def h2_blocks(frames):
    """The header blocks of HEADERS and CONTINUATION frames, joined."""
    blocks, i, cur = [], 0, None
    while i + 9 <= len(frames):
        n = int.from_bytes(frames[i:i + 3], "big")
        ftype, flags = frames[i + 3], frames[i + 4]
        payload = frames[i + 9:i + 9 + n]
        i += 9 + n
        if ftype == 1:
            pad = 0
            if flags & 0x8:
                pad, payload = payload[0], payload[1:]
            if flags & 0x20:
                payload = payload[5:]
            cur = payload[:len(payload) - pad]
        elif ftype == 9:
            cur += payload
        else:
            continue
        if flags & 0x4:
            blocks.append(cur)
    return blocks


def h2_answers(out):
    """A gRPC server's answers as h2 writes them, on one connection."""
    out.seq("python3-h2: answers and trailers of five calls on one connection")
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    client.initiate_connection()
    server.initiate_connection()
    server.data_to_send()
    lists, frames = [], b""
    for k in range(5):
        stream = 1 + 2 * k
        client.send_headers(stream, [(":method", "POST"), (":scheme", "http"),
                                     (":path", "/grpc.health.v1.Health/Check"),
                                     (":authority", "127.0.0.1"),
                                     ("content-type", "application/grpc"), ("te", "trailers")],
                            end_stream=True)
        server.receive_data(client.data_to_send())
        headers = [(":status", "200"), ("content-type", "application/grpc")]
        trailers = [("grpc-status", str(k * 3)), ("grpc-message", "call %d" % k)]
        server.send_headers(stream, headers)
        server.send_data(stream, b"\0\0\0\0\2\x08\x01")
        server.send_headers(stream, trailers, end_stream=True)
        lists += [headers, trailers]
        frames += server.data_to_send()
    blocks = h2_blocks(frames)
    if len(blocks) != len(lists):
        sys.exit("hpack_vectors.py: h2 wrote %d header blocks, not %d" % (len(blocks), len(lists)))
    for b, fields in zip(blocks, lists):
        out.block(b, fields)


def main():
    out = Out()
    fixed(out)
    evictions(out)
    randomized(out)
    bounds(out)
    h2_answers(out)
    print("\n".join(out.lines))


if __name__ == "__main__":
    main()
