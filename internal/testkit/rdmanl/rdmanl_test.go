package rdmanl

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func le16(v uint16) []byte { b := make([]byte, 2); binary.NativeEndian.PutUint16(b, v); return b }
func le32(v uint32) []byte { b := make([]byte, 4); binary.NativeEndian.PutUint32(b, v); return b }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestMsgType(t *testing.T) {
	if got := MsgType(CmdNewLink); got != 0x1403 {
		t.Errorf("NEWLINK type = %#x, want 0x1403", got)
	}
	if got := MsgType(CmdDelLink); got != 0x1404 {
		t.Errorf("DELLINK type = %#x, want 0x1404", got)
	}
	if got := MsgType(CmdGet); got != 0x1401 {
		t.Errorf("GET type = %#x, want 0x1401", got)
	}
}

// TestNewLinkMsg checks the exact bytes of `rdma link add rxe0 type rxe
// netdev d0`, laid out by hand.
func TestNewLinkMsg(t *testing.T) {
	want := cat(
		// nlmsghdr: len, type 0x1403, flags REQUEST|ACK, seq 7, pid 0
		le32(16+12+8+8), le16(0x1403), le16(0x5), le32(7), le32(0),
		// DEV_NAME "rxe0\0": len 9, padded to 12
		le16(9), le16(2), []byte("rxe0\x00"), []byte{0, 0, 0},
		// LINK_TYPE "rxe\0": len 8
		le16(8), le16(65), []byte("rxe\x00"),
		// NDEV_NAME "d0\0": len 7, padded to 8
		le16(7), le16(51), []byte("d0\x00"), []byte{0},
	)
	got := NewLinkMsg(7, "rxe0", "rxe", "d0")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NewLinkMsg mismatch (-want +got):\n%s", diff)
	}
}

func TestDelLinkAndDump(t *testing.T) {
	want := cat(le32(24), le16(0x1404), le16(0x5), le32(3), le32(0), le16(8), le16(1), le32(42))
	if diff := cmp.Diff(want, DelLinkMsg(3, 42)); diff != "" {
		t.Errorf("DelLinkMsg (-want +got):\n%s", diff)
	}
	want = cat(le32(16), le16(0x1401), le16(unix.NLM_F_REQUEST|unix.NLM_F_DUMP), le32(4), le32(0))
	if diff := cmp.Diff(want, GetDumpMsg(4)); diff != "" {
		t.Errorf("GetDumpMsg (-want +got):\n%s", diff)
	}
}

func TestParseRoundTrip(t *testing.T) {
	guid := uint64(0x0102030405060708)
	g := make([]byte, 8)
	binary.NativeEndian.PutUint64(g, guid)
	dev := Encode(MsgType(CmdGet), unix.NLM_F_MULTI, 9,
		U32Attr(AttrDevIndex, 2), StringAttr(AttrDevName, "rxelo"),
		U32Attr(AttrPortIndex, 1), Attr{Type: AttrNodeGUID, Data: g})
	done := Encode(unix.NLMSG_DONE, unix.NLM_F_MULTI, 9, U32Attr(0, 0))
	msgs, err := ParseMessages(append(dev, done...))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Seq != 9 || msgs[1].Type != unix.NLMSG_DONE {
		t.Fatalf("messages = %+v", msgs)
	}
	d, err := ParseDevice(msgs[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Device{Index: 2, Name: "rxelo", NodeGUID: guid, Ports: 1}, d); diff != "" {
		t.Errorf("device (-want +got):\n%s", diff)
	}
}

func TestErrnoOf(t *testing.T) {
	orig := NewLinkMsg(1, "a", "rxe", "b")
	mk := func(errno int32) Message {
		body := cat(le32(uint32(errno)), orig[:16])
		return Message{Type: unix.NLMSG_ERROR, Seq: 1, Body: body}
	}
	if err := ErrnoOf(mk(0)); err != nil {
		t.Errorf("ack: %v", err)
	}
	if err := ErrnoOf(mk(-int32(unix.EEXIST))); !errors.Is(err, unix.EEXIST) {
		t.Errorf("EEXIST reply gave %v", err)
	}
	if err := ErrnoOf(Message{Type: unix.NLMSG_ERROR, Body: []byte{1}}); !errors.Is(err, ErrTruncated) {
		t.Errorf("short error reply gave %v", err)
	}
}

func TestParseTruncated(t *testing.T) {
	if _, err := ParseMessages([]byte{1, 2, 3}); !errors.Is(err, ErrTruncated) {
		t.Errorf("short header: %v", err)
	}
	bad := Encode(MsgType(CmdGet), 0, 1)
	binary.NativeEndian.PutUint32(bad, 100)
	if _, err := ParseMessages(bad); !errors.Is(err, ErrTruncated) {
		t.Errorf("overlong length: %v", err)
	}
	if _, err := ParseAttrs([]byte{50, 0, 1, 0}); !errors.Is(err, ErrTruncated) {
		t.Errorf("overlong attr: %v", err)
	}
}
