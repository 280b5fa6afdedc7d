# pureverbs: a pure-Go (no cgo) RDMA verbs library.
#
#   make demo    boot the rdma_rxe VM and run the Go tools there (or run them
#                directly on a host that has /dev/infiniband)
#   make test    host unit tests, the fuzz targets (5 s each), the VM suite
#                on the 6.1 and 6.12 kernels (one guest, its library
#                packages again under -race on 6.12, then two guests
#                joined by a virtual wire)
#
# Both install what they need (scripts/deps.sh: apt-get, Go modules).

SHELL    := /bin/bash
# scripts/deps.sh installs Go here when the Go in PATH is too old for go.mod
# (Debian 12's golang-go is 1.19).
GOROOT_DEST := $(or $(PUREVERBS_GOROOT),/usr/local/go)
export PATH := $(GOROOT_DEST)/bin:$(HOME)/go/bin:$(PATH)
export CGO_ENABLED ?= 0
# GO is the go command every recipe and every $(shell ...) below runs: the
# first go in the PATH above, i.e. $(GOROOT_DEST)/bin/go once deps has
# installed it. It is looked up when used (after deps) and by absolute path,
# because GNU make before 4.4 runs $(shell ...) with the environment make
# started with, not the exported PATH: a bare `go` there is Debian's 1.19,
# which rejects go.mod.
GO       ?= $(shell export PATH='$(PATH)'; command -v go || echo go)
# staticcheck, pinned; fetched through the Go module proxy by go run.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOFMT     = $(if $(filter /%,$(GO)),$(dir $(GO))gofmt,gofmt)
KERNEL   ?= all
# Packages run in the VM: all but the generator and abi, whose tests need the
# host headers and gcc (they run on the host in make unit), and the sweep,
# which make sweep runs with its flags.
VMPKGS   ?= $(shell $(GO) list ./... | grep -v -e /abi$$ -e /cmd/abigen -e /internal/testkit/sweep$$)
RUN      ?=
VMFLAGS  ?=
TESTFLAGS ?=
BIN      := bin
TOOLS    := $(filter-out abigen,$(notdir $(wildcard cmd/*)))

.PHONY: all deps build test unit fuzz runnertest vet fmt check-imports generate check-generate bench demo vmtest vmtest-race vmtest2 sweep perf perf-bw perf-lat perf-lattools perfdoc clean

all: build

deps:
	@scripts/deps.sh

# Every cmd/ tool as a static binary.
build: deps
	@mkdir -p $(BIN)
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...
	@for t in $(BIN)/*; do file $$t | grep -q 'statically linked' || { echo "$$t is not static"; exit 1; }; done

vet: deps
	$(GO) vet ./...
	@out=$$($(GOFMT) -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@GO=$(GO) scripts/check-imports.sh
	@GO=$(GO) scripts/check-makefile.sh
	@scripts/check-tracked.sh
	@scripts/check-deps.sh
	@scripts/check-demo-host.sh
	$(GO) run $(STATICCHECK) ./...

generate: deps
	$(GO) run ./cmd/abigen -out abi

check-generate: deps
	@GO=$(GO) scripts/check-generate.sh

# Host unit tests (the VM-only tests skip with a message naming make vmtest).
unit: deps
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...
	@# Allocation assertions skip under -race (sync.Pool drops items there).
	$(GO) test -count=1 -run 'Alloc' ./...

# Every fuzz target (func FuzzX in a _test.go file) for FUZZTIME each.
FUZZTIME ?= 5s
fuzz: deps
	@GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The VM suite: KERNEL=6.1|6.12|all, RUN=TestName, VMPKGS=./async/...
# The whole suite takes about 14-15 minutes per kernel under TCG on 2 cores (CI79),
# one kernel after the other, so each kernel gets 30 (the runner's
# default is 10). VMPARALLEL=-parallel boots both kernels' guests at
# once: about 4 minutes sooner on 2 cores, but every test runs 1.7 times
# slower on average (busy-polling ones up to 4.5 times), and the one
# whole-suite CI run that way met two timing flakes the sequential runs
# had not (docs/testing.md), so it is not the default.
VMPARALLEL ?=
vmtest: deps
	@[ -n "$(strip $(VMPKGS))" ] || { echo "make vmtest: '$(GO) list ./...' found no packages"; exit 1; }
	$(GO) run ./internal/testkit/cmd/rxevm -kernel $(KERNEL) -timeout $(if $(VMPARALLEL),40m,30m) $(VMPARALLEL) $(VMFLAGS) $(VMPKGS) -- -count=1 -v $(if $(RUN),-run '$(value RUN)') $(TESTFLAGS)

# The VM suite's library packages with the race detector (rxevm -race:
# cgo test binaries linked against the guest's glibc), -short, on
# RACEKERNEL (make test RACEKERNEL= leaves it out; about 4 min on 6.12).
# The whole suite: make vmtest VMFLAGS=-race.
RACEKERNEL ?= 6.12
RACEPKGS   ?= ./uverbs ./async ./cq ./devx ./rdmacm ./internal/sys ./internal/core ./internal/testkit/faults
vmtest-race: deps
	$(if $(strip $(RACEKERNEL)),$(GO) run ./internal/testkit/cmd/rxevm -race -timeout 20m -kernel $(RACEKERNEL) $(VMFLAGS) $(RACEPKGS) -- -count=1 -v -short -timeout 15m $(if $(RUN),-run '$(value RUN)') $(TESTFLAGS),@echo "make vmtest-race: RACEKERNEL is empty; skipped")

# The two-host suite: two guests joined by a virtual Ethernet wire, the
# TestTwoHost* tests of internal/testkit/twohost (and the perftest ports
# against perftest across the wire) on host A (docs/testing.md).
# A test that powers host B off (TestTwoHostPowerOff*) needs a boot of its
# own: rxevm leaves those out of the first run (saying so) and refuses to
# run one beside other tests; each of internal/testkit/twohost's gets its
# own runner invocation here (with RUN, only RUN's selection runs, in the
# first).
POWEROFFTESTS ?= $(shell grep -ho '^func TestTwoHostPowerOff[A-Za-z0-9_]*' internal/testkit/twohost/*_test.go | cut -c6-)
vmtest2: deps
	$(GO) run ./internal/testkit/cmd/rxevm -hosts 2 -kernel $(KERNEL) $(VMFLAGS) ./internal/testkit/twohost $(BWPKGS) $(LATPKGS) $(ATOMICPKGS) -- -count=1 -v $(if $(RUN),-run '$(value RUN)') $(TESTFLAGS)
	$(if $(RUN),,$(foreach t,$(POWEROFFTESTS),$(GO) run ./internal/testkit/cmd/rxevm -hosts 2 -kernel $(KERNEL) $(VMFLAGS) ./internal/testkit/twohost -- -count=1 -v -run '^$(t)$$' $(TESTFLAGS) &&) true)

# Go against C for docs/performance.md, on KERNEL (both by default): the
# bandwidth tools (and the atomic rate) against perftest on one host and
# across two hosts (perf-bw), rcpingpong's latency by message size,
# polling and with -e (perf-lat), and the latency tools against perftest's
# (perf-lattools). The runs' logs go to PERFLOGS; perfdoc then rewrites
# the document's generated sections and docs/latency.svg from whatever
# logs are there. About 70 minutes on a 2-core host (perf-bw 25-32,
# perf-lattools 10, perf-lat 29 on 2026-12-07); run it on a quiet one.
BWPKGS   := ./cmd/writebw ./cmd/readbw ./cmd/sendbw
LATPKGS  := ./cmd/writelat ./cmd/sendlat ./cmd/readlat
ATOMICPKGS := ./cmd/atomicbw ./cmd/atomiclat
PERFLOGS ?= $(or $(PUREVERBS_CACHE),$(HOME)/.cache/pureverbs)/perf
PERF_BW  ?= -bw.rounds=5 -bw.sizes=64,4096,65536 -bw.iters=20000,5000,2000
PERF_BW2 ?= -bw.rounds=5 -bw.sizes=64,4096,65536 -bw.iters=5000,2000,500
PERF_LAT ?= -pp.rounds=15 -pp.sizes=2,16,128,1024,8192,65536 -pp.iters=3000,3000,3000,2000,600,200
# The latency tools (the atomic one runs 8 B with the first count).
PERF_LATTOOLS ?= -bw.rounds=5 -bw.sizes=2,64,4096 -bw.iters=3000,3000,2000
PERFRUN   = $(GO) run ./internal/testkit/cmd/rxevm -kernel $(KERNEL) -timeout 120m
perf: perf-bw perf-lat perf-lattools
	$(MAKE) --no-print-directory perfdoc

# perfhost appends to log $(1) the line perfdoc puts in the section's
# header: the date, the host's CPUs and its load average as the run ends.
perfhost = echo "PERFHOST $$(date -u +%F), $$(nproc)-CPU host, QEMU TCG guests, host load average $$(cut -d' ' -f1-3 /proc/loadavg)" >> $(1)

perf-bw: deps
	@mkdir -p $(PERFLOGS)
	set -o pipefail; $(PERFRUN) $(BWPKGS) ./cmd/atomicbw -- -count=1 -v -timeout 120m -run TestVMBandwidth $(PERF_BW) | tee $(PERFLOGS)/bw.log
	$(call perfhost,$(PERFLOGS)/bw.log)
	set -o pipefail; $(PERFRUN) -hosts 2 $(BWPKGS) ./cmd/atomicbw -- -count=1 -v -timeout 120m -run TestTwoHostBandwidth $(PERF_BW2) | tee $(PERFLOGS)/bw2.log
	$(call perfhost,$(PERFLOGS)/bw2.log)

perf-lat: deps
	@mkdir -p $(PERFLOGS)
	set -o pipefail; $(PERFRUN) ./cmd/rcpingpong -- -count=1 -v -timeout 120m -run TestVMPerformance $(PERF_LAT) | tee $(PERFLOGS)/lat-poll.log
	$(call perfhost,$(PERFLOGS)/lat-poll.log)
	set -o pipefail; $(PERFRUN) ./cmd/rcpingpong -- -count=1 -v -timeout 120m -run TestVMPerformance $(PERF_LAT) -pp.args=-e | tee $(PERFLOGS)/lat-event.log
	$(call perfhost,$(PERFLOGS)/lat-event.log)

perf-lattools: deps
	@mkdir -p $(PERFLOGS)
	set -o pipefail; $(PERFRUN) $(LATPKGS) ./cmd/atomiclat -- -count=1 -v -timeout 120m -run TestVMLatency $(PERF_LATTOOLS) | tee $(PERFLOGS)/lattools.log
	$(call perfhost,$(PERFLOGS)/lattools.log)

# The differential sweep (internal/testkit/sweep, docs/testing.md): SWEEPN
# random command lines per family (ping-pong, perftest, rdma_cm examples),
# each run by the C tool and the Go tool in a KERNEL guest (6.12 unless
# given), drawn from SWEEPSEED; SWEEPSERVER=1 for server lines,
# SWEEPPAIRED=1 for connected lines (a server and a client, each line in
# the four pairings of C and Go); SWEEPRESPELL=1 runs each line in another
# spelling getopt_long reads as the same (Respell). Not part of make test: about 10 minutes
# for 300 client lines per family, 10-12 for 80 connected lines per family.
SWEEPN    ?= 300
SWEEPSEED ?= 1
sweep: deps
	$(GO) run ./internal/testkit/cmd/rxevm -kernel $(if $(filter all,$(KERNEL)),6.12,$(KERNEL)) -timeout 60m $(VMFLAGS) ./internal/testkit/sweep -- -count=1 -v -timeout 59m -run TestVMSweep -sweep.n=$(SWEEPN) -sweep.seed=$(SWEEPSEED) $(if $(SWEEPSERVER),-sweep.server) $(if $(SWEEPPAIRED),-sweep.paired) $(if $(SWEEPRESPELL),-sweep.respell) $(TESTFLAGS)

perfdoc: deps
	$(GO) run ./internal/bw/perfdoc -doc docs/performance.md -svg docs/latency.svg $(wildcard $(PERFLOGS)/bw.log $(PERFLOGS)/bw2.log $(PERFLOGS)/lat-poll.log $(PERFLOGS)/lat-event.log $(PERFLOGS)/lattools.log)

# The runner's own proof: a failing test, a guest panic, a hang in the
# guest, a dead peer host and a peer host powered off unannounced each
# make rxevm fail on the host, and an announced power-off passes (boots
# several VMs, ~2.5-3.5 min).
runnertest: deps
	PUREVERBS_RUNNER_TEST=1 $(GO) test -count=1 -run TestRunnerReportsFailures -v ./internal/testkit/cmd/rxevm

test: vet check-generate unit fuzz vmtest vmtest-race vmtest2 runnertest
	@echo "make test: all passed"

# VMFLAGS reach the runner: on a slow mirror, make demo VMFLAGS='-timeout 30m'
# (a first run downloads about 100 MB within the runner's 10-minute limit).
demo: build
	@if [ -d /dev/infiniband ]; then \
	  scripts/demo-host.sh $(BIN); \
	else \
	  $(GO) run ./internal/testkit/cmd/rxevm -kernel $(if $(filter all,$(KERNEL)),6.1,$(KERNEL)) $(VMFLAGS) -demo; \
	fi

clean:
	rm -rf $(BIN)
