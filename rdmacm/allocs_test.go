package rdmacm

import (
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// nullChannel is a channel whose commands go to /dev/null: every write
// succeeds and every response reads as zeros.
func nullChannel(tb testing.TB) *EventChannel {
	tb.Helper()
	u, err := sys.OpenUCM("/dev/null")
	if err != nil {
		tb.Fatal(err)
	}
	ch := newChannel(u)
	tb.Cleanup(func() { ch.Close() })
	return ch
}

// TestCommandNoAllocs: an rdma_cm command (with a response, and with an
// input argument) allocates nothing: it is built in the channel's buffer
// and written through a callback made once.
func TestCommandNoAllocs(t *testing.T) {
	ch := nullChannel(t)
	req := abi.RdmaUcmDestroyId{Id: 1}
	var resp abi.RdmaUcmDestroyIdResp
	testkit.NoAllocs(t, 200, func() {
		if err := ch.command("destroy_id", abi.RDMA_USER_CM_CMD_DESTROY_ID, sys.AsBytes(&req), 0, sys.AsBytes(&resp)); err != nil {
			t.Fatal(err)
		}
	})
	opt := abi.RdmaUcmSetOption{Id: 1, Level: abi.RDMA_OPTION_ID, Optname: abi.RDMA_OPTION_ID_TOS, Optlen: 1}
	val := []byte{1}
	testkit.NoAllocs(t, 200, func() {
		if err := ch.commandIn("set_option", abi.RDMA_USER_CM_CMD_SET_OPTION, sys.AsBytes(&opt), 0, val); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkCreateDestroyID: an ID's create and destroy, commands to
// /dev/null: what the library adds to the kernel's two commands (one
// allocation: the ID).
func BenchmarkCreateDestroyID(b *testing.B) {
	ch := nullChannel(b)
	b.ReportAllocs()
	for b.Loop() {
		id, err := ch.CreateID(PortSpaceTCP)
		if err != nil {
			b.Fatal(err)
		}
		if err := id.Destroy(); err != nil {
			b.Fatal(err)
		}
	}
}
