/* ops_matmul.c — MUL_MAT (quantized weight x F32 activations) and GET_ROWS.
 *
 * MUL_MAT runs in two passes over the thread pool: (1) each activation row is
 * converted once into the format the weight type's dot product pairs with
 * (F16 for F16, BF16 for BF16, Q8_0 blocks for the 32-blocks, Q8_K for the
 * K-quants — what llama.cpp does, so logits compare closely); (2) weight rows
 * are handed out in chunks through an atomic counter and each is dotted with
 * a tile of activation rows while it sits in L1. Where the kernel table has a
 * GEMM for the weight type (AVX-512 VNNI: Q8_0; AMX: Q4_K, Q6_K), pass (1) also packs the
 * rounded rows into the GEMM's layout and pass (2) hands out 16 weight rows
 * at a time; that GEMM and the type's mat-vec share one accumulation order,
 * so a row's result does not depend on how many rows share the op.
 *
 * A weight type with no SIMD dot for the current ISA takes the generic path:
 * its row is dequantized with the reference dequantizer and dotted in F32
 * with activations rounded the same way (quantize + dequantize), which is the
 * same arithmetic up to summation order. */
#include <string.h>

#include "cpu_internal.h"
#include "mm_order.h"

#define COL_TILE 16
#define FLT_COL_TILE 96

static size_t act_row_bytes(enum act_fmt f, int64_t k, bool spec)
{
	if (!spec)
		return (size_t)k * sizeof(float);
	switch (f) {
	case ACT_F32: return (size_t)k * 4;
	case ACT_F16:
	case ACT_BF16: return (size_t)k * 2;
	case ACT_Q8_0: return (size_t)(k / QK8) * sizeof(struct act_q8_0);
	case ACT_Q8_K: return (size_t)(k / QKK) * sizeof(struct act_q8_k);
	}
	return 0;
}

/* Round a float row the way the activation format would (generic path). */
static void round_row(const struct cpu_kernels *k, enum act_fmt f, int64_t n, const float *x,
		      float *y, void *tmp)
{
	switch (f) {
	case ACT_F32:
		if (y != x)
			memcpy(y, x, (size_t)n * 4);
		return;
	case ACT_F16:
		k->f32_to_f16(n, x, tmp);
		k->f16_to_f32(n, tmp, y);
		return;
	case ACT_BF16:
		k->round_bf16(n, x, y, NULL);
		return;
	case ACT_Q8_0: {
		struct act_q8_0 *b = tmp;
		k->quant_q8_0(n, x, b);
		for (int64_t i = 0; i < n / QK8; i++)
			for (int j = 0; j < QK8; j++)
				y[i * QK8 + j] = b[i].d * (float)b[i].q[j];
		return;
	}
	case ACT_Q8_K: {
		struct act_q8_k *b = tmp;
		k->quant_q8_k(n, x, b);
		for (int64_t i = 0; i < n / QKK; i++)
			for (int j = 0; j < QKK; j++)
				y[i * QKK + j] = b[i].d * (float)b[i].q[j];
		return;
	}
	}
}

struct mm_job {
	struct alice_backend_ctx *ctx;
	const struct alice_tensor *regime; /* MUL_MAT src2: I32 [2, M] or NULL */
	const struct cpu_kernels *k;
	uint32_t type;
	enum act_fmt act;
	bool spec;
	int64_t K, N, M, ne12, ne13, r2, r3;
	const uint8_t *w;
	int64_t wnb1, wnb2, wnb3;
	const uint8_t *x;
	int64_t xnb0, xnb1, xnb2, xnb3;
	uint8_t *d;
	int64_t dnb0, dnb1, dnb2, dnb3;
	uint8_t *abuf; /* converted activation rows (NULL: one row, per thread) */
	uint8_t *xbf; /* BF16 weights: the rows also packed for the tiles (cpu_mm_order_bf16_packed) */
	size_t xbf_row;
	bool f16_tiles; /* F16 weights: cpu_mm_order_gemm_f16 */
	size_t wide_row; /* float tiles on widened weights (flt_tiles_wide): a widened row's bytes */
	size_t act_row, tmp_bytes;
	/* GEMM (k->gemm[type]): the rows also packed, ceil(M/16) groups per batch */
	bool gemm;
	uint8_t *grp; /* per row: llama.cpp's grouped regime (cpu_row_grouped); NULL: none */
	uint8_t *apack;
	size_t grp_bytes;
	int64_t mg;
	long chunk, n_chunks_per_batch;
	/* each counter on a line of its own: every fetch-add would otherwise
	 * take the line the other threads read the job's fields from */
	_Alignas(64) atomic_long ctr;
	_Alignas(64) atomic_long conv_ctr;
};

