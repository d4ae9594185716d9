#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Mutants of the pure rule units (issue 44 §4): `tests/mutate.sh [FILE.mut...]`
# (or `make mutate`) applies each mutant listed in tests/mutants/*.mut, one
# at a time, to a scratch copy of the tree (the worktree itself is never
# written), rebuilds only the unit tests it names, runs them, and reports
# each mutant killed (with the test points that failed) or survived. A
# mutant that survives is a rule no test states. Exits 1 when one survives
# or one is malformed.
#
# The format, one file per unit; blocks separated by blank lines, `#` lines
# are comments:
#
#     name: grpc: padding as long as the frame is accepted
#     file: probe/grpc.c
#     find: if (a->pad >= a->len)
#     replace: if (a->pad > a->len)
#     tests: test_grpc
#
# `find` is exact text (not a regex) that must occur exactly once in `file`;
# `replace` is what it becomes (it may be empty: a dropped clause); `tests`
# names the unit test binaries (tests/unit/NAME.c, space separated) expected
# to kill it. A value is what follows "key: " on its line; a `find` or
# `replace` of several lines goes on in lines that start with "|", each
# adding a newline and what follows the "|" (tabs and all):
#
#     find: if (c->oneoff)
#     |			continue;
#
# A test named NAME.sh is the end-to-end script tests/e2e/NAME.sh, run
# against the scratch copy's build (for a rule that only the wiring of the
# agent states, such as which flag reaches which call): the agent is rebuilt
# for it too.
#
# MUTATE_ONLY=ERE runs only the mutants whose name matches; MUTATE_KEEP=1
# keeps the scratch copy and says where. Each listed test must pass on the
# tree as it is, or nothing is run.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
[ $# -gt 0 ] || set -- tests/mutants/*.mut
TEST_LIMIT=${MUTATE_TEST_LIMIT:-120}
# Debian's interpreter, not a version manager's shim (seconds a start on a
# loaded machine).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# --- reading the mutant files --------------------------------------------------
# Each mutant is kept in parallel arrays; a malformed one is reported with
# its file and line and counted, and none is run.
NAMES=() FILES=() FINDS=() REPLACES=() TESTS=() WHERE=()
malformed=0
bad() { echo "malformed: $1: $2"; malformed=$((malformed + 1)); }

# slurp FILE: the file's bytes in SLURPED, trailing newlines and all (the
# x keeps them from the command substitution).
slurp() {
	SLURPED=$(cat "$1" && printf x)
	SLURPED=${SLURPED%x}
}

# check_block WHERE: the block just read (b_* variables) is whole and
# applies to the tree; appended to the arrays when it does.
check_block() {
	local where=$1 t n count
	[ -n "$b_name$b_file$b_find$b_tests$b_has_replace" ] || return 0
	[ -n "$b_name" ] || { bad "$where" "no name"; return; }
	[ -n "$b_file" ] || { bad "$where" "$b_name: no file"; return; }
	[ -n "$b_find" ] || { bad "$where" "$b_name: no find"; return; }
	[ -n "$b_has_replace" ] || { bad "$where" "$b_name: no replace (an empty one is \"replace:\")"; return; }
	[ -n "$b_tests" ] || { bad "$where" "$b_name: no tests"; return; }
	[ "$b_find" != "$b_replace" ] || { bad "$where" "$b_name: replace is find: not a mutant"; return; }
	[ -f "$b_file" ] || { bad "$where" "$b_name: $b_file does not exist"; return; }
	for n in "${NAMES[@]}"; do
		[ "$n" != "$b_name" ] || { bad "$where" "$b_name: a second mutant of that name"; return; }
	done
	for t in $b_tests; do
		case $t in
		*.sh) [ -x "tests/e2e/$t" ] || { bad "$where" "$b_name: no end-to-end script tests/e2e/$t"; return; } ;;
		*) [ -f "tests/unit/$t.c" ] || { bad "$where" "$b_name: no unit test $t (tests/unit/$t.c)"; return; } ;;
		esac
	done
	NAMES+=("$b_name") FILES+=("$b_file") FINDS+=("$b_find") REPLACES+=("$b_replace")
	TESTS+=("$b_tests") WHERE+=("$where")
}

