// Package bw is the shared code of the Go bandwidth tools cmd/writebw,
// cmd/readbw and cmd/sendbw, ports of perftest's ib_write_bw, ib_read_bw
// and ib_send_bw (perftest 6.06, as Debian 12 ships it) over RC QPs (-q).
// They take perftest's options (those that make sense for RC),
// exchange QPN, PSN, GID, rkey and buffer address over TCP with perftest's
// "Ethernet" method, message for message, and print its tables, so that
// either side of a run may be the C tool.
package bw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Main is a whole tool: it parses args (without the program name) as
// perftest does, runs the test and returns the exit status (perftest's:
// 0, or 1 after any failure, -h and -V included).
func Main(v Verb, prog string, args []string, stdout, stderr io.Writer) int {
	return MainTest(BW, v, prog, args, stdout, stderr)
}

// MainTest is Main for a bandwidth (BW) or latency (LAT) test of verb v.
func MainTest(tst Test, v Verb, prog string, args []string, stdout, stderr io.Writer) int {
	o, err := ParseTestArgs(tst, v, args)
	switch {
	case err == errVersion:
		fmt.Fprintf(stdout, "Version: %s\n", Version)
		return 1
	case err == errHelp:
		UsageTest(stdout, tst, v, prog)
		return 1
	case err != nil:
		var ue *usageError
		if errors.As(err, &ue) {
			io.WriteString(stdout, ue.notice)
			io.WriteString(stderr, ue.warn)
			if ue.resultLine {
				io.WriteString(stdout, resultLine)
			}
		}
		switch {
		case ue != nil && ue.msg != "" && ue.toStdout:
			fmt.Fprintf(stdout, "%s\n", ue.msg)
		case ue != nil && ue.msg != "":
			fmt.Fprintf(stderr, "%s\n", ue.msg)
		}
		if ue == nil || !ue.quiet {
			fmt.Fprintln(stderr, " Parser function exited with Error")
		}
		return 1
	}
	if err := Run(context.Background(), v, o, stdout, stderr); err != nil {
		var se statusError
		if errors.As(err, &se) {
			return se.status
		}
		return 1
	}
	return 0
}

// statusError is a failure after which perftest exits with a status
// other than 1.
type statusError struct {
	msgError
	status int
}

// test is one run's state (perftest's pingpong_context and the parts of
// user_param that change during the run).
type test struct {
	ctx    context.Context // Run's: bounds the set-up and each wait for an event
	v      Verb
	o      Options
	stdout io.Writer
	stderr io.Writer
	client bool

	dev    *uverbs.Context
	pd     *uverbs.PD
	buf    *uverbs.Buffer
	tmBuf  *sys.Buffer // the client's timestamps (allocTiming)
	mem    []byte
	mrs    []*uverbs.MR        // one, or one per QP (--mr_per_qp; see mrOf)
	ch     *uverbs.CompChannel // -e
	sendCQ *uverbs.CQ
	recvCQ *uverbs.CQ   // send only
	srq    *uverbs.SRQ  // --use-srq, on a receiving side
	qps    []*uverbs.QP // -q
	ahs    []*uverbs.AH // UD, on a sending side: the peer's QP i
	c      *conn
	cm     *cmTest // -R

	linkEth   bool
	ctrs      *counters  // -W
	activeMTU uverbs.MTU // the port's
	mtu       uverbs.MTU
	outReads  int
	gidIndex  int
	cycle     uint64 // perftest's cycle buffer: the page size, the larger of both sides'
	cacheLine uint64
	bufSize   uint64 // the larger of size and the cycle buffer
	half      uint64 // bufSize rounded up to cache lines: a QP's share of each half
	region    uint64 // --mr_per_qp: a QP's slice of the buffer, its MR (0 without)
	my, rem   []Dest // a QP's each

	send sendLoop
	recv recvLoop

	// cpu is what --cpu_util read of /proc/stat at the start and the end
	// of the measured stretch of a -D run (zero when it did not run:
	// perftest's server of a write or read test prints 0.00).
	cpu cpuSample

	// Whether a line reached -w's bandwidth and -y's message rate.
	bwPassed, ratePassed bool
}

// Run runs one side of the test with parsed options: the client
// connecting to o.Server when o.Client, else the server. It prints what
// perftest prints on stdout and, on a failure, perftest's lines on stderr
// (the error returned carries them too, and the exit status). ctx bounds
// the TCP connection set-up.
//
// A failure is printed before the verbs objects are released: perftest
// prints its complaint and exits, leaving the teardown to the kernel, and
// a peer that fails on the same condition (a UD size above the MTU, found
// by both after the MTU exchange) exits at once; whoever then stops this
// side must find the whole complaint printed, however long destroying the
// objects takes on a loaded host.
func Run(ctx context.Context, v Verb, o Options, stdout, stderr io.Writer) error {
	if o.Tst == LAT && v == Write {
		// write_lat polls for the last byte of each message: perftest
		// turns relaxed ordering off, which could land it first.
		o.NoRelaxed = true
	}
	t := &test{v: v, o: o, stdout: stdout, stderr: stderr, client: o.Client, gidIndex: o.GIDIndex}
	t.ctx = ctx
	io.WriteString(stdout, o.notice)
	io.WriteString(stderr, o.warn)
	err := t.run(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
	}
	if t.c != nil {
		t.c.Close()
	}
	if err != nil {
		t.release()
		return err
	}
	if v == Atomic && o.Tst == LAT && !t.client {
		// atomic_lat's server returns from main as soon as the client is
		// done: no --wait_destroy pause, no rdma_cm disconnect. The
		// process's exit released the rest; here it is released quietly.
		t.release()
		return nil
	}
	if err := t.close(); err != nil {
		fmt.Fprintln(stderr, err)
		return err
	}
	if err := t.limits(); err != nil {
		fmt.Fprintln(stderr, err)
		return err
	}
	return nil
}

// limits is the -w and -y verdict at the end of a run: perftest fails
// when no line reached -w's bandwidth, or -y's message rate when -w is
// given too (it checks is_limit_bw for both). The write and read
// servers of a one-way test never check, nor does a latency test
// (perftest's *_lat.c take -w and -y and change nothing).
func (t *test) limits() error {
	o := &t.o
	if !o.HasLimitBW || o.Tst == LAT || (t.v != Send && !t.client && !o.Duplex) {
		return nil
	}
	if !t.bwPassed {
		return msgError{"Error: BW result is below bw limit"}
	}
	if !t.ratePassed {
		return msgError{"Error: Msg rate  is below msg_rate limit"}
	}
	return nil
}

