package uverbs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMAH: UD address handles over RoCE v2 on rxe0, as librxe creates
// them on kernels that return ah_num: to the port's own IPv4-mapped GID
// (1) and link-local GID (0), with traffic class, hop limit and flow
// label; what the kernel refuses; EBUSY of the PD; destroy.
func TestVMAH(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	var ahs []*uverbs.AH
	nums := map[uint32]bool{}
	for _, idx := range []int{1, 0} {
		g, err := c.QueryGID(1, idx)
		if err != nil {
			t.Fatalf("QueryGID(1, %d): %v", idx, err)
		}
		for _, v := range []struct {
			tc, hop uint8
			fl      uint32
		}{{0, 64, 0}, {0x68, 1, 0xabcde}, {0xb8, 255, 1}} {
			attr := uverbs.AHAttr{DGID: g.GID, SGIDIndex: uint8(idx), IsGlobal: true, PortNum: 1,
				TrafficClass: v.tc, HopLimit: v.hop, FlowLabel: v.fl}
			ah, err := pd.CreateAH(attr)
			if err != nil {
				t.Fatalf("CreateAH(GID %d %v, %+v): %v", idx, g.GID, v, err)
			}
			n := ah.AHNumForTest()
			t.Logf("AH to GID %d %v tc %#x hop %d flow %#x: handle %d ah_num %d", idx, g.GID, v.tc, v.hop, v.fl, ah.Handle(), n)
			if n == 0 || nums[n] {
				t.Errorf("ah_num %d (zero or already used)", n)
			}
			nums[n] = true
			if ah.Attr() != attr || ah.PD() != pd || ah.Context() != c {
				t.Errorf("Attr() = %+v, want %+v", ah.Attr(), attr)
			}
			ahs = append(ahs, ah)
		}
	}

	g1, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	good := uverbs.AHAttr{DGID: g1.GID, SGIDIndex: 1, IsGlobal: true, PortNum: 1, HopLimit: 64}
	for name, f := range map[string]func(a *uverbs.AHAttr){
		"not global (no GRH on RoCE)": func(a *uverbs.AHAttr) { a.IsGlobal = false },
		"port 2":                      func(a *uverbs.AHAttr) { a.PortNum = 2 },
		"port 0":                      func(a *uverbs.AHAttr) { a.PortNum = 0 },
	} {
		a := good
		f(&a)
		if ah, err := pd.CreateAH(a); !errors.Is(err, sys.EINVAL) {
			t.Errorf("CreateAH %s = %v, want EINVAL", name, err)
			if ah != nil {
				ah.Destroy()
			}
		}
	}
	// An empty GID table entry: the kernel's GID cache answers ENODATA.
	a := good
	a.SGIDIndex = 200
	if ah, err := pd.CreateAH(a); !errors.Is(err, sys.ENODATA) {
		t.Errorf("CreateAH with unused GID index 200 = %v, want ENODATA", err)
		if ah != nil {
			ah.Destroy()
		}
	}
	bad := good
	bad.FlowLabel = 1 << 20
	if _, err := pd.CreateAH(bad); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("CreateAH with a 21-bit flow label = %v, want ErrInvalid", err)
	}

	err = pd.Dealloc()
	if !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "6 AHs") {
		t.Errorf("Dealloc of a PD with AHs = %v, want EBUSY naming 6 AHs", err)
	}
	for _, ah := range ahs {
		if err := ah.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
		if err := ah.Destroy(); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("second Destroy = %v, want ErrClosed", err)
		}
	}
	// A freed number is handed out again: the data path must hold an AH
	// while a WQE names it.
	ah, err := pd.CreateAH(good)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after destroying all: new ah_num %d", ah.AHNumForTest())
	if err := ah.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateAH(good); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("CreateAH on a deallocated PD = %v, want ErrClosed", err)
	}
	waitCounts(t, base)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t)
}

// TestVMAHClose: closing the Context releases live AHs; Destroy then
// reports ErrClosed.
func TestVMAHClose(t *testing.T) {
	testkit.RequireVM(t)
	base := testkit.Resources(t, testkit.RxeDev)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := pd.CreateAH(uverbs.AHAttr{DGID: g.GID, SGIDIndex: 1, IsGlobal: true, PortNum: 1, HopLimit: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, base)
	if err := ah.Destroy(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Destroy after Close = %v, want ErrClosed", err)
	}
	noLeaks(t)
}
