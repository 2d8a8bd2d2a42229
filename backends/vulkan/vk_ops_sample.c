/* vk_ops_sample.c — TOPK (backend.h 1.4, topk.comp): one workgroup per row;
 * TOKEN_MASK (1.6, tokmask.comp): an invocation per 32-token mask word.
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

struct tokmask_push {
	uint32_t n, rows, x_off, x_nb1;
	uint32_t r_off, W, cap, wgroups;
};

enum alice_status vk_op_token_mask(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->dst, *r = a->src[0];
	const uint64_t W = (uint64_t)r->ne[0], cap = (uint64_t)r->ne[1] - 1, wgroups = (W - 1 + 255) / 256;
	if (cap < 1)
		return ALICE_OK;
	if (x->nb[1] % 4 || x->ne[0] > UINT32_MAX / 4 || x->ne[1] > UINT32_MAX || cap * wgroups > UINT32_MAX)
		return vk_fail(ctx, ALICE_ERR_INVALID, "TOKEN_MASK: rows must be 4-byte aligned, sizes below 2^32");
	struct vk_bind b[2];
	enum alice_status st = vk_bind_tensor(ctx, x, &b[0]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, r, &b[1]);
	if (st != ALICE_OK)
		return st;
	struct tokmask_push p = {
		.n = (uint32_t)x->ne[0], .rows = (uint32_t)x->ne[1], .x_off = b[0].rel, .x_nb1 = (uint32_t)x->nb[1],
		.r_off = b[1].rel, .W = (uint32_t)W, .cap = (uint32_t)cap, .wgroups = (uint32_t)wgroups,
	};
	return vk_dispatch(ctx, "tokmask", b, 2, &p, sizeof(p), (uint32_t)(cap * wgroups));
}
