/* ops_attention.c — fused attention over the KV cache (online softmax over
 * each token's cell range, GQA, soft-cap; F16 or F32 K/V) and KV_WRITE.
 * Work is split over (head, token) pairs.
 *
 * The numerics follow llama.cpp's CPU flash attention (x86 AVX-512 build, what
 * the parity references were made with), which has two regimes chosen by the
 * number of query tokens of the op (here: of each sequence's run of tokens in the op):
 *  - fewer than 64 (decode, short prompts): cell by cell online softmax; with
 *    an F16 K cache q is rounded to F16 and the q.k dot sums in ggml's AVX-512
 *    lane layout (dot_lanes); with an F16 V cache the V accumulator itself is
 *    kept in F16: every rescale and every fma is rounded to F16.
 *  - 64 or more with d_v % 16 == 0 (prefill): 64-cell tiles aligned to cell 0;
 *    q stays F32, each score is one ascending fma chain over d_k, the softmax
 *    of a tile is taken against the running max after that tile with ggml's
 *    vector exp (v_expf) and summed per 16 lanes into a double; F32 accumulator.
 * Nothing here depends on these choices for correctness: they only move the
 * rounding to where llama.cpp has it (logit differences ~0.5 -> ~1e-5 on
 * quantized fixture models, see tests/core/test_parity.c).
 * Not emulated: llama.cpp's split-KV decode (one token, >= 512 padded cells),
 * whose chunking depends on its thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "vmath.h"

/* The fixed-width lane loops below are written to be vectorized; -O2's
 * "very cheap" vectorizer model leaves most of them scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ATTN_X86 1

/* F16C helpers, inlined into the x86 clones below (never reached from the
 * generic one): F16 -> F32 rows, and the F16 accumulator's update
 * acc = f16(f32 op), with the conversion rounding to nearest even as
 * llama.cpp's F16 stores do. */
__attribute__((target("avx2,fma,f16c"))) static inline void h2f_x86(int64_t n, const uint16_t *s, float *d)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
	for (; i < n; i++)
		d[i] = _cvtsh_ss(s[i]);
}

__attribute__((target("avx2,fma,f16c"))) static inline __m256 r16_x86(__m256 a)
{
	return _mm256_cvtph_ps(_mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
}

/* acc = f16(fma(v, s, acc)) when v != NULL, else acc = f16(acc * s) */
__attribute__((target("avx2,fma,f16c"))) static inline void acc16_x86(int64_t n, const uint16_t *v, float s, float *acc)
{
	const __m256 vs = _mm256_set1_ps(s);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 a = _mm256_loadu_ps(acc + i);
		a = v ? _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i))), vs, a)
		      : _mm256_mul_ps(a, vs);
		_mm256_storeu_ps(acc + i, r16_x86(a));
	}
	for (; i < n; i++) {
		float a = v ? fmaf(_cvtsh_ss(v[i]), s, acc[i]) : acc[i] * s;
		acc[i] = _cvtsh_ss(_cvtss_sh(a, _MM_FROUND_TO_NEAREST_INT));
	}
}
/* dot_lanes(n, f32(k), q) with K read as F16 in place: the same 64 lanes
 * (8 ymm of 8), the same fold (lanes + 32, then + 16, then halving) and the
 * same double tail, so the same bits; no converted row stored and read
 * back, and no fold through memory. */
__attribute__((target("avx2,fma,f16c"))) static inline float dot_k16_x86(int64_t n, const uint16_t *k, const float *q)
{
	__m256 a[8];
	for (int r = 0; r < 8; r++)
		a[r] = _mm256_setzero_ps();
	int64_t np = n & ~(int64_t)63, i = 0;
	for (; i < np; i += 64)
		for (int r = 0; r < 8; r++)
			a[r] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i + 8 * r))),
					       _mm256_loadu_ps(q + i + 8 * r), a[r]);
	a[0] = _mm256_add_ps(a[0], a[4]); /* acc[l] += acc[32 + l], l < 16 */
	a[1] = _mm256_add_ps(a[1], a[5]);
	a[2] = _mm256_add_ps(a[2], a[6]); /* acc[16 + l] += acc[48 + l] */
	a[3] = _mm256_add_ps(a[3], a[7]);
	a[0] = _mm256_add_ps(a[0], a[2]); /* acc[l] += acc[16 + l] */
	a[1] = _mm256_add_ps(a[1], a[3]);
	a[0] = _mm256_add_ps(a[0], a[1]); /* w = 8 */
	__m128 x = _mm_add_ps(_mm256_castps256_ps128(a[0]), _mm256_extractf128_ps(a[0], 1)); /* w = 4 */
	x = _mm_add_ps(x, _mm_movehl_ps(x, x));                                                  /* w = 2 */
	double s = (double)(_mm_cvtss_f32(x) + _mm_cvtss_f32(_mm_shuffle_ps(x, x, 1)));
	for (; i < n; i++)
		s += (double)(_cvtsh_ss(k[i]) * q[i]);
	return (float)s;
}
#else
#define ATTN_X86 0
#endif

#define ATTN_TILE 64 /* llama.cpp's KV tile and its tiled-path query threshold */

struct attn_job {
	const struct alice_tensor *q, *k, *v, *r, *d;
	struct alice_backend_ctx *ctx;
	float scale, cap;
	int64_t group;
	const uint8_t *tiled; /* per token: the tiled regime (see run_is_tiled) */
	/* tiled path: K transposed per 64-cell tile [n_head_kv][ntiles][d_k][64]
	 * and F16 V widened [n_head_kv][ncell][d_v], made once per op (NULL: per
	 * row, when they would not fit the size cap) */
	float *ktp, *vfp;
	int64_t ntiles, ncell;
	/* paged cache (backend.h, ATTENTION src4): virtual cell c lives in
	 * physical cell tbl[c >> sh] << sh | (c & mask); NULL = identity */
	const int32_t *tbl;
	int sh;
	int64_t nblk; /* physical blocks */
	atomic_long ctr;
};

