#!/usr/bin/env bash
# check-generate.sh: regenerate package abi into a temporary directory and
# compare it with the committed abi/z*.go files. Exits non-zero when they
# differ. If the installed linux-libc-dev version differs from the one named
# in the committed "// Source:" line, that line is ignored in the comparison
# and a warning is printed.
set -euo pipefail

cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! go run ./cmd/abigen -out "$tmp" 2>"$tmp/abigen.log"; then
	cat "$tmp/abigen.log" >&2
	echo "check-generate: cmd/abigen failed (see above)" >&2
	exit 2
fi

status=0
warned=0
shopt -s nullglob
declare -A seen=()
for new in "$tmp"/z*.go; do
	name=$(basename "$new")
	seen[$name]=1
	old="abi/$name"
	if [ ! -f "$old" ]; then
		echo "check-generate: $old is missing" >&2
		status=1
		continue
	fi
	src_old=$(grep -m1 '^// Source:' "$old" || true)
	src_new=$(grep -m1 '^// Source:' "$new" || true)
	if [ "$src_old" != "$src_new" ]; then
		if [ "$warned" = 0 ]; then
			echo "check-generate: WARNING: header source differs; comparing without the Source line" >&2
			echo "  committed: ${src_old#// Source: }" >&2
			echo "  installed: ${src_new#// Source: }" >&2
			warned=1
		fi
		if ! diff -u --label "$old" --label "regenerated/$name" \
			<(grep -v '^// Source:' "$old") <(grep -v '^// Source:' "$new"); then
			status=1
		fi
	elif ! diff -u --label "$old" --label "regenerated/$name" "$old" "$new"; then
		status=1
	fi
done
for old in abi/z*.go; do
	name=$(basename "$old")
	if [ -z "${seen[$name]:-}" ]; then
		echo "check-generate: $old is not produced by cmd/abigen any more (stale file)" >&2
		status=1
	fi
done

if [ "$status" != 0 ]; then
	echo "check-generate: abi/ is out of date with cmd/abigen and the installed headers; run 'make generate' (go run ./cmd/abigen -out abi) and commit the result" >&2
	exit 1
fi
echo "check-generate: abi/ is up to date"
