/* vec_amx.c — AVX-512 + AMX (Sapphire Rapids and later) kernels for the
 * weight types that dominate real models: Q8_0, Q4_K and Q6_K.
 *
 * One accumulation order, shared by the decode mat-vec and the prefill GEMM
 * so that a sequence's logits do not depend on the batch it sits in: per
 * output, the exact integer sum of each block (for K-quants: the block's
 * scaled sub-block sums, and for Q4_K separately the mins term) is converted
 * to float and added in block order, acc = fma(dw * da, (float)S_b, acc),
 * starting from 0 (Q4_K: result = acc - accm, accm the same chain of the mins
 * term). The integer sums are exact however they are formed (VNNI lanes in
 * the mat-vec, AMX tiles in the GEMM), so both paths give the same bits.
 *
 * The GEMM reads weights in their file layout (16 rows x one block per A
 * tile, rows `wstride` apart; K-quants are first widened to int8 per group of
 * 16 rows into thread scratch) and activations from a packed copy made once
 * per op (cpu_internal.h: struct apack_*): 16 activation rows per group,
 * 4 consecutive k of each row side by side, the layout AMX's B operand wants.
 *
 * Built with -mamx-tile -mamx-int8 (+ AVX-512); only called when cpuid says
 * so and the OS granted the tile state (vec_scalar.c). */
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) && defined(__AMX_INT8__)
#include <immintrin.h>

#include "vec_x86.h"

/* ---- integer reductions: 4 int32 vectors -> one int32 per vector ---- */

static inline __m128i red4_128(__m128i x0, __m128i x1, __m128i x2, __m128i x3)
{
	__m128i t0 = _mm_add_epi32(_mm_unpacklo_epi32(x0, x1), _mm_unpackhi_epi32(x0, x1));
	__m128i t1 = _mm_add_epi32(_mm_unpacklo_epi32(x2, x3), _mm_unpackhi_epi32(x2, x3));
	return _mm_add_epi32(_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1));
}

static inline __m128i red4_512(__m512i z0, __m512i z1, __m512i z2, __m512i z3)
{
	__m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
	__m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
	__m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
	__m256i y = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
	return _mm_add_epi32(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

/* a = [row0: 8 partials | row1: 8], b = [row2 | row3] -> [s0 s1 s2 s3] */
static inline __m128i red4_8(__m512i a, __m512i b)
{
	const __m512i lo = _mm512_set_epi32(27, 26, 25, 24, 19, 18, 17, 16, 11, 10, 9, 8, 3, 2, 1, 0);
	const __m512i hi = _mm512_set_epi32(31, 30, 29, 28, 23, 22, 21, 20, 15, 14, 13, 12, 7, 6, 5, 4);
	__m512i x = _mm512_add_epi32(_mm512_permutex2var_epi32(a, lo, b), _mm512_permutex2var_epi32(a, hi, b));
	x = _mm512_add_epi32(x, _mm512_shuffle_epi32(x, _MM_PERM_BADC));
	x = _mm512_add_epi32(x, _mm512_shuffle_epi32(x, _MM_PERM_CDAB));
	const __m512i pick = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
	return _mm512_castsi512_si128(_mm512_permutexvar_epi32(pick, x));
}

static inline __m512i ld2x256(const void *lo, const void *hi)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
				  _mm256_loadu_si256((const __m256i *)hi), 1);
}

static inline __m512i dpbs(__m512i w, __m512i a)
{
	__mmask64 neg = _mm512_movepi8_mask(w);
	__m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
	return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), sa);
}

static inline __m128 fp16x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3)
{
	uint16_t h[4];
	memcpy(&h[0], p0, 2);
	memcpy(&h[1], p1, 2);
	memcpy(&h[2], p2, 2);
	memcpy(&h[3], p3, 2);
	return _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)h));
}

/* ---- decode: 4 weight rows x one activation row, block order ---- */

/* The 4 rows of a group lie one after another in memory, so prefetching a
 * fixed distance ahead of each row lands in the group itself; fetch the same
 * block of the next group instead (4 rows ahead). */
