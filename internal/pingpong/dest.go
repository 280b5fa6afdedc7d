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
