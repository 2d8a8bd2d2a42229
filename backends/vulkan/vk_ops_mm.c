/* vk_ops_mm.c — MUL_MAT and GET_ROWS: shape checks and dispatch of the
 * per-weight-type shader variants (mm_<type>, gr_<type>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define MM_TILE 8 /* activation columns per workgroup (MT in mm.comp) */

struct mm_push {
	uint32_t K, N, M, ne12;
	uint32_t r2, r3, mtiles, n_wg;
	uint32_t w_off, w_nb1, w_nb2, w_nb3;
	uint32_t x_off, x_nb0, x_nb1, x_nb2;
	uint32_t x_nb3, d_off, d_nb0, d_nb1;
	uint32_t d_nb2, d_nb3, tpr_log2, nrg;
	uint32_t s_off;
};

struct gr_push {
	uint32_t ne0, n_rows, src_nrows, n_wg;
	uint32_t s_off, s_nb0, s_nb1, row0;
	uint32_t i_off, i_ne0, i_ne1, i_nb0;
	uint32_t i_nb1, i_nb2, d_off, d_nb0;
	uint32_t d_nb1, d_nb2, d_nb3, total_rows;
};

/* Rows of a matrix whose row stride is nb1 that fit one descriptor range
 * (maxStorageBufferRange: 128 MiB on lavapipe and many ARM GPUs, less than
 * one embedding matrix), leaving room for the offset alignment. */
static int64_t rows_per_range(struct alice_backend_ctx *ctx, int64_t nb1)
{
	uint64_t room = ctx->max_range - ctx->props.limits.minStorageBufferOffsetAlignment - 16;
	return nb1 > 0 ? (int64_t)(room / (uint64_t)nb1) : 1;
}

struct act_push {
	uint32_t K, M, ne2, fmt;
	uint32_t x_off, x_nb0, x_nb1, x_nb2;
	uint32_t x_nb3, bs, n_items, s_off;
};

/* actq.comp format for a weight type: how llama.cpp (and the CPU
 * reference) round the activations its dot product pairs with. */
uint32_t vk_act_fmt(uint32_t type, uint32_t *bs)
{
	switch (type) {
	case ALICE_TYPE_F32: *bs = 1; return 0;
	case ALICE_TYPE_F16: *bs = 1; return 1;
	case ALICE_TYPE_BF16: *bs = 1; return 2;
	case ALICE_TYPE_Q2_K: case ALICE_TYPE_Q3_K: case ALICE_TYPE_Q4_K: case ALICE_TYPE_Q5_K:
	case ALICE_TYPE_Q6_K: case ALICE_TYPE_IQ4_XS:
		*bs = 256; return 4;
	case ALICE_TYPE_Q4_1: case ALICE_TYPE_Q5_1:
		*bs = 32; return 5; /* Q8_1: Q8_0 values + fp16 block sums */
	default:
		*bs = 32; return 3; /* Q8_0 blocks: Q4_0..Q8_0, IQ4_NL, MXFP4, Q1_0 */
	}
}

uint64_t vk_mm_scratch_need(const struct alice_graph *g, const struct alice_node *n)
{
	if (n->op != ALICE_OP_MUL_MAT || n->src[0] < 0 || n->src[1] < 0 || (uint32_t)n->src[0] >= g->n_tensors ||
	    (uint32_t)n->src[1] >= g->n_tensors)
		return 0;
	const struct alice_tensor *w = &g->tensors[n->src[0]], *x = &g->tensors[n->src[1]];
	uint32_t bs;
	uint32_t fmt = vk_act_fmt(w->type, &bs);
	if (fmt == 0)
		return 0;
	return (uint64_t)vk_nelem(x) * 4 + (fmt == 5 ? (uint64_t)vk_nelem(x) / 32 * 4 : 0);
}

uint64_t vk_actq_claim(struct alice_backend_ctx *ctx, const struct alice_tensor *x, uint32_t fmt)
{
	uint32_t region = ctx->scratch_next++ % VK_SCRATCH_RING;
	ctx->actq[region].valid = true;
	ctx->actq[region].fmt = fmt;
	ctx->actq[region].x = *x;
	return (uint64_t)region * ctx->scratch_region;
}

uint64_t vk_scratch_claim(struct alice_backend_ctx *ctx)
{
	uint32_t region = ctx->scratch_next++ % VK_SCRATCH_RING;
	ctx->actq[region].valid = false;
	return (uint64_t)region * ctx->scratch_region;
}

/* x as the product reads it: a binding and byte strides */
struct mm_x {
	struct vk_bind b;
	uint32_t nb0, nb1, nb2, nb3;
	uint32_t s_off; /* Q8_1 block sums, bytes from the binding's start */
	uint32_t xr;	/* mv.comp rounds x itself as actq.comp's format xr would (0: x is as read) */
	uint32_t xh;	/* x is packed F16 (tof16.comp), for mmc.comp */
};

/* The shaders' name for a weight's type: packed Q8_0 / Q6_K (vk_pack.c) have their own. */
const char *vk_wtype_name(const struct alice_tensor *w)
{
	if (w->flags & ALICE_TENSOR_PACKED)
		return w->type == ALICE_TYPE_Q8_0 ? "Q8_0P" : "Q6_KP";
	return alice_type_info(w->type)->name;
}

static enum alice_status mm_one(struct alice_backend_ctx *ctx, const struct alice_tensor *w,
				const struct alice_tensor *x, const struct mm_x *xa, const struct alice_tensor *d,
				bool decode);

static bool mm_coopmat(struct alice_backend_ctx *ctx, const struct alice_tensor *w, const struct alice_tensor *x,
		       bool decode);
static bool mv_takes(struct alice_backend_ctx *ctx, const struct alice_tensor *w, const struct mm_x *xa);
static const char *mvx_env(void);
static int64_t tiled_min_m(void);

/* x rounded once (into a scratch region) as w's dot expects, or x itself
 * for F32 weights: what the product shaders read */
/* x read as it is (F32 weights, the cooperative-matrix GEMM) */
static enum alice_status mm_raw(struct alice_backend_ctx *ctx, const struct alice_tensor *x, struct mm_x *xa)
{
	xa->s_off = 0;
	xa->xr = 0;
	xa->xh = 0;
	xa->nb0 = (uint32_t)x->nb[0];
	xa->nb1 = (uint32_t)x->nb[1];
	xa->nb2 = (uint32_t)x->nb[2];
	xa->nb3 = (uint32_t)x->nb[3];
	return vk_bind_tensor(ctx, x, &xa->b);
}

/* actq_find's format for x converted to packed F16 by tof16.comp (not
 * one of actq.comp's) */
#define ACT_F16_PACKED 100u

struct tof16_push {
	uint32_t K, M, ne2, n_chunks;
	uint32_t x_off, x_nb0, x_nb1, x_nb2;
	uint32_t x_nb3, xvec;
};

static int actq_find(struct alice_backend_ctx *ctx, const struct alice_tensor *x, uint32_t fmt);

/* x as the cooperative-matrix GEMM reads it: converted once to packed F16
 * (into a scratch region, shared by the products of the same x: Q/K/V,
 * gate/up) where K % 8 == 0, else as it is; ALICE_VK_MMC_XH=0: always as
 * it is (comparisons) */
