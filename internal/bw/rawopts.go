package bw

import (
	"fmt"
	"strings"

	"github.com/pureverbs/pureverbs/internal/getopt"
)

// rawEth holds what perftest's parser keeps of its raw Ethernet options
// (-B, -E, -J, -j, -K, -k, --ethertype, --local_/--remote_mac, _ip and
// _port, --raw_ipv6, --use_rss). perftest 4.5-0.17 checks their values
// on every connection type (perftest_parameters.c: the getopt loop, the
// IP addresses after it, set_raw_eth_parameters) and uses them only on a
// raw Ethernet QP, which the Go tools refuse (-c RawEth): on RC, UC and
// UD they are checked as perftest checks them and then ignored. The
// other raw Ethernet options (-P, -Z, --tcp, --vlan_en, --vlan_pcp,
// --promiscuous, --raw_mcast, --flows, --flows_burst) leave nothing to
// keep here; -v (--mac_fwd), which changes perftest's output on RC too,
// is refused.
type rawEth struct {
	// oldParam and newParam: perftest's is_old_raw_eth_param (-B, -E,
	// -J, -j, -K, -k) and is_new_raw_eth_param (--local_* and
	// --remote_*), which it refuses to mix.
	oldParam, newParam bool
	// The IP addresses, nil when not given: -J (server) and -j (client,
	// --source_ip), --local_ip and --remote_ip; isServerIP (-J or
	// --local_ip) and isClientIP (-j or --remote_ip) as perftest sets
	// them.
	serverIP, clientIP, localIP, remoteIP *string
	isServerIP, isClientIP                bool
	rawIPv6                               bool // --raw_ipv6: the addresses are IPv6
	useRSS                                bool // -G (--use_rss)
}

// checkIPs is perftest's check of the raw Ethernet IP addresses after its
// getopt loop (perftest_parameters.c:2908-2975): inet_pton of each one
// given, IPv4 or with --raw_ipv6 IPv6, on every connection type. With a
// new-style option (--local_*, --remote_*) perftest reads --local_ip and
// --remote_ip only: given -J or -j instead it passes NULL to inet_pton
// and dies of SIGSEGV; the Go tools leave those lines to the check that
// refuses the mix (set_raw_eth_parameters), which they fail anyway.
func (r *rawEth) checkIPs() error {
	valid := inetPton4
	if r.rawIPv6 {
		valid = inetPton6
	}
	check := func(given bool, ip *string, what string) error {
		if given && ip != nil && !valid(*ip) {
			return &usageError{msg: " Invalid " + what + " IP address"}
		}
		return nil
	}
	if r.newParam {
		if err := check(r.isServerIP, r.localIP, "local"); err != nil {
			return err
		}
		return check(r.isClientIP, r.remoteIP, "remote")
	}
	if err := check(r.isServerIP, r.serverIP, "server"); err != nil {
		return err
	}
	return check(r.isClientIP, r.clientIP, "client")
}

// errRawEthMix is set_raw_eth_parameters' refusal (perftest_parameters.c
// 2083-2089), whatever the connection type: the rule on stdout, the rest
// on stderr, exit(1) from inside the parser.
var errRawEthMix = &usageError{msg: " Invalid Command line.\nMix of source with local|remote and dest with local|remote is not supported.\n" +
	"For L2 tests you must enter local and remote mac  by this format --local_mac XX:XX:XX:XX:XX:XX --remote_mac XX:XX:XX:XX:XX:XX\n" +
	"For L3 tests You must add also local and remote ip  by this format --local_ip X.X.X.X --remote_ip X.X.X.X\n" +
	"For L4 you need to add also local and remote port  by this format --local_port XXXX  --remote_port XXXX",
	quiet: true, resultLine: true}

// rssDependency is force_dependecies' refusal of -G (--use_rss)
// (perftest_parameters.c:1526-1532): perftest is built without
// HAVE_RSS_EXP (its configure never defines it), so the option always
// ends the run there, after the DC and AES-XTS checks and before the
// rate limiter's.
func (o *Options) rssDependency() error {
	if o.raw.useRSS {
		return &usageError{msg: " RSS feature is not available in libibverbs", quiet: true, resultLine: true}
	}
	return nil
}

