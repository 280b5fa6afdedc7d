/* pv_pkey DEV: libibverbs' ibv_query_pkey and ibv_get_pkey_index on DEV,
 * one line per call, for uverbs' TestVMPKeyAgainstC to compare with
 * Context.QueryPKey and Context.PKeyIndex. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <endian.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n, port, i;
	static const unsigned short keys[] = {0xffff, 0x7fff, 0x1234};

	if (argc != 2) {
		fprintf(stderr, "usage: pv_pkey DEV\n");
		return 2;
	}
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "pv_pkey: cannot open %s\n", argv[1]);
		return 1;
	}
	for (port = 1; port <= 2; port++) {
		for (i = 0; i < 3; i++) {
			__be16 pkey;
			errno = 0;
			if (ibv_query_pkey(ctx, port, i, &pkey))
				printf("query %d %d err %d\n", port, i, errno);
			else
				printf("query %d %d ok 0x%04x\n", port, i, be16toh(pkey));
		}
		for (i = 0; i < 3; i++) {
			int r;
			errno = 0;
			r = ibv_get_pkey_index(ctx, port, htobe16(keys[i]));
			if (r < 0)
				printf("index %d 0x%04x err %d\n", port, keys[i], errno);
			else
				printf("index %d 0x%04x ok %d\n", port, keys[i], r);
		}
	}
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
