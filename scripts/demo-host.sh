#!/usr/bin/env bash
# demo-host.sh BIN: run the Go tools directly on a host with RDMA devices.
set -uo pipefail
bin=${1:-bin}
for t in devinfo asyncwatch; do [ -x "$bin/$t" ] || continue; done
[ -x "$bin/devinfo" ] && { echo "+ devinfo"; "$bin/devinfo"; }
[ -x "$bin/devinfo" ] && { echo "+ devinfo -l"; "$bin/devinfo" -l; }
if [ -x "$bin/asyncwatch" ]; then
	dev=$("$bin/devinfo" -l 2>/dev/null | awk 'NR>1{print $1; exit}')
	echo "+ asyncwatch -d ${dev:-?} (5 s)"
	timeout 5 "$bin/asyncwatch" ${dev:+-d "$dev"} || true
fi