/* The physical cell of virtual cell c (checked by cpu_op_attention for
 * every cell a range covers). */
static inline int64_t pcell(const struct attn_job *j, int64_t c)
{
	if (!j->tbl)
		return c;
	return ((int64_t)j->tbl[c >> j->sh] << j->sh) | (c & (((int64_t)1 << j->sh) - 1));
}

static inline int32_t range_at(const struct alice_tensor *r, int64_t i, int64_t t)
{
	int32_t v;
	memcpy(&v, tensor_data(r) + i * r->nb[0] + t * r->nb[1], 4);
	return v;
}

/* Scratch floats per thread: q, acc, one converted row, an F16 round-trip
 * row, the transposed K tile and the tile's scores. */
#define CELL_CH 128 /* cells per pass of the grouped decode path */
#define HU_MAX 4    /* heads per unit (of one KV head) */

static size_t attn_scratch_floats(int64_t dk, int64_t dv)
{
	int64_t dk16 = (dk + 15) & ~15, dv16 = (dv + 15) & ~15, m = dk16 > dv16 ? dk16 : dv16;
	size_t grouped = (size_t)(HU_MAX * dk16 + 2 * HU_MAX * CELL_CH + dk16);
	return (size_t)(dk16 + dv16 + m + m / 2 + 16 + dk16 * ATTN_TILE + ATTN_TILE) + grouped;
}

/* ggml's vec_dot_f16 on AVX-512: 4 accumulators of 16 lanes over blocks of 64
 * (element i of a block lands in lane i), folded 0+2, 1+3, then 0+1, then the
 * 16 lanes halved (i + 8, i + 4, i + 2, 0 + 1) in float; the tail (n % 64)
 * is added to that in double, each product rounded to float (exact for F16
 * inputs). */
static inline __attribute__((always_inline)) float dot_lanes(int64_t n, const float *a, const float *b)
{
	float acc[64];
	for (int l = 0; l < 64; l++)
		acc[l] = 0.0f;
	int64_t np = n & ~(int64_t)63, i = 0;
	for (; i < np; i += 64)
		for (int l = 0; l < 64; l++)
			acc[l] = fmaf(a[i + l], b[i + l], acc[l]);
	for (int l = 0; l < 16; l++) {
		acc[l] += acc[32 + l];
		acc[16 + l] += acc[48 + l];
	}
	for (int l = 0; l < 16; l++)
		acc[l] += acc[16 + l];
	for (int w = 8; w >= 2; w /= 2)
		for (int l = 0; l < w; l++)
			acc[l] += acc[l + w];
	double s = (double)(acc[0] + acc[1]);
	for (; i < n; i++)
		s += (double)(a[i] * b[i]);
	return (float)s;
}

static inline __attribute__((always_inline)) void round_f16(int64_t n, float *x, uint16_t *tmp)
{
	cpu_k->f32_to_f16(n, x, tmp);
	cpu_k->f16_to_f32(n, tmp, x);
}

static inline __attribute__((always_inline)) void h2f(bool hw, int64_t n, const uint16_t *s, float *d)
{
#if ATTN_X86
	if (hw) {
		h2f_x86(n, s, d);
		return;
	}
#endif
	(void)hw;
	cpu_k->f16_to_f32(n, s, d);
}

/* the F16 accumulator: acc = f16(fma(v, s, acc)), or f16(acc * s) without v */
static inline __attribute__((always_inline)) void acc16(bool hw, int64_t n, const uint16_t *v, float s, float *acc,
						       float *row, uint16_t *tmp)
{
#if ATTN_X86
	if (hw) {
		acc16_x86(n, v, s, acc);
		return;
	}
#endif
	(void)hw;
	if (v) {
		cpu_k->f16_to_f32(n, v, row);
		for (int64_t i = 0; i < n; i++)
			acc[i] = fmaf(row[i], s, acc[i]);
	} else {
		for (int64_t i = 0; i < n; i++)
			acc[i] *= s;
	}
	round_f16(n, acc, tmp);
}

/* One query row, cell by cell (the short-batch regime). */
static inline __attribute__((always_inline)) void attn_row_cells(const struct attn_job *j, float *qf, float *acc,
								 float *row, uint16_t *tmp, int64_t h, int64_t t, bool hw)
{
	const struct alice_tensor *q = j->q, *k = j->k, *v = j->v;
	int64_t dk = q->ne[0], dv = v->ne[0], hk = h / j->group;
	bool k16 = k->type == ALICE_TYPE_F16, v16 = v->type == ALICE_TYPE_F16;
	if (k16)
		round_f16(dk, qf, tmp);
	memset(acc, 0, (size_t)dv * 4);
	int32_t c0 = range_at(j->r, 0, t), c1 = range_at(j->r, 1, t);
	float m = -INFINITY, l = 0.0f;
	float sc = j->cap != 0.0f ? j->scale / j->cap : j->scale;
	const uint8_t *kb = tensor_data(k) + hk * k->nb[1];
	const uint8_t *vb = tensor_data(v) + hk * v->nb[1];
	for (int64_t c = c0; c < c1; c++) {
		const int64_t pc = pcell(j, c);
		const uint8_t *kr = kb + pc * k->nb[2];
		float s;
		if (k16) {
#if ATTN_X86
			if (hw)
				s = dot_k16_x86(dk, (const uint16_t *)kr, qf);
			else
#endif
			{
				h2f(hw, dk, (const uint16_t *)kr, row);
				s = dot_lanes(dk, row, qf);
			}
		} else {
			s = cpu_k->dot_f32(dk, (const float *)kr, qf);
		}
		s *= sc;
		if (j->cap != 0.0f)
			s = j->cap * tanhf(s);
		if (s == -INFINITY)
			continue;
		float ms = 1.0f, vs = 1.0f;
		if (s > m) {
			ms = expf(m - s);
			m = s;
			if (v16) {
				acc16(hw, dv, NULL, ms, acc, row, tmp);
			} else {
				cpu_k->scale_f32(dv, ms, acc);
			}
		} else {
			vs = expf(s - m);
		}
		l = fmaf(l, ms, vs);
		const uint8_t *vr = vb + pc * v->nb[2];
		if (v16) {
			acc16(hw, dv, (const uint16_t *)vr, vs, acc, row, tmp);
		} else {
			cpu_k->axpy_f32(dv, vs, (const float *)vr, acc);
		}
	}
	float inv = l > 0.0f ? 1.0f / l : 0.0f;
	for (int64_t i = 0; i < dv; i++)
		acc[i] *= inv;
}

