/*
 * Prints the golden values of dest_test.go and summary_test.go from the C
 * code itself: rdma-core v44's libibverbs/examples/pingpong.c (fetch it
 * next to this file), glibc's inet_ntop, and the summary arithmetic of the
 * *_pingpong.c main()s. infiniband/verbs.h here is a stub holding only what
 * pingpong.c needs.
 *
 *   git -C rdma-core show v44.0:libibverbs/examples/pingpong.c > pingpong.c
 *   git -C rdma-core show v44.0:libibverbs/examples/pingpong.h > pingpong.h
 *   gcc -I. -o golden golden.c pingpong.c && ./golden
 */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include "pingpong.h"

static void gid(unsigned i, const char *ip)
{
	union ibv_gid g, back;
	char w[33], txt[64];
	char msg[sizeof "0000:000000:000000:00000000000000000000000000000000"];

	inet_pton(AF_INET6, ip, &g);
	gid_to_wire_gid(&g, w);
	wire_gid_to_gid(w, &back);
	inet_ntop(AF_INET6, &g, txt, sizeof txt);
	sprintf(msg, "%04x:%06x:%06x:%s", i, 0x11 + i, 0xabcdef - i, w);
	printf("\t{\"%s\", \"%s\", \"%s\", %d},\n", txt, w, msg, memcmp(&g, &back, 16) == 0);
}

static void summary(unsigned size, unsigned iters, long us)
{
	float usec = us;
	long long bytes = (long long) size * iters * 2;
	char a[200], b[200];

	snprintf(a, sizeof a, "%lld bytes in %.2f seconds = %.2f Mbit/sec", bytes, usec / 1000000., bytes * 8. / usec);
	snprintf(b, sizeof b, "%d iters in %.2f seconds = %.2f usec/iter", iters, usec / 1000000., usec / iters);
	printf("\t{%u, %u, %ld, \"%s\\n%s\\n\"},\n", size, iters, us, a, b);
}

int main(void)
{
	const char *ips[] = {"::ffff:10.99.0.1", "fe80::200:ff:fe00:0", "::ffff:127.0.0.1", "::1", "::",
			     "fe80::ff:fe99:1", "2001:db8::1:0:0:1", "fd00:98::5", "::10.1.2.3",
			     "1:0:0:2:0:0:0:3", "1:2:3:4:5:6:7:8", "0:0:1::"};

	for (unsigned i = 0; i < sizeof ips / sizeof ips[0]; i++)
		gid(i, ips[i]);
	summary(4096, 1000, 123456); summary(1, 1000, 98765); summary(65536, 1000, 3456789);
	summary(64, 100000, 16777217); summary(64, 1000, 0); summary(4096, 0, 0); summary(4096, 0, 1500);
	summary(1024, 3, 7); summary(4294967295u, 2, 1000001); summary(4096, 5000, 125);
	summary(17, 999, 33333335);
	return 0;
}
