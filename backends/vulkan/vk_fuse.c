/* vk_fuse.c — chains of nodes recorded as one dispatch (ALICE_VK_FUSE=0
 * turns it off): a decode token is ~20 small dispatches a layer, each with
 * a barrier, and on a GPU that fixed cost is most of the token. A fused
 * shader does per element what the separate shaders do, in the same order,
 * so the results are the same bits (tests/core/test_fusion.c).
 *
 *   [ADD] + RMS_NORM (+ the rounding for the MUL_MATs that read the norm):
 *   addnorm.comp, a workgroup per 256 elements of a row.
 *   Q/K/V (2-3 MUL_MATs of one input, one weight type), gate/up + GLU: one
 *   mv.comp dispatch (vk_mm_multi), decode steps, the GLU output rounded
 *   there for ffn_down where that takes Q8_K (GQ); Q/K/V (and gate/up) of a
 *   prefill: one mmc.comp dispatch.
 *   ROPE q, ROPE k, KV_WRITE k, KV_WRITE v: ropekv.comp.
 *   ATTENTION with the rounding for the o-proj that reads it (attn.comp GQ). */
#include <math.h>
#include <string.h>

#include "vk_internal.h"

struct addnorm_push {
	uint32_t ne0, n_rows, has_add, fmt;
	uint32_t a_off, a_nb1, b_off, b_nb1;
	uint32_t s_off, s_nb1, d_off, d_nb1;
	uint32_t w_off, has_w, q_off, bs;
	float eps;
};

static bool overlaps(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->buf == b->buf && a->offset < b->offset + alice_bc_extent(b) && b->offset < a->offset + alice_bc_extent(a);
}

static bool same_view(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->buf == b->buf && a->offset == b->offset && a->type == b->type && !memcmp(a->ne, b->ne, sizeof(a->ne)) &&
	       !memcmp(a->nb, b->nb, sizeof(a->nb));
}

/* An output a fused shader writes while reading `in`: apart, or the very
 * same elements (each thread reads its elements before writing them). */
static bool out_ok(const struct alice_tensor *out, const struct alice_tensor *in)
{
	return !in || !overlaps(out, in) || same_view(out, in);
}

/* F32 rows of ne0 contiguous elements, evenly strided: *nb1 the row stride */
static bool f32_rows(const struct alice_tensor *t, int64_t ne0, uint32_t *nb1)
{
	if (t->type != ALICE_TYPE_F32 || t->ne[0] != ne0 || t->nb[0] != 4 || t->nb[2] != t->nb[1] * t->ne[1] ||
	    t->nb[3] != t->nb[2] * t->ne[2] || t->nb[1] < 4 * ne0 || t->nb[1] > 0xffffffffll)
		return false;
	*nb1 = (uint32_t)t->nb[1];
	return true;
}

static int64_t n_rows(const struct alice_tensor *t)
{
	return t->ne[1] * t->ne[2] * t->ne[3];
}

/* nodes i.. as [ADD] RMS_NORM [MUL_MAT]: how many fuse (0, or 1-2 without
 * the matmul); g NULL: the RMS_NORM a0 alone (vk_op_norm) */