func (t *test) run(ctx context.Context) error {
	if err := t.open(); err != nil {
		return err
	}
	if t.o.Counters != nil {
		// create_comm_struct opens them, before the banner.
		var err error
		if t.ctrs, err = openCounters(portDir(t.o.Dev, t.o.IBPort), *t.o.Counters); err != nil {
			return msgError{" Unable to access performance counters", "  (" + err.Error() + ")", " Unable to create RDMA_CM resources"}
		}
	}
	if !t.client && t.verbose() {
		io.WriteString(t.stdout, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	}
	var err error
	switch {
	case t.o.commCM:
		var l *cmLink
		if t.client {
			l, err = dialCM(ctx, t.o.Server, t.o.Port, t.o.retryCount)
		} else {
			l, err = acceptCM(ctx, t.o.Port, t.o.retryCount)
		}
		if err == nil {
			t.c = &conn{cm: l, client: t.client}
		}
	case t.client:
		t.c, err = dial(ctx, t.o.Server, t.o.Port)
	default:
		t.c, err = accept(ctx, t.o.Port)
	}
	if err != nil {
		return initFailed(err)
	}
	if err := t.exchangeParams(); err != nil {
		return err
	}
	if err := t.allocTiming(); err != nil {
		return err
	}
	if t.o.rdmaCM {
		// -R: the resources are made on the RDMA CM's device as the
		// connections come (create_rdma_cm_connection).
		if err := t.cmConnect(); err != nil {
			return err
		}
	} else if err := t.createResources(); err != nil {
		return err
	}
	if err := t.setUpConnection(); err != nil {
		return err
	}
	t.printTestInfo()
	if t.o.Tst == LAT && t.v != Send {
		// write_lat's and read_lat's first handshake, before the per-QP
		// ones.
		if _, err := t.c.handshake(&t.my[0], t.gidIndex != -1); err != nil {
			return err
		}
	}
	if err := t.connect(); err != nil {
		return err
	}
	if t.o.Tst == LAT && t.v == Send {
		return t.runLatSend()
	}
	if t.o.Tst == LAT && t.v.ReadsBack() {
		return t.runLatRead()
	}
	if t.o.Tst == LAT {
		return t.runLat()
	}
	if t.v == Send {
		return t.runSend()
	}
	return t.runRDMA()
}

// initFailed adds main's " Unable to init the socket connection" to a
// failed connection set-up. establish_connection prints its complaint
// without a newline, so perftest's line reads "... for socket connection
// Unable to init the socket connection"; Go's detail lines follow it.
func initFailed(err error) error {
	const tail = " Unable to init the socket connection"
	var m msgError
	if errors.As(err, &m) {
		out := append(msgError{}, m...)
		for i, l := range out {
			if l == noSocketFD {
				out[i] = l + tail
				return out
			}
		}
		return append(out, tail)
	}
	return msgError{err.Error(), tail}
}

// withLines appends lines to an error's message.
func withLines(err error, lines ...string) error {
	var m msgError
	if errors.As(err, &m) {
		return append(append(msgError{}, m...), lines...)
	}
	return append(msgError{err.Error()}, lines...)
}

// open finds and opens the device and checks the port (ctx_find_dev,
// ctx_open_device, check_link). ctx_find_dev's ibv_get_device_list
// (perftest_resources.c:1044) is the first libibverbs call of every
// perftest main (nothing of libibverbs runs in parser, -R's rdma_cm
// comes later): it prints libibverbs' RLIMIT_MEMLOCK warning, before
// " Did not detect devices" where there is none.
func (t *test) open() error {
	memlock.Warn(t.stderr)
	devs, err := uverbs.Devices()
	if err != nil || len(devs) == 0 {
		return msgError{" Did not detect devices ", " If device exists, check if driver is up", " Unable to find the Infiniband/RoCE device"}
	}
	dev := devs[0]
	if t.o.DevSet {
		found := false
		for _, d := range devs {
			if d.Name == t.o.Dev {
				dev, found = d, true
			}
		}
		if !found {
			if t.v.ReadsBack() && t.o.Tst == BW { // read_bw and atomic_bw return 7 without a word of their own
				return statusError{msgError{fmt.Sprintf("IB device %s not found", t.o.Dev)}, 7}
			}
			return msgError{fmt.Sprintf("IB device %s not found", t.o.Dev), " Unable to find the Infiniband/RoCE device"}
		}
	}
	t.o.Dev = dev.Name
	t.dev, err = uverbs.Open(dev)
	if err != nil {
		return msgError{" Couldn't get context for the device", "  (" + err.Error() + ")"}
	}
	// verify_params_with_device_context (perftest lets the vector equal
	// the count through; creating the CQ then fails).
	if t.o.Events && t.o.Vector > t.dev.NumCompVectors() {
		m := msgError{" Completion vector specified is invalid", fmt.Sprintf(" Max completion vector = %d", t.dev.NumCompVectors()-1)}
		if t.v == Atomic && t.o.Tst == BW {
			m = append(m, " Couldn't get context for the device") // atomic_bw's main adds it
		}
		return m
	}
	pa, err := t.dev.QueryPort(t.o.IBPort)
	if err != nil {
		return msgError{fmt.Sprintf(" Unable to query port %d attributes", t.o.IBPort), " Couldn't set the link layer", " Couldn't get context for the device"}
	}
	if pa.State != uverbs.PortActive {
		return msgError{fmt.Sprintf(" Port number %d state is %s", t.o.IBPort, pa.State), " Couldn't set the link layer", " Couldn't get context for the device"}
	}
	t.linkEth = pa.LinkLayer == uverbs.LinkLayerEthernet
	if t.o.dualPort {
		// set_link_layer's second port.
		const port2 = 2
		pa2, err := t.dev.QueryPort(port2)
		if err != nil {
			return msgError{fmt.Sprintf(" Unable to query port %d attributes", port2), "  (" + err.Error() + ")", " Couldn't set the link layer", " Couldn't get context for the device"}
		}
		if pa2.State != uverbs.PortActive {
			return msgError{fmt.Sprintf(" Port number %d state is %s", port2, pa2.State), " Couldn't set the link layer", " Couldn't get context for the device"}
		}
		return unsupported("-O")
	}
	if t.o.forceLink != linkUnspec {
		// set_link_layer: a forced link layer replaces the port's.
		t.linkEth = t.o.forceLink == linkEthernet
	}
	if t.linkEth && t.gidIndex == -1 {
		t.gidIndex = 0 // and set_up_connection picks the best one
	}
	t.activeMTU = pa.ActiveMTU
	if t.v.ReadsBack() {
		// ctx_set_max_inline: a read test's inline size is 0, not the
		// default, and perftest does not know rxe, so it says so.
		io.WriteString(t.stdout, resultLine)
		io.WriteString(t.stderr, "Device not recognized to implement inline feature. Disabling it\n")
	}
	t.outReads = 1
	if t.v.ReadsBack() {
		attr, err := t.dev.QueryDevice()
		if err != nil {
			return msgError{" Couldn't query the device", "  (" + err.Error() + ")"}
		}
		t.outReads = t.o.OutReads
		switch {
		case t.outReads > attr.MaxQPRdAtom:
			io.WriteString(t.stdout, resultLine)
			fmt.Fprintf(t.stderr, " Number of outstanding reads is above max = %d\n Changing to that max value\n", attr.MaxQPRdAtom)
			t.outReads = attr.MaxQPRdAtom
		case t.outReads <= 0:
			t.outReads = attr.MaxQPRdAtom
		}
	}
	if t.o.pkeyIndex > 0 {
		// ctx_chk_pkey_index: past the device's table, index 0.
		attr, err := t.dev.QueryDevice()
		switch {
		case err != nil:
			io.WriteString(t.stderr, " Unable to validata PKey Index, changing to 0\n")
			t.o.pkeyIndex = 0
		case t.o.pkeyIndex > attr.MaxPKeys-1:
			io.WriteString(t.stdout, resultLine)
			fmt.Fprintf(t.stderr, " Specified PKey Index, %d, greater than allowed max, %d\n Changing to 0\n", t.o.pkeyIndex, attr.MaxPKeys-1)
			t.o.pkeyIndex = 0
		}
	}
	return nil
}

// mtuFromBytes is set_mtu's switch: 256 .. 4096 bytes, or 0.
func mtuFromBytes(n int) uverbs.MTU {
	switch n {
	case 256:
		return 1
	case 512:
		return 2
	case 1024:
		return 3
	case 2048:
		return 4
	case 4096:
		return 5
	}
	return 0
}

// exchangeParams runs the exchanges before the resources exist:
// versions, page and cache line sizes, MTU (exchange_versions,
// check_version_compatibility, check_sys_data, check_mtu).
func (t *test) exchangeParams() error {
	if t.o.noVersions {
		// exchange_versions skipped, check_version_compatibility reads
		// the never-written peer version as 0.
		return msgError{"Current implementation is not compatible with versions older than 5.70"}
	}
	remVersion, rv, err := t.c.versions()
	if err != nil {
		return err
	}
	if rv < 5.70 {
		return msgError{fmt.Sprintf("Current implementation is not compatible with versions older than 5.70 (the peer is %q)", remVersion)}
	}
	page := uint64(os.Getpagesize())
	line := cacheLineSize()
	rp, err := t.c.xchgInt32(int32(page))
	if err != nil {
		return err
	}
	rl, err := t.c.xchgInt32(int32(line))
	if err != nil {
		return err
	}
	t.cycle = max(page, uint64(max(rp, 0)))
	t.cacheLine = max(line, uint64(max(rl, 0)))
	// perftest takes the larger of each pair as it comes; a peer whose
	// cache line exceeds its page (or a page past 1 GiB) would make the
	// message stride outgrow the cycle buffer, which perftest dies of
	// (SIGFPE) and this port refuses.
	if t.cacheLine > t.cycle || t.cycle > 1<<30 || t.cycle&(t.cycle-1) != 0 || t.cacheLine&(t.cacheLine-1) != 0 {
		return msgError{fmt.Sprintf("Unusable system parameters from the peer: page size %d, cache line %d", rp, rl)}
	}
	// check_mtu: set_mtu (and its complaints) comes after the version
	// and system exchanges, right before the MTU exchange.
	t.mtu = t.activeMTU
	if t.o.MTU != 0 {
		if m := mtuFromBytes(t.o.MTU); m == 0 {
			fmt.Fprintf(t.stderr, " Invalid MTU - %d \n Please choose mtu from {256,512,1024,2048,4096}\n Will run with the port active mtu - %d\n", t.o.MTU, t.activeMTU)
		} else if m > t.activeMTU {
			fmt.Fprintf(t.stdout, "Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", t.activeMTU)
		} else {
			t.mtu = m
		}
	}
	rm, err := t.c.xchgMTU(t.mtu)
	if err != nil {
		return err
	}
	if rm >= 1 && rm <= 5 && uverbs.MTU(rm) < t.mtu {
		t.mtu = uverbs.MTU(rm)
	}
	// A UD message fits in one packet.
	if mtu := uint64(t.mtu.Bytes()); t.o.Conn == UD && t.o.Size > mtu {
		if !t.o.All && t.o.reqSize {
			fmt.Fprintf(t.stderr, " Max message size in UD cannot be greater than MTU \n")
			return msgError{" Couldn't get context for the device"}
		}
		fmt.Fprintf(t.stderr, " Max msg size in UD is MTU %d\n Changing to this MTU\n", mtu)
		t.o.Size = mtu
	}
	return nil
}

// cacheLineSize is get_cache_line_size: the L1 data cache line, 64 if
// unknown.
func cacheLineSize() uint64 {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			return uint64(n)
		}
	}
	return defCacheLine
}

