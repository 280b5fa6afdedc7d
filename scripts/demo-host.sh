#!/usr/bin/env bash
# demo-host.sh BIN: make demo on a host that has RDMA devices: run the Go
# tools directly (no VM). asyncwatch runs for 10 s; change a link or an
# address meanwhile to see events. Every step runs, but the demo fails
# (exit status 1, and make demo with it) if a tool fails or no RDMA
# device is found (scripts/check-demo-host.sh).
set -uo pipefail
bin=${1:-bin}
failed=
fail() {
	echo "!! $*"
	failed="$failed
  $*"
}
# run TOOL ARGS...: run $bin/TOOL, failing the demo on a non-zero status.
run() {
	echo "+ $*"
	"$bin/$1" "${@:2}"
	rc=$?
	[ $rc -eq 0 ] || fail "$*: exit status $rc"
}
echo "+ devinfo -l"
list=$("$bin/devinfo" -l)
rc=$?
echo "$list"
if [ $rc -ne 0 ]; then
	echo "demo: FAILED: devinfo -l: exit status $rc"
	exit 1
fi
dev=$(awk 'NR > 1 { print $1; exit }' <<<"$list")
if [ -z "$dev" ]; then
	echo "demo: FAILED: this host has /dev/infiniband but no RDMA device (load its driver, or add a soft-RoCE one: rdma link add rxe0 type rxe netdev IFACE); on a host without /dev/infiniband make demo boots a VM with rdma_rxe"
	exit 1
fi
run devices
run devinfo
echo "+ asyncwatch -d $dev (10 s)"
timeout -s INT 10 "$bin/asyncwatch" -d "$dev"
rc=$?
# 124: timeout stopped it after its 10 s, as intended.
[ $rc -eq 0 ] || [ $rc -eq 124 ] || fail "asyncwatch -d $dev: exit status $rc"
if [ -n "$failed" ]; then
	echo
	echo "demo: FAILED:$failed"
	exit 1
fi
echo
echo "demo: every step ran"
exit 0
