package bw

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/uverbs"
)

// The handshake messages perftest's ethernet_write_keys writes for these
// values (KEY_PRINT_FMT_GID and KEY_PRINT_FMT, sprintf'd into 108- and
// 59-byte buffers), as an ib_write_bw client on rxe0 sent them.
func TestEncodeDestGolden(t *testing.T) {
	gid := uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}
	d := Dest{LID: 0, OutReads: 1, QPN: 0x12, PSN: 0x4a1eb0, RKey: 0x201, VAddr: 0x7fa2c5bb6000, GID: gid}
	want := "0000:0001:000012:4a1eb0:00000201:00007fa2c5bb6000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:63:00:01:00000000:"
	got := encodeDest(&d, true)
	if len(got) != 108 || string(got[:len(want)]) != want || strings.Trim(string(got[len(want):]), "\x00") != "" {
		t.Errorf("with GID: %q (%d bytes), want %q and NULs to 108", got, len(got), want)
	}
	back, err := decodeDest(got, true)
	if err != nil || back != d {
		t.Errorf("decode: %+v, %v; want %+v", back, err, d)
	}
	d = Dest{LID: 0x1a, OutReads: 16, QPN: 0xabcdef, PSN: 1, RKey: 0xdeadbeef, VAddr: 0x1000, SRQN: 7}
	want = "001a:0010:abcdef:000001:deadbeef:0000000000001000:00000007"
	got = encodeDest(&d, false)
	if len(got) != 59 || string(got[:58]) != want || got[58] != 0 {
		t.Errorf("without GID: %q, want %q", got, want)
	}
	if back, err := decodeDest(got, false); err != nil || back != d {
		t.Errorf("decode: %+v, %v; want %+v", back, err, d)
	}
	if _, err := decodeDest([]byte("0000:0001:zz"), false); err == nil {
		t.Error("garbage decoded")
	}
}

// TestExchangeSequence runs both ends of every exchange over a real TCP
// connection: each side gets the other's values, the client writing
// first.
// connPair returns a server and a client connected over TCP on the
// loopback, closed when the test ends.
func connPair(t *testing.T) (srv, cli *conn) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx := context.Background()
	var serr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv, serr = accept(ctx, port) }()
	for i := 0; i < 1000; i++ { // until the server listens
		if cli, err = dial(ctx, "127.0.0.1", port); err == nil {
			break
		}
	}
	wg.Wait()
	if err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	t.Cleanup(func() { srv.Close(); cli.Close() })
	return srv, cli
}

func TestExchangeSequence(t *testing.T) {
	srv, cli := connPair(t)
	var wg sync.WaitGroup
	type result struct {
		ver  string
		v    float64
		page int32
		mtu  int
		dest Dest
		rep  Report
		err  error
	}
	side := func(c *conn, page int32, mtu uverbs.MTU, d Dest, r Report) (res result) {
		if res.ver, res.v, res.err = c.versions(); res.err != nil {
			return
		}
		if res.page, res.err = c.xchgInt32(page); res.err != nil {
			return
		}
		if res.mtu, res.err = c.xchgMTU(mtu); res.err != nil {
			return
		}
		if res.dest, res.err = c.handshake(&d, true); res.err != nil {
			return
		}
		if res.rep, res.err = c.xchgReport(&r); res.err != nil {
			return
		}
		res.err = c.closeConn(&d, true)
		return
	}
	sd := Dest{QPN: 1, PSN: 2, RKey: 3, VAddr: 4, OutReads: 1}
	cd := Dest{QPN: 5, PSN: 6, RKey: 7, VAddr: 8, OutReads: 128, GID: uverbs.GID{15: 9}}
	cr := Report{Size: 65536, Iters: 5000, Peak: 32.05, Avg: 17.02, MsgRate: 0.000272}
	var sres result
	wg.Add(1)
	go func() { defer wg.Done(); sres = side(srv, 4096, 3, sd, Report{}) }()
	cres := side(cli, 65536, 5, cd, cr)
	wg.Wait()
	if sres.err != nil || cres.err != nil {
		t.Fatal(sres.err, cres.err)
	}
	if sres.ver != "6.06" || sres.v != 6.06 || sres.page != 65536 || sres.mtu != 5 || sres.dest != cd || sres.rep != cr {
		t.Errorf("server got %+v", sres)
	}
	if cres.page != 4096 || cres.mtu != 3 || cres.dest != sd || cres.rep != (Report{}) {
		t.Errorf("client got %+v", cres)
	}
}

