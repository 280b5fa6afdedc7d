package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The work request ids of the C tools: a completion's wr_id says whether
// it is the send or a receive, and a QP's "pending" set holds the ids it
// still waits for before it sends the next message.
const (
	recvWRID = 1
	sendWRID = 2
)

// sizeofChar is the divisor of the C tools' page marks: -c writes
// i / page_size % sizeof(char) into the first byte of each page of the
// client's buffer and the server checks it; sizeof(char) is 1, so every
// mark is 0. The port keeps that arithmetic rather than inventing marks.
const sizeofChar = 1

// Main is a whole tool: it parses args (without the program name) as the C
// tool does, runs the ping-pong and returns the exit status. With -e the
// loop sleeps on the CQ's completion channel before each poll, otherwise
// it busy-polls. The address
// lines, the summary and -c's findings go to stdout; usage goes to stdout
// and errors to stderr, as the C tools print them.
func Main(k Kind, prog string, args []string, stdout, stderr io.Writer) int {
	o, err := ParseArgs(k, args)
	if err != nil {
		var ge *getoptError
		if errors.As(err, &ge) {
			fmt.Fprintf(stderr, "%s: %s\n", prog, ge.msg)
		}
		Usage(stdout, k, prog)
		return 1
	}
	if err := Run(context.Background(), k, o, stdout, stderr); err != nil {
		return 1
	}
	return 0
}

// pp is the state of one run (struct pingpong_context).
type pp struct {
	k      Kind
	o      Options
	stdout io.Writer
	stderr io.Writer

	dev    *uverbs.Context
	ch     *uverbs.CompChannel // -e only
	buf    *uverbs.Buffer
	mem    []byte // the registered bytes (size, or size+40 for ud)
	pd     *uverbs.PD
	mr     *uverbs.MR
	cq     *uverbs.CQ
	srq    *uverbs.SRQ
	qps    []*uverbs.QP
	ah     *uverbs.AH
	inline bool

	sendOff int // where sends start in mem (40 for ud: after the GRH room)
	recvLen int // bytes each receive may take

	events int // completion events read (-e)

	send  [1]uverbs.SendWR
	sge   [1]uverbs.SGE
	rsge  [1]uverbs.SGE
	recvs []uverbs.RecvWR
}

// Run runs one side of the ping-pong with parsed options: the client
// connecting to o.Server when o.Client, else the server. It prints what the
// C tool prints: on stdout, and on a failure its lines on stderr (the
// error returned carries them too; warnings go to stderr directly). ctx
// bounds the TCP exchange and -e's waits for completion events; the
// busy-polling loop runs until done, as in the C tools.
//
// A failure is printed before the verbs objects are released: the C tools
// print their complaint and exit, leaving the teardown to the kernel, and
// a peer that stops on the same condition may have this side stopped at
// once; destroying the objects can take long on a loaded host.
func Run(ctx context.Context, k Kind, o Options, stdout, stderr io.Writer) error {
	c, err := start(ctx, k, o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		if c != nil {
			c.release()
		}
		return err
	}
	if err := c.close(); err != nil {
		fmt.Fprintln(stderr, err)
		return err
	}
	return nil
}

// start checks the options, sets the verbs objects up and runs the
// ping-pong; on failure, c is what must be released (nil for nothing).
func start(ctx context.Context, k Kind, o Options, stdout, stderr io.Writer) (c *pp, err error) {
	if _, ok := specs[k]; !ok {
		return nil, fmt.Errorf("unknown tool kind %v", k)
	}
	switch {
	case k == RC && o.ODP && o.DM:
		return nil, msgError{"DM memory region can't be on demand"}
	case k == RC && !o.ODP && o.Prefetch:
		return nil, msgError{"prefetch is valid only with on-demand memory region"}
	case k == SRQ && o.NumQP > o.RxDepth:
		return nil, msgError{fmt.Sprintf("rx_depth %d is too small for %d QPs -- must have at least one receive per QP.", int32(o.RxDepth), int32(o.NumQP))}
	case k == SRQ && o.NumQP >= MaxQP:
		return nil, msgError{fmt.Sprintf("num_qp %d must be less than %d", int32(o.NumQP), MaxQP-1)}
	}
	nqp := 1
	if k == SRQ {
		nqp = int(o.NumQP)
	}

	// ibv_get_device_list, after these checks (rc_pingpong.c:961,
	// uc_pingpong.c:652, ud_pingpong.c:665, srq_pingpong.c:798), prints
	// libibverbs' RLIMIT_MEMLOCK warning, before pickDevice's message
	// where there is no device.
	memlock.Warn(stderr)
	dev, err := pickDevice(o.Dev, o.DevSet)
	if err != nil {
		return nil, err
	}
	c = &pp{k: k, o: o, stdout: stdout, stderr: stderr}
	if err := c.init(dev, nqp); err != nil {
		return c, err
	}
	if err := c.pingPong(ctx, nqp); err != nil {
		return c, err
	}
	return c, nil
}

