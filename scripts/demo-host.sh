#!/usr/bin/env bash
# demo-host.sh BIN: make demo on a host that has RDMA devices: run the Go
# tools directly (no VM). asyncwatch runs for 10 s; change a link or an
# address meanwhile to see events.
set -uo pipefail
bin=${1:-bin}
echo "+ devinfo -l"
"$bin/devinfo" -l || exit 1
echo "+ devices"
"$bin/devices"
echo "+ devinfo"
"$bin/devinfo"
dev=$("$bin/devinfo" -l | awk 'NR > 1 { print $1; exit }')
echo "+ asyncwatch -d $dev (10 s)"
timeout -s INT 10 "$bin/asyncwatch" -d "$dev"
exit 0
