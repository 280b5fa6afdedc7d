package testkit_test

// The design promises static binaries that run in containers. These tests
// run every cmd/ tool (abigen, the generator, aside) inside an empty root
// that holds nothing but the tool itself and mounts of /dev, /sys and /proc,
// as a FROM-scratch container image has, and show that rdma-core's
// ibv_devinfo cannot even start there. See the README for such an image.

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// containerChecks has one entry per command under cmd/ except abigen:
// what the tool must do in the empty root. TestContainerChecksCoverCmd fails
// when a tool is added to cmd/ without an entry here.
var containerChecks = map[string]func(t *testing.T, c *scratch){
	"devinfo":     checkDevinfoInScratch,
	"devices":     checkDevicesInScratch,
	"asyncwatch":  checkAsyncwatchInScratch,
	"rcpingpong":  pingpongInScratch("rcpingpong", 18611),
	"ucpingpong":  pingpongInScratch("ucpingpong", 18612),
	"udpingpong":  pingpongInScratch("udpingpong", 18613),
	"srqpingpong": pingpongInScratch("srqpingpong", 18614),
	"writebw":     bandwidthInScratch("writebw", 18615),
	"readbw":      bandwidthInScratch("readbw", 18616),
	"sendbw":      bandwidthInScratch("sendbw", 18617),
	"writelat":    bandwidthInScratch("writelat", 18618),
	"sendlat":     bandwidthInScratch("sendlat", 18619),
	"readlat":     bandwidthInScratch("readlat", 18620),
	"atomicbw":    bandwidthInScratch("atomicbw", 18625),
	"atomiclat":   bandwidthInScratch("atomiclat", 18626),
	"rdmaping":    rpingInScratch("rdmaping", 18621),
	"rdmaserver":  rdmaExampleInScratch("rdmaserver", 18622),
	"rdmaclient":  rdmaExampleInScratch("rdmaclient", 18623),
	"rdmaudaddy":  udaddyInScratch,
	"rdmacmatose": cmatoseInScratch,
	"rdmamckey":   mckeyInScratch,
	"rdmacmtime":  cmtimeInScratch,
}