static enum alice_status try_addnorm(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
				     const struct alice_op_args *a0, uint32_t *used)
{
	struct alice_op_args add, nrm, mm;
	bool has_add = g && a0->node->op == ALICE_OP_ADD;
	if (has_add) {
		if (i + 1 >= g->n_nodes || g->nodes[i + 1].op != ALICE_OP_RMS_NORM ||
		    g->nodes[i + 1].src[0] != a0->node->dst)
			return ALICE_OK;
		add = *a0;
		if (vk_check_node(ctx, g, &g->nodes[i + 1], &nrm) != ALICE_OK)
			return ALICE_OK;
	} else if (a0->node->op == ALICE_OP_RMS_NORM) {
		nrm = *a0;
	} else {
		return ALICE_OK;
	}
	const struct alice_tensor *x = nrm.src[0], *w = nrm.src[1], *d = nrm.dst;
	int64_t ne0 = x->ne[0], rows = n_rows(x);
	uint32_t a_nb1 = 0, b_nb1 = 0, s_nb1 = 0, d_nb1 = 0;
	if (ne0 < 1 || ne0 > 0x10000000 || rows > 0xffffffffll || !f32_rows(d, ne0, &d_nb1) || !vk_same_shape(x, d) ||
	    !(nrm.node->fp[0] >= 0.0f))
		return ALICE_OK;
	if (w && (w->type != ALICE_TYPE_F32 || w->ne[0] != ne0 || w->nb[0] != 4 || w->ne[1] * w->ne[2] * w->ne[3] != 1))
		return ALICE_OK;
	const struct alice_tensor *ta = x, *tb = NULL, *ts = NULL;
	if (has_add) {
		ta = add.src[0];
		tb = add.src[1];
		ts = add.dst;
		if (!vk_same_shape(ta, ts) || !vk_same_shape(tb, ts) || !f32_rows(tb, ne0, &b_nb1) ||
		    !f32_rows(ts, ne0, &s_nb1) || overlaps(ts, d))
			return ALICE_OK;
	}
	if (!f32_rows(ta, ne0, &a_nb1))
		return ALICE_OK;
	/* every workgroup of a row reads the whole row while others write their
	 * chunks: outputs apart from the inputs (one chunk: or exactly them) */
	const struct alice_tensor *ins[3] = {ta, tb, w};
	for (int k = 0; k < 3; k++) {
		bool one = ne0 <= 256;
		if (ins[k] && ((one ? !out_ok(d, ins[k]) : overlaps(d, ins[k])) ||
			       (ts && (one ? !out_ok(ts, ins[k]) : overlaps(ts, ins[k])))))
			return ALICE_OK;
	}
	/* the rounding the next MUL_MAT wants, when it reads the norm whole */
	uint32_t n = has_add ? 2 : 1, fmt = 0, bs = 1;
	if (g && i + n < g->n_nodes && g->nodes[i + n].op == ALICE_OP_MUL_MAT && g->nodes[i + n].src[1] == nrm.node->dst &&
	    vk_check_node(ctx, g, &g->nodes[i + n], &mm) == ALICE_OK) {
		fmt = vk_act_fmt(mm.src[0]->type, &bs);
		if (fmt == 5 || !(ctx->fuse & VK_FUSE_NORMQ) || (uint64_t)vk_nelem(d) * 4 > ctx->scratch_region || ne0 % bs ||
		    !vk_mm_reads_rounded(ctx, &mm))
			fmt = 0;
	}
	if (fmt == 0)
		bs = 1;
	struct vk_bind b[6];
	memset(b, 0, sizeof(b));
	enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, ta, &b[1]);
	if (st == ALICE_OK && has_add)
		st = vk_bind_tensor(ctx, tb, &b[2]);
	if (st == ALICE_OK && has_add)
		st = vk_bind_tensor(ctx, ts, &b[3]);
	if (st == ALICE_OK && w)
		st = vk_bind_tensor(ctx, w, &b[4]);
	if (st != ALICE_OK)
		return st;
	/* the matmul's rounded copy: invalidate what the writes overwrite first */
	if (has_add)
		vk_actq_invalidate(ctx, &add);
	vk_actq_invalidate(ctx, &nrm);
	if (fmt) {
		uint64_t off = vk_actq_claim(ctx, d, fmt);
		if ((st = vk_bind_raw(ctx, ctx->scratch, off, (uint64_t)vk_nelem(d) * 4, &b[5])) != ALICE_OK)
			return st;
	}
	struct addnorm_push p = {
		.ne0 = (uint32_t)ne0, .n_rows = (uint32_t)rows, .has_add = has_add, .fmt = fmt,
		.a_off = b[1].rel, .a_nb1 = a_nb1, .b_off = b[2].rel, .b_nb1 = b_nb1,
		.s_off = b[3].rel, .s_nb1 = s_nb1, .d_off = b[0].rel, .d_nb1 = d_nb1,
		.w_off = b[4].rel, .has_w = w != NULL, .q_off = b[5].rel, .bs = bs, .eps = nrm.node->fp[0],
	};
	/* slots 3 (the sum) and 5 (the rounded copy) are written too */
	uint64_t groups = (uint64_t)rows * (uint64_t)((ne0 + 255) / 256);
	if (groups > 0xffffffffull)
		return ALICE_OK;
	st = vk_dispatch_rw(ctx, "addnorm", b, 6, (1u << 3) | (1u << 5), &p, sizeof(p), (uint32_t)groups);
	if (st == ALICE_OK)
		*used = n;
	return st;
}

