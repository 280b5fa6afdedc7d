package bw

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Dest is perftest's struct pingpong_dest: what one side tells the other
// about its QP and buffer in the handshake.
type Dest struct {
	LID      uint16
	OutReads int // RDMA reads the side accepts at a time (MaxDestRdAtomic)
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64 // where the peer may write or read
	GID      uverbs.GID
	SRQN     uint32
}

// The handshake message sizes: the text and its NUL, without and with the
// GID (perftest_communication.h).
const (
	keyMsgSize    = 59
	keyMsgSizeGID = 108
)

// encodeDest formats d as perftest's ethernet_write_keys does: the
// KEY_PRINT_FMT text (with the 16 GID bytes when withGID) in a fixed-size
// NUL-padded message.
func encodeDest(d *Dest, withGID bool) []byte {
	var s string
	var b []byte
	if withGID {
		var g strings.Builder
		for _, x := range d.GID {
			fmt.Fprintf(&g, "%02x:", x)
		}
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%s%08x:", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr, g.String(), d.SRQN)
		b = make([]byte, keyMsgSizeGID)
	} else {
		s = fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x:%08x", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr, d.SRQN)
		b = make([]byte, keyMsgSize)
	}
	copy(b[:len(b)-1], s)
	return b
}

// decodeDest parses a handshake message (ethernet_read_keys).
func decodeDest(b []byte, withGID bool) (Dest, error) {
	text, _, _ := strings.Cut(string(b), "\x00")
	f := strings.Split(text, ":")
	want := 7
	if withGID {
		want = 6 + 16 + 1
	}
	if len(f) < want {
		return Dest{}, parseErr(text)
	}
	var v [7]uint64
	for i := range 6 {
		x, err := strconv.ParseUint(f[i], 16, 64)
		if err != nil {
			return Dest{}, parseErr(text)
		}
		v[i] = x
	}
	d := Dest{LID: uint16(v[0]), OutReads: int(int32(v[1])), QPN: uint32(v[2]), PSN: uint32(v[3]), RKey: uint32(v[4]), VAddr: v[5]}
	srqn := f[6]
	if withGID {
		for i := range 16 {
			x, err := strconv.ParseUint(f[6+i], 16, 8)
			if err != nil {
				return Dest{}, parseErr(text)
			}
			d.GID[i] = byte(x)
		}
		srqn = f[22]
	}
	x, err := strconv.ParseUint(srqn, 16, 32)
	if err != nil {
		return Dest{}, parseErr(text)
	}
	d.SRQN = uint32(x)
	return d, nil
}

// parseErr is ethernet_read_keys' complaint about a message.
func parseErr(text string) error { return msgError{fmt.Sprintf("Couldn't parse line <%s>", text)} }

// conn is the connection of perftest's data exchange: TCP (its
// "Ethernet" method) or, with -z or -R, an RC QP connected through the
// RDMA CM (cmLink). Every exchange is symmetric: the client writes its
// message and then reads the server's; the server reads, then writes.
type conn struct {
	c      net.Conn
	cm     *cmLink
	client bool
	// gidIndex goes in the rdma_cm method's key messages (perftest's
	// my_dest.gid_index; the peer does not read it).
	gidIndex int
	// pending is what a peerWatch read ahead of the exchange that
	// wanted it (the peer's next message, come early); readMsg takes it
	// first.
	pending []byte
}

// dial connects to the server (ethernet_client_connect: IPv4 only, one
// attempt).
func dial(ctx context.Context, host string, port int) (*conn, error) {
	if err := badService(host, port, noSocketFD); err != nil {
		return nil, err
	}
	var c net.Conn
	h, err := pingpong.NetHost(host)
	if err == nil {
		// getaddrinfo keeps a port's low 16 bits (htons): -p 70000 is
		// port 4464.
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp4", net.JoinHostPort(h, strconv.Itoa(int(uint16(port)))))
	}
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) { // check_add_port's getaddrinfo
			return nil, msgError{fmt.Sprintf("%s for %s:%d", pingpong.GAIText(dnsErr), host, port), "Problem in resolving basic address and port",
				noSocketFD, "  (" + err.Error() + ")"}
		}
		return nil, msgError{fmt.Sprintf("Couldn't connect to %s:%d", host, port), noSocketFD, "  (" + err.Error() + ")"}
	}
	return &conn{c: c, client: true}, nil
}

