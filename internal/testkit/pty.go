package testkit

import (
	"fmt"
	"os"
	"strconv"

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

// OpenPTY returns a pseudo-terminal pair (master, slave) set up as for
// peers: raw output, no echo, master non-blocking on the Go poller.
func OpenPTY() (master, slave *os.File, err error) { return openPTY() }
