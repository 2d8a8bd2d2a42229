/* vec_kseq.h — AVX-512 mat-vecs for Q4_K and Q6_K in one accumulation order
 * per output (included by vec_avx512.c; vec_amx.c's GEMMs use the same):
 * per superblock b in order, S_b = the exact integer sum over its sub-blocks
 * of scale * dot (Q4_K also M_b = sum of min * bsum), then
 * acc = fma(d_w * d_a, (float)S_b, acc) (Q4_K: accm likewise with dmin and
 * M_b; result acc - accm) -- llama.cpp's repacked Q4_K order. Integer sums
 * are exact whichever instructions form them, so a row's result does not
 * depend on the kernel (4-row decode, single row, GEMM). */
#ifndef ALICE_CPU_VEC_KSEQ_H
#define ALICE_CPU_VEC_KSEQ_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "vec_x86.h"

/* ---- integer reductions (red4_128, red4_256: vec_x86.h) ---- */

static inline __m128i red4_512(__m512i z0, __m512i z1, __m512i z2, __m512i z3)
{
	__m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
	__m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
	__m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
	__m256i y = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
	return _mm_add_epi32(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
}

static inline __m512i kseq_ld2x256(const void *lo, const void *hi)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
				  _mm256_loadu_si256((const __m256i *)hi), 1);
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
		_mm_prefetch((const char *)p + DECODE_PF * ws + o, _MM_HINT_T0);
}

static inline __attribute__((always_inline)) void q4k_rows4(int64_t k, const void *w, size_t ws, const void *act,
							      float *out, const bool grp)
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
			alo[p] = kseq_ld2x256(q8, q8 + 64);
			ahi[p] = kseq_ld2x256(q8 + 32, q8 + 96);
		}
		__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a->bsums),
					    _mm_loadu_si128((const __m128i *)(a->bsums + 8)));
		__m512i sumi[4], half[4][2];
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
				__m512i t;
				__m512i q4 = _mm512_loadu_si512((const void *)(wb + 16 + 64 * p));
				__m512i lo = _mm512_and_si512(q4, m4);
				__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q4, 4), m4);
				__m512i sl = _mm512_permutexvar_epi16(ix[p][0], ms5);
				__m512i sh = _mm512_permutexvar_epi16(ix[p][1], ms5);
				t = _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(lo, alo[p]), sl),
						     _mm512_madd_epi16(_mm512_maddubs_epi16(hi, ahi[p]), sh));
				half[r][p] = t; /* lower 256: sub-blocks 4p, 4p+1; upper: 4p+2, 4p+3 */
				s = _mm512_add_epi32(s, t);
			}
			sumi[r] = s;
		}
		__m128 da = _mm_set1_ps(a->d);
		__m128 d = _mm_mul_ps(fp16x4(wr[0], wr[1], wr[2], wr[3]), da);
		__m128 dm = _mm_mul_ps(fp16x4(wr[0] + 2, wr[1] + 2, wr[2] + 2, wr[3] + 2), da);
		if (!grp) { /* llama.cpp's gemv: once per superblock */
			__m128 S = _mm_cvtepi32_ps(red4_512(sumi[0], sumi[1], sumi[2], sumi[3]));
			__m128 M = _mm_cvtepi32_ps(red4_128(pm[0], pm[1], pm[2], pm[3]));
			acc = _mm_fmadd_ps(d, S, acc);
			accm = _mm_fmadd_ps(dm, M, accm);
			continue;
		}
		/* its gemm: once per pair of sub-blocks (64 elements) */
		for (int h = 0; h < 4; h++) {
			__m256i x[4];
			for (int r = 0; r < 4; r++)
				x[r] = h & 1 ? _mm512_extracti64x4_epi64(half[r][h / 2], 1) : _mm512_castsi512_si256(half[r][h / 2]);
			acc = _mm_fmadd_ps(d, _mm_cvtepi32_ps(red4_256(x[0], x[1], x[2], x[3])), acc);
		}
		__m128 m0 = _mm_castsi128_ps(pm[0]), m1 = _mm_castsi128_ps(pm[1]), m2 = _mm_castsi128_ps(pm[2]),
		       m3 = _mm_castsi128_ps(pm[3]);
		_MM_TRANSPOSE4_PS(m0, m1, m2, m3); /* lanes = rows, one vector per pair */
		accm = _mm_fmadd_ps(dm, _mm_cvtepi32_ps(_mm_castps_si128(m0)), accm);
		accm = _mm_fmadd_ps(dm, _mm_cvtepi32_ps(_mm_castps_si128(m1)), accm);
		accm = _mm_fmadd_ps(dm, _mm_cvtepi32_ps(_mm_castps_si128(m2)), accm);
		accm = _mm_fmadd_ps(dm, _mm_cvtepi32_ps(_mm_castps_si128(m3)), accm);
	}
	_mm_storeu_ps(out, _mm_sub_ps(acc, accm));
}