/* nodes i.. as 2-3 MUL_MATs of one input [+ GLU of the two] */
static enum alice_status try_multi(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
				   const struct alice_op_args *a0, uint32_t *used)
{
	struct alice_op_args a[3], glu;
	a[0] = *a0;
	int n = 1;
	while (n < 3 && i + n < g->n_nodes && g->nodes[i + n].op == ALICE_OP_MUL_MAT &&
	       g->nodes[i + n].src[1] == a0->node->src[1] && vk_check_node(ctx, g, &g->nodes[i + n], &a[n]) == ALICE_OK)
		n++;
	bool has_glu = n == 2 && i + 2 < g->n_nodes && g->nodes[i + 2].op == ALICE_OP_GLU &&
		       vk_check_node(ctx, g, &g->nodes[i + 2], &glu) == ALICE_OK && vk_mm_multi_ok(ctx, a, 2, &glu);
	if (!has_glu)
		while (n > 1 && !vk_mm_multi_ok(ctx, a, n, NULL))
			n--;
	if (n < 2)
		return ALICE_OK;
	/* the GLU output rounded here for the matmul that reads it next */
	struct alice_op_args mm;
	bool gq = has_glu && i + 3 < g->n_nodes && g->nodes[i + 3].op == ALICE_OP_MUL_MAT &&
		  vk_check_node(ctx, g, &g->nodes[i + 3], &mm) == ALICE_OK && vk_mm_gq_ok(ctx, a, &glu, &mm);
	/* (before the dispatch: the rounded copy it registers stays valid) */
	for (int j = 0; j < n; j++)
		vk_actq_invalidate(ctx, &a[j]);
	if (has_glu)
		vk_actq_invalidate(ctx, &glu);
	enum alice_status st = vk_mm_multi(ctx, a, n, has_glu ? &glu : NULL, gq);
	if (st != ALICE_OK)
		return st;
	*used = (uint32_t)n + (has_glu ? 1 : 0);
	return ALICE_OK;
}

struct ropekv_push {
	uint32_t hd, nhq, nhk, T;
	uint32_t n_dims, mode, has_f, p_nb0;
	uint32_t qx_off, qd_off, kx_off, kd_off;
	uint32_t v_off, p_off, f_off, f_nb0;
	uint32_t kc_off, kc_cell, kc_type, vc_off;
	uint32_t vc_cell, vc_type, i_off, i_nb0;
	uint32_t n_cells, n_q, n_k, n_v;
	float theta_scale, fscale;
};

static bool packed_f32(const struct alice_tensor *t)
{
	if (t->type != ALICE_TYPE_F32 || t->nb[0] != 4)
		return false;
	for (int k = 0; k + 1 < ALICE_MAX_DIMS; k++)
		if (t->nb[k + 1] != t->nb[k] * t->ne[k])
			return false;
	return true;
}

