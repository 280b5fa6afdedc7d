package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/uverbs"
)

// AIFlags are rdma_getaddrinfo's flags (RAI_*, rdma_cma.h).
type AIFlags uint32

const (
	AIPassive     AIFlags = 0x01 // RAI_PASSIVE: the address is the local one to bind (Src), not a destination
	AINumericHost AIFlags = 0x02 // RAI_NUMERICHOST: the node is an address, never looked up
	AINoRoute     AIFlags = 0x04 // RAI_NOROUTE: no route resolution (kept; this package never resolves routes here)
	AIFamily      AIFlags = 0x08 // RAI_FAMILY: only AF_IB gives it meaning, which is not supported
	aiSA          AIFlags = 0x10 // RAI_SA
	aiDNS         AIFlags = 0x20 // RAI_DNS
)

// Address families of AddrInfo.Family (Linux's AF_INET and AF_INET6).
const (
	FamilyInet  = 2
	FamilyInet6 = 10
	familyIB    = 27
)

// AddrInfo is what GetAddrInfo resolves, and its hints (struct
// rdma_addrinfo): the connection's port space and QP type with the local
// address (Src) of a passive side or the destination (Dst) of an active
// one. Src and Dst go to ID.BindAddr and ID.ResolveAddr.
type AddrInfo struct {
	Flags     AIFlags
	Family    int // 0 (any), FamilyInet or FamilyInet6
	QPType    uverbs.QPType
	PortSpace PortSpace
	Src, Dst  netip.AddrPort
}

// getaddrinfo(3)'s error codes (glibc's netdb.h).
const (
	EAIBadFlags   = -1
	EAINoName     = -2
	EAIAgain      = -3
	EAIFail       = -4
	EAIFamily     = -6
	EAISockType   = -7
	EAIService    = -8
	EAIAddrFamily = -9
)

// GAIError is a failed lookup of GetAddrInfo with getaddrinfo(3)'s code
// (EAINoName, ...), what librdmacm's rdma_getaddrinfo returns for it.
type GAIError struct {
	Code          int
	Node, Service string
	Err           error // the resolver's error, if any
}

// Reason is gai_strerror(3)'s text for the code.
func (e *GAIError) Reason() string {
	switch e.Code {
	case EAIBadFlags:
		return "Bad value for ai_flags"
	case EAINoName:
		return "Name or service not known"
	case EAIAgain:
		return "Temporary failure in name resolution"
	case EAIFail:
		return "Non-recoverable failure in name resolution"
	case EAIFamily:
		return "ai_family not supported"
	case EAISockType:
		return "ai_socktype not supported"
	case EAIService:
		return "Servname not supported for ai_socktype"
	case EAIAddrFamily:
		return "Address family for hostname not supported"
	}
	return "Unknown error"
}

// Error names the node, the service and Reason's text.
func (e *GAIError) Error() string {
	return fmt.Sprintf("rdmacm: getaddrinfo %q %q: %s", e.Node, e.Service, e.Reason())
}

// Unwrap returns the resolver's error, if any.
func (e *GAIError) Unwrap() error { return e.Err }

