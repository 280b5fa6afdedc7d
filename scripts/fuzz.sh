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
# Environment: GO (default go), FUZZTIME (a go test -fuzztime value).
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}

targets=$(grep -rHoE --include='*_test.go' --exclude-dir=testdata '^func Fuzz[A-Za-z0-9_]*' . |
	sed -E 's|^\./||; s|:func |:|' | sort)
[ -n "$targets" ] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }
n=0
start=$SECONDS
while IFS=: read -r file name; do
	dir=./$(dirname "$file")
	echo "fuzz: $dir $name for $FUZZTIME"
	"$GO" test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "$dir"
	n=$((n + 1))
done <<<"$targets"
echo "fuzz: $n targets, $FUZZTIME each, $((SECONDS - start)) s in all"
