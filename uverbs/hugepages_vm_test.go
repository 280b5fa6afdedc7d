package uverbs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMHugeBuffer: a buffer of huge pages (perftest's --use_hugepages)
// takes whole pages from the reserved pool, starts on a huge page, is
// registered with rxe like any memory, and gives its pages back on
// Close; with none reserved the allocation fails with ENOMEM and says
// how to reserve them.
func TestVMHugeBuffer(t *testing.T) {
	c := openRxe(t)
	hp := sys.HugePageSize()
	if hp == 0 {
		t.Fatal("the guest kernel has no huge pages")
	}
	testkit.SetHugePages(t, 0)
	if _, err := uverbs.AllocHugeBuffer(hp); !errors.Is(err, sys.ENOMEM) || !strings.Contains(err.Error(), "vm.nr_hugepages") {
		t.Errorf("AllocHugeBuffer with none reserved = %v, want ENOMEM and the hint", err)
	}
	testkit.SetHugePages(t, 4)
	free := testkit.FreeHugePages(t)
	if free != 4 {
		t.Fatalf("HugePages_Free %d after reserving 4", free)
	}
	buf, err := uverbs.AllocHugeBuffer(hp + 1) // two huge pages
	if err != nil {
		t.Fatal(err)
	}
	mem := buf.Bytes()
	if len(mem) != hp+1 || sys.SliceAddr(mem)%uint64(hp) != 0 {
		t.Errorf("%d bytes at %#x, want %d on a %d-byte page", len(mem), sys.SliceAddr(mem), hp+1, hp)
	}
	mem[0], mem[hp] = 1, 2 // touch both pages
	if got := testkit.FreeHugePages(t); got != free-2 {
		t.Errorf("HugePages_Free %d with the buffer touched, want %d", got, free-2)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(mem, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatalf("RegMR on huge pages: %v", err)
	}
	if mr.Addr() != sys.SliceAddr(mem) || mr.Len() != hp+1 {
		t.Errorf("MR at %#x, %d bytes", mr.Addr(), mr.Len())
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if err := buf.Close(); err != nil {
		t.Fatal(err)
	}
	if got := testkit.FreeHugePages(t); got != free {
		t.Errorf("HugePages_Free %d after Close, want %d", got, free)
	}
}
