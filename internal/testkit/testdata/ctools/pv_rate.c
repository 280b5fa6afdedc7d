/* pv_rate: libibverbs' rate conversions (ibv_rate_to_mult, ibv_rate_to_mbps,
 * mult_to_ibv_rate, mbps_to_ibv_rate) over every enum value and around
 * every value they return, one line per call, for uverbs'
 * TestVMRateAgainstC to compare with Rate.Mult, Rate.Mbps, MultToRate
 * and MbpsToRate. */
#include <stdio.h>
#include <infiniband/verbs.h>

int main(void)
{
	int r, m, d;

	for (r = 0; r <= 30; r++)
		printf("rate %d mult %d mbps %d\n", r, ibv_rate_to_mult(r), ibv_rate_to_mbps(r));
	for (m = -1; m <= 500; m++)
		printf("mult %d rate %d\n", m, mult_to_ibv_rate(m));
	printf("mbps -1 rate %d\nmbps 0 rate %d\n", mbps_to_ibv_rate(-1), mbps_to_ibv_rate(0));
	for (r = 0; r <= 30; r++) {
		int b = ibv_rate_to_mbps(r);
		if (b <= 0)
			continue;
		for (d = -1; d <= 1; d++)
			printf("mbps %d rate %d\n", b + d, mbps_to_ibv_rate(b + d));
	}
	return 0;
}
