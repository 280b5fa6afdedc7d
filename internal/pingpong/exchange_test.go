package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
)

func freePort(t *testing.T) uint32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint32(ln.Addr().(*net.TCPAddr).Port)
}

func dests(n int, base uint32) []Dest {
	ds := make([]Dest, n)
	for i := range ds {
		ds[i] = Dest{LID: uint16(i), QPN: base + uint32(i), PSN: 0x123456 + uint32(i)}
		ds[i].GID[10], ds[i].GID[11], ds[i].GID[12], ds[i].GID[15] = 0xff, 0xff, 127, 1
	}
	return ds
}

// dialRetry connects once the server listens.
func dialRetry(t *testing.T, ctx context.Context, x *exchange, port uint32) ([]Dest, error) {
	t.Helper()
	for {
		r, err := x.client(ctx, "127.0.0.1", port)
		if err == nil || !strings.HasPrefix(err.Error(), "Couldn't connect") || ctx.Err() != nil {
			return r, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExchangeGoGo(t *testing.T) {
	for _, n := range []int{1, MaxQP} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			port := freePort(t)
			sLocal, cLocal := dests(n, 0x100), dests(n, 0x900)
			var connected []Dest
			type res struct {
				r   []Dest
				err error
			}
			done := make(chan res, 1)
			go func() {
				x := exchange{local: sLocal, multi: n > 1}
				r, err := x.server(ctx, port, func(r []Dest) error { connected = r; return nil })
				done <- res{r, err}
			}()
			x := exchange{local: cLocal, multi: n > 1}
			got, err := dialRetry(t, ctx, &x, port)
			if err != nil {
				t.Fatal(err)
			}
			s := <-done
			if s.err != nil {
				t.Fatal(s.err)
			}
			if fmt.Sprint(got) != fmt.Sprint(sLocal) || fmt.Sprint(s.r) != fmt.Sprint(cLocal) || fmt.Sprint(connected) != fmt.Sprint(cLocal) {
				t.Errorf("client got %v\nserver got %v\nconnected with %v", got, s.r, connected)
			}
		})
	}
}