/* Convert activation row r into out; gather/tmp: thread scratch. */
static void convert_row(const struct mm_job *j, long r, uint8_t *out, float *gather, void *tmp)
{
	const struct cpu_kernels *k = j->k;
	int64_t m = r % j->M, i2 = (r / j->M) % j->ne12, i3 = r / (j->M * j->ne12);
	const uint8_t *src = j->x + m * j->xnb1 + i2 * j->xnb2 + i3 * j->xnb3;
	const float *row = (const float *)src;
	if (j->xnb0 != 4) {
		for (int64_t i = 0; i < j->K; i++)
			memcpy(&gather[i], src + i * j->xnb0, 4);
		row = gather;
	}
	if (!j->spec) {
		round_row(k, j->act, j->K, row, (float *)out, tmp);
		if (j->xbf)
			cpu_mm_order_bf16_pack(j->K, (const float *)out, j->xbf + (size_t)r * j->xbf_row);
		return;
	}
	{
		switch (j->act) {
		case ACT_F32: memcpy(out, row, (size_t)j->K * 4); break;
		case ACT_F16: k->f32_to_f16(j->K, row, (uint16_t *)out); break;
		case ACT_BF16: k->round_bf16(j->K, row, NULL, (uint16_t *)out); break;
		case ACT_Q8_0: k->quant_q8_0(j->K, row, (struct act_q8_0 *)out); break;
		case ACT_Q8_K: k->quant_q8_k(j->K, row, (struct act_q8_k *)out); break;
		}
	}
}

/* Float weights: is row m in the multi-row regime, i.e. does its sequence
 * have >= 2 rows in this op? src2 says it per row (backend.h); without it
 * the op's row count decides, as in llama.cpp. */
static bool row_multi(const struct mm_job *j, int64_t m)
{
	if (!j->regime)
		return j->M >= 2;
	int32_t v;
	memcpy(&v, tensor_data(j->regime) + m * j->regime->nb[1], 4);
	return v >= 2;
}

/* Thread scratch: [dequantized weight row: K floats][gather: K floats]
 * [rounding tmp][own activation row when decoding]. */
static float *t_wrow(const struct mm_job *j, int ith) { return (float *)j->ctx->tdata[ith]; }
static float *t_gather(const struct mm_job *j, int ith) { return t_wrow(j, ith) + ((j->K + 15) & ~15); }
static void *t_tmp(const struct mm_job *j, int ith) { return t_gather(j, ith) + ((j->K + 15) & ~15); }
static uint8_t *t_act(const struct mm_job *j, int ith) { return (uint8_t *)t_tmp(j, ith) + j->tmp_bytes; }

static uint8_t *t_gemm(const struct mm_job *j, int ith) { return t_act(j, ith); } /* no own row with a GEMM */

/* Row `lane` of a 16-row group in the GEMM's layout (struct apack_*). */
static void pack_q8_k(const struct act_q8_k *a, int64_t nb, struct apack_q8_k *g, int lane)
{
	for (int64_t b = 0; b < nb; b++) {
		for (int kk = 0; kk < QKK / 4; kk++)
			memcpy(g[b].q + kk * 64 + 4 * lane, a[b].q + 4 * kk, 4);
		g[b].d[lane] = a[b].d;
		for (int p = 0; p < 4; p++)
			for (int i = 0; i < 2; i++) {
				int sb = 2 * p + i; /* 32-element sub-block = two 16-sums */
				g[b].bsp[p][2 * lane + i] = (int16_t)(a[b].bsums[2 * sb] + a[b].bsums[2 * sb + 1]);
			}
	}
}

static void pack_q6p(const struct act_q8_k *a, int64_t nb, struct apack_q6p *g, int lane)
{
	int p = lane / 2, h = lane % 2;
	for (int64_t b = 0; b < nb; b++) {
		for (int gr = 0; gr < QKK / 32; gr++)
			memcpy(&g[b].q[p][gr][32 * h], a[b].q + 32 * gr, 32);
		memcpy(&g[b].bs[p][16 * h], a[b].bsums, sizeof(a[b].bsums));
		for (int i = 0; i < 8; i++)
			g[b].d2[p][8 * h + i] = a[b].d;
	}
}

static void mm_convert(void *arg, int ith, int nth)
{
	(void)nth;
	struct mm_job *j = arg;
	long total = (long)(j->M * j->ne12 * j->ne13), r0, r1;
	while (chunk_next(&j->conv_ctr, total, 4, &r0, &r1))
		for (long r = r0; r < r1; r++) {
			uint8_t *row = j->abuf + (size_t)r * j->act_row;
			convert_row(j, r, row, t_gather(j, ith), t_tmp(j, ith));
			if (!j->gemm || j->k->gemm_rows[j->type])
				continue;
			int64_t m = r % j->M, bi = r / j->M;
			uint8_t *g = j->apack + (size_t)(bi * j->mg + m / 16) * j->grp_bytes;
			if (j->type == ALICE_TYPE_Q6_K && j->k->q6_k_pairs)
				pack_q6p((const struct act_q8_k *)row, j->K / QKK, (struct apack_q6p *)g, (int)(m % 16));
			else if (j->act == ACT_Q8_0)
				j->k->pack_q8_0((const struct act_q8_0 *)row, j->K / QK8, (struct apack_q8_0 *)g, (int)(m % 16));
			else
				pack_q8_k((const struct act_q8_k *)row, j->K / QKK, (struct apack_q8_k *)g, (int)(m % 16));
		}
}

