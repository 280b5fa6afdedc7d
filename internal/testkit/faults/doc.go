// Package faults holds the fault-injection tests of the rdma_rxe VM suite
// (issue 11's "Faults", single-host parts): the link going down under
// traffic, a peer process killed mid-transfer, Close while a goroutine is
// blocked in each kind of wait, a device node the user may not open,
// RLIMIT_MEMLOCK too low to register memory, and more objects than the
// device allows. It has no code of its own: everything is in its tests,
// which run as root in the guest and re-run their own binary as a peer
// process or as an unprivileged child (see TestMain).
package faults
