package pingpong

import (
	"fmt"
	"io"
	"strings"

	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Kind selects which of rdma-core's ping-pong examples a tool is.
type Kind int

const (
	RC  Kind = iota // ibv_rc_pingpong: one RC QP
	UC              // ibv_uc_pingpong: one UC QP
	UD              // ibv_ud_pingpong: one UD QP and an address handle
	SRQ             // ibv_srq_pingpong: -q RC QPs sharing one SRQ
)

// MaxQP is srq_pingpong's MAX_QP: it always exchanges this many addresses
// and takes fewer QPs than this.
const MaxQP = 256

// The Q_Key of the UD tool, on both sides.
const udQKey = 0x11111111

// udGRH is the room a UD receive leaves for the global routing header.
const udGRH = 40

func (k Kind) String() string {
	switch k {
	case RC:
		return "rc"
	case UC:
		return "uc"
	case UD:
		return "ud"
	case SRQ:
		return "srq"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Options are a tool's command line (the C tools' option variables).
type Options struct {
	Server   string // the operand: the host to connect to
	Client   bool   // an operand was given, even "" (C's servername != NULL); else the server runs
	Port     uint32 // -p, TCP port (default 18515)
	Dev      string // -d, device name
	DevSet   bool   // -d was given, even as "" (C's ib_devname != NULL); else the first device
	IBPort   int    // -i, port of the device (default 1)
	Size     uint32 // -s, message size
	MTU      uverbs.MTU
	RxDepth  uint32 // -r, receives posted at a time (default 500)
	Iters    uint32 // -n, exchanges (default 1000)
	SL       int    // -l, service level
	Events   bool   // -e, sleep on CQ events (the completion channel)
	GIDIndex int    // -g, local GID index (-1 = none: LID only)
	Validate bool   // -c, validate the received buffer
	NumQP    uint32 // -q (srq only, default 16)

	// rc (and for ODP srq) only:
	ODP         bool // -o, on-demand paging
	ImplicitODP bool // -O, implicit on-demand paging
	Prefetch    bool // -P, prefetch the ODP MR
	Timestamps  bool // -t, completion timestamps
	DM          bool // -j, device memory
	NewSend     bool // -N, the ibv_wr_* send API
}

// spec is a tool's getopt string, long options and usage text.
type spec struct {
	short string
	longs []getopt.Long
	usage string // the lines after "Options:"
	size  uint32 // default -s
}

// longs builds a long-option table from "name=x" (takes an argument) and
// "name" entries, each followed by its short letter, in the C table's
// order (which getopt_long's ambiguity message follows).
func longs(entries ...string) []getopt.Long {
	var t []getopt.Long
	for _, e := range entries {
		name, val := e[:len(e)-2], e[len(e)-1]
		arg := strings.HasSuffix(name, "=")
		t = append(t, getopt.Long{Name: strings.TrimSuffix(name, "="), HasArg: arg, Val: val})
	}
	return t
}

const usageHead = `  -p, --port=<port>      listen on/connect to port <port> (default 18515)
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default 1)
`

var specs = map[Kind]spec{
	RC: {
		short: "p:d:i:s:m:r:n:l:eg:oOPtcjN",
		longs: longs("port= p", "ib-dev= d", "ib-port= i", "size= s", "mtu= m", "rx-depth= r", "iters= n", "sl= l",
			"events e", "gid-idx= g", "odp o", "iodp O", "prefetch P", "ts t", "chk c", "dm j", "new_send N"),
		usage: usageHead + `  -s, --size=<size>      size of message to exchange (default 4096)
  -m, --mtu=<size>       path MTU (default 1024)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges (default 1000)
  -l, --sl=<sl>          service level value
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index
  -o, --odp		    use on demand paging
  -O, --iodp		    use implicit on demand paging
  -P, --prefetch	    prefetch an ODP MR
  -t, --ts	            get CQE with timestamp
  -c, --chk	            validate received buffer
  -j, --dm	            use device memory
  -N, --new_send            use new post send WR API
`,
		size: 4096,
	},
	UC: {
		short: "p:d:i:s:m:r:n:l:eg:c",
		longs: longs("port= p", "ib-dev= d", "ib-port= i", "size= s", "mtu= m", "rx-depth= r", "iters= n", "sl= l",
			"events e", "gid-idx= g", "chk c"),
		usage: usageHead + `  -s, --size=<size>      size of message to exchange (default 4096)
  -m, --mtu=<size>       path MTU (default 1024)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges (default 1000)
  -l, --sl=<sl>          service level value
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index
  -c, --chk              validate received buffer
`,
		size: 4096,
	},
	UD: {
		short: "p:d:i:s:r:n:l:eg:c",
		longs: longs("port= p", "ib-dev= d", "ib-port= i", "size= s", "rx-depth= r", "iters= n", "sl= l",
			"events e", "gid-idx= g", "chk c"),
		// "default 2048" is what ibv_ud_pingpong says; its default is 1024.
		usage: usageHead + `  -s, --size=<size>      size of message to exchange (default 2048)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges (default 1000)
  -l, --sl=<SL>          send messages with service level <SL> (default 0)
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index
  -c, --chk              validate received buffer
`,
		size: 1024,
	},
	SRQ: {
		short: "p:d:i:s:m:q:r:n:l:eog:c",
		longs: longs("port= p", "ib-dev= d", "ib-port= i", "size= s", "mtu= m", "num-qp= q", "rx-depth= r",
			"iters= n", "sl= l", "events e", "odp o", "gid-idx= g", "chk c"),
		usage: usageHead + `  -s, --size=<size>      size of message to exchange (default 4096)
  -m, --mtu=<size>       path MTU (default 1024)
  -q, --num-qp=<num>     number of QPs to use (default 16)
  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)
  -n, --iters=<iters>    number of exchanges per QP(default 1000)
  -l, --sl=<sl>          service level value
  -e, --events           sleep on CQ events (default poll)
  -g, --gid-idx=<gid index> local port gid index
  -o, --odp		    use on demand paging
  -c, --chk              validate received buffer
`,
		size: 4096,
	},
}

// Usage writes the tool's usage text, as the C tool prints it (on stdout).
func Usage(w io.Writer, k Kind, prog string) {
	fmt.Fprintf(w, "Usage:\n  %s            start a server and wait for connection\n  %s <host>     connect to server at <host>\n\nOptions:\n%s",
		prog, prog, specs[k].usage)
}

// MTUFromBytes is pp_mtu_to_enum: 256, 512, 1024, 2048 or 4096 bytes, or 0.
func MTUFromBytes(n int64) uverbs.MTU {
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

// getoptError is a command-line error getopt_long complains about (see
// internal/getopt), worded as glibc words it, without the program name:
// Main prints it after the program name, before the usage.
type getoptError struct{ msg string }

func (e *getoptError) Error() string { return e.msg }

// errUsage means the command line is wrong: print the usage and exit 1.
var errUsage = fmt.Errorf("usage")

// ParseArgs parses a tool's arguments (without the program name) with the
// C tool's options, defaults and checks. An error means the C tool would
// print its usage and exit 1; a getopt complaint (unknown option, missing
// argument) is returned as its message, the other checks as errUsage.
// Numbers are read as strtol/strtoul(arg, NULL, 0) read them: "0x40" and
// "0100" are 64, and trailing garbage is ignored.
func ParseArgs(k Kind, args []string) (Options, error) {
	sp, ok := specs[k]
	if !ok {
		return Options{}, fmt.Errorf("unknown tool kind %v", k)
	}
	o := Options{Port: 18515, IBPort: 1, Size: sp.size, MTU: 3, RxDepth: 500, Iters: 1000, GIDIndex: -1}
	if k == SRQ {
		o.NumQP = 16
	}
	// The C tools check each option as getopt_long returns it: an option
	// before a bad word can still end the run with its own complaint.
	opts, operands, perr := getopt.Parse(args, sp.short, sp.longs)
	for _, p := range opts {
		switch p.Val {
		case 'p':
			v := getopt.Strtoul(p.Arg)
			if k == UD {
				v = uint64(getopt.Strtol(p.Arg)) // ud_pingpong uses strtol; same result
			}
			o.Port = uint32(v)
			if o.Port > 65535 {
				return Options{}, errUsage
			}
		case 'd':
			o.Dev, o.DevSet = p.Arg, true
		case 'i':
			o.IBPort = int(int32(getopt.Strtol(p.Arg)))
			if o.IBPort < 1 {
				return Options{}, errUsage
			}
		case 's':
			o.Size = uint32(getopt.Strtoul(p.Arg))
			if k == SRQ && o.Size < 1 {
				return Options{}, errUsage
			}
		case 'm':
			o.MTU = MTUFromBytes(int64(int32(getopt.Strtol(p.Arg))))
			if o.MTU == 0 {
				return Options{}, errUsage
			}
		case 'q':
			o.NumQP = uint32(getopt.Strtoul(p.Arg))
		case 'r':
			o.RxDepth = uint32(getopt.Strtoul(p.Arg))
		case 'n':
			o.Iters = uint32(getopt.Strtoul(p.Arg))
		case 'l':
			o.SL = int(int32(getopt.Strtol(p.Arg)))
		case 'e':
			o.Events = true
		case 'g':
			o.GIDIndex = int(int32(getopt.Strtol(p.Arg)))
		case 'c':
			o.Validate = true
		case 'o':
			o.ODP = true
		case 'O':
			o.ODP, o.ImplicitODP = true, true
		case 'P':
			o.Prefetch = true
		case 't':
			o.Timestamps = true
		case 'j':
			o.DM = true
		case 'N':
			o.NewSend = true
		}
	}
	if perr != nil {
		return Options{}, &getoptError{perr.Error()}
	}
	switch len(operands) {
	case 0:
	case 1:
		o.Server, o.Client = operands[0], true
	default:
		return Options{}, errUsage
	}
	return o, nil
}