/* Prefill with a GEMM kernel: group c = 16 weight rows of one batch; rows
 * left over (N % 16) take the dot kernel, which has the same arithmetic. */
static void mm_gemm_group(const struct mm_job *j, long c, long ngrp, int ith)
{
	const struct cpu_kernels *k = j->k;
	long b = c / ngrp;
	int64_t n0 = (c % ngrp) * 16;
	int64_t i2 = b % j->ne12, i3 = b / j->ne12;
	const uint8_t *wb = j->w + (i2 / j->r2) * j->wnb2 + (i3 / j->r3) * j->wnb3;
	uint8_t *db = j->d + i2 * j->dnb2 + i3 * j->dnb3;
	if (n0 + 16 <= j->N) {
		const uint8_t *ap = k->gemm_rows[j->type] ? j->abuf + (size_t)b * (size_t)j->M * j->act_row
							  : j->apack + (size_t)b * (size_t)j->mg * j->grp_bytes;
		k->gemm[j->type](j->K, wb + n0 * j->wnb1, (size_t)j->wnb1, ap, j->M, db + n0 * j->dnb0,
				 (size_t)j->dnb0, (size_t)j->dnb1, t_gemm(j, ith),
				 j->grp ? j->grp + (size_t)b * (size_t)j->M : NULL);
		return;
	}
	const uint8_t *ab = j->abuf + (size_t)b * (size_t)j->M * j->act_row;
	for (int64_t n = n0; n < j->N; n++)
		for (int64_t m = 0; m < j->M; m++) {
			float r;
			if (k->dotx[j->type]) {
				int32_t place[2] = {(int32_t)j->M, (int32_t)m};
				if (j->regime)
					memcpy(place, tensor_data(j->regime) + m * j->regime->nb[1], 8);
				k->dotx[j->type](j->K, wb + n * j->wnb1, ab + (size_t)m * j->act_row, place[0],
						 place[1], j->N, &r);
			} else
				k->dot[j->type](j->K, wb + n * j->wnb1, ab + (size_t)m * j->act_row, &r);
			memcpy(db + n * j->dnb0 + m * j->dnb1, &r, 4);
		}
}

static void mm_gemm(void *arg, int ith, int nth)
{
	struct mm_job *j = arg;
	long ngrp = (long)((j->N + 15) / 16), total = ngrp * (long)(j->ne12 * j->ne13), c0, c1;
	/* about 8 takes per thread: a group of a small-M product is ~1 us,
	 * about what a contended fetch-add costs */
	long step = total / (8L * nth) > 1 ? total / (8L * nth) : 1;
	while (chunk_next(&j->ctr, total, step, &c0, &c1))
		for (long c = c0; c < c1; c++)
			mm_gemm_group(j, c, ngrp, ith);
}

/* Float prefill in 4 x nx tiles (F16 on AVX-512, BF16 with vdpbf16ps),
 * weight rows [n, nn) x activation rows [m0, m1): activation rows
 * outermost, so a tile's rows stay in L1 while an L2-sized block of weight
 * rows streams past (+14% against weight rows outermost); rows outside the
 * gemm order (their sequence has one row here) take the single dot. */
static void flt_tiles(const struct mm_job *j, long b, const uint8_t *wb, uint8_t *db, const uint8_t *ab, int64_t n,
		      int64_t nn, int64_t m0, int64_t m1)
{
	int64_t nbk = ((int64_t)(256 << 10) / (j->wnb1 > 0 ? j->wnb1 : 1)) & ~(int64_t)3;
	if (nbk < 4)
		nbk = 4;
	for (int64_t nb0 = n; nb0 < nn; nb0 += nbk) {
		int64_t nb1 = nb0 + nbk < nn ? nb0 + nbk : nn, nb2 = nb1 + nbk < nn ? nb1 + nbk : nn;
		/* the next block's rows are fetched while this one's tiles run: each
		 * row is a page of its own that the hardware prefetcher starts cold */
		const uint8_t *pf = wb + nb1 * j->wnb1, *pf_end = wb + nb2 * j->wnb1;
		size_t pf_step = (size_t)(pf_end - pf) / (size_t)(((m1 - m0 + 5) / 6) * ((nb1 - nb0 + 3) / 4) + 1) + 64;
		for (int64_t m = m0; m < m1;) {
			enum mm_order o = cpu_mm_order(j->type, row_multi(j, m), j->K, j->N);
			const float *xa = (const float *)(ab + (size_t)m * j->act_row);
			if (!(j->xbf && o == MM_ORD_GEMM_BF16) && !(j->f16_tiles && o == MM_ORD_GEMM16)) {
				for (int64_t q = nb0; q < nb1; q++) {
					float r = cpu_mm_order_dot_raw(o, j->type, j->K, wb + q * j->wnb1, xa);
					memcpy(db + q * j->dnb0 + m * j->dnb1, &r, 4);
				}
				m++;
				continue;
			}
			int nx = 1;
			while (nx < 6 && m + nx < m1 && row_multi(j, m + nx))
				nx++;
			size_t r = (size_t)b * (size_t)j->M + (size_t)m;
			for (int64_t q = nb0; q < nb1; q += 4) {
				float *o4 = (float *)(db + q * j->dnb0 + m * j->dnb1);
				if (j->xbf)
					cpu_mm_order_gemm_bf16p(j->K, wb + q * j->wnb1, (size_t)j->wnb1, j->xbf + r * j->xbf_row,
								j->xbf_row, nx, o4, (size_t)j->dnb0, (size_t)j->dnb1);
				else
					cpu_mm_order_gemm_f16(j->K, wb + q * j->wnb1, (size_t)j->wnb1, xa,
							      (int64_t)(j->act_row / 4), nx, o4, (size_t)j->dnb0, (size_t)j->dnb1);
				for (const uint8_t *e = pf + pf_step; pf < pf_end && pf < e; pf += 64)
					__builtin_prefetch(pf, 0, 2);
			}
			m += nx;
		}
	}
}

