// Package sys owns every raw system call and every use of unsafe in
// pureverbs: the RDMA_VERBS_IOCTL entry point, the uverbs write() paths,
// mmap/munmap, owned file descriptors (O_CLOEXEC, close-once, leak tracing)
// and the runtime-poller plumbing for the kernel's event fds.
//
// No other library package may import unsafe, syscall or
// golang.org/x/sys/unix; scripts/check-imports.sh enforces that.
package sys
