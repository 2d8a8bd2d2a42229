/* vk_ops_sample.c — TOPK (backend.h 1.4, topk.comp): one workgroup per row.
 * SAMPLE_TEMP is not here (its block sums are doubles, which many of the
 * boards this backend is for cannot compute): those rows are read whole. */
#include "vk_internal.h"

struct topk_push {
	uint32_t n, k, rows, x_off;
	uint32_t x_nb1, d_off;
};

enum alice_status vk_op_topk(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->src[0], *d = a->dst;
	if (x->nb[1] % 4 || x->ne[0] > UINT32_MAX / 4 || x->ne[1] > UINT32_MAX)
		return vk_fail(ctx, ALICE_ERR_INVALID, "TOPK: rows must be 4-byte aligned");
	struct vk_bind b[2];
	enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, x, &b[1]);
	if (st != ALICE_OK)
		return st;
	struct topk_push p = {
		.n = (uint32_t)x->ne[0], .k = (uint32_t)a->node->ip[0], .rows = (uint32_t)x->ne[1], .x_off = b[1].rel,
		.x_nb1 = (uint32_t)x->nb[1], .d_off = b[0].rel,
	};
	return vk_dispatch(ctx, "topk", b, 2, &p, sizeof(p), (uint32_t)x->ne[1]);
}