static enum alice_status mm_half(struct alice_backend_ctx *ctx, const struct alice_tensor *x, struct mm_x *xa)
{
	static int off = -1;
	if (off < 0) {
		const char *e = getenv("ALICE_VK_MMC_XH");
		off = e && e[0] == '0' && e[1] == 0;
	}
	int64_t K = x->ne[0], M = x->ne[1];
	uint64_t bytes = (uint64_t)vk_nelem(x) * 2;
	if (off || K % 8 != 0 || !ctx->scratch || bytes > ctx->scratch_region)
		return mm_raw(ctx, x, xa);
	enum alice_status st;
	int hit = actq_find(ctx, x, ACT_F16_PACKED);
	uint32_t region = hit >= 0 ? (uint32_t)hit : ctx->scratch_next++ % VK_SCRATCH_RING;
	struct vk_bind ab[2];
	if ((st = vk_bind_raw(ctx, ctx->scratch, (uint64_t)region * ctx->scratch_region, bytes, &ab[0])) != ALICE_OK ||
	    (st = vk_bind_tensor(ctx, x, &ab[1])) != ALICE_OK)
		return st;
	if (ab[0].rel != 0)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "scratch region misaligned");
	if (hit < 0) {
		uint64_t chunks = (uint64_t)vk_nelem(x) / 8;
		struct tof16_push tp = {
			.K = (uint32_t)K, .M = (uint32_t)M, .ne2 = (uint32_t)x->ne[2], .n_chunks = (uint32_t)chunks,
			.x_off = ab[1].rel, .x_nb0 = (uint32_t)x->nb[0], .x_nb1 = (uint32_t)x->nb[1],
			.x_nb2 = (uint32_t)x->nb[2], .x_nb3 = (uint32_t)x->nb[3],
			.xvec = x->nb[0] == 4 && ((ab[1].rel | (uint64_t)x->nb[1] | (uint64_t)x->nb[2] | (uint64_t)x->nb[3]) & 15) == 0,
		};
		if ((st = vk_dispatch(ctx, ctx->cm_emu ? "tof16e" : "tof16", ab, 2, &tp, sizeof(tp),
				      (uint32_t)((chunks + 255) / 256))) != ALICE_OK)
			return st;
		ctx->actq[region].valid = true;
		ctx->actq[region].fmt = ACT_F16_PACKED;
		ctx->actq[region].x = *x;
	}
	xa->b = ab[0];
	xa->s_off = 0;
	xa->xr = 0;
	xa->xh = 1;
	xa->nb0 = 2;
	xa->nb1 = (uint32_t)(K * 2);
	xa->nb2 = (uint32_t)(K * M * 2);
	xa->nb3 = (uint32_t)(K * M * x->ne[2] * 2);
	return ALICE_OK;
}

/* the scratch region holding x converted as fmt by an earlier product of this graph, or -1 */
static int actq_find(struct alice_backend_ctx *ctx, const struct alice_tensor *x, uint32_t fmt)
{
	for (int i = 0; i < VK_SCRATCH_RING; i++) {
		const struct vk_actq_entry *e = &ctx->actq[i];
		if (e->valid && e->fmt == fmt && e->x.buf == x->buf && e->x.offset == x->offset && e->x.type == x->type &&
		    !memcmp(e->x.ne, x->ne, sizeof(x->ne)) && !memcmp(e->x.nb, x->nb, sizeof(x->nb)))
			return i;
	}
	return -1;
}

void vk_actq_drop(struct alice_backend_ctx *ctx, const struct alice_tensor *x)
{
	for (int i = 0; i < VK_SCRATCH_RING; i++)
		if (ctx->actq[i].valid && actq_find(ctx, x, ctx->actq[i].fmt) == i)
			ctx->actq[i].valid = false;
}

static enum alice_status mm_round(struct alice_backend_ctx *ctx, const struct alice_tensor *w,
				  const struct alice_tensor *x, struct mm_x *xa_out)
{
	int64_t K = w->ne[0], M = x->ne[1];
	enum alice_status st;
	struct mm_x xa = {.s_off = 0};
	uint32_t bs, fmt = vk_act_fmt(w->type, &bs);
	if (fmt == 0) {
		if ((st = mm_raw(ctx, x, &xa)) != ALICE_OK)
			return st;
	} else {
		uint64_t vbytes = (uint64_t)vk_nelem(x) * 4;
		uint64_t bytes = vbytes + (fmt == 5 ? vbytes / 32 : 0);
		if (!ctx->scratch || bytes > ctx->scratch_region)
			return vk_fail(ctx, ALICE_ERR_BACKEND, "activation scratch not prepared");
		/* the same input rounded the same way by an earlier matmul of this graph? */
		int hit = actq_find(ctx, x, fmt);
		uint32_t region = hit >= 0 ? (uint32_t)hit : ctx->scratch_next++ % VK_SCRATCH_RING;
		uint64_t off = (uint64_t)region * ctx->scratch_region;
		struct vk_bind ab[2];
		if ((st = vk_bind_raw(ctx, ctx->scratch, off, bytes, &ab[0])) != ALICE_OK ||
		    (st = vk_bind_tensor(ctx, x, &ab[1])) != ALICE_OK)
			return st;
		/* actq writes at byte (row*K + i)*4 from its binding's start */
		if (ab[0].rel != 0)
			return vk_fail(ctx, ALICE_ERR_BACKEND, "scratch region misaligned");
		if (hit < 0) {
			uint64_t items = (uint64_t)vk_nelem(x) / bs;
			struct act_push ap = {
				.K = (uint32_t)K, .M = (uint32_t)M, .ne2 = (uint32_t)x->ne[2], .fmt = fmt,
				.x_off = ab[1].rel, .x_nb0 = (uint32_t)x->nb[0], .x_nb1 = (uint32_t)x->nb[1],
				.x_nb2 = (uint32_t)x->nb[2], .x_nb3 = (uint32_t)x->nb[3], .bs = bs, .n_items = (uint32_t)items,
				.s_off = (uint32_t)vbytes,
			};
			if ((st = vk_dispatch(ctx, "actq", ab, 2, &ap, sizeof(ap), (uint32_t)((items * bs + 255) / 256))) != ALICE_OK)
				return st;
			ctx->actq[region].valid = true;
			ctx->actq[region].fmt = fmt;
			ctx->actq[region].x = *x;
		}
		xa.b = ab[0];
		xa.nb0 = 4;
		xa.nb1 = (uint32_t)(K * 4);
		xa.nb2 = (uint32_t)(K * M * 4);
		xa.nb3 = (uint32_t)(K * M * x->ne[2] * 4);
		xa.s_off = (uint32_t)vbytes;
	}
	*xa_out = xa;
	return ALICE_OK;
}



/* A batched decode step (src2 given, no sequence with more than 8 rows:
 * ip[0]): every column takes the mat-vec shader, whose per-column result
 * does not depend on the column count, so a stream's output does not
 * depend on how many others share its step. */
static bool mm_decode_step(const struct alice_op_args *a)
{
	return a->src[2] && a->node->ip[0] >= 1 && a->node->ip[0] <= 8;
}

