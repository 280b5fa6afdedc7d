package sys

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

func nle16(v uint16) []byte { return binary.NativeEndian.AppendUint16(nil, v) }
func nle32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
func nle64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

// nleErrno encodes -errno as the kernel's s32 error field.
func nleErrno(e unix.Errno) []byte {
	v := -int32(e)
	return nle32(uint32(v))
}

func nlcat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestNLDevType(t *testing.T) {
	for _, c := range []struct {
		op   uint16
		want uint16
	}{
		{abi.RDMA_NLDEV_CMD_GET, 0x1401},
		{abi.RDMA_NLDEV_CMD_NEWLINK, 0x1403},
		{abi.RDMA_NLDEV_CMD_DELLINK, 0x1404},
		{abi.RDMA_NLDEV_CMD_GET_CHARDEV, 0x140f},
	} {
		if got := NLDevType(c.op); got != c.want {
			t.Errorf("NLDevType(%d) = %#x, want %#x", c.op, got, c.want)
		}
	}
}

// TestNLNewLinkMsg checks the exact bytes of `rdma link add rxe0 type rxe
// netdev d0`, laid out by hand.
func TestNLNewLinkMsg(t *testing.T) {
	want := nlcat(
		// nlmsghdr: len, type 0x1403, flags REQUEST|ACK, seq 7, pid 0
		nle32(16+12+8+8), nle16(0x1403), nle16(0x5), nle32(7), nle32(0),
		// DEV_NAME "rxe0\0": len 9, padded to 12
		nle16(9), nle16(2), []byte("rxe0\x00"), []byte{0, 0, 0},
		// LINK_TYPE "rxe\0": len 8
		nle16(8), nle16(65), []byte("rxe\x00"),
		// NDEV_NAME "d0\0": len 7, padded to 8
		nle16(7), nle16(51), []byte("d0\x00"), []byte{0},
	)
	if diff := cmp.Diff(want, NLNewLinkMsg(7, "rxe0", "rxe", "d0")); diff != "" {
		t.Errorf("NLNewLinkMsg (-want +got):\n%s", diff)
	}
}

func TestNLDelLinkDumpChardevMsgs(t *testing.T) {
	want := nlcat(nle32(24), nle16(0x1404), nle16(0x5), nle32(3), nle32(0), nle16(8), nle16(1), nle32(42))
	if diff := cmp.Diff(want, NLDelLinkMsg(3, 42)); diff != "" {
		t.Errorf("NLDelLinkMsg (-want +got):\n%s", diff)
	}
	want = nlcat(nle32(16), nle16(0x1401), nle16(0x301), nle32(4), nle32(0))
	if diff := cmp.Diff(want, NLGetDumpMsg(4)); diff != "" {
		t.Errorf("NLGetDumpMsg (-want +got):\n%s", diff)
	}
	// GET_CHARDEV of device 2, type "uverbs": DEV_INDEX (8 bytes), then
	// CHARDEV_TYPE "uverbs\0" (len 11, padded to 12).
	want = nlcat(nle32(16+8+12), nle16(0x140f), nle16(0x5), nle32(5), nle32(0),
		nle16(8), nle16(1), nle32(2),
		nle16(11), nle16(69), []byte("uverbs\x00"), []byte{0})
	if diff := cmp.Diff(want, NLGetChardevMsg(5, 2, "uverbs")); diff != "" {
		t.Errorf("NLGetChardevMsg (-want +got):\n%s", diff)
	}
}

func nlDeviceReply(seq, index uint32, name string, guid uint64) []byte {
	return EncodeNLMsg(NLDevType(abi.RDMA_NLDEV_CMD_GET), unix.NLM_F_MULTI, seq,
		NLU32Attr(abi.RDMA_NLDEV_ATTR_DEV_INDEX, index), NLStringAttr(abi.RDMA_NLDEV_ATTR_DEV_NAME, name),
		NLU32Attr(abi.RDMA_NLDEV_ATTR_PORT_INDEX, 1), NLAttr{Type: abi.RDMA_NLDEV_ATTR_NODE_GUID, Data: nle64(guid)},
		// An attribute this parser does not know, with the NESTED flag.
		NLAttr{Type: 0x8000 | 200, Data: []byte{1, 2, 3}})
}