static inline void prefetch_next_group(const uint8_t *p, size_t ws, int bytes)
{
	for (int o = 0; o < bytes; o += 64)
		_mm_prefetch((const char *)p + 4 * ws + o, _MM_HINT_T0);
}

static void x_dotr4_q8_0(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	const uint8_t *r0 = w, *r1 = r0 + ws, *r2 = r1 + ws, *r3 = r2 + ws;
	const struct act_q8_0 *a = act;
	size_t pf = 4 * ws;
	__m128 acc = _mm_setzero_ps();
	for (int64_t b = 0; b < k / QK8; b++, a++) {
		size_t o = (size_t)b * 34;
		/* rows are consecutive in memory: fetch the next group's block */
		_mm_prefetch((const char *)r0 + pf + o, _MM_HINT_T0);
		_mm_prefetch((const char *)r1 + pf + o, _MM_HINT_T0);
		_mm_prefetch((const char *)r2 + pf + o, _MM_HINT_T0);
		_mm_prefetch((const char *)r3 + pf + o, _MM_HINT_T0);
		__m512i qa = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)a->q));
		__m512i p01 = dpbs(ld2x256(r0 + o + 2, r1 + o + 2), qa);
		__m512i p23 = dpbs(ld2x256(r2 + o + 2, r3 + o + 2), qa);
		__m128 s = _mm_cvtepi32_ps(red4_8(p01, p23));
		__m128 d = _mm_mul_ps(fp16x4(r0 + o, r1 + o, r2 + o, r3 + o), _mm_set1_ps(a->d));
		acc = _mm_fmadd_ps(d, s, acc);
	}
	_mm_storeu_ps(out, acc);
}

static void x_dotr4_q4_k(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	const uint8_t *w0 = w;
	const __m512i m4 = _mm512_set1_epi8(0xf);
	__m512i ix[2][2];
	for (int p = 0; p < 2; p++)
		for (int h = 0; h < 2; h++)
			ix[p][h] = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * p + h)),
						      _mm256_set1_epi16((short)(4 * p + h + 2)), 1);
	__m128 acc = _mm_setzero_ps(), accm = _mm_setzero_ps();
	const struct act_q8_k *a = act;
	for (int64_t b = 0; b < k / QKK; b++, a++) {
		__m512i alo[2], ahi[2];
		for (int p = 0; p < 2; p++) {
			const int8_t *q8 = a->q + 128 * p;
			alo[p] = ld2x256(q8, q8 + 64);
			ahi[p] = ld2x256(q8 + 32, q8 + 96);
		}
		__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a->bsums),
					    _mm_loadu_si128((const __m128i *)(a->bsums + 8)));
		__m512i sumi[4];
		__m128i pm[4];
		const uint8_t *wr[4];
		for (int r = 0; r < 4; r++) {
			const uint8_t *wb = w0 + r * ws + b * 144;
			wr[r] = wb;
			prefetch_next_group(wb, ws, 144);
			uint32_t u[4];
			k4_scales_mins(wb + 4, u);
			__m256i ms = _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
			pm[r] = _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), bs);
			__m512i ms5 = _mm512_castsi256_si512(ms);
			__m512i s = _mm512_setzero_si512();
			for (int p = 0; p < 2; p++) {
				__m512i q4 = _mm512_loadu_si512((const void *)(wb + 16 + 64 * p));
				__m512i lo = _mm512_and_si512(q4, m4);
				__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q4, 4), m4);
				__m512i sl = _mm512_permutexvar_epi16(ix[p][0], ms5);
				__m512i sh = _mm512_permutexvar_epi16(ix[p][1], ms5);
				s = _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_maddubs_epi16(lo, alo[p]), sl));
				s = _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_maddubs_epi16(hi, ahi[p]), sh));
			}
			sumi[r] = s;
		}
		__m128 da = _mm_set1_ps(a->d);
		__m128 S = _mm_cvtepi32_ps(red4_512(sumi[0], sumi[1], sumi[2], sumi[3]));
		__m128 M = _mm_cvtepi32_ps(red4_128(pm[0], pm[1], pm[2], pm[3]));
		acc = _mm_fmadd_ps(_mm_mul_ps(fp16x4(wr[0], wr[1], wr[2], wr[3]), da), S, acc);
		accm = _mm_fmadd_ps(_mm_mul_ps(fp16x4(wr[0] + 2, wr[1] + 2, wr[2] + 2, wr[3] + 2), da), M, accm);
	}
	_mm_storeu_ps(out, _mm_sub_ps(acc, accm));
}

