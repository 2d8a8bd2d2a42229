/* vk_fuse.c — chains of nodes recorded as one dispatch (ALICE_VK_FUSE=0
 * turns it off): a decode token is ~20 small dispatches a layer, each with
 * a barrier, and on a GPU that fixed cost is most of the token. A fused
 * shader does per element what the separate shaders do, in the same order,
 * so the results are the same bits (tests/core/test_fusion.c).
 *
 *   [ADD] + RMS_NORM (+ the rounding for the MUL_MATs that read the norm):
 *   addnorm.comp, one workgroup per row.
 *   Q/K/V (2-3 MUL_MATs of one input, one weight type), gate/up + GLU: one
 *   mv.comp dispatch (vk_mm_multi), decode steps. */
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

/* nodes i.. as [ADD] RMS_NORM [MUL_MAT]: how many fuse (0, or 1-2 without the matmul) */
static enum alice_status try_addnorm(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
				     const struct alice_op_args *a0, uint32_t *used)
{
	struct alice_op_args add, nrm, mm;
	bool has_add = a0->node->op == ALICE_OP_ADD;
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
	const struct alice_tensor *ins[3] = {ta, tb, w};
	for (int k = 0; k < 3; k++)
		if (!out_ok(d, ins[k]) || (ts && !out_ok(ts, ins[k])))
			return ALICE_OK;
	/* the rounding the next MUL_MAT wants, when it reads the norm whole */
	uint32_t n = has_add ? 2 : 1, fmt = 0, bs = 1;
	if (i + n < g->n_nodes && g->nodes[i + n].op == ALICE_OP_MUL_MAT && g->nodes[i + n].src[1] == nrm.node->dst &&
	    vk_check_node(ctx, g, &g->nodes[i + n], &mm) == ALICE_OK) {
		fmt = vk_act_fmt(mm.src[0]->type, &bs);
		if (fmt == 5 || (uint64_t)vk_nelem(d) * 4 > ctx->scratch_region || ne0 % bs)
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
	st = vk_dispatch_rw(ctx, "addnorm", b, 6, (1u << 3) | (1u << 5), &p, sizeof(p), (uint32_t)rows);
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
	enum alice_status st = vk_mm_multi(ctx, a, n, has_glu ? &glu : NULL);
	if (st != ALICE_OK)
		return st;
	for (int j = 0; j < n; j++)
		vk_actq_invalidate(ctx, &a[j]);
	if (has_glu)
		vk_actq_invalidate(ctx, &glu);
	*used = (uint32_t)n + (has_glu ? 1 : 0);
	return ALICE_OK;
}

enum alice_status vk_fuse(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
			  const struct alice_op_args *a, uint32_t *used)
{
	*used = 0;
	switch (a->node->op) {
	case ALICE_OP_MUL_MAT:
		return try_multi(ctx, g, i, a, used);
	case ALICE_OP_ADD:
	case ALICE_OP_RMS_NORM:
		return try_addnorm(ctx, g, i, a, used);
	default:
		return ALICE_OK;
	}
}
