package sys

import (
	"testing"
	"unsafe"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestScratch: Scratch hands out a zeroed value inside the command,
// reused by the next call, and refuses types larger than the scratch.
func TestScratch(t *testing.T) {
	c := NewIoctl()
	type resp struct {
		A uint64
		B [40]byte
	}
	r := Scratch[resp](c)
	if r.A != 0 || r.B != [40]byte{} {
		t.Fatalf("not zeroed: %+v", r)
	}
	r.A, r.B[39] = 7, 1
	r2 := Scratch[resp](c)
	if r2 != r || r2.A != 0 || r2.B[39] != 0 {
		t.Fatalf("second Scratch = %p %+v, want the same zeroed value at %p", r2, r2, r)
	}
	if uintptr(unsafePointer(r))%8 != 0 {
		t.Fatal("scratch not 8-byte aligned")
	}
	testkit.NoAllocs(t, 100, func() { Scratch[resp](c).A++ })
	defer func() {
		if recover() == nil {
			t.Error("a 257-byte type did not panic")
		}
	}()
	Scratch[[257]byte](c)
}

func unsafePointer[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }
