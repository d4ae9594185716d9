# SPDX-License-Identifier: Apache-2.0
# Flips one container's healthcheck N times (docker exec touch/rm /ok) and
# prints, per transition, the ms from Docker's health_status event (its
# timeNano, from our own subscription to /events) to the first moment the
# agent shows the new verdict: a Health answer on its socket (--agent SOCK),
# or the verdict file's first line (--file PATH), polled every INTERVAL ms.
# Given both, each is polled by its own thread and each line has two
# figures, the answer's then the file's. Both clocks are CLOCK_REALTIME on
# this machine.
#   flip_latency.py DOCKER_SOCK CONTAINER N [--agent SOCK] [--file PATH] [--every MS]
import json, socket, subprocess, sys, threading, time

docker_sock, container, n = sys.argv[1:4]
n = int(n)
opts = dict(zip(sys.argv[4::2], sys.argv[5::2]))
interval = float(opts.get("--every", "5")) / 1000
events = []  # (timeNano, healthy)
cond = threading.Condition()


def follow_events():
    s = socket.socket(socket.AF_UNIX)
    s.connect(docker_sock)
    f = json.dumps({"type": ["container"], "container": [container], "event": ["health_status"]})
    q = "".join(c if c.isalnum() else "%%%02X" % ord(c) for c in f)
    s.sendall(("GET /events?filters=%s HTTP/1.0\r\nHost: d\r\n\r\n" % q).encode())
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            return
        buf += d
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.startswith(b"{"):
                continue
            ev = json.loads(line)
            if ev.get("Action", "").startswith("health_status: "):
                with cond:
                    events.append((ev["timeNano"], ev["Action"].endswith(": healthy")))
                    cond.notify_all()


def ask_agent(target):
    s = socket.socket(socket.AF_UNIX)
    s.connect(target)
    s.sendall(b"POST /prpc/v1/Health?json HTTP/1.0\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    r = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        r += d
    s.close()
    return json.loads(r.split(b"\r\n\r\n", 1)[1])["healthy"]


def read_file(target):
    try:
        with open(target, "rb") as f:
            return f.readline() == b"healthy\n"
    except OSError:
        return None


def poll(ask, target, seen):
    """seen: (time_ns, healthy) at each change of what the agent shows."""
    last = None
    while True:
        h = ask(target)
        t = time.time_ns()
        if h != last:
            with cond:
                seen.append((t, h))
                cond.notify_all()
            last = h
        time.sleep(interval)


watched = []  # the seen lists, in the order of the figures
for flag, ask in (("--agent", ask_agent), ("--file", read_file)):
    if flag in opts:
        watched.append([])
        threading.Thread(target=poll, args=(ask, opts[flag], watched[-1]), daemon=True).start()
threading.Thread(target=follow_events, daemon=True).start()
time.sleep(0.5)
want = True
for i in range(n):
    want = not want
    ne, ns = len(events), [len(w) for w in watched]

    def done():
        return len(events) > ne and events[-1][1] == want and all(
            len(w) > k and w[-1][1] == want for w, k in zip(watched, ns))

    subprocess.run(["/usr/bin/docker", "exec", container, "touch" if want else "rm", "/ok"],
                   check=True)
    with cond:
        if not cond.wait_for(done, timeout=30):
            print("error: transition %d not seen within 30 s" % i, file=sys.stderr)
            sys.exit(1)
        ev_t = [e for e in events[ne:] if e[1] == want][0][0]
        print(" ".join("%.3f" % (([x for x in w[k:] if x[1] == want][0][0] - ev_t) / 1e6)
                       for w, k in zip(watched, ns)), flush=True)