/* A tile's raw scores s (cells t0 ..) finished: cells outside [a, e) to
 * -inf, the rest scaled (and soft-capped); returns their maximum. */
static inline __attribute__((always_inline)) float tile_scores(const struct attn_job *j, float *s, int64_t t0,
								int64_t a, int64_t e, float sc)
{
	float tmax = -INFINITY;
	for (int c = 0; c < ATTN_TILE; c++) {
		int64_t cell = t0 + c;
		if (cell < a || cell >= e) {
			s[c] = -INFINITY;
			continue;
		}
		s[c] *= sc;
		if (j->cap != 0.0f)
			s[c] = tanhf(s[c]) * j->cap;
		if (s[c] > tmax)
			tmax = s[c];
	}
	return tmax;
}

/* One query row, tile by tile (the prefill regime). */
static inline __attribute__((always_inline)) void attn_row_tiles(const struct attn_job *j, const float *qf,
								 float *acc, float *row, float *kt, float *p,
								 int64_t h, int64_t t, bool hw)
{
	const struct alice_tensor *k = j->k, *v = j->v;
	int64_t dk = k->ne[0], dv = v->ne[0], hk = h / j->group;
	bool k16 = k->type == ALICE_TYPE_F16, v16 = v->type == ALICE_TYPE_F16;
	memset(acc, 0, (size_t)dv * 4);
	int32_t c0 = range_at(j->r, 0, t), c1 = range_at(j->r, 1, t);
	float m = -INFINITY, l = 0.0f;
	float sc = j->cap != 0.0f ? j->scale / j->cap : j->scale;
	const uint8_t *kb = tensor_data(k) + hk * k->nb[1];
	const uint8_t *vb = tensor_data(v) + hk * v->nb[1];
	for (int64_t t0 = (c0 / ATTN_TILE) * ATTN_TILE; t0 < c1; t0 += ATTN_TILE) {
		int64_t a = t0 > c0 ? t0 : c0, e = t0 + ATTN_TILE < c1 ? t0 + ATTN_TILE : c1;
		/* K tile transposed (cells contiguous): one fma chain per cell */
		if (j->ktp)
			kt = j->ktp + (hk * j->ntiles + t0 / ATTN_TILE) * dk * ATTN_TILE;
		for (int64_t c = a; c < e && !j->ktp; c++) {
			const float *kr = (const float *)(kb + pcell(j, c) * k->nb[2]);
			if (k16) {
				h2f(hw, dk, (const uint16_t *)kr, row);
				kr = row;
			}
			for (int64_t d = 0; d < dk; d++)
				kt[d * ATTN_TILE + (c - t0)] = kr[d];
		}
		float s[ATTN_TILE];
		for (int c = 0; c < ATTN_TILE; c++)
			s[c] = 0.0f;
		for (int64_t d = 0; d < dk; d++) {
			const float qd = qf[d], *kd = kt + d * ATTN_TILE;
			for (int c = 0; c < ATTN_TILE; c++)
				s[c] = fmaf(qd, kd[c], s[c]);
		}
		float tmax = tile_scores(j, s, t0, a, e, sc);
		if (tmax == -INFINITY)
			continue;
		if (tmax > m) {
			float ms = expf(m - tmax);
			cpu_k->scale_f32(dv, ms, acc);
			l *= ms;
			m = tmax;
		}
		double sum = 0.0;
		for (int b = 0; b < ATTN_TILE; b += 16) {
			float w[16];
			for (int c = 0; c < 16; c++)
				w[c] = p[b + c] = v_expf(s[b + c] - m);
			for (int h2 = 8; h2 >= 2; h2 /= 2)
				for (int c = 0; c < h2; c++)
					w[c] += w[c + h2];
			sum += (double)(w[0] + w[1]);
		}
		l = (float)((double)l + sum);
		for (int64_t c = a; c < e; c++) {
			float pc = p[c - t0];
			if (pc == 0.0f)
				continue; /* fma(v, 0, acc) == acc */
			const float *vr = (const float *)(vb + pcell(j, c) * v->nb[2]);
			if (v16 && j->vfp) {
				vr = j->vfp + (hk * j->ncell + c) * dv;
			} else if (v16) {
				h2f(hw, dv, (const uint16_t *)vr, row);
				vr = row;
			}
			for (int64_t i = 0; i < dv; i++)
				acc[i] = fmaf(vr[i], pc, acc[i]);
		}
	}
	float inv = l != 0.0f ? 1.0f / l : 0.0f;
	for (int64_t i = 0; i < dv; i++)
		acc[i] *= inv;
}

#if ATTN_X86
/* The short-batch regime for heads h0 .. h0 + HU - 1 of one KV head, F16 V:
 * the same operations as attn_row_cells in the same order, rearranged. The
 * scores and softmax factors of CELL_CH cells come first (nothing in them
 * waits on the accumulator); then the F16 accumulators, kept in registers,
 * take the cells with each V row widened once for all HU heads. Per head:
 * fv < 0 marks a masked cell, fm >= 0 a new running max (acc *= fm first). */