// pickDevice finds the device named name, or the first device when no
// name was given (set false), with the C tools' messages. A name given as
// "" is looked for as the C tools look for it, and not found.
func pickDevice(name string, set bool) (uverbs.Device, error) {
	devs, err := uverbs.Devices()
	if errors.Is(err, sys.ENOSYS) {
		// No RDMA support in the kernel: ibv_get_device_list fails.
		return uverbs.Device{}, msgError{"Failed to get IB devices list: " + sys.Strerror(sys.ENOSYS)}
	}
	if err != nil && !errors.Is(err, uverbs.ErrNoDevice) {
		return uverbs.Device{}, msgError{"Failed to get IB devices list: " + err.Error()}
	}
	if !set {
		if len(devs) == 0 {
			return uverbs.Device{}, msgError{"No IB devices found"}
		}
		return devs[0], nil
	}
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	return uverbs.Device{}, msgError{fmt.Sprintf("IB device %s not found", name)}
}

// fail returns the C tool's message followed by the library's error.
func fail(msg string, err error) error {
	return msgError{msg, "  (" + err.Error() + ")"}
}

// qpLabel is "QP" for the one-QP tools and "QP[i]" for srq.
func (c *pp) qpLabel(i int) string {
	if c.k == SRQ {
		return fmt.Sprintf("QP[%d]", i)
	}
	return "QP"
}