// GetAddrInfo resolves a node (a host name or an address) and a service
// (a port number or a name of /etc/services) for a connection, as
// rdma_getaddrinfo(3) does with getaddrinfo(3) beneath it, in pure Go:
//
//   - The node is read as glibc reads it: an IPv4 address in any form
//     inet_aton(3) takes ("10.1" is 10.0.0.1), an IPv6 address (with a
//     %zone), else a host name (/etc/hosts, then DNS), the first answer
//     kept. An empty node is the unspecified address with AIPassive, the
//     loopback without, IPv6 first unless hints.Family says FamilyInet;
//     "*" is the empty node too, as glibc reads it (a NULL node), and
//     fails with EAI_NONAME when the service is empty too.
//     An empty service is port 0.
//   - The port space and QP type are the hints' or follow each other:
//     PortSpaceTCP and RC by default, PortSpaceUDP with UD.
//   - With AIPassive the address is Src, else Dst; a hint's Src fills
//     an empty Src. With node and service both empty the hints are the
//     answer (their Dst too).
//
// Lookup failures are *GAIError with getaddrinfo's code; a nil ctx, nil
// hints with no node and no service, or flags it does not know, are
// ErrInvalid;
// AF_IB addresses and the SA path queries of RAI_SA are ErrNotSupported.
// Unlike librdmacm, it does not ask ibacm for a route (there is none
// here: rdma_getaddrinfo only does when the ibacm service runs).
func GetAddrInfo(ctx context.Context, node, service string, hints *AddrInfo) (*AddrInfo, error) {
	const op = "getaddrinfo"
	if ctx == nil {
		return nil, invalid(op, "nil context.Context")
	}
	if node == "*" { // glibc's getaddrinfo reads "*" as a NULL node
		if service == "" {
			// librdmacm hands "*" to getaddrinfo, which then has
			// neither node nor service.
			return nil, &GAIError{Code: EAINoName, Node: node}
		}
		node = ""
	}
	if node == "" && service == "" && hints == nil {
		return nil, invalid(op, "no node, service or hints")
	}
	var h AddrInfo
	if hints != nil {
		h = *hints
	}
	if h.Flags&^(AIPassive|AINumericHost|AINoRoute|AIFamily|aiSA|aiDNS) != 0 {
		return nil, invalid(op, "unknown flags %#x", uint32(h.Flags))
	}
	if h.Flags&aiSA != 0 || (h.Flags&AIFamily != 0 && h.Family == familyIB) {
		return nil, opErr(op, fmt.Errorf("%w: AF_IB addresses and SA queries", ErrNotSupported))
	}
	if node == "" && service == "" {
		ai := h
		return &ai, nil
	}
	if h.Family != 0 && h.Family != FamilyInet && h.Family != FamilyInet6 {
		return nil, &GAIError{Code: EAIFamily, Node: node, Service: service}
	}
	ai := &AddrInfo{Flags: h.Flags & AIPassive, Family: h.Family, QPType: h.QPType, PortSpace: h.PortSpace}
	// The socket type (stream for RC, datagram for UD) and protocol
	// (TCP, UDP) librdmacm asks getaddrinfo for, and what it reads back.
	// The UDP and IPoIB port spaces ask for UDP (ucma_convert_to_ai), TCP
	// for TCP, and IB for what the QP type says.
	udp := h.PortSpace == PortSpaceUDP || h.PortSpace == PortSpaceIPoIB
	stream := h.QPType != uverbs.QPTypeUD
	if h.QPType == 0 {
		stream = !udp
	}
	if h.QPType != 0 && h.PortSpace != 0 && h.PortSpace != PortSpaceIB && udp == stream {
		return nil, &GAIError{Code: EAISockType, Node: node, Service: service}
	}
	// With neither a QP type nor a port space hinted, librdmacm asks
	// getaddrinfo for any socket type, which tries TCP then UDP: a
	// service only UDP knows makes the answer UD.
	port, code := lookupService(service, stream, h.QPType == 0 && h.PortSpace == 0, servicesPath)
	if code == 0 && port.udpOnly {
		stream = false
	}
	if code != 0 {
		return nil, &GAIError{Code: code, Node: node, Service: service}
	}
	if ai.QPType == 0 {
		ai.QPType = uverbs.QPTypeRC
		if !stream {
			ai.QPType = uverbs.QPTypeUD
		}
	}
	if ai.PortSpace == 0 {
		ai.PortSpace = PortSpaceTCP
		if !stream {
			ai.PortSpace = PortSpaceUDP
		}
	}
	addr, code, err := lookupNode(ctx, node, h.Family, h.Flags)
	if code != 0 {
		return nil, &GAIError{Code: code, Node: node, Service: service, Err: err}
	}
	ai.Family = FamilyInet6
	if addr.Is4() {
		ai.Family = FamilyInet
	}
	if h.Flags&AIPassive != 0 {
		ai.Src = netip.AddrPortFrom(addr, port.port)
	} else {
		ai.Dst = netip.AddrPortFrom(addr, port.port)
	}
	if !ai.Src.IsValid() && h.Src.IsValid() {
		ai.Src = h.Src
	}
	return ai, nil
}

// servicePort is lookupService's answer: the port, and whether only the
// UDP entry of the services database had it (an unconstrained lookup).
type servicePort struct {
	port    uint16
	udpOnly bool
}

// servicesPath is the services database getaddrinfo reads (a variable
// for tests).
var servicesPath = "/etc/services"

