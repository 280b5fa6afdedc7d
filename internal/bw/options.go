package bw

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Verb is the operation a tool measures, numbered as perftest's VerbType
// (the number decides which address fields the tools print).
type Verb int

const (
	Send  Verb = 0 // ib_send_bw: SEND, the server posts receives
	Write Verb = 1 // ib_write_bw: RDMA WRITE into the server's buffer
	Read  Verb = 2 // ib_read_bw: RDMA READ from the server's buffer
	// Atomic is ib_atomic_bw: 8-byte atomics (fetch and add, or compare
	// and swap; Options.AtomicOp) on the server's buffer.
	Atomic Verb = 3
)

// ReadsBack: the requester alone posts and the responder's memory answers
// (READ and the atomics): perftest's "verb == READ || verb == ATOMIC".
func (v Verb) ReadsBack() bool { return v == Read || v == Atomic }

// AtomicOp is perftest's atomicType (-A): which atomic an atomic test
// posts.
type AtomicOp int

const (
	CmpAndSwap AtomicOp = 0 // CMP_AND_SWAP: compare with 0, swap in 0
	FetchAdd   AtomicOp = 1 // FETCH_AND_ADD (the default): add 1
)

// String is perftest's name of the operation (atomicTypesStr).
func (a AtomicOp) String() string {
	if a == CmpAndSwap {
		return "CMP_AND_SWAP"
	}
	return "FETCH_AND_ADD"
}

// String is perftest's name of the test ("RDMA_Write BW Test").
func (v Verb) String() string {
	switch v {
	case Send:
		return "Send"
	case Write:
		return "RDMA_Write"
	case Read:
		return "RDMA_Read"
	case Atomic:
		return "Atomic"
	}
	return fmt.Sprintf("Verb(%d)", int(v))
}

// CToolTest is the perftest program of the verb's bandwidth (BW) or
// latency (LAT) test.
func (v Verb) CToolTest(tst Test) string {
	if tst == LAT {
		return strings.Replace(v.CTool(), "_bw", "_lat", 1)
	}
	return v.CTool()
}

// CTool is the perftest program the verb's bandwidth tool mirrors.
func (v Verb) CTool() string {
	switch v {
	case Send:
		return "ib_send_bw"
	case Write:
		return "ib_write_bw"
	case Read:
		return "ib_read_bw"
	case Atomic:
		return "ib_atomic_bw"
	}
	return ""
}

// Test is perftest's tst: what a tool measures with its verb.
type Test int

const (
	BW  Test = iota // bandwidth (ib_write_bw, ...)
	LAT             // latency (ib_write_lat, ...): a ping-pong of one message at a time
)

// Version is the perftest version whose protocol the tools speak: it is
// sent to the peer in the version exchange, and perftest 6.06 refuses
// peers older than 5.70.
const Version = "6.06"

// perftest's defaults and limits (perftest_parameters.h).
const (
	defPort        = 18515
	defSize        = 65536
	defSizeLat     = 2 // DEF_SIZE_LAT
	defSizeAtomic  = 8 // DEF_SIZE_ATOMIC: the only size of the atomic tests
	defTxLat       = 1 // DEF_TX_LAT
	defIters       = 1000
	defItersWrite  = 5000
	defTxDepth     = 128
	defRxRDMA      = 1
	defRxSend      = 512
	defQPTimeout   = 14
	defTOS         = -1 // DEF_TOS: none asked for
	defRetryCount  = 7  // DEF_RETRY_COUNT
	defHopLimit    = 64 // DEF_HOP_LIMIT
	defCQMod       = 100
	minIter        = 5
	maxIter        = 100000000
	minTx          = 1
	maxTx          = 15000
	minRx          = 1
	maxRx          = 16384
	minCQMod       = 1
	maxCQMod       = 1024
	ucMaxRx        = 16000
	minQPs         = 1
	maxQPs         = 16384
	maxInline      = 912
	maxInlineUD    = 884
	maxGIDIndex    = 64
	maxSL          = 15
	minEQNum       = 0
	maxEQNum       = 2048
	defDuration    = 5       // seconds
	defInitMargin  = -1      // -f not given: a quarter of the duration
	maxSize        = 8388608 // -a runs sizes 2 .. maxSize
	cqModSizeLimit = 8192    // above it, completions are not moderated
	noPeakIters    = 20000   // above it, the peak is not computed
	defPageSize    = 4096
	defCacheLine   = 64
)

// Options are a tool's command line (perftest's user_param, the part the
// Go tools implement).
type Options struct {
	Tst       Test     // BW or LAT (perftest's tst): decides defaults, checks and the run
	Server    string   // the operand: the host to connect to
	Client    bool     // an operand was given, even "" (perftest's servername != NULL); else the server runs
	Port      int      // -p, TCP port of the exchange (18515)
	Dev       string   // -d
	DevSet    bool     // -d was given, even as "" (perftest's ib_devname != NULL); else the first device
	IBPort    int      // -i (1)
	MTU       int      // -m in bytes (0 = the port's active MTU)
	Size      uint64   // -s (65536; "64K", "1M" accepted)
	Iters     uint64   // -n (5000 for write, 1000 otherwise)
	TxDepth   int      // -t (128)
	RxDepth   int      // -r (send: 512; write/read: 1)
	QPTimeout int      // -u (14)
	SL        int      // -S
	GIDIndex  int      // -x (-1 = not given)
	All       bool     // -a: sizes 2 .. 8 MiB
	CQMod     int      // -Q (100): a completion every CQMod sends
	NoPeak    bool     // -N
	Inline    int      // -I (-1 = perftest's default, which is 0 for BW tests)
	OutReads  int      // -o (read, atomic; 0 = the device's maximum)
	AtomicOp  AtomicOp // -A (atomic tests): FETCH_AND_ADD (the default) or CMP_AND_SWAP
	Gbits     bool     // --report_gbits
	Events    bool     // -e (read, send): sleep on completion events instead of polling
	Vector    int      // -X (with -e): the CQs' completion vector (0)
	Duration  int      // -D: run for this many seconds instead of Iters messages (0: iterations)
	Margin    int      // -f: seconds left out of the measure at each end (-D/4 with -D)
	PostList  int      // -l (1): post this many requests per PostSend, a chain
	// RecvPostList (--recv_post_list, 1): a receiving side of a send test
	// posts its receives in chains of this many, each chain again once
	// all its receives completed.
	RecvPostList int
	// MRPerQP (--mr_per_qp): each QP has its own slice of the buffer
	// registered as its own MR (its own lkey and rkey), not a share of
	// one.
	MRPerQP bool
	// CPUUtil (--cpu_util, with -D): each result line ends with the
	// share of the host's CPU time spent in user mode over the measured
	// stretch (/proc/stat's user against idle, as perftest reads it).
	CPUUtil bool
	// OutJSON (--out_json): each result line is also written, with the
	// test's description, to OutJSONFile (--out_json_file,
	// perftest_out.json), in perftest's own format.
	OutJSON     bool
	OutJSONFile string
	// HugePages (--use_hugepages): the buffer is on huge pages
	// (uverbs.AllocHugeBuffer), which the administrator must reserve.
	HugePages bool
	// ODP (--odp): the buffer is registered for on-demand paging, once
	// the device says it pages sends and receives on RC (perftest
	// 4.5-0.17's check, whatever the transport and operation).
	ODP bool
	// MmapFile (--mmap): the buffer is this file's pages from MmapOffset
	// (--mmap-offset, a multiple of the page size), mapped shared
	// (uverbs.MapFileBuffer).
	MmapFile   string
	MmapOffset uint64
	// WarmUp (--perform_warm_up): write, read and atomic BW tests post a
	// window of requests on each QP and wait for them before each size's
	// run (send and the latency tests take the option and do nothing, as
	// perftest's).
	WarmUp bool
	QPs    int    // -q (1): QPs sharing the CQs, Iters messages each
	Conn   Conn   // -c: RC, UC (write, send) or UD (send)
	SRQ    bool   // --use-srq (send): the receiving sides' QPs share one SRQ
	Output Output // --output: the whole report (default), or one number per line
	// -w, -y: fail when no line reaches this average bandwidth or message
	// rate (perftest checks the message rate only when -w is given too).
	LimitBW, LimitMsgRate    float64
	HasLimitBW, HasLimitRate bool
	Infinite                 bool // --run_infinitely: run until killed, a line every -D seconds (5)
	Duplex                   bool // -b: both sides send (write, read: both post; the line sums both sides')
	Both                     bool // --report-both: with -b, also each side's own line
	// NoRelaxed (--disable_pcie_relaxed): register the buffer without
	// AccessRelaxedOrdering, which perftest asks for by default (the
	// library drops it on devices without optional MR access flags, as
	// libibverbs does).
	NoRelaxed bool
	// Latency tests: -C prints the unsorted or histogram lines in TSC
	// cycles, -U every sample in the order measured, -H every sample
	// sorted (perftest's r_flag).
	Cycles, Unsorted, Histogram bool
	// LatencyGap (--latency_gap, latency tests): microseconds to spin
	// before each post, outside the measured time's start.
	LatencyGap int

	// notice is what perftest prints on stdout while it parses (Run
	// prints it first), warn what it prints on stderr.
	notice string
	warn   string

	reqVector bool

	reqCQMod bool
	reqSize  bool

	// -T and -L: perftest takes them for rdma_cm and raw Ethernet QPs
	// only. The Go tools have no raw Ethernet QP: -L always ends the run
	// with perftest's complaint, -T unless -R (the client then sets it
	// on its rdma_cm IDs, as perftest does).
	tos, hopLimit int

	// commCM (-z, --comm_rdma_cm): the data exchange runs over an RC QP
	// connected through the RDMA CM instead of TCP. rdmaCM (-R,
	// --rdma_cm): the test's QPs are connected through the RDMA CM too
	// (perftest turns commCM on with it).
	commCM, rdmaCM bool
	// retryCount (--retry_count): the RDMA CM connection's retry and
	// RNR retry counts (perftest's own RC QPs always retry 7 times).
	retryCount int

	cpuUtil bool // --cpu_util took effect (-D): the lines have the CPU column
	ipv6    bool // --ipv6: without -x, prefer an IPv6 GID to an IPv4-mapped one
	// noVersions (--dont_xchg_versions): perftest then compares its own
	// version with an empty peer version and always gives up.
	noVersions bool
	// oldPostSend (--use_old_post_send): nothing to choose in the Go
	// tools, but perftest's AES-XTS check refuses it.
	oldPostSend bool

	// perftest's AES-XTS (mlx5 crypto) and DC stream options, parsed and
	// checked as perftest does (force_dependecies); the paths are set
	// when given, even empty. The Go tools refuse AES-XTS traffic once
	// the checks pass, and DC always.
	aesXTS, encryptOnTx, sigBefore              bool
	kekPath, dataEncKeyAppPath, credentialsPath bool
	logDCIStreams, logActiveDCIStreams          uint16
	logActiveDCIStreamsSet                      bool

	// The rate limiter (--rate_limit, --rate_limit_type, --rate_units,
	// --burst_size): perftest's. rateStr is the argument as given (a HW
	// limit names an IB rate by it).
	rateType       rateLimitType
	rateTypeGiven  bool
	rateLimit      float64
	rateStr        string
	rateUnits      rateUnit
	burstSize      int
	typicalPktSize int
	hwRate         int // a HW limit's uverbs.Rate

	tclass      uint8  // --tclass: the GRH's traffic class (perftest's uint16_t, cut to the GRH's byte)
	waitDestroy uint32 // --wait_destroy: seconds to wait before releasing the resources
	pkeyIndex   int    // --pkey_index: the QPs' P_Key index (0 past the device's table)

	// Counters (-W, --report-counters): the port's sysfs counters, by
	// their paths under /sys/class/infiniband/DEV/ports/PORT/
	// ("hw_counters/sent_pkts"), whose changes follow each result line;
	// nil without -W. perftest counts the names by their commas, so an
	// empty name among them is a counter it cannot open (counterNames).
	Counters *string
	// forceLink (--force-link=IB|Ethernet): the link layer the tool
	// takes the port's to be (linkUnspec: the port's own).
	forceLink linkLayer
	// reportPerPort (--report-per-port): per-port columns, which need -O
	// (not supported) and -D, so any use ends the run as perftest's does
	// without -O.
	reportPerPort bool
	// dualPort (-O): half the QPs on port 2 (perftest's DEF_IB_PORT2).
	// The Go tools run one port: on a device whose port 2 perftest
	// cannot use (rxe has one port) the run ends as perftest's does, and
	// on one with a second port it is refused.
	dualPort bool
	// dlid (--dlid): the LID the address vectors name instead of the
	// peer's (0: the peer's); on RoCE the kernel ignores it.
	dlid uint16
	// raw: perftest's raw Ethernet options, checked as perftest checks
	// them and ignored on RC, UC and UD as perftest ignores them.
	raw rawEth
}