// init is pp_init_ctx: buffer, device, PD, MR, CQ, SRQ, QPs in INIT.
func (c *pp) init(dev uverbs.Device, nqp int) error {
	o := &c.o
	if int32(o.Size) < 0 {
		// pp_init_ctx takes the size as an int: from 2^31 up it is
		// negative, and memalign of it (as a size_t) fails.
		return fail("Couldn't allocate work buf.", fmt.Errorf("-s %d is negative as the C tools' int", o.Size))
	}
	size := int(o.Size)
	n := size
	c.recvLen = size
	if c.k == UD {
		n += udGRH
		c.sendOff = udGRH
		c.recvLen = size + udGRH
	}
	buf, err := uverbs.AllocBuffer(max(n, 1))
	if err != nil {
		return fail("Couldn't allocate work buf.", err)
	}
	c.buf = buf
	c.mem = buf.Bytes()[:n]
	if c.k != SRQ { // srq_pingpong zeroes its buffer, the others fill it with 0x7b
		for i := range c.mem {
			c.mem[i] = 0x7b
		}
	}

	c.dev, err = uverbs.Open(dev)
	if err != nil {
		return fail("Couldn't get context for "+dev.Name, err)
	}
	if c.k == UD {
		pa, err := c.dev.QueryPort(int(uint8(o.IBPort))) // ibv_query_port's port_num is a uint8_t
		if err != nil {
			return fail(fmt.Sprintf("Unable to query port info for port %d", o.IBPort), err)
		}
		if mtu := 1 << (int(pa.ActiveMTU) + 7); size > mtu {
			return msgError{fmt.Sprintf("Requested size larger than port MTU (%d)", mtu)}
		}
	}
	access := uverbs.AccessLocalWrite
	if c.k == SRQ && o.ODP {
		attr, err := c.dev.QueryDevice()
		if err != nil {
			return fail("Couldn't query device for its features", err)
		}
		const want = uverbs.ODPSend | uverbs.ODPSRQRecv
		if attr.ODPGeneralCaps&uverbs.ODPSupport == 0 || attr.ODPRCCaps&want != want {
			return msgError{"The device isn't ODP capable or does not support RC send, receive and srq with ODP"}
		}
		access |= uverbs.AccessOnDemand
	}
	if o.Events {
		c.ch, err = c.dev.CreateCompChannel()
		if err != nil {
			return fail("Couldn't create completion channel", err)
		}
		if err := c.ch.SetWaitMode(WaitModeFromEnv()); err != nil {
			return fail("Couldn't set the completion channel's wait mode", err)
		}
	}
	c.pd, err = c.dev.AllocPD()
	if err != nil {
		return fail("Couldn't allocate PD", err)
	}
	if c.k == RC && (o.ODP || o.Timestamps || o.DM) {
		a, err := c.rcExtensions()
		if err != nil {
			return err
		}
		access |= a
	}
	c.mr, err = c.pd.RegMR(c.mem, access)
	if err != nil {
		return fail("Couldn't register MR", err)
	}
	if c.k == RC && o.Prefetch {
		// ibv_advise_mr failing is only a warning in the C tool too;
		// librxe has no advise_mr, so libibverbs answers EOPNOTSUPP
		// (95), which is what C prints on rxe. (This port has no
		// ibv_advise_mr at all.)
		fmt.Fprintln(c.stderr, "Couldn't prefetch MR(95). Continue anyway")
	}
	// The C tools pass rx_depth to pp_init_ctx as an int and add in int:
	// -r -1 with the SRQ tool's 16 QPs asks for a CQ of 15 and fails at
	// the SRQ instead (max_wr 2^32-1).
	cqe := int(int32(o.RxDepth + 1))
	if c.k == SRQ {
		cqe = int(int32(o.RxDepth + uint32(nqp)))
	}
	c.cq, err = c.dev.CreateCQ(cqe, &uverbs.CQOptions{Channel: c.ch})
	if err != nil {
		return fail("Couldn't create CQ", err)
	}
	if c.k == SRQ {
		c.srq, err = c.pd.CreateSRQ(uverbs.SRQAttr{MaxWR: int(o.RxDepth), MaxSGE: 1})
		if err != nil {
			return fail("Couldn't create SRQ", err)
		}
	}
	typ := map[Kind]uverbs.QPType{RC: uverbs.QPTypeRC, UC: uverbs.QPTypeUC, UD: uverbs.QPTypeUD, SRQ: uverbs.QPTypeRC}[c.k]
	c.inline = true
	for i := 0; i < nqp; i++ {
		ia := uverbs.QPInitAttr{Type: typ, SendCQ: c.cq, RecvCQ: c.cq, SRQ: c.srq,
			Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}}
		if c.srq == nil {
			ia.Cap.MaxRecvWR, ia.Cap.MaxRecvSGE = int(o.RxDepth), 1
		}
		qp, err := c.pd.CreateQP(ia)
		if err != nil {
			return fail("Couldn't create "+c.qpLabel(i), err)
		}
		c.qps = append(c.qps, qp)
		// The C tools ask for no inline data, then query the QP
		// (ibv_query_qp, IBV_QP_CAP) and send inline whenever the device
		// granted room for the message anyway (rxe grants the size of the
		// SGE list, 16 bytes); a failed query leaves the requested 0.
		if _, got, err := qp.Query(uverbs.QPAttrCap); err != nil || got.Cap.MaxInlineData < size || c.k == RC && o.DM {
			c.inline = false
		}
	}
	if nqp == 0 {
		c.inline = false
	}
	for i, qp := range c.qps {
		attr := uverbs.QPAttr{State: uverbs.QPStateInit, PKeyIndex: 0, PortNum: uint8(o.IBPort)}
		mask := uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort
		if c.k == UD {
			attr.QKey = udQKey
			mask |= uverbs.QPAttrQKey
		} else {
			mask |= uverbs.QPAttrAccessFlags
		}
		if err := qp.Modify(&attr, mask); err != nil {
			return fail("Failed to modify "+c.qpLabel(i)+" to INIT", err)
		}
	}
	c.prepareWRs()
	return nil
}