// parseMAC is perftest's parse_mac_from_str (perftest_parameters.c:57-93):
// 17 characters, split by strtok at ':' (so runs of colons count as one,
// and leading or trailing ones as none), each field read by
// strtoul(field, &end, 16) into an int. Its complaints are perftest's;
// the parser then returns FAILURE.
func parseMAC(mac string) error {
	if len(mac) != 17 { // MAC_LEN
		return &usageError{msg: "invalid MAC length"}
	}
	var fields []string
	for _, f := range strings.Split(mac, ":") {
		if f != "" {
			fields = append(fields, f)
		}
	}
	for n, f := range fields {
		if n == 6 { // MAC_ARR_LEN
			break
		}
		v, end := strtoul16(f)
		val := int32(uint32(v)) // int tmpVal = strtoul(...)
		if val > 0xff {
			return &usageError{msg: fmt.Sprintf("field %d value %X out of range", n, uint32(val))}
		}
		if end != len(f) {
			// %c and %0x of a char: signed, so a byte past 0x7f prints
			// sign-extended.
			c := f[end]
			return &usageError{msg: fmt.Sprintf("Non-digit character %s (%x) detected in field %d", string([]byte{c}), uint32(int32(int8(c))), n)}
		}
	}
	if len(fields) != 6 {
		return &usageError{msg: "MAC address longer than six fields"}
	}
	return nil
}

// parseEthertype is --ethertype's check (perftest_parameters.c:95-105 and
// 2549-2555): parse_ethertype_from_str wants 6 characters and a non-zero
// uint16_t from strtoul(s, NULL, 16); the caller adds its own line.
func parseEthertype(s string) error {
	const invalid = " Invalid ethertype value"
	if len(s) != 6 { // ETHERTYPE_LEN
		return &usageError{msg: "invalid ethertype length\n" + invalid}
	}
	if v, _ := strtoul16(s); uint16(v) == 0 {
		return &usageError{msg: invalid}
	}
	return nil
}

// strtoul16 is glibc's strtoul(s, &end, 16) on a 64-bit system: leading
// white space, a sign, an optional 0x or 0X, hexadecimal digits; a minus
// negates the unsigned value, and overflow gives ULONG_MAX. end is the
// index of the first byte not converted: 0 when there is no digit, the
// 'x' of a "0x" with no hexadecimal digit after it.
func strtoul16(s string) (v uint64, end int) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && getopt.HexDigit(s[i+2]) >= 0 {
		i += 2
	}
	start, over := i, false
	for ; i < len(s) && getopt.HexDigit(s[i]) >= 0; i++ {
		if v > (^uint64(0))>>4 {
			over = true
		}
		v = v<<4 | uint64(getopt.HexDigit(s[i]))
	}
	switch {
	case i == start:
		return 0, 0
	case over:
		return ^uint64(0), i
	case neg:
		return -v, i
	}
	return v, i
}

// inetPton4 is glibc's inet_pton(AF_INET, s, ...) == 1: four dotted
// decimal parts of at most 255, without leading zeros.
func inetPton4(s string) bool {
	sawDigit, octets, cur := false, 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			if sawDigit && cur == 0 {
				return false
			}
			cur = cur*10 + int(c-'0')
			if cur > 255 {
				return false
			}
			if !sawDigit {
				if octets++; octets > 4 {
					return false
				}
				sawDigit = true
			}
		case c == '.' && sawDigit:
			if octets == 4 {
				return false
			}
			cur, sawDigit = 0, false
		default:
			return false
		}
	}
	return octets == 4
}

// inetPton6 is glibc's inet_pton(AF_INET6, s, ...) == 1 (inet_pton6):
// eight groups of up to four hexadecimal digits, one "::" for a run of
// zero groups, and an IPv4 address (inetPton4) in place of the last two.
func inetPton6(s string) bool {
	const size = 16
	if s == "" {
		return false
	}
	i := 0
	if s[0] == ':' {
		if len(s) < 2 || s[1] != ':' {
			return false
		}
		i = 1
	}
	tp, colon := 0, -1 // bytes written; where the "::" is
	curtok, digits, val := i, 0, 0
	for i < len(s) {
		c := s[i]
		i++
		if d := getopt.HexDigit(c); d >= 0 {
			if digits == 4 {
				return false
			}
			val = val<<4 | d
			digits++
			continue
		}
		if c == ':' {
			curtok = i
			if digits == 0 {
				if colon >= 0 {
					return false
				}
				colon = tp
				continue
			} else if i == len(s) {
				return false
			}
			if tp+2 > size {
				return false
			}
			tp += 2
			digits, val = 0, 0
			continue
		}
		if c == '.' && tp+4 <= size && inetPton4(s[curtok:]) {
			tp += 4
			digits = 0
			break
		}
		return false
	}
	if digits > 0 {
		if tp+2 > size {
			return false
		}
		tp += 2
	}
	if colon >= 0 {
		if tp == size {
			return false
		}
		tp = size
	}
	return tp == size
}