// linkLayer is --force-link's argument.
type linkLayer int

const (
	linkUnspec linkLayer = iota
	linkIB
	linkEthernet
)

// parseLink is perftest's str_link_layer: the argument starts with "IB"
// or "Ethernet", in any case.
func parseLink(s string) (linkLayer, bool) {
	switch {
	case len(s) >= 2 && strings.EqualFold(s[:2], "IB"):
		return linkIB, true
	case len(s) >= 8 && strings.EqualFold(s[:8], "Ethernet"):
		return linkEthernet, true
	}
	return linkUnspec, false
}

// rateLimitType is perftest's rate_limiter_types: the device's static
// rate (HW), gaps between bursts of posts (SW), raw Ethernet packet
// pacing (PP), or none.
type rateLimitType int

const (
	rateHW rateLimitType = iota
	rateSW
	ratePP
	rateOff
)

// rateUnit is perftest's rate_limiter_units (--rate_units M, g or p).
type rateUnit int

const (
	unitMBps rateUnit = iota // M: MiB/s
	unitGbps                 // g (the default): Gb/s
	unitPps                  // p: messages per second
)

// hwRates are perftest's RATE_VALUES: the IB rates a HW limit may name,
// as --rate_limit must spell them.
var hwRates = []struct {
	name string
	rate uverbs.Rate
}{
	{"2.5", uverbs.Rate2_5Gbps}, {"5", uverbs.Rate5Gbps}, {"10", uverbs.Rate10Gbps}, {"14", uverbs.Rate14Gbps},
	{"20", uverbs.Rate20Gbps}, {"25", uverbs.Rate25Gbps}, {"30", uverbs.Rate30Gbps}, {"40", uverbs.Rate40Gbps},
	{"56", uverbs.Rate56Gbps}, {"60", uverbs.Rate60Gbps}, {"80", uverbs.Rate80Gbps}, {"100", uverbs.Rate100Gbps},
	{"112", uverbs.Rate112Gbps}, {"120", uverbs.Rate120Gbps}, {"168", uverbs.Rate168Gbps}, {"200", uverbs.Rate200Gbps},
	{"300", uverbs.Rate300Gbps}, {"MAX", uverbs.RateMax},
}

// The options table: perftest's short option string and long options, so
// that every perftest option is recognised; those the Go tools do not
// implement, and that would change a run on RC, UC or UD, are refused by
// name (see unsupported). (-G and -Y are long options' values only, not
// in the short string, as in perftest.)
const shortOpts = "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"

