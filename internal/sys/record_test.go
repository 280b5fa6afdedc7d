package sys

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"golang.org/x/sys/unix"
)

func TestRecordReaderBasics(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	buf := make([]byte, 8)
	if _, err := r.TryRead(buf); err != unix.EAGAIN {
		t.Fatalf("TryRead on empty = %v", err)
	}
	if ok, _ := IsNonblock(r.Fd()); !ok {
		t.Fatal("fd is blocking")
	}
	Write(w, []byte("abcdefgh"))
	if n, err := r.TryRead(buf); n != 8 || err != nil || string(buf) != "abcdefgh" {
		t.Fatalf("TryRead = %d %v %q", n, err, buf)
	}
	// A parked Read wakes for a record written later.
	got := make(chan string)
	go func() {
		b := make([]byte, 8)
		n, err := r.Read(context.Background(), b)
		if err != nil {
			t.Error(err)
		}
		got <- string(b[:n])
	}()
	testkit.MustBlock(t, "TestRecordReaderBasics.") // the wait has begun, not about to
	Write(w, []byte("12345678"))
	if s := <-got; s != "12345678" {
		t.Fatalf("Read = %q", s)
	}
}

func TestRecordReaderContext(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	buf := make([]byte, 8)
	// A cancelled Read returns the context's error, and a later Read with
	// another context still works (the deadline was reset).
	for i := 0; i < 3; i++ {
		start := time.Now() // before the deadline is set, so el >= 20 ms
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		if _, err := r.Read(ctx, buf); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Read with an ending context = %v", err)
		}
		if el := time.Since(start); el < 20*time.Millisecond {
			t.Fatalf("returned after %v", el)
		}
		cancel()
	}
	Write(w, []byte("x"))
	if n, err := r.Read(context.Background(), buf); n != 1 || err != nil {
		t.Fatalf("Read after cancelled reads = %d %v", n, err)
	}
	// Cancel (not deadline) while parked.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := r.Read(ctx, buf); done <- err }()
	testkit.MustBlock(t, "TestRecordReaderContext.") // the wait has begun, not about to
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Read = %v", err)
	}
}

func TestRecordReaderCloseWakes(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error)
	go func() { _, err := r.Read(context.Background(), make([]byte, 8)); done <- err }()
	testkit.MustBlock(t, "TestRecordReaderCloseWakes.") // the wait has begun, not about to
	r.Close()
	if err := <-done; !errors.Is(err, ErrFileClosed) {
		t.Fatalf("Read across Close = %v", err)
	}
	if _, err := r.Read(context.Background(), make([]byte, 8)); !errors.Is(err, ErrFileClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	if _, err := r.TryRead(make([]byte, 8)); !errors.Is(err, ErrFileClosed) {
		t.Fatalf("TryRead after Close = %v", err)
	}
	r.Close()
}

// TestRecordReaderEveryRecordOnce: concurrent readers and a writer; each
// record is read exactly once and nobody sleeps through a ready record
// (the run would hang, bounded by its context).
func TestRecordReaderEveryRecordOnce(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	const n = 20000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := make([]int, n)
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 8)
			for {
				k, err := r.Read(ctx, b)
				if err != nil {
					return
				}
				v := binary.LittleEndian.Uint64(b[:k])
				mu.Lock()
				seen[v]++
				done := v == n-1
				mu.Unlock()
				if done {
					cancel()
				}
			}
		}()
	}
	var rec [8]byte
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(rec[:], uint64(i))
		if _, err := Write(w, rec[:]); err != nil {
			t.Fatal(err)
		}
		if i%64 == 0 {
			time.Sleep(time.Microsecond) // let readers park between bursts
		}
	}
	wg.Wait()
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatal("readers slept through records")
	}
	for i, k := range seen {
		if k != 1 && i != n-1 || i == n-1 && k != 1 {
			t.Fatalf("record %d read %d times", i, k)
		}
	}
}

// TestRecordReaderNoAllocs: reading a queued record with a context that
// stays the same across calls (a loop's), and TryRead, allocate nothing.
func TestRecordReaderNoAllocs(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := []byte("01234567")
	buf := make([]byte, 8)
	testkit.NoAllocs(t, 2000, func() {
		Write(w, rec)
		if n, err := r.Read(ctx, buf); n != 8 || err != nil {
			t.Fatal(n, err)
		}
		Write(w, rec)
		if n, err := r.TryRead(buf); n != 8 || err != nil {
			t.Fatal(n, err)
		}
	})
}