// hugeFailure is what perftest prints when --use_hugepages finds no
// huge pages (alloc_hugepage_region and its callers in ctx_init).
var hugeFailure = [...]string{"Failed to allocate hugepages. Please configure hugepages", "Failed to allocate hugepage region.",
	"failed to create mr", "Failed to create MR", " Couldn't create IB resources"}

// odpMissing is perftest 4.5-0.17's check_odp_support (Debian 12's
// perftest): what it says when a device with attributes a cannot page
// RC sends and receives on demand, "" when it can. (Later perftests
// check the general capability, then the transport's and this side's
// operations.)
func odpMissing(a *uverbs.DeviceAttr) string {
	switch {
	case a.ODPRCCaps&uverbs.ODPSend == 0:
		return " Send is not supported for RC transport."
	case a.ODPRCCaps&uverbs.ODPRecv == 0:
		return " Receive is not supported for RC transport."
	}
	return ""
}

// mapFile maps n bytes of --mmap's file from --mmap-offset as the
// buffer (pp_init_mmap), with perftest's lines on stdout, and on a
// failure its chain of complaints.
func (t *test) mapFile(n int) error {
	name := t.o.MmapFile
	fail := func(line string, err error) error {
		fmt.Fprintln(t.stdout, line)
		return msgError{"Couldn't allocate work buf.", "  (" + err.Error() + ")", "failed to create mr", "Failed to create MR", " Couldn't create IB resources"}
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fail(fmt.Sprintf("Unable to open '%s': %s", name, strerror(err)), err)
	}
	defer f.Close()
	if t.buf, err = uverbs.MapFileBuffer(f, int64(t.o.MmapOffset), n); err != nil {
		return fail(fmt.Sprintf("Unable to mmap '%s': %s", name, strerror(err)), err)
	}
	fmt.Fprintf(t.stdout, "allocated mmap buffer of size %d at %#x\n", n, sys.SliceAddr(t.buf.Bytes()))
	return nil
}

// strerror is C's strerror of the errno behind err ("No such file or
// directory"); an argument the library refused is EINVAL's.
func strerror(err error) string {
	var en sys.Errno
	switch {
	case errors.As(err, &en):
		return sys.Strerror(en)
	case errors.Is(err, uverbs.ErrInvalid):
		return "Invalid argument"
	}
	return err.Error()
}

// createResources is alloc_ctx and ctx_init for -q RC QPs: a buffer of
// two halves, each with a slice per QP (the local messages, and the area
// the peer writes to, reads from or receives into), PD, MR, CQs shared
// by the QPs, the QPs in INIT.
func (t *test) createResources() error {
	o := &t.o
	nqp := uint64(o.QPs)
	t.bufSize = max(o.Size, t.cycle)
	t.half = inc(t.bufSize, t.cacheLine)
	n := t.half * 2 * nqp
	if o.Conn == UD {
		// A UD receive starts a GRH before a cache line (recvArea), so
		// the last one's may end a cache line past the last area.
		n += t.cacheLine
	}
	if o.MRPerQP {
		// Each QP's slice is what perftest allocates per QP: both halves
		// of one QP's share (and the UD receive's cache line).
		t.region = t.half * 2
		if o.Conn == UD {
			t.region += t.cacheLine
		}
		n = t.region * nqp
	}
	if o.ODP {
		a, err := t.dev.QueryDevice()
		msg := " Couldn't query device for on-demand paging capabilities."
		if err == nil {
			msg = odpMissing(a)
		}
		if msg != "" {
			return msgError{msg, "failed to create mr", "Failed to create MR", " Couldn't create IB resources"}
		}
	}
	var err error
	switch {
	case o.MmapFile != "":
		if err := t.mapFile(int(n)); err != nil {
			return err
		}
	case o.HugePages:
		if t.buf, err = uverbs.AllocHugeBuffer(int(n)); err != nil {
			return msgError{hugeFailure[0], "  (" + err.Error() + ")", hugeFailure[1], hugeFailure[2], hugeFailure[3], hugeFailure[4]}
		}
	default:
		if t.buf, err = uverbs.AllocBuffer(int(n)); err != nil {
			return msgError{"Couldn't allocate work buf.", "  (" + err.Error() + ")"}
		}
	}
	t.mem = t.buf.Bytes()
	// perftest fills the buffer with rand(), a file's (--mmap) too; any
	// bytes do. write_lat's stays zero: each side polls its last byte
	// for the peer's count.
	if !(t.v == Write && o.Tst == LAT) {
		for i := range t.mem {
			t.mem[i] = byte(i*7 + 1)
		}
	}
	if o.Events {
		// perftest 6.06: one channel for both CQs.
		if t.ch, err = t.dev.CreateCompChannel(); err != nil {
			return msgError{"Couldn't create completion channel", "  (" + err.Error() + ")"}
		}
		// PUREVERBS_WAIT=thread: the ping-pong tools' opt-in.
		if err = t.ch.SetWaitMode(pingpong.WaitModeFromEnv()); err != nil {
			return msgError{"Couldn't create completion channel", "  (" + err.Error() + ")"}
		}
	}
	t.pd, err = t.dev.AllocPD()
	if err != nil {
		return msgError{"Couldn't allocate PD", "  (" + err.Error() + ")"}
	}
	access := uverbs.AccessLocalWrite
	switch t.v {
	case Write:
		access |= uverbs.AccessRemoteWrite
	case Read:
		access |= uverbs.AccessRemoteRead
	case Atomic:
		access |= uverbs.AccessRemoteAtomic
	}
	if !o.NoRelaxed {
		access |= uverbs.AccessRelaxedOrdering
	}
	if o.ODP {
		access |= uverbs.AccessOnDemand
	}
	regions := [][]byte{t.mem}
	if t.region > 0 {
		regions = regions[:0]
		for i := range uint64(o.QPs) {
			regions = append(regions, t.mem[i*t.region:(i+1)*t.region])
		}
	}
	for _, r := range regions {
		mr, err := t.pd.RegMR(r, access)
		if err != nil {
			return msgError{"Couldn't allocate MR", "  (" + err.Error() + ")"}
		}
		t.mrs = append(t.mrs, mr)
	}
	cqOpts := &uverbs.CQOptions{CompVector: o.Vector, Channel: t.ch}
	t.sendCQ, err = t.dev.CreateCQ(o.TxDepth*o.QPs, cqOpts)
	if err != nil {
		return msgError{"Couldn't create CQ", "  (" + err.Error() + ")"}
	}
	t.recvCQ = t.sendCQ
	if t.v == Send {
		t.recvCQ, err = t.dev.CreateCQ(o.RxDepth*o.QPs, cqOpts)
		if err != nil {
			return msgError{"Couldn't create a receiver CQ", "  (" + err.Error() + ")"}
		}
	}
	// perftest's srq_exists: the receiving sides of a bandwidth test, and
	// both sides of a latency test (both receive).
	if o.SRQ && (!t.client || o.Duplex || o.Tst == LAT) {
		if t.srq, err = t.pd.CreateSRQ(uverbs.SRQAttr{MaxWR: o.RxDepth, MaxSGE: 1}); err != nil {
			return msgError{"Couldn't create SRQ", "  (" + err.Error() + ")"}
		}
	}
	if o.rdmaCM {
		return nil // each QP comes with its connection (cmQP)
	}
	for i := 0; i < o.QPs; i++ {
		if err := t.createQP(i); err != nil {
			return err
		}
	}
	return nil
}