var longOpts = []getopt.Long{
	{Name: "port", HasArg: true, Val: 'p'}, {Name: "ib-dev", HasArg: true, Val: 'd'},
	{Name: "ib-port", HasArg: true, Val: 'i'}, {Name: "mtu", HasArg: true, Val: 'm'},
	{Name: "size", HasArg: true, Val: 's'}, {Name: "iters", HasArg: true, Val: 'n'},
	{Name: "tx-depth", HasArg: true, Val: 't'}, {Name: "qp-timeout", HasArg: true, Val: 'u'},
	{Name: "sl", HasArg: true, Val: 'S'}, {Name: "gid-index", HasArg: true, Val: 'x'},
	{Name: "all", HasArg: false, Val: 'a'}, {Name: "CPU-freq", HasArg: false, Val: 'F'},
	{Name: "connection", HasArg: true, Val: 'c'}, {Name: "qp", HasArg: true, Val: 'q'},
	{Name: "events", HasArg: false, Val: 'e'}, {Name: "vector", HasArg: true, Val: 'X'},
	{Name: "inline_size", HasArg: true, Val: 'I'}, {Name: "outs", HasArg: true, Val: 'o'},
	{Name: "mcg", HasArg: false, Val: 'g'}, {Name: "comm_rdma_cm", HasArg: false, Val: 'z'},
	{Name: "rdma_cm", HasArg: false, Val: 'R'}, {Name: "tos", HasArg: true, Val: 'T'},
	{Name: "hop_limit", HasArg: true, Val: 'L'}, {Name: "help", HasArg: false, Val: 'h'},
	{Name: "MGID", HasArg: true, Val: 'M'}, {Name: "rx-depth", HasArg: true, Val: 'r'},
	{Name: "bidirectional", HasArg: false, Val: 'b'}, {Name: "cq-mod", HasArg: true, Val: 'Q'},
	{Name: "noPeak", HasArg: false, Val: 'N'}, {Name: "version", HasArg: false, Val: 'V'},
	{Name: "report-cycles", HasArg: false, Val: 'C'}, {Name: "report-histogrm", HasArg: false, Val: 'H'},
	{Name: "report-unsorted", HasArg: false, Val: 'U'}, {Name: "atomic_type", HasArg: true, Val: 'A'},
	{Name: "dualport", HasArg: false, Val: 'O'}, {Name: "post_list", HasArg: true, Val: 'l'},
	{Name: "duration", HasArg: true, Val: 'D'}, {Name: "margin", HasArg: true, Val: 'f'},
	{Name: "source_mac", HasArg: true, Val: 'B'}, {Name: "dest_mac", HasArg: true, Val: 'E'},
	{Name: "dest_ip", HasArg: true, Val: 'J'}, {Name: "source_ip", HasArg: true, Val: 'j'},
	{Name: "dest_port", HasArg: true, Val: 'K'}, {Name: "source_port", HasArg: true, Val: 'k'},
	{Name: "ethertype", HasArg: true, Val: 'Y'}, {Name: "limit_bw", HasArg: true, Val: 'w'},
	{Name: "limit_msgrate", HasArg: true, Val: 'y'}, {Name: "server", HasArg: false, Val: 'Z'},
	{Name: "client", HasArg: false, Val: 'P'}, {Name: "mac_fwd", HasArg: false, Val: 'v'},
	{Name: "use_rss", HasArg: false, Val: 'G'}, {Name: "report-counters", HasArg: true, Val: 'W'},
	// Long-only options (Val 0: perftest keeps them in flag variables).
	{Name: "force-link", HasArg: true}, {Name: "remote_mac", HasArg: true}, {Name: "local_mac", HasArg: true},
	{Name: "remote_ip", HasArg: true}, {Name: "local_ip", HasArg: true}, {Name: "remote_port", HasArg: true},
	{Name: "local_port", HasArg: true}, {Name: "run_infinitely", HasArg: false},
	{Name: "report_gbits", HasArg: false}, {Name: "use-srq", HasArg: false}, {Name: "report-both", HasArg: false},
	{Name: "reversed", HasArg: false}, {Name: "pkey_index", HasArg: true}, {Name: "inline_recv", HasArg: true},
	{Name: "tcp", HasArg: false}, {Name: "burst_size", HasArg: true}, {Name: "typical_pkt_size", HasArg: true},
	{Name: "rate_limit", HasArg: true}, {Name: "rate_limit_type", HasArg: true}, {Name: "rate_units", HasArg: true},
	{Name: "output", HasArg: true}, {Name: "cpu_util", HasArg: false}, {Name: "out_json", HasArg: false},
	{Name: "out_json_file", HasArg: true}, {Name: "latency_gap", HasArg: true}, {Name: "flow_label", HasArg: true},
	{Name: "retry_count", HasArg: true}, {Name: "dont_xchg_versions", HasArg: false}, {Name: "mmap", HasArg: true},
	{Name: "mmap-offset", HasArg: true}, {Name: "ipv6", HasArg: false}, {Name: "raw_ipv6", HasArg: false},
	{Name: "report-per-port", HasArg: false},
	{Name: "odp", HasArg: false}, {Name: "use_hugepages", HasArg: false}, {Name: "use_old_post_send", HasArg: false},
	{Name: "promiscuous", HasArg: false}, {Name: "raw_mcast", HasArg: false}, {Name: "mr_per_qp", HasArg: false},
	{Name: "dlid", HasArg: true}, {Name: "tclass", HasArg: true}, {Name: "wait_destroy", HasArg: true},
	{Name: "flows", HasArg: true}, {Name: "flows_burst", HasArg: true}, {Name: "reply_every", HasArg: true},
	{Name: "perform_warm_up", HasArg: false}, {Name: "vlan_en", HasArg: false}, {Name: "vlan_pcp", HasArg: true},
	{Name: "recv_post_list", HasArg: true},
	// Debian's perftest 4.5-0.17 is built with HAVE_AES_XTS and HAVE_DCS
	// (and HAVE_IPV6, for raw_ipv6 above, and HAVE_RO), not HAVE_SNIFFER
	// or HAVE_OOO_ATTR: these names are in its table, so they take part
	// in the matching of abbreviations ("--raw" is ambiguous there).
	{Name: "aes_xts", HasArg: false}, {Name: "encrypt_on_tx", HasArg: false}, {Name: "sig_before", HasArg: false},
	{Name: "aes_block_size", HasArg: true}, {Name: "kek_path", HasArg: true}, {Name: "credentials_path", HasArg: true},
	{Name: "data_enc_keys_number", HasArg: true}, {Name: "data_enc_key_app_path", HasArg: true},
	{Name: "log_dci_streams", HasArg: true}, {Name: "log_active_dci_streams", HasArg: true},
	{Name: "disable_pcie_relaxed", HasArg: false},
	// perftest's table names source_ip twice, the second a long-only
	// entry: an exact "--source_ip" is -j, an abbreviation is ambiguous.
	{Name: "source_ip", HasArg: true},
}

// GetoptTable returns the short option string and a copy of the long
// option table the tools parse with (internal/testkit/sweep respells
// command lines with them).
func GetoptTable() (string, []getopt.Long) { return shortOpts, slices.Clone(longOpts) }

// usageError is a command-line error; msg is what perftest prints on
// stderr (without a newline), "" for none: getopt_long's complaint (see
// internal/getopt) or one of perftest's own checks.
type usageError struct {
	msg string
	// quiet: perftest exits from inside the parser, without main's
	// " Parser function exited with Error".
	quiet bool
	// resultLine: perftest prints its dashed rule on stdout first.
	resultLine bool
	// toStdout: perftest prints msg on stdout, not stderr.
	toStdout bool
	// notice and warn: what perftest printed on stdout and stderr
	// before (Options.notice and warn).
	notice, warn string
}

func (e *usageError) Error() string { return e.msg }

// errHelp and errVersion end the tool after -h or -V, with perftest's
// exit status 1.
var (
	errHelp    = &usageError{}
	errVersion = &usageError{}
)

// cValue parses an option argument as perftest's CHECK_VALUE does:
// strtol(arg, &end, 0), whose end must be the end of the argument. So ""
// is 0, and a number beyond a long saturates; the caller converts the
// value to the option's C type, as the macro's cast does.
func cValue(arg, name, typ string) (int64, error) {
	v, n := getopt.StrtolEnd(arg)
	if n != len(arg) {
		return 0, &usageError{msg: fmt.Sprintf(" %s argument %s should be %s", name, arg, typ)}
	}
	return v, nil
}

// inRange is CHECK_VALUE_IN_RANGE on an int option: cValue, the cast to
// int (the low 32 bits: 4294967301 is 5), then the range check.
func inRange(arg, name string, lo, hi int64) (int64, error) {
	v, err := cValue(arg, name, "int")
	if err != nil {
		return 0, err
	}
	v = int64(int32(v))
	if v < lo || v > hi {
		return 0, &usageError{msg: fmt.Sprintf(" %s should be between %d and %d", name, lo, hi)}
	}
	return v, nil
}

// ParseArgs parses a tool's arguments (without the program name) with
// perftest's options, defaults, checks and dependencies. A *usageError
// carries perftest's message; -h and -V return errHelp and errVersion
// after the caller printed nothing yet (Main prints the usage or the
// version).
func ParseArgs(v Verb, args []string) (Options, error) { return ParseTestArgs(BW, v, args) }