__attribute__((target("avx2,fma,f16c"))) static inline void cells_factors(const struct attn_job *j, const float *qh,
									   const uint8_t *kb, int64_t cs, int64_t ce,
									   float *m, float *l, float *fm, float *fv)
{
	const struct alice_tensor *k = j->k;
	int64_t dk = k->ne[0];
	bool k16 = k->type == ALICE_TYPE_F16;
	float sc = j->cap != 0.0f ? j->scale / j->cap : j->scale;
	for (int64_t c = cs; c < ce; c++) {
		const uint8_t *kr = kb + pcell(j, c) * k->nb[2];
		float s = k16 ? dot_k16_x86(dk, (const uint16_t *)kr, qh) : cpu_k->dot_f32(dk, (const float *)kr, qh);
		s *= sc;
		if (j->cap != 0.0f)
			s = j->cap * tanhf(s);
		float ms = 1.0f, vs = 1.0f;
		fm[c - cs] = -1.0f;
		if (s == -INFINITY) {
			fv[c - cs] = -1.0f;
			continue;
		}
		if (s > m[0]) {
			ms = expf(m[0] - s);
			m[0] = s;
			fm[c - cs] = ms;
		} else {
			vs = expf(s - m[0]);
		}
		fv[c - cs] = vs;
		l[0] = fmaf(l[0], ms, vs);
	}
}

#define A5_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))

/* A unit's query rows into qs (rows dk16 apart), rounded to F16 with r16. */
static inline void group_q(const struct attn_job *j, int hu, int64_t h0, int64_t t, float *qs, bool r16, uint16_t *tmp)
{
	const struct alice_tensor *q = j->q;
	int64_t dk = q->ne[0], dk16 = (dk + 15) & ~15;
	for (int u = 0; u < hu; u++) {
		const uint8_t *qr = tensor_data(q) + (h0 + u) * q->nb[1] + t * q->nb[2];
		for (int64_t i = 0; i < dk; i++)
			memcpy(&qs[u * dk16 + i], qr + i * q->nb[0], 4);
		if (r16)
			round_f16(dk, qs + u * dk16, tmp);
	}
}

A5_TARGET static inline __attribute__((always_inline)) void group_init(const int NV, const int HU, float *m, float *l,
									 __m512 (*acc)[8])
{
	for (int u = 0; u < HU; u++) {
		m[u] = -INFINITY;
		l[u] = 0.0f;
		for (int i = 0; i < NV; i++)
			acc[u][i] = _mm512_setzero_ps();
	}
}

/* head u's result acc[u] * inv[u] into its output row */
A5_TARGET static inline __attribute__((always_inline)) void group_out(const struct attn_job *j, const int NV,
									const int HU, int64_t h0, int64_t t,
									__m512 (*acc)[8], const float *inv)
{
	const struct alice_tensor *d = j->d;
	for (int u = 0; u < HU; u++) {
		uint8_t *dr = tensor_data(d) + (h0 + u) * d->nb[1] + t * d->nb[2];
		for (int i = 0; i < NV; i++) {
			float o[16];
			_mm512_storeu_ps(o, _mm512_mul_ps(acc[u][i], _mm512_set1_ps(inv[u])));
			for (int e = 0; e < 16; e++)
				memcpy(dr + (16 * i + e) * d->nb[0], &o[e], 4);
		}
	}
}

/* the F16 accumulator's rounding on 16 lanes (r16_x86's) */
A5_TARGET static inline __m512 r16_z(__m512 a)
{
	return _mm512_cvtph_ps(_mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
}

A5_TARGET static inline __attribute__((always_inline)) void cells_group_body(const struct attn_job *j, const int NV,
									    const int HU, int64_t h0, int64_t t,
									    float *scr)
{
	const struct alice_tensor *q = j->q, *k = j->k, *v = j->v;
	int64_t dk = q->ne[0], dk16 = (dk + 15) & ~15, hk = h0 / j->group;
	float *qs = scr, *fm = qs + HU_MAX * dk16, *fv = fm + HU_MAX * CELL_CH;
	uint16_t *tmp = (uint16_t *)(fv + HU_MAX * CELL_CH);
	group_q(j, HU, h0, t, qs, k->type == ALICE_TYPE_F16, tmp);
	int32_t c0 = range_at(j->r, 0, t), c1 = range_at(j->r, 1, t);
	float m[HU_MAX], l[HU_MAX], inv[HU_MAX];
	__m512 acc[HU_MAX][8];
	group_init(NV, HU, m, l, acc);
	const uint8_t *kb = tensor_data(k) + hk * k->nb[1], *vb = tensor_data(v) + hk * v->nb[1];
	for (int64_t cs = c0; cs < c1; cs += CELL_CH) {
		int64_t ce = cs + CELL_CH < c1 ? cs + CELL_CH : c1;
		for (int u = 0; u < HU; u++)
			cells_factors(j, qs + u * dk16, kb, cs, ce, &m[u], &l[u], fm + u * CELL_CH, fv + u * CELL_CH);
		for (int64_t c = cs; c < ce; c++) {
			const uint16_t *vr = (const uint16_t *)(vb + pcell(j, c) * v->nb[2]);
			__m512 vv[8];
			for (int i = 0; i < NV; i++)
				vv[i] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(vr + 16 * i)));
			for (int u = 0; u < HU; u++) {
				float f = fv[u * CELL_CH + (c - cs)], g = fm[u * CELL_CH + (c - cs)];
				if (f < 0.0f)
					continue;
				if (g >= 0.0f) {
					const __m512 gs = _mm512_set1_ps(g);
					for (int i = 0; i < NV; i++)
						acc[u][i] = r16_z(_mm512_mul_ps(acc[u][i], gs));
				}
				const __m512 fs = _mm512_set1_ps(f);
				for (int i = 0; i < NV; i++)
					acc[u][i] = r16_z(_mm512_fmadd_ps(vv[i], fs, acc[u][i]));
			}
		}
	}
	for (int u = 0; u < HU; u++)
		inv[u] = l[u] > 0.0f ? 1.0f / l[u] : 0.0f;
	group_out(j, NV, HU, h0, t, acc, inv);
}

