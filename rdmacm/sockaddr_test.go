package rdmacm

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// TestSockaddr: the struct sockaddr_in and sockaddr_in6 the kernel gets
// (family in host order, port in network order) and back.
func TestSockaddr(t *testing.T) {
	for _, tc := range []struct {
		ap   string
		n    uint16
		want []byte // the first bytes of the storage
	}{
		{"10.99.0.1:7471", 16, []byte{2, 0, 0x1d, 0x2f, 10, 99, 0, 1}},
		{"[::ffff:10.99.0.1]:7471", 16, []byte{2, 0, 0x1d, 0x2f, 10, 99, 0, 1}},
		{"[fd00::1]:1", 28, []byte{10, 0, 0, 1, 0, 0, 0, 0, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"[fe80::1%7]:2", 28, []byte{10, 0, 0, 2, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 7, 0, 0, 0}},
	} {
		ap := netip.MustParseAddrPort(tc.ap)
		var s abi.KernelSockaddrStorage
		b := sys.AsBytes(&s)
		b[127] = 0xff // cleared by putSockaddr
		if n := putSockaddr(&s, ap); n != tc.n || string(b[:len(tc.want)]) != string(tc.want) || b[127] != 0 {
			t.Errorf("%s: %d bytes % x, want %d % x", tc.ap, n, b[:len(tc.want)], tc.n, tc.want)
		}
		back := getSockaddr(&s)
		if back.Port() != ap.Port() || back.Addr().Unmap().WithZone("") != ap.Addr().Unmap().WithZone("") {
			t.Errorf("%s: read back as %v", tc.ap, back)
		}
		if ap.Addr().Zone() != "" && binary.LittleEndian.Uint32(b[24:]) != 7 {
			t.Errorf("%s: scope id %d", tc.ap, binary.LittleEndian.Uint32(b[24:]))
		}
	}
	var empty abi.KernelSockaddrStorage
	if ap := getSockaddr(&empty); ap.IsValid() {
		t.Errorf("an empty storage read as %v", ap)
	}
}

// TestOpenMissing: without the rdma_ucm module's device node, Open's
// error wraps ENOENT and says what to load.
func TestOpenMissing(t *testing.T) {
	ch, err := OpenPath(t.TempDir() + "/rdma_cm")
	if err == nil {
		ch.Close()
		t.Fatal("OpenPath of a missing node succeeded")
	}
	if !errors.Is(err, sys.ENOENT) || !strings.Contains(err.Error(), "modprobe rdma_ucm") {
		t.Fatalf("OpenPath of a missing node: %v, want ENOENT naming the module", err)
	}
}