// ParseTestArgs is ParseArgs for a bandwidth (BW) or latency (LAT) test,
// as perftest's parser does with user_param->tst.
func ParseTestArgs(tst Test, v Verb, args []string) (Options, error) {
	o := Options{Tst: tst, Port: defPort, IBPort: 1, Size: defSize, Iters: defIters, TxDepth: defTxDepth,
		RxDepth: defRxRDMA, QPTimeout: defQPTimeout, GIDIndex: -1, CQMod: defCQMod, Inline: -1,
		Margin: defInitMargin, retryCount: defRetryCount, PostList: 1, RecvPostList: 1, QPs: 1, OutJSONFile: defJSONFile, tos: defTOS, hopLimit: defHopLimit,
		rateType: rateOff, rateUnits: unitGbps}
	if v == Write {
		o.Iters = defItersWrite
	}
	if v == Send {
		o.RxDepth = defRxSend
	}
	if tst == LAT {
		o.Size, o.TxDepth, o.Iters = defSizeLat, defTxLat, defIters
	}
	if v == Atomic {
		o.Size, o.AtomicOp = defSizeAtomic, FetchAdd
	}
	// perftest checks each option as getopt_long returns it: an option
	// before a bad word can still end the run with its own complaint.
	opts, operands, perr := getopt.Parse(args, shortOpts, longOpts)
	var err error
	for _, p := range opts {
		var n int64
		switch p.Val {
		case 'p':
			if n, err = cValue(p.Arg, "Port", "int"); err == nil {
				o.Port = int(int32(n))
			}
		case 'd':
			o.Dev, o.DevSet = p.Arg, true
		case 'i':
			if n, err = cValue(p.Arg, "IB Port", "uint8_t"); err == nil {
				o.IBPort = int(uint8(n))
				if o.IBPort < 1 {
					err = &usageError{msg: "IB Port can't be less than 1"}
				}
			}
		case 'm':
			if n, err = cValue(p.Arg, "MTU", "int"); err == nil {
				o.MTU = int(int32(n))
			}
		case 'n':
			if n, err = inRange(p.Arg, "Iteration num", minIter, maxIter); err == nil {
				o.Iters = uint64(n)
			}
		case 't':
			if n, err = inRange(p.Arg, "Tx depth", minTx, maxTx); err == nil {
				o.TxDepth = int(n)
			}
		case 'u':
			if n, err = cValue(p.Arg, "QP Timeout", "uint8_t"); err == nil {
				o.QPTimeout = int(uint8(n))
			}
		case 'S':
			if n, err = cValue(p.Arg, "Service Level", "uint8_t"); err == nil {
				o.SL = int(uint8(n))
				if o.SL > maxSL {
					err = &usageError{msg: fmt.Sprintf(" Only %d Service levels", maxSL)}
				}
			}
		case 'x':
			if n, err = cValue(p.Arg, "Gid index", "uint8_t"); err == nil {
				o.GIDIndex = int(uint8(n))
				if o.GIDIndex > maxGIDIndex {
					err = &usageError{msg: fmt.Sprintf(" Gid index should be between 0 and %d", maxGIDIndex)}
				}
			}
		case 'c':
			// change_conn_type: its complaints exit from the parser.
			switch p.Arg {
			case "RC":
				o.Conn = RC
			case "UC":
				o.Conn = UC
				if v.ReadsBack() {
					err = &usageError{msg: " UC connection not possible in READ/ATOMIC verbs", quiet: true}
				}
			case "UD":
				o.Conn = UD
				if v != Send {
					err = &usageError{msg: " UD connection only possible in SEND verb", quiet: true}
				}
			case "RawEth", "XRC", "DC", "SRD":
				err = &usageError{msg: fmt.Sprintf(" -c %s: this port runs RC, UC and UD only", p.Arg)}
			default:
				err = &usageError{msg: " Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}", quiet: true}
			}
		case 'q':
			if tst != BW {
				err = &usageError{msg: " Multiple QPs only available on bw tests"}
			} else if n, err = inRange(p.Arg, "num of Qps", minQPs, maxQPs); err == nil {
				o.QPs = int(n)
			}
		case 'I':
			if n, err = inRange(p.Arg, "Max inline", 0, maxInline); err == nil {
				o.Inline = int(n)
				if v.ReadsBack() {
					err = &usageError{msg: " Inline feature not available on READ/Atomic verbs"}
				}
			}
		case 'o':
			if n, err = cValue(p.Arg, "Outstanding Reads", "int"); err == nil {
				o.OutReads = int(int32(n))
				if !v.ReadsBack() {
					err = &usageError{msg: " Setting Outstanding reads only available on READ verb"}
				}
			}
		case 'r':
			if n, err = inRange(p.Arg, " Rx depth", minRx, maxRx); err == nil {
				o.RxDepth = int(n)
				if v != Send && o.RxDepth > defRxRDMA {
					err = &usageError{msg: " On RDMA verbs rx depth can be only 1"}
				}
			}
		case 'Q':
			if n, err = inRange(p.Arg, "CQ moderation", minCQMod, maxCQMod); err == nil {
				o.CQMod, o.reqCQMod = int(n), true
			}
		case 'e', 'X':
			// The CQs report to a completion channel; the loops sleep on
			// it. perftest has no events on the write verb.
			if v == Write {
				err = &usageError{msg: " Events feature not available on WRITE verb"}
				break
			}
			if p.Val == 'e' {
				o.Events = true
			} else if n, err = inRange(p.Arg, "EQN", minEQNum, maxEQNum); err == nil {
				o.Vector, o.reqVector = int(n), true
			}
		case 'D':
			if n, err = cValue(p.Arg, "Duration period", "int"); err == nil {
				o.Duration = int(int32(n))
				if o.Duration <= 0 {
					err = &usageError{msg: " Duration period must be positive"}
				}
			}
		case 'f':
			if n, err = cValue(p.Arg, "Margin", "int"); err == nil {
				o.Margin = int(int32(n))
				if o.Margin < 0 {
					err = &usageError{msg: " Margin must be non-negative"}
				}
			}
		case 'z':
			o.commCM = true
		case 'R':
			o.rdmaCM = true
		case 'T':
			if n, err = inRange(p.Arg, "TOS", 0, 255); err == nil {
				o.tos = int(n)
			}
		case 'L':
			if n, err = inRange(p.Arg, "Hop Limit", 0, 255); err == nil {
				o.hopLimit = int(n)
			}
		case 'g':
			if v != Send {
				err = &usageError{msg: " MultiCast feature only available on SEND verb"}
			} else {
				err = unsupported("-g")
			}
		case 'l':
			if n, err = cValue(p.Arg, "Send Post List size", "int"); err == nil {
				o.PostList = int(int32(n)) // checked last in forceDependencies
			}
		case 'a':
			o.All = true
		case 'A':
			if v != Atomic {
				err = &usageError{msg: " You are not running the atomic_lat/bw test!\n To change the atomic action type, you must run one of the atomic tests"}
				break
			}
			switch p.Arg {
			case "CMP_AND_SWAP":
				o.AtomicOp = CmpAndSwap
			case "FETCH_AND_ADD":
				o.AtomicOp = FetchAdd
			default:
				err = &usageError{msg: " Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}", quiet: true}
			}
		case 'F':
			// perftest: do not warn about the CPU frequency; the Go tools
			// time with the monotonic clock and never warn.
		case 'N':
			o.NoPeak = true
			if tst == LAT {
				err = &usageError{msg: " NoPeak only valid for BW tests"}
			}
		case 'b':
			o.Duplex = true
			if tst == LAT {
				err = &usageError{msg: " Bidirectional is only available in BW test"}
			}
		case 'C', 'H':
			if tst == BW {
				err = &usageError{msg: " Available only on Latency tests"}
			} else if p.Val == 'C' {
				o.Cycles = true
			} else {
				o.Histogram = true
			}
		case 'U':
			if tst == BW {
				err = &usageError{msg: " is Available only on Latency tests"}
			}
			o.Unsorted = true
		case 'w', 'y':
			// strtof(optarg, NULL): what does not parse is 0.
			f := strtof(p.Arg)
			if p.Val == 'w' {
				o.LimitBW, o.HasLimitBW = f, true
				if f < 0 {
					err = &usageError{msg: " Invalid Minimum BW Limit"}
				}
			} else {
				o.LimitMsgRate, o.HasLimitRate = f, true
				if f < 0 {
					err = &usageError{msg: " Invalid Minimum msgRate Limit"}
				}
			}
		case 'O':
			o.IBPort, o.dualPort = 1, true
		case 'M':
			// The multicast group of -g, which is refused; without -g
			// perftest keeps the string and never reads it.
		case 'P', 'Z':
			// --client, --server: raw Ethernet's. perftest sets the
			// role from the operand on any other connection type
			// (perftest_parameters.c:3022-3023).
		case 'v':
			// --mac_fwd stays refused: on RC, UC and UD too perftest
			// titles the test "... forwarding Test", prints a
			// " Buffer size" line (ctx_print_test_info) and sizes its
			// buffer's cycle by the RX depth (alloc_ctx).
			err = unsupported("-v")
		case 'B', 'E':
			// -B (source_mac), -E (dest_mac): checked, then unused off
			// raw Ethernet.
			o.raw.oldParam = true
			err = parseMAC(p.Arg)
		case 'J':
			o.raw.oldParam, o.raw.isServerIP = true, true
			o.raw.serverIP = &p.Arg
		case 'j':
			o.raw.oldParam, o.raw.isClientIP = true, true
			o.raw.clientIP = &p.Arg
		case 'K', 'k':
			// Any int: perftest's check_if_valid_udp_port accepts every
			// value.
			name := "Server Port"
			if p.Val == 'k' {
				name = "Client Port"
			}
			o.raw.oldParam = true
			_, err = cValue(p.Arg, name, "int")
		case 'Y':
			err = parseEthertype(p.Arg)
		case 'G':
			o.raw.useRSS = true // refused in forceDependencies, as perftest does
		case 'W':
			list := p.Arg
			o.Counters = &list
		case 'V':
			return o, errVersion
		case 'h':
			return o, errHelp
		case 's':
			o.Size, err = parseSize(p.Arg)
			o.reqSize = true
		case 0:
			switch p.Name {
			case "report_gbits":
				o.Gbits = true
			case "run_infinitely":
				o.Infinite = true
			case "report-both":
				o.Both = true
			case "use-srq":
				o.SRQ = true
			case "output":
				switch p.Arg {
				case "bandwidth":
					o.Output = OutputBW
				case "message_rate":
					o.Output = OutputMsgRate
				case "latency":
					o.Output = OutputLatency
				default:
					err = &usageError{msg: " Invalid verbosity level output flag. Please use bandwidth, latency, message_rate"}
				}
			case "disable_pcie_relaxed":
				o.NoRelaxed = true
			case "retry_count", "flow_label":
				// perftest uses the retry count only with rdma_cm (its
				// own RC QPs always retry 7 times), and the flow label
				// not at all.
				name := "Retry Count"
				if p.Name == "flow_label" {
					name = "flow label"
				}
				if n, err = cValue(p.Arg, name, "int"); err == nil && int32(n) < 0 {
					err = &usageError{msg: " " + name + " must be non-negative"}
				}
				if err == nil && p.Name == "retry_count" {
					o.retryCount = int(int32(n))
				}
			case "tclass":
				if n, err = cValue(p.Arg, "traffic class", "uint16_t"); err == nil {
					o.tclass = uint8(n)
				}
			case "wait_destroy":
				if n, err = cValue(p.Arg, "wait_destroy", "uint32_t"); err == nil {
					o.waitDestroy = uint32(n)
				}
			case "pkey_index":
				if n, err = cValue(p.Arg, "Pkey index", "int"); err == nil {
					o.pkeyIndex = int(int32(n))
				}
			case "recv_post_list":
				if n, err = cValue(p.Arg, "Receive Post List size", "int"); err == nil {
					o.RecvPostList = int(int32(n)) // checked last in forceDependencies
				}
			case "mr_per_qp":
				o.MRPerQP = true
			case "cpu_util":
				o.CPUUtil = true
			case "perform_warm_up":
				o.WarmUp = true
			case "mmap":
				o.MmapFile = p.Arg
			case "mmap-offset":
				if n, err = cValue(p.Arg, "mmap offset", "unsigned long"); err == nil {
					o.MmapOffset = uint64(n)
				}
			case "rate_limit":
				// atof; a HW limit is looked up by the string.
				o.rateStr, o.rateLimit = p.Arg, strtod(p.Arg)
				if o.rateLimit <= 0 {
					err = &usageError{msg: " Rate limit must be non-negative"}
				} else if o.rateType == rateOff {
					o.rateType = rateHW // perftest's default limiter
				}
			case "burst_size":
				if n, err = cValue(p.Arg, "Burst size", "int"); err == nil {
					o.burstSize = int(int32(n))
					if o.burstSize < 0 {
						err = &usageError{msg: " Burst size must be non-negative"}
					}
				}
			case "typical_pkt_size":
				if n, err = inRange(p.Arg, "Typical pkt size", 0, 0xffff); err == nil {
					o.typicalPktSize = int(n)
				}
			case "rate_units":
				switch p.Arg {
				case "M":
					o.rateUnits = unitMBps
				case "g":
					o.rateUnits = unitGbps
				case "p":
					o.rateUnits = unitPps
				default:
					err = &usageError{msg: " Invalid rate limit units. Please use M,g or p"}
				}
			case "rate_limit_type":
				o.rateTypeGiven = true
				switch p.Arg {
				case "SW":
					o.rateType = rateSW
				case "HW":
					o.rateType = rateHW
				case "PP":
					o.rateType = ratePP
				default:
					err = &usageError{msg: " Invalid rate limit type flag. Please use HW, SW or PP."}
				}
			case "dont_xchg_versions":
				o.noVersions = true
			case "odp":
				o.ODP = true
			case "use_hugepages":
				o.HugePages = true
			case "ipv6":
				o.ipv6 = true
			case "out_json":
				o.OutJSON = true
			case "out_json_file":
				o.OutJSONFile = p.Arg
			case "force-link":
				var ok bool
				if o.forceLink, ok = parseLink(p.Arg); !ok {
					err = &usageError{msg: "Invalid link layer value should be IB or ETHERNET."}
				}
			case "inline_recv":
				// Parsed and checked, and used by no test (as perftest's).
				_, err = cValue(p.Arg, "Inline Receive size", "int")
			case "reply_every":
				// perftest uses it in raw Ethernet loops only.
				_, err = cValue(p.Arg, "reply_every", "uint32_t")
			case "dlid":
				if n, err = cValue(p.Arg, "dlid", "uint16_t"); err == nil {
					o.dlid = uint16(n)
				}
			case "report-per-port":
				o.reportPerPort = true
			case "use_old_post_send":
				// Nothing to choose: the Go tools always post with PostSend.
				o.oldPostSend = true
			case "raw_ipv6":
				// The raw Ethernet addresses (-J, -j, --local_ip,
				// --remote_ip) are then checked as IPv6.
				o.raw.rawIPv6 = true
			case "remote_mac", "local_mac":
				o.raw.newParam = true
				err = parseMAC(p.Arg)
			case "remote_ip":
				o.raw.newParam, o.raw.isClientIP = true, true
				o.raw.remoteIP = &p.Arg
			case "local_ip":
				o.raw.newParam, o.raw.isServerIP = true, true
				o.raw.localIP = &p.Arg
			case "remote_port", "local_port":
				o.raw.newParam = true
				_, err = cValue(p.Arg, strings.Replace(p.Name, "_", " ", 1), "int")
			case "flows", "flows_burst":
				// Used by raw Ethernet's checks and loops; on RC they
				// only lay out perftest's send buffer.
				name, what := "flows", "flows"
				if p.Name == "flows_burst" {
					name, what = "flows burst", "burst flow"
				}
				if n, err = cValue(p.Arg, name, "uint16_t"); err == nil && uint16(n) == 0 {
					err = &usageError{msg: "Invalid " + what + " value. Please set a positive number"}
				}
			case "vlan_pcp":
				// CHECK_VALUE_IN_RANGE_UNS on a uint32_t, 0 to 8.
				if n, err = cValue(p.Arg, "VLAN PCP", "uint32_t"); err == nil && uint32(n) > 8 {
					err = &usageError{msg: " VLAN PCP should be between 0 and 8"}
				}
			case "tcp", "vlan_en", "promiscuous", "raw_mcast":
				// Raw Ethernet's alone.
			case "aes_xts":
				o.aesXTS = true
			case "encrypt_on_tx":
				o.encryptOnTx = true
			case "sig_before":
				o.sigBefore = true
			case "aes_block_size", "data_enc_keys_number":
				// Read as uint16_t and, on rxe, used by nothing.
				_, err = cValue(p.Arg, p.Name, "uint16_t")
			case "kek_path":
				o.kekPath = true
			case "data_enc_key_app_path":
				o.dataEncKeyAppPath = true
			case "credentials_path":
				o.credentialsPath = true
			case "log_dci_streams":
				if n, err = cValue(p.Arg, p.Name, "uint16_t"); err == nil {
					o.logDCIStreams = uint16(n)
				}
			case "log_active_dci_streams":
				if n, err = cValue(p.Arg, p.Name, "uint16_t"); err == nil {
					o.logActiveDCIStreams, o.logActiveDCIStreamsSet = uint16(n), true
				}
			case "latency_gap":
				if n, err = cValue(p.Arg, "Latency gap time", "int"); err == nil {
					o.LatencyGap = int(int32(n))
					if o.LatencyGap < 0 {
						err = &usageError{msg: " Latency gap time must be non-negative"}
					}
				}
			default:
				err = unsupported("--" + p.Name)
			}
		default:
			err = unsupported(fmt.Sprintf("-%c", p.Val))
		}
		if err != nil {
			return Options{}, err
		}
	}
	if perr != nil {
		return Options{}, &usageError{msg: perr.Error()}
	}
	if err := o.raw.checkIPs(); err != nil {
		return Options{}, err
	}
	switch len(operands) {
	case 0:
	case 1:
		o.Server, o.Client = operands[0], true
	default:
		return Options{}, &usageError{msg: " Invalid Command line. Please check command rerun "}
	}
	if o.raw.oldParam && o.raw.newParam {
		return Options{}, errRawEthMix
	}
	if o.Infinite {
		o.All = false // perftest's run_infinitely replaces -a's test method
	}
	if !o.logActiveDCIStreamsSet {
		o.logActiveDCIStreams = o.logDCIStreams
	}
	if err := o.forceDependencies(v); err != nil {
		if ue, ok := err.(*usageError); ok {
			ue.notice, ue.warn = o.notice, o.warn // printed before perftest gave up
		}
		return Options{}, err
	}
	return o, nil
}