// rcExtensions makes rc_pingpong's device checks for -o, -O, -t and -j
// (with its messages) and returns the access flags -o adds. What the
// library cannot do yet (implicit ODP, timestamps, device memory) fails
// after the checks, so that a device without the feature answers as the
// C tool does.
func (c *pp) rcExtensions() (uverbs.Access, error) {
	o := &c.o
	attr, err := c.dev.QueryDevice()
	if err != nil {
		return 0, fail("Couldn't query device for its features", err)
	}
	var access uverbs.Access
	if o.ODP {
		const want = uverbs.ODPSend | uverbs.ODPRecv
		if attr.ODPGeneralCaps&uverbs.ODPSupport == 0 || attr.ODPRCCaps&want != want {
			return 0, msgError{"The device isn't ODP capable or does not support RC send and receive with ODP"}
		}
		if o.ImplicitODP && attr.ODPGeneralCaps&uverbs.ODPSupportImplicit == 0 {
			return 0, msgError{"The device doesn't support implicit ODP"}
		}
		access |= uverbs.AccessOnDemand
	}
	if o.Timestamps && attr.TimestampMask == 0 {
		return 0, msgError{"The device isn't completion timestamp capable"}
	}
	if o.DM {
		if attr.MaxDMSize == 0 {
			return 0, msgError{"Device doesn't support dm allocation"}
		}
		if attr.MaxDMSize < uint64(o.Size) {
			return 0, msgError{"Device memory is insufficient"}
		}
	}
	switch {
	case o.ImplicitODP:
		return 0, msgError{"-O (implicit on-demand paging) is not supported by this port: pureverbs registers Go memory only"}
	case o.Timestamps:
		return 0, msgError{"-t (completion timestamps) is not supported by this port: pureverbs has no extended CQ yet"}
	case o.DM:
		return 0, msgError{"-j (device memory) is not supported by this port: pureverbs has no device memory yet"}
	}
	return access, nil
}

// prepareWRs builds the send and receive work requests once; posting
// copies them into the queues, so the same values serve every post.
func (c *pp) prepareWRs() {
	size := int(c.o.Size)
	c.sge[0] = uverbs.SGE{Addr: c.mr.Addr() + uint64(c.sendOff), Length: uint32(size), LKey: c.mr.LKey()}
	c.rsge[0] = uverbs.SGE{Addr: c.mr.Addr(), Length: uint32(c.recvLen), LKey: c.mr.LKey()}
	w := &c.send[0]
	w.ID = sendWRID
	w.Opcode = uverbs.WRSend
	w.Flags = uverbs.SendSignaled
	if c.inline {
		w.Flags |= uverbs.SendInline
		w.Inline = c.mem[c.sendOff : c.sendOff+size]
	} else {
		w.SGL = c.sge[:]
	}
	n := int(c.o.RxDepth) + 1
	c.recvs = make([]uverbs.RecvWR, min(n, 4096))
	for i := range c.recvs {
		c.recvs[i] = uverbs.RecvWR{ID: recvWRID, SGL: c.rsge[:]}
	}
}

// postRecv posts n receives (to the QP, or the SRQ) and returns how many
// were posted, as pp_post_recv does.
func (c *pp) postRecv(n int) int {
	done := 0
	for done < n {
		batch := c.recvs[:min(n-done, len(c.recvs))]
		var err error
		if c.srq != nil {
			err = c.srq.PostRecv(batch)
		} else {
			err = c.qps[0].PostRecv(batch)
		}
		if err != nil {
			var pe *uverbs.PostError
			if errors.As(err, &pe) {
				return done + pe.Index
			}
			return done
		}
		done += len(batch)
	}
	return done
}

// postSend posts the message on QP i.
func (c *pp) postSend(i int) error {
	return c.qps[i].PostSend(c.send[:])
}

