package uverbs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestHoldAllOneOrder: two creates holding the same two objects named in
// opposite orders (CreateQP with SendCQ and RecvCQ swapped), each object
// with a destroy waiting to take it. A waiting writer blocks new shared
// holds, so holding in argument order let the four wait for each other
// for ever (seen within a few hundred rounds); holdAll now holds in one
// order for the process.
func TestHoldAllOneOrder(t *testing.T) {
	var x, y life
	const rounds = 3000
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				f()
			}
		}()
	}
	run(func() { // CreateQP(SendCQ: x, RecvCQ: y)
		if holdAll(&x, &y) {
			dropAll(&x, &y)
		}
	})
	run(func() { // CreateQP(SendCQ: y, RecvCQ: x)
		if holdAll(&y, nil, &x, &y) {
			dropAll(&y, nil, &x, &y)
		}
	})
	destroy := func(l *life) { // a Destroy the kernel refuses (EBUSY): exclusive, then nothing
		l.rw.Lock()
		dead := l.dead
		l.rw.Unlock()
		_ = dead
	}
	run(func() { destroy(&x) })
	run(func() { destroy(&y) })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("deadlock: the creates and destroys wait for each other")
	}
	// A dead object fails the hold and releases what was taken.
	x.dead = true
	if holdAll(&y, &x) {
		t.Fatal("held a dead object")
	}
	if !y.rw.TryLock() {
		t.Fatal("a failed holdAll kept a hold")
	}
	y.rw.Unlock()
}

// TestModifyStateOrder: the state PostSend and PostRecv check is the one
// the kernel applied last, whatever the order two concurrent Modifys
// return in. A FIFO plays the command fd: it takes each MODIFY_QP write
// whole, in the order the "kernel" received them. (Stored after the
// command without a lock, the cache disagreed in a few of every 2000 rounds.)
// A Modify with a flow label of more than 20 bits is refused, as CreateAH
// refuses it, before anything is sent.
func TestModifyStateOrder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "verbs")
	if err := testkit.Mkfifo(p); err != nil {
		t.Skip(err)
	}
	fd, err := sys.Open(p, sys.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := os.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	c := &Context{dev: Device{Name: "fake0"}, cmd: fd, driverID: abi.RDMA_DRIVER_RXE}
	defer c.Close()
	qp := &QP{ctx: c, typ: QPTypeRC}
	rec := make([]byte, 8+len(sys.AsBytes(new(abi.IbUverbsModifyQp))))
	bad := 0
	const rounds = 5000
	for range rounds {
		var start, done sync.WaitGroup
		start.Add(1)
		for _, st := range []QPState{QPStateRTS, QPStateErr} {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				if err := qp.Modify(&QPAttr{State: st}, QPAttrState); err != nil {
					t.Error(err)
				}
			}()
		}
		start.Done()
		done.Wait()
		var last abi.IbUverbsModifyQp
		for range 2 {
			if _, err := io.ReadFull(rd, rec); err != nil {
				t.Fatal(err)
			}
			copy(sys.AsBytes(&last), rec[8:])
		}
		if QPState(qp.state.Load()) != QPState(last.QpState) {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d rounds: the cached state is not the one the kernel applied last", bad, rounds)
	}
	for _, m := range []QPAttrMask{QPAttrAV, QPAttrAltPath} {
		err := qp.Modify(&QPAttr{AH: AHAttr{FlowLabel: 1<<20 | 5}, AltAH: AHAttr{FlowLabel: 1 << 20}}, m)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("mask %#x with a 21-bit flow label: %v", uint32(m), err)
		}
	}
}
