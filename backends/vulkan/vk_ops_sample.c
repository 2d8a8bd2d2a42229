/* vk_ops_sample.c — TOPK (backend.h 1.4, topk.comp): long rows in two
 * stages (a workgroup per chunk, then one per row over the chunks' best);
 * TOKEN_MASK (1.6, tokmask.comp): an invocation per 32-token mask word;
 * FEED (1.6, feed.comp): an invocation per token; LOGIT_ADJUST (1.5,
 * adjust.comp): an invocation per record; SAMPLE_TEMP (1.4) and LOGSUMEXP
 * (1.6): ts.comp, where the device has doubles (many boards this backend is
 * for have none: there the core reads those rows whole). */
#include "vk_internal.h"

struct topk_push {
	uint32_t n, k, rows, x_off;
	uint32_t x_nb1, d_off, chunk, nch;
	uint32_t s_off;
};

/* Chunks of a row of n for the best k: about 2048 values each, at most
 * 4096 candidates for the second stage; one chunk: a single stage. Depends
 * on n and k only. */
static void topk_chunks(int64_t n, int64_t k, uint32_t *chunk, uint32_t *nch)
{
	int64_t c = (n + 2047) / 2048, cmax = 4096 / k;
	if (c > cmax)
		c = cmax;
	if (c < 1)
		c = 1;
	int64_t len = (n + c - 1) / c;
	*chunk = (uint32_t)len;
	*nch = (uint32_t)((n + len - 1) / len);
}

static uint64_t ts_scratch(int64_t n, int64_t rows)
{
	int64_t nblk = (n + 1023) / 1024, S = (nblk + 7) / 8;
	return (uint64_t)rows * (uint64_t)nblk * 12 + (uint64_t)rows * (uint64_t)S * 4;
}

uint64_t vk_sample_scratch_need(const struct alice_graph *g, const struct alice_node *n)
{
	if ((n->op != ALICE_OP_TOPK && n->op != ALICE_OP_SAMPLE_TEMP && n->op != ALICE_OP_LOGSUMEXP) || n->src[0] < 0 ||
	    (uint32_t)n->src[0] >= g->n_tensors)
		return 0;
	const struct alice_tensor *x = &g->tensors[n->src[0]];
	if (n->op != ALICE_OP_TOPK)
		return ts_scratch(x->ne[0], x->ne[1]);
	if (n->ip[0] < 1)
		return 0;
	uint32_t chunk, nch;
	topk_chunks(x->ne[0], n->ip[0], &chunk, &nch);
	return nch > 1 ? (uint64_t)x->ne[1] * nch * (uint64_t)n->ip[0] * 8 : 0;
}

enum alice_status vk_op_topk(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->src[0], *d = a->dst;
	if (x->nb[1] % 4 || x->ne[0] > UINT32_MAX / 4 || x->ne[1] > UINT32_MAX)
		return vk_fail(ctx, ALICE_ERR_INVALID, "TOPK: rows must be 4-byte aligned");
	uint32_t k = (uint32_t)a->node->ip[0], chunk, nch;
	topk_chunks(x->ne[0], k, &chunk, &nch);
	uint64_t sbytes = (uint64_t)x->ne[1] * nch * k * 8;
	if (nch > 1 && (!ctx->scratch || sbytes > ctx->scratch_region || x->ne[1] * nch > UINT32_MAX))
		nch = 1; /* (the scratch is sized for the graph's TOPKs: not reached) */
	struct vk_bind b[3];
	enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, x, &b[1]);
	if (st != ALICE_OK)
		return st;
	struct topk_push p = {
		.n = (uint32_t)x->ne[0], .k = k, .rows = (uint32_t)x->ne[1], .x_off = b[1].rel,
		.x_nb1 = (uint32_t)x->nb[1], .d_off = b[0].rel, .chunk = chunk, .nch = nch,
	};
	if (nch == 1)
		return vk_dispatch(ctx, "topk", b, 2, &p, sizeof(p), (uint32_t)x->ne[1]);
	/* stage 1: the candidates as its dst; stage 2 reads them as binding 2 */
	struct vk_bind s1[2] = {{0}, b[1]};
	if ((st = vk_bind_raw(ctx, ctx->scratch, vk_scratch_claim(ctx), sbytes, &s1[0])) != ALICE_OK)
		return st;
	struct topk_push p1 = p;
	p1.d_off = s1[0].rel;
	if ((st = vk_dispatch(ctx, "topk1", s1, 2, &p1, sizeof(p1), (uint32_t)(x->ne[1] * nch))) != ALICE_OK)
		return st;
	b[2] = s1[0];
	p.s_off = s1[0].rel;
	return vk_dispatch(ctx, "topk2", b, 3, &p, sizeof(p), (uint32_t)x->ne[1]);
}

