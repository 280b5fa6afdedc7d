package uverbs_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

func openVM(t *testing.T, name string) *uverbs.Context {
	t.Helper()
	testkit.RequireVM(t)
	c, err := uverbs.OpenByName(name)
	if err != nil {
		t.Fatalf("OpenByName(%s): %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readSysfs(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"/sys/class/infiniband"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestVMOpenQueryDevice(t *testing.T) {
	for _, name := range []string{testkit.RxeDev, testkit.LoopDev} {
		t.Run(name, func(t *testing.T) {
			c := openVM(t, name)
			if c.NumCompVectors() < 1 {
				t.Errorf("NumCompVectors = %d", c.NumCompVectors())
			}
			if c.DriverID() != 14 {
				t.Errorf("DriverID = %d, want RDMA_DRIVER_RXE (14)", c.DriverID())
			}
			cmdFd, asyncFd := c.FdsForTest()
			for _, fd := range []int{cmdFd, asyncFd} {
				if ok, err := sys.IsCloexec(fd); err != nil || !ok {
					t.Errorf("fd %d not O_CLOEXEC (%v)", fd, err)
				}
			}
			a, err := c.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			guid := readSysfs(t, name, "node_guid")
			if got := fmt.Sprintf("%04x:%04x:%04x:%04x", a.NodeGUID>>48, a.NodeGUID>>32&0xffff, a.NodeGUID>>16&0xffff, a.NodeGUID&0xffff); got != guid {
				t.Errorf("node_guid %s, sysfs %s", got, guid)
			}
			if a.PhysPortCnt != 1 || a.MaxCQE < 1 || a.MaxQP < 1 || a.MaxQPWR < 1 || a.MaxSGE < 1 {
				t.Errorf("implausible attributes: %+v", a)
			}
			if a.CompMask != 0 && a.MaxCQE != 32767 {
				t.Logf("max_cqe %d", a.MaxCQE)
			}
			t.Logf("%s: fw %s max_qp %d max_qp_wr %d max_cqe %d max_sge %d caps %#x", name, a.FWVer, a.MaxQP, a.MaxQPWR, a.MaxCQE, a.MaxSGE, a.DeviceCapFlags)
		})
	}
}

func TestVMQueryPortAndGIDs(t *testing.T) {
	for _, name := range []string{testkit.RxeDev, testkit.LoopDev} {
		t.Run(name, func(t *testing.T) {
			c := openVM(t, name)
			pa, err := c.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			if pa.State != uverbs.PortActive || pa.LinkLayer != uverbs.LinkLayerEthernet || pa.GIDTblLen < 2 {
				t.Errorf("port 1: %+v", pa)
			}
			if st := readSysfs(t, name, "ports", "1", "state"); !strings.Contains(st, pa.State.String()[5:]) {
				t.Errorf("state %v, sysfs %q", pa.State, st)
			}
			if _, err := c.QueryPort(2); !errors.Is(err, sys.EINVAL) {
				t.Errorf("QueryPort(2) = %v, want EINVAL", err)
			}
			table, err := c.QueryGIDTable()
			if err != nil {
				t.Fatal(err)
			}
			if len(table) < 2 {
				t.Fatalf("GID table %v", table)
			}
			for _, e := range table {
				sysGID := readSysfs(t, name, "ports", "1", "gids", fmt.Sprint(e.Index))
				if e.GID.String() != sysGID {
					t.Errorf("gid %d: %s, sysfs %s", e.Index, e.GID, sysGID)
				}
				if typ := readSysfs(t, name, "ports", "1", "gid_attrs", "types", fmt.Sprint(e.Index)); typ != e.Type.String() {
					t.Errorf("gid %d type %v, sysfs %q", e.Index, e.Type, typ)
				}
				one, err := c.QueryGID(1, e.Index)
				if err != nil || one != e {
					t.Errorf("QueryGID(1,%d) = %+v, %v; table has %+v", e.Index, one, err, e)
				}
				if e.Ifindex != 0 {
					ifi, err := net.InterfaceByIndex(e.Ifindex)
					if err != nil {
						t.Errorf("gid %d ifindex %d: %v", e.Index, e.Ifindex, err)
					} else if nd := readSysfs(t, name, "ports", "1", "gid_attrs", "ndevs", fmt.Sprint(e.Index)); nd != ifi.Name {
						t.Errorf("gid %d netdev %s, sysfs %s", e.Index, ifi.Name, nd)
					}
				}
			}
			if name == testkit.RxeDev {
				want := net.ParseIP(testkit.RxeAddr)
				if !table[1].GID.IP().Equal(want) {
					t.Errorf("rxe0 gid 1 = %v, want %v", table[1].GID.IP(), want)
				}
			}
			if _, err := c.QueryGID(1, pa.GIDTblLen-1); !errors.Is(err, sys.ENODATA) {
				t.Errorf("empty GID slot %d: %v, want ENODATA", pa.GIDTblLen-1, err)
			}
			// GID is ibv_query_gid: the empty slot reads as zeros, as
			// sysfs shows it; a valid one as QueryGID; past the table
			// is EINVAL.
			if g, err := c.GID(1, pa.GIDTblLen-1); err != nil || g != (uverbs.GID{}) ||
				readSysfs(t, name, "ports", "1", "gids", fmt.Sprint(pa.GIDTblLen-1)) != g.String() {
				t.Errorf("GID(1, empty slot %d) = %v, %v; want the zero GID sysfs shows", pa.GIDTblLen-1, g, err)
			}
			if g, err := c.GID(1, table[0].Index); err != nil || g != table[0].GID {
				t.Errorf("GID(1, %d) = %v, %v; want %v", table[0].Index, g, err, table[0].GID)
			}
			if _, err := c.GID(1, pa.GIDTblLen); !errors.Is(err, sys.EINVAL) {
				t.Errorf("GID(1, %d) past the table: %v, want EINVAL", pa.GIDTblLen, err)
			}
			// The real kernel path allocates nothing either.
			var into uverbs.PortAttr
			testkit.NoAllocs(t, 500, func() { c.QueryPortInto(1, &into) })
		})
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestVMCloseReleasesEverything(t *testing.T) {
	testkit.RequireVM(t)
	before := testkit.Resources(t, testkit.RxeDev)
	fdsBefore := openFDs(t)
	var ctxs []*uverbs.Context
	for i := 0; i < 3; i++ {
		c, err := uverbs.OpenByName(testkit.RxeDev)
		if err != nil {
			t.Fatal(err)
		}
		ctxs = append(ctxs, c)
	}
	if got := openFDs(t); got != fdsBefore+6 {
		t.Errorf("%d fds with 3 contexts open, %d before; want a command fd and an async fd each", got, fdsBefore)
	}
	during := testkit.Resources(t, testkit.RxeDev)
	if during["ctx"] != before["ctx"]+3 {
		t.Errorf("ctx count %d with 3 open contexts, %d before", during["ctx"], before["ctx"])
	}
	for _, c := range ctxs {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := c.QueryPort(1); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("QueryPort after Close = %v", err)
		}
	}
	if got := openFDs(t); got != fdsBefore {
		t.Errorf("%d fds open after closing 3 contexts, %d before", got, fdsBefore)
	}
	after := testkit.Resources(t, testkit.RxeDev)
	if after["ctx"] != before["ctx"] {
		t.Errorf("ctx count %d after Close, %d before", after["ctx"], before["ctx"])
	}
	if r := sys.LeakReport(); r != "" {
		t.Error(r)
	}
}

func TestVMOpenErrors(t *testing.T) {
	testkit.RequireVM(t)
	if _, err := uverbs.OpenByName("nosuchdev"); !errors.Is(err, uverbs.ErrNoDevice) {
		t.Errorf("OpenByName(nosuchdev) = %v", err)
	}
	d, err := uverbs.DeviceByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	d.DevPath = "/dev/infiniband/uverbs99"
	if _, err := uverbs.Open(d); !errors.Is(err, uverbs.ErrNoDevice) {
		t.Errorf("Open(missing node) = %v", err)
	}
}

// BenchmarkVMQueryPort issues a real DEVICE/QUERY_PORT ioctl on rxe0.
func BenchmarkVMQueryPort(b *testing.B) {
	testkit.RequireVM(b)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var pa uverbs.PortAttr
	b.ReportAllocs()
	for b.Loop() {
		if err := c.QueryPortInto(1, &pa); err != nil {
			b.Fatal(err)
		}
	}
}
