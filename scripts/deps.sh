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
	command -v /usr/lib/go-1.19/bin/go >/dev/null || { apt-get update -qq; apt-get install -y -qq golang-go ca-certificates >/dev/null; }
	boot=$(command -v /usr/lib/go-1.19/bin/go || command -v go)
	tmp=$(mktemp -d)
	dir=$(cd "$tmp" && GOMODCACHE=$tmp/mod GOPATH=$tmp/gopath GOFLAGS=-modcacherw "$boot" mod download -json \
		"golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$(dpkg --print-architecture)" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] && [ -d "$dir/bin" ] || { echo "deps: could not fetch the Go $GO_VERSION toolchain" >&2; exit 1; }
	rm -rf "$GOROOT_DEST"
	cp -r "$dir" "$GOROOT_DEST"
	chmod -R u+w "$GOROOT_DEST"
	find "$GOROOT_DEST/bin" "$GOROOT_DEST/pkg/tool" -type f -exec chmod +x {} +
	rm -rf "$tmp"
	go version
fi

export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
cd "$(dirname "$0")/.."
go mod download
