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
#include <string.h>

#include "cpu_internal.h"
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
		_mm_prefetch((const char *)p + 4 * ws + o, _MM_HINT_T0);
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
			alo[p] = kseq_ld2x256(q8, q8 + 64);
			ahi[p] = kseq_ld2x256(q8 + 32, q8 + 96);
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

#endif
