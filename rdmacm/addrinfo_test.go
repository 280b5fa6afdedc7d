package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestGetAddrInfo: what rdma_getaddrinfo answers without a name lookup:
// numeric nodes and services, the side (AIPassive: Src, else Dst), the
// port space and QP type from the hints or from each other, the empty
// node, a hint's Src, and hints alone.
func TestGetAddrInfo(t *testing.T) {
	ap := netip.MustParseAddrPort
	tcp := func(a AddrInfo) AddrInfo { a.QPType, a.PortSpace = uverbs.QPTypeRC, PortSpaceTCP; return a }
	udp := func(a AddrInfo) AddrInfo { a.QPType, a.PortSpace = uverbs.QPTypeUD, PortSpaceUDP; return a }
	for _, c := range []struct {
		node, service string
		hints         *AddrInfo
		want          AddrInfo
	}{
		{"10.1", "7471", nil, tcp(AddrInfo{Family: FamilyInet, Dst: ap("10.0.0.1:7471")})},
		{"10.99.0.1", "7471", &AddrInfo{Flags: AIPassive}, tcp(AddrInfo{Flags: AIPassive, Family: FamilyInet, Src: ap("10.99.0.1:7471")})},
		{"fe80::1%lo", "", nil, tcp(AddrInfo{Family: FamilyInet6, Dst: ap("[fe80::1%lo]:0")})},
		{"10.0.0.2", "70000", nil, tcp(AddrInfo{Family: FamilyInet, Dst: ap("10.0.0.2:4464")})}, // htons(70000)
		{"10.0.0.2", "7174", &AddrInfo{PortSpace: PortSpaceUDP}, udp(AddrInfo{Family: FamilyInet, Dst: ap("10.0.0.2:7174")})},
		{"10.0.0.2", "7174", &AddrInfo{QPType: uverbs.QPTypeUD}, udp(AddrInfo{Family: FamilyInet, Dst: ap("10.0.0.2:7174")})},
		{"10.0.0.2", "1", &AddrInfo{PortSpace: PortSpaceIB}, AddrInfo{Family: FamilyInet, QPType: uverbs.QPTypeRC, PortSpace: PortSpaceIB, Dst: ap("10.0.0.2:1")}},
		// The IPoIB port space asks getaddrinfo for UDP (ucma_convert_to_ai): UD.
		{"10.0.0.2", "7471", &AddrInfo{PortSpace: PortSpaceIPoIB}, AddrInfo{Family: FamilyInet, QPType: uverbs.QPTypeUD, PortSpace: PortSpaceIPoIB, Dst: ap("10.0.0.2:7471")}},
		{"10.0.0.2", "1", &AddrInfo{Src: ap("10.0.0.1:0")}, tcp(AddrInfo{Family: FamilyInet, Src: ap("10.0.0.1:0"), Dst: ap("10.0.0.2:1")})},
		{"", "7471", &AddrInfo{Flags: AIPassive}, tcp(AddrInfo{Flags: AIPassive, Family: FamilyInet6, Src: ap("[::]:7471")})},
		{"", "7471", &AddrInfo{Flags: AIPassive, Family: FamilyInet}, tcp(AddrInfo{Flags: AIPassive, Family: FamilyInet, Src: ap("0.0.0.0:7471")})},
		{"", "7471", nil, tcp(AddrInfo{Family: FamilyInet6, Dst: ap("[::1]:7471")})},
		{"", "7471", &AddrInfo{Family: FamilyInet}, tcp(AddrInfo{Family: FamilyInet, Dst: ap("127.0.0.1:7471")})},
		// "*" is glibc's NULL node (rdma_client -s '*' connects to the loopback).
		{"*", "7471", nil, tcp(AddrInfo{Family: FamilyInet6, Dst: ap("[::1]:7471")})},
		{"*", "7471", &AddrInfo{Flags: AIPassive, Family: FamilyInet}, tcp(AddrInfo{Flags: AIPassive, Family: FamilyInet, Src: ap("0.0.0.0:7471")})},
		// ("*" with no service: EAI_NONAME, TestGetAddrInfoErrors.)
		{"", "", &AddrInfo{Flags: AIPassive, PortSpace: PortSpaceUDP, Dst: ap("10.0.0.9:5")},
			AddrInfo{Flags: AIPassive, PortSpace: PortSpaceUDP, Dst: ap("10.0.0.9:5")}},
	} {
		got, err := GetAddrInfo(context.Background(), c.node, c.service, c.hints)
		if err != nil {
			t.Errorf("GetAddrInfo(%q, %q, %+v): %v", c.node, c.service, c.hints, err)
			continue
		}
		if d := cmp.Diff(c.want, *got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
			t.Errorf("GetAddrInfo(%q, %q, %+v) (-want +got):\n%s", c.node, c.service, c.hints, d)
		}
	}
}