// cmdTools lists the module's cmd/ tools but abigen: on the host from the
// source tree, in the VM from the Go binaries rxevm installed in /usr/bin
// (their build info names the package).
func cmdTools(t *testing.T) []string {
	t.Helper()
	var tools []string
	if !testkit.InVM() {
		ents, err := os.ReadDir(filepath.Join("..", "..", "cmd"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() && e.Name() != "abigen" {
				tools = append(tools, e.Name())
			}
		}
		return tools
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info in the test binary")
	}
	prefix := bi.Main.Path + "/cmd/"
	ents, err := os.ReadDir("/usr/bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := buildinfo.ReadFile(filepath.Join("/usr/bin", e.Name()))
		if err != nil || !strings.HasPrefix(info.Path, prefix) {
			continue // not a Go program of this module's cmd/
		}
		tools = append(tools, strings.TrimPrefix(info.Path, prefix))
	}
	if len(tools) == 0 {
		t.Fatalf("no %s* programs in the guest's /usr/bin", prefix)
	}
	return tools
}

// TestContainerChecksCoverCmd: every cmd/ tool has a container check.
func TestContainerChecksCoverCmd(t *testing.T) {
	tools := cmdTools(t)
	for _, name := range tools {
		if containerChecks[name] == nil {
			t.Errorf("cmd/%s has no entry in containerChecks (container_vm_test.go): say what it must do in an empty root", name)
		}
	}
	for name := range containerChecks {
		if !slices.Contains(tools, name) {
			t.Errorf("containerChecks names %s, which is not a cmd/ tool (%q)", name, tools)
		}
	}
}

// scratch is an empty root directory with /dev, /sys and /proc, like a
// container made FROM scratch with the RDMA device passed in
// (docker run --device /dev/infiniband/uverbs0 ...).
type scratch struct {
	root string
}

// newScratch builds the root: a tmpfs /dev holding the nodes a container
// runtime provides (null, zero, random, urandom, tty) plus
// /dev/infiniband/*, a fresh sysfs and a fresh proc. The mounts are undone
// at the end of the test.
func newScratch(t *testing.T) *scratch {
	t.Helper()
	root := t.TempDir()
	mount := func(src, dir, typ string) {
		t.Helper()
		p := filepath.Join(root, dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(src, p, typ, unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
			t.Fatalf("mount %s on %s: %v", typ, p, err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				t.Errorf("umount %s: %v", p, err)
			}
		})
	}
	mount("tmpfs", "dev", "tmpfs")
	mount("sysfs", "sys", "sysfs")
	mount("proc", "proc", "proc")
	nodes := []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/tty"}
	ib, _ := filepath.Glob("/dev/infiniband/*")
	if len(ib) == 0 {
		t.Fatal("no /dev/infiniband/* in the guest")
	}
	for _, n := range append(nodes, ib...) {
		var st unix.Stat_t
		if err := unix.Stat(n, &st); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mknod(dst, st.Mode, int(st.Rdev)); err != nil {
			t.Fatalf("mknod %s: %v", dst, err)
		}
	}
	return &scratch{root: root}
}

// add copies the guest's /usr/bin/name to /name in the root, as
// `COPY --from=build /out/name /` does.
func (c *scratch) add(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/usr/bin", name))
	if err != nil {
		t.Fatalf("%v (rxevm installs every cmd/ tool in the guest's /usr/bin)", err)
	}
	if err := os.WriteFile(filepath.Join(c.root, name), b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// files lists the root's top level.
func (c *scratch) files(t *testing.T) []string {
	ents, err := os.ReadDir(c.root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// command returns /name args... to run chrooted in the root, with the
// environment a container runtime gives and nothing else.
func (c *scratch) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/"+name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: c.root}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/"}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func (c *scratch) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in the empty root: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestContainerTools runs each cmd/ tool in its own empty root.
func TestContainerTools(t *testing.T) {
	testkit.RequireVM(t)
	for name, check := range containerChecks {
		t.Run(name, func(t *testing.T) {
			f, err := elf.Open(filepath.Join("/usr/bin", name))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("/usr/bin/%s has an ELF interpreter: not a static binary", name)
				}
			}
			f.Close()
			c := newScratch(t)
			c.add(t, name)
			want := []string{"dev", name, "proc", "sys"}
			slices.Sort(want)
			if got := c.files(t); !slices.Equal(got, want) {
				t.Fatalf("root holds %q, want %q", got, want)
			}
			check(t, c)
		})
	}
}

// checkDevinfoInScratch: devinfo prints in the empty root exactly what it
// prints in the guest (devices, ports, GIDs with their types).
func checkDevinfoInScratch(t *testing.T, c *scratch) {
	for _, args := range [][]string{{"-l"}, {}, {"-v", "-d", testkit.LoopDev}} {
		in := c.run(t, "devinfo", args...)
		out, err := exec.Command("/usr/bin/devinfo", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("devinfo %s in the guest: %v\n%s", strings.Join(args, " "), err, out)
		}
		if in != string(out) {
			t.Errorf("devinfo %s: in the empty root:\n%s\nin the guest:\n%s", strings.Join(args, " "), in, out)
		}
		want := []string{testkit.LoopDev}
		if !slices.Contains(args, "-d") {
			want = append(want, testkit.RxeDev)
		}
		for _, w := range want {
			if !strings.Contains(in, w) {
				t.Errorf("devinfo %s in the empty root does not name %s:\n%s", strings.Join(args, " "), w, in)
			}
		}
	}
	t.Logf("devinfo -l in the empty root:\n%s", c.run(t, "devinfo", "-l"))
}

// checkDevicesInScratch: devices prints in the empty root what it prints
// in the guest, both devices with their GUIDs.
func checkDevicesInScratch(t *testing.T, c *scratch) {
	in := c.run(t, "devices")
	out, err := exec.Command("/usr/bin/devices").CombinedOutput()
	if err != nil {
		t.Fatalf("devices in the guest: %v\n%s", err, out)
	}
	if in != string(out) {
		t.Errorf("devices: in the empty root:\n%s\nin the guest:\n%s", in, out)
	}
	for _, w := range []string{testkit.LoopDev, testkit.RxeDev} {
		if !strings.Contains(in, "    "+w+" ") {
			t.Errorf("devices in the empty root does not name %s:\n%s", w, in)
		}
	}
}

// checkAsyncwatchInScratch: asyncwatch opens the device, prints its header
// and reports the port going down and up again, then dies of SIGTERM.
func checkAsyncwatchInScratch(t *testing.T, c *scratch) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out testkit.Output
	cmd := c.command(ctx, "asyncwatch", "-d", testkit.RxeDev)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("asyncwatch in the empty root: %v", err)
	}
	done := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(done) }()
	defer func() { cmd.Process.Kill(); <-done }()
	if err := out.WaitFor(ctx, testkit.RxeDev+": async event FD ", done); err != nil {
		t.Fatalf("no asyncwatch header: %v\n%s", err, out.String())
	}
	testkit.SetLink(t, testkit.RxeNetdev, false)
	testkit.SetLink(t, testkit.RxeNetdev, true)
	for _, ev := range []string{"IBV_EVENT_PORT_ERR (10), port 1", "IBV_EVENT_PORT_ACTIVE (9), port 1"} {
		if err := out.WaitFor(ctx, ev, done); err != nil {
			t.Fatalf("asyncwatch in the empty root did not print %q: %v\n%s", ev, err, out.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("asyncwatch did not stop on SIGTERM")
	}
	// Killed by it, as ibv_asyncwatch is (cmd/asyncwatch TestVMSignalEnds).
	if werr == nil || werr.Error() != "signal: terminated" {
		t.Errorf("asyncwatch after SIGTERM: %v, want killed by it\n%s", werr, out.String())
	}
	t.Logf("asyncwatch in the empty root:\n%s", out.String())
}

// pingpongInScratch: a server and a client of the ping-pong tool name, both
// in the empty root, exchange their addresses over TCP on port and finish
// the ping-pong on rxe0 (GID 1, RoCE v2 over 10.99.0.1), each printing its
// addresses and the summary lines.
func pingpongInScratch(name string, port int) func(t *testing.T, c *scratch) {
	return func(t *testing.T, c *scratch) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := []string{"-d", testkit.RxeDev, "-g", "1", "-n", "100", "-p", strconv.Itoa(port)}
		var srvOut testkit.Output
		srv := c.command(ctx, name, args...)
		srv.Stdout, srv.Stderr = &srvOut, &srvOut
		if err := srv.Start(); err != nil {
			t.Fatalf("%s server in the empty root: %v", name, err)
		}
		done := make(chan struct{})
		var srvErr error
		go func() { srvErr = srv.Wait(); close(done) }()
		defer func() { srv.Process.Kill(); <-done }()
		if err := waitListen(ctx, port, done); err != nil {
			t.Fatalf("%s server does not listen on %d: %v\n%s", name, port, err, srvOut.String())
		}
		cliOut, cliErr := c.command(ctx, name, append(args, testkit.RxeAddr)...).CombinedOutput()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("%s server did not finish:\n%s", name, srvOut.String())
		}
		for side, r := range map[string]struct {
			err error
			out string
		}{"server": {srvErr, srvOut.String()}, "client": {cliErr, string(cliOut)}} {
			if r.err != nil {
				t.Errorf("%s %s in the empty root: %v\n%s", name, side, r.err, r.out)
			}
			for _, want := range []string{"local address:", "remote address:", "usec/iter"} {
				if !strings.Contains(r.out, want) {
					t.Errorf("%s %s printed no %q:\n%s", name, side, want, r.out)
				}
			}
		}
		lines := strings.Split(strings.TrimSpace(string(cliOut)), "\n")
		t.Logf("%s client in the empty root: ... %s", name, strings.Join(lines[max(0, len(lines)-2):], " / "))
	}
}

