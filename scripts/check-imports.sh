#!/usr/bin/env bash
# check-imports.sh: keep every use of unsafe, syscall and golang.org/x/sys/unix
# inside internal/sys.
#
# Rule: all unsafe and all x/sys/unix use in the library lives in
# github.com/pureverbs/pureverbs/internal/sys. The forbidden imports are
#
#     unsafe   syscall   golang.org/x/sys/unix
#
# Allowlist (import path relative to the module):
#
#   package              non-test imports   test imports   why
#   internal/sys/...     allowed            allowed        the one syscall layer
#   internal/testkit/... allowed            allowed        test infrastructure (VM runner, in-guest helpers)
#   cmd/abigen/...       allowed            allowed        code generator, never linked into the library
#   abi                  CHECKED            allowed        its generated layout test uses unsafe.Sizeof/Offsetof
#   cmd/* (tools)        CHECKED, but       CHECKED        commands may name signals (syscall.SIGTERM);
#                        syscall allowed                   unsafe and x/sys/unix stay forbidden
#   everything else      CHECKED            CHECKED
#
# "non-test imports" is go list's .Imports; "test imports" is .TestImports
# plus .XTestImports (package foo and package foo_test _test.go files).
# Tests of library packages that need errno values should get them through
# internal/sys rather than importing x/sys/unix themselves.
#
# go list evaluates build constraints for the current GOOS/GOARCH (set them
# in the environment to check another target). Exit status: 0 clean, 1
# offenders found (each listed on stderr), 2 go list failed.
#
# Usage: scripts/check-imports.sh   (from anywhere inside the module)

set -euo pipefail

cd "$(dirname "$0")/.."

GO=${GO:-go}
module=$("$GO" list -m)
forbidden=' unsafe syscall golang.org/x/sys/unix '

# Prints "all" (nothing checked), "nontest" (only non-test imports checked)
# or "strict" for a package import path.
policy() {
	local rel=${1#"$module"}
	rel=${rel#/}
	case "$rel" in
	internal/sys | internal/sys/* | internal/testkit | internal/testkit/* | cmd/abigen | cmd/abigen/*)
		echo all ;;
	abi)
		echo nontest ;;
	cmd/*)
		echo cmd ;;
	*)
		echo strict ;;
	esac
}

if ! listing=$("$GO" list -f '{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}' ./... 2>&1); then
	echo "check-imports: go list failed:" >&2
	echo "$listing" >&2
	exit 2
fi

status=0
while IFS='|' read -r pkg imports testimports; do
	[ -n "$pkg" ] || continue
	p=$(policy "$pkg")
	[ "$p" = all ] && continue
	for imp in $imports; do
		[ "$p" = cmd ] && [ "$imp" = syscall ] && continue
		if [[ $forbidden == *" $imp "* ]]; then
			echo "check-imports: $pkg imports \"$imp\" (only internal/sys may)" >&2
			status=1
		fi
	done
	[ "$p" = nontest ] && continue
	for imp in $testimports; do
		if [[ $forbidden == *" $imp "* ]]; then
			echo "check-imports: $pkg tests import \"$imp\" (only internal/sys may)" >&2
			status=1
		fi
	done
done <<<"$listing"

if [ "$status" -eq 0 ]; then
	echo "check-imports: ok"
fi
exit "$status"
