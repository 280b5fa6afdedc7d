package bw

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

func TestParseArgsDefaults(t *testing.T) {
	for _, c := range []struct {
		v      Verb
		args   []string
		iters  uint64
		rx, cq int
		server string
		noPeak bool
		size   uint64
		tx     int
		inline int
	}{
		// Large messages: no completion moderation.
		{Write, nil, 5000, 1, 1, "", false, 65536, 128, 0},
		{Read, []string{"host"}, 1000, 1, 1, "host", false, 65536, 128, 0},
		// The send server times from its first receive, without a peak.
		{Send, nil, 1000, 512, 1, "", true, 65536, 128, 0},
		{Send, []string{"h"}, 1000, 512, 1, "h", false, 65536, 128, 0},
		// Small messages keep CQ moderation 100.
		{Write, []string{"-s", "4096", "h"}, 5000, 1, 100, "h", false, 4096, 128, 0},
		// tx depth and rx depth are capped at the iterations, cq_mod at tx depth.
		{Send, []string{"-n", "50", "-s", "64", "h"}, 50, 50, 50, "h", false, 64, 50, 0},
		// An odd rx depth of SEND is made even.
		{Send, []string{"-r", "7"}, 1000, 8, 1, "", true, 65536, 128, 0},
		// -a: sizes up to 8 MiB, moderation kept.
		{Write, []string{"-a", "h"}, 5000, 1, 100, "h", false, 8388608, 128, 0},
		// Above 20000 iterations perftest drops the peak.
		{Write, []string{"-n", "20001", "h"}, 20001, 1, 1, "h", true, 65536, 128, 0},
		// Options after the operand (getopt permutes), clustered, long, sizes with K/M.
		{Write, []string{"h", "-aF", "--iters=100", "--size", "2K"}, 100, 1, 100, "h", false, 8388608, 100, 0},
		{Send, []string{"-s", "1M", "-I", "64", "--report_gbits", "h"}, 1000, 512, 1, "h", false, 1 << 20, 128, 64},
		{Write, []string{"-s", "0x100", "-Q", "4", "h"}, 5000, 1, 4, "h", false, 256, 128, 0},
		// With events, large messages keep the moderation.
		{Read, []string{"-e", "h"}, 1000, 1, 100, "h", false, 65536, 128, 0},
		{Send, []string{"--events", "-X", "0", "h"}, 1000, 512, 100, "h", false, 65536, 128, 0},
		// Atomics: 8 bytes, moderated, no inline; -a with
		// --run_infinitely is no -a.
		{Atomic, []string{"h"}, 1000, 1, 100, "h", false, 8, 128, 0},
		{Atomic, []string{"-s", "8", "-A", "CMP_AND_SWAP", "h"}, 1000, 1, 100, "h", false, 8, 128, 0},
		{Atomic, []string{"-a", "--run_infinitely", "h"}, 1000, 1, 100, "h", true, 8, 128, 0},
		// Duration: no iteration count, no peak, depths not capped by it.
		{Write, []string{"-D", "3", "-s", "64", "h"}, 0, 1, 100, "h", true, 64, 128, 0},
		{Send, []string{"-D", "3", "-n", "50", "h"}, 0, 512, 1, "h", true, 65536, 128, 0},
	} {
		o, err := ParseArgs(c.v, c.args)
		if err != nil {
			t.Errorf("%v %q: %v", c.v, c.args, err)
			continue
		}
		if o.Iters != c.iters || o.RxDepth != c.rx || o.CQMod != c.cq || o.Server != c.server || o.NoPeak != c.noPeak ||
			o.Size != c.size || o.TxDepth != c.tx || o.Inline != c.inline || o.Port != 18515 || o.IBPort != 1 {
			t.Errorf("%v %q: %+v", c.v, c.args, o)
		}
	}
	o, _ := ParseArgs(Send, []string{"--report_gbits", "-x", "3", "-d", "rxe0", "-p", "20001", "-i", "1", "-m", "1024", "-u", "20", "-S", "2", "-N"})
	if !o.Gbits || o.GIDIndex != 3 || o.Dev != "rxe0" || !o.DevSet || o.Port != 20001 || o.MTU != 1024 || o.QPTimeout != 20 || o.SL != 2 || !o.NoPeak {
		t.Errorf("%+v", o)
	}
	if o, _ := ParseArgs(Send, []string{"-e", "--vector=3"}); !o.Events || o.Vector != 3 {
		t.Errorf("-e --vector=3: %+v", o)
	}
	if o, err := ParseArgs(Read, []string{"-b", "--report-both", "h"}); err != nil || !o.Duplex || !o.Both {
		t.Errorf("-b --report-both: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Write, []string{"h"}); err != nil || o.NoRelaxed {
		t.Errorf("relaxed ordering by default: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Write, []string{"--disable_pcie_relaxed", "--use_old_post_send", "h"}); err != nil || !o.NoRelaxed {
		t.Errorf("--disable_pcie_relaxed: %+v, %v", o, err)
	}
	// --run_infinitely: no peak, perftest's margin, and -a ignored (its
	// test method replaces -a's).
	if o, err := ParseArgs(Send, []string{"--run_infinitely", "-a", "-r", "7"}); err != nil || !o.Infinite || o.All || !o.NoPeak ||
		o.Margin != 1 || o.Size != defSize || o.RxDepth != 7 || o.Iters != defIters {
		t.Errorf("--run_infinitely -a: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Write, []string{"--run_infinitely", "-D", "2", "h"}); err != nil || o.Margin != 0 || o.period() != 2 {
		t.Errorf("--run_infinitely -D 2: %+v, %v", o, err)
	}
	// UC: every receive of a run posted before it starts, up to 16000.
	for _, c := range []struct {
		args []string
		rx   int
	}{{[]string{"-c", "UC"}, 1000}, {[]string{"-c", "UC", "-n", "20000"}, 16000}, {[]string{"-c", "UC", "-r", "64"}, 64}} {
		if o, err := ParseArgs(Send, c.args); err != nil || o.Conn != UC || o.RxDepth != c.rx || o.Conn.String() != "UC" {
			t.Errorf("%q: %+v, %v", c.args, o, err)
		}
	}
	// UD: the large-message moderation rule does not apply (the size
	// becomes the MTU's later); inline at most 884, with perftest's lines.
	if o, err := ParseArgs(Send, []string{"-c", "UD"}); err != nil || o.Conn != UD || o.RxDepth != 1000 || o.CQMod != defCQMod {
		t.Errorf("-c UD: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Send, []string{"-c", "UD", "-I", "900"}); err != nil || o.Inline != 884 || o.notice != resultLine ||
		o.warn != "Setting inline size to 884 (Max inline size in UD)\n" {
		t.Errorf("-c UD -I 900: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Read, []string{"--qp=4", "h"}); err != nil || o.QPs != 4 {
		t.Errorf("--qp=4: %+v, %v", o, err)
	}
	// -O: two QPs per -q (one on each port), and port 1 whatever -i said before.
	if o, err := ParseArgs(Write, []string{"-i", "3", "-q", "2", "-O"}); err != nil || o.QPs != 4 || o.IBPort != 1 || !o.dualPort {
		t.Errorf("-O: %+v, %v", o, err)
	}
	if o, _ := ParseArgs(Read, nil); o.QPs != 1 {
		t.Errorf("default QPs %d", o.QPs)
	}
	// A post list sets the moderation to its size unless -Q gives one,
	// and says so on stdout.
	if o, err := ParseArgs(Send, []string{"-l", "8", "h"}); err != nil || o.PostList != 8 || o.CQMod != 8 ||
		o.notice != resultLine+"Post List requested - CQ moderation will be the size of the post list\n" {
		t.Errorf("-l 8: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Write, []string{"-l", "8", "-Q", "4", "-s", "64", "h"}); err != nil || o.CQMod != 4 || o.notice != "" {
		t.Errorf("-l 8 -Q 4: %+v, %v", o, err)
	}
	// Moderation asked for on large messages: perftest warns.
	if o, err := ParseArgs(Write, []string{"-Q", "4", "h"}); err != nil || o.CQMod != 4 ||
		o.notice != resultLine+"Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n" {
		t.Errorf("-Q 4 on 64 KiB: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Write, []string{"-l", "8", "-Q", "4", "-s", "64", "h"}); err != nil || o.CQMod != 4 || o.notice != "" {
		t.Errorf("-l 8 -Q 4: %+v, %v", o, err)
	}
	// The margin: a quarter of the duration unless -f gives it.
	for _, c := range []struct {
		args             []string
		duration, margin int
	}{{[]string{"-D", "10"}, 10, 2}, {[]string{"-D", "3"}, 3, 0}, {[]string{"-D", "10", "-f", "4"}, 10, 4}, {[]string{"-f", "2"}, 0, 2}} {
		if o, err := ParseArgs(Read, c.args); err != nil || o.Duration != c.duration || o.Margin != c.margin {
			t.Errorf("%q: duration %d margin %d (%v), want %d and %d", c.args, o.Duration, o.Margin, err, c.duration, c.margin)
		}
	}
	if o, _ := ParseArgs(Write, nil); o.GIDIndex != -1 {
		t.Errorf("default GID index %d, want -1", o.GIDIndex)
	}
	// --recv_post_list: any multiple of the iterations (any with -D).
	if o, err := ParseArgs(Send, []string{"--recv_post_list", "8", "-n", "1000", "h"}); err != nil || o.RecvPostList != 8 || o.RxDepth != 512 {
		t.Errorf("--recv_post_list 8: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Send, []string{"--recv_post_list", "7", "-D", "2", "h"}); err != nil || o.RecvPostList != 7 {
		t.Errorf("--recv_post_list 7 -D 2: %+v, %v", o, err)
	}
	// --cpu_util: a column of -D runs; without -D perftest says so and
	// goes on without it.
	if o, err := ParseArgs(Write, []string{"--cpu_util", "-D", "4", "h"}); err != nil || !o.cpuUtil || o.warn != "" {
		t.Errorf("--cpu_util -D 4: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Read, []string{"--cpu_util", "--mr_per_qp", "h"}); err != nil || o.cpuUtil || !o.MRPerQP ||
		o.notice != resultLine || o.warn != " CPU Utilization works only with Duration mode.\n" {
		t.Errorf("--cpu_util without -D: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Read, []string{"--use_hugepages", "--perform_warm_up", "--ipv6", "--out_json", "--odp", "h"}); err != nil ||
		!o.HugePages || !o.WarmUp || !o.ipv6 || !o.OutJSON || o.OutJSONFile != "perftest_out.json" || !o.ODP {
		t.Errorf("flags: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Write, []string{"--dont_xchg_versions", "h"}); err != nil || !o.noVersions {
		t.Errorf("--dont_xchg_versions: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Send, []string{"--out_json_file=/tmp/x.json", "h"}); err != nil || o.OutJSON || o.OutJSONFile != "/tmp/x.json" {
		t.Errorf("--out_json_file alone: %+v, %v", o, err)
	}
	// The rate limiter: HW by default, an IB rate named as perftest names
	// it; a burst of the TX depth unless given (SW says so).
	if o, err := ParseArgs(Write, []string{"--rate_limit", "10", "h"}); err != nil || o.rateType != rateHW || o.hwRate != int(uverbs.Rate10Gbps) ||
		o.burstSize != 128 || o.rateTypeGiven || o.rateUnits != unitGbps {
		t.Errorf("--rate_limit 10: %+v, %v", o, err)
	}
	if o, err := ParseArgs(Read, []string{"--rate_limit=2.5", "--rate_limit_type", "SW", "--rate_units", "M", "-t", "64", "h"}); err != nil ||
		o.rateType != rateSW || o.rateLimit != 2.5 || o.rateUnits != unitMBps || o.burstSize != 64 || !o.rateTypeGiven ||
		o.warn != " Setting burst size to tx depth = 64\n" {
		t.Errorf("SW at 2.5 MB/s: %+v, %v", o, err)
	}
	// (In MB/s perftest still names the IB rate by the argument.)
	if o, err := ParseArgs(Write, []string{"--rate_limit", "40", "--rate_units", "M", "--burst_size", "16", "h"}); err != nil ||
		o.rateType != rateHW || o.burstSize != 16 || o.hwRate != int(uverbs.Rate40Gbps) {
		t.Errorf("HW in MB/s: %+v, %v", o, err)
	}
	// perftest's casts: the traffic class is a uint16_t, then the GRH's
	// byte; the wait a uint32_t; the P_Key index an int.
	if o, err := ParseArgs(Send, []string{"--tclass", "300", "--wait_destroy=0x10", "--pkey_index", "2", "--retry_count=9", "--flow_label=1", "h"}); err != nil ||
		o.tclass != 44 || o.waitDestroy != 16 || o.pkeyIndex != 2 {
		t.Errorf("long options: %+v, %v", o, err)
	}
}

func TestParseArgsErrors(t *testing.T) {
	for _, c := range []struct {
		v    Verb
		args []string
		want string
	}{
		{Write, []string{"-n", "4"}, " Iteration num should be between 5 and 100000000"},
		{Write, []string{"-n", "12x"}, " Iteration num argument 12x should be int"},
		// CHECK_VALUE's strtol: "" is 0, a number past a long saturates
		// (an int -1 after the cast), trailing space is not a number.
		{Write, []string{"-t", ""}, " Tx depth should be between 1 and 15000"},
		{Send, []string{"-r", "99999999999999999999"}, "  Rx depth should be between 1 and 16384"},
		{Write, []string{"-n", "5 "}, " Iteration num argument 5  should be int"},
		{Write, []string{"-n", "0x"}, " Iteration num argument 0x should be int"},
		{Write, []string{"-t", "0"}, " Tx depth should be between 1 and 15000"},
		{Write, []string{"-r", "2"}, " On RDMA verbs rx depth can be only 1"},
		{Read, []string{"-I", "8"}, " Inline feature not available on READ/Atomic verbs"},
		{Write, []string{"-o", "4"}, " Setting Outstanding reads only available on READ verb"},
		{Write, []string{"-s", "0"}, " Message Size should be between 1 and 2147483647"},
		{Write, []string{"-S", "16"}, " Only 15 Service levels"},
		{Write, []string{"-R", "-c", "UC"}, " UC is not supported in librdmacm"},
		{Write, []string{"-z", "--rate_limit", "10", "--rate_limit_type", "HW"}, " HW rate limit isn't supported yet with rdma_cm scenarios"},
		{Write, []string{"-R", "--rate_limit", "10", "--rate_limit_type", "HW"}, " HW rate limit isn't supported yet with rdma_cm scenarios"},
		{Read, []string{"--run_infinitely", "-e"}, " run_infinitely does not support events feature yet."},
		{Send, []string{"--run_infinitely", "-D", "2", "-e"}, "Duration mode doesn't work with events."},
		{Write, []string{"--run_infinitely", "-f", "3"}, "please check that DURATION > 2*MARGIN"},
		{Read, []string{"-c", "UC"}, " UC connection not possible in READ/ATOMIC verbs"},
		{Write, []string{"-c", "UD"}, " UD connection only possible in SEND verb"},
		{Write, []string{"-c", "XRC"}, " -c XRC: this port runs RC, UC and UD only"},
		{Read, []string{"--use-srq"}, " Using SRQ only avavilible in SEND tests."},
		{Write, []string{"--output=latency"}, " Output verbosity level for BW can be: bandwidth, message_rate"},
		{Write, []string{"-w", "-1"}, " Invalid Minimum BW Limit"},
		{Send, []string{"-y", "-0.5"}, " Invalid Minimum msgRate Limit"},
		{Write, []string{"--output=bw"}, " Invalid verbosity level output flag. Please use bandwidth, latency, message_rate"},
		{Send, []string{"--use-srq", "-q", "8", "-r", "4"}, " Using SRQ depth should be greater than number of QPs."},
		{Write, []string{"-c", "uc"}, " Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}"},
		{Write, []string{"-q", "0"}, " num of Qps should be between 1 and 16384"},
		{Send, []string{"-q", "16385"}, " num of Qps should be between 1 and 16384"},
		{Write, []string{"a", "b"}, " Invalid Command line. Please check command rerun "},
		{Write, []string{"-e"}, " Events feature not available on WRITE verb"},
		{Write, []string{"-X", "0"}, " Events feature not available on WRITE verb"},
		{Read, []string{"-X", "0"}, " Events must be enabled to select a completion vector"},
		{Send, []string{"-e", "-X", "2049"}, " EQN should be between 0 and 2048"},
		{Send, []string{"-e", "-X", "v"}, " EQN argument v should be int"},
		{Write, []string{"-D", "0"}, " Duration period must be positive"},
		{Write, []string{"-D", "x"}, " Duration period argument x should be int"},
		{Write, []string{"-f", "-1"}, " Margin must be non-negative"},
		{Write, []string{"-D", "4", "-f", "2"}, "please check that DURATION > 2*MARGIN"},
		{Write, []string{"-f", "3"}, "please check that DURATION > 2*MARGIN"}, // against the default 5 s
		{Read, []string{"-D", "4", "-a"}, "Duration mode currently doesn't support running on all sizes."},
		{Write, []string{"-l", "3", "-n", "100"}, "Number of iterations must be a multiple of post list size"},
		{Write, []string{"-l", "8", "-Q", "3"}, "Post list size must be a multiple of CQ moderation"},
		{Write, []string{"-l", "0"}, " Send Post List size should be positive"},
		{Write, []string{"-l", "256", "-t", "128", "-n", "1024"}, " Post list size 256 exceeds the TX depth 128"},
		{Write, []string{"--retry_count=-1"}, " Retry Count must be non-negative"},
		{Send, []string{"--flow_label", "0x"}, " flow label argument 0x should be int"},
		{Read, []string{"--flow_label", "-3"}, " flow label must be non-negative"},
		{Write, []string{"--tclass", "x"}, " traffic class argument x should be uint16_t"},
		{Send, []string{"--wait_destroy", "1s"}, " wait_destroy argument 1s should be uint32_t"},
		{Read, []string{"--pkey_index", "one"}, " Pkey index argument one should be int"},
		{Send, []string{"--recv_post_list", "3", "-n", "100"}, "Number of iterations must be a multiple of receive post list size"},
		{Send, []string{"--recv_post_list=0"}, " Receive Post List size must be positive"},
		{Send, []string{"--recv_post_list", "x"}, " Receive Post List size argument x should be int"},
		{Send, []string{"--recv_post_list", "16", "-n", "32", "-r", "8"}, " Receive post list size 16 exceeds the RX depth 8"},
		{Send, []string{"--recv_post_list", "4", "-n", "32", "-r", "8", "-q", "4", "--use-srq"}, " Receive post list size 4 exceeds the RX depth 8"},
		{Send, []string{"-c", "UC", "--odp"}, " ODP does not support UC"},
		{Write, []string{"--rate_limit", "0"}, " Rate limit must be non-negative"},
		{Write, []string{"--rate_limit", "x"}, " Rate limit must be non-negative"},
		{Write, []string{"--burst_size", "-1"}, " Burst size must be non-negative"},
		{Write, []string{"--burst_size", "8"}, " Can't enable burst mode when rate limiter is off"},
		{Write, []string{"--rate_units", "G"}, " Invalid rate limit units. Please use M,g or p"},
		{Write, []string{"--rate_limit_type", "sw"}, " Invalid rate limit type flag. Please use HW, SW or PP."},
		{Write, []string{"--typical_pkt_size", "10"}, " Typical packet size only supports PP rate limiter"},
		{Write, []string{"--typical_pkt_size", "70000"}, " Typical pkt size should be between 0 and 65535"},
		{Send, []string{"--rate_limit", "1", "--rate_limit_type", "SW", "-b"}, "SW Rate limiter cann't be executed on non-BW, ATOMIC or bidirectional SEND tests"},
		{Write, []string{"--rate_limit", "7"}, " Failed: Unknown rate limit value"},
		{Write, []string{"--rate_limit", "10", "--rate_units", "p"}, " Failed: pps rate limit units is not supported when setting HW rate limit"},
		{Write, []string{"--rate_limit", "10", "--rate_limit_type", "PP"}, "Packet Pacing is only supported for Raw Ethernet."},
		// The atomic tests: 8 bytes only (-a asks for 8 MiB), two
		// operations; -A belongs to them.
		{Atomic, []string{"-s", "16"}, "Message size cannot be changed for Atomic tests "},
		{Atomic, []string{"-a"}, "Message size cannot be changed for Atomic tests "},
		{Atomic, []string{"-D", "4", "-a"}, "Message size cannot be changed for Atomic tests "},
		{Atomic, []string{"-A", "SWAP"}, " Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}"},
		{Read, []string{"-A", "CMP_AND_SWAP"}, " You are not running the atomic_lat/bw test!\n To change the atomic action type, you must run one of the atomic tests"},
		{Atomic, []string{"-c", "UC"}, " UC connection not possible in READ/ATOMIC verbs"},
		{Atomic, []string{"-I", "8"}, " Inline feature not available on READ/Atomic verbs"},
		{Atomic, []string{"--odp"}, " ODP does not support ATOMICS for now"},
		{Atomic, []string{"--rate_limit", "1", "--rate_limit_type", "SW"}, "SW Rate limiter cann't be executed on non-BW, ATOMIC or bidirectional SEND tests"},
		{Read, []string{"--dlid", "x"}, " dlid argument x should be uint16_t"},
		{Write, []string{"--inline_recv", "4k"}, " Inline Receive size argument 4k should be int"},
		{Send, []string{"--reply_every=x"}, " reply_every argument x should be uint32_t"},
		{Write, []string{"--report-per-port", "-D", "4"}, "report per port feature work only with Duration and Dualport"},
		{Write, []string{"--force-link", "RoCE"}, "Invalid link layer value should be IB or ETHERNET."},
		// Raw Ethernet's options are checked as perftest checks them
		// (perftest_parameters.c:2540-2547) and ignored on RC, UC and UD
		// (rawopts_test.go); --reversed, which swaps the roles, is
		// refused.
		{Write, []string{"-k", "1x"}, " Client Port argument 1x should be int"},
		{Write, []string{"-Z", "--reversed"}, " --reversed: not supported by this port of perftest (pureverbs)"},
		{Write, []string{"-y"}, "option requires an argument -- 'y'"},
		{Write, []string{"--nosuch"}, "unrecognized option '--nosuch'"},
		// Names of Debian's build that the Go tools refuse or ignore still
		// take part in abbreviations; source_ip is in perftest's table twice.
		{Write, []string{"--raw"}, "option '--raw' is ambiguous; possibilities: '--raw_ipv6' '--raw_mcast'"},
		{Write, []string{"--source_i", "1.2.3.4"}, "option '--source_i' is ambiguous; possibilities: '--source_ip' '--source_ip'"},
		{Write, []string{"--source_ip", "1.2.3.256"}, " Invalid client IP address"}, // -j's check, perftest_parameters.c:2967-2971
		{Write, []string{"--aes_block_size=x"}, " aes_block_size argument x should be uint16_t"},
		{Read, []string{"--log_active=1x"}, " log_active_dci_streams argument 1x should be uint16_t"},
		{Send, []string{"--enc"}, " encrypt_on_tx supported only when enc/dec traffic"},
		{Write, []string{"--re"}, "option '--re' is ambiguous; possibilities: '--report-cycles' '--report-histogrm' '--report-unsorted' '--report-counters' '--remote_mac' '--remote_ip' '--remote_port' '--report_gbits' '--report-both' '--reversed' '--retry_count' '--report-per-port' '--reply_every' '--recv_post_list'"},
	} {
		_, err := ParseArgs(c.v, c.args)
		var ue *usageError
		if !errors.As(err, &ue) || ue.msg != c.want {
			t.Errorf("%v %q: %v, want %q", c.v, c.args, err, c.want)
		}
	}
}

func TestMainHelpVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := Main(Read, "readbw", []string{"-V"}, &out, &errb); rc != 1 || out.String() != "Version: 6.06\n" {
		t.Errorf("-V: rc %d, %q", rc, out.String())
	}
	out.Reset()
	if rc := Main(Send, "sendbw", []string{"-h"}, &out, &errb); rc != 1 || !strings.Contains(out.String(), "  -r, --rx-depth=<dep>") ||
		!strings.HasPrefix(out.String(), "Usage:\n  sendbw            start a server") {
		t.Errorf("-h: rc %d:\n%s", rc, out.String())
	}
	out.Reset()
	if rc := Main(Write, "writebw", []string{"-R", "--reversed"}, &out, &errb); rc != 1 || errb.String() != " --reversed: not supported by this port of perftest (pureverbs)\n Parser function exited with Error\n" {
		t.Errorf("-R --reversed: rc %d, stderr %q", rc, errb.String())
	}
	// perftest prints its rule on stdout, then the complaint.
	out.Reset()
	errb.Reset()
	if rc := Main(Send, "sendbw", []string{"-D", "4", "-e"}, &out, &errb); rc != 1 || out.String() != resultLine ||
		errb.String() != "Duration mode doesn't work with events.\n" {
		t.Errorf("-D -e: rc %d, stdout %q, stderr %q", rc, out.String(), errb.String())
	}
	// What perftest printed before it gave up is printed too.
	out.Reset()
	errb.Reset()
	if rc := Main(Write, "writebw", []string{"-l", "8", "-Q", "3"}, &out, &errb); rc != 1 ||
		out.String() != resultLine+"Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n"+resultLine ||
		errb.String() != "Post list size must be a multiple of CQ moderation\n" {
		t.Errorf("-l 8 -Q 3: rc %d, stdout %q, stderr %q", rc, out.String(), errb.String())
	}
	// Some of perftest's complaints go to stdout.
	out.Reset()
	errb.Reset()
	if rc := Main(Write, "writebw", []string{"--use-srq"}, &out, &errb); rc != 1 || errb.String() != "" ||
		out.String() != resultLine+" Using SRQ only avavilible in SEND tests.\n" {
		t.Errorf("--use-srq: rc %d, stdout %q, stderr %q", rc, out.String(), errb.String())
	}
	// perftest exits from force_dependencies, without the parser's line.
	errb.Reset()
	if rc := Main(Read, "readbw", []string{"-X", "1"}, &out, &errb); rc != 1 || errb.String() != " Events must be enabled to select a completion vector\n" {
		t.Errorf("-X without -e: rc %d, stderr %q", rc, errb.String())
	}
	out.Reset()
	Main(Write, "writebw", []string{"-h"}, &out, &errb)
	if strings.Contains(out.String(), "--events") {
		t.Errorf("writebw -h offers events:\n%s", out.String())
	}
	out.Reset()
	Main(Read, "readbw", []string{"-h"}, &out, &errb)
	if !strings.Contains(out.String(), "  -e, --events  Sleep on CQ events (default poll)") {
		t.Errorf("readbw -h does not offer events:\n%s", out.String())
	}
}

// TestLimits: -w and -y fail a run when no line reaches them, -y only
// together with -w (perftest checks is_limit_bw for both); the write
// and read servers of a one-way test never check.
func TestLimits(t *testing.T) {
	for _, c := range []struct {
		v      Verb
		args   []string
		client bool
		want   string
	}{
		{Write, []string{"-w", "50"}, true, ""},
		{Write, []string{"-w", "60"}, true, "Error: BW result is below bw limit"},
		{Write, []string{"-w", "60"}, false, ""},
		{Write, []string{"-w", "60", "-b"}, false, "Error: BW result is below bw limit"},
		{Send, []string{"-w", "60"}, false, "Error: BW result is below bw limit"},
		{Send, []string{"-y", "1"}, true, ""},
		{Send, []string{"-w", "1", "-y", "1"}, true, "Error: Msg rate  is below msg_rate limit"},
		{Send, []string{"-w", "1", "-y", "0.5"}, true, ""},
	} {
		o, err := ParseArgs(c.v, c.args)
		if err != nil {
			t.Fatal(err)
		}
		tt := &test{v: c.v, o: o, client: c.client, stdout: io.Discard}
		tt.writeReport(Report{Avg: 40, MsgRate: 0.5})
		tt.writeReport(Report{Avg: 55, MsgRate: 0.2})
		err = tt.limits()
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%v %q client %v: %q, want %q", c.v, c.args, c.client, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%v %q client %v: passed, want %q", c.v, c.args, c.client, c.want)
		}
	}
	for in, want := range map[string]float64{"12.5": 12.5, " 3e2x": 300, "abc": 0, "": 0, "7.": 7} {
		if got := strtof(in); got != want {
			t.Errorf("strtof(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestAtomicOptions: the atomic tests default to FETCH_AND_ADD on 8
// bytes (the latency test too, whose other tests default to 2), take -A,
// and their usage has -A where the others have -a, and no -s.
func TestAtomicOptions(t *testing.T) {
	for _, c := range []struct {
		tst  Test
		args []string
		op   AtomicOp
	}{
		{BW, nil, FetchAdd},
		{LAT, nil, FetchAdd},
		{BW, []string{"-A", "CMP_AND_SWAP"}, CmpAndSwap},
		{LAT, []string{"--atomic_type=CMP_AND_SWAP", "-A", "FETCH_AND_ADD"}, FetchAdd},
		{LAT, []string{"--atomic_type", "CMP_AND_SWAP", "-s", "8"}, CmpAndSwap},
	} {
		o, err := ParseTestArgs(c.tst, Atomic, c.args)
		if err != nil || o.AtomicOp != c.op || o.Size != 8 || o.Inline != 0 {
			t.Errorf("%v %q: %+v, %v", c.tst, c.args, o, err)
		}
	}
	for _, tst := range []Test{BW, LAT} {
		var b bytes.Buffer
		UsageTest(&b, tst, Atomic, "atomic")
		u := b.String()
		if !strings.Contains(u, "\n  -A, --atomic_type=<type>  type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD)\n") ||
			strings.Contains(u, "  -a, --all") || strings.Contains(u, "  -s, --size") || !strings.Contains(u, "  -o, --outs") ||
			strings.Contains(u, "  -I, --inline") || !strings.Contains(u, "may be ib_atomic_"+map[Test]string{BW: "bw", LAT: "lat"}[tst]) {
			t.Errorf("%v usage:\n%s", tst, u)
		}
	}
	if Atomic.String() != "Atomic" || Atomic.CToolTest(LAT) != "ib_atomic_lat" || FetchAdd.String() != "FETCH_AND_ADD" || CmpAndSwap.String() != "CMP_AND_SWAP" {
		t.Error("names")
	}
}

// TestParseArgsCCasts: values perftest's CHECK_VALUE macros take where a
// Go parse would refuse them: "" as 0, hex digits b and o's neighbours,
// the low 32 bits of an int (4294967301 iterations are 5, as
// ib_write_bw runs them).
func TestParseArgsCCasts(t *testing.T) {
	o, err := ParseArgs(Write, []string{"-n", "4294967301", "-p", "0xb00b", "--pkey_index", "", "-x", "0xb"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Iters != 5 || o.Port != 0xb00b || o.GIDIndex != 11 {
		t.Errorf("-n 4294967301 -p 0xb00b -x 0xb: iters %d, port %#x, gid index %d", o.Iters, o.Port, o.GIDIndex)
	}
	// perftest doubles the margin in int before comparing it with the
	// duration: 2*(2^31-1) is -2, and ib_write_bw -f 2147483647 runs.
	for _, args := range [][]string{{"-f", "2147483647"}, {"-f", "1073741824"}} {
		if _, err := ParseArgs(Write, args); err != nil {
			t.Errorf("%q: %v; perftest takes it", args, err)
		}
	}
	if _, err := ParseArgs(Write, []string{"-f", "1073741823"}); err == nil || !strings.Contains(err.Error(), "DURATION > 2*MARGIN") {
		t.Errorf("-f 1073741823: %v; want perftest's DURATION > 2*MARGIN", err)
	}
}

// TestForceDependenciesOrder: where a command line breaks two of
// perftest's rules, force_dependecies' order decides which it names: the
// atomic size and SRQ rules before the post lists, the rate limiter
// before the output verbosity, the latency gap and the completion vector
// (perftest 4.5-0.17, the guest's). A HW limiter with no limit is no
// error (perftest looks a limit up only when there is one).
func TestForceDependenciesOrder(t *testing.T) {
	for _, c := range []struct {
		tst  Test
		v    Verb
		args []string
		want string // "" for none
	}{
		{LAT, Atomic, []string{"-a", "-l", "255"}, "Message size cannot be changed for Atomic tests "},
		{LAT, Atomic, []string{"-s", "+3", "--recv_post_list=255"}, "Message size cannot be changed for Atomic tests "},
		{BW, Write, []string{"--use-srq", "-l", "3", "-n", "100"}, " Using SRQ only avavilible in SEND tests."},
		{LAT, Atomic, []string{"--rate_limit", "16", "-X", "2"}, " Failed: Unknown rate limit value"},
		{LAT, Send, []string{"--output", "bandwidth", "--rate_limit=4294967296"}, " Failed: Unknown rate limit value"},
		{BW, Write, []string{"--rate_limit=7", "--output=latency"}, " Failed: Unknown rate limit value"},
		{BW, Write, []string{"--run_infinitely", "--rate_limit", "5"}, " run_infinitely does not support rate limit feature yet"},
		{BW, Write, []string{"--rate_limit_type", "HW"}, ""},
		{LAT, Read, []string{"--rate_limit_type", "HW"}, ""},
		{BW, Send, []string{"--rate_limit_type", "HW", "--rate_units", "M"}, ""},
		// The DC stream and AES-XTS options of Debian's perftest: the
		// checks in its order, after run_infinitely's.
		{BW, Send, []string{"--run_infinitely", "-e", "--aes_xts"}, " run_infinitely does not support events feature yet."},
		{BW, Write, []string{"--log_dci_streams=0x10", "--aes_xts"}, " log_dci_streams supported only on DC"},
		{BW, Write, []string{"--log_active_dci_streams", "1"}, " log_active_dci_streams supported only on DC"},
		{BW, Write, []string{"--log_dci_streams=65536"}, ""}, // uint16_t: 0
		{BW, Write, []string{"--aes_xts"}, " Please provide key encryption key file path"},
		{BW, Send, []string{"-c", "UD", "--aes_xts"}, " aes_xts supported only on RC"},
		{BW, Write, []string{"--aes_xts", "--kek_path=", "--data_enc_key_app_path", "k"}, " Please provide credentials file path"},
		{BW, Write, []string{"--aes_xts", "--kek_path=k"}, " Please provide data encryption key app path"},
		{BW, Write, []string{"--aes_xts", "--kek_path=k", "--data_enc_key_app_path=k", "--credentials_path=c", "--use_old_post_send"},
			" aes_xts doesn't support old post send"},
		{BW, Write, []string{"--aes_xts", "--kek_path=k", "--data_enc_key_app_path=k", "--credentials_path=c", "-R"},
			" rdma_cm doesn't support aes_xts"},
		{LAT, Write, []string{"--aes_xts", "--kek_path=k", "--data_enc_key_app_path=k", "--credentials_path=c"},
			" aes_xts isn't supported on write_lat"},
		{BW, Write, []string{"--aes_xts", "--kek_path=k", "--data_enc_key_app_path=k", "--credentials_path=c", "-s", "64", "-I", "64"},
			" aes_xts doesn't support Inline messages"},
		{BW, Read, []string{"--aes_xts", "--kek_path=k", "--data_enc_key_app_path=k", "--credentials_path=c"},
			" --aes_xts: not supported by this port of perftest (pureverbs)"},
		{BW, Send, []string{"--encrypt_on_tx", "--sig_before"}, " encrypt_on_tx supported only when enc/dec traffic"},
		{LAT, Read, []string{"--sig_before", "--kek_path=k"}, " sig_before supported only when enc/dec traffic"},
		{BW, Write, []string{"--kek_path=k", "--credentials_path="}, " giving credentials path supported only with enc/dec traffic"},
		{BW, Atomic, []string{"--data_enc_key_app_path", "k"}, " giving kek path supported only with enc/dec traffic"},
		{BW, Write, []string{"--raw_ipv6", "--aes_block_size=520", "--data_enc_keys_number", "3"}, ""},
	} {
		_, err := ParseTestArgs(c.tst, c.v, c.args)
		var ue *usageError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v %v %q: %v, want no error", c.tst, c.v, c.args, err)
		case c.want != "" && (!errors.As(err, &ue) || ue.msg != c.want):
			t.Errorf("%v %v %q: %v, want %q", c.tst, c.v, c.args, err, c.want)
		}
	}
}

// TestStrtod: C's strtod/atof prefixes, hexadecimal ones too.
func TestStrtod(t *testing.T) {
	for s, want := range map[string]float64{
		"16": 16, "0x10": 16, "0X1.8": 1.5, "0x10p1": 32, "-0x10": -16, " 2.5x": 2.5, "0x": 0, "1_0": 1, "0x1_0": 1,
		"abc": 0, "": 0, "1e3": 1000, ".5": 0.5, "inf": math.Inf(1),
	} {
		if got := strtod(s); got != want {
			t.Errorf("strtod(%q) = %v, want %v", s, got, want)
		}
	}
}