static void x_dotr4_q6_k(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	const uint8_t *w0 = w;
	const __m512i m4 = _mm512_set1_epi8(0xf), m2 = _mm512_set1_epi8(3);
	__m512i idx[2][2];
	for (int n = 0; n < 2; n++)
		for (int h = 0; h < 2; h++) {
			short s0 = (short)(8 * n + 4 * h);
			idx[n][h] = _mm512_set_epi16(
				s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 2, s0 + 2, s0 + 2,
				s0 + 2, s0 + 2, s0 + 2, s0 + 2, s0 + 2, s0 + 1, s0 + 1, s0 + 1, s0 + 1, s0 + 1, s0 + 1,
				s0 + 1, s0 + 1, s0, s0, s0, s0, s0, s0, s0, s0);
		}
	__m128 acc = _mm_setzero_ps();
	const struct act_q8_k *a = act;
	for (int64_t b = 0; b < k / QKK; b++, a++) {
		__m512i qa[2][2];
		for (int n = 0; n < 2; n++)
			for (int h = 0; h < 2; h++)
				qa[n][h] = _mm512_loadu_si512((const void *)(a->q + 128 * n + 64 * h));
		__m256i bsv = _mm256_loadu_si256((const __m256i *)a->bsums);
		__m512i sumi[4];
		const uint8_t *wr[4];
		for (int r = 0; r < 4; r++) {
			const uint8_t *wb = w0 + r * ws + b * 210;
			wr[r] = wb + 208;
			prefetch_next_group(wb, ws, 210);
			__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wb + 192)));
			__m512i sc5 = _mm512_castsi256_si512(sc16);
			__m256i off = _mm256_madd_epi16(sc16, bsv);
			__m512i s = _mm512_castsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
			s = _mm512_inserti64x4(s, _mm256_setzero_si256(), 1);
			for (int n = 0; n < 2; n++) {
				const uint8_t *ql = wb + 64 * n, *qh = wb + 128 + 32 * n;
				__m256i hh = _mm256_loadu_si256((const __m256i *)qh);
				__m512i l = _mm512_loadu_si512((const void *)ql);
				__m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(hh), _mm256_srli_epi16(hh, 2), 1);
				__m512i h23 = _mm512_srli_epi16(h01, 4);
				__m512i q0 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(h01, m2), 4));
				__m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
							     _mm512_slli_epi16(_mm512_and_si512(h23, m2), 4));
				s = _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_maddubs_epi16(q0, qa[n][0]),
									   _mm512_permutexvar_epi16(idx[n][0], sc5)));
				s = _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_maddubs_epi16(q1, qa[n][1]),
									   _mm512_permutexvar_epi16(idx[n][1], sc5)));
			}
			sumi[r] = s;
		}
		__m128 S = _mm_cvtepi32_ps(red4_512(sumi[0], sumi[1], sumi[2], sumi[3]));
		__m128 d = _mm_mul_ps(fp16x4(wr[0], wr[1], wr[2], wr[3]), _mm_set1_ps(a->d));
		acc = _mm_fmadd_ps(d, S, acc);
	}
	_mm_storeu_ps(out, acc);
}

/* Single rows (the rows left over by the 4-row and 16-row kernels): the
 * 4-row kernel on four copies of the row, so the arithmetic is the same. */
static void x_dot_q8_0(int64_t k, const void *w, const void *act, float *out)
{
	float r[4];
	x_dotr4_q8_0(k, w, 0, act, r);
	*out = r[0];
}

static void x_dot_q4_k(int64_t k, const void *w, const void *act, float *out)
{
	float r[4];
	x_dotr4_q4_k(k, w, 0, act, r);
	*out = r[0];
}

static void x_dot_q6_k(int64_t k, const void *w, const void *act, float *out)
{
	float r[4];
	x_dotr4_q6_k(k, w, 0, act, r);
	*out = r[0];
}

/* ---- prefill: AMX GEMM, 16 weight rows x 16 activation rows per tile ---- */