/* The tiled regime (attn_row_tiles) for heads h0 .. h0 + HU - 1 of one KV
 * head, K tiles from the per-op conversion: the same operations in the
 * same order per head, the accumulators and scores in registers, each K
 * tile row and V row loaded once for the HU heads. */
A5_TARGET static inline __attribute__((always_inline)) void tiles_group_body(const struct attn_job *j, const int NV,
									    const int HU, int64_t h0, int64_t t,
									    float *scr)
{
	const struct alice_tensor *q = j->q, *v = j->v;
	int64_t dk = q->ne[0], dk16 = (dk + 15) & ~15, dv = v->ne[0], hk = h0 / j->group;
	bool v16 = v->type == ALICE_TYPE_F16;
	float *qs = scr;
	group_q(j, HU, h0, t, qs, false, NULL);
	int32_t c0 = range_at(j->r, 0, t), c1 = range_at(j->r, 1, t);
	float m[HU_MAX], l[HU_MAX], inv[HU_MAX];
	float sc = j->cap != 0.0f ? j->scale / j->cap : j->scale;
	__m512 acc[HU_MAX][8];
	group_init(NV, HU, m, l, acc);
	const uint8_t *vb = tensor_data(v) + hk * v->nb[1];
	for (int64_t t0 = (c0 / ATTN_TILE) * ATTN_TILE; t0 < c1; t0 += ATTN_TILE) {
		int64_t a = t0 > c0 ? t0 : c0, e = t0 + ATTN_TILE < c1 ? t0 + ATTN_TILE : c1;
		const float *kt = j->ktp + (hk * j->ntiles + t0 / ATTN_TILE) * dk * ATTN_TILE;
		__m512 s[HU_MAX][4];
		for (int u = 0; u < HU; u++)
			for (int c = 0; c < 4; c++)
				s[u][c] = _mm512_setzero_ps();
		for (int64_t dd = 0; dd < dk; dd++) {
			const float *kd = kt + dd * ATTN_TILE;
			const __m512 k0 = _mm512_loadu_ps(kd), k1 = _mm512_loadu_ps(kd + 16), k2 = _mm512_loadu_ps(kd + 32),
				     k3 = _mm512_loadu_ps(kd + 48);
			for (int u = 0; u < HU; u++) {
				const __m512 qd = _mm512_set1_ps(qs[u * dk16 + dd]);
				s[u][0] = _mm512_fmadd_ps(qd, k0, s[u][0]);
				s[u][1] = _mm512_fmadd_ps(qd, k1, s[u][1]);
				s[u][2] = _mm512_fmadd_ps(qd, k2, s[u][2]);
				s[u][3] = _mm512_fmadd_ps(qd, k3, s[u][3]);
			}
		}
		float p[HU_MAX][ATTN_TILE];
		bool any[HU_MAX];
		for (int u = 0; u < HU; u++) {
			float sv[ATTN_TILE];
			for (int c = 0; c < 4; c++)
				_mm512_storeu_ps(sv + 16 * c, s[u][c]);
			float tmax = tile_scores(j, sv, t0, a, e, sc);
			any[u] = tmax != -INFINITY;
			if (!any[u])
				continue;
			if (tmax > m[u]) {
				const float ms = expf(m[u] - tmax);
				const __m512 mv = _mm512_set1_ps(ms);
				for (int i = 0; i < NV; i++)
					acc[u][i] = _mm512_mul_ps(mv, acc[u][i]);
				l[u] *= ms;
				m[u] = tmax;
			}
			double sum = 0.0;
			for (int b = 0; b < ATTN_TILE; b += 16) {
				__mmask16 slow;
				__m512 w = v_expf_z(_mm512_sub_ps(_mm512_loadu_ps(sv + b), _mm512_set1_ps(m[u])), &slow);
				_mm512_storeu_ps(p[u] + b, w);
				if (slow) {
					for (int c = 0; c < 16; c++)
						if (slow >> c & 1)
							p[u][b + c] = v_expf(sv[b + c] - m[u]);
					w = _mm512_loadu_ps(p[u] + b);
				}
				__m256 w8 = _mm256_add_ps(_mm512_castps512_ps256(w),
							  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1)));
				__m128 w4 = _mm_add_ps(_mm256_castps256_ps128(w8), _mm256_extractf128_ps(w8, 1));
				__m128 w2 = _mm_add_ps(w4, _mm_movehl_ps(w4, w4));
				sum += (double)(_mm_cvtss_f32(w2) + _mm_cvtss_f32(_mm_shuffle_ps(w2, w2, 1)));
			}
			l[u] = (float)((double)l[u] + sum);
		}
		for (int64_t c = a; c < e; c++) {
			const float *vr = v16 ? j->vfp + (hk * j->ncell + c) * dv
					      : (const float *)(vb + pcell(j, c) * v->nb[2]);
			__m512 vv[8];
			for (int i = 0; i < NV; i++)
				vv[i] = _mm512_loadu_ps(vr + 16 * i);
			for (int u = 0; u < HU; u++) {
				const float pc = p[u][c - t0];
				if (!any[u] || pc == 0.0f)
					continue; /* fma(v, 0, acc) == acc */
				const __m512 ps = _mm512_set1_ps(pc);
				for (int i = 0; i < NV; i++)
					acc[u][i] = _mm512_fmadd_ps(vv[i], ps, acc[u][i]);
			}
		}
	}
	for (int u = 0; u < HU; u++)
		inv[u] = l[u] != 0.0f ? 1.0f / l[u] : 0.0f;
	group_out(j, NV, HU, h0, t, acc, inv);
}

