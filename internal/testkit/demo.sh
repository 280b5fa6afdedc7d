#!/bin/sh
# Demo run inside the rdma_rxe VM by `make demo`
# (go run ./internal/testkit/cmd/rxevm -demo). The Go tools are in /bin;
# rdma-core's C tools run beside them for comparison. Every step runs even if
# an earlier one failed, but the demo fails (exit status 1, and make demo
# with it) if any step fails or a tool is missing or cannot start (exit
# status 126/127: a missing shared library, for one).
failed=
fail() {
	echo "!! $*"
	failed="$failed
  $*"
}
run() {
	if ! command -v "$1" >/dev/null 2>&1; then
		fail "$1: not in the guest"
		return
	fi
	echo "+ $*"
	"$@"
	rc=$?
	case $rc in
	0) ;;
	126 | 127) fail "$*: cannot start (exit status $rc)" ;;
	*) fail "$*: exit status $rc" ;;
	esac
}
finish() {
	if [ -n "$failed" ]; then
		echo
		echo "demo: FAILED:$failed"
		exit 1
	fi
	echo
	echo "demo: every step ran"
	exit 0
}
# wait_lines FILE N: wait (at most ~10 s) until FILE has N lines.
wait_lines() {
	i=0
	while [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -lt "$2" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
echo "kernel $(uname -r)"
echo
echo "=== devices: Go devinfo -l, then rdma-core ibv_devinfo -l ==="
run /bin/devinfo -l
run ibv_devinfo -l
echo "=== Go devices, then rdma-core ibv_devices ==="
run /bin/devices
run ibv_devices
echo
echo "=== Go devinfo -d rxe0 (ibv_devinfo's format) ==="
run /bin/devinfo -d rxe0
echo "=== Go devinfo -v -d rxelo ==="
run /bin/devinfo -v -d rxelo
if ! [ -x /bin/asyncwatch ]; then
	fail "/bin/asyncwatch: not in the guest"
	finish
fi
echo
echo "=== async events: Go asyncwatch and C ibv_asyncwatch on rxe0 while d0 flaps ==="
/bin/asyncwatch -d rxe0 >/tmp/go.log 2>&1 &
gopid=$!
cpid=
if command -v ibv_asyncwatch >/dev/null 2>&1; then
	# On a pseudo-terminal the C tool's stdout stays line-buffered.
	rxectl pty ibv_asyncwatch -d rxe0 >/tmp/c.log 2>&1 &
	cpid=$!
else
	fail "ibv_asyncwatch: not in the guest"
fi
wait_lines /tmp/go.log 1
[ -n "$cpid" ] && wait_lines /tmp/c.log 1
# iproute2's ip (busybox's lacks nodad; busybox sh may run its own applet
# for a bare "ip", so take an absolute path).
IP=
for p in /usr/sbin/ip /sbin/ip /usr/bin/ip /bin/ip; do
	if [ -x "$p" ] && "$p" -V 2>/dev/null | grep -q iproute2; then IP=$p; break; fi
done
if [ -z "$IP" ]; then
	fail "iproute2's ip cannot run in the guest ($(/usr/bin/ip -V 2>&1 | head -1))"
	IP=ip
fi
echo "+ ip link set d0 down; ip link set d0 up"
$IP link set d0 down || fail "ip link set d0 down"
$IP link set d0 up || fail "ip link set d0 up"
echo "+ ip addr add 10.99.7.7/24 dev d0; ip -6 addr add fd00:7::7/64 dev d0 nodad; ip addr del 10.99.7.7/24 dev d0"
$IP addr add 10.99.7.7/24 dev d0 || fail "ip addr add 10.99.7.7/24 dev d0"
$IP -6 addr add fd00:7::7/64 dev d0 nodad || fail "ip -6 addr add fd00:7::7/64 dev d0 nodad"
$IP addr del 10.99.7.7/24 dev d0 || fail "ip addr del 10.99.7.7/24 dev d0"
wait_lines /tmp/go.log 6
[ -n "$cpid" ] && wait_lines /tmp/c.log 6
# Background jobs of a script ignore SIGINT: stop the watchers with SIGTERM.
kill -TERM $gopid 2>/dev/null
[ -n "$cpid" ] && kill -TERM $cpid 2>/dev/null
wait $gopid 2>/dev/null
[ -n "$cpid" ] && wait $cpid 2>/dev/null
echo "--- Go asyncwatch:"
cat /tmp/go.log
grep -q PORT_ACTIVE /tmp/go.log || fail "Go asyncwatch saw no IBV_EVENT_PORT_ACTIVE"
if [ -n "$cpid" ]; then
	echo "--- C ibv_asyncwatch:"
	tr -d '\r' </tmp/c.log
	grep -q PORT_ACTIVE /tmp/c.log || fail "ibv_asyncwatch saw no IBV_EVENT_PORT_ACTIVE"
fi
# wait_listen PORT: wait (at most ~10 s) until a TCP socket listens on PORT.
wait_listen() {
	hex=$(printf '%04X' "$1")
	i=0
	while ! awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
# pingpong SERVER CLIENT HOST PORT ARGS...: SERVER in the background on
# TCP port PORT, CLIENT connecting to it at HOST, both with ARGS; print both
# outputs, which end in the summary lines (bytes, Mbit/sec, usec/iter).
pingpong() {
	srv=$1 cli=$2 host=$3 port=$4
	shift 4
	set -- "$@" -p "$port"
	for t in "$srv" "$cli"; do
		if ! command -v "$t" >/dev/null 2>&1; then
			fail "$t: not in the guest"
			return
		fi
	done
	echo "+ $srv $* &"
	"$srv" "$@" >/tmp/pp-server.log 2>&1 &
	spid=$!
	wait_listen "$port"
	echo "+ $cli $* $host"
	"$cli" "$@" "$host" >/tmp/pp-client.log 2>&1
	crc=$?
	# A client that failed may have left the server waiting for a
	# connection for ever (until the runner's time limit): stop it.
	stopped=
	if [ $crc -ne 0 ] && kill -0 $spid 2>/dev/null; then
		kill -TERM $spid 2>/dev/null && stopped=1
	fi
	wait $spid
	src=$?
	echo "--- server ($srv):"
	cat /tmp/pp-server.log
	echo "--- client ($cli):"
	cat /tmp/pp-client.log
	# 143: the SIGTERM ended it (a server that had exited by itself, a
	# zombie still, keeps its own status).
	if [ -n "$stopped" ] && [ $src -eq 143 ]; then
		fail "$srv $*: still running when the client failed; stopped (SIGTERM)"
	elif [ $src -ne 0 ]; then
		fail "$srv $*: exit status $src"
	fi
	[ $crc -eq 0 ] || fail "$cli $* $host: exit status $crc"
	for f in /tmp/pp-server.log /tmp/pp-client.log; do
		grep -q 'usec/iter' $f || fail "$f: no summary line"
	done
}
echo
echo "=== RC ping-pong on rxe0: Go rcpingpong server, C ibv_rc_pingpong client ==="
pingpong rcpingpong ibv_rc_pingpong 10.99.0.1 18515 -d rxe0 -g 1 -s 4096 -n 500
echo
echo "=== UD ping-pong on rxelo: C ibv_ud_pingpong server, Go udpingpong client ==="
pingpong ibv_ud_pingpong udpingpong 127.0.0.1 18516 -d rxelo -g 1 -s 2048 -n 500
echo
echo "=== RC ping-pong in event mode (-e: both sleep on the completion channel): C server, Go client ==="
pingpong ibv_rc_pingpong rcpingpong 10.99.0.1 18517 -d rxe0 -g 1 -s 4096 -n 500 -e
echo
echo "=== kernel RDMA resources after the tools exited ==="
run rdma resource show
finish
