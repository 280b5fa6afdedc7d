#!/usr/bin/env bash
# deps.sh: install what building and testing pureverbs needs on a Debian
# machine, when it is missing. Run as root for apt-get; otherwise it says
# what to install. The VM runner installs QEMU and the kernel packages
# itself (internal/testkit/cmd/rxevm).
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH

need=()
command -v gcc >/dev/null || need+=(gcc libc6-dev)
[ -f /usr/include/rdma/ib_user_verbs.h ] || need+=(linux-libc-dev)
command -v file >/dev/null || need+=(file)
command -v git >/dev/null || need+=(git)
if ! command -v go >/dev/null; then need+=(golang-go ca-certificates); fi

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

# go.mod asks for Go 1.26; an older go (Debian's golang-go) fetches that
# toolchain through the module proxy by itself (GOTOOLCHAIN=auto).
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
cd "$(dirname "$0")/.."
go mod download
