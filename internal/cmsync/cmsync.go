// Package cmsync is librdmacm's synchronous calls (rdma_create_ep,
// rdma_get_request, a blocking rdma_connect and rdma_accept) and
// rdma_verbs.h's helpers (rdma_reg_msgs, rdma_post_send/recv,
// rdma_get_send/recv_comp) on top of package rdmacm, for the ports of
// librdmacm's examples (cmd/rdmaserver, cmd/rdmaclient).
//
// An Endpoint is an rdma_cm ID with, once it has a QP, its PD and one
// CQ and completion channel each for sends and receives, as
// rdma_create_ep and rdma_create_qp make them when given no PD and no
// CQs. As in librdmacm, each endpoint has an event channel of its own: a
// listener's request moves to one (rdmacm's Migrate) when it is got, so
// that a wait for one connection's event never reads another's.
//
// Errors carry the errno librdmacm's calls set, so that the tools print
// the same perror(3) lines.
package cmsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// resolveTimeout is rdma_create_ep's for address and route resolution.
const resolveTimeout = 2000 * time.Millisecond

// Endpoint is one synchronous rdma_cm ID and what rdma_create_ep and
// rdma_get_request make for it.
type Endpoint struct {
	ch     *rdmacm.EventChannel
	ownCh  bool // this endpoint closes ch
	ID     *rdmacm.ID
	pd     *uverbs.PD
	ownPD  bool
	sendCC *uverbs.CompChannel
	recvCC *uverbs.CompChannel
	SendCQ *uverbs.CQ
	RecvCQ *uverbs.CQ
	QP     *uverbs.QP
	attr   *uverbs.QPInitAttr // a listener's, for its requests' QPs
}

// CreateEP is rdma_create_ep(3) with no PD: an ID on a channel of its own
// in ai's port space; with AIPassive bound to ai.Src (attr kept for the
// requests' QPs), else resolved to ai.Dst (address, then route, two
// seconds each) with a QP of attr, whose capabilities attr gets back.
func CreateEP(ctx context.Context, ai *rdmacm.AddrInfo, attr *uverbs.QPInitAttr) (*Endpoint, error) {
	ch, err := rdmacm.Open()
	if err != nil {
		return nil, err
	}
	ep := &Endpoint{ch: ch, ownCh: true}
	if ep.ID, err = ch.CreateID(ai.PortSpace); err != nil {
		ep.Destroy()
		return nil, err
	}
	if ai.Flags&rdmacm.AIPassive != 0 {
		if err := ep.ID.BindAddr(ai.Src); err != nil {
			ep.Destroy()
			return nil, err
		}
		if attr != nil {
			a := *attr
			a.Type = ai.QPType
			ep.attr = &a
		}
		return ep, nil
	}
	if err = ep.ID.ResolveAddr(ai.Src, ai.Dst, resolveTimeout); err == nil {
		err = ep.complete(ctx)
	}
	if err == nil {
		if err = ep.ID.ResolveRoute(resolveTimeout); err == nil {
			err = ep.complete(ctx)
		}
	}
	if err == nil && attr != nil {
		attr.Type = ai.QPType
		err = ep.createQP(attr)
	}
	if err != nil {
		ep.Destroy()
		return nil, err
	}
	return ep, nil
}

// complete is librdmacm's ucma_complete: the channel's next event, an
// error when it carries a status (ECONNREFUSED for a reject, else the
// status's errno). As in librdmacm, the event's type is not checked.
func (ep *Endpoint) complete(ctx context.Context) error {
	ev, err := ep.ch.GetEvent(ctx)
	if err != nil {
		return err
	}
	return eventErr(&ev)
}

func eventErr(ev *rdmacm.Event) error {
	switch {
	case ev.Status == 0:
		return nil
	case ev.Err != nil:
		// The channel's own failure (librdmacm would report errno
		// -status, EPERM, here).
		return fmt.Errorf("%v: %w", ev, ev.Err)
	case ev.Type == rdmacm.EventRejected:
		return fmt.Errorf("%v: %w", ev, sys.ECONNREFUSED)
	case ev.Status < 0:
		return fmt.Errorf("%v: %w", ev, sys.Errno(-ev.Status))
	}
	return fmt.Errorf("%v: %w", ev, sys.Errno(ev.Status))
}