/* F32 [hd, nh, T] with every dim packed */
static bool packed_heads(const struct alice_tensor *t, int64_t hd, int64_t T)
{
	return t->type == ALICE_TYPE_F32 && t->ne[0] == hd && t->ne[2] == T && t->ne[3] == 1 && t->nb[0] == 4 &&
	       t->nb[1] == 4 * hd && t->nb[2] == t->nb[1] * t->ne[1];
}

/* a KV_WRITE of T rows of e elements into a cache whose cell rows are packed */
static bool packed_cells(const struct alice_op_args *kv, int64_t T, int64_t e, int *dd)
{
	const struct alice_tensor *c = kv->dst;
	struct alice_bc_kv_layout kl;
	char err[8];
	if (alice_bc_kv_layout_of(kv->src[0], kv->src[1], c, &kl, err, sizeof(err)) != ALICE_OK || kl.n != T ||
	    kl.e != e || (c->type != ALICE_TYPE_F16 && c->type != ALICE_TYPE_F32 && c->type != ALICE_TYPE_BF16) ||
	    c->nb[0] != (int64_t)alice_type_info(c->type)->type_size || c->ne[kl.dd] > 0xffffffffll ||
	    c->nb[kl.dd] > 0xffffffffll)
		return false;
	for (int k = 0; k + 1 <= kl.dd; k++)
		if (c->nb[k + 1] != c->nb[k] * c->ne[k])
			return false;
	*dd = kl.dd;
	return true;
}

/* nodes i..i+3 as ROPE q, ROPE k, KV_WRITE (rotated k), KV_WRITE v */
static enum alice_status try_ropekv(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
				    const struct alice_op_args *a0, uint32_t *used)
{
	if (i + 3 >= g->n_nodes)
		return ALICE_OK;
	const struct alice_node *nq = a0->node, *nk = &g->nodes[i + 1], *wk = &g->nodes[i + 2], *wv = &g->nodes[i + 3];
	if (nk->op != ALICE_OP_ROPE || wk->op != ALICE_OP_KV_WRITE || wv->op != ALICE_OP_KV_WRITE ||
	    wk->src[0] != nk->dst || wk->src[1] != wv->src[1] || nk->src[1] != nq->src[1] || nk->src[2] != nq->src[2] ||
	    nk->ip[0] != nq->ip[0] || nk->ip[1] != nq->ip[1] || nk->fp[0] != nq->fp[0] || nk->fp[1] != nq->fp[1] ||
	    nq->ip[1] == ALICE_ROPE_IMROPE)
		return ALICE_OK;
	struct alice_op_args q = *a0, k, kw, vw;
	if (vk_check_node(ctx, g, nk, &k) != ALICE_OK || vk_check_node(ctx, g, wk, &kw) != ALICE_OK ||
	    vk_check_node(ctx, g, wv, &vw) != ALICE_OK)
		return ALICE_OK;
	const struct alice_tensor *qx = q.src[0], *qd = q.dst, *kx = k.src[0], *kd = k.dst, *v = vw.src[0];
	const struct alice_tensor *pos = q.src[1], *ff = q.src[2], *idx = kw.src[1];
	int64_t hd = qx->ne[0], T = qx->ne[2], nhq = qx->ne[1], nhk = kx->ne[1];
	int n_dims = nq->ip[0];
	int dk, dv;
	if (!packed_heads(qx, hd, T) || !packed_heads(qd, hd, T) || !packed_heads(kx, hd, T) || !packed_heads(kd, hd, T) ||
	    !vk_same_shape(qx, qd) || !vk_same_shape(kx, kd) || n_dims <= 0 || n_dims % 2 || n_dims > hd ||
	    !(nq->fp[0] > 0.0f) || !isfinite(nq->fp[1]) || pos->type != ALICE_TYPE_I32 || pos->ne[0] != T ||
	    vk_nelem(pos) != T || v->type != ALICE_TYPE_F32 || !packed_f32(v) || vk_nelem(v) != hd * nhk * T ||
	    (ff && (ff->type != ALICE_TYPE_F32 || ff->ne[0] < n_dims / 2)) ||
	    !packed_cells(&kw, T, hd * nhk, &dk) || !packed_cells(&vw, T, hd * nhk, &dv) || idx->type != ALICE_TYPE_I32)
		return ALICE_OK;
	/* outputs: each apart from everything, or exactly its own input */
	const struct alice_tensor *ins[3] = {qx, kx, v};
	for (int j = 0; j < 3; j++)
		if (!out_ok(qd, ins[j]) || !out_ok(kd, ins[j]) || (j != 0 && overlaps(qd, ins[j])) ||
		    (j != 1 && overlaps(kd, ins[j])))
			return ALICE_OK;
	if (overlaps(qd, kd) || overlaps(kw.dst, vw.dst))
		return ALICE_OK;
	const struct alice_tensor *acts[5] = {qx, qd, kx, kd, v};
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int j = 0; j < 5; j++) {
		if (acts[j]->buf != qx->buf)
			return ALICE_OK;
		uint64_t a = acts[j]->offset, b = a + alice_bc_extent(acts[j]);
		lo = a < lo ? a : lo;
		hi = b > hi ? b : hi;
	}
	if (hi - lo + 4096 > ctx->max_range || hi - lo >= 0x80000000ull)
		return ALICE_OK;
	uint64_t per_row = (uint64_t)(hd - n_dims / 2), nq_i = per_row * (uint64_t)(nhq * T),
		 nk_i = per_row * (uint64_t)(nhk * T), nv_i = (uint64_t)(hd * nhk * T);
	if (nq_i + nk_i + nv_i > 0xffffffffull)
		return ALICE_OK;
	struct vk_bind b[6];
	memset(b, 0, sizeof(b));
	enum alice_status st = vk_bind_raw(ctx, qx->buf, lo, hi - lo, &b[0]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, pos, &b[1]);
	if (st == ALICE_OK && ff)
		st = vk_bind_tensor(ctx, ff, &b[2]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, kw.dst, &b[3]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, idx, &b[4]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, vw.dst, &b[5]);
	if (st != ALICE_OK)
		return st;
