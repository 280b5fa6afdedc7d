package sys

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"golang.org/x/sys/unix"
)

func TestEventFD(t *testing.T) {
	r, err := NewEventFD("efd")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := IsCloexec(r.Fd()); !ok {
		t.Error("eventfd without FD_CLOEXEC")
	}
	buf := make([]byte, EventFDSize)
	if _, err := r.TryRead(buf); err != unix.EAGAIN {
		t.Fatalf("TryRead of a zero counter = %v, want EAGAIN", err)
	}
	if err := r.SignalEventFD(2); err != nil {
		t.Fatal(err)
	}
	if err := r.SignalEventFD(3); err != nil {
		t.Fatal(err)
	}
	if n, err := r.TryRead(buf); n != 8 || err != nil || binary.LittleEndian.Uint64(buf) != 5 {
		t.Fatalf("TryRead = %d %v %d, want the counter 5", n, err, binary.LittleEndian.Uint64(buf))
	}
	// A parked Read wakes when the counter is signalled.
	done := make(chan uint64)
	go func() {
		b := make([]byte, EventFDSize)
		if _, err := r.Read(context.Background(), b); err != nil {
			t.Error(err)
		}
		done <- binary.LittleEndian.Uint64(b)
	}()
	testkit.MustBlock(t, "TestEventFD.") // the wait has begun, not about to
	if err := r.SignalEventFD(1); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != 1 {
		t.Errorf("Read after a signal = %d", got)
	}
	// A short buffer is the kernel's EINVAL.
	if _, err := r.TryRead(make([]byte, 4)); err != unix.EINVAL {
		t.Errorf("4-byte read of an eventfd = %v, want EINVAL", err)
	}
	r.Close()
	if err := r.SignalEventFD(1); err != ErrFileClosed {
		t.Errorf("SignalEventFD after Close = %v", err)
	}
}

func TestRecordReaderStream(t *testing.T) {
	r, w, err := NewRecordReaderStream("stream")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	Write(w, []byte("abcd"))
	Write(w, []byte("efgh"))
	buf := make([]byte, 16)
	if n, err := r.TryRead(buf); err != nil || string(buf[:n]) != "abcdefgh" {
		t.Fatalf("stream read = %q %v, want both writes in one read", buf[:n], err)
	}
}

func TestIoctlImage(t *testing.T) {
	c := NewIoctl()
	c.Reset(3, 0, 14)
	c.IDRNew(0)
	c.InlineIn(1, 0x10, 4, true)
	out := make([]byte, 16)
	c.BytesOut(0x1001, out, false)
	img := c.Image()
	want := []byte{
		24 + 3*16, 0, 3, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 14, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 4, 0, 1, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0,
		1, 0x10, 16, 0, 0, 0, 0, 0,
	}
	want = binary.LittleEndian.AppendUint64(want, SliceAddr(out))
	if !bytes.Equal(img, want) {
		t.Errorf("Image\n got %x\nwant %x", img, want)
	}
	if b := c.AttrBuf(2); len(b) != 16 || &b[0] != &out[0] {
		t.Error("AttrBuf(2) is not the caller's buffer")
	}
	if c.AttrBuf(1) != nil || c.AttrBuf(0) != nil || c.AttrBuf(3) != nil || c.AttrBuf(-1) != nil {
		t.Error("AttrBuf of an inline, IDR or missing attribute is not nil")
	}
	if c.DriverID() != 14 || c.BuildErr() != nil {
		t.Error("DriverID/BuildErr")
	}
	c.InlineIn(5, 0, 9, true)
	if c.BuildErr() == nil {
		t.Error("BuildErr after a 9-byte inline attribute is nil")
	}
}
