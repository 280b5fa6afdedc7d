package testkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns a pseudo-terminal pair. Peers write to the slave, so C
// stdio sees a terminal and line-buffers its output (on a pipe it would hold
// everything until exit, and WaitForOutput could never see a prompt). Output
// post-processing (\n -> \r\n) and echo are switched off.
func openPTY() (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("ptsname: %w", err)
	}
	// A non-blocking fd makes the *os.File use the poller: Close then
	// interrupts a pending Read.
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	sfd := int(slave.Fd())
	if t, err := unix.IoctlGetTermios(sfd, unix.TCGETS); err == nil {
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ICANON | unix.ISIG
		_ = unix.IoctlSetTermios(sfd, unix.TCSETS, t)
	}
	return master, slave, nil
}

// PTY is a pseudo-terminal that one program writes its stdout and
// stderr to (Slave), as openPTY sets it up, and that copies what arrives
// to a writer as it comes.
//
// It keeps its own Slave open until Finish, and Finish, once the program
// has exited, reads what is left with non-blocking reads until there is
// nothing more. It does not wait for the master's EIO (every holder of
// the slave gone) and then for the poller: on 6.12 the master's reader
// now and then is not woken for the program's last write and close
// (TestPeerOutputComplete: about one exit in two thousand), and the last
// line was lost. A read that finds the master empty waits for the data
// still on its way from the slave first, so the drain misses nothing the
// program wrote before it exited.
type PTY struct {
	Slave  *os.File
	master *os.File
	out    io.Writer
	copied chan struct{}
}

// OpenPTY opens a pseudo-terminal (openPTY) and starts copying what is
// written to its slave to out.
func OpenPTY(out io.Writer) (*PTY, error) {
	master, slave, err := openPTY()
	if err != nil {
		return nil, err
	}
	p := &PTY{Slave: slave, master: master, out: out, copied: make(chan struct{})}
	go func() {
		defer close(p.copied)
		io.Copy(out, master) // until Finish's deadline
	}()
	return p, nil
}

// Finish copies what the program wrote and the copying has not reached
// yet, and closes the terminal. Call it once the program (and anything
// else given Slave) has exited; what is written to Slave after Finish is
// lost.
func (p *PTY) Finish() {
	p.master.SetReadDeadline(time.Now()) // ends the copying's pending Read
	<-p.copied
	p.master.SetReadDeadline(time.Time{})
	if rc, err := p.master.SyscallConn(); err == nil {
		buf := make([]byte, 4096)
		rc.Read(func(fd uintptr) bool {
			for {
				n, err := unix.Read(int(fd), buf)
				if n > 0 {
					p.out.Write(buf[:n])
					continue
				}
				if !errors.Is(err, unix.EINTR) {
					return true // EAGAIN: drained (the slave is still open: no EOF, no EIO)
				}
			}
		})
	}
	p.Slave.Close()
	p.master.Close()
}