/* One row in the same order (a row read start to end streams from DRAM
 * better than 4 rows read side by side): S_b by vpdpbusd and vpdpwssd (the
 * scale per 32-element sub-block, q4k_sb), M_b from the 8 mins. The
 * integer sums of 4 superblocks are reduced together and their 8 float
 * terms formed in two vectors (the per-superblock horizontal sums and
 * scalar conversions had been half the kernel's instructions); the
 * activation side (its quants in the zmm order, pair sums of bsums, d) is
 * laid out once per call. */
#define Q4K_ACT_SB 64 /* superblocks laid out per piece */
struct q4k_act {
	__m512i alo[Q4K_ACT_SB][2];   /* q 0..31 | 64..95, q 128..159 | 192..223 */
	__m512i ahi[Q4K_ACT_SB][2];   /* the 32 after each of those */
	__m128i bs[Q4K_ACT_SB];       /* the 8 sums of q per 32 elements */
	__m256 da2[Q4K_ACT_SB / 4];   /* d of 4 superblocks, each twice */
};

static inline void q4k_act_fill(struct q4k_act *A, const struct act_q8_k *a, int64_t nsb)
{
	for (int64_t b = 0; b < nsb; b++)
		for (int p = 0; p < 2; p++) {
			const int8_t *q8 = a[b].q + 128 * p;
			A->alo[b][p] = kseq_ld2x256(q8, q8 + 64);
			A->ahi[b][p] = kseq_ld2x256(q8 + 32, q8 + 96);
		}
	for (int64_t b = 0; b < nsb; b++)
		A->bs[b] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a[b].bsums),
					  _mm_loadu_si128((const __m128i *)(a[b].bsums + 8)));
	for (int64_t b = 0; b + 4 <= nsb; b += 4)
		A->da2[b / 4] = _mm256_setr_ps(a[b].d, a[b].d, a[b + 1].d, a[b + 1].d, a[b + 2].d, a[b + 2].d, a[b + 3].d,
					       a[b + 3].d);
}

/* S_b (16 partial lanes) and the 4 M_b pair lanes of one superblock: per
 * half p (64 quant bytes, sub-blocks 4p..4p+3) the nibbles against the
 * activations by vpdpbusd, 4 products per lane (|x| <= 7680: int16), each
 * 128-bit chunk packed to 4 lanes of one sub-block and 4 of the next, then
 * one vpdpwssd by their scales (full-width 512-bit units: Zen 5 runs a zmm
 * op at the rate of a ymm one) */
static inline __attribute__((always_inline)) __m512i q4k_sb(const uint8_t *wb, const struct q4k_act *A, int64_t b,
							     __m128i *pm)
{
	const __m512i m4 = _mm512_set1_epi8(0xf);
	prefetch_ahead(wb, 144);
	__m256i ms = _mm256_cvtepu8_epi16(k4_scales_mins_v(wb + 4));
	*pm = _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), A->bs[b]);
	const __m512i sc = _mm512_broadcast_i32x4(_mm256_castsi256_si128(ms));
	const __m512i z = _mm512_setzero_si512();
	__m512i s = _mm512_setzero_si512();
