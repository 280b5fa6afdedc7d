/*
 * pv_ahwc: libibverbs' ibv_init_ah_from_wc(3) over given inputs, the C
 * side of uverbs' TestVMAHAttrFromWCAgainstC, which feeds the same lines
 * to Context.AHAttrFromWC and compares the output line by line.
 *
 *   pv_ahwc DEVICE < lines
 *
 * Each input line is
 *
 *   PORT SLID SL DLID_PATH_BITS WC_FLAGS GRH
 *
 * (decimal numbers; GRH is the 40 bytes of struct ibv_grh in 80 hex
 * digits, as a UD receive finds them at the start of its buffer). Each
 * output line is
 *
 *   ok global=G dgid=HEX flow=F sgid_index=I hop=H tclass=T dlid=D sl=S path_bits=P port=N
 *
 * or "err" when ibv_init_ah_from_wc fails.
 *
 * The rxevm runner compiles every .c file of this directory on the host
 * (gcc -O2, linked against libibverbs.so.1 of Debian's rdma-core 44, as in
 * the guest) into the guest's /usr/bin.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int unhex(const char *s, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned int b;
		if (sscanf(s + 2 * i, "%2x", &b) != 1)
			return -1;
		out[i] = (unsigned char)b;
	}
	return s[2 * n] == '\0' || s[2 * n] == '\n' ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	char line[512];
	int i;

	if (argc != 2) {
		fprintf(stderr, "usage: pv_ahwc DEVICE < lines\n");
		return 2;
	}
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "pv_ahwc: cannot open %s\n", argv[1]);
		return 1;
	}
	while (fgets(line, sizeof(line), stdin)) {
		unsigned int port, slid, sl, bits, flags;
		char hex[128];
		struct ibv_wc wc;
		struct ibv_grh grh;
		struct ibv_ah_attr ah;

		if (sscanf(line, "%u %u %u %u %u %127s", &port, &slid, &sl, &bits, &flags, hex) != 6 ||
		    strlen(hex) != 2 * sizeof(grh) || unhex(hex, (unsigned char *)&grh, sizeof(grh))) {
			fprintf(stderr, "pv_ahwc: bad line: %s", line);
			return 2;
		}
		memset(&wc, 0, sizeof(wc));
		wc.slid = slid;
		wc.sl = sl;
		wc.dlid_path_bits = bits;
		wc.wc_flags = flags;
		if (ibv_init_ah_from_wc(ctx, port, &wc, &grh, &ah)) {
			printf("err\n");
			continue;
		}
		printf("ok global=%u dgid=", ah.is_global);
		for (i = 0; i < 16; i++)
			printf("%02x", ah.grh.dgid.raw[i]);
		printf(" flow=%u sgid_index=%u hop=%u tclass=%u dlid=%u sl=%u path_bits=%u port=%u\n",
		       ah.grh.flow_label, ah.grh.sgid_index, ah.grh.hop_limit, ah.grh.traffic_class,
		       ah.dlid, ah.sl, ah.src_path_bits, ah.port_num);
	}
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