// createQP is rdma_create_qp with no PD and no CQs: the endpoint's own PD,
// a CQ and completion channel for each direction sized by the QP's queue
// depths, the QP; attr gets the QP's capabilities.
func (ep *Endpoint) createQP(attr *uverbs.QPInitAttr) error {
	dev := ep.ID.Context()
	if dev == nil {
		return fmt.Errorf("the rdma_cm ID has no device: %w", sys.EINVAL)
	}
	var err error
	if ep.pd, err = dev.AllocPD(); err != nil {
		return err
	}
	ep.ownPD = true
	if attr.Cap.MaxRecvWR > 0 {
		if ep.recvCC, err = dev.CreateCompChannel(); err != nil {
			return err
		}
		if ep.RecvCQ, err = dev.CreateCQ(int(attr.Cap.MaxRecvWR), &uverbs.CQOptions{Channel: ep.recvCC}); err != nil {
			return err
		}
	}
	if attr.Cap.MaxSendWR > 0 {
		if ep.sendCC, err = dev.CreateCompChannel(); err != nil {
			return err
		}
		if ep.SendCQ, err = dev.CreateCQ(int(attr.Cap.MaxSendWR), &uverbs.CQOptions{Channel: ep.sendCC}); err != nil {
			return err
		}
	}
	a := *attr
	a.SendCQ, a.RecvCQ = ep.SendCQ, ep.RecvCQ
	if ep.QP, err = ep.ID.CreateQP(ep.pd, a); err != nil {
		return err
	}
	attr.Cap = ep.QP.Cap()
	return nil
}

// Listen is rdma_listen(3).
func (ep *Endpoint) Listen(backlog int) error { return ep.ID.Listen(backlog) }

// GetRequest is rdma_get_request(3): the next connection request, as an
// Endpoint on an event channel of its own with a QP of the listener's
// attributes.
func (ep *Endpoint) GetRequest(ctx context.Context) (*Endpoint, error) {
	ev, err := ep.ch.GetEvent(ctx)
	if err != nil {
		return nil, err
	}
	if err := eventErr(&ev); err != nil {
		return nil, err
	}
	if ev.Type != rdmacm.EventConnectRequest {
		return nil, fmt.Errorf("%v while waiting for a connect request: %w", &ev, sys.EINVAL)
	}
	req := &Endpoint{ID: ev.ID}
	if req.ch, err = rdmacm.Open(); err != nil {
		ev.ID.Destroy()
		return nil, err
	}
	req.ownCh = true
	if err := ev.ID.Migrate(req.ch); err != nil {
		req.Destroy()
		return nil, err
	}
	if ep.attr != nil {
		a := *ep.attr
		if err := req.createQP(&a); err != nil {
			req.Destroy()
			return nil, err
		}
	}
	return req, nil
}

// Accept is rdma_accept(3) on a synchronous ID: it returns once the
// connection is established.
func (ep *Endpoint) Accept(ctx context.Context, p *rdmacm.ConnParam) error {
	if err := ep.ID.Accept(p); err != nil {
		return err
	}
	return ep.complete(ctx)
}

// Connect is rdma_connect(3) on a synchronous ID: it returns once the
// connection is established, or fails with ECONNREFUSED when rejected.
func (ep *Endpoint) Connect(ctx context.Context, p *rdmacm.ConnParam) error {
	if err := ep.ID.Connect(p); err != nil {
		return err
	}
	return ep.complete(ctx)
}

// Disconnect is rdma_disconnect(3).
func (ep *Endpoint) Disconnect() error { return ep.ID.Disconnect() }

// RegMsgs is rdma_reg_msgs(3): buf registered for local writes on the
// endpoint's PD.
func (ep *Endpoint) RegMsgs(buf []byte) (*uverbs.MR, error) {
	if ep.pd == nil {
		return nil, fmt.Errorf("the endpoint has no QP: %w", sys.EINVAL)
	}
	return ep.pd.RegMR(buf, uverbs.AccessLocalWrite)
}

// PostRecv is rdma_post_recv(3): one receive into all of mr's memory.
func (ep *Endpoint) PostRecv(id uint64, mr *uverbs.MR) error {
	if ep.QP == nil || mr == nil {
		return fmt.Errorf("post recv needs a QP and an MR: %w", sys.EINVAL)
	}
	return ep.QP.PostRecv([]uverbs.RecvWR{{ID: id, SGL: []uverbs.SGE{mr.SGE(0, mr.Len())}}})
}