// TestReportBytes: the report exchange sends each value as 8 big-endian
// bytes, doubles bit for bit (perftest's hton_long, bswap_double).
func TestReportBytes(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cli := &conn{c: a, client: true}
	go func() {
		cli.xchgReport(&Report{Size: 2, Iters: 3, Peak: 1.5, Avg: math.Inf(1), MsgRate: -0.25})
	}()
	want := []uint64{2, 3, math.Float64bits(1.5), math.Float64bits(math.Inf(1)), math.Float64bits(-0.25)}
	for i, w := range want {
		var buf [8]byte
		if _, err := b.Read(buf[:]); err != nil {
			t.Fatal(err)
		}
		var got uint64
		for _, x := range buf {
			got = got<<8 | uint64(x)
		}
		if got != w {
			t.Errorf("value %d: %#x, want %#x", i, got, w)
		}
		b.Write(make([]byte, 8))
	}
}

func TestAtof(t *testing.T) {
	for s, want := range map[string]float64{"6.06": 6.06, "5.70": 5.7, "5.3a": 5.3, "": 0, "x": 0, "10": 10, " 4.5.": 4.5} {
		if got := atof(s); got != want {
			t.Errorf("atof(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestAltHex(t *testing.T) {
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{{0, 4, "0000"}, {0x11, 6, "0x0011"}, {0x531021, 6, "0x531021"}, {0x36c, 8, "0x00036c"}, {0x7f9518a85000, 16, "0x007f9518a85000"}, {0x80, 4, "0x80"}} {
		if got := altHex(c.v, c.width); got != c.want {
			t.Errorf("altHex(%#x, %d) = %q, want %q", c.v, c.width, got, c.want)
		}
	}
}

// TestDestWire: the rdma_cm method's key message is struct pingpong_dest
// as perftest's HAVE_ENDIAN build sends it (every field big-endian at its
// x86-64 offset, 56 bytes), and reading one takes what rdma_read_keys
// takes: not the SRQ number or the GID index.
func TestDestWire(t *testing.T) {
	d := Dest{LID: 0x1234, OutReads: 16, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1fe, VAddr: 0x7f00_1234_5678, SRQN: 9}
	for i := range d.GID {
		d.GID[i] = byte(0xa0 + i)
	}
	b := encodeDestWire(&d, 1)
	want := []byte{
		0, 0, 0x12, 0x34, 0, 0, 0, 16, 0, 0, 0, 0x11, 0, 0xab, 0xcd, 0xef,
		0, 0, 1, 0xfe, 0, 0, 0, 0, 0, 0, 0x7f, 0, 0x12, 0x34, 0x56, 0x78,
		0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
		0, 0, 0, 9, 0, 0, 0, 1,
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded\n% x\nwant\n% x", b, want)
	}
	got, err := decodeDestWire(b)
	d.SRQN = 0
	if err != nil || got != d {
		t.Fatalf("decoded %+v (%v), want %+v", got, err, d)
	}
	if _, err := decodeDestWire(b[:40]); err == nil {
		t.Fatal("a 40-byte message decoded")
	}
}

// TestRDMACMOptions: -z moves the data exchange to rdma_cm; -R connects
// the QPs through it too and implies -z, as perftest's parser does; the
// retry count reaches the connection parameters.
func TestRDMACMOptions(t *testing.T) {
	for _, c := range []struct {
		args           []string
		commCM, rdmaCM bool
		retry          int
	}{
		{nil, false, false, 7},
		{[]string{"-z"}, true, false, 7},
		{[]string{"-R"}, true, true, 7},
		{[]string{"--rdma_cm", "--retry_count", "3"}, true, true, 3},
	} {
		o, err := ParseArgs(Write, c.args)
		if err != nil || o.commCM != c.commCM || o.rdmaCM != c.rdmaCM || o.retryCount != c.retry {
			t.Errorf("%q: commCM %v rdmaCM %v retry %d (%v), want %v %v %d", c.args, o.commCM, o.rdmaCM, o.retryCount, err, c.commCM, c.rdmaCM, c.retry)
		}
	}
}

// TestShortMessage: a peer whose message is shorter than the one expected
// (it runs with other options and now waits for this side's answer) ends
// the exchange after msgGrace with perftest's lines, on either side and
// for either kind of message, instead of waiting for ever; a message
// that arrives in two parts within msgGrace is read whole.
func TestShortMessage(t *testing.T) {
	t.Run("split", func(t *testing.T) {
		t.Parallel()
		srv, cli := connPair(t)
		go func() {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], 0x0102030405060708)
			cli.c.Write(b[:3])
			time.Sleep(50 * time.Millisecond) // the stream delivers the message in two parts
			cli.c.Write(b[3:])
			cli.c.Read(b[:]) // the server's answer
		}()
		got, err := srv.xchg64(9)
		if err != nil || got != 0x0102030405060708 {
			t.Errorf("xchg64 = %#x, %v; want 0x0102030405060708", got, err)
		}
	})
	for _, c := range []struct {
		name   string
		client bool
		keys   bool
		want   []string
	}{
		{"server reads keys", false, true, []string{
			"ethernet_read_keys: Couldn't read remote address",
			"  (read from the peer: a 8-byte message where 108 were expected (the peer's options differ?))",
			" Unable to read to socket/rdma_cm", exchangeFailed}},
		{"client reads keys", true, true, []string{
			"ethernet_read_keys: Couldn't read remote address",
			"  (read from the peer: a 8-byte message where 108 were expected (the peer's options differ?))",
			" Unable to read from socket/rdma_cm", exchangeFailed}},
		{"server reads a report", false, false, []string{
			"ethernet_read_data: Couldn't read reports",
			"  (read from the peer: a 4-byte message where 8 were expected (the peer's options differ?))",
			" Unable to read to socket/rdma_cm", exchangeFailed}},
		{"client reads a report", true, false, []string{
			"ethernet_read_data: Couldn't read reports",
			"  (read from the peer: a 4-byte message where 8 were expected (the peer's options differ?))",
			" Unable to read from socket/rdma_cm", exchangeFailed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, cli := connPair(t)
			me, peer := srv, cli
			if c.client {
				me, peer = cli, srv
			}
			n := 4
			if c.keys {
				n = 8
			}
			// The peer sends its short message (after reading ours, if
			// it is the server) and waits for an answer that never comes.
			done := make(chan struct{})
			go func() {
				defer close(done)
				var b [512]byte
				if c.client {
					peer.c.Read(b[:]) // the peer is the server: ours comes first
				}
				peer.c.Write(make([]byte, n))
				peer.c.Read(b[:])
			}()
			var err error
			if c.keys {
				_, err = me.handshake(&Dest{QPN: 1}, true)
			} else {
				_, err = me.xchg64(1)
			}
			var lines msgError
			if !errors.As(err, &lines) {
				t.Fatalf("got %v, want perftest's lines", err)
			}
			if diff := cmp.Diff(c.want, []string(lines)); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			me.Close()
			<-done
		})
	}
}

// TestPeerWatch: a watch says gone once the peer's side of the
// connection closes; one that ends while the peer is there says nothing,
// and what the peer sent meanwhile (its next message, early) reaches the
// next exchange intact.
func TestPeerWatch(t *testing.T) {
	srv, cli := connPair(t)
	// Nothing comes: the watch ends clean, and the exchange after it works.
	w := cli.watch(nil)
	if err := cli.unwatch(w); err != nil || w.gone.Load() || len(cli.pending) != 0 {
		t.Fatalf("quiet watch: %v, gone %v, %d bytes kept", err, w.gone.Load(), len(cli.pending))
	}
	// The server's next message comes while the client watches: the
	// client's exchange gets it whole (the server reads the client's
	// first, so the server writes out of turn here, as a peer that
	// finished its run first and went on does).
	msg := []byte("0123456789abcdef")
	w = cli.watch(nil)
	if _, err := srv.c.Write(msg); err != nil {
		t.Fatal(err)
	}
	<-w.done
	if err := cli.unwatch(w); err != nil || w.gone.Load() {
		t.Fatalf("watch with a message: %v, gone %v", err, w.gone.Load())
	}
	got := make([]byte, len(msg))
	if err := cli.readMsg(got[:10]); err != nil {
		t.Fatal(err)
	}
	if err := cli.readMsg(got[10:]); err != nil || string(got) != string(msg) || len(cli.pending) != 0 {
		t.Fatalf("after the watch: %v, %q, %d bytes left", err, got, len(cli.pending))
	}
	// The server goes: the watch says so.
	w = cli.watch(nil)
	srv.c.Close()
	<-w.done
	if !w.gone.Load() {
		t.Error("the peer closed, and the watch did not say gone")
	}
	if err := cli.unwatch(w); err != nil {
		t.Error(err)
	}
	// A watch that sleeps (-e): lost runs once the grace is over.
	srv, cli = connPair(t)
	defer func(g time.Duration) { peerGoneGrace = g }(peerGoneGrace)
	peerGoneGrace = 10 * time.Millisecond
	lost := make(chan struct{})
	w = cli.watch(func() { close(lost) })
	srv.c.Close()
	select {
	case <-lost:
	case <-time.After(time.Minute):
		t.Fatal("lost never ran")
	}
	if err := cli.unwatch(w); err != nil || !w.gone.Load() || !w.expired.Load() {
		t.Errorf("a lost peer: %v, gone %v, expired %v", err, w.gone.Load(), w.expired.Load())
	}
	var rcv conn
	if rcv.watch(nil) != nil || rcv.unwatch(nil) != nil {
		t.Error("a connection with neither TCP nor the RDMA CM was watched")
	}
}

// TestRetriesForever: only -R with a retry count other than 7 lets the
// QP's own retries end a wait for a responder that has gone (and the
// peer watch stays out of the loops that wait for their own requests).
func TestRetriesForever(t *testing.T) {
	for _, c := range []struct {
		rdmaCM bool
		retry  int
		want   bool
	}{{false, 7, true}, {false, 2, true}, {true, 7, true}, {true, 2, false}, {true, 0, false}} {
		tt := &test{}
		tt.o.rdmaCM, tt.o.retryCount = c.rdmaCM, c.retry
		if got := tt.retriesForever(); got != c.want {
			t.Errorf("-R %v, --retry_count %d: retriesForever %v", c.rdmaCM, c.retry, got)
		}
		ran := false
		run := func() error { ran = true; return nil }
		tt.watched(&yielder{}, nil, run)()
		if !ran {
			t.Errorf("-R %v, --retry_count %d: watched did not run the loop", c.rdmaCM, c.retry)
		}
	}
}

// TestPeerSystemParams: exchangeParams refuses a peer whose cache line
// exceeds its page, or whose page is absurd, with a message instead of a
// divide by zero in the loops' address stepping (perftest's SIGFPE).
func TestPeerSystemParams(t *testing.T) {
	for _, c := range []struct {
		page, line int32
		ok         bool
	}{{4096, 64, true}, {65536, 128, true}, {4096, 8192, false}, {1<<31 - 1, 64, false}, {4096, 96, false}} {
		srv, cli := connPair(t)
		peer := make(chan error, 1)
		go func() {
			if _, _, err := cli.versions(); err != nil {
				peer <- err
				return
			}
			if _, err := cli.xchgInt32(c.page); err != nil {
				peer <- err
				return
			}
			if _, err := cli.xchgInt32(c.line); err != nil {
				peer <- err
				return
			}
			_, err := cli.xchgMTU(3)
			peer <- err
		}()
		tt := &test{c: srv, activeMTU: 3, stdout: io.Discard, stderr: io.Discard}
		err := tt.exchangeParams()
		if (err == nil) != c.ok {
			t.Errorf("peer page %d, cache line %d: %v", c.page, c.line, err)
		}
		if !c.ok {
			srv.Close() // the peer's MTU exchange ends
		}
		<-peer
		if c.ok && (tt.cycle < uint64(c.page) || tt.cacheLine < uint64(c.line)) {
			t.Errorf("cycle %d, cache line %d after page %d, line %d", tt.cycle, tt.cacheLine, c.page, c.line)
		}
	}
}

// TestHostOperand: the operand as perftest's getaddrinfo reads it, where
// the net package reads it otherwise: "" names no host ("Name or service
// not known", not the local system), "*" is the local host (glibc's NULL
// node, not a name to look up); on the socket exchange and on -R's.
func TestHostOperand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now

	_, err = dial(ctx, "", port)
	if want := fmt.Sprintf("Name or service not known for :%d\nProblem in resolving basic address and port\n%s\n", port, noSocketFD); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("dial(%q) = %v, want %q first", "", err, want)
	}
	_, err = dial(ctx, "*", port)
	if want := fmt.Sprintf("Couldn't connect to *:%d\n%s\n", port, noSocketFD); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("dial(%q) = %v, want %q first", "*", err, want)
	}
	if _, err := resolveIPv4(ctx, "", port); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("Name or service not known for :%d\nProblem in resolving basic address and port\n Unable to perform rdma_client function\n", port)) {
		t.Errorf("resolveIPv4(%q) = %v", "", err)
	}
	if a, err := resolveIPv4(ctx, "*", port); err != nil || a.String() != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Errorf("resolveIPv4(%q) = %v, %v", "*", a, err)
	}
	if a, err := resolveIPv4(ctx, "127.0.0.1", port); err != nil || a.String() != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Errorf("resolveIPv4(127.0.0.1) = %v, %v", a, err) // (no name: the test guest has no resolver)
	}
	for _, args := range [][]string{{""}, {"*"}, {"h"}} {
		if o, err := ParseArgs(Write, args); err != nil || !o.Client || o.Server != args[0] {
			t.Errorf("ParseArgs(%q): client %v, server %q, %v", args, o.Client, o.Server, err)
		}
	}
	if o, err := ParseArgs(Write, nil); err != nil || o.Client {
		t.Errorf("ParseArgs(none): client %v, %v", o.Client, err)
	}
}

