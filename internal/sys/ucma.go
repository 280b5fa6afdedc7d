package sys

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UCMPath is the rdma_cm character device (the kernel's rdma_ucm module).
const UCMPath = "/dev/infiniband/rdma_cm"

// ucmCmdGetEvent and ucmCmdMigrateID are RDMA_USER_CM_CMD_GET_EVENT and
// RDMA_USER_CM_CMD_MIGRATE_ID (rdma/rdma_user_cm.h); sys does not import
// abi here (abi_test.go checks them).
const (
	ucmCmdGetEvent  = 12
	ucmCmdMigrateID = 18
)

// ucmMax bounds a command's request and response: the largest request,
// struct rdma_ucm_resolve_addr or rdma_ucm_join_mcast, is under 300 bytes,
// the largest response, struct rdma_ucm_event_resp, 344.
const ucmMax = 512

// ucmBuf is where a command is built and its response lands: in the heap,
// since the kernel gets the response's address as a number inside the
// request, which the Go runtime would not update if a stack moved.
type ucmBuf struct {
	req  [8 + ucmMax]byte // struct rdma_ucm_cmd_hdr, then the command
	resp [ucmMax]byte
}

// UCM is an open rdma_cm fd (librdmacm's rdma_event_channel): commands
// are write(2)s of a header and a request that names its response's
// address, and events come from the GET_EVENT command, which fails with
// EAGAIN on the non-blocking fd while none is queued, and poll(2) reports
// the fd readable when one is. GetEvent therefore parks on the runtime
// poller as RecordReader does for read(2) (it is a RecordReader whose
// operation is that write).
type UCM struct {
	rr  *RecordReader
	mu  sync.Mutex // serialises commands (cmd, w, werr)
	cmd *ucmBuf
	ev  *ucmBuf // GetEvent's, under the reader's one-reader semaphore

	// A command's write through the reader's Control: the bytes, the
	// error, and the callback, made once (a closure per command would
	// allocate).
	w       []byte
	werr    error
	writeFn func(uintptr)
}

// write is the command's Control callback (under mu).
func (u *UCM) write(fd uintptr) { _, u.werr = writeRaw(int(fd), u.w) }

// send writes w, a command built in u.cmd (under mu): Control's error
// (the fd closed), else the write's.
func (u *UCM) send(w []byte) error {
	u.w, u.werr = w, nil
	cerr := u.rr.ControlRaw(u.writeFn)
	err := u.werr
	u.w, u.werr = nil, nil
	if cerr != nil {
		return cerr
	}
	return err
}

// NotUCMNode reports whether the node at path is certainly not the
// rdma_cm device, from its device number alone: the rdma_cm is a misc
// device (major 10) whose number sysfs gives in
// /sys/class/misc/rdma_cm/dev when it is mounted and the module loaded.
// A path that cannot be examined is not judged here (false).
func NotUCMNode(path string) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 10 {
		return true
	}
	var maj, mnr uint32
	if b, err := os.ReadFile("/sys/class/misc/rdma_cm/dev"); err == nil {
		if _, err := fmt.Sscanf(string(b), "%d:%d", &maj, &mnr); err == nil {
			return maj != unix.Major(st.Rdev) || mnr != unix.Minor(st.Rdev)
		}
	}
	return false
}

// OpenUCM opens path (UCMPath; tests may name another) O_RDWR|O_CLOEXEC,
// non-blocking, on the runtime poller.
func OpenUCM(path string) (*UCM, error) {
	fd, err := Open(path, unix.O_RDWR)
	if err != nil {
		return nil, err
	}
	return newUCM(fd)
}

// newUCM makes a UCM of fd (owned).
func newUCM(fd *FD) (*UCM, error) {
	rr, err := NewRecordReader(fd)
	if err != nil {
		fd.Close()
		return nil, err
	}
	u := &UCM{rr: rr, cmd: new(ucmBuf), ev: new(ucmBuf)}
	u.writeFn = u.write
	rr.SetOp(u.getEvent)
	return u, nil
}

// Fd returns the descriptor (non-blocking), for the caller's own poll.
func (u *UCM) Fd() int { return u.rr.Fd() }

// Close closes the fd, waking a GetEvent with ErrFileClosed; the kernel
// then destroys every id created on it. Idempotent.
func (u *UCM) Close() error { return u.rr.Close() }

