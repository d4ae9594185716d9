#!/bin/bash
# dstack-healthd(8), --help and README.md's config table name the same
# options, and the page formats without warnings.
# tests/run: once
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh

BIN=$PWD/${HEALTHD_BUILD:-build}/dstack-healthd
[ -x "$BIN" ] || skip_all "$BIN is not built"
PAGE=docs/dstack-healthd.8

help_flags=$("$BIN" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u)
# In roff a dash is written \-.
page_flags=$(sed 's/\\-/-/g' "$PAGE" | grep -oE -- '--[a-z][a-z-]+' | sort -u)
# The flag column of the table.
readme_flags=$(grep -E '^\| `[a-z_]+` \| `--' README.md | awk -F'|' '{ print $3 }' |
	grep -oE -- '--[a-z][a-z-]+' | sort -u)

missing=$(comm -23 <(echo "$help_flags") <(echo "$page_flags") | tr '\n' ' ')
is "$missing" "" "every flag of --help is in the man page"
# The options proper (FLAG=ARG): --help also lists -c/--config and actions.
table=$("$BIN" --help | grep -oE -- '^  --[a-z][a-z-]+=' | tr -d ' =' | sort -u)
missing=$(comm -23 <(echo "$table") <(echo "$readme_flags") | tr '\n' ' ')
is "$missing" "" "every option of --help is in README.md's table"
extra=$(comm -13 <(echo "$table") <(echo "$readme_flags") | tr '\n' ' ')
is "$extra" "" "README.md's table names no option --help does not"

if command -v man >/dev/null 2>&1; then
	warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$PAGE" 2>&1 >/dev/null)
	is "$warn" "" "the man page formats without warnings"
else
	diag "man is not installed: formatting not checked"
fi

done_testing
