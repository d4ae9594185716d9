#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Every relative link of the Markdown documents resolves as GitHub resolves
# it: the file or folder exists, and an #anchor is a heading of that file
# by GitHub's rule (tests/lib/doclinks.py, whose slug rule is checked
# against its own table of headings first). And the front page stays a
# front page: at most 200 lines, a path to each guide, each guide naming
# its reader first.
# tests/run: once
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "$PY is not installed"

out=$("$PY" tests/lib/doclinks.py --slugs 2>&1)
ok $? "GitHub's anchor rule, case by case: $out"
docs=$(git ls-files -c -o --exclude-standard '*.md' 2>/dev/null)
[ -n "$docs" ] || docs=$(find . -name '*.md' -not -path './build*' | sed 's|^\./||')
ok $([ "$(echo "$docs" | wc -l)" -ge 5 ]; echo $?) "found the documents ($(echo $docs | wc -w))"
for d in $docs; do
	out=$("$PY" tests/lib/doclinks.py "$d" 2>&1)
	rc=$?
	is "$out" "" "$d: every relative link resolves, anchors included"
	[ $rc -eq 0 ] || [ -n "$out" ] || ok 1 "$d: the checker failed without saying why"
done
# Each guide names its reader in its first line (issue 45), and the front
# page ends each of its three paths in one of them.
for g in docs/app-developer.md docs/image-builder.md docs/operator.md; do
	like "$(head -n 1 "$g")" '^# dstack-healthd for (the|an?) [a-z]' "$g names its reader in its first line"
	grep -qF "]($g)" README.md
	ok $? "README.md ends a path in $g"
done
ok $([ "$(wc -l <README.md)" -le 200 ]; echo $?) "README.md is at most 200 lines ($(wc -l <README.md))"
done_testing
