/* pv_rereg DEV: libibverbs' ibv_rereg_mr on DEV, one line per case
 * ("NAME ret R errno E"), for uverbs' TestVMReregMRAgainstC to compare
 * with MR.Rereg. Every case starts from an MR of 4096 bytes registered
 * with IBV_ACCESS_LOCAL_WRITE in a first PD; a case that succeeds
 * re-registers it, so each case gets its own MR. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static struct ibv_pd *pd, *pd2;
static char buf[2][8192] __attribute__((aligned(4096)));

static void run(const char *name, int flags, struct ibv_pd *npd, void *addr,
		size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, buf[0], 4096, IBV_ACCESS_LOCAL_WRITE);
	int ret;

	if (!mr) {
		fprintf(stderr, "pv_rereg: ibv_reg_mr: %s\n", strerror(errno));
		exit(1);
	}
	errno = 0;
	ret = ibv_rereg_mr(mr, flags, npd, addr, len, access);
	printf("%s ret %d errno %d\n", name, ret, ret ? errno : 0);
	if (ibv_dereg_mr(mr)) {
		fprintf(stderr, "pv_rereg: ibv_dereg_mr: %s\n", strerror(errno));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n, i;

	if (argc != 2) {
		fprintf(stderr, "usage: pv_rereg DEV\n");
		return 2;
	}
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "pv_rereg: cannot open %s\n", argv[1]);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	pd2 = ibv_alloc_pd(ctx);
	if (!pd || !pd2) {
		fprintf(stderr, "pv_rereg: ibv_alloc_pd: %s\n", strerror(errno));
		return 1;
	}
	run("access", IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
	    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	run("pd", IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0);
	run("pd+access", IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS, pd2,
	    NULL, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	run("translation", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf[1], 8192, 0);
	run("unknown-flags", 1 << 5, NULL, NULL, 0, 0);
	run("empty-translation", IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf[1], 0, 0);
	run("access-without-flag", IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0,
	    IBV_ACCESS_REMOTE_READ);
	ibv_dealloc_pd(pd2);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
