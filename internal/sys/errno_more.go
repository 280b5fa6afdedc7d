package sys

import "golang.org/x/sys/unix"

// More errno values, for the packages and tests that compare against the
// kernel's answers to DEVX commands and to the ioctl framework.
const (
	EBADF  = unix.EBADF
	EFAULT = unix.EFAULT
	// rdma_cm's address resolution.
	ENETUNREACH = unix.ENETUNREACH
)
