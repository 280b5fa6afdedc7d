#!/usr/bin/env bash
# check-makefile.sh: every go the Makefile runs, in recipes and in
# $(shell ...), is the Go that scripts/deps.sh installs, not whatever `go`
# comes first in the caller's PATH.
#
# On a fresh Debian 12 machine deps.sh installs Debian's golang-go (1.19)
# only to bootstrap Go 1.26 into /usr/local/go, so /usr/bin/go stays 1.19,
# which rejects go.mod. GNU make before 4.4 does not pass the Makefile's
# exported PATH to $(shell ...), so a bare `go` there is the old one.
#
# The check puts a fake old go first in PATH (it records every call and
# fails as Go 1.19 does), points PUREVERBS_GOROOT at a fake installed Go
# (which records calls and runs the real one), and dry-runs (make -n) the
# targets: the old go must never run, every go command line must name the
# installed one, and make vmtest must still find the packages.
#
# Environment: GO, the real go command (default: go in PATH).
set -euo pipefail

cd "$(dirname "$0")/.."
real=$(command -v "${GO:-go}") || { echo "check-makefile: no go command" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old" "$tmp/goroot/bin"
cat >"$tmp/old/go" <<EOF
#!/bin/sh
echo "go \$*" >>"$tmp/old.log"
echo "go: errors parsing go.mod: invalid go version '1.26.0': must match format 1.23 (fake Go 1.19 of check-makefile.sh)" >&2
exit 1
EOF
cat >"$tmp/goroot/bin/go" <<EOF
#!/bin/sh
exec "$real" "\$@"
EOF
cp "$tmp/goroot/bin/go" "$tmp/goroot/bin/gofmt"
sed -i "s|\"$real\"|\"$(dirname "$real")/gofmt\"|" "$tmp/goroot/bin/gofmt"
chmod +x "$tmp/old/go" "$tmp/goroot/bin/go" "$tmp/goroot/bin/gofmt"
installed=$tmp/goroot/bin/go

status=0
fail() { echo "check-makefile: $*" >&2; status=1; }

out=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u GO -u VMPKGS \
	PATH="$tmp/old:$PATH" PUREVERBS_GOROOT="$tmp/goroot" \
	make --no-print-directory -n vet check-generate unit vmtest runnertest build demo generate 2>&1) ||
	fail "make -n failed: $out"
if [ -s "$tmp/old.log" ]; then
	fail "the go first in the caller's PATH ran (from \$(shell ...)?):"
	sed 's/^/	/' "$tmp/old.log" >&2
fi
# A go or gofmt command that is not the installed one: a bare word at the
# start of a command (after VAR=value assignments too).
bare=$(grep -nE '(^|[;&|(`]|\$\(|[A-Za-z_]+=[^ ]* )[[:space:]]*(go|gofmt)[[:space:]]' <<<"$out" || true)
[ -z "$bare" ] || fail "recipes run a bare go or gofmt:"$'\n'"$bare"
grep -q "^$installed vet " <<<"$out" || fail "make vet does not run $installed vet"
grep -qF "$tmp/goroot/bin/gofmt -l" <<<"$out" || fail "make vet does not run $tmp/goroot/bin/gofmt"
grep -q "GO=$installed scripts/check-generate.sh" <<<"$out" || fail "check-generate is not given GO=$installed"
vm=$(grep "^$installed run ./internal/testkit/cmd/rxevm -kernel all " <<<"$out" || true)
[ -n "$vm" ] || fail "make vmtest does not run $installed run ./internal/testkit/cmd/rxevm"
module=$("$real" list -m)
grep -q " $module/uverbs " <<<"$vm" || fail "make vmtest's package list (go list ./...) lacks $module/uverbs: $vm"
# RUN reaches go test as written: make would expand the "$|" of a
# pattern like 'TestA$|TestB' (an automatic variable) unless the recipe
# takes RUN's value unexpanded.
for target in vmtest vmtest-race vmtest2; do
	runout=$(env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u GO \
		PATH="$tmp/old:$PATH" PUREVERBS_GOROOT="$tmp/goroot" \
		make --no-print-directory -n $target RACEKERNEL=6.12 'RUN=TestA$|TestB' 2>&1) || fail "make -n $target RUN=...: $runout"
	grep -qF -- "-run 'TestA\$|TestB'" <<<"$runout" || fail "make $target does not pass RUN unexpanded: $(grep rxevm <<<"$runout")"
done
if [ "$status" = 0 ]; then
	echo "check-makefile: ok (with an old go first in PATH, make runs only \$PUREVERBS_GOROOT/bin/go)"
else
	echo "--- make -n output:" >&2
	echo "$out" >&2
fi
exit "$status"