/* The same on the AVX2 level's widened tiles (cpu_mm_order_wtile): 4
 * weight rows at a time, K in chunks; each chunk of the 4 rows is widened
 * just before its tiles run (it stays in L1 while every activation row's
 * chunk passes; whole rows of K = 8192 did not fit and ran at 60%), and the
 * next chunk's raw bytes are fetched while they run. WIDE_QB weight rows
 * take each activation chunk in turn before the next chunk, so the chunk
 * (M x 4 KB) is read from L2 by 8 groups of 4 rows, not from L3 by one (at
 * K = 8192 the activations, 2 MB for 64 rows, do not fit L2). The outputs'
 * lanes stay in `acc` between chunks (per group of 4 rows and activation
 * row: [4][nx][16]). Widening whole runs of 16 rows ahead (up to 512 KB at
 * K = 8192) left the widening waiting on DRAM for 17% of an F16 prefill:
 * the prefetched rows were evicted by the activations streaming through L2. */
#define WIDE_KC 1024 /* a multiple of 32 */
#define WIDE_QB 32   /* a multiple of 4 */
static void flt_tiles_wide(const struct mm_job *j, long b, const uint8_t *wb, uint8_t *db, const uint8_t *ab,
			   int64_t n, int64_t nn, int64_t m0, int64_t m1, uint8_t *scratch)
{
	float *wide = (float *)scratch, *acc0 = wide + 4 * WIDE_KC;
	const float *xrows = j->xbf ? (const float *)(j->xbf + ((size_t)b * (size_t)j->M) * j->xbf_row)
				    : (const float *)ab;
	int64_t xs = (int64_t)((j->xbf ? j->xbf_row : j->act_row) / 4);
	const int64_t K = j->K;
	for (int64_t qb = n; qb < nn; qb += WIDE_QB) {
		const int64_t qe = qb + WIDE_QB < nn ? qb + WIDE_QB : nn;
		for (int64_t k0 = 0; k0 < K; k0 += WIDE_KC) {
			int64_t k1 = k0 + WIDE_KC < K ? k0 + WIDE_KC : K;
			for (int64_t q = qb; q < qe; q += 4) {
				cpu_mm_order_widen4(j->type, k0, k1, wb + q * j->wnb1, (size_t)j->wnb1, wide);
				float *acc = acc0 + (q - qb) / 4 * (m1 - m0) * 64;
				/* the next chunk: the next group's, else this block's next
				 * chunk of its first group, else the next block's first */
				int64_t pq = q + 4, pk0 = k0;
				if (pq >= qe) {
					pq = k1 < K ? qb : qe;
					pk0 = k1 < K ? k1 : 0;
				}
				int64_t pk1 = pk0 + WIDE_KC < K ? pk0 + WIDE_KC : K;
				const int64_t lines = pq < nn ? (pk1 - pk0) * 2 / 64 : 0; /* per row (2-byte values) */
				int64_t li = 0;
				for (int64_t m = m0; m < m1;) {
					int nx = 0;
					while (nx < 3 && m + nx < m1 && row_multi(j, m + nx))
						nx++;
					if (!nx) {
						m++;
						continue;
					}
					cpu_mm_order_wtile(j->type, nx, k0, k1, K, wide, xrows + m * xs, xs, acc + (m - m0) * 64,
							   db + q * j->dnb0 + m * j->dnb1, (size_t)j->dnb0, (size_t)j->dnb1);
					for (int i = 0; i < 8 && li < 4 * lines; i++, li++)
						__builtin_prefetch(wb + (pq + li / lines) * j->wnb1 + pk0 * 2 + (li % lines) * 64, 0, 3);
					m += nx;
				}
			}
		}
		for (int64_t q = qb; q < qe; q += 4)
			for (int64_t m = m0; m < m1; m++) { /* rows outside the gemm order */
				if (row_multi(j, m))
					continue;
				uint8_t *o = db + q * j->dnb0 + m * j->dnb1;
				enum mm_order ord = cpu_mm_order(j->type, false, j->K, j->N);
				for (int r = 0; r < 4; r++) {
					float v = cpu_mm_order_dot_raw(ord, j->type, j->K, wb + (q + r) * j->wnb1,
								       (const float *)(ab + (size_t)m * j->act_row));
					memcpy(o + r * j->dnb0, &v, 4);
				}
			}
	}
}