// createQP creates QP i and moves it to INIT (create_qp_main,
// modify_qp_to_init).
func (t *test) createQP(i int) error {
	o := &t.o
	qp, err := t.pd.CreateQP(t.qpInitAttr())
	if err != nil {
		return msgError{fmt.Sprintf("Couldn't create QP %d", i), "  (" + err.Error() + ")"}
	}
	t.qps = append(t.qps, qp)
	t.checkInline(qp)
	attr := uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: uint8(o.IBPort), PKeyIndex: uint16(o.pkeyIndex)}
	mask := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort
	switch {
	case o.Conn == UD:
		attr.QKey = udQKey
		mask |= uverbs.QPAttrQKey
	case t.v == Read:
		attr.AccessFlags = uverbs.AccessRemoteRead
	case t.v == Atomic:
		attr.AccessFlags = uverbs.AccessRemoteAtomic
	case t.v == Write:
		attr.AccessFlags = uverbs.AccessRemoteWrite
	default:
		attr.AccessFlags = uverbs.AccessRemoteWrite | uverbs.AccessLocalWrite
	}
	if o.Conn != UD {
		mask |= uverbs.QPAttrAccessFlags
	}
	if err := qp.Modify(&attr, mask); err != nil {
		return msgError{"Failed to modify QP to INIT", "  (" + err.Error() + ")", " Couldn't create IB resources"}
	}
	return nil
}

// qpInitAttr is create_qp_main's QP: the test's type, CQs, SRQ, depths
// and inline size.
func (t *test) qpInitAttr() uverbs.QPInitAttr {
	o := &t.o
	typ := map[Conn]uverbs.QPType{RC: uverbs.QPTypeRC, UC: uverbs.QPTypeUC, UD: uverbs.QPTypeUD}[o.Conn]
	return uverbs.QPInitAttr{Type: typ, SendCQ: t.sendCQ, RecvCQ: t.recvCQ, SRQ: t.srq,
		Cap: uverbs.QPCap{MaxSendWR: o.TxDepth, MaxSendSGE: 1, MaxRecvWR: o.RxDepth, MaxRecvSGE: 1, MaxInlineData: o.Inline}}
}

// checkInline lowers the inline size to what a new QP took, with
// perftest's line.
func (t *test) checkInline(qp *uverbs.QP) {
	if got := qp.Cap().MaxInlineData; t.o.Inline > got {
		fmt.Fprintf(t.stdout, "  Actual inline-size(%d) > requested inline-size(%d)\n", got, t.o.Inline)
		t.o.Inline = got
	}
}

// setUpConnection fills in this side's address for each QP
// (set_up_connection): the GID (the best one of the port unless -x chose
// it), QPN, a random PSN, the rkey and the address of the QP's slice of
// the buffer's second half.
func (t *test) setUpConnection() error {
	var gid uverbs.GID
	if t.gidIndex != -1 {
		if t.o.GIDIndex == -1 {
			t.gidIndex = t.bestGIDIndex()
		}
		// ibv_query_gid: an empty entry is the zero GID, as in C.
		var err error
		gid, err = t.dev.GID(t.o.IBPort, t.gidIndex)
		if err != nil {
			return msgError{" Unable to set up socket connection", "  (" + err.Error() + ")"}
		}
	}
	pa, err := t.dev.QueryPort(t.o.IBPort)
	if err != nil {
		return msgError{" Unable to set up socket connection", "  (" + err.Error() + ")"}
	}
	n := len(t.qps)
	t.my, t.rem = make([]Dest, n), make([]Dest, n)
	t.c.gidIndex = t.gidIndex
	for i, qp := range t.qps {
		t.my[i] = Dest{LID: pa.LID, QPN: qp.QPN(), PSN: rand.Uint32() & 0xffffff, RKey: t.mrOf(i).RKey(),
			OutReads: t.outReads, VAddr: t.remoteArea(i), GID: gid}
	}
	return nil
}

// mrOf is QP i's MR: its own with --mr_per_qp, else the one.
func (t *test) mrOf(i int) *uverbs.MR {
	if t.region > 0 {
		return t.mrs[i]
	}
	return t.mrs[0]
}

// base is the address of the buffer's first byte (t.mem[0]).
func (t *test) base() uint64 { return t.mrs[0].Addr() }

// localSlice is where QP i's messages start (ctx->buf[i]), remoteArea
// the area the peer's QP i writes to or reads from (its dest's vaddr),
// and recvArea the one QP i receives into: slices of bufSize in the
// first half, of bufSize and of half in the second, as in perftest.
// With --mr_per_qp each QP's MR holds its own: the messages and the
// receives at its start, the peer's area bufSize after it.
func (t *test) localSlice(i int) uint64 {
	if t.region > 0 {
		return t.mrOf(i).Addr()
	}
	return t.base() + uint64(i)*t.bufSize
}

func (t *test) remoteArea(i int) uint64 {
	if t.region > 0 {
		return t.mrOf(i).Addr() + t.bufSize
	}
	return t.base() + uint64(len(t.qps)+i)*t.bufSize
}

func (t *test) recvArea(i int) uint64 {
	a := t.base() + uint64(len(t.qps)+i)*t.half
	if t.region > 0 {
		a = t.mrOf(i).Addr()
	}
	if t.o.Conn == UD {
		// The GRH before the message, the message on a cache line.
		a += t.cacheLine - grh
	}
	return a
}

// bestGIDIndex is get_best_gid_index: prefer an IPv4-mapped GID (an
// IPv6 one with --ipv6), then RoCE v2 over v1.
func (t *test) bestGIDIndex() int {
	tbl, err := t.dev.QueryGIDTable()
	if err != nil {
		return 0
	}
	pa, err := t.dev.QueryPort(t.o.IBPort)
	if err != nil {
		return 0
	}
	port := map[int]uverbs.GIDEntry{}
	for _, e := range tbl {
		if e.Port == t.o.IBPort {
			port[e.Index] = e
		}
	}
	return bestGID(pa.GIDTblLen, port, t.o.ipv6)
}

// bestGID is get_best_gid_index's walk over a port's n GID slots (the
// valid ones in entries), exactly as perftest walks them: each slot
// against the best so far, first by address family, else by RoCE
// version. An empty slot reads as the zero GID, not IPv4-mapped, whose
// type cannot be read.
func bestGID(n int, entries map[int]uverbs.GIDEntry, ipv6 bool) int {
	rate := func(t uverbs.GIDType) int {
		switch t {
		case uverbs.GIDTypeRoCEv1:
			return 1
		case uverbs.GIDTypeRoCEv2:
			return 2
		}
		return -1
	}
	best := 0
	for i := 1; i < n; i++ {
		cur, curOK := entries[best]
		riv, rivOK := entries[i]
		v4, rivV4 := curOK && isV4Mapped(cur.GID), rivOK && isV4Mapped(riv.GID)
		switch {
		case rivV4 && !v4 && !ipv6:
			best = i
		case !rivV4 && v4 && ipv6:
			best = i
		case curOK && rivOK && rate(cur.Type) < rate(riv.Type):
			best = i
		}
	}
	return best
}

func isV4Mapped(g uverbs.GID) bool {
	for _, b := range g[:10] {
		if b != 0 {
			return false
		}
	}
	return g[10] == 0xff && g[11] == 0xff
}

// printTestInfo is ctx_print_test_info.
func (t *test) printTestInfo() {
	if !t.verbose() {
		return
	}
	w := t.stdout
	o := &t.o
	io.WriteString(w, resultLine)
	kind := ""
	if o.Duplex {
		kind = "Bidirectional "
	}
	if o.PostList > 1 {
		kind += "Post List "
	}
	kind += "BW "
	if o.Tst == LAT {
		kind = "Latency "
	}
	if t.v == Atomic {
		kind = o.AtomicOp.String() + " " + kind
	}
	fmt.Fprintf(w, "                    %s %sTest\n", t.v, kind)
	if o.Events {
		fmt.Fprintf(w, " Test with events. Using %s_comp%d\n", o.Dev, o.Vector)
	}
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", o.Dev)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", o.QPs)
	srq := "OFF"
	if o.SRQ {
		srq = "ON"
	}
	fmt.Fprintf(w, " Connection type : %s\t\tUsing SRQ      : %s\n", o.Conn, srq)
	if o.NoRelaxed {
		fmt.Fprintf(w, " PCIe relax order: OFF\n")
	} else {
		fmt.Fprintf(w, " PCIe relax order: ON\n")
		if !roCompliant(pciDevices) {
			fmt.Fprintf(w, " WARNING: CPU is not PCIe relaxed ordering compliant.\n")
			fmt.Fprintf(w, " WARNING: You should disable PCIe RO with `--disable_pcie_relaxed` for both server and client.\n")
		}
	}
	fmt.Fprintf(w, " ibv_wr* API     : OFF\n")
	for _, f := range t.infoFields() {
		fmt.Fprintf(w, f.text+"\n", f.val)
	}
	fmt.Fprintf(w, " rdma_cm QPs\t : %s\n", onOff(o.rdmaCM))
	fmt.Fprintf(w, " Data ex. method : %s", exchangeMethod(o.commCM))
	if o.rdmaCM && o.tos != defTOS {
		fmt.Fprintf(w, " \tTOS    : %d", o.tos)
	}
	if o.rdmaCM && !t.client {
		// Printed once the QPs are connected, as perftest does.
		io.WriteString(w, "\n"+resultLine+" Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP")
	}
	io.WriteString(w, "\n"+resultLine)
}

