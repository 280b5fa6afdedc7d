/* pv_devindex: each device of libibverbs' list, in its order, with
 * ibv_get_device_index and ibv_get_device_guid, for uverbs'
 * TestVMDeviceIndexAgainstC to compare with Devices. */
#include <stdio.h>
#include <endian.h>
#include <infiniband/verbs.h>

int main(void)
{
	int n, i;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	for (i = 0; i < n; i++)
		printf("%s %d %016llx\n", ibv_get_device_name(list[i]), ibv_get_device_index(list[i]),
		       (unsigned long long)be64toh(ibv_get_device_guid(list[i])));
	ibv_free_device_list(list);
	return 0;
}