read_file() {
	local f=$1 line key= value lineno=0 start=1
	b_name= b_file= b_find= b_replace= b_tests= b_has_replace=
	while IFS= read -r line || [ -n "$line" ]; do
		lineno=$((lineno + 1))
		case $line in '#'*) continue ;; esac
		if [ -z "${line//[ $'\t']/}" ]; then
			check_block "$f:$start"
			b_name= b_file= b_find= b_replace= b_tests= b_has_replace=
			start=$((lineno + 1))
			continue
		fi
		[ -n "$b_name$b_file$b_find$b_tests$b_has_replace" ] || start=$lineno
		if [ "${line:0:1}" = "|" ]; then
			case $key in
			find) b_find+=$'\n'${line:1} ;;
			replace) b_replace+=$'\n'${line:1} ;;
			*) bad "$f:$lineno" "a \"|\" line goes on a find or a replace only" ;;
			esac
			continue
		fi
		case $line in
		*:*) key=${line%%:*} value=${line#*:} value=${value# } ;;
		*) bad "$f:$lineno" "not \"key: value\": $line"; continue ;;
		esac
		case $key in
		name) b_name=$value ;;
		file) b_file=$value ;;
		find) b_find=$value ;;
		replace) b_replace=$value b_has_replace=1 ;;
		tests) b_tests=$value ;;
		*) bad "$f:$lineno" "unknown key \"$key\"" ;;
		esac
	done <"$f"
	check_block "$f:$start"
}

for f in "$@"; do
	[ -f "$f" ] || { bad "$f" "no such file"; continue; }
	read_file "$f"
done
# Each find occurs exactly once in its file: counted in one process for
# all (bash's own substitution is slow on a file of 50 KB).
counts=$(for i in "${!NAMES[@]}"; do printf '%s\0%s\0' "${FILES[$i]}" "${FINDS[$i]}"; done |
	"$PY" -c 'import sys
f = sys.stdin.buffer.read().split(b"\0")[:-1]
for path, find in zip(f[0::2], f[1::2]):
    print(open(path, "rb").read().count(find))') || { echo "cannot count the finds"; exit 1; }
i=0
while read -r count; do
	[ "$count" = 1 ] ||
		bad "${WHERE[$i]}" "${NAMES[$i]}: find occurs $count times in ${FILES[$i]}, not once: ${FINDS[$i]}"
	i=$((i + 1))
done <<<"$counts"
selected=()
for i in "${!NAMES[@]}"; do
	[ -z "${MUTATE_ONLY:-}" ] || printf '%s\n' "${NAMES[$i]}" | grep -Eq -- "$MUTATE_ONLY" || continue
	selected+=("$i")
done
echo "# ${#NAMES[@]} mutants read from $# file(s), $malformed malformed; ${#selected[@]} to run"
[ "$malformed" -eq 0 ] || { echo "not run: fix the malformed mutants first"; exit 1; }
[ "${#selected[@]}" -gt 0 ] || { echo "no mutant to run"; exit 1; }

# --- the scratch copy ------------------------------------------------------------
# The tracked and new files of the tree, as `make deb` copies them: what is
# being written is tested too. Built once with the project's flags but -O1
# (the rebuilds are the time; _FORTIFY_SOURCE needs some optimisation), each
# mutant then rebuilds its file's object and the tests it names.
S=$(mktemp -d "${TMPDIR:-/tmp}/healthd-mutate.XXXXXX")
cleanup() {
	if [ "${MUTATE_KEEP:-0}" = 1 ]; then echo "# the scratch copy is kept in $S"; else rm -rf "$S"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
git ls-files -z -c -o --exclude-standard | xargs -0 cp --parents -t "$S" ||
	{ echo "cannot copy the tree to $S"; exit 1; }
B=build-mutate
# Warnings are not errors here: a mutant that drops a call leaves a
# function unused, and is still a mutant.
MK=(make -C "$S" --no-print-directory -j"${MUTATE_JOBS:-2}" BUILD=$B WERROR=0 CFLAGS="-O1")
all_tests=$(for i in "${selected[@]}"; do printf '%s\n' ${TESTS[$i]}; done | sort -u)
# targets TESTS...: what make must build for them: a unit test alone, or
# everything (the agent, its helpers) for an end-to-end script.
targets() {
	local t
	for t in "$@"; do
		case $t in *.sh) echo all ;; *) echo "$B/tests/$t" ;; esac
	done | sort -u | tr '\n' ' '
}
bins=$(targets $all_tests)
t0=$SECONDS
echo "# building the copy ($S)"
"${MK[@]}" $bins >"$S/build.log" 2>&1 || { tail -n 30 "$S/build.log"; echo "the copy does not build"; exit 1; }