// infoField is one line of the test's description that depends on the
// run: as ctx_print_test_info prints it (text) and as --out_json writes
// it (json), each a format of val.
type infoField struct {
	text, json string
	val        any
}

// infoFields are the description's lines from the TX depth to the
// inline size (or outstanding reads), those the run has.
func (t *test) infoFields() []infoField {
	o := &t.o
	var fs []infoField
	add := func(show bool, text, json string, val any) {
		if show {
			fs = append(fs, infoField{text, json, val})
		}
	}
	add(t.client || o.Duplex, " TX depth        : %d", "TX_depth : %d", o.TxDepth)
	add(o.PostList > 1, " Post List       : %d", "Post_List: %d", o.PostList)
	add(o.RecvPostList > 1, " Recv Post List  : %d", "Recv_Post_List: %d", o.RecvPostList)
	add(t.v == Send && (!t.client || o.Duplex), " RX depth        : %d", "RX_depth: %d", o.RxDepth)
	add(o.Tst == BW, " CQ Moderation   : %d", "CQ_Moderation: %d", o.CQMod)
	add(true, " Mtu             : %d[B]", "Mtu: %d", t.mtu.Bytes())
	link := "IB"
	if t.linkEth {
		link = "Ethernet"
	}
	add(true, " Link type       : %s", "Link_type: %s", link)
	add(t.gidIndex != -1, " GID index       : %d", "GID_index: %d", t.gidIndex)
	add(!t.v.ReadsBack(), " Max inline data : %d[B]", "Max_inline_data: %d", o.Inline)
	add(t.v.ReadsBack(), " Outstand reads  : %d", "Outstand_reads: %d", t.outReads)
	return fs
}

// remLID is the LID the address vector to rem names: --dlid's when
// given (ctx_modify_qp_to_rtr), else the peer's. A RoCE device ignores
// it.
func (t *test) remLID(rem *Dest) uint16 {
	if t.o.dlid != 0 {
		return t.o.dlid
	}
	return rem.LID
}

// printDest is ctx_print_pingpong_data.
func (t *test) printDest(side string, d *Dest) {
	if !t.verbose() {
		return
	}
	lid := d.LID
	if side == "remote" && t.o.dlid != 0 {
		lid = t.o.dlid // --dlid, on the remote side only
	}
	var b strings.Builder
	fmt.Fprintf(&b, " %s address: LID %s QPN %s PSN %s", side, altHex(uint64(lid), 4), altHex(uint64(d.QPN), 6), altHex(uint64(d.PSN), 6))
	// perftest prints by the data exchange's verb: the test's, but SEND
	// for the rdma_cm method's own QP (create_comm_struct), so that
	// -z and -R print no reads, rkey or address.
	if t.v == Read && !t.o.commCM {
		fmt.Fprintf(&b, " OUT %s", altHex(uint64(d.OutReads), 4))
	}
	// ATOMIC (3) falls in the default case of that switch: neither.
	if (t.v == Write || t.v == Read) && !t.o.commCM {
		fmt.Fprintf(&b, " RKey %s VAddr %s", altHex(uint64(d.RKey), 8), altHex(d.VAddr, 16))
	}
	b.WriteByte('\n')
	if t.gidIndex > -1 {
		b.WriteString(" GID: ")
		for i, x := range d.GID {
			if i > 0 {
				b.WriteByte(':')
			}
			fmt.Fprintf(&b, "%02d", x)
		}
		b.WriteByte('\n')
	}
	io.WriteString(t.stdout, b.String())
}

// altHex is C's "%#0<width>x": zero-padded to width characters including
// the 0x prefix, which a zero value does not get.
func altHex(v uint64, width int) string {
	if v == 0 {
		return fmt.Sprintf("%0*x", width, 0)
	}
	s := strconv.FormatUint(v, 16)
	if pad := width - 2 - len(s); pad > 0 {
		s = strings.Repeat("0", pad) + s
	}
	return "0x" + s
}

// connect runs the handshakes around moving the QPs to RTR (and, on a
// sending side, RTS), and prints the addresses, in the order of
// write_bw.c/read_bw.c or send_bw.c: one exchange per QP, the QPs
// connected, every local address, then one exchange per QP, each
// followed by the remote address it brought.
func (t *test) connect() error {
	withGID := t.gidIndex != -1
	for i := range t.my {
		rem, err := t.c.handshake(&t.my[i], withGID)
		if err != nil {
			return err
		}
		t.rem[i] = rem
	}
	if !t.o.rdmaCM && isV4Mapped(t.my[0].GID) != isV4Mapped(t.rem[0].GID) {
		return msgError{"\n Found Incompatibility issue with GID types.", " Please Try to use a different IP version.\n"}
	}
	for i := range t.qps {
		if t.o.rdmaCM {
			break // connected by the RDMA CM
		}
		if err := t.modifyRTR(i); err != nil {
			return err
		}
		if err := t.checkHWRate(i); err != nil {
			return err
		}
	}
	if t.v == Send {
		if _, err := t.c.handshake(&t.my[0], withGID); err != nil {
			return err
		}
	}
	for i := range t.my {
		t.printDest("local", &t.my[i])
	}
	for i := range t.my {
		if _, err := t.c.handshake(&t.my[i], withGID); err != nil {
			return err
		}
		t.printDest("remote", &t.rem[i])
	}
	if t.v != Send {
		// "An additional handshake is required after moving qp to RTR."
		if _, err := t.c.handshake(&t.my[0], withGID); err != nil {
			return err
		}
	}
	return nil
}

// modifyRTR is ctx_connect for QP i: RTR towards the peer's QP i, and
// RTS on the client and on both sides of -b (the server of a one-way
// test only receives). A UD QP is not connected: it goes to RTR and RTS
// alone, and the sending sides make an address handle for the peer's
// QP i instead.
func (t *test) modifyRTR(i int) error {
	o := &t.o
	qp, my, rem := t.qps[i], &t.my[i], &t.rem[i]
	if o.Conn == UD {
		return t.readyUD(i)
	}
	attr := uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: t.mtu, DestQPN: rem.QPN, RQPSN: rem.PSN,
		MaxDestRdAtomic: uint8(my.OutReads), MinRNRTimer: 12}
	attr.AH = uverbs.AHAttr{DLID: t.remLID(rem), SL: uint8(o.SL), PortNum: uint8(o.IBPort)}
	if o.rateType == rateHW {
		attr.AH.StaticRate = uverbs.Rate(o.hwRate)
	}
	if t.gidIndex != -1 {
		attr.AH.IsGlobal = true
		attr.AH.DGID = rem.GID
		attr.AH.SGIDIndex = uint8(t.gidIndex)
		attr.AH.HopLimit = 0xff
		attr.AH.TrafficClass = o.tclass
	}
	mask := uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
	if o.Conn == RC {
		mask |= uverbs.QPAttrMinRNRTimer | uverbs.QPAttrMaxDestRdAtomic
	}
	if err := qp.Modify(&attr, mask); err != nil {
		return msgError{fmt.Sprintf("Failed to modify QP %d to RTR", qp.QPN()), "  (" + err.Error() + ")", " Unable to Connect the HCA's through the link"}
	}
	if !t.client && !o.Duplex && o.Tst != LAT {
		return nil
	}
	attr.State = uverbs.QPStateRTS
	attr.SQPSN = my.PSN
	mask = uverbs.QPAttrState | uverbs.QPAttrSQPSN
	if o.Conn == RC {
		attr.Timeout, attr.RetryCnt, attr.RNRRetry = uint8(o.QPTimeout), 7, 7
		attr.MaxRdAtomic = uint8(rem.OutReads)
		mask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
	}
	if err := qp.Modify(&attr, mask); err != nil {
		return msgError{"Failed to modify QP to RTS", "  (" + err.Error() + ")", " Unable to Connect the HCA's through the link"}
	}
	return nil
}