/* Heads per unit for a value width (0: the per-head path): up to 24 of
 * the 32 registers hold accumulators */
static int cells_group_heads(int64_t dv)
{
	return dv == 32 ? 4 : dv == 64 ? 4 : dv == 128 ? 3 : 0;
}

/* one instance per (value width, heads per unit) cells_group_heads allows */
#define GROUP_DISPATCH(name, body)                                                                    \
	A5_TARGET static void name(const struct attn_job *j, int hu, int64_t h0, int64_t t, float *scr) \
	{                                                                                             \
		switch (j->v->ne[0] * 8 + hu) {                                                       \
		case 32 * 8 + 1: body(j, 2, 1, h0, t, scr); break;                                   \
		case 32 * 8 + 2: body(j, 2, 2, h0, t, scr); break;                                   \
		case 32 * 8 + 3: body(j, 2, 3, h0, t, scr); break;                                   \
		case 32 * 8 + 4: body(j, 2, 4, h0, t, scr); break;                                   \
		case 64 * 8 + 1: body(j, 4, 1, h0, t, scr); break;                                   \
		case 64 * 8 + 2: body(j, 4, 2, h0, t, scr); break;                                   \
		case 64 * 8 + 3: body(j, 4, 3, h0, t, scr); break;                                   \
		case 64 * 8 + 4: body(j, 4, 4, h0, t, scr); break;                                   \
		case 128 * 8 + 1: body(j, 8, 1, h0, t, scr); break;                                  \
		case 128 * 8 + 2: body(j, 8, 2, h0, t, scr); break;                                  \
		default: body(j, 8, 3, h0, t, scr); break;                                            \
		}                                                                                     \
	}
GROUP_DISPATCH(attn_cells_group, cells_group_body)
GROUP_DISPATCH(attn_tiles_group, tiles_group_body)
#endif

/* The tiled path's per-op conversion: unit = (kv head, tile). */
static void attn_prep(void *arg, int ith, int nth)
{
	struct attn_job *j = arg;
	const struct alice_tensor *k = j->k, *v = j->v;
	int64_t dk = k->ne[0], dv = v->ne[0], nkv = k->ne[1];
	float *row = (float *)j->ctx->tdata[ith];
	for (int64_t u = ith; u < nkv * j->ntiles; u += nth) {
		int64_t hk = u / j->ntiles, t0 = (u % j->ntiles) * ATTN_TILE;
		float *kt = j->ktp + u * dk * ATTN_TILE;
		for (int64_t c = t0; c < t0 + ATTN_TILE; c++) {
			/* a paged cell of a block no range reads may be unmapped: zeros */
			bool mapped = c < j->ncell && (!j->tbl || (j->tbl[c >> j->sh] >= 0 && j->tbl[c >> j->sh] < j->nblk));
			int64_t pc = mapped ? pcell(j, c) : 0;
			if (!mapped)
				memset(row, 0, (size_t)dk * 4);
			else if (k->type == ALICE_TYPE_F16)
				cpu_k->f16_to_f32(dk, (const uint16_t *)(tensor_data(k) + hk * k->nb[1] + pc * k->nb[2]), row);
			else
				memcpy(row, tensor_data(k) + hk * k->nb[1] + pc * k->nb[2], (size_t)dk * 4);
			for (int64_t d = 0; d < dk; d++)
				kt[d * ATTN_TILE + (c - t0)] = row[d];
			if (j->vfp && c < j->ncell) {
				float *vd = j->vfp + (hk * j->ncell + c) * dv;
				if (mapped)
					cpu_k->f16_to_f32(dv, (const uint16_t *)(tensor_data(v) + hk * v->nb[1] + pc * v->nb[2]), vd);
				else
					memset(vd, 0, (size_t)dv * 4);
			}
		}
	}
}

/* Work unit: (token, KV head, block of up to hu of its heads); hu > 1 only
 * where the grouped path runs (AVX-512, F16 V, see cells_group_heads). */
static inline __attribute__((always_inline)) void attn_run_impl(void *arg, int ith, bool hw, bool wide)
{
	struct attn_job *j = arg;
	const struct alice_tensor *q = j->q, *v = j->v, *d = j->d;
	int64_t dk = q->ne[0], dv = v->ne[0], nh = q->ne[1], nt = q->ne[2];
	int64_t dk16 = (dk + 15) & ~15, dv16 = (dv + 15) & ~15, mx = dk16 > dv16 ? dk16 : dv16;
	float *qf = (float *)j->ctx->tdata[ith];
	float *acc = qf + dk16, *row = acc + dv16;
	uint16_t *tmp = (uint16_t *)(row + mx);
	float *kt = row + mx + mx / 2 + 16, *p = kt + dk16 * ATTN_TILE;
	int hu = 1;
#if ATTN_X86
	float *scr = p + ATTN_TILE;
	/* grouped: decode regime over an F16 V; tiled regime from the per-op
	 * K tiles (and widened V) */
	bool gcells = v->type == ALICE_TYPE_F16, gtiles = j->ktp && (v->type != ALICE_TYPE_F16 || j->vfp);
	if (wide && (gcells || gtiles) && cells_group_heads(dv) > 0)
		hu = cells_group_heads(dv) < j->group ? cells_group_heads(dv) : (int)j->group;
#else
	(void)wide;
#endif
	int64_t bpg = (j->group + hu - 1) / hu, nkv = nh / j->group; /* blocks per KV head */
	long t0, t1;
	while (chunk_next(&j->ctr, (long)(nkv * bpg * nt), 1, &t0, &t1)) {
		int64_t t = t0 / (nkv * bpg), b = t0 % (nkv * bpg);
		int64_t h0 = (b / bpg) * j->group + (b % bpg) * hu;
		int64_t hn = (b / bpg + 1) * j->group - h0 < hu ? (b / bpg + 1) * j->group - h0 : hu;
#if ATTN_X86
		if (hu > 1 && !j->tiled[t] && gcells) {
			attn_cells_group(j, (int)hn, h0, t, scr);
			continue;
		}
		if (hu > 1 && j->tiled[t] && gtiles) {
			attn_tiles_group(j, (int)hn, h0, t, scr);
			continue;
		}
#endif
		for (int64_t h = h0; h < h0 + hn; h++) {
			const uint8_t *qr = tensor_data(q) + h * q->nb[1] + t * q->nb[2];
			for (int64_t i = 0; i < dk; i++)
				memcpy(&qf[i], qr + i * q->nb[0], 4);
			if (j->tiled[t])
				attn_row_tiles(j, qf, acc, row, kt, p, h, t, hw);
			else
				attn_row_cells(j, qf, acc, row, tmp, h, t, hw);
			uint8_t *dr = tensor_data(d) + h * d->nb[1] + t * d->nb[2];
			for (int64_t i = 0; i < dv; i++)
				memcpy(dr + i * d->nb[0], &acc[i], 4);
		}
	}
}

