/* vk_ops_attn.c — ATTENTION (attn.comp, one workgroup per head and token)
 * and KV_WRITE (kvw.comp). Cell ranges and cell indices live in device
 * buffers, so the shaders check them and report through the status buffer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

struct attn_push {
	uint32_t dk, dv, nh, nt;
	uint32_t group, q_off, q_nb1, q_nb2;
	uint32_t k_off, k_nb1, k_nb2, k_type; /* attnt.comp: k_type = tokens a workgroup (F16 cache) */
	uint32_t v_off, v_nb1, v_nb2, v_type;
	uint32_t r_off, r_nb0, r_nb1, d_off;
	uint32_t d_nb0, d_nb1, d_nb2, n_cells;
	float scale, cap;
	uint32_t t_off, tbl_n, bs_sh, n_blk; /* block table (src4): tbl_n 0 = none */
	uint32_t fa; /* attn.comp: fa.comp takes the tokens of runs of 16 or more; GQ: the rounded copy */
	uint32_t c_off; /* attn.comp's GQ (UINT32_MAX: none): gq.glsl's counters */
};

/* attnt.comp's shapes: an F16 cache of word-aligned rows, d_k a multiple of
 * 16 up to 128, d_v even up to 128 (chosen by shape alone: a token's result
 * never depends on the step it is in). Opt-in (ALICE_VK_ATTN_TILED=1): on
 * the H100 it was slower than attn.comp (1B pp512 8.9k against 10.2k t/s,
 * tg128 446 against 465; session 18). */
static bool attn_tiled(const struct alice_tensor *q, const struct alice_tensor *k, const struct alice_tensor *v,
		       const struct vk_bind *b)
{
	static int off = -1;
	if (off < 0) {
		const char *e = getenv("ALICE_VK_ATTN_TILED");
		off = !(e && e[0] == '1');
	}
	if (off)
		return false;
	int64_t dk = q->ne[0], dv = v->ne[0];
	return k->type == ALICE_TYPE_F16 && v->type == ALICE_TYPE_F16 && dk % 16 == 0 && dk <= 128 && dv % 2 == 0 &&
	       dv <= 128 && k->nb[0] == 2 && v->nb[0] == 2 &&
	       ((b[2].rel | b[3].rel | (uint64_t)k->nb[1] | (uint64_t)k->nb[2] | (uint64_t)v->nb[1] | (uint64_t)v->nb[2]) & 3) == 0;
}

/* fa.comp (cooperative matrices) for the tokens of long runs, as the CUDA
 * backend's fattn.cu takes them: an F16 cache of 16-byte aligned rows, head
 * dim 64 or 128 for K and V, no soft-cap, a step where some sequence has at
 * least 16 tokens (ip[1]: the most any has). ALICE_VK_FA=0: attn.comp for
 * every token (comparisons). */
static bool attn_fa(struct alice_backend_ctx *ctx, const struct alice_op_args *a, const struct vk_bind *b)
{
	static int off = -1;
	if (off < 0) {
		const char *e = getenv("ALICE_VK_FA");
		off = e && e[0] == '0';
	}
	const struct alice_tensor *q = a->src[0], *k = a->src[1], *v = a->src[2];
	int64_t D = q->ne[0], seq_max = a->node->ip[1];
	return !off && ctx->coopmat && q->ne[2] >= 16 && !(seq_max > 0 && seq_max < 16) && (D == 64 || D == 128) &&
	       k->ne[0] == D && v->ne[0] == D && k->type == ALICE_TYPE_F16 && v->type == ALICE_TYPE_F16 &&
	       k->nb[0] == 2 && v->nb[0] == 2 && a->node->fp[1] == 0.0f && q->nb[0] == 4 &&
	       ((b[2].rel | b[3].rel | (uint64_t)k->nb[1] | (uint64_t)k->nb[2] | (uint64_t)v->nb[1] | (uint64_t)v->nb[2]) & 15) == 0;
}

