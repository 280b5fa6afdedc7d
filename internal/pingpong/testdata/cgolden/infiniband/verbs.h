/* stub: only what pingpong.c needs, layouts as in rdma-core v44 verbs.h */
#include <stdint.h>
#include <linux/types.h>
union ibv_gid { uint8_t raw[16]; struct { __be64 subnet_prefix; __be64 interface_id; } global; };
enum ibv_mtu { IBV_MTU_256 = 1, IBV_MTU_512 = 2, IBV_MTU_1024 = 3, IBV_MTU_2048 = 4, IBV_MTU_4096 = 5 };
struct ibv_context; struct ibv_port_attr;
static inline int ibv_query_port(struct ibv_context *c, uint8_t p, struct ibv_port_attr *a) { return 0; }