// BenchmarkEventPath compares the two event readers on a record that a
// writer goroutine sends only after the reader parked: the ping-pong case
// of completion events.
func BenchmarkEventPath(b *testing.B) {
	b.Run("RecordReader", func(b *testing.B) {
		r, w, err := NewRecordReaderPipe("bench")
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		defer r.Close()
		benchPingPong(b, w, func(ctx context.Context, buf []byte) (int, error) { return r.Read(ctx, buf) })
	})
	b.Run("RecordReaderThread", func(b *testing.B) {
		r, w, err := NewRecordReaderPipe("bench")
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		defer r.Close()
		benchPingPong(b, w, r.ReadThread)
	})
	b.Run("EventFile", func(b *testing.B) {
		ef, w, err := NewRecordPipe("bench")
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		defer ef.Close()
		benchPingPong(b, w, ef.Read)
	})
}

func benchPingPong(b *testing.B, w *FD, read func(context.Context, []byte) (int, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kick := make(chan struct{})
	go func() {
		rec := []byte("01234567")
		for range kick {
			Write(w, rec)
		}
	}()
	defer close(kick)
	buf := make([]byte, 8)
	b.ReportAllocs()
	for b.Loop() {
		kick <- struct{}{}
		if _, err := read(ctx, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRecordReaderThread: ReadThread wakes for a later record, ends with
// its context (deadline and cancel), is woken by Close, and a wake-up left
// by an earlier context does not end a later wait.
func TestRecordReaderThread(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rt")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	buf := make([]byte, 8)
	got := make(chan string)
	go func() {
		n, err := r.ReadThread(context.Background(), buf)
		if err != nil {
			t.Error(err)
		}
		got <- string(buf[:n])
	}()
	testkit.MustBlock(t, "TestRecordReaderThread.") // the wait has begun, not about to
	Write(w, []byte("thread!!"))
	if s := <-got; s != "thread!!" {
		t.Fatalf("ReadThread = %q", s)
	}
	start := time.Now() // before the deadline is set
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	if _, err := r.ReadThread(ctx, buf); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("deadline: %v after %v", err, time.Since(start))
	}
	cancel()
	// The cancelled context's AfterFunc may have left a wake-up: a new
	// wait must not end because of it.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := r.ReadThread(ctx2, buf); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("ReadThread ended without a record or cancel: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	Write(w, []byte("again..."))
	if n, err := r.ReadThread(context.Background(), buf); n != 8 || err != nil {
		t.Fatalf("after cancel: %d %v", n, err)
	}
	go func() { _, err := r.ReadThread(context.Background(), buf); done <- err }()
	testkit.MustBlock(t, "TestRecordReaderThread.") // the wait has begun, not about to
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrFileClosed) {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadThread not woken by Close")
	}
}

func TestRecordReaderThreadNoAllocs(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rt")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := []byte("01234567")
	buf := make([]byte, 8)
	testkit.NoAllocs(t, 2000, func() {
		Write(w, rec)
		if n, err := r.ReadThread(ctx, buf); n != 8 || err != nil {
			t.Fatal(n, err)
		}
	})
}

// TestRecordReaderThreadAfterEndedRead: a ReadThread after a poller Read
// whose context ended is not failed by the deadline that context left.
func TestRecordReaderThreadAfterEndedRead(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rt")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	buf := make([]byte, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	if _, err := r.Read(ctx, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	cancel()
	Write(w, []byte("x"))
	if n, err := r.ReadThread(context.Background(), buf); n != 1 || err != nil {
		t.Fatalf("ReadThread after an ended Read = %d, %v", n, err)
	}
}

// TestRecordReaderHint: Read asks the hint once, after the poller forgot
// past readiness and before its first read. A "maybe" reads as before; a
// "none" parks without reading, and a record queued from then on wakes it.
// A wrong "none" (a record already queued) is slept through, which shows
// the read was left out; ReadThread's ppoll sees such a record.
func TestRecordReaderHint(t *testing.T) {
	r, w, err := NewRecordReaderPipe("hint")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	var calls int
	var may bool
	var inHint func()
	r.SetHint(func() bool {
		calls++
		if inHint != nil {
			inHint()
		}
		return may
	})
	buf := make([]byte, 8)
	read := func(step string, want string) {
		t.Helper()
		calls = 0
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := r.Read(ctx, buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("%s: Read = %q, %v; want %q", step, buf[:n], err, want)
		}
		if calls != 1 {
			t.Fatalf("%s: hint asked %d times, want once", step, calls)
		}
	}

	may = true
	Write(w, []byte("queued.."))
	read("maybe, queued", "queued..")

	// "None", and the record comes after the hint looked: it wakes the
	// parked read.
	may = false
	inHint = func() { Write(w, []byte("after...")) }
	read("none, then a record", "after...")
	inHint = nil

	// "None" while a record is queued and its edge already taken by the
	// netpoller (an idle moment runs it: the sleep): the read is not
	// made, so the record is slept through until the context ends. (Were
	// the edge still in epoll's ready list, it would wake the read: try a
	// few times.)
	slept := false
	for try := 0; try < 5 && !slept; try++ {
		Write(w, []byte("unseen.."))
		time.Sleep(20 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		n, err := r.Read(ctx, buf)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			slept = true
			if n, err := r.TryRead(buf); n != 8 || err != nil || string(buf) != "unseen.." {
				t.Fatalf("TryRead after a wrong none = %d %v %q", n, err, buf)
			}
		case err != nil || string(buf[:n]) != "unseen..":
			t.Fatalf("a wrong none: Read = %q %v", buf[:n], err)
		}
	}
	if !slept {
		t.Fatal("a wrong none never slept through a queued record: the read was made")
	}

	// ReadThread asks too, and its ppoll reports the queued record.
	Write(w, []byte("thread.."))
	calls = 0
	if n, err := r.ReadThread(context.Background(), buf); n != 8 || err != nil || string(buf) != "thread.." || calls != 1 {
		t.Fatalf("ReadThread with none = %d %v %q, hint asked %d times", n, err, buf, calls)
	}

	may = true
	testkit.NoAllocs(t, 200, func() {
		Write(w, []byte("12345678"))
		if _, err := r.Read(context.Background(), buf); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRecordReaderKick: a record queued with no wake-up of the file's
// waiters (as rdma_cm's MIGRATE_ID queues the events it moves) is slept
// through by a parked Read until Kick makes it look again, in poller and
// thread mode; a Kick with no reader waiting leaves TryRead and the next
// Read as they were.
func TestRecordReaderKick(t *testing.T) {
	r, w, err := NewRecordReaderPipe("kick")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	// The records come from queue, not the pipe, which never becomes
	// readable: nothing wakes the poller for them.
	var (
		mu     sync.Mutex
		queue  []string
		missed = make(chan struct{}, 16) // one per read that found nothing
	)
	r.SetOp(func(fd int, buf []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(queue) == 0 {
			missed <- struct{}{}
			return 0, unix.EAGAIN
		}
		n := copy(buf, queue[0])
		queue = queue[1:]
		return n, nil
	})
	push := func(s string) {
		mu.Lock()
		queue = append(queue, s)
		mu.Unlock()
	}
	drain := func() {
		for {
			select {
			case <-missed:
			default:
				return
			}
		}
	}
	type result struct {
		s   string
		err error
	}
	for _, mode := range []string{"poller", "thread"} {
		drain()
		// Without a Kick the record is slept through: the read ends with
		// its context, and the record is still queued.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		done := make(chan result, 1)
		read := func(ctx context.Context) {
			b := make([]byte, 8)
			var n int
			var err error
			if mode == "thread" {
				n, err = r.ReadThread(ctx, b)
			} else {
				n, err = r.Read(ctx, b)
			}
			done <- result{string(b[:n]), err}
		}
		go read(ctx)
		<-missed // the reader looked and found nothing
		push("unseen..")
		if res := <-done; !errors.Is(res.err, context.DeadlineExceeded) {
			t.Fatalf("%s: a record queued without a wake-up: Read = %q, %v; want it slept through", mode, res.s, res.err)
		}
		cancel()
		buf := make([]byte, 8)
		if n, err := r.TryRead(buf); err != nil || string(buf[:n]) != "unseen.." {
			t.Fatalf("%s: TryRead = %q, %v", mode, buf[:n], err)
		}
		drain()

		// With a Kick the parked reader reads it.
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		go read(ctx)
		<-missed
		push("kicked..")
		r.Kick()
		if res := <-done; res.err != nil || res.s != "kicked.." {
			t.Fatalf("%s: after Kick: Read = %q, %v", mode, res.s, res.err)
		}
		cancel()
		drain()

		// A Kick with nobody waiting: TryRead sees an empty queue, not a
		// deadline, and a Read waits as before.
		r.Kick()
		if _, err := r.TryRead(buf); err != unix.EAGAIN {
			t.Fatalf("%s: TryRead after an idle Kick = %v, want EAGAIN", mode, err)
		}
		r.Kick()
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		go read(ctx)
		<-missed
		push("later...")
		r.Kick()
		if res := <-done; res.err != nil || res.s != "later..." {
			t.Fatalf("%s: Read after an idle Kick = %q, %v", mode, res.s, res.err)
		}
		cancel()
	}
	// A Kick does not outlive a context's end: a Read whose context has
	// ended returns that.
	r.Kick()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Read(ctx, make([]byte, 8)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with an ended context after a Kick = %v", err)
	}
}