struct kvw_push {
	uint32_t sne[4], snb[4];
	uint32_t dne0, dne1, dne2, dd;
	uint32_t dnb0, dnb1, dnb2, dnb_cell;
	uint32_t s_off, d_off, i_off, i_nb0;
	uint32_t E, n, n_cells, dtype;
};

/* ATTENTION a; with gqx (a packed F32 view [nh * dv, nt] of its output,
 * the next MUL_MAT's input; vk_fuse.c checks): where attn.comp takes every
 * token, its output also rounded for that product as actq.comp would
 * (attn.comp's GQ, gq.glsl), registered as gqx's rounded copy, and *gq set */
enum alice_status vk_attention(const struct alice_op_args *a, const struct alice_tensor *gqx, bool *gq)
{
	struct alice_backend_ctx *ctx = a->ctx;
	*gq = false;
	const struct alice_tensor *q = a->src[0], *k = a->src[1], *v = a->src[2], *r = a->src[3], *d = a->dst;
	int64_t dk = q->ne[0], nh = q->ne[1], nt = q->ne[2], nkv = k->ne[1];
	enum alice_status st = alice_bc_attention_shape(q, k, v, r, d, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	struct alice_bc_attn_pages pg;
	if ((st = alice_bc_attention_pages(a->node, k, a->src[4], &pg, ctx->err, sizeof(ctx->err))) != ALICE_OK)
		return st;
	int64_t ncell = pg.n_vcells; /* the ranges' extent */
	if (ncell > 0xffffffffll)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "ATTENTION: more than 2^32 cells");
	if (!isfinite(a->node->fp[0]) || !isfinite(a->node->fp[1]) || a->node->fp[1] < 0.0f)
		return vk_fail(ctx, ALICE_ERR_INVALID, "bad scale %g or soft-cap %g", a->node->fp[0], a->node->fp[1]);
	struct vk_bind b[VK_NBIND];
	memset(b, 0, sizeof(b));
	int nb = a->src[4] ? 6 : 5;
	st = vk_bind_tensor(ctx, d, &b[0]);
	for (int i = 0; i < nb - 1 && st == ALICE_OK; i++)
		st = vk_bind_tensor(ctx, a->src[i], &b[i + 1]);
	if (st != ALICE_OK)
		return st;
	struct attn_push p = {
		.dk = (uint32_t)dk, .dv = (uint32_t)v->ne[0], .nh = (uint32_t)nh, .nt = (uint32_t)nt,
		.group = (uint32_t)(nh / nkv), .q_off = b[1].rel, .q_nb1 = (uint32_t)q->nb[1], .q_nb2 = (uint32_t)q->nb[2],
		.k_off = b[2].rel, .k_nb1 = (uint32_t)k->nb[1], .k_nb2 = (uint32_t)k->nb[2], .k_type = k->type,
		.v_off = b[3].rel, .v_nb1 = (uint32_t)v->nb[1], .v_nb2 = (uint32_t)v->nb[2], .v_type = v->type,
		.r_off = b[4].rel, .r_nb0 = (uint32_t)r->nb[0], .r_nb1 = (uint32_t)r->nb[1], .d_off = b[0].rel,
		.d_nb0 = (uint32_t)d->nb[0], .d_nb1 = (uint32_t)d->nb[1], .d_nb2 = (uint32_t)d->nb[2],
		.n_cells = (uint32_t)ncell, .scale = a->node->fp[0], .cap = a->node->fp[1],
		.t_off = nb == 6 ? b[5].rel : 0, .tbl_n = a->src[4] ? (uint32_t)a->src[4]->ne[0] : 0,
		.bs_sh = (uint32_t)pg.bs_log2, .n_blk = (uint32_t)pg.n_blocks, .c_off = UINT32_MAX,
	};
	if (attn_fa(ctx, a, b)) {
		uint64_t n_wg = (uint64_t)nh * (uint64_t)((nt + 63) / 64);
		const char *name = dk == 64 ? "fa64" : "fa128";
		if ((st = vk_dispatch(ctx, name, b, nb, &p, sizeof(p), (uint32_t)n_wg)) != ALICE_OK)
			return st;
		p.fa = 1;
	} else if (attn_tiled(q, k, v, b)) {
		/* runs of up to 8 tokens a workgroup where a sequence has several
		 * in this step (ip[1], the most any has), else one */
		uint32_t qt = a->node->ip[1] > 1 ? (a->node->ip[1] < 8 ? (uint32_t)a->node->ip[1] : 8) : 1;
		p.k_type = qt;
		return vk_dispatch(ctx, "attnt", b, nb, &p, sizeof(p), (uint32_t)(nh * ((nt + qt - 1) / qt)));
	}
	if (gqx && !p.fa) {
		/* (invalidated before the claim: the copy registered stays valid) */
		vk_actq_invalidate(ctx, a);
		if ((st = vk_bind_raw(ctx, ctx->scratch, vk_actq_claim(ctx, gqx, 4), (uint64_t)vk_nelem(gqx) * 4, &b[6])) !=
			    ALICE_OK ||
		    (st = vk_bind_raw(ctx, ctx->gq_cnt, 0, (uint64_t)VK_GQ_COUNTERS * 4, &b[VK_SLOT_CNT])) != ALICE_OK)
			return st;
		p.fa = b[6].rel;
		p.c_off = b[VK_SLOT_CNT].rel;
		*gq = true;
		return vk_dispatch_rw(ctx, "attn", b, VK_NBIND, (1u << 6) | (1u << VK_SLOT_CNT), &p, sizeof(p),
				      (uint32_t)(nh * nt));
	}
	return vk_dispatch(ctx, "attn", b, nb, &p, sizeof(p), (uint32_t)(nh * nt));
}