// accept listens on port (every IPv4 address) and takes one client
// (ethernet_server_connect).
func accept(ctx context.Context, port int) (*conn, error) {
	if err := badService("", port, noSocketFD); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp4", ":"+strconv.Itoa(int(uint16(port)))) // htons, as getaddrinfo
	if err != nil {
		return nil, msgError{fmt.Sprintf("Couldn't listen to port %d", port), noSocketFD, "  (" + err.Error() + ")"}
	}
	defer l.Close()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	c, err := l.Accept()
	if err != nil {
		return nil, msgError{"accept() failed", "  (" + err.Error() + ")"}
	}
	return &conn{c: c}, nil
}

func (c *conn) Close() error {
	if c.cm != nil {
		return c.cm.Close()
	}
	return c.c.Close()
}

// msgGrace is how long the rest of a message that arrived in part may
// take (readMsg).
const msgGrace = time.Second

// readMsg reads one message of len(b) bytes. perftest reads each message
// with one read(2) and fails when it returns less: a message is one
// write and arrives whole, and a shorter one is another message (the peer
// runs with other options, -q for one, and is now at a step of its own).
// The Go tools take what one read brings as well, and wait msgGrace for
// the rest of a short one, which a TCP stream may deliver in two parts;
// if none comes they fail as perftest does. Waiting for the rest without
// a bound would hang both sides: the peer that sent the short message
// waits for this side's answer.
func (c *conn) readMsg(b []byte) error {
	n := copy(b, c.pending)
	c.pending = c.pending[n:]
	if n == 0 {
		m, err := c.c.Read(b)
		if err != nil {
			return err
		}
		n = m
	}
	if n == len(b) {
		return nil
	}
	if err := c.c.SetReadDeadline(time.Now().Add(msgGrace)); err != nil {
		return err
	}
	m, err := io.ReadFull(c.c, b[n:])
	if derr := c.c.SetReadDeadline(time.Time{}); err == nil {
		err = derr
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("a %d-byte message where %d were expected (the peer's options differ?)", n+m, len(b))
	}
	return err
}

// peerWatch reads the TCP exchange connection while a run needs nothing
// from it, so that the loops can tell that the peer has gone: its
// process ended (killed, or failed) and the kernel closed its socket. A
// latency run waits for the peer's next message by spinning on its
// buffer or its receive queue, or for its own request's completion,
// where nothing ever says that the peer is no more: perftest's latency
// tools then wait for ever. The Go tools stop after peerGoneGrace
// (expired) and fail.
//
// What the peer sends meanwhile (its next exchange, when it finished
// first) ends the watch and goes back to the connection (unwatch).
//
// Over the RDMA CM exchange (-z, and -R) the watch reads the exchange's
// event channel instead: when the peer's process ends, the kernel
// destroys its ID, which disconnects (a DREQ), and EventDisconnected
// comes here. Its messages come on the exchange's QP, which the watch
// leaves alone.
type peerWatch struct {
	nc   net.Conn
	stop func()      // over the RDMA CM: ends cmLink.watchCM
	gone atomic.Bool // the connection ended (EOF or an error)
	done chan struct{}
	buf  []byte
	// Once the connection has been gone for peerGoneGrace, a timer sets
	// expired, which the spinning loops read as they yield
	// (yielder.peerLost), and then calls lost, which cancels the sleep
	// of a loop that sleeps on a channel (-e) rather than spins.
	lost    func()
	timer   *time.Timer
	expired atomic.Bool
}

// peerGoneGrace is how long a loop waits on for the peer's message after
// its connection closed. A peer that finished exits once its last
// message has completed, which is once it is in this side's memory, so
// a loop that still waits after the grace waits for a message that
// never comes. (With -D each side ends at its own clock's end; the two
// ends are well within the grace.) A variable for the tests.
var peerGoneGrace = 3 * time.Second