// checkHWRate is ctx_connect's check of a HW rate limit on QP i, once
// it is connected: the QP must report the static rate asked for on an
// InfiniBand link. Otherwise perftest falls back to its SW limiter,
// unless --rate_limit_type chose HW, which then ends the run. (On rxe,
// a RoCE device, it never holds.)
func (t *test) checkHWRate(i int) error {
	o := &t.o
	if o.rateType != rateHW {
		return nil
	}
	attr, _, err := t.qps[i].Query(uverbs.QPAttrAV)
	if err != nil {
		fmt.Fprintln(t.stderr, "ibv_query_qp failed to get ah_attr")
	}
	if err == nil && int(attr.AH.StaticRate) == o.hwRate && !t.linkEth {
		return nil
	}
	if o.rateTypeGiven {
		return msgError{"\x1b[31mThe QP failed to accept HW rate limit  \x1b[0m", " Unable to Connect the HCA's through the link"}
	}
	o.rateType = rateSW
	fmt.Fprint(t.stderr, "\x1b[31mThe QP failed to accept HW rate limit, providing SW rate limit \x1b[0m\n")
	return nil
}

// udPeer is the QP number and Q_Key a UD message of QP i goes to: the
// peer's QP i and DEF_QKEY, or with -R the QP and Q_Key the RDMA CM
// exchange named (perftest's cma_master nodes' remote_qpn and
// remote_qkey).
func (t *test) udPeer(i int) (qpn, qkey uint32) {
	if t.cm != nil {
		return t.cm.remQPN[i], t.cm.remQKey[i]
	}
	return t.rem[i].QPN, udQKey
}

// udQKey is perftest's DEF_QKEY, the Q_Key of its UD QPs.
const udQKey = 0x11111111

// readyUD moves UD QP i to RTR and, on a sending side, to RTS, and makes
// the address handle of the peer's QP i (ctx_connect for UD).
func (t *test) readyUD(i int) error {
	o := &t.o
	qp := t.qps[i]
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState); err != nil {
		return msgError{fmt.Sprintf("Failed to modify QP %d to RTR", qp.QPN()), "  (" + err.Error() + ")", " Unable to Connect the HCA's through the link"}
	}
	if !t.client && !o.Duplex && o.Tst != LAT {
		return nil
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: t.my[i].PSN}, uverbs.QPAttrState|uverbs.QPAttrSQPSN); err != nil {
		return msgError{"Failed to modify QP to RTS", "  (" + err.Error() + ")", " Unable to Connect the HCA's through the link"}
	}
	ah := uverbs.AHAttr{DLID: t.remLID(&t.rem[i]), SL: uint8(o.SL), PortNum: uint8(o.IBPort)}
	if t.gidIndex != -1 {
		ah.IsGlobal = true
		ah.DGID = t.rem[i].GID
		ah.SGIDIndex = uint8(t.gidIndex)
		ah.HopLimit = 0xff
		ah.TrafficClass = o.tclass
	}
	a, err := t.pd.CreateAH(ah)
	if err != nil {
		return msgError{"Failed to create AH", "  (" + err.Error() + ")", " Unable to Connect the HCA's through the link"}
	}
	t.ahs = append(t.ahs, a)
	return nil
}

// grh is perftest's UD_ADDITION: the 40-byte GRH in front of each UD
// receive.
const grh = 40

// sizes returns the message sizes of the run: -s, or with -a 2 .. 2^23
// (ib_send_bw: up to 2^23 as well for RC and UC, up to the MTU for UD).
func (t *test) sizes() []uint64 {
	if !t.o.All {
		return []uint64{t.o.Size}
	}
	var s []uint64
	for i := 1; i < 24; i++ {
		if t.o.Conn == UD && 1<<i > t.mtu.Bytes() {
			break
		}
		s = append(s, 1<<i)
	}
	return s
}

// allocTiming is alloc_ctx's arrays of timestamps for the peak (tposted,
// tcompleted), on the sides that post, before any resource is made: a
// bandwidth run keeps -n times -q of each (-n at most 20000; above, no
// peak), which -q can make more than the machine has. They are mapped
// outside the heap, so that such a run fails as malloc does (" Cannot
// Allocate") instead of the runtime's fatal out of memory.
func (t *test) allocTiming() error {
	o := &t.o
	if o.Tst != BW || o.NoPeak || !(t.client || o.Duplex) {
		return nil
	}
	n := o.Iters * uint64(o.QPs)
	b, err := sys.AllocBuffer(int(16*n), "bw timestamps")
	if err != nil {
		return msgError{" Cannot Allocate", "Couldn't allocate context"}
	}
	t.tmBuf = b
	return nil
}

// timing is the run's timestamps: allocTiming's, else (no peak, or a
// test's loop) newTiming's.
func (t *test) timing() timing {
	if t.tmBuf == nil {
		return newTiming(t.o.Iters*uint64(t.o.QPs), t.o.NoPeak)
	}
	a := t.tmBuf.Int64s()
	n := len(a) / 2
	return timing{posted: a[:n:n], completed: a[n:]}
}

// freeTiming unmaps allocTiming's timestamps.
func (t *test) freeTiming() {
	if t.tmBuf != nil {
		t.tmBuf.Free()
		t.tmBuf = nil
	}
}

// newTiming allocates the timestamps of a run of iters messages.
func newTiming(iters uint64, noPeak bool) timing {
	n := iters
	if noPeak {
		n = 1
	}
	return timing{posted: make([]int64, n), completed: make([]int64, n)}
}

// runRDMA is the rest of ib_write_bw and ib_read_bw: the client posts and
// prints a line per size; the server waits, then prints the client's
// last line, which the report exchange brings. With -b both sides post,
// start each size together and print the sum of both sides' lines.
func (t *test) runRDMA() error {
	withGID := t.gidIndex != -1
	t.writeHeader()
	var my Report
	if !t.client && !t.o.Duplex {
		if _, err := t.c.handshake(&t.my[0], withGID); err != nil {
			return err
		}
		rem, err := t.c.xchgReport(&my)
		if err != nil {
			return err
		}
		t.writeReport(rem)
		if err := t.closeConn(); err != nil {
			return err
		}
		t.rule()
		return nil
	}
	t.initSend()
	if t.ch != nil {
		w, err := t.armEvents(t.sendCQ)
		if err != nil {
			return err
		}
		t.send.events = w
	}
	if t.o.Infinite {
		t.send.dur = newForever()
		t.send.setup(t.o.Size)
		msg := " Error occurred while running infinitely! aborting ..."
		if t.v == Read {
			msg = " Error occurred while running! aborting ..." // read_bw's
		}
		return t.forever(t.o.Size, t.send.dur, &t.send.progress, t.watched(&t.send.y, t.send.events, t.send.run), msg)
	}
	if t.o.Duration > 0 {
		t.send.dur = t.clock()
	}
	for _, size := range t.sizes() {
		t.send.setup(size)
		if t.o.WarmUp && t.v != Send { // write_bw.c, read_bw.c and atomic_bw.c; not send_bw.c
			if err := t.send.warmUp(); err != nil {
				return withLines(err, "Problems with warm up")
			}
		}
		if t.o.Duplex {
			if err := t.sync(); err != nil {
				return err
			}
		}
		if err := t.watched(&t.send.y, t.send.events, t.send.run)(); err != nil {
			switch {
			case t.v == Atomic:
				return withLines(err, " Error occurred in run_iter function")
			case t.v == Read && t.o.All:
				// read_bw's -a loop sets its status to 17 and says
				// nothing more; its other loop (and write_bw's two)
				// print the line below and exit with 1.
				return failed17(err)
			}
			return withLines(err, " Failed to complete run_iter_bw function successfully")
		}
		if t.o.Duplex && t.o.All {
			if err := t.sync(); err != nil {
				return err
			}
		}
		my = computeReport(size, t.iters(t.send.sampled), &t.send.tm, t.o.CQMod, t.o.PostList, t.o.NoPeak, t.o.Gbits)
		if !t.o.Duplex {
			t.writeReport(my)
		} else if err := t.reportBoth(my); err != nil {
			return err
		}
	}
	t.rule()
	if !t.o.Duplex {
		// The waiting server's last handshake, and the line it prints.
		if _, err := t.c.handshake(&t.my[0], withGID); err != nil {
			return err
		}
		if _, err := t.c.xchgReport(&my); err != nil {
			return err
		}
	}
	return t.closeConn()
}

// verbose tells whether the tool prints everything (not --output).
func (t *test) verbose() bool { return t.o.Output == OutputFull }

// writeHeader prints the table's rule and headings, unless --output.
func (t *test) writeHeader() {
	if t.verbose() {
		writeHeader(t.stdout, t.o.Gbits, t.o.cpuUtil)
	}
}

// clock returns the clock of a -D run, which takes --cpu_util's
// samples.
func (t *test) clock() *duration {
	d := newDuration(time.Duration(t.o.Duration)*time.Second, time.Duration(t.o.Margin)*time.Second)
	d.cpu = t.cpuSample()
	return d
}

// cpuSample is t.cpu with --cpu_util in effect, else nil.
func (t *test) cpuSample() *cpuSample {
	if t.o.cpuUtil {
		return &t.cpu
	}
	return nil
}

