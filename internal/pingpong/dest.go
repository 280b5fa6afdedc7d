package pingpong

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

// Dest is what each side tells the other about one of its QPs before the
// ping-pong (struct pingpong_dest of the C examples).
type Dest struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID uverbs.GID
}

// MsgSize is the size of one address message on the TCP connection:
// sizeof "0000:000000:000000:00000000000000000000000000000000", i.e. the
// 51 characters of "%04x:%06x:%06x:%s" and the terminating NUL, which the
// C tools send too.
const MsgSize = 52

// doneMsg is what the client sends after it has read the server's
// addresses: sizeof "done", NUL included.
const doneMsg = "done\x00"

// WireGID returns the GID as the 32 hex digits the C tools put on the
// wire (gid_to_wire_gid): each 32-bit word of the GID, read from memory
// and converted to big-endian, printed with "%08x". On any host that is
// the 16 bytes in order, two lower-case hex digits each.
func WireGID(g uverbs.GID) string {
	var b strings.Builder
	for i := 0; i < 16; i += 4 {
		fmt.Fprintf(&b, "%08x", binary.BigEndian.Uint32(g[i:]))
	}
	return b.String()
}

// ParseWireGID is the inverse of WireGID (wire_gid_to_gid): 32 hex digits,
// eight per 32-bit word, most significant first.
func ParseWireGID(s string) (uverbs.GID, error) {
	var g uverbs.GID
	if len(s) != 32 {
		return g, fmt.Errorf("GID %q: want 32 hex digits", s)
	}
	for i := 0; i < 4; i++ {
		v, err := strconv.ParseUint(s[i*8:i*8+8], 16, 32)
		if err != nil {
			return g, fmt.Errorf("GID %q: not hex", s)
		}
		binary.BigEndian.PutUint32(g[i*4:], uint32(v))
	}
	return g, nil
}

// Encode returns the NUL-terminated message the C tools send for d:
// sprintf(msg, "%04x:%06x:%06x:%s", lid, qpn, psn, wire gid) in a
// MsgSize-byte buffer.
func (d Dest) Encode() ([MsgSize]byte, error) {
	var m [MsgSize]byte
	s := fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN, d.PSN, WireGID(d.GID))
	if len(s) >= MsgSize {
		return m, fmt.Errorf("address %q does not fit in %d bytes (QPN or PSN wider than 24 bits)", s, MsgSize)
	}
	copy(m[:], s)
	return m, nil
}

// ParseDest decodes a message the peer sent: the text up to the first NUL
// (or all of msg), "LID:QPN:PSN:GID" in hex as the C tools read it with
// sscanf("%x:%x:%x:%s"). Unlike sscanf it rejects malformed text instead
// of leaving fields unset.
func ParseDest(msg []byte) (Dest, error) {
	if i := bytes.IndexByte(msg, 0); i >= 0 {
		msg = msg[:i]
	}
	s := string(msg)
	f := strings.Split(s, ":")
	if len(f) != 4 {
		return Dest{}, fmt.Errorf("malformed address %q: want LID:QPN:PSN:GID", s)
	}
	var d Dest
	lid, err1 := strconv.ParseUint(f[0], 16, 16)
	qpn, err2 := strconv.ParseUint(f[1], 16, 32)
	psn, err3 := strconv.ParseUint(f[2], 16, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return Dest{}, fmt.Errorf("malformed address %q: LID, QPN and PSN must be hex", s)
	}
	g, err := ParseWireGID(f[3])
	if err != nil {
		return Dest{}, fmt.Errorf("malformed address %q: %v", s, err)
	}
	d.LID, d.QPN, d.PSN, d.GID = uint16(lid), uint32(qpn), uint32(psn), g
	return d, nil
}

// hasInterfaceID reports whether the GID's interface id (its last eight
// bytes, gid.global.interface_id) is non-zero: the C tools then address
// the peer with a GRH, otherwise by LID only.
func hasInterfaceID(g uverbs.GID) bool {
	return binary.BigEndian.Uint64(g[8:]) != 0
}

// FormatGID formats the GID as glibc's inet_ntop(AF_INET6) does, which is
// how the C tools print it: the longest run of two or more zero groups
// (the first of equal runs) becomes "::", groups are lower-case hex
// without leading zeros, and an address whose first 96 bits are zero
// except for an ffff group just before the last 32 bits, or whose first
// 96 bits are all zero (but not "::" or "::1"), ends in dotted IPv4:
// "::ffff:10.99.0.1". (net.IP.String would print "10.99.0.1".)
func FormatGID(g uverbs.GID) string {
	var w [8]int
	for i := range w {
		w[i] = int(g[2*i])<<8 | int(g[2*i+1])
	}
	bestBase, bestLen := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > bestLen {
			bestBase, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		bestBase, bestLen = -1, 0
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if bestBase >= 0 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || bestLen == 5 && w[5] == 0xffff) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", g[12], g[13], g[14], g[15])
			return b.String()
		}
		b.WriteString(strconv.FormatInt(int64(w[i]), 16))
	}
	if bestBase >= 0 && bestBase+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}