// watch starts a peerWatch on the connection. lost (nil: none) is
// called once the peer has been gone for peerGoneGrace, unless the watch
// has ended by then.
func (c *conn) watch(lost func()) *peerWatch {
	if c == nil {
		return nil
	}
	w := &peerWatch{nc: c.c, done: make(chan struct{}), lost: lost}
	switch {
	case c.c != nil:
		go func() {
			defer close(w.done)
			var b [512]byte
			n, err := w.nc.Read(b[:])
			w.buf = append(w.buf, b[:n]...)
			if n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				w.closed()
			}
		}()
	case c.cm != nil:
		close(w.done)
		w.stop = c.cm.watchCM(w.closed)
	default:
		return nil
	}
	return w
}

// closed records that the connection has gone and starts the grace.
func (w *peerWatch) closed() {
	w.gone.Store(true)
	w.timer = time.AfterFunc(peerGoneGrace, func() {
		w.expired.Store(true)
		if w.lost != nil {
			w.lost()
		}
	})
}

// unwatch ends the watch w (nil: none) and keeps what it read for the
// next exchange.
func (c *conn) unwatch(w *peerWatch) error {
	if w == nil {
		return nil
	}
	if w.stop != nil {
		w.stop()
		if w.timer != nil {
			w.timer.Stop()
		}
		return nil
	}
	err := w.nc.SetReadDeadline(time.Now())
	<-w.done
	if w.timer != nil {
		w.timer.Stop()
	}
	if derr := w.nc.SetReadDeadline(time.Time{}); err == nil {
		err = derr
	}
	c.pending = append(c.pending, w.buf...)
	return err
}

// watchPeer watches t's connection (peerWatch) for a latency loop with
// yielder y and waiter ev (nil: it polls). A loop that sleeps on the
// completion channel (-e) is woken once the peer has been gone for the
// grace. The function returned ends the watch.
func (t *test) watchPeer(y *yielder, ev waiter) (unwatch func() error) {
	var stop context.CancelFunc
	cw, sleeps := ev.(*channelWaiter)
	var parent context.Context
	if sleeps {
		parent = cw.ctx
		cw.ctx, stop = context.WithCancel(parent)
	}
	y.peer = t.c.watch(stop)
	return func() error {
		err := t.c.unwatch(y.peer)
		y.peer = nil
		if stop != nil {
			stop()
			cw.ctx = parent
		}
		return err
	}
}

// watched is run with the peer watched (watchPeer) for a loop with
// yielder y and waiter ev that waits for its own requests' completions
// (the bandwidth tools' sending loops, read_lat's and atomic_lat's
// clients), when rxe retries those requests
// for ever (retriesForever); otherwise the QP's own retry-exceeded
// completion ends the wait, with perftest's lines, and run is not
// watched.
func (t *test) watched(y *yielder, ev waiter, run func() error) func() error {
	if !t.retriesForever() {
		return run
	}
	return func() error {
		unwatch := t.watchPeer(y, ev)
		err := run()
		if uerr := unwatch(); err == nil && uerr != nil {
			err = msgError{"  (" + uerr.Error() + ")"}
		}
		return err
	}
}

// retriesForever says whether rxe retries the run's requests for ever
// once their responder has gone: at a retry count of 7, which rxe takes
// to mean "for ever" (rxe_completer decrements it only when it is not
// 7). perftest sets 7 on every QP it connects itself; --retry_count
// reaches the QPs only with -R, through the RDMA CM's connection
// parameters, cast to 8 bits, which the kernel's CM then clamps to 7
// (cma_connect_ib: min(7, retry_count)): 8 to 255, and 263, are 7 too.
func (t *test) retriesForever() bool {
	return !t.o.rdmaCM || uint8(t.o.retryCount) >= 7
}

// errPeerGone is a loop's error when its peer's connection closed and
// the message it waited for did not come within peerGoneGrace.
var errPeerGone = msgError{" The peer has gone: its connection closed, and its next message did not come within " + peerGoneGrace.String()}

