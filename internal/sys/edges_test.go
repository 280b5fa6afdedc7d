package sys

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIoctlAccessorsEdges: an enum as the first attribute keeps its
// element, Valid reads the kernel's VALID_OUTPUT flag only, an fd
// attribute not yet written reads -1, accessors refuse an index past
// the command's attributes (the array keeps the last command's), SliceOut
// covers every byte of its elements, and a 65536-byte buffer is refused.
func TestIoctlAccessorsEdges(t *testing.T) {
	c := NewIoctl()
	c.Reset(1, 2, 0)
	e := c.EnumIn(4, 3, nil, true)
	if e != 0 || c.attrs[0].AttrData != 3 {
		t.Errorf("first attribute an enum: index %d, attr %+v", e, c.attrs[0])
	}
	out := make([]byte, 8)
	o := c.BytesOut(5, out, true)
	if c.Valid(o) {
		t.Error("a mandatory output the kernel did not mark reads as valid")
	}
	c.attrs[o].Flags |= attrFValidOutput // as the kernel marks a written output
	if !c.Valid(o) {
		t.Error("an output marked VALID_OUTPUT reads as not valid")
	}
	f := c.FDNew(6)
	if got := c.NewFDNum(f); got != -1 {
		t.Errorf("NewFDNum before Exec = %d, want -1", got)
	}
	c.attrs[f].Data = 9
	c.Reset(1, 2, 0) // attrs[f] still holds 9 in the array
	if got := c.NewFDNum(f); got != -1 {
		t.Errorf("NewFDNum of an index past the command's attributes = %d, want -1", got)
	}
	c.FDIn(0, 1, true)
	c.attrs[0].Data = 77
	if got := c.NewFDNum(1); got != -1 {
		t.Errorf("NewFDNum(NumAttrs) = %d, want -1", got)
	}

	c.Reset(1, 2, 0)
	s := make([]uint32, 3)
	a := SliceOut(c, 1, s, true)
	if c.attrs[a].Len != 12 {
		t.Errorf("SliceOut of 3 uint32s: length %d, want 12", c.attrs[a].Len)
	}

	c.Reset(1, 2, 0)
	c.BytesIn(1, make([]byte, 1<<16), true)
	if !errors.Is(c.BuildErr(), unix.EINVAL) {
		t.Errorf("a 65536-byte attribute: build error %v, want EINVAL", c.BuildErr())
	}
}

// TestScratchClearsOddSizes: Scratch zeroes all of a T whose size is not
// a multiple of 8.
func TestScratchClearsOddSizes(t *testing.T) {
	c := NewIoctl()
	for i := range c.out {
		c.out[i] = ^uint64(0)
	}
	p := Scratch[[12]byte](c)
	if *p != ([12]byte{}) {
		t.Errorf("Scratch[[12]byte] = % x, want zeroes", *p)
	}
}

// TestLegacyWriteReplyBuffers: what the kernel does not write stays as
// the caller had it, in the core response and the provider's response
// alike (nothing answers on a socket pair); a non-extended command with
// a response but no room for the response pointer is refused.
func TestLegacyWriteReplyBuffers(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := NewFD(fds[0], "w")
	r, _ := NewFD(fds[1], "r")
	defer w.Close()
	defer r.Close()
	c := NewIoctl()
	// Dirty the scratch first, as an earlier command would.
	if err := c.LegacyWrite(w, &WriteCmd{Cmd: 2, Req: make([]byte, 16), Resp: bytes.Repeat([]byte{0x55}, 64)}); err != nil {
		t.Fatal(err)
	}
	c.scratch.r = [maxWriteBytes]byte{}
	resp := bytes.Repeat([]byte{0xaa}, 16)
	udata := bytes.Repeat([]byte{0xbb}, 8)
	if err := c.LegacyWrite(w, &WriteCmd{Cmd: 3, Req: make([]byte, 16), Resp: resp, UdataOut: udata}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp, bytes.Repeat([]byte{0xaa}, 16)) || !bytes.Equal(udata, bytes.Repeat([]byte{0xbb}, 8)) {
		t.Errorf("unwritten reply: resp % x udata % x, want them as they were", resp, udata)
	}
	if err := c.LegacyWrite(w, &WriteCmd{Cmd: 4, Req: make([]byte, 4), Resp: make([]byte, 8)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a response without the request's response field: %v, want EINVAL", err)
	}
}
