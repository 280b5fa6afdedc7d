#!/usr/bin/env bash
# check-demo-host.sh: make demo on a host with /dev/infiniband
# (scripts/demo-host.sh), with fake Go tools: it passes when every tool
# does, and fails (non-zero, saying why) when devinfo -l lists no device
# or devices, devinfo or asyncwatch fails.
set -euo pipefail

cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "check-demo-host: $*" >&2; status=1; }

mkdir -p "$tmp/bin" "$tmp/path"
# FAKE_FAIL names the tool that fails; FAKE_NODEV: no device listed.
cat >"$tmp/bin/devinfo" <<'EOF'
#!/bin/sh
if [ "$1" = -l ]; then
	[ -n "${FAKE_NODEV:-}" ] && { echo "0 HCAs found:"; exit 0; }
	printf '1 HCA found:\n\trxe0\n'
	exit 0
fi
[ "${FAKE_FAIL:-}" = devinfo ] && { echo "No IB devices found" >&2; exit 255; }
echo "hca_id: rxe0"
EOF
for t in devices asyncwatch; do
	printf '#!/bin/sh\n[ "${FAKE_FAIL:-}" = %s ] && { echo "%s: failed" >&2; exit 1; }\necho "%s ok $*"\n' "$t" "$t" "$t" >"$tmp/bin/$t"
done
# timeout as at the end of asyncwatch's 10 s (no wait): exit status 124.
printf '#!/bin/sh\necho "timeout $*" >>%s/timeout.log\n[ "${FAKE_FAIL:-}" = asyncwatch ] && { shift 3; exec "$@"; }\nexit 124\n' "$tmp" >"$tmp/path/timeout"
chmod +x "$tmp/bin/"* "$tmp/path/timeout"

demo() { env PATH="$tmp/path:$PATH" "$@" scripts/demo-host.sh "$tmp/bin" >"$tmp/out" 2>&1; }

demo FAKE_FAIL= || fail "fails with every tool passing: $(cat "$tmp/out")"
grep -q "timeout -s INT 10 $tmp/bin/asyncwatch -d rxe0" "$tmp/timeout.log" || fail "asyncwatch did not run on rxe0: $(cat "$tmp/out")"
for c in devices devinfo asyncwatch; do
	if demo FAKE_FAIL=$c; then
		fail "exits 0 with $c failing: $(cat "$tmp/out")"
	elif ! grep -q "demo: FAILED:" "$tmp/out" || ! grep -q "$c.*exit status" "$tmp/out"; then
		fail "does not say that $c failed: $(cat "$tmp/out")"
	fi
done
if demo FAKE_NODEV=1; then
	fail "exits 0 with no RDMA device: $(cat "$tmp/out")"
elif ! grep -q "no RDMA device" "$tmp/out"; then
	fail "does not say that there is no RDMA device: $(cat "$tmp/out")"
fi
if [ "$status" = 0 ]; then
	echo "check-demo-host: ok (make demo on a host with /dev/infiniband fails when a tool fails or no device is found)"
fi
exit "$status"