// TestPortService: the port as getaddrinfo reads perftest's service
// string: a negative one is refused (EAI_SERVICE, "(null)" for the
// server's host), one past 65535 keeps its low 16 bits.
func TestPortService(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		f    func() error
		want string
	}{
		{func() error { _, err := dial(ctx, "127.0.0.1", -1); return err }, "Servname not supported for ai_socktype for 127.0.0.1:-1\nProblem in resolving basic address and port\n" + noSocketFD},
		{func() error { _, err := accept(ctx, -5); return err }, "Servname not supported for ai_socktype for (null):-5\nProblem in resolving basic address and port\n" + noSocketFD},
		{func() error { _, err := resolveIPv4(ctx, "h", -1); return err }, "Servname not supported for ai_socktype for h:-1\nProblem in resolving basic address and port\n Unable to perform rdma_client function"},
		{func() error { _, err := acceptCM(ctx, -1, 1); return err }, "Servname not supported for ai_socktype for (null):-1\nProblem in resolving basic address and port\n Unable to perform rdma_server function"},
	} {
		if err := c.f(); err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := dial(ctx, "127.0.0.1", port+65536)
	if err != nil {
		t.Fatalf("dial to port %d+65536: %v", port, err)
	}
	c.Close()
}

// TestRetriesForeverClamp: with -R the retry count reaches the QP through
// the CM, cast to 8 bits and clamped to 7 by the kernel (cma_connect_ib),
// which rxe retries for ever: those runs are watched for a peer gone too
// (8 and up were not, and polled for ever).
func TestRetriesForeverClamp(t *testing.T) {
	for rc, want := range map[string]bool{"7": true, "8": true, "15": true, "255": true, "263": true, "6": false, "256": false} {
		o, err := ParseArgs(Write, []string{"-R", "--retry_count", rc, "host"})
		if err != nil {
			t.Fatal(err)
		}
		tt := &test{v: Write, o: o, client: true}
		if got := tt.retriesForever(); got != want {
			t.Errorf("-R --retry_count %s: retries for ever %v, want %v", rc, got, want)
		}
	}
}

