#!/usr/bin/env bash
# deps.sh: install what building and testing pureverbs needs on a Debian
# machine, when it is missing. Run as root for apt-get; otherwise it says
# what to install. The VM runner installs QEMU and the kernel packages
# itself (internal/testkit/cmd/rxevm).
set -euo pipefail
GOROOT_DEST=${PUREVERBS_GOROOT:-/usr/local/go}
export PATH=$GOROOT_DEST/bin:$PATH

need=()
command -v gcc >/dev/null || need+=(gcc libc6-dev)
[ -f /usr/include/rdma/ib_user_verbs.h ] || need+=(linux-libc-dev)
command -v file >/dev/null || need+=(file)
command -v git >/dev/null || need+=(git)

# An install interrupted between its two renames (below) left the old
# tree beside $GOROOT_DEST and none in its place: put it back.
if [ ! -e "$GOROOT_DEST" ]; then
	for old in "$GOROOT_DEST".old.*; do
		if [ -d "$old" ]; then
			mv "$old" "$GOROOT_DEST"
			break
		fi
	done
fi

# The Go toolchain: go.mod asks for Go 1.26.
GO_VERSION=${PUREVERBS_GO_VERSION:-1.26.8}
go_ok() {
	local v
	v=$(go env GOVERSION 2>/dev/null) || return 1
	v=${v#go}
	[ "${v%%.*}" -gt 1 ] || { v=${v#1.}; [ "${v%%.*}" -ge 21 ]; }
}

if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "deps: installing ${need[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq "${need[@]}" >/dev/null
	else
		echo "deps: missing packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
		exit 1
	fi
fi

# No Go >= 1.21 (which can switch toolchains itself): bootstrap with
# Debian's golang-go (1.19), use it to fetch the official toolchain module
# golang.org/toolchain through the Go module proxy, and install that tree
# as /usr/local/go (the place the Makefile puts first in PATH).
if ! go_ok; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: Go >= 1.21 is needed (go.mod asks for $GO_VERSION); install it or run as root" >&2
		exit 1
	fi
	echo "deps: installing Go $GO_VERSION into $GOROOT_DEST"
	export DEBIAN_FRONTEND=noninteractive
	# PUREVERBS_BOOTSTRAP_GO: the bootstrap go (scripts/check-deps.sh).
	boot=${PUREVERBS_BOOTSTRAP_GO:-/usr/lib/go-1.19/bin/go}
	command -v "$boot" >/dev/null || { apt-get update -qq; apt-get install -y -qq golang-go ca-certificates >/dev/null; }
	boot=$(command -v "$boot" || command -v go)
	tmp=$(mktemp -d)
	new=
	trap 'rm -rf "$tmp" ${new:+"$new"}' EXIT
	mod="golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$(dpkg --print-architecture)"
	# go mod download -json reports a failure inside the JSON (its Error
	# field), on stdout, and exits 1.
	if ! json=$(cd "$tmp" && GOMODCACHE=$tmp/mod GOPATH=$tmp/gopath GOFLAGS=-modcacherw "$boot" mod download -json "$mod" 2>&1); then
		err=$(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
		echo "deps: could not fetch the Go $GO_VERSION toolchain ($mod) through the Go module proxy:" >&2
		echo "${err:-$json}" | sed 's/^/deps:   /' >&2
		echo "deps: check the network and the proxy settings (GOPROXY=$("$boot" env GOPROXY 2>/dev/null), https_proxy=${https_proxy:-})" >&2
		exit 1
	fi
	dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
	[ -n "$dir" ] && [ -d "$dir/bin" ] || { echo "deps: could not fetch the Go $GO_VERSION toolchain: no Dir with bin/ in go mod download's output:" >&2; echo "$json" >&2; exit 1; }
	# Install beside $GOROOT_DEST and rename into place: an interrupted
	# copy leaves the Go there was (or none), never a partial tree (an
	# interruption between the renames is undone by the next run, above).
	mkdir -p "$(dirname "$GOROOT_DEST")"
	rm -rf "$GOROOT_DEST".new.* "$GOROOT_DEST".old.*
	new=$(mktemp -d "$GOROOT_DEST.new.XXXXXX")
	cp -r "$dir/." "$new"
	chmod -R u+w,go+rX "$new"
	find "$new/bin" "$new/pkg/tool" -type f -exec chmod +x {} +
	if [ -e "$GOROOT_DEST" ]; then
		mv "$GOROOT_DEST" "$GOROOT_DEST.old.$$"
	fi
	mv "$new" "$GOROOT_DEST"
	rm -rf "$GOROOT_DEST.old.$$" "$tmp"
	trap - EXIT
	go version
fi

export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
cd "$(dirname "$0")/.."
go mod download