// xchg sends my and reads len(rem) bytes into rem, in the client's or the
// server's order (ctx_xchg_data_ethernet, or ctx_hand_shake's
// ethernet_write_keys and ethernet_read_keys when keys is set; over the
// RDMA CM ctx_xchg_data_rdma, a SEND each way). A failure
// comes as perftest's lines: what failed, which step (the client writes
// "to" and reads "from", the server reads "to" and writes "from"), and
// the Go error as a detail line.
func (c *conn) xchg(my, rem []byte, keys bool) error {
	readWhat, writeWhat := "ethernet_read_data: Couldn't read reports", "Couldn't send reports"
	if keys {
		readWhat, writeWhat = "ethernet_read_keys: Couldn't read remote address", "Couldn't send local address"
	}
	readStep, writeStep := " Unable to read to socket/rdma_cm", " Unable to write from socket/rdma_cm"
	if c.client {
		readStep, writeStep = " Unable to read from socket/rdma_cm", " Unable to write to socket/rdma_cm"
	}
	write := func() error {
		if c.cm != nil {
			if err := c.cm.send(my); err != nil {
				return msgError{"  (" + err.Error() + ")", writeStep}
			}
			return nil
		}
		if _, err := c.c.Write(my); err != nil {
			return msgError{writeWhat, "  (write to the peer: " + err.Error() + ")", writeStep}
		}
		return nil
	}
	read := func() error {
		if c.cm != nil {
			if err := c.cm.recv(rem); err != nil {
				return msgError{"  (" + err.Error() + ")", readStep}
			}
			return nil
		}
		if err := c.readMsg(rem); err != nil {
			return msgError{readWhat, "  (read from the peer: " + err.Error() + ")", readStep}
		}
		return nil
	}
	if c.client {
		if err := write(); err != nil {
			return err
		}
		return read()
	}
	if err := read(); err != nil {
		return err
	}
	return write()
}

// exchangeFailed is what the steps that exchange data add to a failed
// exchange.
const exchangeFailed = "Failed to exchange data between server and clients"

// handshake sends my address and returns the peer's (ctx_hand_shake and
// the "Failed to exchange data" its callers print); the message carries
// a GID when withGID, as it does whenever a GID index is in use (always
// on RoCE).
func (c *conn) handshake(my *Dest, withGID bool) (Dest, error) {
	d, err := c.shake(my, withGID)
	if err != nil {
		return Dest{}, withLines(err, exchangeFailed)
	}
	return d, nil
}

// shake is ctx_hand_shake alone, for the callers that say something else
// when it fails (closing, syncing).
func (c *conn) shake(my *Dest, withGID bool) (Dest, error) {
	if c.cm != nil {
		// rdma_write_keys and rdma_read_keys: the struct itself.
		rem := make([]byte, destWireSize)
		if err := c.xchg(encodeDestWire(my, c.gidIndex), rem, true); err != nil {
			return Dest{}, err
		}
		return decodeDestWire(rem)
	}
	msg := encodeDest(my, withGID)
	rem := make([]byte, len(msg))
	if err := c.xchg(msg, rem, true); err != nil {
		return Dest{}, err
	}
	return decodeDest(rem, withGID)
}

// versions exchanges the 16-byte version strings and returns the peer's
// version as atof reads it (exchange_versions).
func (c *conn) versions() (string, float64, error) {
	var my, rem [16]byte
	copy(my[:], Version)
	if err := c.xchg(my[:], rem[:], false); err != nil {
		return "", 0, withLines(err, exchangeFailed)
	}
	s, _, _ := strings.Cut(string(rem[:]), "\x00")
	return s, atof(s), nil
}

// atof reads the longest decimal prefix of s, as C's atof does.
func atof(s string) float64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	end := 0
	dot := false
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' && !dot || end == 0 && (s[end] == '-' || s[end] == '+')) {
		if s[end] == '.' {
			dot = true
		}
		end++
	}
	v, _ := strconv.ParseFloat(strings.TrimSuffix(s[:end], "."), 64)
	return v
}

// xchgInt32 exchanges a 32-bit value in network order (check_sys_data).
func (c *conn) xchgInt32(v int32) (int32, error) {
	var my, rem [4]byte
	binary.BigEndian.PutUint32(my[:], uint32(v))
	if err := c.xchg(my[:], rem[:], false); err != nil {
		return 0, withLines(err, exchangeFailed)
	}
	return int32(binary.BigEndian.Uint32(rem[:])), nil
}

