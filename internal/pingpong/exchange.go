package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// msgError is a failure reported the way the C tools report it: the
// lines they print on stderr, in order.
type msgError []string

func (e msgError) Error() string { return strings.Join(e, "\n") }

// withLines returns err's lines followed by more.
func withLines(err error, more ...string) msgError {
	var me msgError
	if errors.As(err, &me) {
		return append(append(msgError(nil), me...), more...)
	}
	return append(msgError{err.Error()}, more...)
}

// perror formats "what: reason" as perror(3) does: glibc's text of the
// errno the error wraps ("Connection reset by peer"), else the Go error
// (an EOF, after which C prints whatever errno held, reads as the short
// read it is).
func perror(what string, err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return what + ": connection closed by peer"
	}
	var n sys.Errno
	if errors.As(err, &n) && n != 0 {
		return what + ": " + sys.Strerror(n)
	}
	return what + ": " + err.Error()
}

// exchange describes one address exchange over TCP (pp_client_exch_dest
// and pp_server_exch_dest of the C tools).
type exchange struct {
	// local holds the messages this side sends, in order: one for the rc,
	// uc and ud tools; srq_pingpong always sends MaxQP of them, the unused
	// ones zero. The peer must send as many.
	local []Dest
	// multi selects srq_pingpong's wording of the errors.
	multi bool
}

// client connects to host:port, sends the local addresses, reads the
// peer's and then sends "done" (the client side). Failures carry the C
// tool's messages.
func (x *exchange) client(ctx context.Context, host string, port uint32) ([]Dest, error) {
	var conn net.Conn
	h, err := NetHost(host)
	if err == nil {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", net.JoinHostPort(h, strconv.FormatUint(uint64(port), 10)))
	}
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			return nil, msgError{fmt.Sprintf("%s for %s:%d", GAIText(dnsErr), host, port), "  (" + dnsErr.Error() + ")"}
		}
		return nil, msgError{fmt.Sprintf("Couldn't connect to %s:%d", host, port), "  (" + err.Error() + ")"}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if err := x.sendAll(conn); err != nil {
		return nil, msgError{"Couldn't send local address", "  (" + err.Error() + ")"}
	}
	remote := make([]Dest, len(x.local))
	var msg [MsgSize]byte
	for i := range remote {
		if n, err := io.ReadFull(conn, msg[:]); err != nil {
			if x.multi {
				return nil, msgError{perror("client read", err), fmt.Sprintf("%d/%d: Couldn't read remote address [%d]", n, MsgSize, i)}
			}
			return nil, msgError{perror("client read/write", err), "Couldn't read/write remote address"}
		}
		d, err := ParseDest(msg[:])
		if err != nil {
			return nil, msgError{fmt.Sprintf("Couldn't parse remote address [%d]: %v", i, err)}
		}
		remote[i] = d
	}
	if _, err := io.WriteString(conn, doneMsg); err != nil {
		if x.multi {
			return nil, msgError{perror("client write", err)}
		}
		return nil, msgError{perror("client read/write", err), "Couldn't read/write remote address"}
	}
	return remote, nil
}

// server listens on port (every local address, IPv6 and IPv4), accepts one
// connection and closes the listener, reads the peer's addresses, calls
// connect with them (the C server moves its QPs to RTR and RTS before it
// answers), sends the local addresses and waits for "done".
func (x *exchange) server(ctx context.Context, port uint32, connect func([]Dest) error) ([]Dest, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", ":"+strconv.FormatUint(uint64(port), 10))
	if err != nil {
		return nil, msgError{fmt.Sprintf("Couldn't listen to port %d", port), "  (" + err.Error() + ")"}
	}
	stopLn := context.AfterFunc(ctx, func() { ln.Close() })
	conn, err := ln.Accept()
	stopLn()
	ln.Close()
	if err != nil {
		return nil, msgError{"accept() failed", "  (" + err.Error() + ")"}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	remote := make([]Dest, len(x.local))
	var msg [MsgSize]byte
	for i := range remote {
		if n, err := io.ReadFull(conn, msg[:]); err != nil {
			if x.multi {
				return nil, msgError{perror("server read", err), fmt.Sprintf("%d/%d: Couldn't read remote address [%d]", n, MsgSize, i)}
			}
			return nil, msgError{perror("server read", err), fmt.Sprintf("%d/%d: Couldn't read remote address", n, MsgSize)}
		}
		d, err := ParseDest(msg[:])
		if err != nil {
			return nil, msgError{fmt.Sprintf("Couldn't parse remote address [%d]: %v", i, err)}
		}
		remote[i] = d
	}
	if err := connect(remote); err != nil {
		return nil, withLines(err, "Couldn't connect to remote QP")
	}
	if err := x.sendAll(conn); err != nil {
		if x.multi {
			return nil, msgError{"Couldn't send local address", "  (" + err.Error() + ")"}
		}
		return nil, msgError{"Couldn't send/recv local address", "  (" + err.Error() + ")"}
	}
	if _, err := io.ReadFull(conn, msg[:len(doneMsg)]); err != nil {
		if x.multi {
			// srq_pingpong's server says "client write" here.
			return nil, msgError{perror("client write", err)}
		}
		return nil, msgError{"Couldn't send/recv local address", "  (" + perror("server read", err) + ")"}
	}
	return remote, nil
}

// sendAll writes every local address, one MsgSize-byte write each, as the
// C tools do.
func (x *exchange) sendAll(conn net.Conn) error {
	for _, d := range x.local {
		m, err := d.Encode()
		if err != nil {
			return err
		}
		if _, err := conn.Write(m[:]); err != nil {
			return err
		}
	}
	return nil
}

// NetHost reads a host operand as getaddrinfo(3) reads the C tools'
// servername, where the net package reads it otherwise: "" names no host
// (EAI_NONAME; net.Dial would take the local system), "*" is glibc's
// NULL node, the local host (net.Dial would look "*" up), and the numeric
// forms inet_aton(3) takes ("127.1", "0x7f000001") are addresses (the
// net package would look them up as names). It returns the host to give
// the net package, or a *net.DNSError that GAIText reads as
// getaddrinfo's.
func NetHost(host string) (string, error) {
	switch host {
	case "":
		return "", &net.DNSError{Err: "empty host name", Name: host, IsNotFound: true}
	case "*":
		return "", nil
	}
	if a, ok := getopt.InetAton(host); ok {
		return a.String(), nil
	}
	return host, nil
}

// GAIText is what the C tools print for a failed getaddrinfo
// (gai_strerror): glibc's EAI_NONAME for a name that does not exist, and
// EAI_AGAIN for a resolver that did not answer, the case of every other
// lookup failure.
func GAIText(e *net.DNSError) string {
	if e.IsNotFound {
		return "Name or service not known"
	}
	return "Temporary failure in name resolution"
}
