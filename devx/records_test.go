package devx

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"

	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open; in the VM each test is also checked on its own
// (testkit.LeakCheck: goroutines, fds, mappings, kernel objects).
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

// Records in the kernel's format (devx.c devx_async_event_read,
// devx_async_cmd_event_read), built here byte by byte.

// eventRec is struct mlx5_ib_uapi_devx_async_event_hdr: the cookie, then,
// on a channel with data, the 64-byte struct mlx5_eqe (type at byte 1,
// sub_type at byte 3, the event data at 32).
func eventRec(cookie uint64, withData bool, typ, sub byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, cookie)
	if !withData {
		return b
	}
	eqe := make([]byte, EQESize)
	eqe[1], eqe[3] = typ, sub
	for i := 32; i < 60; i++ {
		eqe[i] = byte(cookie) + byte(i)
	}
	eqe[63] = 1 // owner
	return append(b, eqe...)
}

// cmdRec is struct mlx5_ib_uapi_devx_async_cmd_hdr with out_len bytes of
// response.
func cmdRec(wrID uint64, out []byte) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, wrID), out...)
}

func write(t *testing.T, w *sys.FD, b []byte) {
	t.Helper()
	if n, err := sys.Write(w, b); err != nil || n != len(b) {
		t.Fatalf("write %d bytes: %d %v", len(b), n, err)
	}
}

// seqChannel is an event channel over a SOCK_SEQPACKET pair: one record
// per read, as the kernel's event fds.
func seqChannel(t *testing.T, omit bool) (*EventChannel, *sys.FD) {
	t.Helper()
	r, w, err := sys.NewRecordReaderPipe("devx events")
	if err != nil {
		t.Fatal(err)
	}
	ch := newEventChannel(nil, r, omit)
	t.Cleanup(func() { ch.Close(); w.Close() })
	return ch, w
}

// streamChannel is an event channel over a SOCK_STREAM pair: writes made
// before a read come back from one read, so several records per read.
func streamChannel(t *testing.T, omit bool) (*EventChannel, *sys.FD) {
	t.Helper()
	r, w, err := sys.NewRecordReaderStream("devx events")
	if err != nil {
		t.Fatal(err)
	}
	ch := newEventChannel(nil, r, omit)
	t.Cleanup(func() { ch.Close(); w.Close() })
	return ch, w
}

func mustEvent(t *testing.T, ch *EventChannel, cookie uint64, dataLen int) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := ch.GetEvent(ctx)
	if err != nil {
		t.Fatalf("GetEvent: %v (want cookie %#x)", err, cookie)
	}
	if ev.Cookie != cookie || ev.Len != dataLen {
		t.Fatalf("event cookie %#x len %d, want %#x len %d", ev.Cookie, ev.Len, cookie, dataLen)
	}
	return ev
}

func mustNoEvent(t *testing.T, ch *EventChannel) {
	t.Helper()
	if ev, err := ch.TryGetEvent(); !errors.Is(err, ErrNoEvent) || !errors.Is(err, sys.EAGAIN) {
		t.Fatalf("TryGetEvent on an empty channel = %+v %v, want ErrNoEvent", ev, err)
	}
}

func TestEventRecordsBothModes(t *testing.T) {
	for _, omit := range []bool{false, true} {
		t.Run(fmt.Sprintf("omit=%v", omit), func(t *testing.T) {
			ch, w := seqChannel(t, omit)
			if ch.OmitData() != omit {
				t.Fatal("OmitData")
			}
			mustNoEvent(t, ch)
			dataLen := EQESize
			if omit {
				dataLen = 0
			}
			// Several records queued before the first read: each read
			// takes one, in order, nothing lost.
			for i := uint64(1); i <= 5; i++ {
				write(t, w, eventRec(i<<32|i, !omit, byte(0x10+i), byte(i)))
			}
			for i := uint64(1); i <= 5; i++ {
				ev := mustEvent(t, ch, i<<32|i, dataLen)
				if !omit {
					if ev.Type() != byte(0x10+i) || ev.SubType() != byte(i) || ev.Data()[63] != 1 || ev.Data()[40] != byte(i<<32|i)+40 {
						t.Errorf("event %d: type %#x sub %d data %x", i, ev.Type(), ev.SubType(), ev.Data())
					}
				} else if ev.Type() != 0 || len(ev.Data()) != 0 {
					t.Errorf("omit-data event with data: %+v", ev)
				}
			}
			mustNoEvent(t, ch)
			// A blocked GetEvent wakes for a record written later.
			got := make(chan Event, 1)
			go func() {
				ev, err := ch.GetEvent(context.Background())
				if err != nil {
					t.Error(err)
				}
				got <- ev
			}()
			testkit.MustBlock(t, "TestEventRecordsBothModes.") // the wait has begun, not about to
			write(t, w, eventRec(99, !omit, 1, 0))
			if ev := <-got; ev.Cookie != 99 {
				t.Errorf("woken GetEvent cookie %d", ev.Cookie)
			}
		})
	}
}

