#!/usr/bin/env bash
# check-generate.sh: check the committed package abi against the installed
# kernel uapi headers (Debian linux-libc-dev).
#
# abi/ names the linux-libc-dev version it was generated from in its
# "// Source:" line (the pinned version). The headers only grow, so:
#
#   - where the pinned version is installed, abi/ is regenerated into a
#     temporary directory and must equal the committed abi/z*.go byte for
#     byte (the check for whoever changes cmd/abigen or abi/);
#   - anywhere else (a newer linux-libc-dev), a byte-exact regeneration is
#     not possible, and the script says so; it checks compatibility instead
#     (go run ./cmd/abigen -check abi): every constant, type and method of
#     abi/ must still be generated identically from the installed headers.
#     Additions in the headers are listed, not failures. Enum sentinels
#     such as RDMA_NLDEV_ATTR_MAX, which grow with every addition, are not
#     generated at all (see cmd/abigen/allowlist.txt).
#
# Options:
#   --exact   fail unless the byte-exact check can run (for CI, which
#             installs the pinned version)
# Environment: GO (the go command, default: go), ABIGEN_INCLUDE and
# ABIGEN_VERSION (check headers unpacked elsewhere, e.g. with
# dpkg-deb -x linux-libc-dev_*.deb DIR: ABIGEN_INCLUDE=DIR/usr/include,
# ABIGEN_VERSION=the package version).
#
# Exit status: 0 ok, 1 out of date or incompatible, 2 abigen failed or
# --exact could not be honoured.
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}

exact=0
for a in "$@"; do
	case $a in
	--exact) exact=1 ;;
	*) echo "usage: $0 [--exact]" >&2; exit 2 ;;
	esac
done

include=${ABIGEN_INCLUDE:-/usr/include}
if [ -n "${ABIGEN_INCLUDE:-}" ]; then
	installed=${ABIGEN_VERSION:?ABIGEN_VERSION must name the linux-libc-dev version of ABIGEN_INCLUDE}
else
	installed=$(dpkg-query -W -f='${Version}' linux-libc-dev 2>/dev/null || true)
	installed=${installed:-unknown}
fi
pinned=$(sed -n 's/^\/\/ Source: .* (linux-libc-dev \(.*\))$/\1/p' abi/zconst.go | head -1)
[ -n "$pinned" ] || { echo "check-generate: abi/zconst.go has no '// Source: ... (linux-libc-dev VERSION)' line" >&2; exit 2; }

if [ "$installed" != "$pinned" ] || [ "$include" != /usr/include ]; then
	why="abi/ was generated from linux-libc-dev $pinned; the headers here are linux-libc-dev $installed"
	[ "$include" = /usr/include ] || why="$why in $include (the Source line names /usr/include)"
	if [ "$exact" = 1 ]; then
		echo "check-generate: --exact: byte-exact regeneration is not possible: $why" >&2
		exit 2
	fi
	echo "check-generate: byte-exact regeneration is not possible here: $why."
	echo "check-generate: it runs where linux-libc-dev $pinned is installed; checking compatibility instead."
	rc=0
	"$GO" run ./cmd/abigen -include "$include" -version "$installed" -check abi || rc=$?
	if [ "$rc" = 0 ]; then
		echo "check-generate: ok (compatible; NOT compared byte for byte)"
		exit 0
	fi
	[ "$rc" = 1 ] || { echo "check-generate: cmd/abigen -check failed (exit $rc)" >&2; exit 2; }
	echo "check-generate: abi/ does not match the installed headers: something it was generated from changed (above)" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! "$GO" run ./cmd/abigen -out "$tmp" 2>"$tmp/abigen.log"; then
	cat "$tmp/abigen.log" >&2
	echo "check-generate: cmd/abigen failed (see above)" >&2
	exit 2
fi

status=0
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
	if ! diff -u --label "$old" --label "regenerated/$name" "$old" "$new"; then
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
	echo "check-generate: abi/ is out of date with cmd/abigen and the installed headers (linux-libc-dev $installed); run 'make generate' (go run ./cmd/abigen -out abi) and commit the result" >&2
	exit 1
fi
echo "check-generate: abi/ is byte-for-byte what cmd/abigen generates from linux-libc-dev $installed"