// put builds command cmd with request req in b; when resp is not nil, the
// 8 bytes at respOff of the request become the response's address and
// the header's out its length.
func (b *ucmBuf) put(cmd uint32, req []byte, respOff int, resp []byte) []byte {
	le := binary.LittleEndian
	le.PutUint32(b.req[0:], cmd)
	le.PutUint16(b.req[4:], uint16(len(req)))
	le.PutUint16(b.req[6:], uint16(len(resp)))
	copy(b.req[8:], req)
	if resp != nil {
		le.PutUint64(b.req[8+respOff:], uint64(uintptr(unsafe.Pointer(&b.resp[0]))))
		clear(b.resp[:len(resp)])
	}
	return b.req[:8+len(req)]
}

// CommandIn sends rdma_cm command cmd with request req whose 8 bytes at
// argOff name an input buffer the kernel reads (SET_OPTION's optval):
// arg (at most 512 bytes) is copied to a heap buffer and its address put
// there; the header's response length is 0.
func (u *UCM) CommandIn(cmd uint32, req []byte, argOff int, arg []byte) error {
	if len(req) > ucmMax || len(arg) > ucmMax || argOff < 0 || argOff+8 > len(req) {
		return unix.EINVAL
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.cmd
	w := b.put(cmd, req, argOff, arg)
	binary.LittleEndian.PutUint16(b.req[6:], 0)
	copy(b.resp[:], arg)
	return u.send(w)
}

// Command sends rdma_cm command cmd with request req (at most 512
// bytes). When resp is not nil, the request's 8 bytes at respOff are set
// to the address of a buffer of len(resp) bytes that the kernel fills,
// copied to resp on success. The kernel's errno comes back unwrapped.
func (u *UCM) Command(cmd uint32, req []byte, respOff int, resp []byte) error {
	if len(req) > ucmMax || len(resp) > ucmMax || (resp != nil && (respOff < 0 || respOff+8 > len(req))) {
		return unix.EINVAL
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.cmd
	w := b.put(cmd, req, respOff, resp)
	if err := u.send(w); err != nil {
		return err
	}
	copy(resp, b.resp[:len(resp)])
	return nil
}

// getEvent is the reader's operation: one GET_EVENT into buf.
func (u *UCM) getEvent(fd int, buf []byte) (int, error) {
	if len(buf) > ucmMax || len(buf) < 8 {
		return 0, unix.EINVAL
	}
	var get [8]byte // struct rdma_ucm_get_event: the response's address
	w := u.ev.put(ucmCmdGetEvent, get[:], 0, buf)
	if _, err := rwQuick(unix.SYS_WRITE, fd, w); err != nil {
		return 0, err // EAGAIN: none queued (the fd is non-blocking)
	}
	return copy(buf, u.ev.resp[:len(buf)]), nil
}

// GetEvent waits, parked on the runtime poller, for the next event and
// writes its struct rdma_ucm_event_resp into buf (len(buf) bytes of it);
// ctx bounds the wait (ctx.Err()), Close ends it (ErrFileClosed).
func (u *UCM) GetEvent(ctx context.Context, buf []byte) (int, error) {
	return u.rr.Read(ctx, buf)
}

// TryGetEvent is GetEvent without the wait: EAGAIN when none is queued.
func (u *UCM) TryGetEvent(buf []byte) (int, error) { return u.rr.TryRead(buf) }

// Migrate moves the rdma_cm id with handle id, and its events still
// queued, from from's fd to u's: RDMA_USER_CM_CMD_MIGRATE_ID written on u
// naming from's fd, which stays open meanwhile. It returns how many
// events of the id from had reported (struct rdma_ucm_migrate_resp).
// moved runs after a successful move while from's fd is still held, so
// that a Close of from, which waits for it, sees what moved records. A
// GetEvent parked on u then reads again (RecordReader.Kick): the kernel
// wakes no one for the events it moved.
func (u *UCM) Migrate(from *UCM, id uint32, moved func()) (uint32, error) {
	var (
		resp [4]byte
		err  error
	)
	cerr := from.rr.Control(func(fd int) {
		var req [16]byte // struct rdma_ucm_migrate_id: response, id, fd
		binary.LittleEndian.PutUint32(req[8:], id)
		binary.LittleEndian.PutUint32(req[12:], uint32(fd))
		if err = u.Command(ucmCmdMigrateID, req[:], 0, resp[:]); err == nil && moved != nil {
			moved()
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	if err != nil {
		return 0, err
	}
	// The kernel spliced the id's queued events onto u's file without
	// waking its waiters (ucma_migrate_id): a reader parked on u before
	// the move must look again.
	u.rr.Kick()
	return binary.LittleEndian.Uint32(resp[:]), nil
}
