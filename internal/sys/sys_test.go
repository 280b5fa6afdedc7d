package sys

import (
	"context"
	"encoding/binary"
	"errors"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMain traces every fd, mapping and buffer the tests create and fails
// the run when any is left open. In the VM each test is also checked on
// its own (testkit.LeakCheck). This package owns the tracing, so that
// check does not rest on it: goroutines, /proc/self/fd, the
// /dev/infiniband lines of /proc/self/maps and the kernel's resource
// counts are read by testkit itself, and a fault in the tracing cannot
// hide a leak; the traced lists are given too, for the stacks they name.
// The host tests of the tracing (OpenFDs, OpenMappings, OpenBuffers,
// LeakReport) run outside RequireVM and so outside the per-test check.
func TestMain(m *testing.M) {
	if os.Getenv(memlockChildEnv) == "1" {
		// TestMemlockWarningAsNobody's child: the warning between
		// markers, and nothing else.
		os.Stdout.WriteString("<<" + MemlockWarning() + ">>\n")
		os.Exit(0)
	}
	EnableLeakTracing()
	testkit.CheckLeaksPerTest(OpenFDs, OpenMappings, OpenBuffers)
	code := m.Run()
	if code == 0 {
		if r := LeakReport(); r != "" {
			os.Stderr.WriteString(r + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func TestIoctlLayout(t *testing.T) {
	var c Ioctl
	if got := unsafe.Sizeof(c.hdr); got != hdrSize {
		t.Errorf("header size %d, want %d", got, hdrSize)
	}
	if got := unsafe.Sizeof(c.attrs[0]); got != attrSize {
		t.Errorf("attr size %d, want %d", got, attrSize)
	}
	if got := unsafe.Offsetof(c.attrs); got != hdrSize {
		t.Errorf("attrs at offset %d, want directly after the %d-byte header", got, hdrSize)
	}
	if got := unsafe.Offsetof(c.hdr.DriverID); got != 16 {
		t.Errorf("driver_id at %d, want 16", got)
	}
	if got := unsafe.Offsetof(c.attrs[0].Data); got != 8 {
		t.Errorf("attr data at %d, want 8", got)
	}
}

func TestIoctlBuild(t *testing.T) {
	c := NewIoctl()
	c.Reset(3, 0, 14)
	out := make([]byte, 16)
	var u32 uint32 = 0x11223344
	big := make([]byte, 20)
	h := c.IDRNew(0)
	in := PtrIn(c, 1, &u32, true)
	p := c.BytesIn(2, big, true)
	o := c.BytesOut(0x1001, out, false)
	f := c.FDIn(7, 5, false)
	e := c.EnumIn(9, 3, nil, true)
	if c.NumAttrs() != 6 {
		t.Fatalf("NumAttrs = %d", c.NumAttrs())
	}
	a := c.attrs
	if a[h].Flags != attrFMandatory || a[h].Len != 0 {
		t.Errorf("IDR new attr: %+v", a[h])
	}
	if a[in].Len != 4 || a[in].Data != 0x11223344 {
		t.Errorf("inline u32 attr: %+v", a[in])
	}
	if a[p].Len != 20 || a[p].Data != uint64(uintptr(unsafe.Pointer(&big[0]))) {
		t.Errorf("pointer attr: %+v", a[p])
	}
	if a[o].Flags != 0 || a[o].Len != 16 || a[o].Data != uint64(uintptr(unsafe.Pointer(&out[0]))) {
		t.Errorf("out attr: %+v", a[o])
	}
	if a[f].Data != 5 || a[f].Len != 0 {
		t.Errorf("fd attr: %+v", a[f])
	}
	if a[e].AttrData != 3 {
		t.Errorf("enum attr: %+v", a[e])
	}
	if c.Valid(o) {
		t.Error("output valid before exec")
	}
	// /dev/null has no RDMA_VERBS_IOCTL: the errno comes back unwrapped.
	fd, err := Open("/dev/null", unix.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := c.Exec(fd); err != unix.ENOTTY {
		t.Fatalf("Exec on /dev/null = %v, want ENOTTY", err)
	}
	if want := uint16(hdrSize + 6*attrSize); c.hdr.Length != want {
		t.Errorf("length %d, want %d", c.hdr.Length, want)
	}
	c.Reset(1, 2, 0)
	if c.NumAttrs() != 0 || c.hdr.DriverID != 0 || c.refs[2] != nil {
		t.Error("Reset left state behind")
	}
}

func TestIoctlBuildErrors(t *testing.T) {
	c := NewIoctl()
	c.Reset(0, 0, 0)
	for i := 0; i < MaxAttrs+1; i++ {
		c.ConstIn(uint16(i), 1, true)
	}
	fd, err := Open("/dev/null", unix.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := c.Exec(fd); !errors.Is(err, unix.EINVAL) || err != errTooManyAttrs {
		t.Fatalf("overflow: %v", err)
	}
	c.Reset(0, 0, 0)
	c.InlineIn(1, 0, 9, true)
	if err := c.Exec(fd); err != errBadInline {
		t.Fatalf("bad inline: %v", err)
	}
	fd.Close()
	c.Reset(0, 0, 0)
	if err := c.Exec(fd); err != ErrClosedFD {
		t.Fatalf("closed fd: %v", err)
	}
}

func TestIoctlAllocs(t *testing.T) {
	fd, err := Open("/dev/null", unix.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	c := NewIoctl()
	type resp struct{ A, B uint32 }
	r := new(resp)
	var port uint64 = 1
	testkit.NoAllocs(t, 2000, func() {
		c.Reset(0, 2, 14)
		c.ConstIn(0, port, true)
		PtrOut(c, 1, r, true)
		_ = c.Exec(fd)
	})
}

func BenchmarkIoctlBuildExec(b *testing.B) {
	fd, err := Open("/dev/null", unix.O_RDWR)
	if err != nil {
		b.Fatal(err)
	}
	defer fd.Close()
	c := NewIoctl()
	out := make([]byte, 48)
	b.ReportAllocs()
	for b.Loop() {
		c.Reset(0, 2, 14)
		c.ConstIn(0, 1, true)
		c.BytesOut(1, out, true)
		_ = c.Exec(fd)
	}
}

// TestLegacyWrite checks the write() ABI image through a SEQPACKET pair.
func TestLegacyWrite(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := NewFD(fds[0], "w")
	r, _ := NewFD(fds[1], "r")
	defer w.Close()
	defer r.Close()
	c := NewIoctl()
	le := binary.LittleEndian

	// Non-extended: QUERY_PORT {response u64, port u8, reserved[7]}, 40-byte resp.
	req := make([]byte, 16)
	req[8] = 1
	resp := make([]byte, 40)
	if err := c.LegacyWrite(w, &WriteCmd{Cmd: 2, Req: req, Resp: resp}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 128)
	n, err := unix.Read(r.Int(), got)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:n]
	if n != 24 || le.Uint32(got) != 2 || le.Uint16(got[4:]) != 6 || le.Uint16(got[6:]) != 10 {
		t.Fatalf("header: % x", got)
	}
	if le.Uint64(got[8:]) != uint64(uintptr(unsafe.Pointer(&c.scratch.r[0]))) || got[16] != 1 {
		t.Fatalf("body: % x", got)
	}

	// Extended: EX_QUERY_DEVICE {comp_mask, reserved}, 8-byte udata in.
	ureq := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if err := c.LegacyWrite(w, &WriteCmd{Cmd: CmdFlagExtended | 1, Req: make([]byte, 8), Resp: make([]byte, 304), UdataIn: ureq}); err != nil {
		t.Fatal(err)
	}
	got = got[:cap(got)]
	n, err = unix.Read(r.Int(), got)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:n]
	if n != 40 || le.Uint32(got) != CmdFlagExtended|1 || le.Uint16(got[4:]) != 1 || le.Uint16(got[6:]) != 38 ||
		le.Uint16(got[16:]) != 1 || le.Uint16(got[18:]) != 0 || got[32] != 1 {
		t.Fatalf("extended image: % x", got)
	}
	// Misaligned extended sizes are rejected before any syscall.
	if err := c.LegacyWrite(w, &WriteCmd{Cmd: CmdFlagExtended | 1, Req: make([]byte, 6)}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("misaligned: %v", err)
	}
}

func seqpacket(t *testing.T) (*EventFile, *FD) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	rfd, _ := NewFD(fds[0], "event reader")
	wfd, _ := NewFD(fds[1], "event writer")
	ef, err := NewEventFile(rfd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ef.Close(); wfd.Close() })
	return ef, wfd
}

func TestEventFileTryRead(t *testing.T) {
	ef, w := seqpacket(t)
	if nb, _ := IsNonblock(ef.Fd()); !nb {
		t.Error("event fd is not O_NONBLOCK")
	}
	if ce, _ := IsCloexec(ef.Fd()); !ce {
		t.Error("event fd is not O_CLOEXEC")
	}
	buf := make([]byte, 16)
	if _, err := ef.TryRead(buf); err != unix.EAGAIN {
		t.Fatalf("empty TryRead = %v, want EAGAIN", err)
	}
	Write(w, []byte("0123456789abcdef"))
	n, err := ef.TryRead(buf)
	if err != nil || n != 16 || string(buf) != "0123456789abcdef" {
		t.Fatalf("TryRead = %d %v %q", n, err, buf)
	}
	testkit.NoAllocs(t, 1000, func() { ef.TryRead(buf) })
	// After Close the number may name another file: Fd says -1.
	if fd := ef.Fd(); fd < 0 {
		t.Fatalf("Fd before Close = %d", fd)
	}
	ef.Close()
	if fd := ef.Fd(); fd != -1 {
		t.Fatalf("Fd after Close = %d, want -1", fd)
	}
}

func TestEventFileConcurrentReaders(t *testing.T) {
	ef, w := seqpacket(t)
	const readers, records = 8, 200
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16)
			for {
				n, err := ef.Read(ctx, buf)
				if errors.Is(err, ErrFileClosed) {
					return
				}
				if err != nil || n != 16 {
					errs <- err
					return
				}
				mu.Lock()
				seen[binary.LittleEndian.Uint64(buf)]++
				done := len(seen) == records
				mu.Unlock()
				if done {
					ef.Close() // wakes the other readers
				}
			}
		}()
	}
	rec := make([]byte, 16)
	for i := 0; i < records; i++ {
		binary.LittleEndian.PutUint64(rec, uint64(i))
		if _, err := Write(w, rec); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("reader: %v", err)
	}
	if len(seen) != records {
		t.Fatalf("got %d distinct records, want %d", len(seen), records)
	}
	for k, v := range seen {
		if v != 1 {
			t.Fatalf("record %d delivered %d times", k, v)
		}
	}
}

func TestEventFileContextAndClose(t *testing.T) {
	ef, _ := seqpacket(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := ef.Read(ctx, make([]byte, 16))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Read = %v", err)
	}
	go func() {
		_, err := ef.Read(context.Background(), make([]byte, 16))
		done <- err
	}()
	ef.Close()
	if err := <-done; !errors.Is(err, ErrFileClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	if err := ef.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := ef.TryRead(make([]byte, 16)); err != ErrFileClosed {
		t.Fatalf("TryRead after Close = %v", err)
	}
}

func TestFDCloseOnceAndLeakTracing(t *testing.T) {
	fd, err := Open("/dev/null", unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	if ce, _ := IsCloexec(fd.Int()); !ce {
		t.Error("Open did not set O_CLOEXEC")
	}
	found := false
	for _, s := range OpenFDs() {
		if contains(s, "/dev/null") {
			found = true
		}
	}
	if !found {
		t.Error("open FD missing from the leak tracer")
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if fd.Int() != -1 {
		t.Error("closed FD still reports a number")
	}
	for _, s := range OpenFDs() {
		if contains(s, "/dev/null") {
			t.Errorf("closed FD still traced: %s", s)
		}
	}
}

// TestNewFDKind: the two parts of the description make one name, in Name
// and in the leak report, and a bad number is refused naming both.
func TestNewFDKind(t *testing.T) {
	raw, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := NewFDKind(raw, "rxe9", "async events")
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if got := fd.Name(); got != "rxe9 async events" {
		t.Errorf("Name() = %q", got)
	}
	found := false
	for _, s := range OpenFDs() {
		found = found || contains(s, "(rxe9 async events)")
	}
	if !found {
		t.Errorf("leak report lacks the joined name: %q", OpenFDs())
	}
	if _, err := NewFDKind(-1, "rxe9", "completion channel"); err == nil || !contains(err.Error(), "rxe9 completion channel") {
		t.Errorf("NewFDKind(-1) = %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestFDCloseWaitsForCalls: Close never closes the number under a call in
// flight, and calls after Close fail cleanly instead of using a reused fd.
func TestFDCloseWaitsForCalls(t *testing.T) {
	fd, err := Open("/dev/null", unix.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := fd.acquire()
	if !ok {
		t.Fatal("acquire on an open FD failed")
	}
	closed := make(chan error)
	go func() { closed <- fd.Close() }()
	for !fd.closed.Load() { // Close has begun and now waits for us
		runtime.Gosched()
	}
	// While the call is "in flight" the descriptor stays open.
	if _, err := unix.FcntlInt(uintptr(raw), unix.F_GETFD, 0); err != nil {
		t.Fatalf("descriptor closed under an in-flight call: %v", err)
	}
	fd.release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, ok := fd.acquire(); ok {
		t.Fatal("acquire after Close succeeded")
	}
	if _, err := Write(fd, []byte{1}); err != ErrClosedFD {
		t.Fatalf("Write after Close = %v", err)
	}
	c := NewIoctl()
	c.Reset(0, 0, 0)
	if err := c.Exec(fd); err != ErrClosedFD {
		t.Fatalf("Exec after Close = %v", err)
	}
}

func TestFDConcurrentUseAndClose(t *testing.T) {
	for i := 0; i < 50; i++ {
		fd, err := Open("/dev/null", unix.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := NewIoctl()
				for k := 0; k < 100; k++ {
					c.Reset(0, 2, 0)
					if err := c.Exec(fd); err != unix.ENOTTY && err != ErrClosedFD {
						t.Errorf("Exec = %v", err)
						return
					}
				}
			}()
		}
		fd.Close()
		wg.Wait()
	}
}

// TestEventFileNoLostWakeup: a record that arrives after a reader's EAGAIN
// but before the watcher waits on the poller must still wake the reader.
// The test hook writes the record exactly in that window.
func TestEventFileNoLostWakeup(t *testing.T) {
	ef, w := seqpacket(t)
	rec := make([]byte, 16)
	ef.testAfterEAGAIN = func() {
		if _, err := Write(w, rec); err != nil {
			t.Error(err)
		}
		// Give the runtime's netpoller time to consume the fd's edge
		// before the watcher starts (this widens the race window; it
		// does not synchronise anything the test then relies on).
		time.Sleep(2 * time.Millisecond)
	}
	buf := make([]byte, 16)
	for i := 0; i < 50; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := ef.Read(ctx, buf)
		cancel()
		if err != nil || n != 16 {
			t.Fatalf("iteration %d: Read = %d, %v with a record queued", i, n, err)
		}
	}
}

// TestEventFileCloseRacesReads: Close while goroutines hammer TryRead and
// Read is race-free and wakes everyone.
func TestEventFileCloseRacesReads(t *testing.T) {
	ef, _ := seqpacket(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16)
			for {
				if _, err := ef.TryRead(buf); err == ErrFileClosed {
					break
				}
			}
			if _, err := ef.Read(context.Background(), buf); err != ErrFileClosed {
				t.Errorf("Read after Close = %v", err)
			}
		}()
	}
	ef.Close()
	wg.Wait()
}

// nonblockPipe returns a non-blocking pipe closed at the test's end.
func nonblockPipe(t *testing.T) [2]int {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p
}

// TestRWQuick: the raw read/write of the doorbell and the event readers
// returns the kernel's count and the errno of a failure, unwrapped.
func TestRWQuick(t *testing.T) {
	p := nonblockPipe(t)
	if n, err := rwQuick(unix.SYS_WRITE, p[1], []byte("hello")); n != 5 || err != nil {
		t.Fatalf("write = %d, %v", n, err)
	}
	buf := make([]byte, 16)
	if n, err := rwQuick(unix.SYS_READ, p[0], buf); n != 5 || err != nil || string(buf[:5]) != "hello" {
		t.Fatalf("read = %d, %v, %q", n, err, buf[:n])
	}
	if n, err := rwQuick(unix.SYS_READ, p[0], buf); n != 0 || err != unix.EAGAIN {
		t.Fatalf("read of an empty non-blocking pipe = %d, %v; want EAGAIN", n, err)
	}
	if _, err := rwQuick(unix.SYS_WRITE, -1, buf); err != unix.EBADF {
		t.Fatalf("write to fd -1: %v; want EBADF", err)
	}
	if n, err := rwQuick(unix.SYS_WRITE, p[1], nil); n != 0 || err != nil {
		t.Fatalf("empty write = %d, %v", n, err)
	}
}

// TestRWQuickNoAllocs: the doorbell's and the event readers' raw call
// allocates nothing (apart from TestRWQuick: NoAllocs skips under -race).
func TestRWQuickNoAllocs(t *testing.T) {
	p := nonblockPipe(t)
	buf := make([]byte, 16)
	testkit.NoAllocs(t, 1000, func() {
		rwQuick(unix.SYS_WRITE, p[1], buf[:1])
		rwQuick(unix.SYS_READ, p[0], buf)
	})
}

// TestWriteHeldValue: the doorbell's write of a fixed-size command reaches
// the fd byte for byte, and a failing write returns its errno unwrapped.
func TestWriteHeldValue(t *testing.T) {
	p := nonblockPipe(t)
	w, err := NewFD(p[1], "pipe")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Disown() // nonblockPipe closes the number
	v := struct {
		A uint64
		B [3]uint32
		C uint32
	}{A: 0x1122334455667788, B: [3]uint32{1, 2, 3}, C: 4}
	if err := WriteHeldValue(w, &v); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	n, err := unix.Read(p[0], got)
	if err != nil || n != 24 || got[0] != 0x88 || got[7] != 0x11 || got[8] != 1 || got[20] != 4 {
		t.Fatalf("read %d bytes % x, %v", n, got[:max(n, 0)], err)
	}
	full, err := Open("/dev/full", unix.O_WRONLY)
	if err != nil {
		t.Skipf("/dev/full: %v", err)
	}
	defer full.Close()
	if err := WriteHeldValue(full, &v); err != unix.ENOSPC {
		t.Fatalf("write to /dev/full = %v, want ENOSPC", err)
	}
	testkit.NoAllocs(t, 100, func() { WriteHeldValue(w, &v); unix.Read(p[0], got) })
}