// bandwidthInScratch: a server and a client of the bandwidth tool name,
// both in the empty root, exchange their addresses over TCP on port, run
// 100 messages of 4 KiB (8 B, the only size, for the atomic tools) on
// rxe0 (GID 1) and print the result table. The latency tools run the
// same way: their lines start with the size and the iterations too, and
// both sides print one, but for the servers of read and atomics.
func bandwidthInScratch(name string, port int) func(t *testing.T, c *scratch) {
	return func(t *testing.T, c *scratch) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		size := "4096"
		if strings.HasPrefix(name, "atomic") {
			size = "8"
		}
		args := []string{"-d", testkit.RxeDev, "-x", "1", "-n", "100", "-s", size, "-p", strconv.Itoa(port)}
		var srvOut testkit.Output
		srv := c.command(ctx, name, args...)
		srv.Stdout, srv.Stderr = &srvOut, &srvOut
		if err := srv.Start(); err != nil {
			t.Fatalf("%s server in the empty root: %v", name, err)
		}
		done := make(chan struct{})
		var srvErr error
		go func() { srvErr = srv.Wait(); close(done) }()
		defer func() { srv.Process.Kill(); <-done }()
		if err := waitListen(ctx, port, done); err != nil {
			t.Fatalf("%s server does not listen on %d: %v\n%s", name, port, err, srvOut.String())
		}
		cliOut, cliErr := c.command(ctx, name, append(args, testkit.RxeAddr)...).CombinedOutput()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("%s server did not finish:\n%s", name, srvOut.String())
		}
		result := regexp.MustCompile(`(?m)^ ` + size + ` +100 +[0-9.]+ +[0-9.]+`)
		for side, r := range map[string]struct {
			err error
			out string
		}{"server": {srvErr, srvOut.String()}, "client": {cliErr, string(cliOut)}} {
			if r.err != nil {
				t.Errorf("%s %s in the empty root: %v\n%s", name, side, r.err, r.out)
			}
			// ib_read_lat's and ib_atomic_lat's servers only serve the
			// requests: they print no line.
			serverOnly := (name == "readlat" || name == "atomiclat") && side == "server"
			if !strings.Contains(r.out, "remote address:") || (!result.MatchString(r.out) && !serverOnly) {
				t.Errorf("%s %s printed no remote address or no result line for 100 x %s B:\n%s", name, side, size, r.out)
			}
		}
		t.Logf("%s client in the empty root: %s", name, strings.TrimSpace(result.FindString(string(cliOut))))
	}
}