// lookupService is getaddrinfo's service: empty is port 0, digits a
// number (strtoul's, the low 16 bits as htons keeps them), else a name of
// the services database (path), as glibc's files backend reads it: the
// name or an alias, case-sensitive, for TCP (stream) or UDP; with any
// set, TCP first, then UDP. A database that cannot be read knows no name
// (glibc has no built-in table, unlike Go's net.LookupPort).
func lookupService(service string, stream, any bool, path string) (servicePort, int) {
	if service == "" {
		return servicePort{}, 0
	}
	if port, ok := serviceNumber(service); ok {
		return servicePort{port: port}, 0
	}
	protos := []string{"udp"}
	switch {
	case any:
		protos = []string{"tcp", "udp"}
	case stream:
		protos = []string{"tcp"}
	}
	db, err := os.ReadFile(path)
	if err != nil {
		return servicePort{}, EAIService
	}
	for i, proto := range protos {
		if p, ok := findService(db, service, proto); ok {
			return servicePort{port: p, udpOnly: any && i == 1}, 0
		}
	}
	return servicePort{}, EAIService
}

// findService looks name up for proto in a services file: lines of
// "name port/proto [aliases...]", '#' to the end of a line a comment.
func findService(db []byte, name, proto string) (uint16, bool) {
	for line := range strings.Lines(string(db)) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		num, pr, ok := strings.Cut(f[1], "/")
		if !ok || pr != proto || !slices.Contains(append(f[:1:1], f[2:]...), name) {
			continue
		}
		if v, err := strconv.ParseUint(num, 10, 16); err == nil {
			return uint16(v), true
		}
	}
	return 0, false
}

// serviceNumber reads service as glibc's getaddrinfo does before it
// looks a name up: strtoul(service, &end, 10) must take the whole string
// (leading white space and a sign included), and the value, stored in an
// int, must not be negative; the port is its low 16 bits. So " 80" and
// "+80" are port 80, "65616" is 80, and "-80" or "4294967295" are names.
func serviceNumber(s string) (uint16, bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var v uint64
	overflow := false
	j := i
	for ; j < len(s) && s[j] >= '0' && s[j] <= '9'; j++ {
		d := uint64(s[j] - '0')
		if v > (math.MaxUint64-d)/10 {
			overflow = true
		}
		v = v*10 + d
	}
	if j == i || j != len(s) {
		return 0, false
	}
	switch {
	case overflow:
		v = math.MaxUint64 // strtoul's ERANGE value, whatever the sign
	case neg:
		v = -v
	}
	if n := int32(uint32(v)); n >= 0 {
		return uint16(n), true
	}
	return 0, false
}

// lookupNode reads node as glibc's getaddrinfo does (see GetAddrInfo).
// The code is 0 or an EAI_* value; err is the resolver's.
func lookupNode(ctx context.Context, node string, family int, flags AIFlags) (netip.Addr, int, error) {
	if node == "" {
		var a netip.Addr
		switch {
		case family == FamilyInet && flags&AIPassive != 0:
			a = netip.IPv4Unspecified()
		case family == FamilyInet:
			a = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		case flags&AIPassive != 0:
			a = netip.IPv6Unspecified()
		default:
			a = netip.IPv6Loopback()
		}
		return a, 0, nil
	}
	if a, ok := getopt.InetAton(node); ok {
		if family == FamilyInet6 {
			return netip.Addr{}, EAIAddrFamily, nil
		}
		return a, 0, nil
	}
	if strings.Contains(node, ":") {
		if a, err := netip.ParseAddr(node); err == nil && a.Is6() {
			if family == FamilyInet {
				return netip.Addr{}, EAIAddrFamily, nil
			}
			return a, 0, nil
		}
	}
	if flags&AINumericHost != 0 {
		return netip.Addr{}, EAINoName, nil
	}
	network := "ip"
	switch family {
	case FamilyInet:
		network = "ip4"
	case FamilyInet6:
		network = "ip6"
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, network, node)
	if err == nil && len(addrs) > 0 {
		return addrs[0].Unmap(), 0, nil
	}
	if node != "" && strings.Trim(node, "0123456789.") == "" {
		// glibc asks DNS for a name of digits and dots that inet_aton
		// refused ("1.2.3.256"); Go's resolver refuses it unasked. No
		// such name exists in DNS, so what glibc reports is whether
		// DNS answered: the same name under .invalid asks it that.
		_, err = net.DefaultResolver.LookupNetIP(ctx, network, node+".invalid")
	}
	var de *net.DNSError
	switch {
	case err == nil, errors.As(err, &de) && de.IsNotFound:
		return netip.Addr{}, EAINoName, err
	case errors.As(err, &de) && (de.IsTemporary || de.IsTimeout):
		return netip.Addr{}, EAIAgain, err
	}
	return netip.Addr{}, EAIFail, err
}
