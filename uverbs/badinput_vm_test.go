package uverbs_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMBadInput is a table of misuse against the real kernel: unknown
// device, destroyed objects, out-of-range sizes and ports, ack misuse,
// unregistered memory, wrong access flags, a QP in the wrong state,
// oversized inline data. Each gives a typed error (a sentinel, or the
// kernel's errno), none panics, and afterwards nothing is half-created:
// the kernel's counts, fds and mappings are back where they were.
func TestVMBadInput(t *testing.T) {
	testkit.RequireVM(t)
	base := testkit.Resources(t, testkit.RxeDev)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}})
	if err != nil {
		t.Fatal(err)
	}
	deadCQ, _ := c.CreateCQ(4, nil)
	deadCQ.Destroy(bg(t))
	deadPD, _ := c.AllocPD()
	deadPD.Dealloc()
	buf := make([]byte, 4096)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	r, err := async.NewReader(c)
	if err != nil {
		t.Fatal(err)
	}
	dev := c.Device()
	cap := uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}

	cases := []struct {
		name string
		call func() error
		want []error
	}{
		{"unknown device", func() error { _, err := uverbs.OpenByName("nosuchdev9"); return err }, []error{uverbs.ErrNoDevice}},
		{"port 0", func() error { _, err := c.QueryPort(0); return err }, []error{uverbs.ErrInvalid}},
		{"port beyond the device", func() error { _, err := c.QueryPort(len(dev.Ports) + 1); return err }, []error{sys.EINVAL}},
		{"GID index beyond the table", func() error { _, err := c.QueryGID(1, 1<<20); return err }, nil},
		{"CQ of 0 entries", func() error { _, err := c.CreateCQ(0, nil); return err }, []error{uverbs.ErrInvalid}},
		{"CQ beyond max_cqe", func() error { _, err := c.CreateCQ(1<<30, nil); return err }, []error{sys.EINVAL}},
		{"CQ on a bad vector", func() error { _, err := c.CreateCQ(1, &uverbs.CQOptions{CompVector: 99}); return err }, []error{uverbs.ErrInvalid}},
		{"QP beyond max_sge", func() error {
			_, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1 << 10, MaxRecvSGE: 1}})
			return err
		}, []error{sys.EINVAL}},
		{"QP on a destroyed CQ", func() error {
			_, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: deadCQ, RecvCQ: cq, Cap: cap})
			return err
		}, []error{uverbs.ErrClosed}},
		{"QP in a deallocated PD", func() error {
			_, err := deadPD.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: cap})
			return err
		}, []error{uverbs.ErrClosed}},
		{"QP with a create flag rxe lacks", func() error {
			_, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: cq, RecvCQ: cq, Cap: cap, CreateFlags: uverbs.QPCreateBlockSelfMcastLB})
			return err
		}, []error{uverbs.ErrNotSupported, sys.EOPNOTSUPP}},
		{"QP with an unknown create flag", func() error {
			_, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: cap, CreateFlags: 1 << 20})
			return err
		}, []error{uverbs.ErrInvalid}},
		{"destroy twice", func() error { return deadCQ.Destroy(bg(t)) }, []error{uverbs.ErrClosed}},
		{"poll a destroyed CQ", func() error { _, err := deadCQ.Poll(make([]uverbs.WC, 1)); return err }, []error{uverbs.ErrClosed}},
		{"MR of no memory", func() error { _, err := pd.RegMR(nil, uverbs.AccessLocalWrite); return err }, []error{uverbs.ErrInvalid}},
		{"MR with unknown access bits", func() error { _, err := pd.RegMR(buf, 1<<12); return err }, []error{uverbs.ErrInvalid}},
		{"remote write without local write", func() error { _, err := pd.RegMR(buf, uverbs.AccessRemoteWrite); return err }, []error{sys.EINVAL}},
		{"post send in RESET", func() error { return qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}}) }, []error{uverbs.ErrNotReady}},
		{"post recv in RESET", func() error { return qp.PostRecv([]uverbs.RecvWR{{}}) }, []error{uverbs.ErrNotReady}},
		{"RESET to RTS", func() error { return qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState) }, []error{sys.EINVAL}},
		{"modify with no attributes", func() error { return qp.Modify(nil, uverbs.QPAttrState) }, []error{uverbs.ErrInvalid}},
		{"oversized inline data", func() error {
			loopbackRTS(t, c, qp)
			return qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendInline, Inline: make([]byte, qp.Cap().MaxInlineData+1)}})
		}, []error{uverbs.ErrInvalid}},
		{"too many SGEs", func() error {
			return qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: make([]uverbs.SGE, qp.Cap().MaxSendSGE+1)}})
		}, []error{uverbs.ErrInvalid}},
		{"ack a foreign event", func() error { return r.Ack(async.Event{}) }, []error{uverbs.ErrInvalid}},
		{"ack events never read", func() error { return cq.AckEvents(1) }, []error{uverbs.ErrInvalid}},
		{"ReqNotify without a channel", func() error { return cq.ReqNotify(false) }, []error{uverbs.ErrInvalid}},
		{"destroy with a nil context", func() error {
			//lint:ignore SA1012 a nil context is the case under test
			return cq.Destroy(nil)
		}, []error{uverbs.ErrInvalid}},
		{"CQ in use", func() error { return cq.Destroy(bg(t)) }, []error{sys.EBUSY}},
		{"PD in use", func() error { return pd.Dealloc() }, []error{sys.EBUSY}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panic: %v", p)
				}
			}()
			// Nothing half-created: the kernel's counts of every kind
			// are compared with the context open (its close would
			// destroy anything left behind before the test looked).
			before := testkit.Resources(t, testkit.RxeDev)
			err := tc.call()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("%v does not match %v", err, w)
				}
			}
			if after := testkit.Resources(t, testkit.RxeDev); !maps.Equal(before, after) {
				t.Errorf("kernel objects before %v, after the refused call %v", before, after)
			}
			t.Logf("%v", err)
		})
	}
	// The hint of a refused create names the limit the request broke, not
	// the device's count of objects.
	for _, h := range []struct {
		name string
		err  error
		says string
	}{
		{"CQ beyond max_cqe", func() error { _, err := c.CreateCQ(1<<30, nil); return err }(), "cqe 1073741824 is above"},
		{"QP beyond max_sge", func() error {
			_, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1 << 10, MaxRecvSGE: 1}})
			return err
		}(), "max_send_sge 1024 is above"},
		{"SRQ beyond max_srq_wr", func() error { _, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 1 << 30, MaxSGE: 1}); return err }(), "max_wr 1073741824 is above"},
	} {
		if h.err == nil || !strings.Contains(h.err.Error(), h.says) || strings.Contains(h.err.Error(), "limit was reached") {
			t.Errorf("%s: %v; want a hint saying %q, not the object count", h.name, h.err, h.says)
		}
	}
	// The unregistered-memory case completes with an error, not a fault.
	if err := qp.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: 0x1000, Length: 64, LKey: mr.LKey() ^ 0x7700}}}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollN(t, cq, 1)[0]; wc.Status == uverbs.WCSuccess {
		t.Fatalf("send from unregistered memory succeeded: %+v", wc)
	} else {
		t.Logf("send from unregistered memory: %v", wc.Status)
	}
	ctx := context.Background()
	for _, err := range []error{qp.Destroy(ctx), mr.Dereg(), cq.Destroy(ctx), pd.Dealloc(), c.Close()} {
		if err != nil {
			t.Errorf("teardown: %v", err)
		}
	}
	if m := sys.OpenMappings(); len(m) != 0 {
		t.Fatalf("mappings left: %v", m)
	}
	if f := sys.OpenFDs(); len(f) != 0 {
		t.Fatalf("fds left: %v", f)
	}
	waitResources(t, base)
}
