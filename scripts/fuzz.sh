#!/usr/bin/env bash
# fuzz.sh: run every fuzz target of the module for FUZZTIME (default 5s)
# each (make fuzz, part of make test).
#
# go test -fuzz takes one target of one package per run, so the targets
# are found in the sources (func FuzzX in *_test.go files outside
# testdata/) and run one at a time. New corpus entries stay in the Go
# build cache; an input that fails is written by go test to the package's
# testdata/fuzz/FuzzX/ (commit it: it then runs as a regression case in
# every plain go test) and fails the run.
#
# Go 1.26's fuzz coordinator can report a bare "context deadline exceeded"
# as the target's failure when -fuzztime ends while a worker is mid-call
# (golang/go#75804, fixed in Go 1.27): no input failed, none is written.
# Such a run is repeated once; a real finding always names the input it
# wrote ("Failing input written to"), fails at once, and is never retried,
# and a second bare deadline fails too.
#
# Environment: GO (default go), FUZZTIME (a go test -fuzztime value).
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}

targets=$(grep -rHoE --include='*_test.go' --exclude-dir=testdata '^func Fuzz[A-Za-z0-9_]*' . |
	sed -E 's|^\./||; s|:func |:|' | sort)
[ -n "$targets" ] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }
# deadline_only: the log of a failed run shows only the coordinator's
# deadline, no failing input, panic or test error.
deadline_only() {
	grep -q 'context deadline exceeded' "$1" &&
		! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$1"
}

n=0
start=$SECONDS
while IFS=: read -r file name; do
	dir=./$(dirname "$file")
	for try in 1 2; do
		echo "fuzz: $dir $name for $FUZZTIME"
		log=$(mktemp)
		rc=0
		"$GO" test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "$dir" 2>&1 | tee "$log" || rc=$?
		if [ "$rc" -ne 0 ] && [ "$try" -eq 1 ] && deadline_only "$log"; then
			echo "fuzz: $name: go's fuzzing coordinator ended on its own deadline with no failing input (golang/go#75804): once more"
			rm -f "$log"
			continue
		fi
		rm -f "$log"
		[ "$rc" -eq 0 ] || exit "$rc"
		break
	done
	n=$((n + 1))
done <<<"$targets"
echo "fuzz: $n targets, $FUZZTIME each, $((SECONDS - start)) s in all"