// PostSend is rdma_post_send(3): one signaled send of msg, from mr's
// memory (msg is mr's), or with SendInline and a nil mr copied into the
// send queue.
func (ep *Endpoint) PostSend(id uint64, msg []byte, mr *uverbs.MR, flags uverbs.SendFlags) error {
	if ep.QP == nil {
		return fmt.Errorf("the endpoint has no QP: %w", sys.EINVAL)
	}
	wr := uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: flags | uverbs.SendSignaled}
	switch {
	case mr == nil && flags&uverbs.SendInline != 0:
		wr.Inline = msg
	case mr == nil:
		return fmt.Errorf("post send needs an MR or SendInline: %w", sys.EINVAL)
	default:
		wr.Flags &^= uverbs.SendInline
		wr.SGL = []uverbs.SGE{mr.SGE(0, len(msg))}
	}
	return ep.QP.PostSend([]uverbs.SendWR{wr})
}

// GetSendComp is rdma_get_send_comp(3): the next send completion, waiting
// on the send CQ's channel while there is none. It returns 1, or 0 and
// an error; the completion's status is the caller's to check.
func (ep *Endpoint) GetSendComp(ctx context.Context, wc *uverbs.WC) (int, error) {
	return getComp(ctx, ep.SendCQ, ep.sendCC, wc)
}

// GetRecvComp is rdma_get_recv_comp(3), for the receive CQ.
func (ep *Endpoint) GetRecvComp(ctx context.Context, wc *uverbs.WC) (int, error) {
	return getComp(ctx, ep.RecvCQ, ep.recvCC, wc)
}

// getComp polls, arms, polls again and sleeps on the channel, as
// librdmacm's rdma_get_{send,recv}_comp do.
func getComp(ctx context.Context, cq *uverbs.CQ, cc *uverbs.CompChannel, wc *uverbs.WC) (int, error) {
	if cq == nil {
		return 0, fmt.Errorf("no CQ: %w", sys.EINVAL)
	}
	var one [1]uverbs.WC
	poll := func() (int, error) {
		n, err := cq.Poll(one[:])
		*wc = one[0]
		return n, err
	}
	for {
		if n, err := poll(); n != 0 || err != nil {
			return n, err
		}
		if err := cq.ReqNotify(false); err != nil {
			return 0, err
		}
		if n, err := poll(); n != 0 || err != nil {
			return n, err
		}
		if _, err := cc.GetCQEvent(ctx); err != nil {
			return 0, err
		}
		if err := cq.AckEvents(1); err != nil {
			return 0, err
		}
	}
}

// Destroy is rdma_destroy_ep(3): the QP, CQs, channels and PD it made,
// the ID, and the event channel it opened. Errors are dropped, as the C
// call has none.
func (ep *Endpoint) Destroy() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ep.QP != nil {
		ep.QP.Destroy(ctx)
	}
	if ep.SendCQ != nil {
		ep.SendCQ.Destroy(ctx)
	}
	if ep.RecvCQ != nil {
		ep.RecvCQ.Destroy(ctx)
	}
	for _, cc := range []*uverbs.CompChannel{ep.sendCC, ep.recvCC} {
		if cc != nil {
			cc.Close()
		}
	}
	if ep.pd != nil && ep.ownPD {
		ep.pd.Dealloc()
	}
	if ep.ID != nil {
		ep.ID.Destroy()
	}
	if ep.ownCh {
		ep.ch.Close()
	}
}

// Perror prints "what: strerror(errno)" as perror(3) does, with glibc's
// text; an error without an errno is printed whole.
func Perror(w io.Writer, what string, err error) {
	if n, ok := Errno(err); ok {
		fmt.Fprintf(w, "%s: %s\n", what, Strerror(n))
		return
	}
	fmt.Fprintf(w, "%s: %v\n", what, err)
}

// Errno finds the errno an error wraps; an ErrInvalid refused before
// any system call is EINVAL, as librdmacm and libibverbs set errno for
// the arguments they refuse.
func Errno(err error) (sys.Errno, bool) {
	var n sys.Errno
	if errors.As(err, &n) && n != 0 {
		return n, true
	}
	if errors.Is(err, rdmacm.ErrInvalid) {
		return sys.EINVAL, true
	}
	return 0, false
}

