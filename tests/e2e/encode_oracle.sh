#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Health answer read back by decoders nobody here wrote (issue 44 §5):
# a table of verdicts (no entry, many, an error, quotes and control
# characters, every plane of UTF-8, bytes that are not UTF-8, long and empty
# strings) through the agent's own encoders (tests/helpers/encode_verdict),
# the protobuf decoded by protoc --decode with rpc/health.proto, the JSON
# by Python's json. Both must say the same verdict, and that verdict must be
# the one put in, strings repaired where they were not UTF-8: each bad byte
# becomes U+FFFD (compared with Python's own repair where the two rules
# agree: a lone bad byte, a character cut after its first; Python replaces a
# maximal subpart of a broken sequence with one U+FFFD, the agent each of
# its bytes, so those rows compare the two encoders only). protoc must
# print no warning: proto3 decoders refuse a string that is not UTF-8.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
B=${HEALTHD_BUILD:-build}
ENC=$B/tests/helpers/encode_verdict
[ -x "$ENC" ] || { echo "not ok 1 - $ENC is not built"; echo "1..1"; exit 1; }
command -v protoc >/dev/null || skip_all "protoc is not installed (protobuf-compiler)"
command -v python3 >/dev/null || skip_all "python3 is not installed"
. tests/lib/scratch.sh

# compare WHAT SAME_REPAIR HEALTHY ERROR [NAME STATUS]...: one row.
compare() {
	local what=$1 same=$2
	shift 2
	"$ENC" pb "$@" >"$T/pb" && "$ENC" json "$@" >"$T/json" ||
		{ ok 1 "$what: encoded"; return; }
	protoc --decode=dstack.guest.v1.HealthResponse -I rpc rpc/health.proto <"$T/pb" \
		>"$T/text" 2>"$T/protoc.err"
	local rc=$?
	ok $([ "$rc" -eq 0 ] && [ ! -s "$T/protoc.err" ]; echo $?) \
		"$what: protoc decodes the protobuf, with no warning$( [ -s "$T/protoc.err" ] && echo ": $(head -c 200 "$T/protoc.err")")"
	local out
	out=$(python3 - "$T/text" "$T/json" "$same" "$@" <<'PY'
import ast, json, os, re, sys

def unescape(s):
    # protoc's text format: C escapes, octal for bytes (UTF-8 as bytes)
    out = bytearray(); i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode(); i += 1; continue
        n = s[i + 1]
        if n in "01234567":
            j = i + 1
            while j < len(s) and j < i + 4 and s[j] in "01234567":
                j += 1
            out.append(int(s[i + 1:j], 8)); i = j
        elif n == "x":
            j = i + 2
            while j < len(s) and s[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(s[i + 2:j], 16)); i = j
        else:
            out += {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", "'": b"'",
                    '"': b'"', "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v"}[n]
            i += 2
    return bytes(out)

def from_text(path):
    healthy, entries, error, cur = False, [], "", None
    for line in open(path, encoding="utf-8", errors="strict"):
        line = line.strip()
        if line == "healthy: true":
            healthy = True
        elif line == "unhealthy {":
            cur = {"name": "", "status": ""}
        elif line == "}":
            entries.append((cur["name"], cur["status"])); cur = None
        else:
            m = re.match(r'^(name|status|error): "(.*)"$', line)
            if not m:
                raise SystemExit("unexpected line: %r" % line)
            v = unescape(m.group(2)).decode("utf-8")
            if cur is not None:
                cur[m.group(1)] = v
            else:
                error = v
    return healthy, entries, error

def from_json(path):
    d = json.load(open(path, "rb"))
    return d["healthy"], [(e["name"], e["status"]) for e in d["unhealthy"]], d["error"]

def repaired(b):
    # Python's own repair of what is not UTF-8
    return b.decode("utf-8", errors="replace")

text, js = from_text(sys.argv[1]), from_json(sys.argv[2])
same, args = sys.argv[3] == "1", [os.fsencode(a) for a in sys.argv[4:]]
want = (args[0] == b"true",
        sorted([(repaired(args[i]), repaired(args[i + 1])) for i in range(2, len(args), 2)]),
        repaired(args[1]))
print("pb=json" if text == js else "pb!=json: %r / %r" % (text, js))
if same:
    got = (text[0], sorted(text[1]), text[2])
    print("want" if got == want else "not as put in: %r, want %r" % (got, want))
else:
    print("want")
PY
)
	is "$(printf '%s\n' "$out" | head -n1)" "pb=json" "$what: protoc's reading and Python's json agree"
	is "$(printf '%s\n' "$out" | sed -n 2p)" "want" "$what: the verdict put in$([ "$same" = 1 ] || echo ' (the encoders compared only)')"
}

compare "healthy, no entry" 1 true ""
compare "healthy:false with an error and no entry" 1 false "cannot reach the container runtime"
compare "three entries" 1 false "" web unhealthy db "starting (no health check has run yet)" \
	"<compose>" "no container has been created yet"
compare "quotes, backslashes, control characters" 1 false "" 'we"b\' $'a\tb\nc\rd\x01\x1f' \
	'<service:x>' $'\x7f end'
compare "two- to four-byte characters" 1 false "é ü € 😀" "日本語" "ñ ß Ж" "𝄞" "✓"
compare "a lone bad byte, an overlong, a surrogate" 1 false $'err \xff' $'n\xffame' $'over\xc0\xaflong' \
	$'sur\xed\xa0\x80rogate' ok
compare "a character cut after its first byte, at the end" 1 false "" $'cut\xc3' $'end\xf0'
compare "sequences broken after two bytes or more (repairs differ by rule)" 0 false "" \
	$'br\xe2\x82oken' $'\xf0\x9f\x98x' $'st\xe2\x82' ok
compare "empty strings" 1 false "" "" ""
long=$(head -c 3000 /dev/zero | tr '\0' 'x')
compare "a long name and status" 1 false "$long" "$long" "$long"
done_testing