static void mm_dot(void *arg, int ith, int nth)
{
	(void)nth;
	struct mm_job *j = arg;
	const struct cpu_kernels *k = j->k;
	float *wrow = t_wrow(j, ith);
	long total = j->n_chunks_per_batch * (long)(j->ne12 * j->ne13);
	const uint8_t *own = NULL;
	if (!j->abuf) { /* decode: every thread rounds the single row itself, no barrier */
		uint8_t *o = t_act(j, ith);
		convert_row(j, 0, o, t_gather(j, ith), t_tmp(j, ith));
		own = o;
	}
	long c0, c1;
	vec_dotx_fn dotx = j->spec ? k->dotx[j->type] : NULL;
	vec_dot_fn dot = j->spec ? k->dot[j->type] : NULL;
	vec_dot4_fn dot4 = j->spec ? k->dot4[j->type] : NULL;
	vec_dotr4_fn dotr4 = j->spec ? k->dotr4[j->type] : NULL;
	vec_dotn_fn dotn = j->spec ? k->dotn[j->type] : NULL;
	if (dotr4 && k->dotr4_max[j->type] && j->N * j->wnb1 > k->dotr4_max[j->type])
		dotr4 = NULL;
	/* activation rows per pass over the chunk's weights: the float tiles
	 * take up to 96 (their rows stay in L2) so weights are read once */
	const int64_t ct = j->xbf || j->f16_tiles ? FLT_COL_TILE : COL_TILE;
	while (chunk_next(&j->ctr, total, 1, &c0, &c1)) {
		long b = c0 / j->n_chunks_per_batch;
		int64_t n0 = (c0 % j->n_chunks_per_batch) * j->chunk;
		int64_t n1 = n0 + j->chunk < j->N ? n0 + j->chunk : j->N;
		int64_t i2 = b % j->ne12, i3 = b / j->ne12;
		const uint8_t *wb = j->w + (i2 / j->r2) * j->wnb2 + (i3 / j->r3) * j->wnb3;
		uint8_t *db = j->d + i2 * j->dnb2 + i3 * j->dnb3;
		const uint8_t *ab = own ? own : j->abuf + (size_t)b * (size_t)j->M * j->act_row;
		for (int64_t m0 = 0; m0 < j->M; m0 += ct) {
			int64_t m1 = m0 + ct < j->M ? m0 + ct : j->M;
			int64_t n = n0;
			/* one activation row: the whole run, or 4 weight rows per pass
			 * (its single-row order) */
			if (dotn && m1 - m0 == 1 && !(j->grp && j->grp[(size_t)b * (size_t)j->M + (size_t)m0])) {
				dotn(j->K, wb + n * j->wnb1, (size_t)j->wnb1, n1 - n, ab + (size_t)m0 * j->act_row,
				     db + n * j->dnb0 + m0 * j->dnb1, (size_t)j->dnb0);
				n = n1;
			}
			if (dotr4 && m1 - m0 == 1 && !(j->grp && j->grp[(size_t)b * (size_t)j->M + (size_t)m0]))
				for (; n + 4 <= n1; n += 4) {
					float r4[4];
					dotr4(j->K, wb + n * j->wnb1, (size_t)j->wnb1, ab + (size_t)m0 * j->act_row, r4);
					for (int c = 0; c < 4; c++)
						memcpy(db + (n + c) * j->dnb0 + m0 * j->dnb1, &r4[c], 4);
				}
			bool flt = j->type == ALICE_TYPE_F32 || j->type == ALICE_TYPE_F16 || j->type == ALICE_TYPE_BF16;
			if (flt && !j->spec && m1 - m0 == 1) { /* float decode: the whole chunk in one call */
				enum mm_order o = cpu_mm_order(j->type, row_multi(j, m0), j->K, j->N);
				cpu_mm_order_dot_rows(o, j->type, j->K, wb + n * j->wnb1, (size_t)j->wnb1,
						      (const float *)(ab + (size_t)m0 * j->act_row), n1 - n,
						      (float *)(db + n * j->dnb0 + m0 * j->dnb1), (size_t)j->dnb0);
				continue;
			}
			if (flt && !j->spec && (j->xbf || j->f16_tiles) && n + 4 <= n1) {
				int64_t nn = n + ((n1 - n) & ~(int64_t)3);
				if (j->wide_row)
					flt_tiles_wide(j, b, wb, db, ab, n, nn, m0, m1, t_act(j, ith));
				else
					flt_tiles(j, b, wb, db, ab, n, nn, m0, m1);
				n = nn;
			}
			/* float prefill: 4 weight rows x 4 activation rows in registers
			 * where the 4 rows all take the gemm order */
			for (; flt && !j->spec && m1 - m0 >= 4 && n + 4 <= n1; n += 4)
				for (int64_t m = m0; m < m1;) {
					enum mm_order o = cpu_mm_order(j->type, row_multi(j, m), j->K, j->N);
					const float *xa = (const float *)(ab + (size_t)m * j->act_row);
					if (m + 4 <= m1 && (o == MM_ORD_GEMM16 || o == MM_ORD_GEMM_BF16) && row_multi(j, m + 1) &&
					    row_multi(j, m + 2) && row_multi(j, m + 3)) {
						cpu_mm_order_dot_raw4x4(o, j->type, j->K, wb + n * j->wnb1, (size_t)j->wnb1, xa,
									(int64_t)(j->act_row / 4),
									(float *)(db + n * j->dnb0 + m * j->dnb1), (size_t)j->dnb0,
									(size_t)j->dnb1);
						m += 4;
						continue;
					}
					for (int c = 0; c < 4; c++) {
						float r = cpu_mm_order_dot_raw(o, j->type, j->K, wb + (n + c) * j->wnb1, xa);
						memcpy(db + (n + c) * j->dnb0 + m * j->dnb1, &r, 4);
					}
					m++;
				}
			for (; n < n1; n++) {
				const uint8_t *w = wb + n * j->wnb1;
				const float *wf = (const float *)w;
				if (!j->spec && !flt) {
					alice_dequantize(j->type, w, wrow, j->K);
					wf = wrow;
				}
				int64_t m = m0;
				/* float weights: llama.cpp's orders on the raw row (mm_order.h),
				 * 4 activation rows at once where all 4 take its gemm order */
				for (; flt && !j->spec && m < m1;) {
					enum mm_order o = cpu_mm_order(j->type, row_multi(j, m), j->K, j->N);
					const float *xa = (const float *)(ab + (size_t)m * j->act_row);
					if (m + 4 <= m1 && (o == MM_ORD_GEMM16 || o == MM_ORD_GEMM_BF16) && row_multi(j, m + 1) &&
					    row_multi(j, m + 2) && row_multi(j, m + 3)) {
						float r4[4];
						cpu_mm_order_dot_raw4(o, j->type, j->K, w, xa, (int64_t)(j->act_row / 4), r4);
						for (int c = 0; c < 4; c++)
							memcpy(db + n * j->dnb0 + (m + c) * j->dnb1, &r4[c], 4);
						m += 4;
						continue;
					}
					float r = cpu_mm_order_dot_raw(o, j->type, j->K, w, xa);
					memcpy(db + n * j->dnb0 + m * j->dnb1, &r, 4);
					m++;
				}
				for (; dot4 && m + 4 <= m1; m += 4) {
					float r4[4];
					dot4(j->K, w, ab + (size_t)m * j->act_row, j->act_row, r4);
					for (int c = 0; c < 4; c++)
						memcpy(db + n * j->dnb0 + (m + c) * j->dnb1, &r4[c], 4);
				}
				for (; m < m1; m++) {
					const uint8_t *a = ab + (size_t)m * j->act_row;
					float r;
					if (dotx) {
						int32_t place[2] = {(int32_t)j->M, (int32_t)m};
						if (j->regime)
							memcpy(place, tensor_data(j->regime) + m * j->regime->nb[1], 8);
						dotx(j->K, w, a, place[0], place[1], j->N, &r);
					} else if (dot)
						dot(j->K, w, a, &r);
					else
						r = k->dot_f32(j->K, wf, (const float *)a);
					memcpy(db + n * j->dnb0 + m * j->dnb1, &r, 4);
				}
			}
		}
	}
}

