#!/bin/sh
# Demo script run inside the rdma_rxe VM by `go run ./internal/testkit/cmd/rxevm -demo`.
# Extend it freely; keep every step tolerant of tools that do not exist yet.
run() {
	if command -v "$1" >/dev/null 2>&1; then
		echo "+ $*"
		"$@" || echo "(exit status $?)"
	else
		echo "- $1: not present in this build; skipped"
	fi
}
echo "kernel $(uname -r)"
run ibv_devinfo -l
run rxectl list
for tool in devinfo devlist; do
	run "/bin/$tool"
done
run rdma resource show
