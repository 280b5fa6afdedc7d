package rdmacm_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// cmatoseMsgs is how many messages of 100 bytes ucmatose sends each way
// (-C, -S): the server sends first, the client answers.
const cmatoseMsgs = 3

// completions polls n completions of e's CQ and counts its sends and
// receives (every receive must be of 100 bytes).
func (e *end) completions(ctx context.Context, n int) (sends, recvs int) {
	e.t.Helper()
	for range n {
		wc := e.wc(ctx)
		switch wc.Opcode {
		case uverbs.WCSend:
			sends++
		case uverbs.WCRecv:
			if wc.ByteLen != 100 {
				e.t.Fatalf("received %d bytes, want 100", wc.ByteLen)
			}
			recvs++
		}
	}
	return sends, recvs
}

// TestVMCmatoseAgainstC: rdmacm against rdmacm-utils' ucmatose (cmatose),
// in PortSpaceTCP and PortSpaceIB (ucmatose -P ib, which rdma_create_id
// makes RC). The Go server accepts ucmatose's connection, sends three
// messages, receives its three replies and disconnects; the Go client
// receives a ucmatose server's (-m: it moves its IDs to a new channel
// before disconnecting) three messages, replies, moves its own ID to a
// second channel with Migrate and gets the server's DISCONNECTED there.
// ucmatose exits 0 each time. An IB-space request to a TCP-space listener
// is refused (REJECTED, reason 8): the port spaces' service IDs differ.
func TestVMCmatoseAgainstC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		ps   rdmacm.PortSpace
		args []string
	}{{"tcp", rdmacm.PortSpaceTCP, nil}, {"ib", rdmacm.PortSpaceIB, []string{"-P", "ib"}}} {
		msgs := []string{"-C", fmt.Sprint(cmatoseMsgs), "-S", "100"}
		t.Run(c.name+"/go-server", func(t *testing.T) {
			ch := openChannel(t)
			listen := listener(t, ch, c.ps, 0)
			port := fmt.Sprint(listen.LocalAddr().Port())
			cl := testkit.StartPeer(ctx, t, "ucmatose", append(append([]string{"-s", testkit.RxeAddr, "-p", port}, c.args...), msgs...)...)
			req := want(ctx, t, ch, rdmacm.EventConnectRequest)
			sid := req.ID
			server := newEnd(t, sid)
			defer server.close()
			for i := range cmatoseMsgs {
				server.recv(i*100, 100)
			}
			if err := sid.Accept(&rdmacm.ConnParam{InitiatorDepth: 1, ResponderResources: 1}); err != nil {
				t.Fatalf("Accept: %v", err)
			}
			want(ctx, t, ch, rdmacm.EventEstablished)
			for range cmatoseMsgs {
				server.send(1024, 100)
			}
			if s, r := server.completions(ctx, 2*cmatoseMsgs); s != cmatoseMsgs || r != cmatoseMsgs {
				t.Fatalf("%d sends and %d receives completed, want %d each", s, r, cmatoseMsgs)
			}
			if err := sid.Disconnect(); err != nil {
				t.Fatal(err)
			}
			want(ctx, t, ch, rdmacm.EventDisconnected)
			if err := cl.Wait(); err != nil || !strings.HasSuffix(cl.Output(), "return status 0\n") {
				t.Fatalf("ucmatose client: %v\n%s", err, cl.Output())
			}
			sid.Destroy()
			listen.Destroy()
		})
		t.Run(c.name+"/go-client", func(t *testing.T) {
			ch, ch2 := openChannel(t), openChannel(t)
			port := freePort(t)
			srv := testkit.StartCMServer(ctx, t, int(port), "ucmatose", append(append([]string{"-b", testkit.RxeAddr, "-p", fmt.Sprint(port), "-m"}, c.args...), msgs...)...)
			// The listener shows LISTEN a moment before the kernel's IB
			// CM takes its requests (cma.c: the state, then
			// cma_ib_listen): a request in that window is rejected
			// (reason 8), and tried again.
			var cid *rdmacm.ID
			var client *end
			defer func() {
				if client != nil {
					client.close()
				}
			}()
			for attempt := 1; ; attempt++ {
				cid = resolvePS(ctx, t, ch, c.ps, netipAddrPort(port))
				client = newEnd(t, cid)
				for i := range cmatoseMsgs {
					client.recv(i*100, 100)
				}
				if err := cid.Connect(&rdmacm.ConnParam{InitiatorDepth: 1, ResponderResources: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
					t.Fatalf("Connect: %v", err)
				}
				ev, err := ch.GetEvent(ctx)
				if err != nil {
					t.Fatalf("connecting to ucmatose: %v", err)
				}
				if ev.Type == rdmacm.EventEstablished {
					break
				}
				// Only the race: reason 8 (no listener yet), or a SIDR
				// reply's -EINVAL, with the server still running.
				race := ev.Type == rdmacm.EventRejected && ev.Status == 8 || ev.Type == rdmacm.EventUnreachable && ev.Status == -22
				if !race || !srv.Running() || attempt == 3 {
					t.Fatalf("connecting to ucmatose: %v", &ev)
				}
				t.Logf("attempt %d: %v", attempt, &ev)
				cid.Destroy()
				client.close()
			}
			if _, r := client.completions(ctx, cmatoseMsgs); r != cmatoseMsgs {
				t.Fatalf("%d receives completed, want %d", r, cmatoseMsgs)
			}
			for range cmatoseMsgs {
				client.send(1024, 100)
			}
			if s, _ := client.completions(ctx, cmatoseMsgs); s != cmatoseMsgs {
				t.Fatalf("%d sends completed, want %d", s, cmatoseMsgs)
			}
			if err := cid.Migrate(ch2); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			want(ctx, t, ch2, rdmacm.EventDisconnected)
			noEvent(t, ch, "the channel the client left")
			if err := cid.Disconnect(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Wait(); err != nil || !strings.Contains(srv.Output(), "migrating to new event channel") || !strings.HasSuffix(srv.Output(), "return status 0\n") {
				t.Fatalf("ucmatose -m server: %v\n%s", err, srv.Output())
			}
			cid.Destroy()
		})
	}
	t.Run("ib-to-tcp", func(t *testing.T) {
		ch := openChannel(t)
		listen := listener(t, ch, rdmacm.PortSpaceTCP, 0)
		out, err := testkit.RunPeer(ctx, t, "ucmatose", "-s", testkit.RxeAddr, "-p", fmt.Sprint(listen.LocalAddr().Port()), "-P", "ib", "-C", "0")
		if testkit.ExitStatus(err) != 8 || !strings.Contains(out, "cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8") {
			t.Fatalf("ucmatose -P ib against a TCP-space listener: %v\n%s", err, out)
		}
		noEvent(t, ch, "the TCP-space listener")
		listen.Destroy()
	})
}

// netipAddrPort is rxe0's address at port.
func netipAddrPort(port uint16) netip.AddrPort { return netip.AddrPortFrom(rxeAddr, port) }