// huge_encode_dev(MKDEV(231, 192)): major 231, minor 192.
const testChardev = uint64(231<<8 | 192)

func nlChardevReply(seq uint32, name string, abiVer uint64, dev uint64, driverID *uint32) []byte {
	attrs := []NLAttr{
		NLStringAttr(abi.RDMA_NLDEV_ATTR_CHARDEV_NAME, name),
		{Type: abi.RDMA_NLDEV_ATTR_CHARDEV_ABI, Data: nle64(abiVer)},
		{Type: abi.RDMA_NLDEV_ATTR_CHARDEV, Data: nle64(dev)},
	}
	if driverID != nil {
		attrs = append(attrs, NLU32Attr(abi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, *driverID))
	}
	return EncodeNLMsg(NLDevType(abi.RDMA_NLDEV_CMD_GET_CHARDEV), 0, seq, attrs...)
}

func nlErrReply(seq uint32, errno int32) []byte {
	// error, then the request's header (NETLINK_CAP_ACK is not set, but
	// RDMA requests are short; the header is what matters).
	orig := nlcat(nle32(16), nle16(0x1401), nle16(unix.NLM_F_REQUEST), nle32(seq), nle32(0))
	return nlcat(nle32(16+4+16), nle16(unix.NLMSG_ERROR), nle16(0), nle32(seq), nle32(0), nle32(uint32(errno)), orig)
}

func nlDone(seq uint32) []byte {
	return nlcat(nle32(20), nle16(unix.NLMSG_DONE), nle16(unix.NLM_F_MULTI), nle32(seq), nle32(0), nle32(0))
}