func unsupported(opt string) error {
	return &usageError{msg: fmt.Sprintf(" %s: not supported by this port of perftest (pureverbs)", opt)}
}

// strtof is C's strtof(s, NULL): the longest prefix that reads as a
// number (after leading spaces), 0 if none.
func strtof(s string) float64 { return cFloatPrefix(s, 32) }

// strtod is C's atof (strtod(s, NULL)): strtof in double precision.
func strtod(s string) float64 { return cFloatPrefix(s, 64) }

func cFloatPrefix(s string, bits int) float64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	// C reads a hexadecimal number with or without its binary exponent
	// ("0x10" is 16); ParseFloat wants the exponent, and takes
	// underscores C does not.
	hex := len(strings.TrimLeft(s, "+-")) > 1 && strings.HasPrefix(strings.ToLower(strings.TrimLeft(s, "+-")), "0x")
	for n := len(s); n > 0; n-- {
		p := s[:n]
		if strings.Contains(p, "_") {
			continue
		}
		if hex && !strings.ContainsAny(p, "pP") {
			p += "p0"
		}
		if f, err := strconv.ParseFloat(p, bits); err == nil || errors.Is(err, strconv.ErrRange) {
			return f
		}
	}
	return 0
}

// parseSize reads -s as perftest does: strtol(arg, NULL, 0) of the
// argument without a trailing K or M, times 1024 or 1024*1024.
func parseSize(arg string) (uint64, error) {
	factor := int64(1)
	switch {
	case strings.HasSuffix(arg, "K"):
		arg, factor = strings.TrimSuffix(arg, "K"), 1024
	case strings.HasSuffix(arg, "M"):
		arg, factor = strings.TrimSuffix(arg, "M"), 1024*1024
	}
	n := strtolPrefix(arg) * factor
	if n < 1 || n > (1<<32-1)/2 {
		return 0, &usageError{msg: fmt.Sprintf(" Message Size should be between %d and %d", 1, (1<<32-1)/2)}
	}
	return uint64(n), nil
}