// rpingInScratch: a server and a client of the rping port name, both in
// the empty root, connect through the RDMA connection manager
// (/dev/infiniband/rdma_cm) on rxe0's address and port, and ping 10
// times with -v and -V: each side prints the 10 lines of ping data
// (the server what it read, the client what the server wrote back) and
// both exit 0.
func rpingInScratch(name string, port int) func(t *testing.T, c *scratch) {
	return func(t *testing.T, c *scratch) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		addr := []string{"-a", testkit.RxeAddr, "-p", strconv.Itoa(port), "-S", "100"}
		srv := startCMServer(ctx, t, name+" server", c.command(ctx, name, append([]string{"-s", "-v"}, addr...)...), port)
		cliOut, cliErr := c.command(ctx, name, append([]string{"-c", "-v", "-V", "-C", "10"}, addr...)...).CombinedOutput()
		srvErr := srv.wait(ctx, t)
		srvOut := &srv.out
		for side, r := range map[string]struct {
			err    error
			out    string
			prefix string
		}{"server": {srvErr, srvOut.String(), "server ping data: rdma-ping-"}, "client": {cliErr, string(cliOut), "ping data: rdma-ping-"}} {
			if r.err != nil {
				t.Errorf("%s %s in the empty root: %v\n%s", name, side, r.err, r.out)
			}
			for i := range 10 {
				if want := fmt.Sprintf("%s%d: ", r.prefix, i); !strings.Contains(r.out, want) {
					t.Errorf("%s %s printed no %q:\n%s", name, side, want, r.out)
				}
			}
		}
		last := ""
		for _, l := range strings.Split(string(cliOut), "\n") {
			if strings.HasPrefix(l, "ping data: ") {
				last = l
			}
		}
		t.Logf("%s client in the empty root: ... %s", name, last)
	}
}

