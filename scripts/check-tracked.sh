#!/usr/bin/env bash
# check-tracked.sh: no build output or other binary goes into the tree.
#
# A `go build ./cmd/x` at the top of the tree leaves an executable there,
# and `git add -A` picks it up (ac6412b committed a 5.5 MB rxevm that way).
# The tree holds only text: sources, docs and generated Go. This check
# looks at every file git tracks or would add (tracked, staged, and
# untracked but not ignored) and fails on one that is an ELF file, holds a
# NUL byte, or is larger than MAXKB KiB (default 512; the largest text
# file, abi/zlayout_test.go, is under 200 KiB).
set -euo pipefail

cd "$(dirname "$0")/.."
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "check-tracked: not a git work tree; skipped" >&2
	exit 0
fi
max=$(( ${MAXKB:-512} * 1024 ))
bad=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] && [ ! -L "$f" ] || continue
	size=$(stat -c %s -- "$f")
	why=
	if [ "$size" -gt "$max" ]; then
		why="$size bytes (over $(( max / 1024 )) KiB)"
	elif [ "$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
		why="an ELF binary"
	elif [ "$(head -c 65536 -- "$f" | tr -d -c '\000' | wc -c)" -gt 0 ]; then
		why="binary (holds a NUL byte)"
	fi
	if [ -n "$why" ]; then
		echo "check-tracked: $f: $why; delete it or add it to .gitignore" >&2
		bad=1
	fi
done < <(git ls-files -z --cached --others --exclude-standard)
exit $bad