/* GCC 12's _tile_loadd has no memory clobber and its _tile_loadconfig tells
 * the compiler it reads 8 bytes (so the zeroing of the rest was dropped):
 * our own statements, ordered with the stores that fill what they read. */
#define TILE_LOADD(t, base, stride)                                                                  \
	__asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *)(base)), "r"((long)(stride)) \
			 : "memory")

struct tilecfg {
	uint8_t palette, start_row;
	uint8_t rsv[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* tiles 0, 3: C (16 x 16 int32); 1, 4: A (16 rows x ka bytes of weights);
 * 2, 5: B (ka/4 rows x 16 activation rows x 4 bytes) */
static void tiles_config(int ka)
{
	struct tilecfg c;
	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int t = 0; t < 6; t++) {
		bool is_c = t == 0 || t == 3, is_a = t == 1 || t == 4;
		c.rows[t] = (uint8_t)(is_c || is_a ? 16 : ka / 4);
		c.colsb[t] = (uint16_t)(is_a ? ka : 64);
	}
	__asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
}

/* Write a 16 x 16 float tile acc[n] (lanes = activation rows) to out. */
static void tile_out(const __m512 *acc, int64_t mvalid, uint8_t *out, size_t os_n, size_t os_m)
{
	float t[16][16];
	for (int n = 0; n < 16; n++)
		_mm512_storeu_ps(t[n], acc[n]);
	if (os_n == 4) {
		for (int64_t m = 0; m < mvalid; m++) {
			float *o = (float *)(out + (size_t)m * os_m);
			for (int n = 0; n < 16; n++)
				o[n] = t[n][m];
		}
		return;
	}
	for (int64_t m = 0; m < mvalid; m++)
		for (int n = 0; n < 16; n++)
			memcpy(out + (size_t)n * os_n + (size_t)m * os_m, &t[n][m], 4);
}

static inline __attribute__((always_inline)) void q80_post(__m512 *acc, const int32_t *cb, const float *d,
								 const float *dw)
{
	__m512 da = _mm512_loadu_ps(d);
	for (int n = 0; n < 16; n++) {
		__m512 s = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)(cb + 16 * n)));
		acc[n] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dw[n]), da), s, acc[n]);
	}
}

static void x_gemm_q8_0(int64_t k, const void *w, size_t ws, const void *apack, int64_t M, uint8_t *out,
			size_t os_n, size_t os_m, void *scratch)
{
	const uint8_t *w0 = w;
	int64_t nb = k / QK8;
	float *dwf = scratch; /* [nb][16] */
	int32_t *cb = (int32_t *)((uint8_t *)scratch + (((size_t)nb * 64 + 63) & ~(size_t)63)); /* [2][256] */
	for (int64_t b = 0; b < nb; b++)
		for (int n = 0; n < 16; n++)
			dwf[b * 16 + n] = ld_fp16(w0 + (size_t)n * ws + (size_t)b * 34);
	tiles_config(32);
	for (int64_t g = 0; g * 16 < M; g++) {
		const struct apack_q8_0 *pg = (const struct apack_q8_0 *)apack + g * nb;
		__m512 acc[16];
		for (int n = 0; n < 16; n++)
			acc[n] = _mm512_setzero_ps();
		/* software pipeline: the tiles of block b + 1 are multiplied and
		 * stored while the vector unit scales block b */
#define Q80_ISSUE(tc, ta, tb, bb, buf)                                   \
	do {                                                                 \
		_tile_zero(tc);                                              \
		TILE_LOADD(ta, w0 + (size_t)(bb) * 34 + 2, (long)ws);        \
		TILE_LOADD(tb, pg[bb].q, 64);                                \
		_tile_dpbssd(tc, ta, tb);                                    \
		_tile_stored(tc, buf, 64);                                   \
	} while (0)
		Q80_ISSUE(0, 1, 2, 0, cb);
		for (int64_t b = 0; b < nb; b += 2) {
			if (b + 1 < nb)
				Q80_ISSUE(3, 4, 5, b + 1, cb + 256);
			q80_post(acc, cb, pg[b].d, dwf + b * 16);
			if (b + 2 < nb)
				Q80_ISSUE(0, 1, 2, b + 2, cb);
			if (b + 1 < nb)
				q80_post(acc, cb + 256, pg[b + 1].d, dwf + (b + 1) * 16);
		}
#undef Q80_ISSUE
		int64_t mv = M - g * 16 < 16 ? M - g * 16 : 16;
		tile_out(acc, mv, out + (size_t)(g * 16) * os_m, os_n, os_m);
	}
	_tile_release();
}