// strtolPrefix is strtol(s, NULL, 0) for what the tools need: leading
// space, a sign, a 0x/0 prefix, and digits up to the first other
// character.
func strtolPrefix(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	base := int64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	var v int64
	for _, c := range []byte(s) {
		d := int64(-1)
		switch {
		case c >= '0' && c <= '9':
			d = int64(c - '0')
		case c >= 'a' && c <= 'f':
			d = int64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int64(c-'A') + 10
		}
		if d < 0 || d >= base || v > 1<<40 {
			break
		}
		v = v*base + d
	}
	if neg {
		return -v
	}
	return v
}

// forceDependencies is perftest's force_dependecies for what the Go tools
// implement (RC).
func (o *Options) forceDependencies(v Verb) error {
	if o.Duration == 0 {
		if uint64(o.TxDepth) > o.Iters {
			o.TxDepth = int(o.Iters)
		}
		if v == Send && uint64(o.RxDepth) > o.Iters {
			o.RxDepth = int(o.Iters)
		}
		// UC and UD drop what finds no receive posted: all of a size's
		// receives are posted before it starts (up to UC_MAX_RX).
		if o.Conn != RC && o.RxDepth == defRxSend {
			o.RxDepth = int(min(o.Iters, ucMaxRx))
		}
	}
	// Large messages complete one by one: moderation would make the
	// average depend on the last group.
	// (Not with events, where perftest keeps the moderation.)
	// (Nor for UD, whose messages are at most the MTU.)
	if o.Size > cqModSizeLimit && !o.All && !o.Events && o.Conn != UD {
		if !o.reqCQMod {
			o.CQMod = 1
		} else if o.CQMod > 1 {
			o.notice += resultLine + "Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n"
		}
	}
	if o.CQMod > o.TxDepth {
		o.CQMod = o.TxDepth
	}
	if v.ReadsBack() {
		o.Inline = 0
	}
	if o.All {
		o.Size = maxSize
	}
	if v == Atomic && o.Size != defSizeAtomic {
		return &usageError{msg: "Message size cannot be changed for Atomic tests ", quiet: true, resultLine: true, toStdout: true}
	}
	if o.SRQ && v != Send {
		return &usageError{msg: " Using SRQ only avavilible in SEND tests.", quiet: true, resultLine: true, toStdout: true}
	}
	if o.SRQ && o.QPs > o.RxDepth {
		return &usageError{msg: " Using SRQ depth should be greater than number of QPs.", quiet: true, resultLine: true, toStdout: true}
	}
	if o.dualPort {
		o.QPs *= 2
		if o.Tst != BW {
			return &usageError{msg: " Dual-port mode only supports BW tests.", quiet: true, toStdout: true}
		}
	}
	if o.PostList > 1 && o.Tst == LAT {
		return &usageError{msg: "Post list is supported in BW tests only", quiet: true, resultLine: true}
	}
	if o.PostList > 1 {
		// A completion per list (or per cq_mod requests of it).
		if o.Duration == 0 && o.Iters%uint64(o.PostList) != 0 {
			return &usageError{msg: "Number of iterations must be a multiple of post list size", quiet: true, resultLine: true}
		}
		if !o.reqCQMod {
			o.CQMod = o.PostList
			o.notice += resultLine + "Post List requested - CQ moderation will be the size of the post list\n"
		} else if o.PostList%o.CQMod != 0 {
			return &usageError{msg: "Post list size must be a multiple of CQ moderation", quiet: true, resultLine: true}
		}
		if o.PostList > o.TxDepth {
			// perftest would never post.
			return &usageError{msg: fmt.Sprintf(" Post list size %d exceeds the TX depth %d", o.PostList, o.TxDepth), quiet: true}
		}
	}
	if o.RecvPostList > 1 {
		if o.Tst == LAT {
			return &usageError{msg: "Receive post list is supported in BW tests only", quiet: true, resultLine: true}
		}
		if o.Duration == 0 && o.Iters%uint64(o.RecvPostList) != 0 {
			return &usageError{msg: "Number of iterations must be a multiple of receive post list size", quiet: true, resultLine: true}
		}
	}
	if v == Send && !o.Client && !o.Duplex {
		o.NoPeak = true // the server times from its first receive
	}
	if o.Duration > 0 {
		// The loops run until the time is up and count the messages of
		// the measured stretch; the report has no peak.
		o.Iters, o.NoPeak = 0, true
		if o.Events {
			return &usageError{msg: "Duration mode doesn't work with events.", quiet: true, resultLine: true}
		}
		if o.All {
			return &usageError{msg: "Duration mode currently doesn't support running on all sizes.", quiet: true, resultLine: true}
		}
		o.cpuUtil = o.CPUUtil
	} else if o.CPUUtil {
		// perftest goes on without the column.
		o.notice += resultLine
		o.warn += " CPU Utilization works only with Duration mode.\n"
	}
	if o.rdmaCM {
		if o.Conn == UC {
			return &usageError{msg: " UC is not supported in librdmacm", quiet: true, resultLine: true, toStdout: true}
		}
		o.commCM = true
	} else if o.tos != defTOS {
		// There is no raw Ethernet QP: perftest's rule leaves no
		// valid use.
		return &usageError{msg: " TOS only valid for rdma_cm based QP and RawEth QP ", quiet: true, toStdout: true}
	}
	if o.hopLimit != defHopLimit {
		return &usageError{msg: " Hop limit only valid for RawEth QP ", quiet: true, toStdout: true}
	}
	if v == Atomic && o.ODP {
		return &usageError{msg: " ODP does not support ATOMICS for now", quiet: true, resultLine: true}
	}
	if o.Conn == UC && o.ODP {
		return &usageError{msg: " ODP does not support UC", quiet: true, resultLine: true}
	}
	if o.Infinite {
		// A line every -D seconds, without a peak.
		o.NoPeak = true
		if o.Events {
			return &usageError{msg: " run_infinitely does not support events feature yet.", quiet: true, resultLine: true}
		}
		if o.Tst == LAT {
			return &usageError{msg: " run_infinitely exists only in BW tests for now.", quiet: true, resultLine: true}
		}
		if o.Duplex && v == Send {
			return &usageError{msg: " run_infinitely mode is not supported in SEND Bidirectional BW test", quiet: true, resultLine: true}
		}
		if o.rateType != rateOff {
			return &usageError{msg: " run_infinitely does not support rate limit feature yet", quiet: true, resultLine: true}
		}
	}
	if err := o.cryptoDependencies(v); err != nil {
		return err
	}
	if err := o.rssDependency(); err != nil {
		return err
	}
	if (o.Duration > 0 || o.Infinite) && o.Margin == defInitMargin {
		o.Margin = o.period() / 4
	}
	if v == Send && o.RxDepth%2 == 1 && !o.All && !o.Infinite {
		o.RxDepth++ // perftest's "WA for a bug when rx_depth is odd in SEND"
	}
	if v == Send && o.RecvPostList > 1 {
		// perftest posts RX depth / list size chains (per QP with an
		// SRQ): none would leave every message without a receive.
		chains := o.RxDepth / o.RecvPostList
		if o.SRQ {
			chains /= o.QPs
		}
		if chains == 0 {
			return &usageError{msg: fmt.Sprintf(" Receive post list size %d exceeds the RX depth %d", o.RecvPostList, o.RxDepth), quiet: true}
		}
	}
	if o.Duration == 0 && o.Iters > noPeakIters {
		o.NoPeak = true
	}
	if o.Inline < 0 {
		o.Inline = 0 // perftest's default inline size of BW tests
	}
	// perftest's order from here: the rate limiter, the output
	// verbosity, the latency gap, UD's inline size, and the rest.
	if err := o.rateDependencies(v); err != nil {
		return err
	}
	if o.Tst == BW && o.Output == OutputLatency {
		return &usageError{msg: " Output verbosity level for BW can be: bandwidth, message_rate", quiet: true, resultLine: true}
	}
	if o.Tst == LAT && (o.Output == OutputBW || o.Output == OutputMsgRate) {
		return &usageError{msg: " Output verbosity level for LAT can be: latency", quiet: true, resultLine: true}
	}
	if o.LatencyGap > 0 && o.Tst != LAT {
		return &usageError{msg: " Latency gap feature is only for latency tests", quiet: true, resultLine: true}
	}
	if o.Conn == UD && o.Inline > maxInlineUD {
		o.notice += resultLine
		o.warn += fmt.Sprintf("Setting inline size to %d (Max inline size in UD)\n", maxInlineUD)
		o.Inline = maxInlineUD
	}
	if o.reportPerPort {
		// perftest's check wants -D and -O (dual port), which the Go
		// tools refuse.
		return &usageError{msg: "report per port feature work only with Duration and Dualport", quiet: true, resultLine: true}
	}
	// The margin is checked against perftest's default duration even
	// when the test counts iterations, in C's int: -f 2147483647 doubles
	// to -2, which passes (make sweep, seed 106).
	if !(int32(o.period()) > 2*int32(o.Margin)) {
		return &usageError{msg: "please check that DURATION > 2*MARGIN", quiet: true, resultLine: true}
	}
	if o.reqVector && !o.Events {
		return &usageError{msg: " Events must be enabled to select a completion vector", quiet: true}
	}
	// Refusals of the Go tools' own, after all of perftest's: a post
	// list below 1 in a bandwidth test, which perftest takes and then
	// never completes a run with, and a receive list below 1 in send's,
	// whose RX depth perftest divides by it. The latency tests use
	// neither, and take any value, as perftest does.
	if o.Tst == BW && o.PostList < 1 {
		return &usageError{msg: " Send Post List size should be positive"}
	}
	if o.Tst == BW && v == Send && o.RecvPostList < 1 {
		return &usageError{msg: " Receive Post List size must be positive"}
	}
	return nil
}

