/* vk_ops_ew.c — element-wise ops (ew.comp: ADD, MUL, SCALE, SOFTCAP, GLU,
 * UNARY, COPY), RMS_NORM / L2_NORM (norm.comp) and ROPE (rope.comp):
 * shape checks as the CPU reference makes them, then one dispatch. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

struct ew_push {
	uint32_t dne[4], dnb[4], ane[4], anb[4], bne[4], bnb[4];
	uint32_t d_off, a_off, b_off, code;
	float f0, f1;
};

struct norm_push {
	uint32_t ne0, ne1, ne2, n_rows;
	uint32_t x_off, x_nb0, x_nb1, x_nb2;
	uint32_t x_nb3, d_off, d_nb0, d_nb1;
	uint32_t d_nb2, d_nb3, w_off, w_nb0;
	uint32_t w_ne1, w_ne2, w_ne3, w_nb1;
	uint32_t w_nb2, w_nb3, mode, has_w;
	float eps;
};

struct rope_push {
	uint32_t ne0, ne1, ne2, ne3;
	uint32_t x_off, x_nb0, x_nb1, x_nb2;
	uint32_t x_nb3, d_off, d_nb0, d_nb1;
	uint32_t d_nb2, d_nb3, p_off, p_nb0;
	uint32_t f_off, f_nb0, has_f, n_dims;
	uint32_t mode, s0, s1, s2;
	uint32_t s3, pad;
	float theta_scale, fscale;
};

static enum alice_status bind_srcs(const struct alice_op_args *a, struct vk_bind *b, int n)
{
	memset(b, 0, sizeof(*b) * (size_t)n);
	enum alice_status st = vk_bind_tensor(a->ctx, a->dst, &b[0]);
	for (int i = 1; i < n && st == ALICE_OK; i++)
		if (a->src[i - 1])
			st = vk_bind_tensor(a->ctx, a->src[i - 1], &b[i]);
	return st;
}

static uint32_t groups_for(uint64_t n, uint32_t local)
{
	return (uint32_t)((n + local - 1) / local);
}

enum alice_status vk_op_ew(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_node *n = a->node;
	const struct alice_tensor *s0 = a->src[0], *s1 = a->src[1], *d = a->dst;
	if (n->op == ALICE_OP_COPY) {
		if (vk_nelem(s0) != vk_nelem(d))
			return vk_fail(ctx, ALICE_ERR_INVALID, "COPY: %lld elements into %lld", (long long)vk_nelem(s0),
				       (long long)vk_nelem(d));
	} else if (!vk_same_shape(s0, d)) {
		return vk_fail(ctx, ALICE_ERR_INVALID, "dst shape differs from src0");
	}
	if (n->op == ALICE_OP_ADD || n->op == ALICE_OP_MUL)
		for (int k = 0; k < ALICE_MAX_DIMS; k++)
			if (s0->ne[k] % s1->ne[k] != 0)
				return vk_fail(ctx, ALICE_ERR_INVALID, "src1 does not broadcast over src0 in dim %d (%lld vs %lld)",
					       k, (long long)s1->ne[k], (long long)s0->ne[k]);
	if (n->op == ALICE_OP_GLU && !vk_same_shape(s0, s1))
		return vk_fail(ctx, ALICE_ERR_INVALID, "GLU: src1 shape differs from src0");
	if (n->op == ALICE_OP_SOFTCAP && (!(n->fp[0] != 0.0f) || !isfinite(n->fp[0])))
		return vk_fail(ctx, ALICE_ERR_INVALID, "soft-cap %g must be finite and non-zero", n->fp[0]);
	uint64_t total = (uint64_t)vk_nelem(d);
	if (total > 0xffffffffull)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "too many elements (%llu)", (unsigned long long)total);
	struct vk_bind b[3];
	enum alice_status st = bind_srcs(a, b, s1 ? 3 : 2);
	if (st != ALICE_OK)
		return st;
	struct ew_push p;
	memset(&p, 0, sizeof(p));
	for (int k = 0; k < 4; k++) {
		p.dne[k] = (uint32_t)d->ne[k];
		p.dnb[k] = (uint32_t)d->nb[k];
		p.ane[k] = (uint32_t)s0->ne[k];
		p.anb[k] = (uint32_t)s0->nb[k];
		p.bne[k] = s1 ? (uint32_t)s1->ne[k] : 1;
		p.bnb[k] = s1 ? (uint32_t)s1->nb[k] : 0;
	}
	p.d_off = b[0].rel;
	p.a_off = b[1].rel;
	p.b_off = s1 ? b[2].rel : 0;
	uint32_t act = (n->op == ALICE_OP_GLU || n->op == ALICE_OP_UNARY) ? (uint32_t)n->ip[0] : 0;
	p.code = n->op | (act << 8) | ((s0->type & 0xffu) << 16) | ((d->type & 0xffu) << 24);
	p.f0 = n->fp[0];
	p.f1 = n->fp[1];
	return vk_dispatch(ctx, "ew", b, s1 ? 3 : 2, &p, sizeof(p), groups_for(total, 256));
}

enum alice_status vk_op_norm(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	bool l2 = a->node->op == ALICE_OP_L2_NORM;
	const struct alice_tensor *x = a->src[0], *w = l2 ? NULL : a->src[1], *d = a->dst;
	if (!vk_same_shape(x, d))
		return vk_fail(ctx, ALICE_ERR_INVALID, "dst shape differs from src0");
	if (w && (w->ne[0] != x->ne[0] || x->ne[1] % w->ne[1] || x->ne[2] % w->ne[2] || x->ne[3] % w->ne[3]))
		return vk_fail(ctx, ALICE_ERR_INVALID, "weight [%lld,...] does not broadcast over x [%lld,...]",
			       (long long)w->ne[0], (long long)x->ne[0]);
	if (!(a->node->fp[0] >= 0.0f))
		return vk_fail(ctx, ALICE_ERR_INVALID, "eps must be >= 0");
	if (!l2) {
		bool done = false;
		enum alice_status st = vk_norm_addnorm(a, &done);
		if (st != ALICE_OK || done)
			return st;
	}
	struct vk_bind b[3];
	enum alice_status st = bind_srcs(a, b, w ? 3 : 2);
	if (st != ALICE_OK)
		return st;
	uint64_t rows = (uint64_t)(x->ne[1] * x->ne[2] * x->ne[3]);
	struct norm_push p = {
		.ne0 = (uint32_t)x->ne[0], .ne1 = (uint32_t)x->ne[1], .ne2 = (uint32_t)x->ne[2], .n_rows = (uint32_t)rows,
		.x_off = b[1].rel, .x_nb0 = (uint32_t)x->nb[0], .x_nb1 = (uint32_t)x->nb[1], .x_nb2 = (uint32_t)x->nb[2],
		.x_nb3 = (uint32_t)x->nb[3], .d_off = b[0].rel, .d_nb0 = (uint32_t)d->nb[0], .d_nb1 = (uint32_t)d->nb[1],
		.d_nb2 = (uint32_t)d->nb[2], .d_nb3 = (uint32_t)d->nb[3],
		.w_off = w ? b[2].rel : 0, .w_nb0 = w ? (uint32_t)w->nb[0] : 0,
		.w_ne1 = w ? (uint32_t)w->ne[1] : 1, .w_ne2 = w ? (uint32_t)w->ne[2] : 1, .w_ne3 = w ? (uint32_t)w->ne[3] : 1,
		.w_nb1 = w ? (uint32_t)w->nb[1] : 0, .w_nb2 = w ? (uint32_t)w->nb[2] : 0, .w_nb3 = w ? (uint32_t)w->nb[3] : 0,
		.mode = l2 ? 1u : 0u, .has_w = w ? 1u : 0u, .eps = a->node->fp[0],
	};
	return vk_dispatch(ctx, "norm", b, w ? 3 : 2, &p, sizeof(p), (uint32_t)rows);
}

enum alice_status vk_op_rope(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_node *n = a->node;
	const struct alice_tensor *x = a->src[0], *pos = a->src[1], *ff = a->src[2], *d = a->dst;
	int n_dims = n->ip[0], mode = n->ip[1];
	float base = n->fp[0], fscale = n->fp[1];
	if (!vk_same_shape(x, d))
		return vk_fail(ctx, ALICE_ERR_INVALID, "dst shape differs from src0");
	if (n_dims <= 0 || n_dims % 2 || n_dims > x->ne[0])
		return vk_fail(ctx, ALICE_ERR_INVALID, "n_dims %d must be even and in 2..%lld", n_dims, (long long)x->ne[0]);
	int64_t npos = (mode == ALICE_ROPE_IMROPE ? 4 : 1) * x->ne[2];
	if (pos->ne[0] != npos || pos->ne[1] * pos->ne[2] * pos->ne[3] != 1)
		return vk_fail(ctx, ALICE_ERR_INVALID, "positions: %lld values, need %lld", (long long)vk_nelem(pos),
			       (long long)npos);
	if (ff && ff->ne[0] < n_dims / 2)
		return vk_fail(ctx, ALICE_ERR_INVALID, "frequency factors: %lld values, need %d", (long long)ff->ne[0],
			       n_dims / 2);
	if (!(base > 0.0f) || !isfinite(fscale))
		return vk_fail(ctx, ALICE_ERR_INVALID, "freq_base %g / freq_scale %g", base, fscale);
	uint32_t sect[4] = {0, 0, 0, 0};
	if (mode == ALICE_ROPE_IMROPE) {
		int sum = 0;
		for (int s = 0; s < 4; s++) {
			if (n->ip[2 + s] < 0)
				return vk_fail(ctx, ALICE_ERR_INVALID, "negative IMROPE section");
			sect[s] = (uint32_t)n->ip[2 + s];
			sum += n->ip[2 + s];
		}
		if (sum <= 0)
			return vk_fail(ctx, ALICE_ERR_INVALID, "IMROPE sections sum to 0");
	}
	struct vk_bind b[4];
	enum alice_status st = bind_srcs(a, b, ff ? 4 : 3);
	if (st != ALICE_OK)
		return st;
	struct rope_push p = {
		.ne0 = (uint32_t)x->ne[0], .ne1 = (uint32_t)x->ne[1], .ne2 = (uint32_t)x->ne[2], .ne3 = (uint32_t)x->ne[3],
		.x_off = b[1].rel, .x_nb0 = (uint32_t)x->nb[0], .x_nb1 = (uint32_t)x->nb[1], .x_nb2 = (uint32_t)x->nb[2],
		.x_nb3 = (uint32_t)x->nb[3], .d_off = b[0].rel, .d_nb0 = (uint32_t)d->nb[0], .d_nb1 = (uint32_t)d->nb[1],
		.d_nb2 = (uint32_t)d->nb[2], .d_nb3 = (uint32_t)d->nb[3], .p_off = b[2].rel, .p_nb0 = (uint32_t)pos->nb[0],
		.f_off = ff ? b[3].rel : 0, .f_nb0 = ff ? (uint32_t)ff->nb[0] : 0, .has_f = ff ? 1u : 0u,
		.n_dims = (uint32_t)n_dims, .mode = (uint32_t)mode, .s0 = sect[0], .s1 = sect[1], .s2 = sect[2],
		.s3 = sect[3], .theta_scale = powf(base, -2.0f / (float)n_dims), .fscale = fscale,
	};
	uint64_t items = (uint64_t)(x->ne[0] - n_dims / 2) * (uint64_t)(x->ne[1] * x->ne[2] * x->ne[3]);
	if (items > 0xffffffffull)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "rope too large");
	return vk_dispatch(ctx, "rope", b, ff ? 4 : 3, &p, sizeof(p), groups_for(items, 128));
}