// Strerror is glibc's text for n (Go's, capitalised as glibc's is;
// "Unknown error N" for a number neither knows, such as the kernel's
// internal ENOTSUPP, 524).
func Strerror(n sys.Errno) string {
	s := n.Error()
	if strings.HasPrefix(s, "errno ") {
		return "Unknown error " + s[len("errno "):]
	}
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// GetRDMAAddr is the librdmacm examples' get_rdma_addr (common.c): with
// AIPassive in hints, src's address at port; otherwise dst at port, from
// src's address when src is not empty.
func GetRDMAAddr(ctx context.Context, src, dst, port string, hints *rdmacm.AddrInfo) (*rdmacm.AddrInfo, error) {
	if hints.Flags&rdmacm.AIPassive != 0 {
		return rdmacm.GetAddrInfo(ctx, src, port, hints)
	}
	h := *hints
	if src != "" {
		sh := h
		sh.Flags |= rdmacm.AIPassive
		s, err := rdmacm.GetAddrInfo(ctx, src, "", &sh)
		if err != nil {
			return nil, err
		}
		h.Src = s.Src
	}
	return rdmacm.GetAddrInfo(ctx, dst, port, &h)
}

// GAIStatus prints "what error: gai_strerror(code)" to w, as the examples
// do for a failed rdma_getaddrinfo, and returns the code (-1 for an
// error that is not a *rdmacm.GAIError).
func GAIStatus(w io.Writer, what string, err error) int {
	var ge *rdmacm.GAIError
	if errors.As(err, &ge) {
		fmt.Fprintf(w, "%s error: %s\n", what, ge.Reason())
		return ge.Code
	}
	fmt.Fprintf(w, "%s error: %v\n", what, err)
	return -1
}

// ErrnoValue is the errno a failed verbs call returns (ibv_post_send,
// ibv_query_port: positive), 1 when err carries none.
func ErrnoValue(err error) int {
	if n, ok := Errno(err); ok {
		return int(n)
	}
	return 1
}

// CreateFirstEventChannel is the librdmacm examples'
// create_first_event_channel (common.c): rdmacm.Open, and on failure
// their line on w: "No RDMA devices were detected" for ENODEV, else
// perror's "failed to create RDMA CM event channel".
func CreateFirstEventChannel(w io.Writer) (*rdmacm.EventChannel, error) {
	ch, err := rdmacm.Open()
	if err != nil {
		if errors.Is(err, sys.ENODEV) {
			fmt.Fprintf(w, "No RDMA devices were detected\n")
		} else {
			Perror(w, "failed to create RDMA CM event channel", err)
		}
	}
	return ch, err
}

// SimpleMain is the main of librdmacm's rdma_server and rdma_client: -s
// (default server) and -p (7471), getopt's complaint and the usage for a
// bad command line (status 1), else "name: start", run, "name: end N",
// and N as the shell sees it.
func SimpleMain(ctx context.Context, prog, name, server string, args []string, stdout, stderr io.Writer,
	run func(ctx context.Context, server, port string, stdout, stderr io.Writer) int) int {
	port := "7471"
	opts, _, perr := getopt.Parse(args, "s:p:", nil)
	for _, op := range opts {
		switch op.Val {
		case 's':
			server = op.Arg
		case 'p':
			port = op.Arg
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
		fmt.Fprintf(stdout, "usage: %s\n\t[-s server_address]\n\t[-p port_number]\n", prog)
		return 1
	}
	fmt.Fprintf(stdout, "%s: start\n", name)
	ret := run(ctx, server, port, stdout, stderr)
	fmt.Fprintf(stdout, "%s: end %d\n", name, ret)
	return ret & 0xff
}

// SimpleAddr is rdma_server's and rdma_client's rdma_getaddrinfo: the
// address, or nil, their "rdma_getaddrinfo: reason" line on w and the
// status run returns (getaddrinfo's code, -1 for another error).
func SimpleAddr(ctx context.Context, w io.Writer, server, port string, hints *rdmacm.AddrInfo) (*rdmacm.AddrInfo, int) {
	ai, err := rdmacm.GetAddrInfo(ctx, server, port, hints)
	if err == nil {
		return ai, 0
	}
	var ge *rdmacm.GAIError
	if errors.As(err, &ge) {
		fmt.Fprintf(w, "rdma_getaddrinfo: %s\n", ge.Reason())
		return nil, ge.Code
	}
	fmt.Fprintf(w, "rdma_getaddrinfo: %v\n", err)
	return nil, -1
}
