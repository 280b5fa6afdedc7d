package sys

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ucmPair is a UCM on one end of a SOCK_SEQPACKET pair: each command it
// writes arrives whole at the other end, which plays the kernel.
func ucmPair(t *testing.T) (*UCM, *FD) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewFD(fds[0], "ucm")
	b, _ := NewFD(fds[1], "kernel end")
	u, err := newUCM(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close(); b.Close() })
	return u, b
}

// TestUCMCommand: the bytes of a command as the kernel's ucma_write reads
// them: struct rdma_ucm_cmd_hdr (cmd, in, out), then the request with the
// response's address at its offset; bad sizes are EINVAL before any
// write; after Close, ErrFileClosed.
func TestUCMCommand(t *testing.T) {
	u, k := ucmPair(t)
	req := make([]byte, 24) // struct rdma_ucm_create_id: uid, response, ps, qp_type
	for i := range req {
		req[i] = byte(i + 1)
	}
	resp := []byte{9, 9, 9, 9}
	if err := u.Command(0, req, 8, resp); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 600)
	n, err := unix.Read(k.Int(), got)
	if err != nil || n != 8+24 {
		t.Fatalf("the kernel end read %d bytes (%v), want 32", n, err)
	}
	le := binary.LittleEndian
	if le.Uint32(got[0:]) != 0 || le.Uint16(got[4:]) != 24 || le.Uint16(got[6:]) != 4 {
		t.Errorf("header % x, want cmd 0, in 24, out 4", got[:8])
	}
	if string(got[8:16]) != string(req[:8]) || string(got[24:32]) != string(req[16:]) {
		t.Errorf("request % x, want the caller's bytes around the address", got[8:32])
	}
	if addr := le.Uint64(got[16:]); addr != uint64(uintptr(unsafe.Pointer(&u.cmd.resp[0]))) {
		t.Errorf("response address %#x, want the heap buffer's", addr)
	}
	if string(resp) != "\x00\x00\x00\x00" {
		t.Errorf("response % x: want what the kernel left (nothing: zeros)", resp)
	}
	// Without a response: no address written, out 0.
	if err := u.Command(7, req[:8], -1, nil); err != nil {
		t.Fatal(err)
	}
	n, _ = unix.Read(k.Int(), got)
	if n != 16 || le.Uint32(got[0:]) != 7 || le.Uint16(got[4:]) != 8 || le.Uint16(got[6:]) != 0 || string(got[8:16]) != string(req[:8]) {
		t.Errorf("LISTEN-like command % x", got[:n])
	}
	for name, call := range map[string]func() error{
		"request too long":     func() error { return u.Command(1, make([]byte, 513), -1, nil) },
		"response too long":    func() error { return u.Command(1, make([]byte, 16), 0, make([]byte, 513)) },
		"address past the end": func() error { return u.Command(1, make([]byte, 16), 12, make([]byte, 4)) },
		"negative offset":      func() error { return u.Command(1, make([]byte, 16), -1, make([]byte, 4)) },
	} {
		if err := call(); err != unix.EINVAL {
			t.Errorf("%s: %v, want EINVAL", name, err)
		}
	}
	// An input buffer (SET_OPTION's optval): the value sits in the heap
	// buffer the request names, and the header's out length is 0.
	opt := make([]byte, 24) // struct rdma_ucm_set_option: optval, id, level, optname, optlen
	if err := u.CommandIn(14, opt, 0, []byte{0x2a}); err != nil {
		t.Fatal(err)
	}
	n, _ = unix.Read(k.Int(), got)
	if n != 32 || le.Uint32(got[0:]) != 14 || le.Uint16(got[4:]) != 24 || le.Uint16(got[6:]) != 0 {
		t.Errorf("SET_OPTION-like command % x", got[:n])
	}
	if addr := le.Uint64(got[8:]); addr != uint64(uintptr(unsafe.Pointer(&u.cmd.resp[0]))) || u.cmd.resp[0] != 0x2a {
		t.Errorf("input at %#x holding %#x, want the heap buffer's address and 0x2a", addr, u.cmd.resp[0])
	}
	if err := u.CommandIn(14, opt, 20, []byte{1}); err != unix.EINVAL {
		t.Errorf("input address past the end: %v, want EINVAL", err)
	}
	u.Close()
	if err := u.Command(7, req[:8], -1, nil); !errors.Is(err, ErrFileClosed) {
		t.Errorf("Command after Close: %v, want ErrFileClosed", err)
	}
	if _, err := u.GetEvent(context.Background(), make([]byte, 16)); !errors.Is(err, ErrFileClosed) {
		t.Errorf("GetEvent after Close: %v, want ErrFileClosed", err)
	}
}

// TestRecordReaderOp: with SetOp, TryRead and Read call the operation
// instead of read(2), and a Read whose operation says EAGAIN parks until
// the fd is readable, then calls it again.
func TestRecordReaderOp(t *testing.T) {
	r, w, err := NewRecordReaderPipe("op")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	calls := 0
	r.SetOp(func(fd int, buf []byte) (int, error) {
		calls++
		var rec [8]byte
		n, err := rwQuick(unix.SYS_READ, fd, rec[:])
		if err != nil {
			return 0, err
		}
		return copy(buf, "op:"+string(rec[:n])), nil
	})
	buf := make([]byte, 16)
	if _, err := r.TryRead(buf); err != unix.EAGAIN || calls != 1 {
		t.Fatalf("TryRead on empty: %v after %d calls, want EAGAIN after 1", err, calls)
	}
	done := make(chan string)
	go func() {
		n, err := r.Read(context.Background(), buf)
		if err != nil {
			t.Error(err)
		}
		done <- string(buf[:n])
	}()
	Write(w, []byte("abc"))
	if s := <-done; s != "op:abc" {
		t.Fatalf("Read through the operation: %q", s)
	}
	var seen int
	if err := r.Control(func(fd int) { seen = fd }); err != nil || seen != r.Fd() {
		t.Fatalf("Control ran with fd %d (%v), want %d", seen, err, r.Fd())
	}
	r.Close()
	if err := r.Control(func(int) { t.Error("Control ran after Close") }); !errors.Is(err, ErrFileClosed) {
		t.Fatalf("Control after Close: %v", err)
	}
}