// xchgMTU exchanges the MTU enum as perftest 5.31 and later do: "%d" and
// its NUL, two bytes (check_mtu). It returns the peer's value, 0 if it is
// not a number.
func (c *conn) xchgMTU(mtu uverbs.MTU) (int, error) {
	var my, rem [2]byte
	copy(my[:1], strconv.Itoa(int(mtu)))
	if err := c.xchg(my[:], rem[:], false); err != nil {
		return 0, withLines(err, exchangeFailed)
	}
	s, _, _ := strings.Cut(string(rem[:]), "\x00")
	return int(strtolPrefix(s)), nil
}

// Report is one result line (struct bw_report_data): what print_report_bw
// computes and xchg_bw_reports sends to the peer.
type Report struct {
	Size    uint64
	Iters   uint64
	Peak    float64 // MB/s (MiB/s) or Gb/s
	Avg     float64
	MsgRate float64 // Mpps
	// CPUUtil is a printed line's --cpu_util column (ParseReports; not
	// exchanged).
	CPUUtil float64
}

// xchgReport exchanges reports (xchg_bw_reports for peers of version 5.33
// and later): size, iterations and the three rates, each as its own
// 8-byte big-endian exchange.
func (c *conn) xchgReport(my *Report) (Report, error) {
	var rem Report
	vals := []struct {
		my  uint64
		rem *uint64
	}{{my.Size, &rem.Size}, {my.Iters, &rem.Iters}}
	for _, v := range vals {
		x, err := c.xchg64(v.my)
		if err != nil {
			return Report{}, err
		}
		*v.rem = x
	}
	for _, f := range []struct {
		my  float64
		rem *float64
	}{{my.Peak, &rem.Peak}, {my.Avg, &rem.Avg}, {my.MsgRate, &rem.MsgRate}} {
		x, err := c.xchg64(math.Float64bits(f.my))
		if err != nil {
			return Report{}, err
		}
		*f.rem = math.Float64frombits(x)
	}
	return rem, nil
}

func (c *conn) xchg64(v uint64) (uint64, error) {
	var my, rem [8]byte
	binary.BigEndian.PutUint64(my[:], v)
	if err := c.xchg(my[:], rem[:], false); err != nil {
		return 0, withLines(err, exchangeFailed)
	}
	return binary.BigEndian.Uint64(rem[:]), nil
}

// closeConn is ctx_close_connection: a last handshake, then over TCP
// "done" and its NUL, which the peer never reads, and the socket is
// closed.
func (c *conn) closeConn(my *Dest, withGID bool) error {
	if _, err := c.shake(my, withGID); err != nil {
		c.Close()
		return err
	}
	if c.cm != nil {
		// No "done" over rdma_cm.
		if err := c.Close(); err != nil {
			return msgError{"Couldn't close the rdma_cm connection", "  (" + err.Error() + ")"}
		}
		return nil
	}
	_, werr := c.c.Write([]byte("done\x00"))
	cerr := c.Close()
	if werr != nil {
		return msgError{"Couldn't write to socket", "  (" + werr.Error() + ")"}
	}
	if cerr != nil {
		return msgError{"Couldn't close the socket", "  (" + cerr.Error() + ")"}
	}
	return nil
}

// msgError is an error perftest reports as these lines on stderr.
type msgError []string

func (e msgError) Error() string { return strings.Join(e, "\n") }

// noSocketFD is establish_connection's complaint when the client could
// not connect or the server could not accept (printed without a newline).
const noSocketFD = "Unable to open file descriptor for socket connection"

// badService is check_add_port's failure for a negative port, which
// glibc's getaddrinfo does not take as a service number (EAI_SERVICE):
// its lines, with the caller's last (the server's host is "(null)"), or
// nil for a port it takes.
func badService(host string, port int, last string) error {
	if port >= 0 {
		return nil
	}
	if host == "" {
		host = "(null)"
	}
	return msgError{fmt.Sprintf("Servname not supported for ai_socktype for %s:%d", host, port), "Problem in resolving basic address and port", last}
}