/* w . x into d, every column by the mat-vec shader when decode */
static enum alice_status mm_run(struct alice_backend_ctx *ctx, const struct alice_tensor *w,
				const struct alice_tensor *x, const struct alice_tensor *d, bool decode)
{
	int64_t K = w->ne[0], N = w->ne[1];
	enum alice_status st;
	const struct alice_type_info *ti = alice_type_info(w->type);
	if (ti->block_size == 1 && w->nb[0] != (int64_t)ti->type_size)
		return vk_fail(ctx, ALICE_ERR_INVALID, "weight rows must be contiguous (nb[0] = %lld)", (long long)w->nb[0]);
	if (K % 16 != 0 && ti->block_size > 1)
		return vk_fail(ctx, ALICE_ERR_INVALID, "K = %lld is not a multiple of 16", (long long)K);
	struct mm_x xa;
	uint32_t bs, fmt = vk_act_fmt(w->type, &bs);
	/* the cooperative-matrix GEMM reads x as it is, rounding it to F16
	 * itself; a Q8_0 decode mat-vec rounds x itself (where x was not rounded
	 * already by an earlier product), else actq.comp does */
	if (mm_coopmat(ctx, w, x, decode))
		st = mm_half(ctx, x, &xa);
	else if ((ctx->fuse & VK_FUSE_MVQ) && w->type == ALICE_TYPE_Q8_0 && !mvx_env() &&
		 (decode || x->ne[1] < tiled_min_m()) && x->type == ALICE_TYPE_F32 && x->ne[0] % 32 == 0 &&
		 actq_find(ctx, x, fmt) < 0 && mm_raw(ctx, x, &xa) == ALICE_OK && mv_takes(ctx, w, &xa)) {
		xa.xr = fmt;
		st = ALICE_OK;
	} else
		st = mm_round(ctx, w, x, &xa);
	if (st != ALICE_OK)
		return st;
	/* a weight larger than one descriptor range goes in slices of rows */
	int64_t per = rows_per_range(ctx, w->nb[1]);
	if ((uint64_t)w->nb[1] * (uint64_t)N > ctx->max_range / 2 && w->ne[2] * w->ne[3] == 1 && per > 0 && per < N) {
		for (int64_t r0 = 0; r0 < N; r0 += per) {
			struct alice_tensor ws = *w, ds = *d;
			ws.ne[1] = N - r0 < per ? N - r0 : per;
			ws.offset += (uint64_t)r0 * (uint64_t)w->nb[1];
			ds.ne[0] = ws.ne[1];
			ds.offset += (uint64_t)r0 * (uint64_t)d->nb[0];
			if ((st = mm_one(ctx, &ws, x, &xa, &ds, decode)) != ALICE_OK)
				return st;
		}
		return ALICE_OK;
	}
	return mm_one(ctx, w, x, &xa, d, decode);
}

/* this graph's src2 rows, read before recording (vk_graph.c) */
static const int32_t *mm_regime(struct alice_backend_ctx *ctx, const struct alice_tensor *r)
{
	for (int i = 0; i < ctx->n_regimes; i++)
		if (ctx->regimes[i].buf == r->buf && ctx->regimes[i].offset == r->offset && ctx->regimes[i].M == r->ne[1])
			return ctx->regimes[i].v;
	return NULL;
}

/* Batch invariance: with src2, a run of one sequence's rows with more than
 * 8 of them is one product of exactly its own columns (what it gets alone);
 * every other row takes the mat-vec shader, whose columns do not depend on
 * each other. */
enum alice_status vk_op_mul_mat(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *w = a->src[0], *x = a->src[1], *d = a->dst, *rg = a->src[2];
	enum alice_status st = alice_bc_mul_mat_shape(w, x, d, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	const int64_t M = x->ne[1];
	if (!rg || a->node->ip[0] <= 8 || x->ne[2] * x->ne[3] != 1)
		return mm_run(ctx, w, x, d, mm_decode_step(a));
	const int32_t *reg = mm_regime(ctx, rg);
	if (!reg)
		return vk_fail(ctx, ALICE_ERR_INVALID, "MUL_MAT: row regime (src2) must be I32 [2, %lld], dense", (long long)M);
	int64_t m = 0;
	while (m < M) {
		int64_t c = reg[2 * m], e = m + c;
		bool run = c > 8 && reg[2 * m + 1] == 0 && e <= M && reg[2 * (e - 1) + 1] == c - 1 && reg[2 * (e - 1)] == c;
		if (!run) {
			e = m + 1;
			while (e < M) {
				int64_t c2 = reg[2 * e];
				if (c2 > 8 && reg[2 * e + 1] == 0 && e + c2 <= M && reg[2 * (e + c2 - 1) + 1] == c2 - 1)
					break;
				e++;
			}
		}
		struct alice_tensor xs = *x, ds = *d;
		xs.ne[1] = ds.ne[1] = e - m;
		xs.offset += (uint64_t)m * (uint64_t)x->nb[1];
		ds.offset += (uint64_t)m * (uint64_t)d->nb[1];
		if ((st = mm_run(ctx, w, &xs, &ds, !run)) != ALICE_OK)
			return st;
		m = e;
	}
	return ALICE_OK;
}

/* Read the row regimes (src2) of the graph's MUL_MATs that mix sequences
 * of more than 8 rows with others, before recording starts. */
enum alice_status vk_mm_read_regimes(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	ctx->n_regimes = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct alice_node *n = &g->nodes[i];
		if (n->op != ALICE_OP_MUL_MAT || n->src[2] < 0 || n->ip[0] <= 8)
			continue;
		const struct alice_tensor *r = &g->tensors[n->src[2]];
		if (r->type != ALICE_TYPE_I32 || r->ne[0] != 2 || r->nb[0] != 4 || r->nb[1] != 8 || !r->buf)
			continue; /* vk_op_mul_mat refuses it */
		if (mm_regime(ctx, r))
			continue;
		if (ctx->n_regimes == VK_MAX_REGIMES)
			return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "more than %d row regime inputs in one graph", VK_MAX_REGIMES);
		struct vk_regime *v = &ctx->regimes[ctx->n_regimes];
		if (v->cap < r->ne[1]) {
			int32_t *nv = realloc(v->v, (size_t)r->ne[1] * 8);
			if (!nv)
				return vk_fail(ctx, ALICE_ERR_NOMEM, "row regimes: out of memory");
			v->v = nv;
			v->cap = r->ne[1];
		}
		enum alice_status st = vk_buffer_read(ctx, r->buf, r->offset, v->v, (uint64_t)r->ne[1] * 8);
		if (st != ALICE_OK)
			return st;
		v->buf = r->buf;
		v->offset = r->offset;
		v->M = r->ne[1];
		ctx->n_regimes++;
	}
	return ALICE_OK;
}

struct mmt_push {
	uint32_t K, N, M, ne12;
	uint32_t r2, r3, ntiles, mtiles;
	uint32_t w_off, w_nb1, w_nb2, w_nb3;
	uint32_t x_off, x_nb0, x_nb1, x_nb2;
	uint32_t x_nb3, d_off, d_nb0, d_nb1;
	uint32_t d_nb2, d_nb3, n_wg, s_off;
	uint32_t xvec; /* mmc.comp: x rows as 16-byte vectors */
	uint32_t wvec; /* mmc.comp: weight rows as 16-byte vectors (mmw.glsl) */
	uint32_t xh;   /* mmc.comp: x is packed F16 (tof16.comp) */
};

/* A prefill GEMM's workgroup tile: weight rows x columns, and its shaders'
 * name (CMakeLists.txt builds each for every weight type). */
