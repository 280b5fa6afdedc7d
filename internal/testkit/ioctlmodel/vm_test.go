package ioctlmodel_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	m "github.com/pureverbs/pureverbs/internal/testkit/ioctlmodel"
	"github.com/pureverbs/pureverbs/uverbs"
)

// openWorld opens rxe0's uverbs node raw (no library code between the
// test and the kernel but ioctlmodel.Exec) and, unless bare, allocates a
// user context, the async fd, a PD, a completion channel and a CQ with
// known-good commands. Closing the command fd (at cleanup) destroys them.
func openWorld(t *testing.T, bare bool) *world {
	t.Helper()
	dev, err := uverbs.DeviceByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dev.DevPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	w := &world{driverID: dev.DriverID, cmdFD: fd, bare: bare}
	if w.driverID == 0 {
		w.driverID = abi.RDMA_DRIVER_RXE
	}
	if bare {
		return w
	}
	must := func(what string, c m.Cmd) m.Result {
		t.Helper()
		r := m.Exec(fd, &c)
		if r.Errno != 0 {
			t.Fatalf("setting up: %s: %v", what, r.Errno)
		}
		return r
	}
	must("get_context", getContext(w))
	r := must("async event alloc", asyncAlloc(w))
	w.async = int(r.Data[0])
	t.Cleanup(func() { unix.Close(w.async) })
	c := allocPDWrite(w)
	must("alloc pd", c)
	w.pd = binary.LittleEndian.Uint32(c.Attrs[1].Buf)
	c = cmd(w, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_INVOKE_WRITE,
		in(abi.UVERBS_ATTR_CORE_IN, 0, 8),
		out(abi.UVERBS_ATTR_CORE_OUT, 4),
		in(abi.UVERBS_ATTR_WRITE_CMD, abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, 8))
	must("create comp channel", c)
	w.comp = int(binary.LittleEndian.Uint32(c.Attrs[1].Buf))
	t.Cleanup(func() { unix.Close(w.comp) })
	r = must("create cq", cqCreate(w))
	w.cq = uint32(r.Data[cqHandle])
	return w
}

// TestVMModelAgreesWithKernel sends every command of the case table to the
// running kernel's rxe device and compares its answer with the model's
// prediction: the same errno, or acceptance with VALID_OUTPUT on every
// output the model says the handler writes.
func TestVMModelAgreesWithKernel(t *testing.T) {
	testkit.RequireVM(t)
	api := m.Rxe()
	var accepted, rejected int
	byErrno := map[string]int{}
	for _, k := range cases() {
		t.Run(k.name, func(t *testing.T) {
			w := openWorld(t, k.bare)
			c := k.build(w)
			v := api.Check(w.env(), &c)
			r := m.Exec(w.cmdFD, &c)
			if v.Errno != k.want {
				t.Errorf("model says %v, the table expects %v", v, errName(k.want))
			}
			if r.Errno != v.Errno {
				t.Errorf("kernel %s answered %v, model predicted %v\n\t%s", testkit.KernelRelease(), errName(r.Errno), v, c.Describe(api))
			}
			if r.Errno != 0 {
				rejected++
				byErrno[errName(r.Errno)]++
				return
			}
			accepted++
			meth := api.Method(c.Object, c.Method)
			for i, a := range c.Attrs {
				s := meth.Attr(a.ID)
				if s == nil {
					continue
				}
				if s.Kind == m.PtrOut && s.Writes && r.Flags[i]&m.FlagValidOutput == 0 {
					t.Errorf("attribute %s: kernel did not mark the output written", s.Name)
				}
				if s.Kind == m.FD && s.Access == m.New {
					unix.Close(int(r.Data[i]))
				}
			}
		})
	}
	var parts []string
	for e, n := range byErrno {
		parts = append(parts, fmt.Sprintf("%s %d", e, n))
	}
	t.Logf("kernel %s: %d commands, %d accepted, %d rejected (%s); model and kernel agree on each unless reported above",
		testkit.KernelRelease(), accepted+rejected, accepted, rejected, strings.Join(parts, ", "))
}

// TestVMModelSeesBuilderCommands: commands built by the library's own
// builder (internal/sys) pass the model and the kernel alike.
func TestVMModelSeesBuilderCommands(t *testing.T) {
	testkit.RequireVM(t)
	w := openWorld(t, false)
	api := m.Rxe()
	c := sys.NewIoctl()
	c.Reset(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT, w.driverID)
	c.ConstIn(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1, true)
	var resp abi.IbUverbsQueryPortRespEx
	sys.PtrOut(c, abi.UVERBS_ATTR_QUERY_PORT_RESP, &resp, true)
	cmd := m.FromIoctl(c)
	if v := api.Check(w.env(), &cmd); !v.OK() {
		t.Fatalf("model rejects the library's QUERY_PORT: %v", v)
	}
	if r := m.Exec(w.cmdFD, &cmd); r.Errno != 0 {
		t.Fatalf("kernel rejects the library's QUERY_PORT: %v", r.Errno)
	}
}
