/*
 * pv_ctlbench: libibverbs' side of the control-path comparison in
 * docs/performance.md ("Control path"). uverbs' TestVMControlPath runs it
 * beside the same loops in Go (the uverbs test binary re-executed with
 * PUREVERBS_CTLBENCH set), timed and under strace -c.
 *
 *   pv_ctlbench DEVICE OP ITERS
 *
 * OP is one of
 *   query_port  ibv_query_port(ctx, 1, &attr)
 *   cq          ibv_create_cq(ctx, 16, NULL, NULL, 0) + ibv_destroy_cq
 *   open        ibv_open_device + ibv_close_device
 *   getppid     getppid(2): the bare cost of a system call, the floor
 *               under the others
 *
 * The device list is fetched and (except for "open") the device opened
 * before the loop; ITERS / 10 + 1 untimed iterations warm up first (none
 * when ITERS is 0, so that "pv_ctlbench DEV OP 0" makes only the set-up's
 * system calls, which the test subtracts). It prints one line:
 *
 *   ctlbench op=OP iters=N ops=M ns_per_op=X vcsw_per_op=V ivcsw_per_op=I
 *
 * where M counts the warm-up iterations too (for the system call counts)
 * and V and I are the process's voluntary and involuntary context
 * switches during the timed loop (getrusage), per iteration.
 *
 * The rxevm runner compiles every .c file of this directory on the host
 * (gcc -O2, linked against libibverbs.so.1 of Debian's rdma-core 44, as in
 * the guest) into the guest's /usr/bin.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int one(const char *op, struct ibv_device *dev, struct ibv_context *ctx)
{
	if (strcmp(op, "getppid") == 0)
		return syscall(SYS_getppid) > 0 ? 0 : -1;
	if (strcmp(op, "query_port") == 0) {
		struct ibv_port_attr pa;

		return ibv_query_port(ctx, 1, &pa);
	}
	if (strcmp(op, "cq") == 0) {
		struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);

		if (!cq)
			return errno ? errno : -1;
		return ibv_destroy_cq(cq);
	}
	if (strcmp(op, "open") == 0) {
		struct ibv_context *c = ibv_open_device(dev);

		if (!c)
			return errno ? errno : -1;
		return ibv_close_device(c);
	}
	return EINVAL;
}

/* tv_ns returns b - a in nanoseconds. */
static double tv_ns(const struct timeval *b, const struct timeval *a)
{
	return (b->tv_sec - a->tv_sec) * 1e9 + (b->tv_usec - a->tv_usec) * 1e3;
}

static long long now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx = NULL;
	long iters, i;
	long long t0, t1;
	struct rusage r0, r1;
	int n, rc;

	if (argc != 4) {
		fprintf(stderr, "usage: %s DEVICE query_port|cq|open|getppid ITERS\n", argv[0]);
		return 2;
	}
	iters = atol(argv[3]);
	list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	for (int k = 0; k < n; k++)
		if (strcmp(ibv_get_device_name(list[k]), argv[1]) == 0)
			dev = list[k];
	if (!dev) {
		fprintf(stderr, "no device %s\n", argv[1]);
		return 1;
	}
	if (strcmp(argv[2], "open") != 0) {
		ctx = ibv_open_device(dev);
		if (!ctx) {
			perror("ibv_open_device");
			return 1;
		}
	}
	for (i = 0; iters > 0 && i < iters / 10 + 1; i++)
		if ((rc = one(argv[2], dev, ctx)) != 0) {
			fprintf(stderr, "%s (warm-up): %s\n", argv[2], strerror(rc));
			return 1;
		}
	getrusage(RUSAGE_SELF, &r0);
	t0 = now();
	for (i = 0; i < iters; i++)
		if ((rc = one(argv[2], dev, ctx)) != 0) {
			fprintf(stderr, "%s: %s\n", argv[2], strerror(rc));
			return 1;
		}
	t1 = now();
	getrusage(RUSAGE_SELF, &r1);
	printf("ctlbench op=%s iters=%ld ops=%ld ns_per_op=%.0f vcsw_per_op=%.3f ivcsw_per_op=%.3f user_ns_per_op=%.0f sys_ns_per_op=%.0f\n",
	       argv[2], iters, iters > 0 ? iters + iters / 10 + 1 : 0, iters ? (double)(t1 - t0) / iters : 0.0,
	       iters ? (double)(r1.ru_nvcsw - r0.ru_nvcsw) / iters : 0.0,
	       iters ? (double)(r1.ru_nivcsw - r0.ru_nivcsw) / iters : 0.0,
	       iters ? tv_ns(&r1.ru_utime, &r0.ru_utime) / iters : 0.0,
	       iters ? tv_ns(&r1.ru_stime, &r0.ru_stime) / iters : 0.0);
	if (ctx)
		ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
