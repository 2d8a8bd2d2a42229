/* vk_ops_mm.c — MUL_MAT and GET_ROWS: shape checks and dispatch of the
 * per-weight-type shader variants (mm_<type>, gr_<type>). */
#include <stdio.h>

#include "vk_internal.h"

#define MM_TILE 8 /* activation columns per workgroup (MT in mm.comp) */

struct mm_push {
	uint32_t K, N, M, ne12;
	uint32_t r2, r3, mtiles, n_wg;
	uint32_t w_off, w_nb1, w_nb2, w_nb3;
	uint32_t x_off, x_nb0, x_nb1, x_nb2;
	uint32_t x_nb3, d_off, d_nb0, d_nb1;
	uint32_t d_nb2, d_nb3;
};

struct gr_push {
	uint32_t ne0, n_rows, src_nrows, n_wg;
	uint32_t s_off, s_nb0, s_nb1, pad0;
	uint32_t i_off, i_ne0, i_ne1, i_nb0;
	uint32_t i_nb1, i_nb2, d_off, d_nb0;
	uint32_t d_nb1, d_nb2, d_nb3, pad1;
};

static enum alice_status bind_all(const struct vk_op_args *a, struct vk_bind *b, int n)
{
	enum alice_status st = vk_bind_tensor(a->ctx, a->dst, &b[0]);
	for (int i = 1; i < n && st == ALICE_OK; i++)
		st = a->src[i - 1] ? vk_bind_tensor(a->ctx, a->src[i - 1], &b[i]) : ALICE_OK;
	return st;
}

enum alice_status vk_op_mul_mat(const struct vk_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *w = a->src[0], *x = a->src[1], *d = a->dst;
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	if (x->ne[0] != K || d->ne[0] != N || d->ne[1] != M || d->ne[2] != x->ne[2] || d->ne[3] != x->ne[3] ||
	    x->ne[2] % w->ne[2] != 0 || x->ne[3] % w->ne[3] != 0)
		return vk_fail(ctx, ALICE_ERR_INVALID,
			       "shapes do not match: w [%lld,%lld,%lld,%lld] x [%lld,%lld,%lld,%lld] dst [%lld,%lld,%lld,%lld]",
			       (long long)w->ne[0], (long long)w->ne[1], (long long)w->ne[2], (long long)w->ne[3],
			       (long long)x->ne[0], (long long)x->ne[1], (long long)x->ne[2], (long long)x->ne[3],
			       (long long)d->ne[0], (long long)d->ne[1], (long long)d->ne[2], (long long)d->ne[3]);
	const struct alice_type_info *ti = alice_type_info(w->type);
	if (ti->block_size == 1 && w->nb[0] != (int64_t)ti->type_size)
		return vk_fail(ctx, ALICE_ERR_INVALID, "weight rows must be contiguous (nb[0] = %lld)", (long long)w->nb[0]);
	uint64_t mtiles = (uint64_t)(M + MM_TILE - 1) / MM_TILE;
	uint64_t n_wg = (uint64_t)N * mtiles * (uint64_t)(x->ne[2] * x->ne[3]);
	if (n_wg > 0xffffffffull / 2)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "matmul too large (%llu workgroups)", (unsigned long long)n_wg);
	struct vk_bind b[3];
	enum alice_status st = bind_all(a, b, 3);
	if (st != ALICE_OK)
		return st;
	struct mm_push p = {
		.K = (uint32_t)K, .N = (uint32_t)N, .M = (uint32_t)M, .ne12 = (uint32_t)x->ne[2],
		.r2 = (uint32_t)(x->ne[2] / w->ne[2]), .r3 = (uint32_t)(x->ne[3] / w->ne[3]),
		.mtiles = (uint32_t)mtiles, .n_wg = (uint32_t)n_wg,
		.w_off = b[1].rel, .w_nb1 = (uint32_t)w->nb[1], .w_nb2 = (uint32_t)w->nb[2], .w_nb3 = (uint32_t)w->nb[3],
		.x_off = b[2].rel, .x_nb0 = (uint32_t)x->nb[0], .x_nb1 = (uint32_t)x->nb[1], .x_nb2 = (uint32_t)x->nb[2],
		.x_nb3 = (uint32_t)x->nb[3], .d_off = b[0].rel, .d_nb0 = (uint32_t)d->nb[0], .d_nb1 = (uint32_t)d->nb[1],
		.d_nb2 = (uint32_t)d->nb[2], .d_nb3 = (uint32_t)d->nb[3],
	};
	char name[32];
	snprintf(name, sizeof(name), "mm_%s", ti->name);
	return vk_dispatch(ctx, name, b, 3, &p, sizeof(p), (uint32_t)n_wg);
}

enum alice_status vk_op_get_rows(const struct vk_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *s = a->src[0], *ids = a->src[1], *d = a->dst;
	if (s->ne[2] != 1 || s->ne[3] != 1 || ids->ne[3] != 1 || d->ne[0] != s->ne[0] || d->ne[1] != ids->ne[0] ||
	    d->ne[2] != ids->ne[1] || d->ne[3] != ids->ne[2])
		return vk_fail(ctx, ALICE_ERR_INVALID,
			       "shapes do not match: src [%lld,%lld,%lld,%lld] ids [%lld,%lld,%lld] dst [%lld,%lld,%lld,%lld]",
			       (long long)s->ne[0], (long long)s->ne[1], (long long)s->ne[2], (long long)s->ne[3],
			       (long long)ids->ne[0], (long long)ids->ne[1], (long long)ids->ne[2], (long long)d->ne[0],
			       (long long)d->ne[1], (long long)d->ne[2], (long long)d->ne[3]);
	const struct alice_type_info *ti = alice_type_info(s->type);
	struct vk_bind b[3];
	enum alice_status st = bind_all(a, b, 3);
	if (st != ALICE_OK)
		return st;
	uint64_t n_rows = (uint64_t)(ids->ne[0] * ids->ne[1] * ids->ne[2]);
	struct gr_push p = {
		.ne0 = (uint32_t)s->ne[0], .n_rows = (uint32_t)n_rows, .src_nrows = (uint32_t)s->ne[1],
		.n_wg = (uint32_t)n_rows, .s_off = b[1].rel, .s_nb0 = (uint32_t)s->nb[0], .s_nb1 = (uint32_t)s->nb[1],
		.i_off = b[2].rel, .i_ne0 = (uint32_t)ids->ne[0], .i_ne1 = (uint32_t)ids->ne[1],
		.i_nb0 = (uint32_t)ids->nb[0], .i_nb1 = (uint32_t)ids->nb[1], .i_nb2 = (uint32_t)ids->nb[2],
		.d_off = b[0].rel, .d_nb0 = (uint32_t)d->nb[0], .d_nb1 = (uint32_t)d->nb[1], .d_nb2 = (uint32_t)d->nb[2],
		.d_nb3 = (uint32_t)d->nb[3],
	};
	char name[32];
	snprintf(name, sizeof(name), "gr_%s", ti->name);
	return vk_dispatch(ctx, name, b, 3, &p, sizeof(p), (uint32_t)n_rows);
}