/* ---- SAMPLE_TEMP (1.4) and LOGSUMEXP (1.6): ts.comp's three stages,
 * their block sums and maxima in a scratch region; doubles, so only where
 * the device has shaderFloat64 (elsewhere the core reads those rows whole) */

struct ts_push {
	uint32_t n, rows, nblk, S;
	uint32_t x_off, x_nb1, p_off, s_off;
	uint32_t d_off, has_p;
};

static enum alice_status ts_run(const struct alice_op_args *a, bool lse)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->src[0], *pr = a->src[1], *d = a->dst;
	if (x->nb[1] % 4 || x->ne[0] > UINT32_MAX / 4 || x->ne[1] > UINT32_MAX)
		return vk_fail(ctx, ALICE_ERR_INVALID, "%s: rows must be 4-byte aligned", lse ? "LOGSUMEXP" : "SAMPLE_TEMP");
	uint64_t n = (uint64_t)x->ne[0], rows = (uint64_t)x->ne[1], nblk = (n + 1023) / 1024, S = (nblk + 7) / 8;
	uint64_t sbytes = ts_scratch(x->ne[0], x->ne[1]);
	if (!ctx->scratch || sbytes > ctx->scratch_region || rows * nblk > UINT32_MAX)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "%s: no scratch for %llu rows", lse ? "LOGSUMEXP" : "SAMPLE_TEMP",
			       (unsigned long long)rows);
	struct vk_bind b[5] = {{0}};
	enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, x, &b[1]);
	if (st == ALICE_OK && pr)
		st = vk_bind_tensor(ctx, pr, &b[2]);
	struct vk_bind sc;
	if (st == ALICE_OK)
		st = vk_bind_raw(ctx, ctx->scratch, vk_scratch_claim(ctx), sbytes, &sc);
	if (st != ALICE_OK)
		return st;
	struct ts_push p = {
		.n = (uint32_t)n, .rows = (uint32_t)rows, .nblk = (uint32_t)nblk, .S = (uint32_t)S, .x_off = b[1].rel,
		.x_nb1 = (uint32_t)x->nb[1], .p_off = pr ? b[2].rel : 0, .s_off = sc.rel, .d_off = b[0].rel,
		.has_p = pr != NULL,
	};
	/* stages 1 and 2 write the scratch (their slot 0) */
	struct vk_bind s12[3] = {sc, b[1], b[2]};
	const char *names[2][3] = {{"ts1", "ts2", "ts3"}, {"lse1", "lse2", "lse3"}};
	if ((st = vk_dispatch(ctx, names[lse][0], s12, 3, &p, sizeof(p), (uint32_t)(rows * S))) != ALICE_OK ||
	    (st = vk_dispatch(ctx, names[lse][1], s12, 3, &p, sizeof(p), (uint32_t)(rows * nblk))) != ALICE_OK)
		return st;
	b[4] = sc;
	return vk_dispatch(ctx, names[lse][2], b, 5, &p, sizeof(p), (uint32_t)(lse ? (rows + 255) / 256 : rows));
}