// pingPong runs everything from the first receives to the summary.
func (c *pp) pingPong(ctx context.Context, nqp int) error {
	o := &c.o
	routs := c.postRecv(int(o.RxDepth))
	if routs < int(o.RxDepth) {
		return msgError{fmt.Sprintf("Couldn't post receive (%d)", routs)}
	}
	if o.Events {
		if err := c.cq.ReqNotify(false); err != nil {
			return fail("Couldn't request CQ notification", err)
		}
	}
	pa, err := c.dev.QueryPort(int(uint8(o.IBPort))) // ibv_query_port's port_num is a uint8_t
	if err != nil {
		return fail("Couldn't get port info", err)
	}
	var gid uverbs.GID
	if o.GIDIndex >= 0 && nqp > 0 {
		// ibv_query_gid: an empty entry is the zero GID, as in C.
		// ibv_srq_pingpong asks once per QP, so -q 0 asks for no GID
		// (and never fails on the index).
		gid, err = c.dev.GID(int(uint8(o.IBPort)), o.GIDIndex) // ibv_query_gid's too
		if err != nil {
			if c.k == RC || c.k == UC {
				return fail(fmt.Sprintf("can't read sgid of index %d", o.GIDIndex), err)
			}
			return fail(fmt.Sprintf("Could not get local gid for gid index %d", o.GIDIndex), err)
		}
	}
	nmsg := 1
	if c.k == SRQ {
		nmsg = MaxQP
	}
	local := make([]Dest, nmsg)
	for i := 0; i < nqp; i++ {
		if c.k != UD && pa.LinkLayer != uverbs.LinkLayerEthernet && pa.LID == 0 {
			return msgError{"Couldn't get local LID"}
		}
		local[i] = Dest{LID: pa.LID, QPN: c.qps[i].QPN(), PSN: rand.Uint32() & 0xffffff, GID: gid}
		sep := ","
		if c.k == UD {
			sep = ":" // ibv_ud_pingpong's local line says "PSN 0x...: GID"
		}
		fmt.Fprintf(c.stdout, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n",
			local[i].LID, local[i].QPN, local[i].PSN, sep, local[i].GID.InetNtop())
	}

	x := exchange{local: local, multi: c.k == SRQ}
	var remote []Dest
	if o.Client {
		remote, err = x.client(ctx, o.Server, o.Port)
	} else {
		remote, err = x.server(ctx, o.Port, func(r []Dest) error { return c.connect(local, r) })
	}
	if err != nil {
		return err
	}
	shown := 1
	if c.k == SRQ {
		shown = nqp
	}
	for _, r := range remote[:shown] {
		fmt.Fprintf(c.stdout, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n",
			r.LID, r.QPN, r.PSN, r.GID.InetNtop())
	}
	if o.Client {
		if err := c.connect(local, remote); err != nil {
			return err
		}
	}

	l := &loop{
		cq: c.cq, iters: o.Iters, rxDepth: int(o.RxDepth), routs: routs, refillAt: 1,
		pending: make([]int, max(nqp, 1)), postRecv: c.postRecv, postSend: c.postSend,
		wc: make([]uverbs.WC, 2), parseFailed: c.k == RC,
	}
	if c.k == SRQ {
		l.refillAt = nqp
		l.wc = make([]uverbs.WC, nqp+int(o.RxDepth))
		l.qpIndex = c.qpIndex
	}
	if o.Events {
		l.waitEvent = func() error { return c.waitEvent(ctx) }
	}
	if c.k == UD {
		remoteQPN := remote[0].QPN
		c.send[0].RemoteQPN = remoteQPN
		c.send[0].RemoteQKey = udQKey
		c.send[0].AH = c.ah
	}
	for i := range nqp {
		l.pending[i] = recvWRID
	}
	if o.Client {
		if o.Validate {
			for i := 0; i < int(o.Size); i += os.Getpagesize() {
				c.mem[c.sendOff+i] = byte(i / os.Getpagesize() % sizeofChar)
			}
		}
		for i := range nqp {
			if err := c.postSend(i); err != nil {
				return fail("Couldn't post send", err)
			}
			l.pending[i] |= sendWRID
		}
	}

	start := time.Now()
	err = l.run()
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	io.WriteString(c.stdout, Summary(o.Size, o.Iters, Micros(elapsed)))
	if !o.Client && o.Validate {
		ps := os.Getpagesize()
		for i := 0; i < int(o.Size); i += ps {
			if c.mem[c.sendOff+i] != byte(i/ps%sizeofChar) {
				fmt.Fprintf(c.stdout, "invalid data in page %d\n", i/ps)
			}
		}
	}
	// ibv_ack_cq_events for every event -e read (destroying the CQ waits
	// for them).
	if err := c.cq.AckEvents(c.events); err != nil {
		return fail("Couldn't acknowledge CQ events", err)
	}
	return nil
}

// waitEvent sleeps until the CQ's channel reports a completion, counts
// the event (acknowledged at the end, as the C tools do) and re-arms the
// CQ: the -e loop's step before each poll.
func (c *pp) waitEvent(ctx context.Context) error {
	cq, err := c.ch.GetCQEvent(ctx)
	if err != nil {
		return fail("Failed to get cq_event", err)
	}
	c.events++
	if cq != c.cq {
		return msgError{fmt.Sprintf("CQ event for unknown CQ %p", cq)}
	}
	if err := c.cq.ReqNotify(false); err != nil {
		return fail("Couldn't request CQ notification", err)
	}
	return nil
}

// qpIndex is srq_pingpong's find_qp: the index of the QP numbered qpn.
func (c *pp) qpIndex(qpn uint32) int {
	for i, qp := range c.qps {
		if qp.QPN() == qpn {
			return i
		}
	}
	return -1
}