// TestAllocTiming: the peak's timestamps are mapped before any resource,
// on the sides that post: a run whose -n times -q is more than the machine
// has fails as perftest's malloc does (" Cannot Allocate", "Couldn't
// allocate context"; make([]int64) was the runtime's fatal out of
// memory); a run without the peak, or a server's, maps none; what is
// mapped is freed.
func TestAllocTiming(t *testing.T) {
	huge := &test{v: Write, client: true, o: Options{Tst: BW, Iters: 20000, QPs: 1 << 28}} // 80 TiB
	err := huge.allocTiming()
	if err == nil || !strings.Contains(err.Error(), " Cannot Allocate") || huge.tmBuf != nil {
		t.Fatalf("a run of 2^28 QPs: %v", err)
	}
	ok := &test{v: Write, client: true, o: Options{Tst: BW, Iters: 1000, QPs: 3}}
	if err := ok.allocTiming(); err != nil || ok.tmBuf == nil {
		t.Fatalf("a run of 3000 messages: %v", err)
	}
	tm := ok.timing()
	if len(tm.posted) != 3000 || len(tm.completed) != 3000 || cap(tm.posted) != 3000 {
		t.Fatalf("timing of %d and %d (cap %d)", len(tm.posted), len(tm.completed), cap(tm.posted))
	}
	tm.posted[2999], tm.completed[0] = 1, 2
	ok.freeTiming()
	if ok.tmBuf != nil {
		t.Fatal("not freed")
	}
	for _, c := range []*test{
		{v: Write, client: true, o: Options{Tst: BW, Iters: 1000, QPs: 3, NoPeak: true}},
		{v: Write, client: false, o: Options{Tst: BW, Iters: 1000, QPs: 3}},
		{v: Write, client: true, o: Options{Tst: LAT, Iters: 1000, QPs: 1}},
	} {
		if err := c.allocTiming(); err != nil || c.tmBuf != nil {
			t.Errorf("%+v: mapped %v (%v)", c.o, c.tmBuf != nil, err)
		}
	}
}