#define AOFF(t) (b[0].rel + (uint32_t)((t)->offset - lo))
	struct ropekv_push p = {
		.hd = (uint32_t)hd, .nhq = (uint32_t)nhq, .nhk = (uint32_t)nhk, .T = (uint32_t)T,
		.n_dims = (uint32_t)n_dims, .mode = (uint32_t)nq->ip[1], .has_f = ff != NULL, .p_nb0 = (uint32_t)pos->nb[0],
		.qx_off = AOFF(qx), .qd_off = AOFF(qd), .kx_off = AOFF(kx), .kd_off = AOFF(kd), .v_off = AOFF(v),
		.p_off = b[1].rel, .f_off = ff ? b[2].rel : 0, .f_nb0 = ff ? (uint32_t)ff->nb[0] : 0,
		.kc_off = b[3].rel, .kc_cell = (uint32_t)kw.dst->nb[dk], .kc_type = kw.dst->type,
		.vc_off = b[5].rel, .vc_cell = (uint32_t)vw.dst->nb[dv], .vc_type = vw.dst->type,
		.i_off = b[4].rel, .i_nb0 = (uint32_t)idx->nb[0], .n_cells = (uint32_t)kw.dst->ne[dk],
		.n_q = (uint32_t)nq_i, .n_k = (uint32_t)nk_i, .n_v = (uint32_t)nv_i,
		.theta_scale = powf(nq->fp[0], -2.0f / (float)n_dims), .fscale = nq->fp[1],
	};