enum alice_status vk_op_attention(const struct alice_op_args *a)
{
	bool gq;
	return vk_attention(a, NULL, &gq);
}

enum alice_status vk_op_kv_write(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *s = a->src[0], *idx = a->src[1], *d = a->dst;
	struct alice_bc_kv_layout kl;
	enum alice_status st = alice_bc_kv_layout_of(s, idx, d, &kl, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	int64_t n = kl.n, e = kl.e;
	int dd = kl.dd;
	if ((uint64_t)vk_nelem(s) > 0xffffffffull)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "KV_WRITE too large");
	struct vk_bind b[3];
	st = vk_bind_tensor(ctx, d, &b[0]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, s, &b[1]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, idx, &b[2]);
	if (st != ALICE_OK)
		return st;
	struct kvw_push p;
	memset(&p, 0, sizeof(p));
	for (int k = 0; k < 4; k++) {
		p.sne[k] = (uint32_t)s->ne[k];
		p.snb[k] = (uint32_t)s->nb[k];
	}
	p.dne0 = (uint32_t)d->ne[0];
	p.dne1 = (uint32_t)d->ne[1];
	p.dne2 = (uint32_t)d->ne[2];
	p.dd = (uint32_t)dd;
	p.dnb0 = (uint32_t)d->nb[0];
	p.dnb1 = (uint32_t)d->nb[1];
	p.dnb2 = (uint32_t)d->nb[2];
	p.dnb_cell = (uint32_t)d->nb[dd];
	p.s_off = b[1].rel;
	p.d_off = b[0].rel;
	p.i_off = b[2].rel;
	p.i_nb0 = (uint32_t)idx->nb[0];
	p.E = (uint32_t)e;
	p.n = (uint32_t)n;
	p.n_cells = (uint32_t)d->ne[dd];
	p.dtype = d->type;
	/* KV_WRITE writes dst in place: bind it as slot 0 so hazards see the write */
	return vk_dispatch(ctx, "kvw", b, 3, &p, sizeof(p), (uint32_t)((vk_nelem(s) + 255) / 256));
}
