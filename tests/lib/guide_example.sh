# SPDX-License-Identifier: Apache-2.0
# The files the app developer's guide shows (sourced): its fenced blocks
# that follow a line "<!-- example: NAME ... -->" (docs/app-developer.md),
# so that a test runs the very file a reader copies, and there is one copy.
#
# guide_example NAME OUT: the block after the marker for NAME written to OUT,
# without its fences. Non-zero, with the reason on stderr, when the marker
# or its block is missing.
GUIDE=${GUIDE:-docs/app-developer.md}
guide_example() {
	NAME=$1 awk '
		index($0, "<!-- example: " ENVIRON["NAME"] " ") == 1 { mark = 1; next }
		mark == 1 && /^```/ { mark = 2; next }
		mark == 1 { exit 1 }
		mark == 2 && /^```$/ { done = 1; exit }
		mark == 2 { print }
		END { exit !done }' "$GUIDE" >"$2" && [ -s "$2" ] || {
		echo "guide_example: no block for $1 in $GUIDE" >&2
		return 1
	}
}