#undef AOFF
	if (vw.dst->ne[dv] != kw.dst->ne[dk])
		return ALICE_OK;
	vk_actq_invalidate(ctx, &q);
	vk_actq_invalidate(ctx, &k);
	vk_actq_invalidate(ctx, &kw);
	vk_actq_invalidate(ctx, &vw);
	st = vk_dispatch_rw(ctx, "ropekv", b, 6, (1u << 3) | (1u << 5), &p, sizeof(p),
			    (uint32_t)((nq_i + nk_i + nv_i + 127) / 128));
	if (st == ALICE_OK)
		*used = 4;
	return st;
}

/* An RMS_NORM node by itself on addnorm.comp where its rows fit (*done):
 * the norm then runs the same code fused or not, so the two give the same
 * bits on any compiler (norm.comp's own build of the same formula did not,
 * on the H200's driver). */
enum alice_status vk_norm_addnorm(const struct alice_op_args *a, bool *done)
{
	uint32_t used = 0;
	enum alice_status st = try_addnorm(a->ctx, NULL, 0, a, &used);
	*done = st == ALICE_OK && used == 1;
	return st;
}

/* ATTENTION whose output, seen as [nh * dv, tokens], is the next MUL_MAT's
 * input rounded as Q8_K: the rounding in the attention dispatch (GQ) */
static enum alice_status try_attnq(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
				   const struct alice_op_args *a, uint32_t *used)
{
	struct alice_op_args mm;
	const struct alice_tensor *d = a->dst, *v = a->src[2];
	if (!ctx->gq_cnt || i + 1 >= g->n_nodes || g->nodes[i + 1].op != ALICE_OP_MUL_MAT ||
	    vk_check_node(ctx, g, &g->nodes[i + 1], &mm) != ALICE_OK)
		return ALICE_OK;
	const struct alice_tensor *x = mm.src[1];
	int64_t dv = v->ne[0], nh = d->ne[1], nt = d->ne[2], K = dv * nh;
	uint32_t bs;
	if (d->type != ALICE_TYPE_F32 || d->ne[0] != dv || d->ne[3] != 1 || d->nb[0] != 4 || d->nb[1] != 4 * dv ||
	    d->nb[2] != 4 * K || x->buf != d->buf || x->offset != d->offset || x->type != ALICE_TYPE_F32 ||
	    x->ne[0] != K || x->ne[1] != nt || x->ne[2] * x->ne[3] != 1 || x->nb[0] != 4 || x->nb[1] != 4 * K ||
	    K % 256 || dv > 512 || (uint64_t)nt * (uint64_t)(K / 256) > VK_GQ_COUNTERS || K * nt > 0x3fffffff ||
	    (uint64_t)K * (uint64_t)nt * 4 > ctx->scratch_region || vk_act_fmt(mm.src[0]->type, &bs) != 4 ||
	    !vk_mm_reads_rounded(ctx, &mm))
		return ALICE_OK;
	bool gq;
	enum alice_status st = vk_attention(a, x, &gq);
	if (st == ALICE_OK && !gq)
		vk_actq_invalidate(ctx, a); /* as vk_graph.c does after a node */
	if (st == ALICE_OK)
		*used = 1;
	return st;
}

enum alice_status vk_fuse(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
			  const struct alice_op_args *a, uint32_t *used)
{
	*used = 0;
	switch (a->node->op) {
	case ALICE_OP_MUL_MAT:
		return ctx->fuse & VK_FUSE_MV ? try_multi(ctx, g, i, a, used) : ALICE_OK;
	case ALICE_OP_ROPE:
		return ctx->fuse & VK_FUSE_ROPE ? try_ropekv(ctx, g, i, a, used) : ALICE_OK;
	case ALICE_OP_ADD:
	case ALICE_OP_RMS_NORM:
		return ctx->fuse & VK_FUSE_NORM ? try_addnorm(ctx, g, i, a, used) : ALICE_OK;
	case ALICE_OP_ATTENTION:
		return ctx->fuse & VK_FUSE_GQ ? try_attnq(ctx, g, i, a, used) : ALICE_OK;
	default:
		return ALICE_OK;
	}
}