// The bytes on the wire are the C tools': a Go server talking to a
// scripted C client (the exact writes of pp_client_exch_dest), and a Go
// client talking to a scripted C server.
func TestExchangeWireBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cMsg := "0000:000011:abcdef:00000000000000000000ffff0a630001\x00"
	goLocal := []Dest{{LID: 0, QPN: 0x22, PSN: 0x654321, GID: gidOf(t, "::ffff:127.0.0.1")}}
	goMsg := "0000:000022:654321:00000000000000000000ffff7f000001\x00"

	// Go server, C-like client.
	port := freePort(t)
	done := make(chan error, 1)
	var rem []Dest
	go func() {
		x := exchange{local: goLocal}
		var err error
		rem, err = x.server(ctx, port, func([]Dest) error { return nil })
		done <- err
	}()
	var conn net.Conn
	var err error
	for conn == nil {
		if conn, err = net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))); err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	io.WriteString(conn, cMsg)
	buf := make([]byte, MsgSize)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != goMsg {
		t.Fatalf("server sent %q, %v; want %q", buf, err, goMsg)
	}
	io.WriteString(conn, "done\x00")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if rem[0].QPN != 0x11 || rem[0].PSN != 0xabcdef || rem[0].GID.InetNtop() != "::ffff:10.99.0.1" {
		t.Errorf("server parsed %+v", rem[0])
	}

	// Go client, C-like server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srv <- err.Error()
			return
		}
		defer c.Close()
		b := make([]byte, MsgSize)
		io.ReadFull(c, b)
		io.WriteString(c, cMsg)
		d := make([]byte, MsgSize)
		n, _ := io.ReadAtLeast(c, d, 5)
		srv <- string(b) + "|" + string(d[:n])
	}()
	x := exchange{local: goLocal}
	got, err := x.client(ctx, "127.0.0.1", uint32(ln.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	if s := <-srv; s != goMsg+"|done\x00" {
		t.Errorf("C-like server read %q", s)
	}
	if got[0].QPN != 0x11 {
		t.Errorf("client parsed %+v", got[0])
	}
}

func TestExchangeErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	port := freePort(t)
	x := exchange{local: dests(1, 1)}
	_, err := x.client(ctx, "127.0.0.1", port)
	if err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("Couldn't connect to 127.0.0.1:%d\n", port)) {
		t.Errorf("no server: %v", err)
	}
	// getaddrinfo's reading of the operand: "" names no host, where
	// net.Dial would dial the local system; "*" is the local host (glibc's
	// NULL node), where net would look "*" up.
	if _, err := x.client(ctx, "", port); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("Name or service not known for :%d\n", port)) {
		t.Errorf("empty host: %v", err)
	}
	if _, err := x.client(ctx, "*", port); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("Couldn't connect to *:%d\n", port)) {
		t.Errorf("host *: %v", err)
	}

	// The peer hangs up after half a message.
	done := make(chan error, 1)
	go func() {
		_, err := x.server(ctx, port, func([]Dest) error { return nil })
		done <- err
	}()
	var conn net.Conn
	for conn == nil {
		conn, _ = net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		time.Sleep(5 * time.Millisecond)
	}
	io.WriteString(conn, "0000:0000")
	conn.Close()
	if err := <-done; err == nil || err.Error() != "server read: connection closed by peer\n9/52: Couldn't read remote address" {
		t.Errorf("short read: %v", err)
	}

	// connect fails: the server reports it and hangs up.
	port = freePort(t)
	go func() {
		_, err := x.server(ctx, port, func([]Dest) error { return msgError{"Failed to modify QP to RTR"} })
		done <- err
	}()
	_, cerr := dialRetry(t, ctx, &exchange{local: dests(1, 5)}, port)
	if err := <-done; err == nil || err.Error() != "Failed to modify QP to RTR\nCouldn't connect to remote QP" {
		t.Errorf("connect failure: %v", err)
	}
	if cerr == nil || !strings.Contains(cerr.Error(), "Couldn't read/write remote address") {
		t.Errorf("client after the server's connect failure: %v", cerr)
	}

	// A cancelled context ends a server waiting for a client.
	cctx, ccancel := context.WithCancel(ctx)
	cport := freePort(t)
	go func() {
		_, err := x.server(cctx, cport, func([]Dest) error { return nil })
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	ccancel()
	if err := <-done; err == nil || !strings.HasPrefix(err.Error(), "accept() failed") {
		t.Errorf("cancelled server: %v", err)
	}
	var me msgError
	if !errors.As(withLines(errors.New("x"), "y"), &me) || len(me) != 2 {
		t.Errorf("withLines: %v", me)
	}
}

func TestGaiText(t *testing.T) {
	if got := GAIText(&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}); got != "Name or service not known" {
		t.Errorf("not found: %q", got)
	}
	if got := GAIText(&net.DNSError{Err: "read udp: connection refused", Name: "x.invalid"}); got != "Temporary failure in name resolution" {
		t.Errorf("no resolver: %q", got)
	}
}

// TestPerror: a failed read or write prints glibc's text of its errno, as
// perror(3) in the C tools does ("Connection reset by peer", not Go's
// "read tcp ...: connection reset by peer").
func TestPerror(t *testing.T) {
	reset := sys.Errno(104) // ECONNRESET
	err := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", reset)}
	if got, want := perror("client read/write", err), "client read/write: Connection reset by peer"; got != want {
		t.Errorf("perror = %q, want %q", got, want)
	}
	if got, want := perror("server read", io.EOF), "server read: connection closed by peer"; got != want {
		t.Errorf("perror(EOF) = %q, want %q", got, want)
	}
	if got, want := perror("x", sys.Errno(524)), "x: Unknown error 524"; got != want {
		t.Errorf("perror(524) = %q, want %q", got, want)
	}
}
