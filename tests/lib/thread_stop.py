#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Stops one thread of a process, that thread alone, for as long as a test needs.

  thread_stop.py PID NAME

Finds the thread of PID whose name (/proc/PID/task/*/comm) is NAME, stops it
with ptrace (PTRACE_SEIZE, then PTRACE_INTERRUPT: no signal, so the process's
other threads run on, as SIGSTOP would not let them), prints "stopped", and
lets it go on (PTRACE_DETACH) when its standard input ends. If this process
dies first, the kernel lets the thread go on by itself. Needs the right to
trace PID (root). Exit status 2 when the thread cannot be found or stopped.
"""
import ctypes
import os
import sys

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000  # __WALL: wait for a thread that is not a child


def main():
    pid, name = int(sys.argv[1]), sys.argv[2]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long

    def ptrace(req, tid):
        if libc.ptrace(req, tid, None, None) != 0:
            e = ctypes.get_errno()
            sys.exit("thread_stop: ptrace %#x on %d: %s" % (req, tid, os.strerror(e)))

    tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)
            if open("/proc/%d/task/%s/comm" % (pid, t)).read().strip() == name]
    if len(tids) != 1:
        print("thread_stop: %d threads of %d named %s" % (len(tids), pid, name), file=sys.stderr)
        return 2
    ptrace(PTRACE_SEIZE, tids[0])
    ptrace(PTRACE_INTERRUPT, tids[0])
    os.waitpid(tids[0], WALL)
    print("stopped", flush=True)
    sys.stdin.read()
    ptrace(PTRACE_DETACH, tids[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