struct mmc_tile {
	char key;
	const char *name;
	uint32_t bn, bm;
};
static const struct mmc_tile mmt_tile = {0, "mmt", 64, 64};
enum { MMC_S, MMC_Y, MMC_Z, MMC_NT };
static const struct mmc_tile mmc_tiles[MMC_NT] = {
	[MMC_S] = {'S', "mmc", 64, 64},	  /* 4 subgroups of 2 x 2 fragments */
	[MMC_Y] = {'Y', "mmcY", 128, 128}, /* 8 subgroups of 2 x 4 */
	[MMC_Z] = {'Z', "mmcZ", 128, 64},  /* 8 subgroups of 2 x 2 */
};

static uint64_t mmc_wgs(const struct mmc_tile *t, int64_t N, int64_t M, int64_t batch)
{
	return (uint64_t)((N + t->bn - 1) / t->bn) * (uint64_t)((M + t->bm - 1) / t->bm) * (uint64_t)batch;
}

/* mmc.comp's tile for a product (the tiling changes no result): the
 * largest whose workgroups still fill the GPU. H100, 512 columns, time a
 * call (Q4_K; session 23): 2048 x 8192 rows Y 0.264 ms, Z 0.343; 2048 x
 * 2048 Z 0.082, Y 0.118, S 0.087; 8192 x 2048 Z 0.309, S 0.345, Y 0.434
 * (a 64 x 128 tile of 4 or 8 subgroups: slower everywhere). ALICE_VK_MMC=S
 * / Y / Z: one tile for every shape (comparisons). */
/* a tile's shared memory: two buffers of both F16 tiles, rows of 80 bytes */
static bool mmc_fits(struct alice_backend_ctx *ctx, const struct mmc_tile *t)
{
	return 2u * 80u * (t->bn + t->bm) <= ctx->props.limits.maxComputeSharedMemorySize;
}

static const struct mmc_tile *mmc_tile_for(struct alice_backend_ctx *ctx, int64_t N, int64_t M, int64_t batch)
{
	static int forced = -1;
	if (forced < 0) {
		const char *e = getenv("ALICE_VK_MMC");
		forced = 0;
		for (int i = 0; e && i < MMC_NT; i++)
			if (e[0] == mmc_tiles[i].key && e[1] == 0)
				forced = i + 1;
	}
	if (forced && mmc_fits(ctx, &mmc_tiles[forced - 1]))
		return &mmc_tiles[forced - 1];
	if (mmc_fits(ctx, &mmc_tiles[MMC_Y]) && mmc_wgs(&mmc_tiles[MMC_Y], N, M, batch) >= 256)
		return &mmc_tiles[MMC_Y];
	if (mmc_fits(ctx, &mmc_tiles[MMC_Z]) && mmc_wgs(&mmc_tiles[MMC_Z], N, M, batch) >= 128)
		return &mmc_tiles[MMC_Z];
	return &mmc_tiles[MMC_S];
}

/* Columns from which the 64 x 64 tiled kernel (mmt.comp) takes over. */
static int64_t tiled_min_m(void)
{
	const char *e = getenv("ALICE_VK_TILED_MIN_M");
	return e && *e ? strtoll(e, NULL, 10) : 16;
}

/* A prefill product on cooperative matrices (mmc.comp): F16 operands, so
 * F16 and block-quantized weights (F32 and BF16 keep the F32 tiles), an F32
 * x with 4-byte aligned strides. */
static bool mm_coopmat(struct alice_backend_ctx *ctx, const struct alice_tensor *w, const struct alice_tensor *x,
		       bool decode)
{
	/* the emulated form (tests) is built for the types the models use most
	 * (CMakeLists.txt's list) */
	bool emu = false;
	if (ctx->cm_emu) {
		char name[32];
		snprintf(name, sizeof(name), "mmce_%s", vk_wtype_name(w));
		emu = vk_shader_built(name);
	}
	return (ctx->coopmat || emu) && !decode && x->ne[1] >= tiled_min_m() && w->type != ALICE_TYPE_F32 &&
	       w->type != ALICE_TYPE_BF16 && x->type == ALICE_TYPE_F32 && x->nb[0] == 4;
}

/* the shader of mmc.comp's tile t (MULTI: its fused form) for w */
static void mmc_name(struct alice_backend_ctx *ctx, const struct mmc_tile *t, bool multi,
		     const struct alice_tensor *w, char *name, size_t size)
{
	if (!t->key)
		snprintf(name, size, "%s_%s", t->name, vk_wtype_name(w));
	else
		snprintf(name, size, "mmc%s%s%s_%s", ctx->cm_emu ? "e" : "", multi ? "f" : "", t->name + 3,
			 vk_wtype_name(w));
}

/* ALICE_VK_MV=0: decode on mm.comp instead of mv.comp (comparisons) */
static bool mv_off(void)
{
	static int off = -1;
	if (off < 0) {
		const char *e = getenv("ALICE_VK_MV");
		off = e && e[0] == '0' && e[1] == 0;
	}
	return off;
}

/* columns a mat-vec workgroup takes (MT in mv.comp): 4 (H100, 1B Q4_K_M
 * batched decode steps: B = 4 3.74 ms against 4.51 with 8, B = 16 10.18
 * against 11.30: fewer accumulators a thread, more workgroups), or 8 with
 * ALICE_VK_MVT=8; a column's result is the same either way */
static uint32_t mv_tile(void)
{
	static int t = 0;
	if (!t) {
		const char *e = getenv("ALICE_VK_MVT");
		t = e && strcmp(e, "8") == 0 ? 8 : 4;
	}
	return (uint32_t)t;
}

/* the shader name's column part: "1" (one column), "4" (MT 4), "" (MT 8) */
static const char *mv_cols(int64_t M)
{
	return M == 1 ? "1" : mv_tile() == 4 ? "4" : "";
}

/* the byte offset of t's data inside the binding vk_bind_tensor makes */
static uint64_t vk_rel_of(struct alice_backend_ctx *ctx, const struct alice_tensor *t)
{
	uint64_t align = ctx->props.limits.minStorageBufferOffsetAlignment;
	uint64_t start = t->buf->base + t->offset;
	return align ? start % align : 0;
}

/* mmc.comp reads the weight groups as 16-byte vectors (mmw.glsl: Q4_K,
 * F16 and the packed Q8_0 / Q6_K) where the rows start 16-byte aligned and
 * a step's two groups lie inside K; ALICE_VK_MMC_WVEC=0: never (comparisons) */
static bool mmc_wvec(struct alice_backend_ctx *ctx, const struct alice_tensor *w)
{
	static int off = -1;
	if (off < 0) {
		const char *e = getenv("ALICE_VK_MMC_WVEC");
		off = e && e[0] == '0' && e[1] == 0;
	}
	bool packed = (w->flags & ALICE_TENSOR_PACKED) != 0;
	bool typed = w->type == ALICE_TYPE_Q4_K || w->type == ALICE_TYPE_F16 ||
		     (packed && (w->type == ALICE_TYPE_Q8_0 || w->type == ALICE_TYPE_Q6_K));
	return !off && typed && w->ne[0] % 32 == 0 &&
	       ((vk_rel_of(ctx, w) | (uint64_t)w->nb[1] | (uint64_t)w->nb[2] | (uint64_t)w->nb[3]) & 15) == 0;
}

/* mv.comp's geometry for a weight type (the shader's RW_DEF / KS_DEF):
 * rows per team and teams per row group; a workgroup has 4 teams */
static void mv_geom(uint32_t type, uint32_t *rw, uint32_t *ks)
{
	*rw = type == ALICE_TYPE_Q6_K ? 1 : 4;
	*ks = type == ALICE_TYPE_Q6_K ? 1 : 2;
}

