#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# dstack-healthd(8) names every flag of --help, and is the one list of the
# options: no Markdown document copies it into a table (the guides link to
# the page); the operator's guide and the page say the same of error, the
# exit statuses and the special entries; the page lists every message under
# its priority; --help fits 80 columns; and the page formats without
# warnings.
# tests/run: once
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

BIN=$PWD/${HEALTHD_BUILD:-build}/dstack-healthd
[ -x "$BIN" ] || skip_all "$BIN is not built"
PAGE=docs/dstack-healthd.8
GUIDE=docs/operator.md

help_flags=$("$BIN" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u)
# In roff a dash is written \-.
page_flags=$(sed 's/\\-/-/g' "$PAGE" | grep -oE -- '--[a-z][a-z-]+' | sort -u)

missing=$(comm -23 <(echo "$help_flags") <(echo "$page_flags") | tr '\n' ' ')
is "$missing" "" "every flag of --help is in the man page"
# The options proper (FLAG=ARG): --help also lists -c/--config and actions.
table=$("$BIN" --help | grep -oE -- '^  --[a-z][a-z-]+=' | tr -d ' =' | sort -u)
ok $([ "$(echo "$table" | wc -l)" -ge 20 ]; echo $?) "--help lists the options ($(echo "$table" | wc -l))"
# A copy of the options in a document: a table row of a file key and a flag.
copies=$(git ls-files -c -o --exclude-standard '*.md' 2>/dev/null |
	xargs -r grep -lE '^\| `[a-z_]+` \| `--[a-z]' | tr '\n' ' ')
is "$copies" "" "no Markdown document copies the options into a table: the man page is their one list"

# roff to plain text, enough for comparing sentences: dashes, quotes, fonts.
plain() { sed -e 's/\\-/-/g' -e 's/\\(aq/\x27/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g'; }
# Whitespace and markdown backticks folded, for comparing a paragraph.
fold() { tr '\n' ' ' | tr -d '`' | tr -s ' ' | sed 's/^ //; s/ $//'; }
# between FILE FROM TO: the lines after the one starting FROM, up to the next
# starting TO (fixed strings).
between() {
	A=$2 B=$3 awk 'on && index($0, ENVIRON["B"]) == 1 { exit }
		on { print }
		index($0, ENVIRON["A"]) == 1 { on = 1 }' "$1"
}

# error: the guide and the man page say it in the same words.
readme_err=$(between "$GUIDE" '<!-- error-text' '<!-- end error-text' | fold)
page_err=$(between "$PAGE" '.\" error-text' '.\" end error-text' | grep -v '^\.' | plain | fold)
ok $([ -n "$page_err" ]; echo $?) "the man page has its error text"
is "$readme_err" "$page_err" "$GUIDE and the man page say the same of error"

# --once's exit statuses: the guide, man page and --help name the same ones.
help=$("$BIN" --help)
help_exit=$(printf '%s\n' "$help" | sed -n '/^Exit status:/,/^$/p' | grep -oE '^  [0-9]' | tr -d ' ' | sort -u | tr '\n' ' ')
page_exit=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$PAGE" | grep -A1 '^\.TP' | grep -oE '^\.B [0-9]+$' | awk '{ print $2 }' | sort -u | tr '\n' ' ')
is "$help_exit" "$page_exit" "--help and the man page list the same exit statuses"
readme_once=$(grep -A4 '^`dstack-healthd --once` runs' "$GUIDE" | fold)
for n in $page_exit; do
	like "$readme_once" "(exits|,| or) $n (if|on)" "$GUIDE's --once names exit status $n"
done
like "$help" 'SIGHUP' "--help lists SIGHUP"
like "$help" 'SIGTERM' "--help lists SIGTERM"
wide=$(printf '%s\n' "$help" | awk 'length($0) > 79' | head -n1)
is "$wide" "" "--help fits 80 columns"

# Special entry names: each in the guide and the man page.
for e in '<health>' '<compose>' '<health_file>' '<drain>'; do
	ok $(grep -qF "| \`$e\` |" "$GUIDE"; echo $?) "$GUIDE's entry table has $e"
	ok $(grep -qxF ".B $e" "$PAGE"; echo $?) "the man page's Entry names has $e"
done

# Every message the agent logs with a literal start is listed under its
# priority in the man page (dashes, quotes and fonts aside).
msgs=$(cat agent/*.c probe/*.c runtime/*.c rpc/*.c statusfile/*.c base/*.c | tr '\n\t' '  ' |
	grep -oE 'log_(msg|fields)\(LOG_[A-Z]+,( fields,)? *"[^"%]*' |
	sed -E 's/log_(msg|fields)\(LOG_([A-Z]+),( fields,)? *"/\2|/')
unlisted=
while IFS='|' read -r prio text; do
	text=${text%: }
	text=${text%"${text##*[! ]}"}
	[ ${#text} -ge 6 ] || continue
	prio=$(echo "$prio" | tr 'A-Z' 'a-z')
	section=$(between "$PAGE" ".\\\" prio $prio" '.\" ' | plain | tr '\n' ' ' |
		sed 's/" "//g; s/"//g' | tr -s ' ')
	case "$section" in
	*"$text"*) ;;
	*) unlisted="$unlisted [$prio] $text;" ;;
	esac
done <<<"$msgs"
ok $([ "$(echo "$msgs" | wc -l)" -gt 30 ]; echo $?) "found the agent's messages ($(echo "$msgs" | wc -l))"
is "$unlisted" "" "every message is in the man page under its priority"

if command -v man >/dev/null 2>&1; then
	warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$PAGE" 2>&1 >/dev/null)
	is "$warn" "" "the man page formats without warnings"
else
	diag "man is not installed: formatting not checked"
fi

done_testing