// rule prints the table's closing rule, unless --output.
func (t *test) rule() {
	if t.verbose() {
		io.WriteString(t.stdout, resultLine)
	}
}

// writeReport prints a result line, or with --output its average
// bandwidth or message rate alone (print_full_bw_report's "%lf"), and
// notes whether it reaches the -w and -y limits.
func (t *test) writeReport(r Report) {
	t.bwPassed = t.bwPassed || !t.o.HasLimitBW || r.Avg >= t.o.LimitBW
	t.ratePassed = t.ratePassed || !t.o.HasLimitRate || r.MsgRate >= t.o.LimitMsgRate
	t.writeLine(r)
}

// writeLine is writeReport without the limits (--report-both's lines).
func (t *test) writeLine(r Report) {
	t.writeJSON(t.jsonBW(r))
	switch t.o.Output {
	case OutputBW:
		fmt.Fprintf(t.stdout, "%f\n", r.Avg)
	case OutputMsgRate:
		fmt.Fprintf(t.stdout, "%f\n", r.MsgRate)
	default:
		writeReport(t.stdout, r, t.o.Gbits, lineEnd(t.cpuSample()))
	}
	t.printCounters()
}

// printCounters follows each result line with -W's counters.
func (t *test) printCounters() {
	if t.ctrs != nil {
		t.ctrs.print(t.stdout)
	}
}

// sync is the handshake that starts (and with -a ends) each size of a
// bidirectional test.
func (t *test) sync() error {
	if _, err := t.c.shake(&t.my[0], t.gidIndex != -1); err != nil {
		return withLines(err, "Failed to sync between server and client between different msg sizes")
	}
	return nil
}

// reportBoth exchanges the two sides' lines of a bidirectional run and
// prints their sum (print_full_bw_report with both), and with
// --report-both (not with -a) each side's own line too.
func (t *test) reportBoth(my Report) error {
	rem, err := t.c.xchgReport(&my)
	if err != nil {
		return err
	}
	sum := my
	sum.Peak += rem.Peak
	sum.Avg += rem.Avg
	sum.MsgRate += rem.MsgRate
	t.writeReport(sum)
	t.bothBlocks(my, rem)
	return nil
}

// bothBlocks prints --report-both's "Local results" and "Remote results"
// blocks of a bidirectional run (not with -a).
func (t *test) bothBlocks(my, rem Report) {
	if t.o.Both && !t.o.All {
		for _, side := range []struct {
			name string
			r    Report
		}{{"Local", my}, {"Remote", rem}} {
			// (perftest prints these headings whatever --output says)
			io.WriteString(t.stdout, resultLine)
			if t.v == Atomic {
				fmt.Fprintf(t.stdout, "\n %s results:\n", side.name) // atomic_bw's, without the space
			} else {
				fmt.Fprintf(t.stdout, "\n %s results: \n", side.name)
			}
			writeHeader(t.stdout, t.o.Gbits, t.o.cpuUtil)
			t.writeLine(side.r)
		}
	}
}

// closeConn ends the connection after a successful write or read run.
func (t *test) closeConn() error {
	if err := t.c.closeConn(&t.my[0], t.gidIndex != -1); err != nil {
		return withLines(err, "Failed to close connection between server and client")
	}
	t.c = nil
	return nil
}

// runSend is the rest of ib_send_bw: both sides print their own line per
// size, the server's timed from its first receive; a handshake starts
// each size (after the server posted its receives) and, with -a, ends it.
func (t *test) runSend() error {
	withGID := t.gidIndex != -1
	t.writeHeader()
	sends, receives := t.client || t.o.Duplex, !t.client || t.o.Duplex
	if sends {
		t.initSend()
	}
	if receives {
		t.recv = recvLoop{qps: make([]recvQP, len(t.qps)), cq: t.recvCQ, iters: t.o.Iters, depth: uint64(t.o.RxDepth),
			postList: uint64(t.o.RecvPostList), cycle: t.cycle, line: t.cacheLine, tm: newTiming(1, true)}
		if t.o.Conn == UD {
			t.recv.grh = grh
		}
		for i, qp := range t.qps {
			t.recv.qps[i].qp, t.recv.qps[i].rxAddr, t.recv.qps[i].lkey = qp, t.recvArea(i), t.mrOf(i).LKey()
			if t.srq != nil {
				// Each QP's share of the SRQ: its receives (wr_id i) go
				// to the SRQ, and whichever QP takes one, the
				// completion names i, whose receive is posted again.
				t.recv.qps[i].qp = t.srq
			}
		}
		if t.srq != nil {
			t.recv.depth /= uint64(len(t.qps))
		}
	}
	if t.ch != nil {
		// send_bw arms both CQs on both sides.
		w, err := t.armEvents(t.sendCQ, t.recvCQ)
		if err != nil {
			return err
		}
		t.send.events, t.recv.events = w, w
	}
	switch {
	case t.o.Infinite:
		d := newForever()
		t.send.dur, t.recv.dur = d, d
	case t.o.Duration > 0:
		d := t.clock()
		t.send.dur, t.recv.dur = d, d
	case receives:
		// check_alive: a receiver whose peer died gives up.
		w := &watchdog{period: alivePeriod()}
		if t.ch != nil {
			ctx, cancel := context.WithCancel(t.ctx)
			defer cancel()
			w.cancel = cancel
			t.recv.events = &channelWaiter{ch: t.ch, ctx: ctx}
			if t.o.Duplex {
				t.send.events = t.recv.events
			}
		}
		t.recv.watch = w
	}
	bi := biLoop{s: &t.send, r: &t.recv, server: !t.client}
	for _, size := range t.sizes() {
		if sends {
			t.send.setup(size)
		}
		if receives {
			if err := t.recv.prepost(size); err != nil {
				return withLines(err, " Failed to post receive recv_wqes")
			}
		}
		if _, err := t.c.handshake(&t.my[0], withGID); err != nil {
			return err
		}
		if t.o.Infinite && t.client {
			return t.forever(size, t.send.dur, &t.send.progress, t.watched(&t.send.y, t.send.events, t.send.run), " Error occurred while running infinitely! aborting ...")
		}
		if t.o.Infinite {
			return t.forever(size, t.recv.dur, &t.recv.progress, t.recv.run, " Error occurred while running infinitely on server! aborting ...")
		}
		var r Report
		switch {
		case t.o.Duplex:
			if err := t.watched(&t.send.y, t.send.events, bi.run)(); err != nil {
				return failed17(err)
			}
			r = computeReport(size, t.iters(bi.sampled()), &t.send.tm, t.o.CQMod, t.o.PostList, t.o.NoPeak, t.o.Gbits)
		case t.client:
			if err := t.watched(&t.send.y, t.send.events, t.send.run)(); err != nil {
				return failed17(err)
			}
			r = computeReport(size, t.iters(t.send.sampled), &t.send.tm, t.o.CQMod, t.o.PostList, t.o.NoPeak, t.o.Gbits)
		default:
			if err := t.recv.run(); err != nil {
				return failed17(err)
			}
			r = computeReport(size, t.iters(t.recv.sampled), &t.recv.tm, t.o.CQMod, t.o.PostList, true, t.o.Gbits)
		}
		// With -b each side prints the sum of both sides' lines, except
		// with -D, where each prints its own (sends and receives).
		switch {
		case t.o.Duplex && t.o.Duration == 0:
			if err := t.reportBoth(r); err != nil {
				return err
			}
		case t.o.Duplex:
			// print_report_bw prints it, through print_full_bw_report
			// without a remote line but with duplex set: a combination
			// that checks no limit, so a -w or -y fails such a run
			// whatever it measured, as send_bw's does.
			t.writeLine(r)
			// send_bw prints --report-both's blocks here too, the
			// remote one from a report it never exchanged
			// (uninitialised memory): ours is zero but for the size.
			t.bothBlocks(r, Report{Size: r.Size})
		default:
			t.writeReport(r)
		}
		if t.o.All {
			if _, err := t.c.handshake(&t.my[0], withGID); err != nil {
				return err
			}
		}
	}
	t.rule()
	if err := t.c.closeConn(&t.my[0], withGID); err != nil {
		// send_bw goes on to free its side and exits 0 (unlike
		// write_bw and read_bw, which fail).
		t.closeFailed(err, " Failed to close connection between server and client")
		return nil
	}
	t.c = nil
	return nil
}

// closeFailed prints the send tools' complaint when the closing
// handshake fails, after which they free their side and carry on.
func (t *test) closeFailed(err error, first string) {
	fmt.Fprintln(t.stderr, withLines(err, first, " Trying to close this side resources"))
}