/* Q4_K / Q6_K / Q8_0: mv.comp (32 threads and 16-byte loads per row, every
 * weight byte used once) for the columns of a decode product; its Q4_K
 * quants and every type's activations are read as 16-byte vectors, so
 * those must be aligned (packed rows: packing checked it) */
static bool mv_takes(struct alice_backend_ctx *ctx, const struct alice_tensor *w, const struct mm_x *xa)
{
	bool mv = (w->type == ALICE_TYPE_Q4_K || w->type == ALICE_TYPE_Q6_K || w->type == ALICE_TYPE_Q8_0) &&
		  xa->nb0 == 4 && ((xa->b.rel | xa->nb1 | xa->nb2 | xa->nb3) & 15) == 0 && !mv_off();
	if (mv && (w->type == ALICE_TYPE_Q4_K || (w->flags & ALICE_TENSOR_PACKED)))
		mv = ((vk_rel_of(ctx, w) | (uint64_t)w->nb[1] | (uint64_t)w->nb[2] | (uint64_t)w->nb[3]) & 15) == 0;
	return mv;
}

/* ALICE_VK_MVX: comparisons of mat-vec geometries (CMakeLists.txt builds the variants) */
static const char *mvx_env(void)
{
	static const char *mvx = NULL;
	static int read = 0;
	if (!read) {
		mvx = getenv("ALICE_VK_MVX");
		read = 1;
	}
	return mvx;
}

static enum alice_status mm_one(struct alice_backend_ctx *ctx, const struct alice_tensor *w,
				const struct alice_tensor *x, const struct mm_x *xa, const struct alice_tensor *d,
				bool decode)
{
	const struct alice_type_info *ti = alice_type_info(w->type);
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	if (M >= tiled_min_m() && !decode) {
		bool cm = mm_coopmat(ctx, w, x, decode);
		const struct mmc_tile *tile = cm ? mmc_tile_for(ctx, N, M, x->ne[2] * x->ne[3]) : &mmt_tile;
		uint64_t bn = tile->bn, bm = tile->bm;
		uint64_t ntiles = ((uint64_t)N + bn - 1) / bn, mtiles = ((uint64_t)M + bm - 1) / bm;
		uint64_t n_wg = ntiles * mtiles * (uint64_t)(x->ne[2] * x->ne[3]);
		if (n_wg > 0xffffffffull / 2)
			return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "matmul too large (%llu workgroups)", (unsigned long long)n_wg);
		struct vk_bind b[3];
		enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
		if (st == ALICE_OK)
			st = vk_bind_tensor(ctx, w, &b[1]);
		if (st != ALICE_OK)
			return st;
		b[2] = xa->b;
		struct mmt_push p = {
			.K = (uint32_t)K, .N = (uint32_t)N, .M = (uint32_t)M, .ne12 = (uint32_t)x->ne[2],
			.r2 = (uint32_t)(x->ne[2] / w->ne[2]), .r3 = (uint32_t)(x->ne[3] / w->ne[3]),
			.ntiles = (uint32_t)ntiles, .mtiles = (uint32_t)mtiles,
			.w_off = b[1].rel, .w_nb1 = (uint32_t)w->nb[1], .w_nb2 = (uint32_t)w->nb[2], .w_nb3 = (uint32_t)w->nb[3],
			.x_off = b[2].rel, .x_nb0 = xa->nb0, .x_nb1 = xa->nb1, .x_nb2 = xa->nb2,
			.x_nb3 = xa->nb3, .d_off = b[0].rel, .d_nb0 = (uint32_t)d->nb[0], .d_nb1 = (uint32_t)d->nb[1],
			.d_nb2 = (uint32_t)d->nb[2], .d_nb3 = (uint32_t)d->nb[3], .n_wg = (uint32_t)n_wg,
			.s_off = xa->s_off,
			.xvec = xa->nb0 == 4 && K % 8 == 0 && ((xa->b.rel | xa->nb1 | xa->nb2 | xa->nb3) & 15) == 0,
			.xh = xa->xh,
			.wvec = cm && mmc_wvec(ctx, w),
		};
		char name[32];
		mmc_name(ctx, tile, false, w, name, sizeof(name));
		return vk_dispatch(ctx, name, b, 3, &p, sizeof(p), (uint32_t)n_wg);
	}
	bool mv = mv_takes(ctx, w, xa);
	if (xa->xr && !mv)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "MUL_MAT: unrounded activations for a product that is not a mat-vec");
	/* mm.comp: threads per weight row enough for K, at most the workgroup;
	 * mv.comp: 32, teams of 4 rows (Q6_K: 1) */
	int64_t units = ti->block_size > 1 ? (K / 16 + 3) / 4 : (K + 15) / 16; /* ~4 groups per thread */
	uint32_t tl = 0;
	while (tl < 7 && ((int64_t)1 << tl) < units)
		tl++;
	uint64_t rows_per_wg = 128u >> tl;
	int xrw = 0, xks = 1, xu2 = 0, xav = 0;
	const char *mvx = mvx_env();
	if (mv) {
		uint32_t rw, ks;
		mv_geom(w->type, &rw, &ks);
		tl = 5;
		rows_per_wg = 4 / ks * rw;
		/* "RW,KS,U2[,AV]" for every type, or "TYPE:RW,KS,U2[,AV]" for one */
		const char *g = mvx, *tn = vk_wtype_name(w);
		if (g && strchr(g, ':'))
			g = strncmp(g, tn, strlen(tn)) == 0 && g[strlen(tn)] == ':' ? g + strlen(tn) + 1 : NULL;
		if (g && M == 1 && sscanf(g, "%d,%d,%d,%d", &xrw, &xks, &xu2, &xav) >= 3 &&
		    (xrw == 1 || xrw == 2 || xrw == 4) && (xks == 1 || xks == 2 || xks == 4))
			rows_per_wg = (uint64_t)(4 / xks * xrw); /* (a variant not built: "no shader named ...") */
		else
			xrw = 0;
		/* AV: 16-byte aligned rows of Q6_K / Q8_0 */
		if (xav && (w->type == ALICE_TYPE_Q4_K || (w->flags & ALICE_TENSOR_PACKED) ||
			    ((vk_rel_of(ctx, w) | (uint64_t)w->nb[1] | (uint64_t)w->nb[2] | (uint64_t)w->nb[3]) & 15)))
			xav = 0;
	}
	uint64_t nrg = ((uint64_t)N + rows_per_wg - 1) / rows_per_wg;
	uint32_t tile = mv ? mv_tile() : MM_TILE;
	uint64_t mtiles = (uint64_t)(M + tile - 1) / tile;
	uint64_t n_wg = nrg * mtiles * (uint64_t)(x->ne[2] * x->ne[3]);
	if (n_wg > 0xffffffffull / 2)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "matmul too large (%llu workgroups)", (unsigned long long)n_wg);
	struct vk_bind b[3];
	enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
	if (st == ALICE_OK)
		st = vk_bind_tensor(ctx, w, &b[1]);
	if (st != ALICE_OK)
		return st;
	b[2] = xa->b;
	struct mm_push p = {
		.K = (uint32_t)K, .N = (uint32_t)N, .M = (uint32_t)M, .ne12 = (uint32_t)x->ne[2],
		.r2 = (uint32_t)(x->ne[2] / w->ne[2]), .r3 = (uint32_t)(x->ne[3] / w->ne[3]),
		.mtiles = (uint32_t)mtiles, .n_wg = (uint32_t)n_wg,
		.w_off = b[1].rel, .w_nb1 = (uint32_t)w->nb[1], .w_nb2 = (uint32_t)w->nb[2], .w_nb3 = (uint32_t)w->nb[3],
		.x_off = b[2].rel, .x_nb0 = xa->nb0, .x_nb1 = xa->nb1, .x_nb2 = xa->nb2,
		.x_nb3 = xa->nb3, .d_off = b[0].rel, .d_nb0 = (uint32_t)d->nb[0], .d_nb1 = (uint32_t)d->nb[1],
		.d_nb2 = (uint32_t)d->nb[2], .d_nb3 = (uint32_t)d->nb[3], .tpr_log2 = tl, .nrg = (uint32_t)nrg,
		.s_off = xa->s_off,
	};
	char name[32];
	/* decode (one column): the variant with a single accumulator */
	snprintf(name, sizeof(name), "%s%s_%s", mv ? (xa->xr ? "mvr" : "mv") : "mm", mv ? mv_cols(M) : M == 1 ? "1" : "",
		 vk_wtype_name(w));
	if (xrw)
		snprintf(name, sizeof(name), "mv1x%d%d%d%s_%s", xrw, xks, xu2, xav ? "a" : "", vk_wtype_name(w));
	return vk_dispatch(ctx, name, b, 3, &p, sizeof(p), (uint32_t)n_wg);
}