#pragma GCC unroll 2
	for (int p = 0; p < 2; p++) {
		__m512i q4 = _mm512_loadu_si512((const void *)(wb + 16 + 64 * p));
		__m512i lo = _mm512_and_si512(q4, m4);
		__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q4, 4), m4);
		__m512i pl = _mm512_dpbusd_epi32(z, lo, A->alo[b][p]); /* sub-blocks 4p | 4p + 2 */
		__m512i ph = _mm512_dpbusd_epi32(z, hi, A->ahi[b][p]); /* 4p + 1 | 4p + 3 */
		/* words of scales 4p, 4p + 1 (chunks 0, 1), 4p + 2, 4p + 3 (chunks 2, 3) */
		const char w0 = (char)(8 * p), w1 = (char)(8 * p + 2), w2 = (char)(8 * p + 4), w3 = (char)(8 * p + 6);
		__m512i idx = _mm512_set_epi8(w3 + 1, w3, w3 + 1, w3, w3 + 1, w3, w3 + 1, w3, w2 + 1, w2, w2 + 1, w2, w2 + 1, w2,
					      w2 + 1, w2, w3 + 1, w3, w3 + 1, w3, w3 + 1, w3, w3 + 1, w3, w2 + 1, w2, w2 + 1, w2,
					      w2 + 1, w2, w2 + 1, w2, w1 + 1, w1, w1 + 1, w1, w1 + 1, w1, w1 + 1, w1, w0 + 1, w0,
					      w0 + 1, w0, w0 + 1, w0, w0 + 1, w0, w1 + 1, w1, w1 + 1, w1, w1 + 1, w1, w1 + 1, w1,
					      w0 + 1, w0, w0 + 1, w0, w0 + 1, w0, w0 + 1, w0);
		s = _mm512_dpwssd_epi32(s, _mm512_packs_epi32(pl, ph), _mm512_shuffle_epi8(sc, idx));
	}
	return s;
}

/* superblocks [0, nsb) of a row from chain state am (lane 0: acc, lane 1:
 * accm); A laid out for these superblocks */
static inline __attribute__((always_inline)) __m128 q4k_row_part(int64_t nsb, const uint8_t *wb,
								 const struct act_q8_k *a, const struct q4k_act *A,
								 __m128 am)
{
	int64_t b = 0;
	for (; b + 4 <= nsb; b += 4) {
		__m512i s16[4];
		__m128i pm[4];
#pragma GCC unroll 4
		for (int i = 0; i < 4; i++)
			s16[i] = q4k_sb(wb + (b + i) * 144, A, b + i, &pm[i]);
		__m128 S = _mm_cvtepi32_ps(red4_512(s16[0], s16[1], s16[2], s16[3]));
		__m128 M = _mm_cvtepi32_ps(red4_128(pm[0], pm[1], pm[2], pm[3]));
		uint32_t dw[4];
		for (int i = 0; i < 4; i++)
			memcpy(&dw[i], wb + (b + i) * 144, 4);
		/* d, dmin of each superblock times its d_a: d0 m0 d1 m1 | d2 m2 d3 m3 */
		__m256 P = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dw)), A->da2[b / 4]);
		__m128 P01 = _mm256_castps256_ps128(P), P23 = _mm256_extractf128_ps(P, 1);
		__m128 SM01 = _mm_unpacklo_ps(S, M), SM23 = _mm_unpackhi_ps(S, M);
		am = _mm_fmadd_ps(P01, SM01, am);
		am = _mm_fmadd_ps(_mm_movehl_ps(P01, P01), _mm_movehl_ps(SM01, SM01), am);
		am = _mm_fmadd_ps(P23, SM23, am);
		am = _mm_fmadd_ps(_mm_movehl_ps(P23, P23), _mm_movehl_ps(SM23, SM23), am);
	}
	for (; b < nsb; b++) { /* the last nsb % 4 */
		__m128i pm;
		__m512i s16 = q4k_sb(wb + b * 144, A, b, &pm);
		__m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s16), _mm512_extracti64x4_epi64(s16, 1));
		__m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
		__m128i t = _mm_hadd_epi32(s, pm); /* lanes 0..1: S_b pairs, 2..3: M_b pairs */
		t = _mm_hadd_epi32(t, t);
		const uint8_t *w = wb + b * 144;
		__m128 P = _mm_mul_ps(_mm_setr_ps(ld_fp16(w), ld_fp16(w + 2), 0.0f, 0.0f), _mm_set1_ps(a[b].d));
		am = _mm_fmadd_ps(P, _mm_cvtepi32_ps(t), am);
	}
	return am;
}

