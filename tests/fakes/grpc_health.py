#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A real gRPC server (Debian's python3-grpcio) with gRPC's standard health
service, whose status a test flips per service, for the agent's gRPC probes
(issue 34).

  grpc_health.py DIR PORT [PORT...] [--tls CERT KEY] [--ready FILE]

grpc.health.v1.Health/Check for service S answers the status written in
DIR/S (DIR/_ for the empty name, the server as a whole): SERVING,
NOT_SERVING, UNKNOWN or SERVICE_UNKNOWN, read afresh at every call. No file
is the real health servicer's answer for a service it does not know: the
gRPC status NOT_FOUND, with no message. STATUS/CODE[/DETAILS] answers
STATUS and then ends the call with the gRPC status CODE (UNAVAILABLE, ...)
and its details: grpcio sends the message and then that status in the
trailers (issue 42: a probe must not pass on the message alone).
ECHO_DEADLINE answers SERVING and writes the seconds left of the call's
deadline (the client's grpc-timeout) to DIR/_deadline. The messages are encoded by hand
(one enum field), so no generated code is needed. --ready FILE is written
once every port listens.
"""
import argparse
import os
import signal
import sys
import threading
from concurrent import futures

import grpc

STATUS = {"UNKNOWN": 0, "SERVING": 1, "NOT_SERVING": 2, "SERVICE_UNKNOWN": 3}


def read_service(data):
    """HealthCheckRequest: field 1, a string; anything else skipped."""
    i, name = 0, b""
    while i < len(data):
        key = data[i]
        i += 1
        if key & 7 == 2:
            n, shift = 0, 0
            while True:
                b = data[i]
                i += 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            if key >> 3 == 1:
                name = data[i:i + n]
            i += n
        elif key & 7 == 0:
            while data[i] & 0x80:
                i += 1
            i += 1
        else:
            raise ValueError("unexpected wire type")
    return name.decode()


def write_status(status):
    """HealthCheckResponse: field 1, an enum (omitted when 0, as proto3 does)."""
    return b"" if status == 0 else bytes([0x08, status])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("ports", type=int, nargs="+")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--ready")
    a = ap.parse_args()

    def check(service, context):
        path = os.path.join(a.dir, service or "_")
        try:
            with open(path) as f:
                word = f.read().strip()
        except FileNotFoundError:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        if word == "ECHO_DEADLINE":
            left = context.time_remaining()
            with open(os.path.join(a.dir, "_deadline.tmp"), "w") as f:
                f.write("%.3f\n" % (left if left is not None else -1))
            os.rename(os.path.join(a.dir, "_deadline.tmp"), os.path.join(a.dir, "_deadline"))
            word = "SERVING"
        word, _, rest = word.partition("/")
        if rest:
            code, _, details = rest.partition("/")
            context.set_code(getattr(grpc.StatusCode, code))
            if details:
                context.set_details(details)
        return STATUS[word]

    handler = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(
            check, request_deserializer=read_service, response_serializer=write_status),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handler,))
    for port in a.ports:
        addr = "127.0.0.1:%d" % port
        if a.tls:
            with open(a.tls[0], "rb") as f:
                cert = f.read()
            with open(a.tls[1], "rb") as f:
                key = f.read()
            server.add_secure_port(addr, grpc.ssl_server_credentials([(key, cert)]))
        else:
            server.add_insecure_port(addr)
    server.start()
    if a.ready:
        with open(a.ready, "w") as f:
            f.write("ready\n")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop(0)
    sys.exit(0)


if __name__ == "__main__":
    main()