func TestEventRecordsSeveralPerRead(t *testing.T) {
	t.Run("omit", func(t *testing.T) {
		ch, w := streamChannel(t, true)
		var b []byte
		for i := uint64(1); i <= 70; i++ { // more than one read buffer (64 records)
			b = append(b, eventRec(i, false, 0, 0)...)
		}
		write(t, w, b)
		for i := uint64(1); i <= 70; i++ {
			mustEvent(t, ch, i, 0)
		}
		mustNoEvent(t, ch)
	})
	t.Run("data", func(t *testing.T) {
		ch, w := streamChannel(t, false)
		var b []byte
		for i := uint64(1); i <= 20; i++ { // more than one read buffer (16 records)
			b = append(b, eventRec(i, true, byte(i), 0)...)
		}
		write(t, w, b)
		for i := uint64(1); i <= 20; i++ {
			if ev := mustEvent(t, ch, i, EQESize); ev.Type() != byte(i) {
				t.Errorf("event %d type %d", i, ev.Type())
			}
		}
		mustNoEvent(t, ch)
	})
}

func TestEventRecordsBadInput(t *testing.T) {
	t.Run("zero-length read", func(t *testing.T) {
		ch, w := seqChannel(t, false)
		write(t, w, nil)
		write(t, w, eventRec(7, true, 1, 2))
		if _, err := ch.GetEvent(context.Background()); !errors.Is(err, ErrShortRecord) || !errors.Is(err, sys.EINVAL) || !errors.Is(err, uverbs.ErrInvalid) {
			t.Fatalf("zero-length read: %v", err)
		}
		mustEvent(t, ch, 7, EQESize) // the next record is not lost
	})
	t.Run("truncated record", func(t *testing.T) {
		for _, omit := range []bool{false, true} {
			ch, w := seqChannel(t, omit)
			write(t, w, []byte{1, 2, 3, 4, 5})
			write(t, w, eventRec(8, !omit, 1, 2))
			_, err := ch.GetEvent(context.Background())
			if !errors.Is(err, ErrShortRecord) || err.Error() != "devx: short event record: 5 bytes, want at least 8" {
				t.Fatalf("omit=%v 5-byte record: %v", omit, err)
			}
			if omit {
				mustEvent(t, ch, 8, 0)
			} else {
				mustEvent(t, ch, 8, EQESize)
			}
		}
	})
	t.Run("data record cut short keeps its cookie", func(t *testing.T) {
		// libmlx5 returns any read of 8 bytes or more: the data may be
		// omitted.
		ch, w := seqChannel(t, false)
		write(t, w, eventRec(9, true, 3, 4)[:8+20])
		if ev := mustEvent(t, ch, 9, 20); ev.Type() != 3 || ev.SubType() != 4 {
			t.Errorf("short event %+v", ev)
		}
		write(t, w, eventRec(10, false, 0, 0))
		mustEvent(t, ch, 10, 0)
	})
	t.Run("oversized records", func(t *testing.T) {
		// A read longer than one record is several records, the last
		// one maybe short: all of them come out.
		ch, w := seqChannel(t, false)
		rec := append(eventRec(11, true, 1, 0), eventRec(12, true, 2, 0)[:30]...)
		write(t, w, rec)
		mustEvent(t, ch, 11, EQESize)
		mustEvent(t, ch, 12, 22)
		mustNoEvent(t, ch)

		och, ow := seqChannel(t, true)
		var b []byte
		for i := uint64(1); i <= 9; i++ {
			b = append(b, eventRec(i, false, 0, 0)...)
		}
		write(t, ow, append(b, 0xAA, 0xBB, 0xCC)) // 9 cookies and 3 bytes
		for i := uint64(1); i <= 9; i++ {
			mustEvent(t, och, i, 0)
		}
		if _, err := och.GetEvent(context.Background()); !errors.Is(err, ErrShortRecord) {
			t.Fatalf("3 trailing bytes: %v", err)
		}
		mustNoEvent(t, och)
	})
}