func TestParseNLRoundTrip(t *testing.T) {
	guid := uint64(0x0102030405060708)
	msgs, err := ParseNLMsgs(append(nlDeviceReply(9, 2, "rxelo", guid), nlDone(9)...))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Seq != 9 || msgs[1].Type != unix.NLMSG_DONE {
		t.Fatalf("messages = %+v", msgs)
	}
	d, err := ParseNLDevice(msgs[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(NLDevice{Index: 2, Name: "rxelo", NodeGUID: guid, Ports: 1}, d); diff != "" {
		t.Errorf("device (-want +got):\n%s", diff)
	}

	id := uint32(abi.RDMA_DRIVER_RXE)
	// A large minor exercises huge_encode_dev's split: minor 0x12345.
	dev := uint64(231<<8) | 0x45 | 0x123<<20
	msgs, err = ParseNLMsgs(nlChardevReply(3, "uverbs1", 2, dev, &id))
	if err != nil || len(msgs) != 1 {
		t.Fatalf("ParseNLMsgs: %v, %v", msgs, err)
	}
	cd, err := ParseNLChardev(msgs[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	want := NLChardev{Name: "uverbs1", ABI: 2, Major: 231, Minor: 0x12345, DriverID: 14, HasDriverID: true}
	if diff := cmp.Diff(want, cd); diff != "" {
		t.Errorf("chardev (-want +got):\n%s", diff)
	}
	msgs, _ = ParseNLMsgs(nlChardevReply(3, "uverbs0", 1, testChardev, nil))
	if cd, err := ParseNLChardev(msgs[0].Body); err != nil || cd.HasDriverID || cd.Major != 231 || cd.Minor != 192 {
		t.Errorf("chardev without driver id: %+v, %v", cd, err)
	}
}

func TestNLMsgErr(t *testing.T) {
	mk := func(typ uint16, body []byte) NLMsg { return NLMsg{Type: typ, Seq: 1, Body: body} }
	orig := NLNewLinkMsg(1, "a", "rxe", "b")[:16]
	if err := NLMsgErr(mk(unix.NLMSG_ERROR, nlcat(nle32(0), orig))); err != nil {
		t.Errorf("ack: %v", err)
	}
	if err := NLMsgErr(mk(unix.NLMSG_ERROR, nlcat(nleErrno(unix.EEXIST), orig))); !errors.Is(err, unix.EEXIST) {
		t.Errorf("EEXIST reply gave %v", err)
	}
	if err := NLMsgErr(mk(unix.NLMSG_DONE, nleErrno(unix.EPERM))); !errors.Is(err, unix.EPERM) {
		t.Errorf("DONE with EPERM gave %v", err)
	}
	if err := NLMsgErr(mk(unix.NLMSG_DONE, nil)); err != nil {
		t.Errorf("empty DONE gave %v", err)
	}
	for _, body := range [][]byte{{1}, nle32(5), nle32(uint32(0x80000000))} {
		if err := NLMsgErr(mk(unix.NLMSG_ERROR, body)); !errors.Is(err, ErrNLMalformed) {
			t.Errorf("error body %x gave %v", body, err)
		}
	}
	if err := NLMsgErr(mk(NLDevType(1), nil)); err != nil {
		t.Errorf("data message gave %v", err)
	}
}

func TestParseNLMalformed(t *testing.T) {
	overlong := EncodeNLMsg(NLDevType(1), 0, 1)
	binary.NativeEndian.PutUint32(overlong, 100)
	tooShort := EncodeNLMsg(NLDevType(1), 0, 1)
	binary.NativeEndian.PutUint32(tooShort, 8)
	for name, b := range map[string][]byte{
		"short header":     {1, 2, 3},
		"overlong length":  overlong,
		"length below hdr": tooShort,
		"trailing bytes":   append(EncodeNLMsg(NLDevType(1), 0, 1), 0, 0, 0, 0, 0),
	} {
		if _, err := ParseNLMsgs(b); !errors.Is(err, ErrNLMalformed) {
			t.Errorf("ParseNLMsgs(%s) = %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"overlong attr":  {50, 0, 1, 0},
		"attr len < 4":   {2, 0, 1, 0},
		"trailing bytes": {8, 0, 1, 0, 1, 0, 0, 0, 9, 9},
	} {
		if _, err := ParseNLAttrs(b); !errors.Is(err, ErrNLMalformed) {
			t.Errorf("ParseNLAttrs(%s) = %v", name, err)
		}
	}
	body := func(attrs ...NLAttr) []byte { return EncodeNLMsg(0, 0, 0, attrs...)[16:] }
	for name, b := range map[string][]byte{
		"no index":    body(NLStringAttr(abi.RDMA_NLDEV_ATTR_DEV_NAME, "x")),
		"no name":     body(NLU32Attr(abi.RDMA_NLDEV_ATTR_DEV_INDEX, 1)),
		"short index": body(NLAttr{Type: abi.RDMA_NLDEV_ATTR_DEV_INDEX, Data: []byte{1}}, NLStringAttr(abi.RDMA_NLDEV_ATTR_DEV_NAME, "x")),
		"short guid": body(NLU32Attr(abi.RDMA_NLDEV_ATTR_DEV_INDEX, 1), NLStringAttr(abi.RDMA_NLDEV_ATTR_DEV_NAME, "x"),
			NLAttr{Type: abi.RDMA_NLDEV_ATTR_NODE_GUID, Data: nle32(1)}),
		"truncated": body(NLU32Attr(abi.RDMA_NLDEV_ATTR_DEV_INDEX, 1), NLStringAttr(abi.RDMA_NLDEV_ATTR_DEV_NAME, "xyz"))[:10],
	} {
		if _, err := ParseNLDevice(b); !errors.Is(err, ErrNLMalformed) {
			t.Errorf("ParseNLDevice(%s) = %v", name, err)
		}
	}
	name := NLStringAttr(abi.RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs0")
	abiv := NLAttr{Type: abi.RDMA_NLDEV_ATTR_CHARDEV_ABI, Data: nle64(2)}
	dev := NLAttr{Type: abi.RDMA_NLDEV_ATTR_CHARDEV, Data: nle64(testChardev)}
	for cname, b := range map[string][]byte{
		"no name":         body(abiv, dev),
		"empty name":      body(NLStringAttr(abi.RDMA_NLDEV_ATTR_CHARDEV_NAME, ""), abiv, dev),
		"no abi":          body(name, dev),
		"no dev":          body(name, abiv),
		"short abi":       body(name, NLU32Attr(abi.RDMA_NLDEV_ATTR_CHARDEV_ABI, 2), dev),
		"short driver id": body(name, abiv, dev, NLAttr{Type: abi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, Data: []byte{14}}),
		"truncated":       body(name, abiv, dev)[:30],
	} {
		if _, err := ParseNLChardev(b); !errors.Is(err, ErrNLMalformed) {
			t.Errorf("ParseNLChardev(%s) = %v", cname, err)
		}
	}
}

// TestNLCollector checks multi-part handling datagram by datagram.
func TestNLCollector(t *testing.T) {
	c := nlCollector{seq: 9}
	// Two devices in one datagram, a stray message of another sequence
	// number, then the DONE in a second datagram.
	done, err := c.feed(nlcat(nlDeviceReply(9, 1, "rxe0", 1), nlDeviceReply(8, 7, "stale", 1), nlDeviceReply(9, 2, "rxelo", 2)))
	if done || err != nil {
		t.Fatalf("first datagram: done %v, err %v", done, err)
	}
	done, err = c.feed(nlcat(nlDeviceReply(9, 3, "rxe1", 3)))
	if done || err != nil {
		t.Fatalf("second datagram: done %v, err %v", done, err)
	}
	if done, err = c.feed(nlDone(9)); !done || err != nil {
		t.Fatalf("DONE: done %v, err %v", done, err)
	}
	var names []string
	for _, m := range c.data {
		d, err := ParseNLDevice(m.Body)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{"rxe0", "rxelo", "rxe1"}, names); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}

	c = nlCollector{seq: 4}
	if done, err := c.feed(nlErrReply(4, -int32(unix.EOPNOTSUPP))); !done || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("error reply: done %v, err %v", done, err)
	}
	c = nlCollector{seq: 4}
	if done, err := c.feed([]byte{1, 2, 3, 4, 5}); !done || !errors.Is(err, ErrNLMalformed) {
		t.Errorf("garbage datagram: done %v, err %v", done, err)
	}
}

// fakeKernel is the far end of a socketpair standing in for the kernel.
type fakeKernel struct {
	t  *testing.T
	fd int
}

func newFakeConn(t *testing.T) (*NLConn, *fakeKernel) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	c, err := newNLConn(fds[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); unix.Close(fds[1]) })
	return c, &fakeKernel{t: t, fd: fds[1]}
}

// serve answers len(replies) requests in order, in one goroutine: each
// reply function gets the request and returns the datagrams to send. The
// requests are passed on through the returned channel.
func (k *fakeKernel) serve(replies ...func(req NLMsg) [][]byte) <-chan NLMsg {
	got := make(chan NLMsg, len(replies))
	go func() {
		defer close(got)
		buf := make([]byte, 4096)
		for _, reply := range replies {
			n, err := unix.Read(k.fd, buf)
			if err != nil {
				k.t.Errorf("fake kernel read: %v", err)
				return
			}
			msgs, err := ParseNLMsgs(buf[:n])
			if err != nil || len(msgs) != 1 {
				k.t.Errorf("fake kernel got %v, %v", msgs, err)
				return
			}
			req := msgs[0]
			req.Body = append([]byte(nil), req.Body...)
			got <- req
			for _, d := range reply(req) {
				if _, err := unix.Write(k.fd, d); err != nil {
					k.t.Errorf("fake kernel write: %v", err)
				}
			}
		}
	}()
	return got
}

func TestNLConnDumpAndChardev(t *testing.T) {
	c, k := newFakeConn(t)
	ctx := context.Background()
	reqs := k.serve(func(req NLMsg) [][]byte {
		return [][]byte{
			nlErrReply(req.Seq-1, -int32(unix.EINVAL)), // an old exchange's late reply: ignored
			nlcat(nlDeviceReply(req.Seq, 0, "rxe0", 1), nlDeviceReply(req.Seq, 1, "rxelo", 2)),
			nlDeviceReply(req.Seq, 4, "irdma0", 3),
			nlDone(req.Seq),
		}
	})
	devs, err := c.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if req := <-reqs; req.Type != 0x1401 || req.Flags != unix.NLM_F_REQUEST|unix.NLM_F_DUMP {
		t.Errorf("request %+v", req)
	}
	want := []NLDevice{{0, "rxe0", 1, 1}, {1, "rxelo", 2, 1}, {4, "irdma0", 3, 1}}
	if diff := cmp.Diff(want, devs); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}

	id := uint32(abi.RDMA_DRIVER_IRDMA)
	reqs = k.serve(func(req NLMsg) [][]byte {
		return [][]byte{nlChardevReply(req.Seq, "uverbs2", 1, testChardev, &id), nlErrReply(req.Seq, 0)}
	})
	cd, err := c.Chardev(ctx, 4, "uverbs")
	if err != nil {
		t.Fatal(err)
	}
	req := <-reqs
	attrs, _ := ParseNLAttrs(req.Body)
	if req.Type != 0x140f || len(attrs) != 2 || binary.NativeEndian.Uint32(attrs[0].Data) != 4 || cstring(attrs[1].Data) != "uverbs" {
		t.Errorf("GET_CHARDEV request %+v attrs %+v", req, attrs)
	}
	if diff := cmp.Diff(NLChardev{Name: "uverbs2", ABI: 1, Major: 231, Minor: 192, DriverID: 9, HasDriverID: true}, cd); diff != "" {
		t.Errorf("chardev (-want +got):\n%s", diff)
	}

	// A kernel without GET_CHARDEV answers with an error only.
	k.serve(func(req NLMsg) [][]byte { return [][]byte{nlErrReply(req.Seq, -int32(unix.EOPNOTSUPP))} })
	if _, err := c.Chardev(ctx, 4, "uverbs"); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("Chardev on old kernel: %v", err)
	}
	// An ack without data is malformed for GET_CHARDEV.
	k.serve(func(req NLMsg) [][]byte { return [][]byte{nlErrReply(req.Seq, 0)} })
	if _, err := c.Chardev(ctx, 4, "uverbs"); !errors.Is(err, ErrNLMalformed) {
		t.Errorf("Chardev with bare ack: %v", err)
	}
	// A dump reply that is cut short.
	k.serve(func(req NLMsg) [][]byte { return [][]byte{nlDeviceReply(req.Seq, 0, "rxe0", 1)[:20]} })
	if _, err := c.Devices(ctx); !errors.Is(err, ErrNLMalformed) {
		t.Errorf("Devices with truncated reply: %v", err)
	}
}

func TestNLConnLinks(t *testing.T) {
	c, k := newFakeConn(t)
	ctx := context.Background()
	reqs := k.serve(func(req NLMsg) [][]byte { return [][]byte{nlErrReply(req.Seq, -int32(unix.EEXIST))} })
	if err := c.AddLink(ctx, "rxe0", "rxe", "d0"); !errors.Is(err, unix.EEXIST) {
		t.Errorf("AddLink: %v", err)
	}
	req := <-reqs
	if diff := cmp.Diff(NLNewLinkMsg(req.Seq, "rxe0", "rxe", "d0")[16:], req.Body); diff != "" || req.Type != 0x1403 {
		t.Errorf("NEWLINK request type %#x (-want +got):\n%s", req.Type, diff)
	}
	// DelLink: a dump, then DELLINK of the matching index.
	reqs = k.serve(
		func(req NLMsg) [][]byte { return [][]byte{nlDeviceReply(req.Seq, 6, "rxe0", 1), nlDone(req.Seq)} },
		func(req NLMsg) [][]byte { return [][]byte{nlErrReply(req.Seq, 0)} })
	if err := c.DelLink(ctx, "rxe0"); err != nil {
		t.Fatal(err)
	}
	<-reqs
	if req := <-reqs; req.Type != 0x1404 || cmp.Diff(NLDelLinkMsg(req.Seq, 6), nlcat(nle32(24), nle16(req.Type), nle16(req.Flags), nle32(req.Seq), nle32(0), req.Body)) != "" {
		t.Errorf("DELLINK request %+v", req)
	}
	k.serve(func(req NLMsg) [][]byte { return [][]byte{nlDone(req.Seq)} })
	if err := c.DelLink(ctx, "nosuch"); !errors.Is(err, unix.ENODEV) {
		t.Errorf("DelLink of a missing device: %v", err)
	}
}

// TestNLConnBounded checks that a kernel that never answers cannot hang a
// caller: the context's deadline or cancellation ends the wait.
func TestNLConnBounded(t *testing.T) {
	c, k := newFakeConn(t)
	k.serve(func(NLMsg) [][]byte { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Devices(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Devices with no reply: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}

	k.serve(func(NLMsg) [][]byte { return nil })
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := c.Chardev(ctx, 0, "uverbs"); !errors.Is(err, context.Canceled) {
		t.Errorf("Chardev cancelled: %v", err)
	}

	// The connection still works afterwards (a late reply to the
	// abandoned request is skipped by sequence number).
	k.serve(func(req NLMsg) [][]byte {
		return [][]byte{nlDone(req.Seq - 1), nlDeviceReply(req.Seq, 0, "rxe0", 1), nlDone(req.Seq)}
	})
	if devs, err := c.Devices(context.Background()); err != nil || len(devs) != 1 {
		t.Errorf("Devices after timeouts: %v, %v", devs, err)
	}
	if _, err := c.Devices(canceledCtx()); !errors.Is(err, context.Canceled) {
		t.Errorf("Devices with a cancelled context: %v", err)
	}
}

func canceledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestNLDialReal checks the running kernel's GET dump and GET_CHARDEV
// answers against sysfs, in the VM: the dump lists exactly the devices of
// /sys/class/infiniband (rxe0 and rxelo among them) under distinct indexes,
// each with sysfs's node GUID and port count; rxe0's GUID is the EUI-64 of
// d0's MAC; both rxe devices report the rxe driver id.
func TestNLDialReal(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := DialNL()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	devs, err := c.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]NLDevice{}
	byIndex := map[uint32]string{}
	for _, d := range devs {
		if _, dup := byName[d.Name]; dup {
			t.Errorf("%s listed twice", d.Name)
		}
		if o, dup := byIndex[d.Index]; dup {
			t.Errorf("index %d for both %s and %s", d.Index, o, d.Name)
		}
		byName[d.Name] = d
		byIndex[d.Index] = d.Name
	}

	dirs, err := filepath.Glob("/sys/class/infiniband/*")
	if err != nil {
		t.Fatal(err)
	}
	var sysNames, nlNames []string
	for _, d := range dirs {
		sysNames = append(sysNames, filepath.Base(d))
	}
	for n := range byName {
		nlNames = append(nlNames, n)
	}
	sort.Strings(sysNames)
	sort.Strings(nlNames)
	if diff := cmp.Diff(sysNames, nlNames); diff != "" {
		t.Errorf("devices (-sysfs +netlink):\n%s", diff)
	}
	for _, name := range []string{testkit.RxeDev, testkit.LoopDev} {
		if _, ok := byName[name]; !ok {
			t.Errorf("%s not in the dump %v", name, nlNames)
		}
	}
	for _, name := range sysNames {
		d, ok := byName[name]
		if !ok {
			continue
		}
		if want := sysfsGUID(t, filepath.Join("/sys/class/infiniband", name, "node_guid")); d.NodeGUID != want {
			t.Errorf("%s: node GUID %#016x, sysfs %#016x", name, d.NodeGUID, want)
		}
		ports, err := os.ReadDir(filepath.Join("/sys/class/infiniband", name, "ports"))
		if err != nil {
			t.Fatal(err)
		}
		var last uint32
		for _, p := range ports {
			n, err := strconv.ParseUint(p.Name(), 10, 32)
			if err != nil {
				t.Fatalf("%s: port %q: %v", name, p.Name(), err)
			}
			last = max(last, uint32(n))
		}
		if d.Ports != last || d.Ports == 0 {
			t.Errorf("%s: %d ports, sysfs's last port %d", name, d.Ports, last)
		}
	}
	mac, err := os.ReadFile("/sys/class/net/" + testkit.RxeNetdev + "/address")
	if err != nil {
		t.Fatal(err)
	}
	if want := eui64(t, strings.TrimSpace(string(mac))); byName[testkit.RxeDev].NodeGUID != want {
		t.Errorf("%s: node GUID %#016x, want %#016x (EUI-64 of %s's MAC %s)", testkit.RxeDev, byName[testkit.RxeDev].NodeGUID, want, testkit.RxeNetdev, strings.TrimSpace(string(mac)))
	}

	cds, err := UverbsChardevs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{testkit.RxeDev, testkit.LoopDev} {
		cd, ok := cds[name]
		if !ok {
			t.Errorf("%s: no uverbs chardev in %v", name, cds)
			continue
		}
		if !cd.HasDriverID || cd.DriverID != abi.RDMA_DRIVER_RXE {
			t.Errorf("%s: driver id %d (reported: %v), want RDMA_DRIVER_RXE (%d)", name, cd.DriverID, cd.HasDriverID, abi.RDMA_DRIVER_RXE)
		}
		if cd.Device != byName[name] {
			t.Errorf("%s: device %+v in UverbsChardevs, %+v in the dump", name, cd.Device, byName[name])
		}
		if !strings.HasPrefix(cd.Name, "uverbs") || cd.Major == 0 {
			t.Errorf("%s: chardev %s %d:%d", name, cd.Name, cd.Major, cd.Minor)
		}
	}
}

// sysfsGUID reads a GUID sysfs prints as four big-endian hex groups
// ("0000:00ff:fe99:0001"): the value netlink sends as a u64.
func sysfsGUID(t *testing.T, path string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(strings.ReplaceAll(s, ":", ""), 16, 64)
	if err != nil || strings.Count(s, ":") != 3 {
		t.Fatalf("%s: %q: %v", path, s, err)
	}
	return v
}

// eui64 is the modified EUI-64 of a MAC ("02:00:00:99:00:01"), as rxe
// makes its node GUID: ff:fe in the middle, the universal/local bit flipped.
func eui64(t *testing.T, mac string) uint64 {
	t.Helper()
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		t.Fatalf("MAC %q: %v", mac, err)
	}
	b := []byte{hw[0] ^ 2, hw[1], hw[2], 0xff, 0xfe, hw[3], hw[4], hw[5]}
	return binary.BigEndian.Uint64(b)
}

// FuzzParseNLReply feeds arbitrary datagrams through every reply parser
// and the multi-part collector: they may fail but must never panic, and an
// accepted device or chardev must satisfy the documented invariants.
func FuzzParseNLReply(f *testing.F) {
	id := uint32(14)
	f.Add(nlcat(nlDeviceReply(1, 0, "rxe0", 7), nlDone(1)))
	f.Add(nlChardevReply(1, "uverbs0", 2, testChardev, &id))
	f.Add(nlcat(nlChardevReply(1, "uverbs0", 2, testChardev, nil), nlErrReply(1, 0)))
	f.Add(nlErrReply(1, -22))
	f.Add([]byte{20, 0, 0, 0, 3, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := nlCollector{seq: 1}
		c.feed(b)
		msgs, _ := ParseNLMsgs(b)
		for _, m := range msgs {
			NLMsgErr(m)
			if d, err := ParseNLDevice(m.Body); err == nil && d.Name == "" {
				t.Errorf("device without a name accepted: %+v", d)
			}
			if cd, err := ParseNLChardev(m.Body); err == nil && cd.Name == "" {
				t.Errorf("chardev without a name accepted: %+v", cd)
			}
			ParseNLAttrs(m.Body)
		}
	})
}