/* K-quant weights of 16 rows widened to int8 [nq][16][k] (Q4_K: two scaled
 * copies, Q6_K: q - 32) plus per superblock and row: scales as int32 [sb][sub][16],
 * d (and dmin, Q4_K mins as int16 pairs) as [sb][16]. */
struct kq_scratch {
	int8_t *q;
	int32_t *sc, *mp;
	float *d, *dmin;
	int32_t *cb;
};

static struct kq_scratch kq_layout(void *scratch, int64_t k, int nq, int nsub)
{
	struct kq_scratch s;
	int64_t nsb = k / QKK;
	uint8_t *p = scratch;
	s.q = (int8_t *)p;
	p += (size_t)nq * 16 * (size_t)k;
	s.sc = (int32_t *)p;
	p += (size_t)nsb * nsub * 64;
	s.mp = (int32_t *)p;
	p += (size_t)nsb * 4 * 64;
	s.d = (float *)p;
	p += (size_t)nsb * 64;
	s.dmin = (float *)p;
	p += (size_t)nsb * 64;
	s.cb = (int32_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
	return s;
}

/* Q4_K: q (0..15) times its 6-bit sub-block scale does not fit in int8, but
 * q * (scale & 7) and q * (scale >> 3) do (<= 105): two int8 copies of the
 * 16 rows, each one AMX product over the whole superblock (K = 64 steps),
 * S = lo + 8 hi, the same integer as the sum over sub-blocks of scale * dot. */
static void x_gemm_q4_k(int64_t k, const void *w, size_t ws, const void *apack, int64_t M, uint8_t *out,
			size_t os_n, size_t os_m, void *scratch)
{
	int64_t nsb = k / QKK;
	struct kq_scratch s = kq_layout(scratch, k, 2, 0);
	int8_t *qlo = s.q, *qhi = s.q + 16 * k;
	const __m512i m4 = _mm512_set1_epi8(0xf);
	static const int8_t mul_tab[8][16] = {
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
		{0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45},
		{0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60},
		{0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75},
		{0, 6, 12, 18, 24, 30, 36, 42, 48, 54, 60, 66, 72, 78, 84, 90},
		{0, 7, 14, 21, 28, 35, 42, 49, 56, 63, 70, 77, 84, 91, 98, 105},
	};
	for (int n = 0; n < 16; n++) {
		const uint8_t *row = (const uint8_t *)w + (size_t)n * ws;
		for (int64_t b = 0; b < nsb; b++) {
			const uint8_t *wb = row + b * 144;
			s.d[b * 16 + n] = ld_fp16(wb);
			s.dmin[b * 16 + n] = ld_fp16(wb + 2);
			uint32_t u[4];
			k4_scales_mins(wb + 4, u);
			const uint8_t *sm = (const uint8_t *)u;
			for (int p = 0; p < 4; p++)
				s.mp[(b * 4 + p) * 16 + n] = (int32_t)((uint32_t)sm[8 + 2 * p] | ((uint32_t)sm[9 + 2 * p] << 16));
			size_t off = (size_t)n * k + b * 256;
			for (int h = 0; h < 2; h++) {
				__m512i q4 = _mm512_loadu_si512((const void *)(wb + 16 + 64 * h));
				__m512i lo = _mm512_and_si512(q4, m4);
				__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q4, 4), m4);
				/* natural order: sub-blocks 4h, 4h+1 then 4h+2, 4h+3 */
				__m512i x[2] = {_mm512_shuffle_i64x2(lo, hi, 0x44), _mm512_shuffle_i64x2(lo, hi, 0xee)};
				for (int e = 0; e < 2; e++) {
					int j = 4 * h + 2 * e;
					int s0 = sm[j], s1 = sm[j + 1];
#define TAB2(a, b)                                                                                          \
	_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mul_tab[a]))), \
			   _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mul_tab[b])), 1)
					__m512i tl = TAB2(s0 & 7, s1 & 7), th = TAB2(s0 >> 3, s1 >> 3);
