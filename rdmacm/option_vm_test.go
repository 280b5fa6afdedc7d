package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMSetOption: a type of service and an ACK timeout set on the
// client's ID before route resolution reach its QP when it connects (the
// GRH's traffic class, the RTS's timeout), as rdma_set_option(3) sets
// them; the options the kernel refuses at that point fail with its errno,
// a timeout out of range and a destroyed ID before any system call.
func TestVMSetOption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sch, cch := openChannel(t), openChannel(t)
	listen := listener(t, sch, rdmacm.PortSpaceTCP, 0)

	cid, err := cch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := cid.SetTOS(32); err != nil {
		t.Fatalf("SetTOS: %v", err)
	}
	if err := cid.SetAckTimeout(17); err != nil {
		t.Fatalf("SetAckTimeout: %v", err)
	}
	if err := cid.SetReuseAddr(true); err != nil {
		t.Fatalf("SetReuseAddr before the bind: %v", err)
	}
	if err := cid.ResolveAddr(netip.AddrPort{}, listen.LocalAddr(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	want(ctx, t, cch, rdmacm.EventAddrResolved)
	// Bound now: AFONLY may no longer change.
	if err := cid.SetAFOnly(true); !errors.Is(err, sys.EINVAL) {
		t.Errorf("SetAFOnly after the bind: %v, want EINVAL", err)
	}
	if err := cid.ResolveRoute(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	want(ctx, t, cch, rdmacm.EventRouteResolved)
	client := newEnd(t, cid)
	defer client.close()
	if err := cid.Connect(nil); err != nil {
		t.Fatal(err)
	}
	req := want(ctx, t, sch, rdmacm.EventConnectRequest)
	server := newEnd(t, req.ID)
	defer server.close()
	if err := req.ID.Accept(nil); err != nil {
		t.Fatal(err)
	}
	want(ctx, t, cch, rdmacm.EventEstablished)

	a, _, err := client.qp.Query(uverbs.QPAttrAV | uverbs.QPAttrTimeout)
	if err != nil || a.AH.TrafficClass != 32 || a.Timeout != 17 {
		t.Fatalf("client QP: traffic class %d, timeout %d (%v); want 32 and 17", a.AH.TrafficClass, a.Timeout, err)
	}
	s, _, err := server.qp.Query(uverbs.QPAttrAV | uverbs.QPAttrTimeout)
	t.Logf("server QP (no options): traffic class %d, timeout %d (%v)", s.AH.TrafficClass, s.Timeout, err)

	// Past the field's 5 bits: the kernel stores it unchecked, as
	// ucmatose -a 32 relies on.
	if err := cid.SetAckTimeout(32); err != nil {
		t.Errorf("SetAckTimeout(32): %v, want the kernel's acceptance", err)
	}
	for _, id := range []*rdmacm.ID{cid, req.ID, listen} {
		if err := id.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cid.SetTOS(0); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("SetTOS on a destroyed ID: %v, want ErrClosed", err)
	}
}