// TestGetAddrInfoErrors: getaddrinfo's codes for what it refuses (with
// gai_strerror's texts), and the package's sentinels for the calls
// librdmacm refuses itself.
func TestGetAddrInfoErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		node, service string
		hints         *AddrInfo
		code          int
		reason        string
	}{
		{"10.0.0.1", "7471x", nil, EAIService, "Servname not supported for ai_socktype"},
		{"10.0.0.1", "no-such-service", &AddrInfo{PortSpace: PortSpaceUDP}, EAIService, "Servname not supported for ai_socktype"},
		{"host.example", "1", &AddrInfo{Flags: AINumericHost}, EAINoName, "Name or service not known"},
		{"10.0.0.1", "1", &AddrInfo{Family: FamilyInet6}, EAIAddrFamily, "Address family for hostname not supported"},
		{"::1", "1", &AddrInfo{Family: FamilyInet}, EAIAddrFamily, "Address family for hostname not supported"},
		{"10.0.0.1", "1", &AddrInfo{Family: 1}, EAIFamily, "ai_family not supported"},
		{"10.0.0.1", "1", &AddrInfo{QPType: uverbs.QPTypeUD, PortSpace: PortSpaceTCP}, EAISockType, "ai_socktype not supported"},
		{"10.0.0.1", "1", &AddrInfo{QPType: uverbs.QPTypeRC, PortSpace: PortSpaceIPoIB}, EAISockType, "ai_socktype not supported"},
		// "*" is glibc's NULL node: with no service, getaddrinfo has neither.
		{"*", "", nil, EAINoName, "Name or service not known"},
		{"*", "", &AddrInfo{Flags: AIPassive}, EAINoName, "Name or service not known"},
	} {
		_, err := GetAddrInfo(ctx, c.node, c.service, c.hints)
		var ge *GAIError
		if !errors.As(err, &ge) || ge.Code != c.code || ge.Reason() != c.reason {
			t.Errorf("GetAddrInfo(%q, %q, %+v): %v, want code %d (%s)", c.node, c.service, c.hints, err, c.code, c.reason)
		}
	}
	if _, err := GetAddrInfo(ctx, "", "", nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("no node, service or hints: %v, want ErrInvalid", err)
	}
	if _, err := GetAddrInfo(ctx, "10.0.0.1", "1", &AddrInfo{Flags: 0x100}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown flags: %v, want ErrInvalid", err)
	}
	if _, err := GetAddrInfo(ctx, "", "1", &AddrInfo{Flags: aiSA}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("RAI_SA: %v, want ErrNotSupported", err)
	}
	if _, err := GetAddrInfo(ctx, "fe80::1", "1", &AddrInfo{Flags: AIFamily | AINumericHost, Family: familyIB}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("AF_IB: %v, want ErrNotSupported", err)
	}
}

// TestGetAddrInfoServices: service names are read from the services
// database as glibc's getaddrinfo reads it: name or alias, case-sensitive,
// TCP for RC or the TCP port space, UDP for UD or the UDP port space, and
// with no hint TCP then UDP, a UDP-only service making the answer UD.
// Without the database no name is known (Go's net.LookupPort would fall
// back to a built-in table and fold case).
func TestGetAddrInfoServices(t *testing.T) {
	ap := netip.MustParseAddrPort
	db := filepath.Join(t.TempDir(), "services")
	if err := os.WriteFile(db, []byte("# services\nssh\t\t22/tcp\nwebby\t8080/tcp  www-alt  # an alias\nwebby\t8081/udp\ntftp\t\t69/udp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := servicesPath
	servicesPath = db
	defer func() { servicesPath = old }()
	rc := func(p string) AddrInfo {
		return AddrInfo{Family: FamilyInet, QPType: uverbs.QPTypeRC, PortSpace: PortSpaceTCP, Dst: ap("10.0.0.2:" + p)}
	}
	ud := func(p string) AddrInfo {
		return AddrInfo{Family: FamilyInet, QPType: uverbs.QPTypeUD, PortSpace: PortSpaceUDP, Dst: ap("10.0.0.2:" + p)}
	}
	for _, c := range []struct {
		service string
		hints   *AddrInfo
		want    AddrInfo
	}{
		{"ssh", nil, rc("22")},
		{"www-alt", nil, rc("8080")},
		{"webby", nil, rc("8080")},
		{"webby", &AddrInfo{PortSpace: PortSpaceUDP}, ud("8081")},
		{"tftp", nil, ud("69")},
		{"tftp", &AddrInfo{QPType: uverbs.QPTypeUD}, ud("69")},
	} {
		got, err := GetAddrInfo(context.Background(), "10.0.0.2", c.service, c.hints)
		if err != nil {
			t.Errorf("GetAddrInfo(%q, %+v): %v", c.service, c.hints, err)
			continue
		}
		if d := cmp.Diff(c.want, *got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
			t.Errorf("GetAddrInfo(%q, %+v) (-want +got):\n%s", c.service, c.hints, d)
		}
	}
	for _, c := range []struct {
		service string
		hints   *AddrInfo
	}{
		{"SSH", nil}, // case-sensitive
		{"tftp", &AddrInfo{PortSpace: PortSpaceTCP}}, // UDP only
		{"ssh", &AddrInfo{QPType: uverbs.QPTypeUD}},  // TCP only
		{"http", nil}, // not in this database (Go knows it built in)
	} {
		var ge *GAIError
		if _, err := GetAddrInfo(context.Background(), "10.0.0.2", c.service, c.hints); !errors.As(err, &ge) || ge.Code != EAIService {
			t.Errorf("GetAddrInfo(%q, %+v): %v, want EAI_SERVICE", c.service, c.hints, err)
		}
	}
	servicesPath = filepath.Join(t.TempDir(), "none")
	var ge *GAIError
	if _, err := GetAddrInfo(context.Background(), "10.0.0.2", "ssh", nil); !errors.As(err, &ge) || ge.Code != EAIService {
		t.Errorf("a name without a services database: %v, want EAI_SERVICE", err)
	}
	if got, err := GetAddrInfo(context.Background(), "10.0.0.2", "22", nil); err != nil || got.Dst != ap("10.0.0.2:22") {
		t.Errorf("a number without a services database: %+v, %v", got, err)
	}
}