#undef TAB2
					_mm512_storeu_si512((void *)(qlo + off + 128 * h + 64 * e), _mm512_shuffle_epi8(tl, x[e]));
					_mm512_storeu_si512((void *)(qhi + off + 128 * h + 64 * e), _mm512_shuffle_epi8(th, x[e]));
				}
			}
		}
	}
	tiles_config(64);
	for (int64_t g = 0; g * 16 < M; g++) {
		const struct apack_q8_k *pg = (const struct apack_q8_k *)apack + g * nsb;
		__m512 acc[16], accm[16];
		for (int n = 0; n < 16; n++)
			acc[n] = accm[n] = _mm512_setzero_ps();
		for (int64_t b = 0; b < nsb; b++) {
			_tile_zero(0);
			_tile_zero(3);
			for (int h = 0; h < 4; h++) {
				TILE_LOADD(2, pg[b].q + 1024 * h, 64);
				TILE_LOADD(1, qlo + b * 256 + 64 * h, (long)k);
				_tile_dpbssd(0, 1, 2);
				TILE_LOADD(4, qhi + b * 256 + 64 * h, (long)k);
				_tile_dpbssd(3, 4, 2);
			}
			_tile_stored(0, s.cb, 64);
			_tile_stored(3, s.cb + 256, 64);
			__m512 da = _mm512_loadu_ps(pg[b].d);
			__m512i bsp[4];
			for (int p = 0; p < 4; p++)
				bsp[p] = _mm512_loadu_si512((const void *)pg[b].bsp[p]);
			for (int n = 0; n < 16; n++) {
				__m512i S = _mm512_add_epi32(_mm512_load_si512((const void *)(s.cb + 16 * n)),
							     _mm512_slli_epi32(_mm512_load_si512((const void *)(s.cb + 256 + 16 * n)), 3));
				acc[n] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(s.d[b * 16 + n]), da),
							 _mm512_cvtepi32_ps(S), acc[n]);
				const int32_t *mp = s.mp + b * 4 * 16 + n;
				__m512i mt = _mm512_madd_epi16(bsp[0], _mm512_set1_epi32(mp[0]));
				mt = _mm512_add_epi32(mt, _mm512_madd_epi16(bsp[1], _mm512_set1_epi32(mp[16])));
				mt = _mm512_add_epi32(mt, _mm512_madd_epi16(bsp[2], _mm512_set1_epi32(mp[32])));
				mt = _mm512_add_epi32(mt, _mm512_madd_epi16(bsp[3], _mm512_set1_epi32(mp[48])));
				accm[n] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(s.dmin[b * 16 + n]), da),
							  _mm512_cvtepi32_ps(mt), accm[n]);
			}
		}
		for (int n = 0; n < 16; n++)
			acc[n] = _mm512_sub_ps(acc[n], accm[n]);
		int64_t mv = M - g * 16 < 16 ? M - g * 16 : 16;
		tile_out(acc, mv, out + (size_t)(g * 16) * os_m, os_n, os_m);
	}
	_tile_release();
}