enum alice_status cpu_op_mul_mat(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *w = a->src[0], *x = a->src[1], *d = a->dst;
	int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
	enum alice_status st = alice_bc_mul_mat_shape(w, x, d, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	if (a->src[2] && (a->src[2]->type != ALICE_TYPE_I32 || a->src[2]->ne[0] != 2 || a->src[2]->ne[1] != M ||
			  x->ne[2] * x->ne[3] != 1))
		return cpu_fail(ctx, ALICE_ERR_INVALID, "row regime (src2) must be I32 [2, %lld] with unbatched activations",
				(long long)M);
	if (w->type == ALICE_TYPE_F32 || w->type == ALICE_TYPE_F16 || w->type == ALICE_TYPE_BF16) {
		if (w->nb[0] != (int64_t)alice_type_info(w->type)->type_size)
			return cpu_fail(ctx, ALICE_ERR_INVALID, "weight rows must be contiguous (nb[0] = %lld)",
					(long long)w->nb[0]);
	}
	if (K % QK8 != 0 && w->type != ALICE_TYPE_F32 && w->type != ALICE_TYPE_F16 &&
	    w->type != ALICE_TYPE_BF16)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "K = %lld is not a multiple of 32", (long long)K);
	struct mm_job j;
	memset(&j, 0, sizeof(j));
	j.ctx = ctx;
	j.regime = a->src[2];
	j.k = cpu_k;
	j.type = w->type;
	j.act = cpu_act_of(w->type);
	/* F32 weights take the generic path: it is the plain dot, no row copy.
	 * So do F16/BF16 in prefill: the row is widened once per column tile and
	 * the activations are stored as floats already rounded to F16/BF16. */
	j.spec = w->type != ALICE_TYPE_F32 && cpu_k->dot[w->type] != NULL;
	if (w->type == ALICE_TYPE_F16 || w->type == ALICE_TYPE_BF16)
		j.spec = false; /* llama.cpp's summation orders (mm_order.c) on widened rows */
	j.K = K;
	j.N = N;
	j.M = M;
	j.ne12 = x->ne[2];
	j.ne13 = x->ne[3];
	j.r2 = x->ne[2] / w->ne[2];
	j.r3 = x->ne[3] / w->ne[3];
	j.w = tensor_data(w);
	j.wnb1 = w->nb[1];
	j.wnb2 = w->nb[2];
	j.wnb3 = w->nb[3];
	j.x = tensor_data(x);
	j.xnb0 = x->nb[0];
	j.xnb1 = x->nb[1];
	j.xnb2 = x->nb[2];
	j.xnb3 = x->nb[3];
	j.d = tensor_data(d);
	j.dnb0 = d->nb[0];
	j.dnb1 = d->nb[1];
	j.dnb2 = d->nb[2];
	j.dnb3 = d->nb[3];
	j.act_row = act_row_bytes(j.act, K, j.spec);
	size_t n_rows = (size_t)(M * j.ne12 * j.ne13);
	j.tmp_bytes = ((size_t)(K / QK8 + 1) * sizeof(struct act_q8_0) + (size_t)K * 2 + 63) & ~(size_t)63;
	j.gemm = j.spec && n_rows > 1 && cpu_k->gemm[w->type] != NULL;
	size_t rows_bytes = (n_rows * j.act_row + 63) & ~(size_t)63, pack_bytes = 0;
	/* rows whose llama.cpp order depends on their place (Q4_K, Q2_K) */
	bool placed = j.spec && n_rows > 1 && cpu_k->dotx[w->type] != NULL;
	if (j.gemm && !cpu_k->gemm_rows[w->type]) {
		j.mg = (M + 15) / 16;
		j.grp_bytes = j.act == ACT_Q8_0 ? (size_t)(K / QK8) * sizeof(struct apack_q8_0)
			      : w->type == ALICE_TYPE_Q6_K && cpu_k->q6_k_pairs ? (size_t)(K / QKK) * sizeof(struct apack_q6p)
									 : (size_t)(K / QKK) * sizeof(struct apack_q8_k);
		pack_bytes = (size_t)(j.mg * j.ne12 * j.ne13) * j.grp_bytes;
	}
	bool tiles = n_rows >= 2 && ((w->type == ALICE_TYPE_F16 && cpu_mm_order_f16_tiles(K)) ||
				     (w->type == ALICE_TYPE_BF16 && cpu_mm_order_bf16_packed(K)));
	j.wide_row = tiles ? cpu_mm_order_widened_row(w->type, K) : 0;
	size_t tbytes = (size_t)((K + 15) & ~15) * 8 + j.tmp_bytes +
			(j.gemm ? cpu_gemm_scratch(K) : n_rows == 1 ? j.act_row
				: 4 * WIDE_KC * 4 + (size_t)(WIDE_QB / 4) * (size_t)(M < FLT_COL_TILE ? M : FLT_COL_TILE) * 256) + 64;
	j.xbf_row = w->type == ALICE_TYPE_BF16 && n_rows >= 2 ? cpu_mm_order_bf16_packed(K) : 0;
	size_t xbf_bytes = (n_rows * j.xbf_row + 63) & ~(size_t)63;
	st = cpu_scratch(ctx, n_rows == 1 ? 0 : rows_bytes + pack_bytes + ((placed ? n_rows : 0) + 63) / 64 * 64 + xbf_bytes, tbytes);
	if (st != ALICE_OK)
		return st;
	j.abuf = n_rows == 1 ? NULL : ctx->wdata;
	if (pack_bytes) {
		j.apack = ctx->wdata + rows_bytes;
		/* rows past M (in each batch's last group): zero activations.
		 * The Q8_0 pair kernel reads only the pairs that hold a row, so
		 * there just the odd row's mate */
		for (int64_t bi = 0; M % 16 && bi < j.ne12 * j.ne13; bi++) {
			uint8_t *g = j.apack + (size_t)(bi * j.mg + j.mg - 1) * j.grp_bytes;
			if (j.act == ACT_Q8_0) {
				for (int64_t b = 0; M % 2 && b < K / QK8; b++) {
					struct apack_q8_0 *pb = (struct apack_q8_0 *)g + b;
					int p = (int)(M % 16) / 2;
					memset(&pb->q[p][32], 0, 32);
					memset(&pb->c[p][8], 0, 32);
					memset(&pb->d2[p][8], 0, 32);
				}
			} else {
				memset(g, 0, j.grp_bytes);
			}
		}
	}
	j.f16_tiles = w->type == ALICE_TYPE_F16 && n_rows >= 2 && cpu_mm_order_f16_tiles(K);
	if (xbf_bytes)
		j.xbf = (ctx->wdata + rows_bytes + pack_bytes + ((placed ? n_rows : 0) + 63) / 64 * 64);
	if (placed) {
		j.grp = ctx->wdata + rows_bytes + pack_bytes;
		for (size_t r = 0; r < n_rows; r++) {
			int32_t place[2] = {(int32_t)M, (int32_t)(r % (size_t)M)};
			if (j.regime)
				memcpy(place, tensor_data(j.regime) + (int64_t)(r % (size_t)M) * j.regime->nb[1], 8);
			j.grp[r] = cpu_row_grouped(place[0], place[1]);
		}
	}
	/* 2 chunks per thread, each a contiguous run of rows: weights stream
	 * from DRAM far better in long runs per thread (2 threads, K=2048
	 * N=8192 read cold: Q4_K 25 -> 45 GB/s, Q6_K 38 -> 54, Q8_0 41 -> 52
	 * against 64-row chunks taken in turn; tg32 Q4_K_M 61 -> 63 t/s
	 * against 4 chunks per thread), the second left to whichever is free */
	j.chunk = N / (2 * ctx->n_threads);
	if (j.chunk < 4)
		j.chunk = 4;
	j.chunk &= ~3L; /* whole groups for the 4-row decode kernels */
	j.n_chunks_per_batch = (long)((N + j.chunk - 1) / j.chunk);
	atomic_init(&j.ctr, 0);
	atomic_init(&j.conv_ctr, 0);
	if (j.abuf) /* rows from j.conv_ctr: any subset of threads finishes */
		cpu_pool_run_dynamic(ctx->pool, mm_convert, &j);
	/* chunks from j.ctr: any subset of threads finishes */
	cpu_pool_run_dynamic(ctx->pool, j.gemm ? mm_gemm : mm_dot, &j);
	return ALICE_OK;
}