func TestEventChannelCloseAndContext(t *testing.T) {
	ch, _ := seqChannel(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := ch.GetEvent(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetEvent with an expiring context: %v", err)
	}
	errc := make(chan error, 2)
	for range 2 { // one parked in the read, one waiting for its turn
		go func() {
			_, err := ch.GetEvent(context.Background())
			errc <- err
		}()
	}
	testkit.MustBlock(t, "TestEventChannelCloseAndContext.") // the wait has begun, not about to
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errc; !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("GetEvent woken by Close: %v", err)
		}
	}
	if _, err := ch.TryGetEvent(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("TryGetEvent after Close: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	var nilCh *EventChannel
	if _, err := nilCh.GetEvent(context.Background()); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("nil channel: %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	if err := readErr("x", sys.EOVERFLOW, nil); !errors.Is(err, ErrOverflow) || !errors.Is(err, sys.EOVERFLOW) {
		t.Errorf("EOVERFLOW: %v", err)
	}
	var oe *uverbs.OpError
	if err := readErr("devx_event_channel", sys.EIO, nil); !errors.As(err, &oe) || !errors.Is(err, sys.EIO) {
		t.Errorf("EIO: %v", err)
	}
	if err := readErr("x", sys.ErrFileClosed, errChClosed); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
}

// seqCmdComp is a command completion fd over a SOCK_SEQPACKET pair.
func seqCmdComp(t *testing.T) (*CmdComp, *sys.FD) {
	t.Helper()
	r, w, err := sys.NewRecordReaderPipe("devx cmd comp")
	if err != nil {
		t.Fatal(err)
	}
	cc := &CmdComp{r: r}
	t.Cleanup(func() { cc.Close(); w.Close() })
	return cc, w
}

func TestCmdCompRecords(t *testing.T) {
	cc, w := seqCmdComp(t)
	buf := make([]byte, CmdHeaderSize+256)
	if _, err := cc.TryGet(buf); !errors.Is(err, ErrNoEvent) {
		t.Fatalf("TryGet on empty: %v", err)
	}
	// Completions of several sizes queued together: one per read.
	outs := [][]byte{make([]byte, 16), make([]byte, 256), {}, make([]byte, 100)}
	for i, o := range outs {
		for j := range o {
			o[j] = byte(i + j)
		}
		write(t, w, cmdRec(uint64(1000+i), o))
	}
	for i, o := range outs {
		r, err := cc.Get(context.Background(), buf)
		if err != nil || r.WrID != uint64(1000+i) || string(r.Out) != string(o) {
			t.Fatalf("completion %d: wr_id %d out %d bytes %v", i, r.WrID, len(r.Out), err)
		}
	}
	// Truncated and zero-length records: clear errors, the next one intact.
	write(t, w, []byte{1, 2, 3})
	write(t, w, nil)
	write(t, w, cmdRec(7, []byte{9}))
	for range 2 {
		if _, err := cc.Get(context.Background(), buf); !errors.Is(err, ErrShortRecord) || !errors.Is(err, sys.EINVAL) {
			t.Fatalf("short completion: %v", err)
		}
	}
	if r, err := cc.TryGet(buf); err != nil || r.WrID != 7 || len(r.Out) != 1 {
		t.Fatalf("completion after the bad ones: %+v %v", r, err)
	}
	// A buffer without room for the header is refused before reading.
	write(t, w, cmdRec(8, nil))
	if _, err := cc.Get(context.Background(), buf[:7]); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("7-byte buffer: %v", err)
	}
	if r, err := cc.Get(context.Background(), buf); err != nil || r.WrID != 8 {
		t.Fatalf("the record the short buffer left: %+v %v", r, err)
	}
	// Close wakes a blocked Get.
	errc := make(chan error)
	go func() { _, err := cc.Get(context.Background(), make([]byte, 64)); errc <- err }()
	testkit.MustBlock(t, "TestCmdCompRecords.") // the wait has begun, not about to
	cc.Close()
	if err := <-errc; !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Get woken by Close: %v", err)
	}
}