# run_tests TESTS...: runs each, prints the failed points (or how it ended)
# a line each, "TEST: not ok N - ..."; returns 1 when any failed.
run_tests() {
	local t out rc failed=0
	for t in "$@"; do
		case $t in
		*.sh) out=$(cd "$S" && HEALTHD_BUILD=$B timeout -k 5 600 "tests/e2e/$t" 2>&1) ;;
		*) out=$(cd "$S" && timeout -k 5 "$TEST_LIMIT" "$B/tests/$t" 2>&1) ;;
		esac
		rc=$?
		if [ "$rc" -ne 0 ]; then
			failed=1
			if printf '%s\n' "$out" | grep -q '^not ok '; then
				printf '%s\n' "$out" | grep '^not ok ' | sed "s/^/$t: /"
			elif [ "$rc" -eq 124 ]; then
				echo "$t: timed out after $TEST_LIMIT s"
			else
				echo "$t: exited with status $rc$([ "$rc" -gt 128 ] && echo " (signal $((rc - 128)))")"
			fi
		fi
	done
	return $failed
}
if ! out=$(run_tests $all_tests); then
	printf '%s\n' "$out"
	echo "the tests fail on the tree as it is: a mutant they kill proves nothing"
	exit 1
fi
echo "# built and passed as it is in $((SECONDS - t0)) s"

# --- the mutants -------------------------------------------------------------------
killed=0 survived=0 broken=0 survivors=()
for i in "${selected[@]}"; do
	m0=$SECONDS
	f=$S/${FILES[$i]}
	cp -p "$f" "$S/orig"
	slurp "$f"
	printf '%s' "${SLURPED/"${FINDS[$i]}"/"${REPLACES[$i]}"}" >"$f"
	bins=$(targets ${TESTS[$i]})
	if ! "${MK[@]}" $bins >"$S/mutant.log" 2>&1; then
		echo "not ok - ${NAMES[$i]}: the mutant does not build (${WHERE[$i]}):"
		grep -m3 -E 'error:|Error ' "$S/mutant.log" | sed 's/^/#   /'
		broken=$((broken + 1))
	elif out=$(run_tests ${TESTS[$i]}); then
		echo "not ok - SURVIVED: ${NAMES[$i]} (${WHERE[$i]}; ${TESTS[$i]} pass) $((SECONDS - m0)) s"
		survived=$((survived + 1))
		survivors+=("${NAMES[$i]}")
	else
		echo "ok - killed: ${NAMES[$i]} ($((SECONDS - m0)) s)"
		printf '%s\n' "$out" | head -n 5 | sed 's/^/#   by /'
		killed=$((killed + 1))
	fi
	# Back as it was; a new mtime, so that the next build compiles it again.
	cat "$S/orig" >"$f"
	touch "$f"
done
# The tree as it was rebuilds and passes again: no mutant was left behind.
bins=$(targets $all_tests)
"${MK[@]}" $bins >"$S/build.log" 2>&1 && run_tests $all_tests >/dev/null ||
	{ echo "the copy fails after the mutants were undone"; exit 1; }
echo "# mutants: ${#selected[@]} run, $killed killed, $survived survived, $broken did not build ($((SECONDS - t0)) s)"
[ "$survived" -eq 0 ] || printf '# survivor: %s\n' "${survivors[@]}"
[ "$survived" -eq 0 ] && [ "$broken" -eq 0 ]