/* ---- GET_ROWS: dst[:, i, a, b] = dequant(src0[:, ids[i, a, b]]) ---- */

struct gr_job {
	const struct alice_tensor *src, *ids, *dst;
	struct alice_backend_ctx *ctx;
	atomic_int bad; /* first out-of-range id + 1 */
};

static void gr_run(void *arg, int ith, int nth)
{
	struct gr_job *j = arg;
	const struct alice_tensor *s = j->src, *ids = j->ids, *d = j->dst;
	int64_t ne0 = s->ne[0], n = ids->ne[0] * ids->ne[1] * ids->ne[2];
	float *tmp = (float *)j->ctx->tdata[ith];
	for (int64_t r = ith; r < n; r += nth) {
		int64_t i0 = r % ids->ne[0], i1 = (r / ids->ne[0]) % ids->ne[1],
			i2 = r / (ids->ne[0] * ids->ne[1]);
		int32_t id;
		memcpy(&id, tensor_data(ids) + i0 * ids->nb[0] + i1 * ids->nb[1] + i2 * ids->nb[2], 4);
		if (id < 0 || id >= s->ne[1]) {
			int expect = 0;
			atomic_compare_exchange_strong(&j->bad, &expect, (int)r + 1);
			continue;
		}
		const uint8_t *row = tensor_data(s) + (int64_t)id * s->nb[1];
		uint8_t *out = tensor_data(d) + i0 * d->nb[1] + i1 * d->nb[2] + i2 * d->nb[3];
		bool direct = d->nb[0] == 4;
		float *y = direct ? (float *)out : tmp;
		if (s->type == ALICE_TYPE_F32 && s->nb[0] != 4) {
			for (int64_t i = 0; i < ne0; i++)
				memcpy(&y[i], row + i * s->nb[0], 4);
		} else if (s->type == ALICE_TYPE_F16 && s->nb[0] == 2) {
			cpu_k->f16_to_f32(ne0, (const uint16_t *)row, y);
		} else if (s->type == ALICE_TYPE_F16 || s->type == ALICE_TYPE_BF16) {
			for (int64_t i = 0; i < ne0; i++) {
				uint16_t h;
				memcpy(&h, row + i * s->nb[0], 2);
				y[i] = s->type == ALICE_TYPE_F16 ? alice_fp16_to_fp32(h) : alice_bf16_to_fp32(h);
			}
		} else {
			alice_dequantize(s->type, row, y, ne0);
		}
		if (!direct)
			for (int64_t i = 0; i < ne0; i++)
				memcpy(out + i * d->nb[0], &y[i], 4);
	}
}

enum alice_status cpu_op_get_rows(const struct alice_op_args *a)
{
	const struct alice_tensor *s = a->src[0], *ids = a->src[1], *d = a->dst;
	enum alice_status st = alice_bc_get_rows_shape(s, ids, d, a->ctx->err, sizeof(a->ctx->err));
	if (st != ALICE_OK)
		return st;
	st = cpu_scratch(a->ctx, 0, (size_t)s->ne[0] * 4);
	if (st != ALICE_OK)
		return st;
	struct gr_job j = {.src = s, .ids = ids, .dst = d, .ctx = a->ctx};
	atomic_init(&j.bad, 0);
	cpu_pool_run_sized(a->ctx->pool, gr_run, &j, tensor_nelem(d));
	int bad = atomic_load(&j.bad);
	if (bad) {
		int64_t r = bad - 1;
		return cpu_fail(a->ctx, ALICE_ERR_RANGE, "row id at %lld is out of range (0..%lld)", (long long)r,
				(long long)s->ne[1] - 1);
	}
	return ALICE_OK;
}