// rdmaExampleInScratch: the port of librdmacm's rdma_server (rdmaserver)
// or rdma_client (rdmaclient) in the empty root, against the guest's C
// example in the other role: both end with "end 0" and status 0.
func rdmaExampleInScratch(name string, port int) func(t *testing.T, c *scratch) {
	return func(t *testing.T, c *scratch) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		addr := []string{"-s", testkit.RxeAddr, "-p", strconv.Itoa(port)}
		var cmd *exec.Cmd
		if name == "rdmaserver" {
			cmd = c.command(ctx, name, addr...)
		} else {
			cmd = exec.CommandContext(ctx, "rdma_server", addr...)
		}
		srv := startCMServer(ctx, t, "server", cmd, port)
		var cli *exec.Cmd
		if name == "rdmaclient" {
			cli = c.command(ctx, name, addr...)
		} else {
			cli = exec.CommandContext(ctx, "rdma_client", addr...)
		}
		cliOut, cliErr := cli.CombinedOutput()
		srvErr := srv.wait(ctx, t)
		srvOut := &srv.out
		if cliErr != nil || string(cliOut) != "rdma_client: start\nrdma_client: end 0\n" {
			t.Errorf("client (%s in the empty root): %v\n%s", name, cliErr, cliOut)
		}
		if srvErr != nil || srvOut.String() != "rdma_server: start\nrdma_server: end 0\n" {
			t.Errorf("server (%s in the empty root): %v\n%s", name, srvErr, srvOut.String())
		}
	}
}

// udaddyInScratch: the port of librdmacm's udaddy as the server in the
// empty root (on udaddy's fixed port, 7174), the guest's C udaddy as the
// client: three messages each way, both exit 0 with "return status 0".
func udaddyInScratch(t *testing.T, c *scratch) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startCMServer(ctx, t, "rdmaudaddy server", c.command(ctx, "rdmaudaddy", "-C", "3"), 7174)
	cliOut, cliErr := exec.CommandContext(ctx, "udaddy", "-s", testkit.RxeAddr, "-C", "3").CombinedOutput()
	srvErr := srv.wait(ctx, t)
	srvOut := &srv.out
	if cliErr != nil || !strings.HasSuffix(string(cliOut), "data transfers complete\ntest complete\nreturn status 0\n") {
		t.Errorf("C udaddy client: %v\n%s", cliErr, cliOut)
	}
	if want := "udaddy: starting server\nreceiving data transfers\nsending replies\ndata transfers complete\ntest complete\nreturn status 0\n"; srvErr != nil || srvOut.String() != want {
		t.Errorf("rdmaudaddy server in the empty root: %v\n%s", srvErr, srvOut.String())
	}
}

// cmtimeInScratch: the port of librdmacm's cmtime as the client in the
// empty root (five connections: the device's default PD and CQs made by
// rdma_create_qp), the guest's C cmtime as the server: exit 0, every step
// of cmtime's table, every connection connected.
func cmtimeInScratch(t *testing.T, c *scratch) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const port = "18627"
	startCMServer(ctx, t, "C cmtime server", exec.CommandContext(ctx, "cmtime", "-p", port), 18627)
	out, err := c.command(ctx, "rdmacmtime", "-s", testkit.RxeAddr, "-p", port, "-c", "5").CombinedOutput()
	const steps = "creating id\nresolving address\nresolving route\ncreating qp\nconnecting\ndisconnecting\ndestroying id\n" +
		"step              total ms     max ms     min us  us / conn\n"
	if err != nil || !strings.HasPrefix(string(out), steps) || !strings.Contains(string(out), "\nconnect      :") ||
		strings.Contains(string(out), "1000000000.00") {
		t.Errorf("rdmacmtime client in the empty root: %v\n%s", err, out)
	}
}

// cmatoseInScratch: the port of librdmacm's cmatose as the server in the
// empty root with -m (its IDs moved to a new channel before the
// disconnect), the guest's ucmatose as the client: three messages each
// way, both exit 0 with "return status 0".
func cmatoseInScratch(t *testing.T, c *scratch) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const port = "18624"
	srv := startCMServer(ctx, t, "rdmacmatose server", c.command(ctx, "rdmacmatose", "-b", testkit.RxeAddr, "-p", port, "-C", "3", "-m"), 18624)
	cliOut, cliErr := exec.CommandContext(ctx, "ucmatose", "-s", testkit.RxeAddr, "-p", port, "-C", "3").CombinedOutput()
	srvErr := srv.wait(ctx, t)
	if cliErr != nil || !strings.HasSuffix(string(cliOut), "data transfers complete\ntest complete\nreturn status 0\n") {
		t.Errorf("C ucmatose client: %v\n%s", cliErr, cliOut)
	}
	if out := srv.out.String(); srvErr != nil || !strings.Contains(out, "migrating to new event channel\n") || !strings.HasSuffix(out, "disconnected\ntest complete\nreturn status 0\n") {
		t.Errorf("rdmacmatose server in the empty root: %v\n%s", srvErr, out)
	}
}