static inline __attribute__((always_inline)) float q4k_am_result(__m128 am)
{
	return _mm_cvtss_f32(am) - _mm_cvtss_f32(_mm_movehdup_ps(am));
}

/* one row, its activation side laid out here (rows left over, long rows) */
static float q4k_row1(int64_t nsb, const uint8_t *wb, const struct act_q8_k *a)
{
	struct q4k_act A;
	__m128 am = _mm_setzero_ps();
	for (int64_t b0 = 0; b0 < nsb; b0 += Q4K_ACT_SB) {
		int64_t n = nsb - b0 < Q4K_ACT_SB ? nsb - b0 : Q4K_ACT_SB;
		q4k_act_fill(&A, a + b0, n);
		am = q4k_row_part(n, wb + b0 * 144, a + b0, &A, am);
	}
	return q4k_am_result(am);
}

static void x_dot1_q4_k(int64_t k, const void *w, const void *act, float *out)
{
	*out = q4k_row1(k / QKK, w, act);
}

/* decode: n rows one after another, the activation side laid out once */
static void x_dotn_q4_k(int64_t k, const void *w, size_t ws, int64_t n, const void *act, uint8_t *out, size_t os)
{
	const int64_t nsb = k / QKK;
	if (nsb > Q4K_ACT_SB) {
		for (int64_t r = 0; r < n; r++) {
			float v = q4k_row1(nsb, (const uint8_t *)w + (size_t)r * ws, act);
			memcpy(out + (size_t)r * os, &v, 4);
		}
		return;
	}
	struct q4k_act A;
	q4k_act_fill(&A, act, nsb);
	for (int64_t r = 0; r < n; r++) {
		float v = q4k_am_result(q4k_row_part(nsb, (const uint8_t *)w + (size_t)r * ws, act, &A, _mm_setzero_ps()));
		memcpy(out + (size_t)r * os, &v, 4);
	}
}

/* decode: 4 rows one after another, the activation side laid out once */
static void x_dotr4s_q4_k(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	const int64_t nsb = k / QKK;
	if (nsb > Q4K_ACT_SB) {
		for (int r = 0; r < 4; r++)
			out[r] = q4k_row1(nsb, (const uint8_t *)w + (size_t)r * ws, act);
		return;
	}
	struct q4k_act A;
	q4k_act_fill(&A, act, nsb);
	for (int r = 0; r < 4; r++)
		out[r] = q4k_am_result(q4k_row_part(nsb, (const uint8_t *)w + (size_t)r * ws, act, &A, _mm_setzero_ps()));
}

/* Q6_K in ggml_vec_dot_q6_K_q8_K's order: 8 float lanes per output, lane l
 * of a superblock = sum over its 32-element groups g of sc[2g + (l >= 4)] *
 * (products of elements 32g+4l..+3), minus 32 (sc[2l] bsum[2l] +
 * sc[2l+1] bsum[2l+1]); acc_l = fma(d_w * d_a, lane, acc_l); hsum8 at the
 * end. Decode takes the AVX2 single-row dot (vec_avx2.c: rows read one
 * after another stream from DRAM better than the 4-row zmm kernel did);
 * vec_avx512.c's GEMM keeps these lanes. */

/* ALICE_CPU_EXACT (set by cpu_kernels_avx512): grouped rows in llama.cpp's
 * gemm order; otherwise every row in its gemv order (as vec_amx.c). */
static bool kseq_q4k_exact;

/* A row told its place: llama.cpp's gemm order for a grouped row. */
static void x_dotx_q4_k(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw,
			float *out)
{
	(void)nw;
	if (!(kseq_q4k_exact && cpu_row_grouped(count, index))) {
		*out = q4k_row1(k / QKK, w, act);
		return;
	}
	float r[4];
	q4k_rows4(k, w, 0, act, r, true);
	*out = r[0];
}

#endif
