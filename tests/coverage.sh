#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `make coverage` (issue 44 §2), once the Makefile has built BUILD with
# --coverage: runs the unit tests and every end-to-end script that runs this
# build's agent (tests/run BUILD: its round of kind "coverage"), then reads
# the counts with lcov's geninfo and prints, per source file of the agent
# and in all, the lines and functions run, with an HTML report in
# BUILD/coverage/html. Targets: at least 90 % of the lines in all, and no
# file under 75 %, unless tests/coverage-reasons.txt says why ("FILE: the
# sentence"), printed beside its figures: no file is left out silently.
#
# Counts from several processes at once are safe: each process adds its
# counts to the .gcda files beside the objects when it exits, under a lock
# libgcov takes on each file (20 processes exiting together lost no count
# in a check), and the build's counters are atomic (-fprofile-update=atomic)
# so that threads lose none. An agent killed by SIGKILL writes nothing: the
# tests stop agents with SIGTERM (tests/lib/tap.sh, agent_stop).
#
# COVERAGE_TESTS=0 reads the counts already there without running anything.
set -u
cd "$(dirname "$0")/.."
B=${1:-build-cov}
OUT=$B/coverage
LINES_MIN=90
FILE_MIN=75
REASONS=tests/coverage-reasons.txt
[ -e "$B/sanitizer" ] && [ "$(cat "$B/sanitizer")" = coverage ] ||
	{ echo "coverage.sh: $B is not a coverage build (make coverage makes one)" >&2; exit 2; }
for c in lcov geninfo genhtml; do
	command -v "$c" >/dev/null || { echo "coverage.sh: $c is missing (build-aux/deps.sh coverage)" >&2; exit 2; }
done

rc=0
t0=$SECONDS
if [ "${COVERAGE_TESTS:-1}" != 0 ]; then
	# Counts of an earlier run or of another build of a file would be
	# merged into these, or refused with a warning on an agent's stderr.
	find "$B" -name '*.gcda' -delete
	tests/run "$B" | tee "$B/coverage-tests.log"
	rc=${PIPESTATUS[0]}
	echo "== the coverage round: $((SECONDS - t0)) s, tests/run exit $rc"
fi

rm -rf "$OUT"
mkdir -p "$OUT"
# Branch counts are left out: with threads, Debian 12's tools read some of
# them as negative.
# A zero baseline of every object first (--initial), so that a file no test
# ran shows as 0 %, not as missing.
lcov --quiet --capture --initial --directory "$B/obj" --base-directory "$PWD" \
	--rc lcov_branch_coverage=0 --output-file "$OUT/base.info" 2>"$OUT/lcov.err" &&
	lcov --quiet --capture --directory "$B/obj" --base-directory "$PWD" \
		--rc lcov_branch_coverage=0 --output-file "$OUT/run.info" 2>>"$OUT/lcov.err" &&
	lcov --quiet --rc lcov_branch_coverage=0 --add-tracefile "$OUT/base.info" \
		--add-tracefile "$OUT/run.info" --output-file "$OUT/all.info" 2>>"$OUT/lcov.err" ||
	{ cat "$OUT/lcov.err" >&2; exit 2; }
# The agent's sources: not the tests, the generated protobuf code or the
# system's headers (jsmn.h is compiled into base/jsmn.c).
lcov --quiet --rc lcov_branch_coverage=0 --extract "$OUT/all.info" \
	"$PWD/agent/*" "$PWD/base/*" "$PWD/probe/*" "$PWD/rpc/*" "$PWD/runtime/*" \
	"$PWD/statusfile/*" --output-file "$OUT/agent.info" 2>>"$OUT/lcov.err" ||
	{ cat "$OUT/lcov.err" >&2; exit 2; }
genhtml --quiet --rc lcov_branch_coverage=0 --title "dstack-healthd" --prefix "$PWD" \
	--output-directory "$OUT/html" "$OUT/agent.info" 2>>"$OUT/lcov.err" ||
	echo "coverage.sh: genhtml failed (see $OUT/lcov.err)" >&2

# Every source file of the agent: one missing from the counts (not built
# into this build) shows as such.
ls agent/*.c base/*.c probe/*.c rpc/*.c runtime/*.c statusfile/*.c >"$OUT/sources"
/usr/bin/python3 - "$OUT/agent.info" "$OUT/sources" "$REASONS" "$LINES_MIN" "$FILE_MIN" "$PWD/" \
	<<'PY' | tee "$OUT/summary.txt"
import sys
info, sources, reasons_file, lines_min, file_min, root = sys.argv[1:]
lines_min, file_min = float(lines_min), float(file_min)
files = {}
cur = None
for line in open(info):
    line = line.strip()
    if line.startswith("SF:"):
        cur = line[3:].replace(root, "", 1)
        files[cur] = {"LF": 0, "LH": 0, "FNF": 0, "FNH": 0}
    elif cur and ":" in line and line.split(":")[0] in ("LF", "LH", "FNF", "FNH"):
        k, v = line.split(":", 1)
        files[cur][k] = int(v)
for s in open(sources).read().split():
    files.setdefault(s, {"LF": 0, "LH": 0, "FNF": 0, "FNH": 0, "unrun": True})
reasons = {}
try:
    for line in open(reasons_file):
        if line.strip() and not line.startswith("#") and ": " in line:
            f, why = line.rstrip("\n").split(": ", 1)
            reasons[f] = why
except FileNotFoundError:
    pass
pct = lambda h, n: 100.0 * h / n if n else 100.0
tot = {"LF": 0, "LH": 0, "FNF": 0, "FNH": 0}
print("%-26s %17s %17s" % ("file", "lines", "functions"))
missed = []
for f in sorted(files):
    d = files[f]
    for k in tot:
        tot[k] += d[k]
    lp, fp = pct(d["LH"], d["LF"]), pct(d["FNH"], d["FNF"])
    mark = ""
    if d.get("unrun"):
        mark = "  (no lines of its own)" if f == "base/jsmn.c" else "  (not in the build's counts)"
    if lp < file_min:
        if f in reasons:
            mark += "  under %d %%: %s" % (file_min, reasons[f])
        else:
            mark += "  UNDER %d %%" % file_min
            missed.append(f)
    print("%-26s %5.1f %% %4d/%-5d %5.1f %% %3d/%-4d%s" % (f, lp, d["LH"], d["LF"], fp, d["FNH"],
                                                        d["FNF"], mark))
lp, fp = pct(tot["LH"], tot["LF"]), pct(tot["FNH"], tot["FNF"])
print("%-26s %5.1f %% %5d/%-5d %5.1f %% %4d/%-4d" % ("all", lp, tot["LH"], tot["LF"], fp, tot["FNH"],
                                                   tot["FNF"]))
for f in sorted(reasons):
    if f not in files:
        print("# %s has a reason in %s but is no source of the agent" % (f, reasons_file))
ok = lp >= lines_min and not missed
print("coverage: %.1f %% of lines in all (target %d %%), %.1f %% of functions; %s" % (
    lp, lines_min, fp,
    "every file at %d %% or more, or its reason stated" % file_min if not missed else
    "under %d %% with no reason stated: %s" % (file_min, " ".join(missed))))
sys.exit(0 if ok else 1)
PY
cov=${PIPESTATUS[0]}
echo "coverage.sh: the HTML report is $OUT/html/index.html"
[ "$rc" -eq 0 ] || echo "coverage.sh: the tests themselves failed (tests/run exit $rc): see $B/coverage-tests.log"
[ "$cov" -eq 0 ] && [ "$rc" -eq 0 ]