/* The same code built three ways: fmaf must be an instruction, not a libm
 * call, and the fixed-width lane loops vectorize best with wide registers. */
static void attn_run_generic(void *arg, int ith, int nth)
{
	(void)nth;
	attn_run_impl(arg, ith, false, false);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma,f16c"))) static void attn_run_avx2(void *arg, int ith, int nth)
{
	(void)nth;
	attn_run_impl(arg, ith, true, false);
}

__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma,f16c"))) static void attn_run_avx512(void *arg, int ith,
												   int nth)
{
	(void)nth;
	attn_run_impl(arg, ith, true, true);
}
#endif

static cpu_task_fn attn_pick(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
		return attn_run_avx512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
		return attn_run_avx2;
#endif
	return attn_run_generic;
}

enum alice_status cpu_op_attention(const struct alice_op_args *a)
{
	const struct alice_tensor *q = a->src[0], *k = a->src[1], *v = a->src[2], *r = a->src[3],
				  *d = a->dst;
	struct alice_backend_ctx *ctx = a->ctx;
	int64_t dk = q->ne[0], nh = q->ne[1], nt = q->ne[2], nkv = k->ne[1], ncell;
	enum alice_status st = alice_bc_attention_shape(q, k, v, r, d, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	struct alice_bc_attn_pages pg;
	const struct alice_tensor *tbt = a->src[4];
	if ((st = alice_bc_attention_pages(a->node, k, tbt, &pg, ctx->err, sizeof(ctx->err))) != ALICE_OK)
		return st;
	ncell = pg.n_vcells; /* ranges index the virtual cells */
	const int32_t *tbl = tbt ? (const int32_t *)tensor_data(tbt) : NULL;
	for (int64_t t = 0; t < nt; t++) {
		int32_t c0 = range_at(r, 0, t), c1 = range_at(r, 1, t);
		if (c0 < 0 || c1 < c0 || c1 > ncell)
			return cpu_fail(ctx, ALICE_ERR_RANGE, "token %lld: cell range [%d, %d) outside 0..%lld",
					(long long)t, c0, c1, (long long)ncell);
		for (int64_t bi = c1 > c0 && tbl ? c0 >> pg.bs_log2 : 0; c1 > c0 && tbl && bi <= (c1 - 1) >> pg.bs_log2; bi++)
			if (tbl[bi] < 0 || tbl[bi] >= pg.n_blocks)
				return cpu_fail(ctx, ALICE_ERR_RANGE, "token %lld: block %lld of its range maps to %d, outside 0..%lld",
						(long long)t, (long long)bi, tbl[bi], (long long)pg.n_blocks - 1);
	}
	if (!isfinite(a->node->fp[0]) || !isfinite(a->node->fp[1]) || a->node->fp[1] < 0.0f)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "bad scale %g or soft-cap %g", a->node->fp[0],
				a->node->fp[1]);
	/* llama.cpp picks the regime by its op's query count, and it runs one
	 * sequence per op. A step here may hold several sequences (the server's
	 * batching), so the count is taken per sequence: the run of consecutive
	 * tokens that continue one another (end + 1, same or next start), or
	 * that share one range (an encoder's sequence: every token sees all of
	 * it). A request's numerics then do not depend on what else shares its
	 * step. */
	uint8_t *tiled = malloc((size_t)nt);
	if (!tiled)
		return cpu_fail(ctx, ALICE_ERR_NOMEM, "attention: out of memory");
	bool any_tiled = false;
	bool tiled_ok = v->ne[0] % 16 == 0 && k->type == v->type;
	for (int64_t t0 = 0; t0 < nt;) {
		int64_t t1 = t0 + 1;
		while (t1 < nt && ((range_at(r, 1, t1) == range_at(r, 1, t1 - 1) + 1 &&
				    (range_at(r, 0, t1) == range_at(r, 0, t1 - 1) ||
				     range_at(r, 0, t1) == range_at(r, 0, t1 - 1) + 1)) ||
				   (range_at(r, 1, t1) == range_at(r, 1, t1 - 1) &&
				    range_at(r, 0, t1) == range_at(r, 0, t1 - 1))))
			t1++;
		bool tl = tiled_ok && t1 - t0 >= ATTN_TILE;
		any_tiled |= tl;
		memset(tiled + t0, tl, (size_t)(t1 - t0));
		t0 = t1;
	}
	int64_t used = 0; /* cells read: [0, max end) */
	for (int64_t t = 0; t < nt; t++)
		if (range_at(r, 1, t) > used)
			used = range_at(r, 1, t);
	int64_t ntiles = (used + ATTN_TILE - 1) / ATTN_TILE;
	size_t kbytes = (size_t)(nkv * ntiles * dk * ATTN_TILE) * 4,
	       vbytes = v->type == ALICE_TYPE_F16 ? (size_t)(nkv * used * v->ne[0]) * 4 : 0;
	bool prep = any_tiled && kbytes + vbytes <= ((size_t)64 << 20);
	size_t tb = attn_scratch_floats(dk, v->ne[0]) * 4 + 64;
	st = cpu_scratch(ctx, prep ? kbytes + vbytes + 64 : 0, tb);
	if (st != ALICE_OK) {
		free(tiled);
		return st;
	}
	struct attn_job j = {.q = q, .k = k, .v = v, .r = r, .d = d, .ctx = ctx, .scale = a->node->fp[0],
			     .cap = a->node->fp[1], .group = nh / nkv,
			     .tiled = tiled, .ntiles = ntiles, .ncell = used,
			     .tbl = tbl, .sh = pg.bs_log2, .nblk = pg.n_blocks};
	atomic_init(&j.ctr, 0);
	if (prep) {
		j.ktp = (float *)ctx->wdata;
		j.vfp = vbytes ? j.ktp + kbytes / 4 : NULL;
		cpu_pool_run_sized(ctx->pool, attn_prep, &j, (int64_t)(kbytes + vbytes) / 2);
	}
	cpu_pool_run_dynamic_sized(ctx->pool, attn_pick(), &j, nh * nt * (dk + v->ne[0]) * (ncell < 16 ? 16 : ncell));
	free(tiled);
	return ALICE_OK;
}