static void x_gemm_q6_k(int64_t k, const void *w, size_t ws, const void *apack, int64_t M, uint8_t *out,
			size_t os_n, size_t os_m, void *scratch)
{
	int64_t nsb = k / QKK;
	struct kq_scratch s = kq_layout(scratch, k, 1, 16);
	const __m512i m4 = _mm512_set1_epi8(0xf), m2 = _mm512_set1_epi8(3), o32 = _mm512_set1_epi8(32);
	for (int n = 0; n < 16; n++) {
		const uint8_t *row = (const uint8_t *)w + (size_t)n * ws;
		for (int64_t b = 0; b < nsb; b++) {
			const uint8_t *wb = row + b * 210;
			s.d[b * 16 + n] = ld_fp16(wb + 208);
			for (int j = 0; j < 16; j++)
				s.sc[(b * 16 + j) * 16 + n] = (int8_t)wb[192 + j];
			int8_t *dst = s.q + (size_t)n * k + b * 256;
			for (int h = 0; h < 2; h++) {
				const uint8_t *ql = wb + 64 * h, *qh = wb + 128 + 32 * h;
				__m256i hh = _mm256_loadu_si256((const __m256i *)qh);
				__m512i l = _mm512_loadu_si512((const void *)ql);
				__m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(hh), _mm256_srli_epi16(hh, 2), 1);
				__m512i h23 = _mm512_srli_epi16(h01, 4);
				__m512i q0 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(h01, m2), 4));
				__m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
							     _mm512_slli_epi16(_mm512_and_si512(h23, m2), 4));
				_mm512_storeu_si512((void *)(dst + 128 * h), _mm512_sub_epi8(q0, o32));
				_mm512_storeu_si512((void *)(dst + 128 * h + 64), _mm512_sub_epi8(q1, o32));
			}
		}
	}
	tiles_config(16);
	for (int64_t g = 0; g * 16 < M; g++) {
		const struct apack_q8_k *pg = (const struct apack_q8_k *)apack + g * nsb;
		__m512 acc[16];
		for (int n = 0; n < 16; n++)
			acc[n] = _mm512_setzero_ps();
		for (int64_t b = 0; b < nsb; b++) {
			__m512i S[16];
			for (int n = 0; n < 16; n++)
				S[n] = _mm512_setzero_si512();
			const int8_t *A = s.q + b * 256;
			for (int j = 0; j < 16; j += 2) {
				_tile_zero(0);
				TILE_LOADD(1, A + 16 * j, (long)k);
				TILE_LOADD(2, pg[b].q + 256 * j, 64);
				_tile_dpbssd(0, 1, 2);
				_tile_zero(3);
				TILE_LOADD(4, A + 16 * (j + 1), (long)k);
				TILE_LOADD(5, pg[b].q + 256 * (j + 1), 64);
				_tile_dpbssd(3, 4, 5);
				_tile_stored(0, s.cb, 64);
				_tile_stored(3, s.cb + 256, 64);
				for (int h = 0; h < 2; h++) {
					const int32_t *sc = s.sc + (b * 16 + j + h) * 16;
					for (int n = 0; n < 16; n++) {
						__m512i c = _mm512_load_si512((const void *)(s.cb + 256 * h + 16 * n));
						S[n] = _mm512_add_epi32(S[n], _mm512_mullo_epi32(c, _mm512_set1_epi32(sc[n])));
					}
				}
			}
			__m512 da = _mm512_loadu_ps(pg[b].d);
			for (int n = 0; n < 16; n++)
				acc[n] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(s.d[b * 16 + n]), da),
							 _mm512_cvtepi32_ps(S[n]), acc[n]);
		}
		int64_t mv = M - g * 16 < 16 ? M - g * 16 : 16;
		tile_out(acc, mv, out + (size_t)(g * 16) * os_m, os_n, os_m);
	}
	_tile_release();
}

void cpu_kernels_amx(struct cpu_kernels *k)
{
	cpu_kernels_avx512(k);
	static const uint32_t types[] = {ALICE_TYPE_Q8_0, ALICE_TYPE_Q4_K, ALICE_TYPE_Q6_K};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		k->dot4[types[i]] = NULL; /* the GEMM takes every multi-row case */
	k->dot[ALICE_TYPE_Q8_0] = x_dot_q8_0;
	k->dotr4[ALICE_TYPE_Q8_0] = x_dotr4_q8_0;
	k->gemm[ALICE_TYPE_Q8_0] = x_gemm_q8_0;
	k->dot[ALICE_TYPE_Q4_K] = x_dot_q4_k;
	k->dotr4[ALICE_TYPE_Q4_K] = x_dotr4_q4_k;
	k->gemm[ALICE_TYPE_Q4_K] = x_gemm_q4_k;
	k->dot[ALICE_TYPE_Q6_K] = x_dot_q6_k;
	k->dotr4[ALICE_TYPE_Q6_K] = x_dotr4_q6_k;
	k->gemm[ALICE_TYPE_Q6_K] = x_gemm_q6_k;
	k->isa = "avx512+amx";
}
#endif