enum alice_status vk_op_get_rows(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *s = a->src[0], *ids = a->src[1], *d = a->dst;
	enum alice_status st = alice_bc_get_rows_shape(s, ids, d, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	/* a table larger than one descriptor range (an embedding matrix on a
	 * 128 MiB-range device) goes in slices of source rows: each dispatch
	 * copies the ids that fall in its slice */
	int64_t per = rows_per_range(ctx, s->nb[1]);
	if (per < 1)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "one row exceeds maxStorageBufferRange");
	if ((uint64_t)s->nb[1] * (uint64_t)s->ne[1] <= ctx->max_range / 2)
		per = s->ne[1];
	for (int64_t r0 = 0; r0 < s->ne[1]; r0 += per) {
		struct alice_tensor ss = *s;
		ss.ne[1] = s->ne[1] - r0 < per ? s->ne[1] - r0 : per;
		ss.offset += (uint64_t)r0 * (uint64_t)s->nb[1];
		struct vk_bind b[3];
		enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
		if (st == ALICE_OK)
			st = vk_bind_tensor(ctx, &ss, &b[1]);
		if (st == ALICE_OK)
			st = vk_bind_tensor(ctx, ids, &b[2]);
		if (st != ALICE_OK)
			return st;
		uint64_t n_rows = (uint64_t)(ids->ne[0] * ids->ne[1] * ids->ne[2]);
		struct gr_push p = {
		.ne0 = (uint32_t)s->ne[0], .n_rows = (uint32_t)n_rows, .src_nrows = (uint32_t)ss.ne[1],
		.row0 = (uint32_t)r0, .total_rows = (uint32_t)s->ne[1],
		.n_wg = (uint32_t)n_rows, .s_off = b[1].rel, .s_nb0 = (uint32_t)s->nb[0], .s_nb1 = (uint32_t)s->nb[1],
		.i_off = b[2].rel, .i_ne0 = (uint32_t)ids->ne[0], .i_ne1 = (uint32_t)ids->ne[1],
		.i_nb0 = (uint32_t)ids->nb[0], .i_nb1 = (uint32_t)ids->nb[1], .i_nb2 = (uint32_t)ids->nb[2],
		.d_off = b[0].rel, .d_nb0 = (uint32_t)d->nb[0], .d_nb1 = (uint32_t)d->nb[1], .d_nb2 = (uint32_t)d->nb[2],
		.d_nb3 = (uint32_t)d->nb[3],
	};
		char name[32];
		snprintf(name, sizeof(name), "gr_%s", vk_wtype_name(s));
		if ((st = vk_dispatch(ctx, name, b, 3, &p, sizeof(p), (uint32_t)n_rows)) != ALICE_OK)
			return st;
	}
	return ALICE_OK;
}

/* ---- mat-vecs of one input as one dispatch (vk_fuse.c) ---- */

struct mvf_push {
	uint32_t K, M, mtiles, n_wg;
	uint32_t nrg, x_off, x_nb1, w_nb1;
	uint32_t act, rg1, rg2, pad;
	uint32_t N[4], w_off[4], d_off[4], d_nb1[4];
	uint32_t q_off, c_off; /* GQ: the rounded copy, the block counters */
};

/* MUL_MAT a as mm_one would run it on mv.comp: a decode product of a
 * 2-D weight of an mv type in one slice, an F32 [N, M] output */
static bool takes_mv(struct alice_backend_ctx *ctx, const struct alice_op_args *a)
{
	const struct alice_tensor *w = a->src[0], *x = a->src[1], *d = a->dst;
	char err[8];
	if (alice_bc_mul_mat_shape(w, x, d, err, sizeof(err)) != ALICE_OK || (a->src[2] && a->node->ip[0] > 8))
		return false;
	if (x->ne[1] >= tiled_min_m() && !mm_decode_step(a))
		return false;
	if ((w->type != ALICE_TYPE_Q4_K && w->type != ALICE_TYPE_Q6_K && w->type != ALICE_TYPE_Q8_0) || mv_off())
		return false;
	if (w->ne[2] * w->ne[3] != 1 || x->ne[2] * x->ne[3] != 1 || w->ne[0] % 16 ||
	    ((w->type == ALICE_TYPE_Q4_K || (w->flags & ALICE_TENSOR_PACKED)) && w->nb[1] % 16) ||
	    (uint64_t)w->nb[1] * (uint64_t)w->ne[1] > ctx->max_range / 2)
		return false;
	return d->type == ALICE_TYPE_F32 && d->nb[0] == 4 && d->ne[0] == w->ne[1] && d->ne[1] == x->ne[1] &&
	       d->nb[1] <= 0xffffffffll;
}

/* [lo, hi) of tensors t[0..n) in one buffer, if one binding can hold it */
static bool span(struct alice_backend_ctx *ctx, const struct alice_tensor *const *t, int n, uint64_t *lo,
		 uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (int i = 0; i < n; i++) {
		if (t[i]->buf != t[0]->buf)
			return false;
		uint64_t a = t[i]->offset, b = a + alice_bc_extent(t[i]);
		*lo = a < *lo ? a : *lo;
		*hi = b > *hi ? b : *hi;
	}
	return *hi - *lo + 4096 <= ctx->max_range && *hi - *lo < 0x80000000ull;
}

/* where byte off of buf lands in a binding of [lo, ...) (vk_bind_raw's rel) */
static uint64_t rel_in(struct alice_backend_ctx *ctx, const struct alice_buffer *buf, uint64_t lo, uint64_t off)
{
	uint64_t align = ctx->props.limits.minStorageBufferOffsetAlignment, start = buf->base + lo;
	return (align ? start % align : 0) + (off - lo);
}

/* MUL_MAT a as mm_run would run it whole on the cooperative-matrix GEMM:
 * a prefill product (no src2, or one run of all its rows) of a 2-D weight
 * in one slice, an F32 [N, M] output */