// cryptoDependencies are perftest's checks of the DC stream and AES-XTS
// options (force_dependecies, after run_infinitely's). DC is refused
// while parsing, so a stream count always fails here, as it does in
// perftest on any other transport.
func (o *Options) cryptoDependencies(v Verb) error {
	fail := func(msg string) error { return &usageError{msg: " " + msg, quiet: true, resultLine: true} }
	if o.logDCIStreams != 0 {
		return fail("log_dci_streams supported only on DC")
	}
	if o.logActiveDCIStreams > 0 {
		return fail("log_active_dci_streams supported only on DC")
	}
	if !o.aesXTS {
		switch {
		case o.encryptOnTx:
			return fail("encrypt_on_tx supported only when enc/dec traffic")
		case o.sigBefore:
			return fail("sig_before supported only when enc/dec traffic")
		case o.credentialsPath:
			return fail("giving credentials path supported only with enc/dec traffic")
		case o.kekPath, o.dataEncKeyAppPath:
			// perftest words both alike.
			return fail("giving kek path supported only with enc/dec traffic")
		}
		return nil
	}
	switch {
	case o.Conn != RC:
		return fail("aes_xts supported only on RC")
	case !o.kekPath:
		return fail("Please provide key encryption key file path")
	case !o.dataEncKeyAppPath:
		return fail("Please provide data encryption key app path")
	case !o.credentialsPath:
		return fail("Please provide credentials file path")
	case o.oldPostSend:
		return fail("aes_xts doesn't support old post send")
	case o.rdmaCM:
		return fail("rdma_cm doesn't support aes_xts")
	case o.Tst == LAT && v == Write:
		return fail("aes_xts isn't supported on write_lat")
	case int64(int32(o.Size)) <= int64(o.Inline):
		return fail("aes_xts doesn't support Inline messages")
	}
	// perftest's next check (-G) comes first. Encrypted traffic needs
	// mlx5's crypto objects (mlx5dv), which rxe has not.
	if err := o.rssDependency(); err != nil {
		return err
	}
	return unsupported("--aes_xts")
}

// rateDependencies are perftest's checks of the rate limiter's options
// (force_dependecies), and the burst's default: the TX depth.
func (o *Options) rateDependencies(v Verb) error {
	if o.burstSize > 0 && o.rateType == rateOff {
		return &usageError{msg: " Can't enable burst mode when rate limiter is off", quiet: true, resultLine: true}
	}
	if o.burstSize <= 0 {
		if o.rateType == rateSW {
			o.warn += fmt.Sprintf(" Setting burst size to tx depth = %d\n", o.TxDepth)
		}
		if o.rateType != ratePP {
			o.burstSize = o.TxDepth
		}
	}
	if o.typicalPktSize != 0 && o.rateType != ratePP {
		return &usageError{msg: " Typical packet size only supports PP rate limiter", quiet: true, resultLine: true}
	}
	switch o.rateType {
	case rateSW:
		if o.Tst != BW || v == Atomic || (v == Send && o.Duplex) {
			return &usageError{msg: "SW Rate limiter cann't be executed on non-BW, ATOMIC or bidirectional SEND tests", quiet: true, resultLine: true}
		}
	case rateHW:
		if o.commCM {
			return &usageError{msg: " HW rate limit isn't supported yet with rdma_cm scenarios", quiet: true}
		}
		gbps := o.rateLimit
		switch o.rateUnits {
		case unitPps:
			return &usageError{msg: " Failed: pps rate limit units is not supported when setting HW rate limit", quiet: true, resultLine: true}
		case unitMBps:
			gbps = o.rateLimit * 8 * 1024 * 1024 / 1e9
		}
		if gbps <= 0 {
			// No limit to look up (--rate_limit_type HW alone): perftest
			// goes on without one.
			return nil
		}
		o.hwRate = -1
		for _, r := range hwRates {
			if r.name == o.rateStr {
				o.hwRate = int(r.rate)
			}
		}
		if o.hwRate < 0 {
			var b strings.Builder
			b.WriteString("\x1b[31mThe input value for hw rate limit is not supported\x1b[0m\n")
			for _, r := range hwRates {
				fmt.Fprintf(&b, "\t\t\t %s Gbps \t\t\n", r.name)
			}
			o.notice += b.String()
			return &usageError{msg: " Failed: Unknown rate limit value", quiet: true, resultLine: true}
		}
	case ratePP:
		// Packet pacing is for raw Ethernet QPs, which the tools do not
		// have.
		return &usageError{msg: "Packet Pacing is only supported for Raw Ethernet.", quiet: true}
	}
	return nil
}

// Output is what the tools print (perftest's --output).
type Output int

const (
	OutputFull    Output = iota // everything: test info, addresses, the table
	OutputBW                    // --output=bandwidth: each line's average bandwidth alone
	OutputMsgRate               // --output=message_rate: each line's message rate alone
	OutputLatency               // --output=latency: the latency tests' average alone
)

// Conn is a connection type (perftest's -c).
type Conn int

// The connection types the tools run.
const (
	RC Conn = iota // reliable connected (the default)
	UC             // unreliable connected
	UD             // unreliable datagram (send only)
)

