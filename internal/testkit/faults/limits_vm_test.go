package faults_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// nobody is the unprivileged user the children run as (no capabilities,
// so neither CAP_DAC_OVERRIDE nor CAP_IPC_LOCK).
const nobody = 65534

// childMain runs one operation and prints "OK" or "ERR <errno> <error>":
//
//	fault-child open DEV              uverbs.OpenByName(DEV)
//	fault-child reg MEMLOCK SIZE      RLIMIT_MEMLOCK=MEMLOCK, then RegMR of SIZE bytes on rxe0
func childMain(args []string) int {
	report := func(err error) int {
		if err == nil {
			fmt.Println("OK")
			return 0
		}
		var errno syscall.Errno
		name := "-"
		if errors.As(err, &errno) {
			name = unix.ErrnoName(errno)
		}
		fmt.Printf("ERR %s %v\n", name, err)
		return 0
	}
	switch {
	case len(args) == 2 && args[0] == "open":
		c, err := uverbs.OpenByName(args[1])
		if err == nil {
			c.Close()
		}
		return report(err)
	case len(args) == 3 && args[0] == "reg":
		limit, err1 := strconv.ParseUint(args[1], 0, 64)
		size, err2 := strconv.Atoi(args[2])
		if err1 != nil || err2 != nil {
			fmt.Println("bad arguments", args)
			return 2
		}
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
			fmt.Println("setrlimit:", err)
			return 2
		}
		c, err := uverbs.OpenByName(testkit.RxeDev)
		if err != nil {
			return report(err)
		}
		defer c.Close()
		pd, err := c.AllocPD()
		if err != nil {
			return report(err)
		}
		mr, err := pd.RegMR(make([]byte, size), uverbs.AccessLocalWrite)
		if err == nil {
			mr.Dereg()
		}
		return report(err)
	}
	fmt.Println("bad arguments", args)
	return 2
}

// runChild runs childMain with args as uid (and gid) and returns its
// output line.
func runChild(t *testing.T, uid uint32, args ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, append([]string{childArg}, args...)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %v as uid %d: %v\n%s", args, uid, err, out)
	}
	return strings.TrimSpace(string(out))
}

// wantChild checks a child's line: "OK", or "ERR ERRNO" followed by an
// error text containing each of texts.
func wantChild(t *testing.T, got, want string, texts ...string) {
	t.Helper()
	if !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want %s...", got, want)
		return
	}
	for _, s := range texts {
		if !strings.Contains(got, s) {
			t.Errorf("error %q does not say %q", got, s)
		}
	}
}

// TestVMPermissionDenied: a user who may not open the device node gets
// an error that names the node and says what to change.
func TestVMPermissionDenied(t *testing.T) {
	testkit.RequireVM(t)
	d, err := uverbs.DeviceByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	node := d.DevPath
	if node == "" {
		node = filepath.Join("/dev/infiniband", d.UverbsName)
	}
	fi, err := os.Stat(node)
	if err != nil {
		t.Fatal(err)
	}
	mode := fi.Mode().Perm()
	t.Logf("%s: mode %v", node, mode)
	// ib_uverbs creates its nodes 0666: anyone may open them.
	wantChild(t, runChild(t, nobody, "open", testkit.RxeDev), "OK")

	if err := os.Chmod(node, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(node, mode) })
	got := runChild(t, nobody, "open", testkit.RxeDev)
	t.Logf("as uid %d with %s at 0600: %s", nobody, node, got)
	wantChild(t, got, "ERR EACCES", node, "permission denied", "read/write access")
	// Root may (CAP_DAC_OVERRIDE).
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatalf("root, node 0600: %v", err)
	}
	c.Close()
}

// TestVMMemlockTooLow: registering more memory than RLIMIT_MEMLOCK lets an
// unprivileged process pin fails with an error that names the limit and
// how to raise it; within the limit it works, and root (CAP_IPC_LOCK) is
// not bound by it.
func TestVMMemlockTooLow(t *testing.T) {
	testkit.RequireVM(t)
	const limit, small, big = 64 << 10, 16 << 10, 1 << 20
	args := func(size int) []string { return []string{"reg", strconv.Itoa(limit), strconv.Itoa(size)} }
	got := runChild(t, nobody, args(big)...)
	t.Logf("uid %d, RLIMIT_MEMLOCK %d, RegMR of %d bytes: %s", nobody, limit, big, got)
	wantChild(t, got, "ERR ENOMEM", "RLIMIT_MEMLOCK", "65536", "ulimit -l", "CAP_IPC_LOCK")
	wantChild(t, runChild(t, nobody, args(small)...), "OK")
	wantChild(t, runChild(t, 0, args(big)...), "OK")
}

// TestVMTooManyObjects creates address handles (the object rxe allows
// fewest of: max_ah 32767 on 6.1 and 6.12, against a million PDs) until
// the device refuses: the error says which limit (QueryDevice's max_ah)
// was reached. Everything is released afterwards (the leak check
// compares the kernel's counts).
func TestVMTooManyObjects(t *testing.T) {
	c := openRxe(t)
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.MaxAH <= 0 || attr.MaxAH > 1<<17 {
		t.Fatalf("max_ah %d: too many to exhaust in a test", attr.MaxAH)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ahAttr := uverbs.AHAttr{DGID: g.GID, SGIDIndex: 1, IsGlobal: true, PortNum: 1, HopLimit: 64}
	var ahs []*uverbs.AH
	defer func() {
		for _, ah := range ahs {
			if err := ah.Destroy(); err != nil {
				t.Errorf("Destroy: %v", err)
				return
			}
		}
	}()
	start := time.Now()
	for len(ahs) <= attr.MaxAH {
		ah, err := pd.CreateAH(ahAttr)
		if err != nil {
			t.Logf("CreateAH %d (max_ah %d) after %v: %v", len(ahs)+1, attr.MaxAH, time.Since(start).Round(time.Millisecond), err)
			var errno syscall.Errno
			if !errors.As(err, &errno) {
				t.Errorf("error %v carries no errno", err)
			}
			if len(ahs) < attr.MaxAH/2 {
				t.Errorf("refused after %d of max_ah %d", len(ahs), attr.MaxAH)
			}
			for _, s := range []string{"max_ah", strconv.Itoa(attr.MaxAH), "destroy"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			// The kernel's resource counts have no AHs: that the
			// destroys reached it shows in the pool, full until
			// they ran, taking a new AH after them.
			for _, ah := range ahs {
				if err := ah.Destroy(); err != nil {
					t.Fatalf("Destroy: %v", err)
				}
			}
			ahs = nil
			ah, err := pd.CreateAH(ahAttr)
			if err != nil {
				t.Fatalf("CreateAH after destroying the %d AHs of a full pool: %v", attr.MaxAH, err)
			}
			ahs = append(ahs, ah)
			return
		}
		ahs = append(ahs, ah)
	}
	t.Fatalf("%d AHs created, max_ah is %d: the kernel never refused", len(ahs), attr.MaxAH)
}