static bool takes_mmc(struct alice_backend_ctx *ctx, const struct alice_op_args *a)
{
	const struct alice_tensor *w = a->src[0], *x = a->src[1], *d = a->dst;
	const struct alice_type_info *ti = alice_type_info(w->type);
	char err[8];
	if (alice_bc_mul_mat_shape(w, x, d, err, sizeof(err)) != ALICE_OK || mm_decode_step(a) ||
	    !mm_coopmat(ctx, w, x, false) || (ti->block_size == 1 && w->nb[0] != (int64_t)ti->type_size))
		return false;
	int64_t M = x->ne[1];
	if (a->src[2] && a->node->ip[0] > 8) {
		const int32_t *reg = mm_regime(ctx, a->src[2]);
		if (!reg || reg[0] != M || reg[1] != 0 || reg[2 * (M - 1)] != M || reg[2 * (M - 1) + 1] != M - 1)
			return false;
	}
	if (w->ne[2] * w->ne[3] != 1 || x->ne[2] * x->ne[3] != 1 ||
	    (uint64_t)w->nb[1] * (uint64_t)w->ne[1] > ctx->max_range / 2)
		return false;
	return d->type == ALICE_TYPE_F32 && d->nb[0] == 4 && d->ne[0] == w->ne[1] && d->ne[1] == M &&
	       d->nb[1] <= 0xffffffffll;
}

/* [lo, hi) of tensors t[0..n) in one buffer, if one binding can hold it */
static bool span(struct alice_backend_ctx *ctx, const struct alice_tensor *const *t, int n, uint64_t *lo,
		 uint64_t *hi);

/* a[0..n), each taken whole by `takes`, read one x (and one src2) with
 * weights of one type, packing, K and row stride; w and d get their
 * weights and outputs */
static bool multi_alike(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n,
			bool (*takes)(struct alice_backend_ctx *, const struct alice_op_args *),
			const struct alice_tensor **w, const struct alice_tensor **d)
{
	for (int j = 0; j < n; j++) {
		if (!takes(ctx, &a[j]) || a[j].node->src[1] != a[0].node->src[1] || a[j].src[0]->type != a[0].src[0]->type ||
		    (a[j].src[0]->flags & ALICE_TENSOR_PACKED) != (a[0].src[0]->flags & ALICE_TENSOR_PACKED) ||
		    a[j].src[0]->ne[0] != a[0].src[0]->ne[0] || a[j].src[0]->nb[1] != a[0].src[0]->nb[1] ||
		    a[j].node->src[2] != a[0].node->src[2])
			return false;
		w[j] = a[j].src[0];
		d[j] = a[j].dst;
	}
	return true;
}

/* outputs written together: apart from each other */
static bool apart(const struct alice_tensor *const *d, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (d[i]->offset < d[j]->offset + alice_bc_extent(d[j]) && d[j]->offset < d[i]->offset + alice_bc_extent(d[i]))
				return false;
	return true;
}

/* a[0..n) (2-3 MUL_MATs of one x, no GLU) as one dispatch of mmc.comp's
 * MULTI form: the same tiles' products as their own dispatches (any tile
 * gives the same bits) */
static bool mmc_multi_ok(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n)
{
	const struct alice_tensor *w[3], *d[3];
	uint64_t lo, hi;
	return multi_alike(ctx, a, n, takes_mmc, w, d) && span(ctx, d, n, &lo, &hi) && span(ctx, w, n, &lo, &hi) &&
	       apart(d, n);
}

bool vk_mm_multi_ok(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n,
		    const struct alice_op_args *glu)
{
	if (n < 2 || n > 3 || (glu && n != 2))
		return false;
	if (!glu && mmc_multi_ok(ctx, a, n))
		return true;
	const struct alice_tensor *w[3], *d[4];
	if (!multi_alike(ctx, a, n, takes_mv, w, d))
		return false;
	int nd = n;
	if (glu) {
		const struct alice_tensor *h = glu->dst;
		if (a[0].src[0]->type == ALICE_TYPE_Q6_K || glu->node->src[0] != a[0].node->dst ||
		    glu->node->src[1] != a[1].node->dst || w[0]->ne[1] != w[1]->ne[1] || h->type != ALICE_TYPE_F32 ||
		    h->nb[0] != 4 || h->ne[0] != w[0]->ne[1] || h->ne[1] != d[0]->ne[1] || h->ne[2] * h->ne[3] != 1 ||
		    h->nb[1] > 0xffffffffll || glu->node->ip[0] < 0 || glu->node->ip[0] > 7)
			return false;
		d[nd++] = h;
	}
	uint64_t lo, hi;
	if (!span(ctx, d, nd, &lo, &hi) || !span(ctx, w, n, &lo, &hi))
		return false;
	/* mv.comp reads Q4_K and packed rows as 16-byte vectors */
	for (int j = 0; j < n && (w[0]->type == ALICE_TYPE_Q4_K || (w[0]->flags & ALICE_TENSOR_PACKED)); j++)
		if (rel_in(ctx, w[j]->buf, lo, w[j]->offset) & 15)
			return false;
	/* x is read from scratch: only the outputs must be apart */
	return apart(d, nd);
}

struct mmcf_push {
	uint32_t K, M, mtiles, n_wg;
	uint32_t x_off, x_nb1, w_nb1, flags;
	uint32_t nt1, nt2, ntiles, pad;
	uint32_t N[4], w_off[4], d_off[4], d_nb1[4];
};

static enum alice_status mmc_multi(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n)
{
	const struct alice_tensor *x = a[0].src[1], *w[3], *d[3];
	int64_t Ntot = 0;
	for (int j = 0; j < n; j++) {
		w[j] = a[j].src[0];
		d[j] = a[j].dst;
		Ntot += w[j]->ne[1];
	}
	struct mm_x xa;
	enum alice_status st = mm_half(ctx, x, &xa);
	if (st != ALICE_OK)
		return st;
	uint64_t wlo, whi, dlo, dhi;
	span(ctx, w, n, &wlo, &whi);
	span(ctx, d, n, &dlo, &dhi);
	struct vk_bind b[3];
	if ((st = vk_bind_raw(ctx, d[0]->buf, dlo, dhi - dlo, &b[0])) != ALICE_OK ||
	    (st = vk_bind_raw(ctx, w[0]->buf, wlo, whi - wlo, &b[1])) != ALICE_OK)
		return st;
	b[2] = xa.b;
	int64_t K = w[0]->ne[0], M = x->ne[1];
	const struct mmc_tile *tile = mmc_tile_for(ctx, Ntot, M, 1);
	bool wvec = mmc_wvec(ctx, w[0]);
	struct mmcf_push p = {
		.K = (uint32_t)K, .M = (uint32_t)M, .mtiles = (uint32_t)((M + tile->bm - 1) / tile->bm),
		.x_off = xa.b.rel, .x_nb1 = xa.nb1, .w_nb1 = (uint32_t)w[0]->nb[1], .nt2 = UINT32_MAX,
	};
	uint32_t nt = 0;
	for (int j = 0; j < n; j++) {
		if (j == 1)
			p.nt1 = nt;
		if (j == 2)
			p.nt2 = nt;
		nt += (uint32_t)((w[j]->ne[1] + tile->bn - 1) / tile->bn);
		p.N[j] = (uint32_t)w[j]->ne[1];
		p.w_off[j] = b[1].rel + (uint32_t)(w[j]->offset - wlo);
		p.d_off[j] = b[0].rel + (uint32_t)(d[j]->offset - dlo);
		p.d_nb1[j] = (uint32_t)d[j]->nb[1];
		wvec = wvec && (p.w_off[j] & 15) == 0;
	}
	bool xvec = xa.nb0 == 4 && K % 8 == 0 && ((xa.b.rel | xa.nb1) & 15) == 0;
	p.flags = (xvec ? 1u : 0u) | (wvec ? 2u : 0u) | (xa.xh ? 4u : 0u);
	p.ntiles = nt;
	uint64_t n_wg = (uint64_t)nt * p.mtiles;
	if (n_wg > 0xffffffffull / 2)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "matmul too large (%llu workgroups)", (unsigned long long)n_wg);
	p.n_wg = (uint32_t)n_wg;
	char name[32];
	mmc_name(ctx, tile, true, w[0], name, sizeof(name));
	return vk_dispatch(ctx, name, b, 3, &p, sizeof(p), (uint32_t)n_wg);
}