func TestDecodeCmdResp(t *testing.T) {
	r, err := DecodeCmdResp(cmdRec(0x0102030405060708, []byte{0xAA, 0xBB}))
	if err != nil || r.WrID != 0x0102030405060708 || len(r.Out) != 2 || r.Out[1] != 0xBB {
		t.Errorf("DecodeCmdResp = %+v %v", r, err)
	}
	for n := range CmdHeaderSize {
		if _, err := DecodeCmdResp(make([]byte, n)); !errors.Is(err, ErrShortRecord) {
			t.Errorf("%d bytes: %v", n, err)
		}
	}
}

// TestEventFDSignalled is the SubscribeFd path as far as it goes without
// a device: the eventfd NewEventFD makes is what SubscribeFd sends (its
// number in FD_NUM), and a signal on it (here the test's, on hardware the
// kernel's eventfd_signal) wakes Wait with the count.
func TestEventFDSignalled(t *testing.T) {
	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cmd := sys.NewIoctl()
	buildSubscribeFd(cmd, drvMlx5, gEventCh, 0, false, 0x16, e.Fd())
	if got := cmd.Image()[24+16*2+8:][:8]; binary.LittleEndian.Uint64(got) != uint64(e.Fd()) {
		t.Errorf("FD_NUM carries %x, eventfd is %d", got, e.Fd())
	}
	if _, err := e.TryWait(); !errors.Is(err, ErrNoEvent) {
		t.Fatalf("TryWait at 0: %v", err)
	}
	got := make(chan uint64)
	go func() {
		n, err := e.Wait(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	testkit.MustBlock(t, "TestEventFDSignalled.") // the wait has begun, not about to
	if err := e.Signal(1); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != 1 {
		t.Errorf("Wait after one signal = %d", n)
	}
	// Signals coalesce in the counter, as several events before a read.
	e.Signal(1)
	e.Signal(2)
	if n, err := e.Wait(context.Background()); n != 3 || err != nil {
		t.Errorf("Wait after 1+2 = %d %v", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with an expiring context: %v", err)
	}
	errc := make(chan error)
	go func() { _, err := e.Wait(context.Background()); errc <- err }()
	testkit.MustBlock(t, "TestEventFDSignalled.") // the wait has begun, not about to
	e.Close()
	if err := <-errc; !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Wait woken by Close: %v", err)
	}
	if err := e.Signal(1); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Signal after Close: %v", err)
	}
}

// TestNoAllocs: decoding allocates nothing, nor does a read of a record
// through a real fd, parked or not.
func TestNoAllocs(t *testing.T) {
	rec := eventRec(5, true, 1, 2)
	cmdr := cmdRec(6, make([]byte, 32))
	testkit.NoAllocs(t, 1000, func() {
		if ev, _, err := DecodeEvent(rec, false); err != nil || ev.Cookie != 5 {
			t.Fatal("DecodeEvent")
		}
		if _, _, err := DecodeEvent(rec[:8], true); err != nil {
			t.Fatal("DecodeEvent omit")
		}
		if r, err := DecodeCmdResp(cmdr); err != nil || r.WrID != 6 {
			t.Fatal("DecodeCmdResp")
		}
	})
	ctx := context.Background()
	for _, omit := range []bool{false, true} {
		ch, w := seqChannel(t, omit)
		r := rec
		if omit {
			r = rec[:8]
		}
		testkit.NoAllocs(t, 500, func() {
			sys.Write(w, r)
			if ev, err := ch.GetEvent(ctx); err != nil || ev.Cookie != 5 {
				t.Fatalf("GetEvent: %v", err)
			}
		})
	}
	cc, cw := seqCmdComp(t)
	buf := make([]byte, 64)
	testkit.NoAllocs(t, 500, func() {
		sys.Write(cw, cmdr)
		if r, err := cc.Get(ctx, buf); err != nil || r.WrID != 6 {
			t.Fatalf("Get: %v", err)
		}
	})
	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	testkit.NoAllocs(t, 500, func() {
		e.Signal(1)
		if n, err := e.Wait(ctx); err != nil || n != 1 {
			t.Fatalf("Wait: %d %v", n, err)
		}
	})
	// A parked GetEvent woken by a later record, with a cancellable
	// context used again and again.
	pctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, w := seqChannel(t, true)
	go func() {
		for range 600 {
			time.Sleep(50 * time.Microsecond)
			sys.Write(w, rec[:8])
		}
	}()
	testkit.NoAllocs(t, 500, func() {
		if _, err := ch.GetEvent(pctx); err != nil {
			t.Fatalf("parked GetEvent: %v", err)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(eventRec(1, true, 2, 3), false)
	f.Add(eventRec(1, false, 0, 0), true)
	f.Add([]byte{}, false)
	f.Add([]byte{1, 2, 3}, true)
	f.Add(append(eventRec(1, true, 2, 3), eventRec(4, true, 5, 6)[:20]...), false)
	f.Fuzz(func(t *testing.T, b []byte, omit bool) {
		// Decoding a whole buffer record by record terminates, consumes
		// every byte exactly once and keeps each cookie.
		off := 0
		for off < len(b) {
			ev, n, err := DecodeEvent(b[off:], omit)
			if n <= 0 || n > len(b)-off {
				t.Fatalf("consumed %d of %d", n, len(b)-off)
			}
			rest := b[off:]
			if err != nil {
				if len(rest) >= EventHeaderSize || !errors.Is(err, ErrShortRecord) || n != len(rest) {
					t.Fatalf("error %v on %d bytes, consumed %d", err, len(rest), n)
				}
			} else {
				if ev.Cookie != binary.LittleEndian.Uint64(rest) {
					t.Fatal("cookie")
				}
				want := 0
				if !omit {
					want = min(EQESize, len(rest)-EventHeaderSize)
				}
				if ev.Len != want || n != EventHeaderSize+want || string(ev.Data()) != string(rest[8:8+want]) {
					t.Fatalf("len %d consumed %d, want %d", ev.Len, n, want)
				}
			}
			off += n
		}
	})
}

func FuzzDecodeCmdResp(f *testing.F) {
	f.Add(cmdRec(1, make([]byte, 16)))
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeCmdResp(b)
		if len(b) < CmdHeaderSize {
			if !errors.Is(err, ErrShortRecord) {
				t.Fatalf("%d bytes: %v", len(b), err)
			}
			return
		}
		if err != nil || r.WrID != binary.LittleEndian.Uint64(b) || len(r.Out) != len(b)-CmdHeaderSize {
			t.Fatalf("%+v %v", r, err)
		}
	})
}

// FuzzEventChannel feeds arbitrary bytes through a real socket to a
// channel: every GetEvent returns an event or a clear error, never
// panics, and the channel ends empty.
func FuzzEventChannel(f *testing.F) {
	f.Add(eventRec(1, true, 2, 3), false, uint8(72))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, true, uint8(3))
	f.Add([]byte{}, true, uint8(0))
	f.Add(bytes.Repeat([]byte{7}, 600), true, uint8(0))   // one read's worth and more of cookies
	f.Add(bytes.Repeat([]byte{9}, 1300), false, uint8(0)) // past a data read's buffer
	f.Fuzz(func(t *testing.T, b []byte, omit bool, split uint8) {
		if len(b) > 4096 {
			return
		}
		r, w, err := sys.NewRecordReaderPipe("fuzz")
		if err != nil {
			t.Fatal(err)
		}
		ch := newEventChannel(nil, r, omit)
		defer ch.Close()
		defer w.Close()
		// Send b as records of split bytes (0: one record), at most 64 of
		// them so the socket buffer holds them all before the reads.
		if split > 0 && len(b)/int(split) >= 64 {
			split = uint8(min(255, len(b)/64+1))
		}
		// What each record must give, worked out from the record format
		// alone: a read takes one record, cut at the read's buffer
		// (whole records of the kernel's fit it); in it, each event is
		// an 8-byte cookie and, with data, up to 64 EQE bytes; bytes
		// after the last whole cookie are a short record.
		type want struct {
			cookie uint64
			data   []byte
			short  bool
		}
		var wants []want
		readSize := dataReadSize
		if omit {
			readSize = omitReadSize
		}
		for rest := b; ; {
			n := len(rest)
			if split > 0 && int(split) < n {
				n = int(split)
			}
			if _, err := sys.Write(w, rest[:n]); err != nil {
				t.Fatal(err)
			}
			rec := rest[:min(n, readSize)]
			if len(rec) == 0 {
				// A read of 0 bytes: short (the kernel writes none).
				wants = append(wants, want{short: true})
			}
			for len(rec) > 0 {
				if len(rec) < EventHeaderSize {
					wants = append(wants, want{short: true})
					break
				}
				e := want{cookie: binary.LittleEndian.Uint64(rec)}
				rec = rec[EventHeaderSize:]
				if !omit {
					k := min(len(rec), EQESize)
					e.data, rec = rec[:k], rec[k:]
				}
				wants = append(wants, e)
			}
			rest = rest[n:]
			if len(rest) == 0 {
				break
			}
		}
		for i, wt := range wants {
			ev, err := ch.TryGetEvent()
			switch {
			case wt.short:
				if !errors.Is(err, ErrShortRecord) {
					t.Fatalf("result %d: %+v, %v; want ErrShortRecord", i, ev, err)
				}
			case err != nil:
				t.Fatalf("result %d: %v; want the event with cookie %#x", i, err, wt.cookie)
			case ev.Cookie != wt.cookie || ev.Len != len(wt.data) || !bytes.Equal(ev.EQE[:ev.Len], wt.data):
				t.Fatalf("result %d: cookie %#x, %d bytes; want %#x, % x", i, ev.Cookie, ev.Len, wt.cookie, wt.data)
			}
		}
		if ev, err := ch.TryGetEvent(); !errors.Is(err, ErrNoEvent) {
			t.Fatalf("after the %d results: %+v, %v; want the channel empty (ErrNoEvent)", len(wants), ev, err)
		}
	})
}

// TestEventChannelConcurrentReaders: with several goroutines in GetEvent,
// each record reaches exactly one of them, none is lost, in both modes and
// with several records per read.
func TestEventChannelConcurrentReaders(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, omit := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream=%v/omit=%v", stream, omit), func(t *testing.T) {
				var ch *EventChannel
				var w *sys.FD
				if stream {
					ch, w = streamChannel(t, omit)
				} else {
					ch, w = seqChannel(t, omit)
				}
				const readers, per = 4, 100
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				got := make(chan uint64, readers*per)
				errc := make(chan error, readers)
				for range readers {
					go func() {
						for range per {
							ev, err := ch.GetEvent(ctx)
							if err != nil {
								errc <- err
								return
							}
							got <- ev.Cookie
						}
						errc <- nil
					}()
				}
				var batch []byte
				for i := uint64(1); i <= readers*per; i++ {
					rec := eventRec(i, !omit, 1, 0)
					if !stream {
						write(t, w, rec)
						continue
					}
					batch = append(batch, rec...)
					if i%7 == 0 || i == readers*per {
						write(t, w, batch)
						batch = nil
					}
				}
				for range readers {
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
				}
				seen := map[uint64]bool{}
				for range readers * per {
					c := <-got
					if seen[c] {
						t.Fatalf("cookie %d delivered twice", c)
					}
					seen[c] = true
				}
				if len(seen) != readers*per {
					t.Fatalf("%d distinct events, want %d", len(seen), readers*per)
				}
				mustNoEvent(t, ch)
			})
		}
	}
}