// mckeyInScratch: the port of librdmacm's mckey as the sender in the
// empty root (its group resolved, joined and sent to with nothing but
// the device nodes), the guest's C mckey as the receiver: three
// messages, both exit 0 with "return status 0".
func mckeyInScratch(t *testing.T, c *scratch) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "239.2.7.1"
	rx := testkit.StartPeer(ctx, t, "mckey", "-m", group, "-b", testkit.RxeAddr, "-C", "3")
	if err := rx.WaitForOutput(ctx, "joined dgid"); err != nil {
		t.Fatal(err)
	}
	out, err := c.command(ctx, "rdmamckey", "-m", group, "-b", testkit.RxeAddr, "-s", "-C", "3").CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "initiating data transfers\ndata transfers complete\ntest complete\nreturn status 0\n") {
		t.Errorf("rdmamckey sender in the empty root: %v\n%s", err, out)
	}
	if err := rx.Wait(); err != nil || !strings.HasSuffix(rx.Output(), "data transfers complete\ntest complete\nreturn status 0\n") {
		t.Errorf("C mckey receiver: %v\n%s", err, rx.Output())
	}
}

// cmServer is a server process of a check, started by startCMServer.
type cmServer struct {
	what string
	out  testkit.Output
	done chan struct{}
	err  error
}

// startCMServer starts cmd (what names it in failures), its output
// collected, and waits until an rdma_cm ID listens on port; the test
// fails if it exits first or ctx ends, and kills it at the end if it is
// still running.
func startCMServer(ctx context.Context, t *testing.T, what string, cmd *exec.Cmd, port int) *cmServer {
	t.Helper()
	s := &cmServer{what: what, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-s.done })
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		select {
		case <-s.done:
			wcancel()
		case <-wctx.Done():
		}
	}()
	if err := testkit.WaitCMListen(wctx, port); err != nil {
		t.Fatalf("%s does not listen on %d: %v\n%s", what, port, err, s.out.String())
	}
	return s
}

// wait waits, bounded by ctx, for the server to exit and returns how.
func (s *cmServer) wait(ctx context.Context, t *testing.T) error {
	t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
		t.Fatalf("%s did not finish:\n%s", s.what, s.out.String())
	}
	return nil
}

// waitListen waits until a TCP socket listens on port (from
// /proc/net/tcp and tcp6; connecting to test it would take the server's
// one connection).
func waitListen(ctx context.Context, port int, done <-chan struct{}) error {
	want := fmt.Sprintf(":%04X ", port)
	for {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			for _, l := range strings.Split(string(b), "\n") {
				fs := strings.Fields(l)
				if len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
					return nil
				}
			}
		}
		select {
		case <-done:
			return errors.New("the server exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestContainerCToolCannotStart is the contrast: rdma-core's ibv_devinfo,
// dynamically linked against libibverbs and glibc, cannot even start in the
// same empty root (its ELF interpreter is not there).
func TestContainerCToolCannotStart(t *testing.T) {
	testkit.RequireVM(t)
	c := newScratch(t)
	c.add(t, "ibv_devinfo")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.command(ctx, "ibv_devinfo", "-l").CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		t.Fatalf("ibv_devinfo ran in the empty root:\n%s", out)
	case errors.As(err, &ee):
		t.Fatalf("ibv_devinfo started in the empty root and failed (%v); want it not to start at all:\n%s", err, out)
	case !errors.Is(err, fs.ErrNotExist):
		t.Fatalf("ibv_devinfo in the empty root: %v, want ENOENT (no ELF interpreter)", err)
	}
	t.Logf("ibv_devinfo in the empty root: %v (it needs /lib64/ld-linux-x86-64.so.2, libibverbs, libc, ...)", err)
}