// connect is pp_connect_ctx: each QP to RTR and RTS towards the peer's
// (ud: both without a destination, then the address handle).
func (c *pp) connect(local, remote []Dest) error {
	o := &c.o
	ah := uverbs.AHAttr{DLID: remote[0].LID, SL: uint8(o.SL), PortNum: uint8(o.IBPort)}
	// The C tools take the GRH decision and destination GID from the
	// first remote address, also for srq's other QPs.
	if hasInterfaceID(remote[0].GID) {
		ah.IsGlobal = true
		ah.HopLimit = 1
		ah.DGID = remote[0].GID
		ah.SGIDIndex = uint8(o.GIDIndex)
	}
	if c.k == UD {
		qp := c.qps[0]
		if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState); err != nil {
			return fail("Failed to modify QP to RTR", err)
		}
		if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: local[0].PSN}, uverbs.QPAttrState|uverbs.QPAttrSQPSN); err != nil {
			return fail("Failed to modify QP to RTS", err)
		}
		a, err := c.pd.CreateAH(ah)
		if err != nil {
			return fail("Failed to create AH", err)
		}
		c.ah = a
		return nil
	}
	for i, qp := range c.qps {
		attr := uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: o.MTU, DestQPN: remote[i].QPN, RQPSN: remote[i].PSN, AH: ah}
		attr.AH.DLID = remote[i].LID
		mask := uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN
		if c.k != UC {
			attr.MaxDestRdAtomic, attr.MinRNRTimer = 1, 12
			mask |= uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer
		}
		if err := qp.Modify(&attr, mask); err != nil {
			return fail("Failed to modify "+c.qpLabel(i)+" to RTR", err)
		}
		attr.State = uverbs.QPStateRTS
		attr.SQPSN = local[i].PSN
		mask = uverbs.QPAttrState | uverbs.QPAttrSQPSN
		if c.k != UC {
			attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRdAtomic = 14, 7, 7, 1
			mask |= uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic
		}
		if err := qp.Modify(&attr, mask); err != nil {
			return fail("Failed to modify "+c.qpLabel(i)+" to RTS", err)
		}
	}
	return nil
}

// close is pp_close_ctx after a successful run, with its messages and
// order: QPs, SRQ, CQ, MR, AH (ud), PD, device; then the buffer.
func (c *pp) close() error {
	// Destroying a CQ waits for the acknowledgement of its events; all
	// were acknowledged, so this bound only turns a bug into an error.
	bg, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, qp := range c.qps {
		if err := qp.Destroy(bg); err != nil {
			c.release()
			return fail("Couldn't destroy "+c.qpLabel(i), err)
		}
	}
	c.qps = nil
	steps := []struct {
		live bool
		msg  string
		do   func() error
	}{
		{c.srq != nil, "Couldn't destroy SRQ", func() error { return c.srq.Destroy(bg) }},
		{c.cq != nil, "Couldn't destroy CQ", func() error { return c.cq.Destroy(bg) }},
		{c.mr != nil, "Couldn't deregister MR", c.mr.Dereg},
		{c.ah != nil, "Couldn't destroy AH", c.ah.Destroy},
		{c.pd != nil, "Couldn't deallocate PD", c.pd.Dealloc},
		{c.ch != nil, "Couldn't destroy completion channel", c.ch.Close},
		{c.dev != nil, "Couldn't release context", c.dev.Close},
	}
	for _, s := range steps {
		if !s.live {
			continue
		}
		if err := s.do(); err != nil {
			c.release()
			return fail(s.msg, err)
		}
	}
	c.srq, c.cq, c.mr, c.ah, c.pd, c.ch, c.dev = nil, nil, nil, nil, nil, nil, nil
	if err := c.buf.Close(); err != nil {
		return fail("Couldn't free the work buf.", err)
	}
	c.buf = nil
	return nil
}

// release frees what is left after a failure: closing the device releases
// every object on it; the buffer goes last.
func (c *pp) release() {
	if c.dev != nil {
		c.dev.Close()
		c.dev = nil
	}
	if c.buf != nil {
		c.buf.Close()
		c.buf = nil
	}
}

// WaitEnv names the environment variable that picks how -e waits for
// completion events: "poller" (the default: the goroutine parks on the
// runtime poller) or "thread" (uverbs.WaitThread: an OS thread blocks in
// ppoll(2), the opt-in lowest-latency mode). The C tools have no such
// choice, so it is not an option: their command lines stay the same.
const WaitEnv = "PUREVERBS_WAIT"

// WaitModeFromEnv returns the wait mode WaitEnv asks for (WaitPoller when
// it is unset or unknown).
func WaitModeFromEnv() uverbs.WaitMode {
	if os.Getenv(WaitEnv) == "thread" {
		return uverbs.WaitThread
	}
	return uverbs.WaitPoller
}