func (c Conn) String() string {
	switch c {
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return "RC"
}

// period is -D, or perftest's default duration without it: the length
// of a run of fixed duration, the time between the lines of a run
// without end.
func (o *Options) period() int {
	if o.Duration > 0 {
		return o.Duration
	}
	return defDuration
}

// Usage writes the tool's usage text (stdout, as perftest prints it).
func Usage(w io.Writer, v Verb, prog string) { UsageTest(w, BW, v, prog) }

// UsageTest is Usage for a bandwidth (BW) or latency (LAT) test: the
// options the Go tool of that test takes.
func UsageTest(w io.Writer, tst Test, v Verb, prog string) {
	fmt.Fprintf(w, "Usage:\n  %s            start a server and wait for connection\n  %s <host>     connect to server at <host>\n\nOptions:\n", prog, prog)
	iters := defIters
	if v == Write && tst == BW {
		iters = defItersWrite
	}
	bwOnly := func(l ...string) []string {
		if tst == BW {
			return l
		}
		return nil
	}
	latOnly := func(l ...string) []string {
		if tst == LAT {
			return l
		}
		return nil
	}
	var lines []string
	if v == Atomic {
		// The atomic tests have one size, 8 bytes: no -a, no -s.
		lines = append(lines, "  -A, --atomic_type=<type>  type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)")
	} else {
		lines = append(lines, "  -a, --all  Run sizes from 2 till 2^23")
	}
	lines = append(lines, bwOnly("  -b, --bidirectional  Measure bidirectional bandwidth (default unidirectional)")...)
	switch v {
	case Send:
		lines = append(lines, "  -c, --connection=<RC/UC/UD>  Connection type RC/UC/UD (default RC)")
	case Write:
		lines = append(lines, "  -c, --connection=<RC/UC>  Connection type RC/UC (default RC)")
	}
	lines = append(lines, latOnly("  -C, --report-cycles  report times in cpu cycle units (default microseconds)")...)
	lines = append(lines, "  -d, --ib-dev=<dev>  Use IB device <dev> (default first device found)")
	lines = append(lines, "  -D, --duration  Run test for a customized period of seconds.")
	if v != Write {
		lines = append(lines,
			"  -e, --events  Sleep on CQ events (default poll)",
			"  -X, --vector=<completion vector>  Set <completion vector> used for events")
	}
	lines = append(lines,
		"  -f, --margin  measure results within margins. (default=2sec)",
		"  -F, --CPU-freq  Accepted for perftest compatibility (the Go tools time with the monotonic clock)",
		"  -h, --help  Show this help screen.",
	)
	lines = append(lines, latOnly("  -H, --report-histogram  Print out all results (default print summary only)")...)
	lines = append(lines, "  -i, --ib-port=<port>  Use port <port> of IB device (default 1)")
	if !v.ReadsBack() {
		def := "default 0 in BW tests"
		if tst == LAT {
			def = "default 0: perftest's on devices it does not know, rxe among them"
		}
		lines = append(lines, "  -I, --inline_size=<size>  Max size of message to be sent in inline ("+def+")")
	}
	lines = append(lines, bwOnly("  -l, --post_list=<list size>  Post list of send WQEs of <list size> size (instead of single post)")...)
	lines = append(lines,
		"  -m, --mtu=<mtu>  MTU size : 256 - 4096 (default port mtu)",
		fmt.Sprintf("  -n, --iters=<iters>  Number of exchanges (at least %d, default %d)", minIter, iters),
	)
	lines = append(lines, bwOnly("  -N, --noPeak  Skip the peak bandwidth (its timestamps) in the report")...)
	if v.ReadsBack() {
		lines = append(lines, "  -o, --outs=<num>  num of outstanding read/atom(default max of device)")
	}
	lines = append(lines, "  -p, --port=<port>  Listen on/connect to port <port> (default 18515)")
	lines = append(lines, bwOnly(
		"  -q, --qp=<num of qp's>  Num of qp's(default 1)",
		fmt.Sprintf("  -Q, --cq-mod  Generate Cqe only after <--cq-mod> completion (default %d)", defCQMod))...)
	if v == Send {
		lines = append(lines, fmt.Sprintf("  -r, --rx-depth=<dep>  Rx queue size (default %d).", defRxSend))
	}
	lines = append(lines, "  -R, --rdma_cm  Connect QPs with rdma_cm and run test on those QPs (RC; implies -z)")
	size, tx := defSize, defTxDepth
	if tst == LAT {
		size, tx = defSizeLat, defTxLat
	}
	if v != Atomic {
		lines = append(lines, fmt.Sprintf("  -s, --size=<size>  Size of message to exchange (default %d)", size))
	}
	lines = append(lines,
		"  -S, --sl=<sl>  SL (default 0)",
		fmt.Sprintf("  -t, --tx-depth=<dep>  Size of tx queue (default %d)", tx),
		fmt.Sprintf("  -u, --qp-timeout=<timeout>  QP timeout, timeout value is 4 usec * 2 ^(timeout), default %d", defQPTimeout),
	)
	lines = append(lines, latOnly("  -U, --report-unsorted  (implies -H) print out unsorted results (default sorted)")...)
	lines = append(lines,
		"  -V, --version  Display version number",
		"  -W, --report-counters=<list of counter names>  Report performance counter change (example: \"counters/port_xmit_data,hw_counters/out_of_buffer\")",
		"  -x, --gid-index=<index>  Test uses GID with GID index",
		"  -z, --comm_rdma_cm  Communicate with rdma_cm module to exchange data - use regular QPs",
	)
	if tst == LAT {
		lines = append(lines, "      --output=<units>  Set verbosity output level: latency")
	} else {
		lines = append(lines, "      --output=<units>  Set verbosity output level: bandwidth , message_rate")
	}
	lines = append(lines, "      --cpu_util  Show CPU Utilization in report, valid only in Duration mode")
	lines = append(lines, "      --out_json  Save the report in a json file")
	lines = append(lines, "      --out_json_file=<file>  Name of the report json file. (Default: "+defJSONFile+" in the working directory)")
	lines = append(lines, "      --disable_pcie_relaxed  Disable PCIe relaxed ordering")
	lines = append(lines, "      --ipv6  Use IPv6 GID. Default is IPv4")
	lines = append(lines, "      --use_hugepages  Use Hugepages instead of contig, memalign allocations.")
	lines = append(lines, "      --odp  Use On Demand Paging instead of Memory Registration.")
	lines = append(lines, bwOnly(
		"      --burst_size=<size>  Set the amount of messages to send in a burst when using rate limiter",
		"      --typical_pkt_size=<bytes>  Set the size of packet to send in a burst. Only supports PP rate limiter",
		"      --rate_limit=<rate>  Set the maximum rate of sent packages. default unit is [Gbps]. use --rate_units to change that.",
		"      --rate_units=<units>  [Mgp] Set the units for rate limit to MiBps (M), Gbps (g) or pps (p). default is Gbps (g).",
		"      --rate_limit_type=<type>  [HW/SW/PP] Limit the QP's by HW, PP or by SW. Disabled by default. When rate_limit is not specified HW limit is Default.")...)
	lines = append(lines, "      --dont_xchg_versions  Do not exchange versions and MTU with other side")
	lines = append(lines, "      --retry_count=<value>  Set retry count value in rdma_cm mode")
	lines = append(lines, "      --dlid  Set a Destination LID instead of getting it from the other side.",
		"      --force-link=<value>  Force the link(s) to a specific type: IB or Ethernet.",
		"      --inline_recv=<size>  Accepted for perftest compatibility (no test uses it)",
		"      --reply_every  Accepted for perftest compatibility (raw Ethernet only)",
		"  -B, -E, -J, -j, -K, -k, -P, -Z, --ethertype, --flows, --flows_burst, --local_ip, --local_mac, --local_port,",
		"      --promiscuous, --raw_ipv6, --raw_mcast, --remote_ip, --remote_mac, --remote_port, --tcp, --vlan_en, --vlan_pcp",
		"      Accepted for perftest compatibility: raw Ethernet's, checked as perftest checks them and ignored on RC, UC and UD",
		"  -M, --MGID=<multicast_gid>  Accepted for perftest compatibility (the group of -g, which is refused)")
	lines = append(lines, "      --mmap=file  Use an mmap'd file as the buffer for testing P2P transfers.",
		"      --mmap-offset=<offset>  Use an mmap'd file as the buffer for testing P2P transfers.")
	if v.ReadsBack() && tst == BW {
		lines = append(lines, "      --perform_warm_up  Perform some iterations before start measuring in order to warming-up memory cache, valid in Atomic, Read and Write BW tests")
	}
	lines = append(lines, latOnly("      --latency_gap=<delay_time>  delay time between each post send (microseconds)")...)
	lines = append(lines, bwOnly("      --mr_per_qp  Create memory region for each qp.")...)
	if v == Send {
		lines = append(lines, bwOnly("      --recv_post_list=<list size>  Post list of receive WQEs of <list size> size (instead of single post)")...)
	}
	lines = append(lines, bwOnly(
		"      --report_gbits  Report Max/Average BW of test in Gbit/sec (instead of MiB/sec)",
		"      --report-both  Report RX & TX results separately on Bidirectional BW tests",
		"      --run_infinitely  Run test forever, print results every <duration> seconds")...)
	kinds := map[Verb]string{Write: "RC or UC", Send: "RC, UC or UD", Read: "RC", Atomic: "RC"}[v]
	qps := " This Go port runs " + kinds + " QPs (-q of them), exchanging addresses over TCP as perftest " + Version + " does,"
	if tst == LAT {
		qps = " This Go port runs one " + kinds + " QP, exchanging addresses over TCP as perftest " + Version + " does,"
	}
	lines = append(lines, "", qps, " so either side may be "+v.CToolTest(tst)+". Other perftest options are refused.")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