enum alice_status vk_op_sample_temp(const struct alice_op_args *a)
{
	return ts_run(a, false);
}

enum alice_status vk_op_logsumexp(const struct alice_op_args *a)
{
	return ts_run(a, true);
}

struct adjust_push {
	uint32_t n, rows, x_off, x_nb1;
	uint32_t r_off, cap;
};

/* LOGIT_ADJUST and TOKEN_MASK edit logits rows x in place from records r:
 * the checks and the two bindings they share */
static enum alice_status bind_rows_records(struct alice_backend_ctx *ctx, const char *op, const struct alice_tensor *x,
					   const struct alice_tensor *r, uint64_t items, struct vk_bind b[2])
{
	if (x->nb[1] % 4 || x->ne[0] > UINT32_MAX / 4 || x->ne[1] > UINT32_MAX || items > UINT32_MAX / 2)
		return vk_fail(ctx, ALICE_ERR_INVALID, "%s: rows must be 4-byte aligned, sizes below 2^31", op);
	enum alice_status st = vk_bind_tensor(ctx, x, &b[0]);
	return st != ALICE_OK ? st : vk_bind_tensor(ctx, r, &b[1]);
}

enum alice_status vk_op_logit_adjust(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->dst, *r = a->src[0];
	if (r->ne[1] < 2)
		return ALICE_OK;
	const uint64_t cap = (uint64_t)r->ne[1] - 1;
	struct vk_bind b[2];
	enum alice_status st = bind_rows_records(ctx, "LOGIT_ADJUST", x, r, cap, b);
	if (st != ALICE_OK)
		return st;
	struct adjust_push p = {
		.n = (uint32_t)x->ne[0], .rows = (uint32_t)x->ne[1], .x_off = b[0].rel, .x_nb1 = (uint32_t)x->nb[1],
		.r_off = b[1].rel, .cap = (uint32_t)cap,
	};
	return vk_dispatch(ctx, "adjust", b, 2, &p, sizeof(p), (uint32_t)((cap + 255) / 256));
}

struct feed_push {
	uint32_t n, m, d_off, h_off;
	uint32_t i_off, p_off;
};

enum alice_status vk_op_feed(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *d = a->dst;
	if (d->ne[0] > UINT32_MAX / 4 || a->src[2]->ne[0] > INT32_MAX)
		return vk_fail(ctx, ALICE_ERR_INVALID, "FEED: more than 2^30 tokens or 2^31 picks");
	struct vk_bind b[4];
	enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
	for (int i = 0; i < 3 && st == ALICE_OK; i++)
		st = vk_bind_tensor(ctx, a->src[i], &b[1 + i]);
	if (st != ALICE_OK)
		return st;
	struct feed_push p = {
		.n = (uint32_t)d->ne[0], .m = (uint32_t)a->src[2]->ne[0], .d_off = b[0].rel, .h_off = b[1].rel,
		.i_off = b[2].rel, .p_off = b[3].rel,
	};
	return vk_dispatch(ctx, "feed", b, 4, &p, sizeof(p), (uint32_t)((d->ne[0] + 255) / 256));
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
	struct vk_bind b[2];
	enum alice_status st = bind_rows_records(ctx, "TOKEN_MASK", x, r, cap * wgroups, b);
	if (st != ALICE_OK)
		return st;
	struct tokmask_push p = {
		.n = (uint32_t)x->ne[0], .rows = (uint32_t)x->ne[1], .x_off = b[0].rel, .x_nb1 = (uint32_t)x->nb[1],
		.r_off = b[1].rel, .W = (uint32_t)W, .cap = (uint32_t)cap, .wgroups = (uint32_t)wgroups,
	};
	return vk_dispatch(ctx, "tokmask", b, 2, &p, sizeof(p), (uint32_t)(cap * wgroups));
}
