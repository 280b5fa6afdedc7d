package cmsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestPerror: perror(3)'s lines as glibc words them: an errno anywhere
// in the chain, EINVAL for an argument the library refused (rdmacm's and
// uverbs's ErrInvalid), "Unknown error N" for an errno glibc has no text
// for (the kernel's ENOTSUPP, 524), and the whole error when there is no
// errno at all.
func TestPerror(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", sys.ECONNREFUSED), "what: Connection refused\n"},
		{fmt.Errorf("x: %w", uverbs.ErrInvalid), "what: Invalid argument\n"},
		{fmt.Errorf("x: %w", rdmacm.ErrInvalid), "what: Invalid argument\n"},
		{sys.Errno(524), "what: Unknown error 524\n"},
		{errors.New("no errno"), "what: no errno\n"},
	} {
		var b bytes.Buffer
		Perror(&b, "what", c.err)
		if b.String() != c.want {
			t.Errorf("Perror(%v): %q, want %q", c.err, b.String(), c.want)
		}
	}
	if ErrnoValue(errors.New("none")) != 1 || ErrnoValue(sys.EAGAIN) != int(sys.EAGAIN) {
		t.Error("ErrnoValue")
	}
}

// TestHost: a host option given as "" fails as getaddrinfo(3) fails
// for it (EAI_NONAME), where rdmacm.GetAddrInfo reads "" as no node; an
// option not given is that NULL node; get_rdma_addr looks a given -b up
// even when it is "", and rdma_client's and rdma_server's -s too.
func TestHost(t *testing.T) {
	ctx := context.Background()
	passive := &rdmacm.AddrInfo{Flags: rdmacm.AIPassive, Family: rdmacm.FamilyInet}
	var ge *rdmacm.GAIError
	if _, err := SetHost("").GetAddrInfo(ctx, "7471", passive); !errors.As(err, &ge) || ge.Code != rdmacm.EAINoName {
		t.Errorf(`SetHost("").GetAddrInfo = %v, want EAI_NONAME`, err)
	}
	if ai, err := (Host{}).GetAddrInfo(ctx, "7471", passive); err != nil || ai.Src != netip.MustParseAddrPort("0.0.0.0:7471") {
		t.Errorf("Host{}.GetAddrInfo = %+v, %v, want 0.0.0.0:7471", ai, err)
	}
	dst := SetHost("10.0.0.2")
	if ai, err := GetRDMAAddr(ctx, Host{}, dst, "7471", &rdmacm.AddrInfo{}); err != nil || ai.Dst != netip.MustParseAddrPort("10.0.0.2:7471") || ai.Src.IsValid() {
		t.Errorf("GetRDMAAddr without -b = %+v, %v", ai, err)
	}
	if ai, err := GetRDMAAddr(ctx, SetHost(""), dst, "7471", &rdmacm.AddrInfo{}); !errors.As(err, &ge) || ge.Code != rdmacm.EAINoName {
		t.Errorf(`GetRDMAAddr with -b "" = %+v, %v, want EAI_NONAME`, ai, err)
	}
	var out bytes.Buffer
	if ai, ret := SimpleAddr(ctx, &out, "", "7471", passive); ai != nil || ret != rdmacm.EAINoName || out.String() != "rdma_getaddrinfo: Name or service not known\n" {
		t.Errorf(`SimpleAddr("") = %+v, %d, printed %q`, ai, ret, out.String())
	}
	// getaddrinfo looks the service up first: a host given as "" with a
	// service it does not know is EAI_SERVICE (cmatose -b '' -p x).
	if _, err := SetHost("").GetAddrInfo(ctx, "x", passive); !errors.As(err, &ge) || ge.Code != rdmacm.EAIService {
		t.Errorf(`SetHost("").GetAddrInfo(service "x") = %v, want EAI_SERVICE`, err)
	}
	if _, err := GetRDMAAddr(ctx, Host{}, SetHost(""), "x", &rdmacm.AddrInfo{}); !errors.As(err, &ge) || ge.Code != rdmacm.EAIService {
		t.Errorf(`GetRDMAAddr(-s "" -p x) = %v, want EAI_SERVICE`, err)
	}
	// A service given as "" is port 0 (cmatose -p ''): a server binds the
	// any address, a client reaches port 0.
	if ai, err := GetRDMAAddr(ctx, Host{}, Host{}, "", passive); err != nil || ai.Src != netip.MustParseAddrPort("0.0.0.0:0") {
		t.Errorf(`GetRDMAAddr(passive, -p '') = %+v, %v, want 0.0.0.0:0`, ai, err)
	}
	if ai, err := GetRDMAAddr(ctx, Host{}, dst, "", &rdmacm.AddrInfo{}); err != nil || ai.Dst != netip.MustParseAddrPort("10.0.0.2:0") {
		t.Errorf(`GetRDMAAddr(-s 10.0.0.2 -p '') = %+v, %v, want 10.0.0.2:0`, ai, err)
	}
	// -b is looked up with no service: "" and "*" are EAI_NONAME.
	for _, b := range []string{"", "*"} {
		if _, err := GetRDMAAddr(ctx, SetHost(b), dst, "7471", &rdmacm.AddrInfo{}); !errors.As(err, &ge) || ge.Code != rdmacm.EAINoName {
			t.Errorf(`GetRDMAAddr(-b %q) = %v, want EAI_NONAME`, b, err)
		}
	}
}