// failed17 is the exit status 17 that send_bw (after any failed run),
// read_bw (after a failed run of its -a loop) and the latency tools give
// a failed run, unless the failure has its own.
func failed17(err error) error {
	var se statusError
	if errors.As(err, &se) {
		return err
	}
	var m msgError
	if !errors.As(err, &m) {
		m = msgError{err.Error()}
	}
	return statusError{m, 17}
}

// forever runs a test without end (--run_infinitely: perftest's
// run_iter_bw_infinitely and run_iter_bw_infinitely_server): run does
// not return until it fails or d stops it, which Run's context does when
// it ends. Meanwhile a goroutine prints, every -D seconds, the line of
// the messages completed since the last one, as perftest's print thread
// does (handle_signal_print_thread), from the count the loop publishes
// once per batch of completions.
func (t *test) forever(size uint64, d *duration, progress *atomic.Uint64, run func() error, failed string) error {
	stop := context.AfterFunc(t.ctx, d.stop)
	defer stop()
	period := time.Duration(t.o.period()) * time.Second
	if p, err := time.ParseDuration(os.Getenv(periodEnv)); err == nil && p > 0 {
		period = p
	}
	// With -b (write, read) the line counts both directions, as
	// perftest's run_inf_bi_factor does.
	factor := 1.0
	if t.o.Duplex && t.v != Send {
		factor = 2
	}
	printer := background{wait: d.wait} // a test's clock drives both
	tm := timing{posted: make([]int64, 1), completed: make([]int64, 1)}
	start, last := nanotime(), uint64(0)
	printer.start(func(sleep func(time.Duration) bool) {
		for sleep(period) {
			now, n := nanotime(), progress.Load()
			tm.posted[0], tm.completed[0] = start, now
			r := computeReport(size, n-last, &tm, t.o.CQMod, t.o.PostList, true, t.o.Gbits)
			r.Avg *= factor
			r.MsgRate *= factor
			t.writeReport(r)
			start, last = now, n
		}
	})
	err := run()
	printer.halt()
	if err != nil {
		return withLines(err, failed)
	}
	return t.ctx.Err() // the run stopped because the context ended
}

// periodEnv sets the time between the lines of a run without end (a Go
// duration, "200ms"), instead of -D's seconds: tests shorten it.
const periodEnv = "PUREVERBS_BW_PERIOD"

// alivePeriod is the watchdog's period: perftest's 60 s, or aliveEnv's.
func alivePeriod() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(aliveEnv)); err == nil && d > 0 {
		return d
	}
	return 60 * time.Second
}

// iters is the report's message count: -n's on each QP, or with -D the
// messages of the measured stretch.
func (t *test) iters(sampled uint64) uint64 {
	if t.o.Duration > 0 {
		return sampled
	}
	return t.o.Iters * uint64(t.o.QPs)
}

// initSend sets up the client's loop over its QPs, each with its slice
// of the buffer and the peer's area for it.
func (t *test) initSend() {
	t.send = sendLoop{qps: make([]sendQP, len(t.qps)), cq: t.sendCQ, verb: t.v, atomic: t.o.AtomicOp, iters: t.o.Iters, txDepth: uint64(t.o.TxDepth),
		cqMod: uint64(t.o.CQMod), postList: uint64(t.o.PostList), noPeak: t.o.NoPeak, cycle: t.cycle, line: t.cacheLine,
		base: t.base(), local: t.mem, inline: t.o.Inline, tm: t.timing()}
	if o := &t.o; o.rateType == rateSW {
		t.send.rate = &swRate{limit: o.rateLimit, units: o.rateUnits, burst: uint64(o.burstSize)}
	}
	for i, qp := range t.qps {
		q := &t.send.qps[i]
		q.qp, q.myAddr, q.lkey = qp, t.localSlice(i), t.mrOf(i).LKey()
		if t.v != Send {
			q.remAddr, q.rkey = t.rem[i].VAddr, t.rem[i].RKey
		}
		if t.o.Conn == UD {
			q.ah = t.ahs[i]
			q.remQPN, q.remQKey = t.udPeer(i)
		}
	}
}

// armEvents asks for the first completion event of each CQ (the
// ibv_req_notify_cq calls in the tools' main before the runs) and
// returns what the loops sleep on.
func (t *test) armEvents(cqs ...*uverbs.CQ) (waiter, error) {
	for _, cq := range cqs {
		if err := cq.ReqNotify(false); err != nil {
			return nil, msgError{" Couldn't request CQ notification", "  (" + err.Error() + ")"}
		}
	}
	return &channelWaiter{ch: t.ch, ctx: t.ctx}, nil
}

// channelWaiter is ctx_notify_events on a completion channel: take the
// next event (parked on the runtime poller, bounded by ctx), acknowledge
// it, re-arm its CQ. It allocates nothing.
type channelWaiter struct {
	ch  *uverbs.CompChannel
	ctx context.Context
}

func (w *channelWaiter) wait() error {
	cq, err := w.ch.GetCQEvent(w.ctx)
	if err != nil {
		return err
	}
	if err := cq.AckEvents(1); err != nil {
		return err
	}
	return cq.ReqNotify(false)
}

// close destroys everything in perftest's order after a successful run.
func (t *test) close() error {
	if w := t.o.waitDestroy; w > 0 {
		// --wait_destroy: the resources stay up (for a look with rdma
		// resource or the like) until the time is up or the run is
		// interrupted.
		fmt.Fprintf(t.stdout, " Waiting %d seconds before releasing resources...\n", w)
		wait := time.NewTimer(time.Duration(w) * time.Second)
		select {
		case <-wait.C:
		case <-t.ctx.Done():
		}
		wait.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if t.cm != nil {
		if err := t.cmDisconnect(); err != nil {
			// perftest says so and goes on releasing.
			fmt.Fprintf(t.stderr, "Failed to disconnect RDMA CM nodes.\n  (%v)\n", err)
		}
	}
	steps := []struct {
		live bool
		msg  string
		do   func() error
	}{
		{len(t.ahs) > 0, "Failed to destroy AH", func() error {
			for len(t.ahs) > 0 {
				if err := t.ahs[0].Destroy(); err != nil {
					return err
				}
				t.ahs = t.ahs[1:]
			}
			return nil
		}},
		{len(t.qps) > 0, "Couldn't destroy QP", func() error {
			for len(t.qps) > 0 {
				if err := t.qps[0].Destroy(ctx); err != nil {
					return err
				}
				t.qps = t.qps[1:]
			}
			return nil
		}},
		{t.srq != nil, "Couldn't destroy SRQ", func() error { return t.srq.Destroy(ctx) }},
		{len(t.mrs) > 0, "Failed to deregister MR", func() error {
			for len(t.mrs) > 0 {
				if err := t.mrs[0].Dereg(); err != nil {
					return err
				}
				t.mrs = t.mrs[1:]
			}
			return nil
		}},
		{t.recvCQ != nil && t.recvCQ != t.sendCQ, "Failed to destroy recv CQ", func() error { return t.recvCQ.Destroy(ctx) }},
		{t.sendCQ != nil, "Failed to destroy send CQ", func() error { return t.sendCQ.Destroy(ctx) }},
		{t.pd != nil, "Failed to deallocate PD", t.pd.Dealloc},
		{t.ch != nil, "Failed to close event channel", t.ch.Close},
		{t.cm != nil, "Failed to destroy RDMA CM contexts", t.cmClose},
		// (cmClose makes t.dev the run's own Context again.)
		{t.dev != nil, "Failed to close device context", func() error { return t.dev.Close() }},
	}
	for _, s := range steps {
		if !s.live {
			continue
		}
		if err := s.do(); err != nil {
			t.release()
			return msgError{s.msg, "  (" + err.Error() + ")"}
		}
	}
	t.ahs, t.qps, t.srq, t.mrs, t.recvCQ, t.sendCQ, t.pd, t.ch, t.dev = nil, nil, nil, nil, nil, nil, nil, nil, nil
	if t.ctrs != nil {
		t.ctrs.close()
		t.ctrs = nil
	}
	t.freeTiming()
	if t.buf != nil {
		if err := t.buf.Close(); err != nil {
			return msgError{"Couldn't free the work buf.", "  (" + err.Error() + ")"}
		}
		t.buf = nil
	}
	return nil
}

// release frees what is left after a failure: closing the device
// releases every object on it; the buffer goes last.
func (t *test) release() {
	if t.ctrs != nil {
		t.ctrs.close()
		t.ctrs = nil
	}
	if t.cm != nil {
		// The channel's Context goes with it, and every object on it.
		t.cmClose()
	}
	if t.dev != nil {
		t.dev.Close()
		t.dev = nil
	}
	t.freeTiming()
	if t.buf != nil {
		t.buf.Close()
		t.buf = nil
	}
}