/* gate/up + GLU (a, glu; vk_mm_multi_ok holds) rounding the GLU output
 * for mm, the MUL_MAT that reads it next, as actq.comp would (mv.comp's
 * GQ): mm rounds it as Q8_K, whole, and the counters cover its blocks */
bool vk_mm_gq_ok(struct alice_backend_ctx *ctx, const struct alice_op_args *a, const struct alice_op_args *glu,
		 const struct alice_op_args *mm)
{
	uint32_t bs, rw, ks;
	const struct alice_tensor *h = glu->dst;
	if (!(ctx->fuse & VK_FUSE_GQ) || !ctx->gq_cnt || a[0].src[0]->type != ALICE_TYPE_Q4_K ||
	    mm->src[1] != h || vk_act_fmt(mm->src[0]->type, &bs) != 4 || !vk_mm_reads_rounded(ctx, mm))
		return false;
	mv_geom(a[0].src[0]->type, &rw, &ks);
	uint32_t per = 4 / ks * (rw / 2);
	int64_t N = h->ne[0], M = h->ne[1];
	return N % 256 == 0 && 256 % per == 0 && (uint64_t)M * (uint64_t)(N / 256) <= VK_GQ_COUNTERS &&
	       (uint64_t)vk_nelem(h) * 4 <= ctx->scratch_region && N * M <= 0x3fffffff;
}

enum alice_status vk_mm_multi(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n,
			      const struct alice_op_args *glu, bool gq)
{
	if (!glu && mmc_multi_ok(ctx, a, n))
		return mmc_multi(ctx, a, n);
	const struct alice_tensor *x = a[0].src[1], *w[3], *d[4];
	for (int j = 0; j < n; j++) {
		w[j] = a[j].src[0];
		d[j] = a[j].dst;
	}
	int nd = n;
	if (glu)
		d[nd++] = glu->dst;
	struct mm_x xa;
	enum alice_status st = mm_round(ctx, w[0], x, &xa);
	if (st != ALICE_OK)
		return st;
	if (xa.nb0 != 4 || ((xa.b.rel | xa.nb1) & 15))
		return vk_fail(ctx, ALICE_ERR_BACKEND, "fused mat-vec: activations misaligned");
	uint64_t wlo, whi, dlo, dhi;
	span(ctx, w, n, &wlo, &whi);
	span(ctx, d, nd, &dlo, &dhi);
	struct vk_bind b[VK_NBIND];
	memset(b, 0, sizeof(b));
	if ((st = vk_bind_raw(ctx, d[0]->buf, dlo, dhi - dlo, &b[0])) != ALICE_OK ||
	    (st = vk_bind_raw(ctx, w[0]->buf, wlo, whi - wlo, &b[1])) != ALICE_OK)
		return st;
	b[2] = xa.b;
	if (gq) {
		/* a scratch region for the rounded copy, not the one x is read from */
		const struct alice_tensor *h = glu->dst;
		uint64_t bytes = (uint64_t)vk_nelem(h) * 4;
		for (int t = 0; t < 2; t++) {
			if ((st = vk_bind_raw(ctx, ctx->scratch, vk_actq_claim(ctx, h, 4), bytes, &b[3])) != ALICE_OK)
				return st;
			if (b[3].buf != b[2].buf || b[3].off >= b[2].off + b[2].range || b[2].off >= b[3].off + b[3].range)
				break;
			vk_actq_drop(ctx, h);
			if (t == 1)
				return vk_fail(ctx, ALICE_ERR_BACKEND, "fused mat-vec: no free scratch region");
		}
		if ((st = vk_bind_raw(ctx, ctx->gq_cnt, 0, (uint64_t)VK_GQ_COUNTERS * 4, &b[VK_SLOT_CNT])) != ALICE_OK)
			return st;
	}
	int64_t M = x->ne[1];
	uint32_t rw, ks;
	mv_geom(w[0]->type, &rw, &ks);
	uint32_t per = 4 / ks * (glu ? rw / 2 : rw);
	struct mvf_push p = {
		.K = (uint32_t)w[0]->ne[0], .M = (uint32_t)M, .mtiles = (uint32_t)((M + mv_tile() - 1) / mv_tile()),
		.x_off = xa.b.rel, .x_nb1 = xa.nb1, .w_nb1 = (uint32_t)w[0]->nb[1],
		.act = glu ? (uint32_t)glu->node->ip[0] : 0,
	};
	uint32_t rg = 0;
	for (int j = 0; j < nd; j++) {
		p.d_off[j] = b[0].rel + (uint32_t)(d[j]->offset - dlo);
		p.d_nb1[j] = (uint32_t)d[j]->nb[1];
	}
	for (int j = 0; j < n; j++) {
		p.N[j] = (uint32_t)w[j]->ne[1];
		p.w_off[j] = b[1].rel + (uint32_t)(w[j]->offset - wlo);
		if (j == 1)
			p.rg1 = rg;
		if (j == 2)
			p.rg2 = rg;
		if (!glu || j == 0)
			rg += (uint32_t)((w[j]->ne[1] + per - 1) / per);
	}
	if (n < 3)
		p.rg2 = UINT32_MAX;
	p.nrg = rg;
	uint64_t n_wg = (uint64_t)rg * p.mtiles;
	if (n_wg > 0xffffffffull / 2)
		return vk_fail(ctx, ALICE_ERR_UNSUPPORTED, "matmul too large (%llu workgroups)", (unsigned long long)n_wg);
	p.n_wg = (uint32_t)n_wg;
	p.q_off = b[3].rel;
	p.c_off = b[VK_SLOT_CNT].rel;
	char name[32];
	snprintf(name, sizeof(name), "mv%s%s_%s", glu ? (gq ? "gq" : "g") : "f", mv_cols(M), vk_wtype_name(w[0]));
	return vk_dispatch_rw(ctx, name, b, gq ? VK_NBIND : 3, gq ? (1u << 3) | (1u << VK_SLOT_CNT) : 0, &p, sizeof(p),
			      (uint32_t)n_wg);
}

bool vk_mm_reads_rounded(struct alice_backend_ctx *ctx, const struct alice_op_args *a)
{
	const struct alice_tensor *x = a->src[1];
	if (a->src[2] && a->node->ip[0] > 8 && x->ne[2] * x->ne[3] == 1)
		return false; /* runs of rows, each rounded on its own */
	return !mm_coopmat(ctx, a->src[0], x, mm_decode_step(a));
}