/* ---- KV_WRITE ----
 * E = elements of src0 / n (n = number of cell indices). The cell dim of a
 * tensor is the first dim of size > 1 (or dim 3) whose lower dims hold
 * exactly E elements; row i of src0 goes to cell idx[i] of dst, element by
 * element in index order. */

struct kvw_job {
	const struct alice_tensor *s, *idx, *d;
	int ds, dd;
	int64_t e, n;
	bool dense; /* a row's e elements are contiguous on both sides */
};

/* dims [0, nd) of t hold their elements one after another (element size es) */
static bool dims_dense(const struct alice_tensor *t, int nd, int64_t es)
{
	int64_t want = es;
	for (int k = 0; k < nd; k++) {
		if (t->ne[k] > 1 && t->nb[k] != want)
			return false;
		want *= t->ne[k];
	}
	return true;
}

static void kvw_run(void *arg, int ith, int nth)
{
	struct kvw_job *j = arg;
	const struct alice_tensor *s = j->s, *d = j->d;
	bool f16 = d->type == ALICE_TYPE_F16;
	for (int64_t i = ith; i < j->n; i += nth) {
		int32_t cell;
		memcpy(&cell, tensor_data(j->idx) + i * j->idx->nb[0], 4);
		/* row i of src0: unravel i over src0's dims >= ds */
		const uint8_t *sp = tensor_data(s);
		int64_t rem = i;
		for (int k = j->ds; k < ALICE_MAX_DIMS; k++) {
			sp += (rem % s->ne[k]) * s->nb[k];
			rem /= s->ne[k];
		}
		uint8_t *dp = tensor_data(d) + (int64_t)cell * d->nb[j->dd];
		if (j->dense) { /* the row at once: the same rounding (nearest even) */
			if (f16)
				cpu_k->f32_to_f16(j->e, (const float *)sp, (uint16_t *)dp);
			else
				memcpy(dp, sp, (size_t)j->e * 4);
			continue;
		}
		for (int64_t e = 0; e < j->e; e++) {
			const uint8_t *sv = sp;
			uint8_t *dvp = dp;
			int64_t r1 = e, r2 = e;
			for (int k = 0; k < j->ds; k++) {
				sv += (r1 % s->ne[k]) * s->nb[k];
				r1 /= s->ne[k];
			}
			for (int k = 0; k < j->dd; k++) {
				dvp += (r2 % d->ne[k]) * d->nb[k];
				r2 /= d->ne[k];
			}
			float v;
			memcpy(&v, sv, 4);
			if (f16) {
				uint16_t h = alice_fp32_to_fp16(v);
				memcpy(dvp, &h, 2);
			} else {
				memcpy(dvp, &v, 4);
			}
		}
	}
}

enum alice_status cpu_op_kv_write(const struct alice_op_args *a)
{
	const struct alice_tensor *s = a->src[0], *idx = a->src[1], *d = a->dst;
	struct alice_bc_kv_layout kl;
	enum alice_status st = alice_bc_kv_layout_of(s, idx, d, &kl, a->ctx->err, sizeof(a->ctx->err));
	if (st != ALICE_OK)
		return st;
	int64_t n = kl.n, e = kl.e;
	int ds = kl.ds, dd = kl.dd;
	for (int64_t i = 0; i < n; i++) {
		int32_t c;
		memcpy(&c, tensor_data(idx) + i * idx->nb[0], 4);
		if (c < 0 || c >= d->ne[dd])
			return cpu_fail(a->ctx, ALICE_ERR_RANGE, "cell index %d (row %lld) outside 0..%lld", c,
					(long long)i, (long long)d->ne[dd] - 1);
	}
	struct kvw_job j = {.s = s, .idx = idx, .d = d, .ds = ds, .dd = dd, .e = e, .n = n};
	j.dense = s->type == ALICE_TYPE_F32 && dims_dense(s, ds, 4) &&
		  dims_dense(d, dd, d->type == ALICE_TYPE_F16 ? 2 : 4);
	cpu_pool_run_sized(a->ctx->pool, kvw_run, &j, n * e);
	return ALICE_OK;
}
