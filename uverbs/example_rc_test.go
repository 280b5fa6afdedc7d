package uverbs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

// This file is a whole-file example (pkg.go.dev shows all of it): two RC queue
// pairs on one device connected to each other, the steps of
// ibv_rc_pingpong's set-up and of its first exchange. Between two
// processes or hosts, each side's QPN, PSN and GID (and LID on
// InfiniBand) travel over a socket or rdma_cm (package rdmacm) instead of
// a function argument. TestVMExampleRC runs rcLoopback in the VM.

// port is the device port both QPs use.
const port = 1

// endpoint is what a peer must know to connect to a QP: what
// ibv_rc_pingpong exchanges as "LID QPN PSN GID".
type endpoint struct {
	LID      uint16
	QPN, PSN uint32
	GID      uverbs.GID
	GIDIndex int // on this side: the source GID of the QP's address vector
}

// rcLoopback sends msg from one RC QP to another on the device named
// dev, and returns what arrived.
func rcLoopback(ctx context.Context, dev string, msg []byte) (got []byte, err error) {
	c, err := uverbs.OpenByName(dev) // ibv_open_device
	if err != nil {
		return nil, err // errors.Is(err, uverbs.ErrNoDevice) when there is none
	}
	// Closing the context releases everything created on it that is
	// still open; the explicit releases below report their own errors.
	defer func() { err = errors.Join(err, c.Close()) }()

	pa, err := c.QueryPort(port) // ibv_query_port
	if err != nil {
		return nil, err
	}
	if pa.State != uverbs.PortActive {
		return nil, fmt.Errorf("%s port %d is %v", dev, port, pa.State)
	}
	gidIndex := -1
	if pa.LinkLayer == uverbs.LinkLayerEthernet {
		// RoCE routes by GID: take the port's RoCE v2 GID of an IPv4
		// address, as users of rdma-core's tools usually pass with -g
		// (ibv_query_gid_table, show_gids). A link-local GID (fe80::,
		// from the MAC) routes only over a netdev that has such an
		// address, which a loopback device does not.
		table, qerr := c.QueryGIDTable()
		if qerr != nil {
			return nil, qerr
		}
		for _, e := range table {
			if e.Port == port && e.Type == uverbs.GIDTypeRoCEv2 && e.GID.IP().To4() != nil {
				gidIndex = e.Index
				break
			}
		}
		if gidIndex < 0 {
			return nil, fmt.Errorf("%s port %d has no RoCE v2 GID of an IPv4 address", dev, port)
		}
	}

	pd, err := c.AllocPD() // ibv_alloc_pd
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, pd.Dealloc()) }()

	// Memory outside the Go heap, registered once: the sender's half
	// and the receiver's half of one page.
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, buf.Close()) }()
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite) // ibv_reg_mr
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, mr.Dereg()) }()
	if len(msg) > mr.Len()/2 {
		return nil, fmt.Errorf("message of %d bytes: at most %d", len(msg), mr.Len()/2)
	}
	copy(mr.Bytes(), msg)
	half := mr.Len() / 2

	cq, err := c.CreateCQ(16, nil) // ibv_create_cq, polled (no channel)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cq.Destroy(ctx)) }()

	var qps [2]*uverbs.QP
	var ends [2]endpoint
	for i := range qps {
		qp, cerr := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}) // ibv_create_qp
		if cerr != nil {
			return nil, cerr
		}
		// (Destroyed in reverse order of creation, before the CQ.)
		defer func() { err = errors.Join(err, qp.Destroy(ctx)) }()
		qps[i] = qp
		ends[i] = endpoint{LID: pa.LID, QPN: qp.QPN(), PSN: uint32(0x1000 * (i + 1)), GIDIndex: gidIndex}
		if gidIndex >= 0 {
			if ends[i].GID, err = c.GID(port, gidIndex); err != nil {
				return nil, err
			}
		}
		// RESET to INIT: the port, and what peers may do to this QP's
		// memory (nothing but send here).
		err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PKeyIndex: 0, PortNum: port},
			uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
		if err != nil {
			return nil, fmt.Errorf("QP %#x to INIT: %w", qp.QPN(), err)
		}
	}

	// A receive must be posted before the peer's send arrives (else the
	// sender retries on RNR NAKs). Posting is allowed from INIT on.
	err = qps[1].PostRecv([]uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{mr.SGE(half, half)}}}) // ibv_post_recv
	if err != nil {
		return nil, err
	}

	// INIT to RTR (the remote side's address, QPN and first PSN) and to
	// RTS (this side's first PSN, and its timeouts and retries), with
	// ibv_rc_pingpong's values.
	for i, qp := range qps {
		local, remote := ends[i], ends[1-i]
		av := uverbs.AHAttr{DLID: remote.LID, PortNum: port}
		if local.GIDIndex >= 0 {
			av.IsGlobal, av.DGID, av.SGIDIndex, av.HopLimit = true, remote.GID, uint8(local.GIDIndex), 1
		}
		rtr := uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: pa.ActiveMTU, DestQPN: remote.QPN, RQPSN: remote.PSN,
			MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: av}
		err = qp.Modify(&rtr, uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|
			uverbs.QPAttrRQPSN|uverbs.QPAttrMaxDestRdAtomic|uverbs.QPAttrMinRNRTimer)
		if err != nil {
			return nil, fmt.Errorf("QP %#x to RTR: %w", qp.QPN(), err)
		}
		// RetryCnt 6, not 7: rxe never counts 7 down (QPAttr.RetryCnt).
		rts := uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: local.PSN, Timeout: 14, RetryCnt: 6, RNRRetry: 7, MaxRdAtomic: 1}
		err = qp.Modify(&rts, uverbs.QPAttrState|uverbs.QPAttrSQPSN|uverbs.QPAttrTimeout|uverbs.QPAttrRetryCnt|
			uverbs.QPAttrRNRRetry|uverbs.QPAttrMaxQPRdAtomic)
		if err != nil {
			return nil, fmt.Errorf("QP %#x to RTS: %w", qp.QPN(), err)
		}
	}

	err = qps[0].PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{mr.SGE(0, len(msg))}}}) // ibv_post_send
	if err != nil {
		return nil, err // a *uverbs.PostError names the request
	}

	// Busy-poll the CQ (ibv_poll_cq) for the send's and the receive's
	// completions; cq.New in package cq waits on an fd instead.
	wcs := make([]uverbs.WC, 4)
	var recvLen int
	yielded := time.Now()
	for done := 0; done < 2; {
		n, perr := cq.Poll(wcs)
		if perr != nil {
			return nil, perr
		}
		if n == 0 {
			if time.Since(yielded) > 2*time.Millisecond {
				if cerr := ctx.Err(); cerr != nil {
					return nil, fmt.Errorf("%d of 2 completions: %w", done, cerr)
				}
				uverbs.Yield() // every few ms: let other goroutines run
				yielded = time.Now()
			}
			continue
		}
		for _, wc := range wcs[:n] {
			if wc.Status != uverbs.WCSuccess {
				return nil, fmt.Errorf("work request %d: %v", wc.ID, wc.Status) // ibv_wc_status_str's text
			}
			if wc.ID == 2 {
				recvLen = int(wc.ByteLen)
			}
			done++
		}
	}
	return bytes.Clone(mr.Bytes()[half : half+recvLen]), nil
}

func Example_rcLoopback() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := rcLoopback(ctx, "rxe0", []byte("hello, RC"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("received %q\n", got)
}
