/* vec_avx512.c — AVX-512 (F/BW/VL/DQ + VNNI) kernels: the AVX2 set with the
 * hot quantized dots replaced by VNNI (vpdpbusd) versions. Built with those
 * flags; only called when cpuid reports them. */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "vec_x86.h"
#include "vec_kseq.h"

static float a5_dot_f32(int64_t n, const float *a, const float *b)
{
	__m512 s0 = _mm512_setzero_ps(), s1 = s0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
		s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
	}
	for (; i + 16 <= n; i += 16)
		s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
	float s = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* signed x signed bytes with VNNI: |w| (u8) . (a with w's sign) */
static inline __m512i dpbs(__m512i acc, __m512i w, __m512i a)
{
	__mmask64 neg = _mm512_movepi8_mask(w);
	__m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
	return _mm512_dpbusd_epi32(acc, _mm512_abs_epi8(w), sa);
}

static inline __m512i ld2x256(const void *lo, const void *hi)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
				  _mm256_loadu_si256((const __m256i *)hi), 1);
}


/* ---- Q8_0 in llama.cpp's order (ggml_vec_dot_q8_0_q8_0 and its tinyBLAS
 * gemm): per output ONE chain of 8 float lanes over the blocks in order,
 * lane l += d_w * d_a times the integer sum of elements 4l..4l+3; then
 * t_i = l_i + l_{i+4}, result (t0 + t2) + (t1 + t3). The single-row dot is
 * the AVX2 one (the same chain); here 2 rows per zmm (decode) and a VNNI
 * GEMM whose every output is such a chain (prefill). ---- */

static inline float hsum8_chain(const float *l)
{
	float t0 = l[0] + l[4], t1 = l[1] + l[5], t2 = l[2] + l[6], t3 = l[3] + l[7];
	return (t0 + t2) + (t1 + t3);
}

/* -128 * sum(a) of each lane's 4 elements, per block (see below) */
static inline __m256i q80_corr(const struct act_q8_0 *a)
{
	const __m256i x80 = _mm256_set1_epi8((char)0x80);
	__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
	return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), x80, qa));
}

/* One row in ggml's chain with 256-bit VNNI (AVX512VL): per block,
 * (w + 128) as u8 against the signed activations, started from
 * -128 * sum(a) of each lane's 4 elements: the exact signed sum per lane
 * that ggml's maddubs/madd pair gives. Decode calls it row after row (no
 * 4-row kernel: 4 rows read side by side streamed from DRAM at ~13 ms
 * CPU for K=2048 N=65536 on 1 thread against ~8 one after another; with
 * the corrections laid out once per 4 rows, 2 threads: ~4.2-4.6 ms wall
 * against ~3.9 with them formed in the loop). */
static inline __attribute__((always_inline)) float q80_row(int64_t nb, const uint8_t *wb, const struct act_q8_0 *a)
{
	const __m256i x80 = _mm256_set1_epi8((char)0x80);
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++, wb += 34) {
		prefetch_ahead(wb, 34);
		__m256i wv = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wb + 2)), x80);
		__m256i c = q80_corr(a + b);
		__m256i p = _mm256_dpbusd_epi32(c, wv, _mm256_loadu_si256((const __m256i *)a[b].q));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * a[b].d), _mm256_cvtepi32_ps(p), acc);
	}
	return hsum256_ps(acc);
}

static void a5_dot_q8_0(int64_t k, const void *w, const void *act, float *out)
{
	*out = q80_row(k / QK8, w, act);
}

/* 4 rows, each exactly q80_row's chain (the same operations in the same
 * order), the activation block and its correction loaded once: for
 * matrices that stay in cache, where the single row's fma chain (one
 * dependent add per block) is the limit (dotr4_max: small ones only, since
 * rows side by side stream from DRAM at half the rate). */
static void a5_dotr4_q8_0(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	const int64_t nb = k / QK8;
	const struct act_q8_0 *a = act;
	const uint8_t *wr[4] = {w, (const uint8_t *)w + ws, (const uint8_t *)w + 2 * ws, (const uint8_t *)w + 3 * ws};
	const __m256i x80 = _mm256_set1_epi8((char)0x80);
	__m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
	for (int64_t b = 0; b < nb; b++) {
		const __m256i c = q80_corr(a + b), qa = _mm256_loadu_si256((const __m256i *)a[b].q);
		const float da = a[b].d;
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			const uint8_t *wb = wr[r] + (size_t)b * 34;
			__m256i wv = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wb + 2)), x80);
			__m256i p = _mm256_dpbusd_epi32(c, wv, qa);
			acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * da), _mm256_cvtepi32_ps(p), acc[r]);
		}
	}
	for (int r = 0; r < 4; r++)
		out[r] = hsum256_ps(acc[r]);
}

static void a5_pack_q8_0(const struct act_q8_0 *a, int64_t nb, struct apack_q8_0 *g, int lane)
{
	const int p = lane / 2, h = lane % 2;
	for (int64_t b = 0; b < nb; b++) {
		memcpy(&g[b].q[p][32 * h], a[b].q, QK8);
		_mm256_storeu_si256((__m256i *)&g[b].c[p][8 * h], q80_corr(a + b));
		_mm256_storeu_ps(&g[b].d2[p][8 * h], _mm256_set1_ps(a[b].d));
	}
}

/* 4 weight rows x P pairs of activation rows (struct apack_q8_0). Weights
 * are read as w + 128 (u8) against the signed activations, each block's
 * lanes starting from the pack's -128 * sum(a) of their 4 elements: the
 * exact signed sum, with no per-row correction to form. */
static inline __attribute__((always_inline)) void q80_tile(int64_t nb, const uint8_t *w, size_t ws,
							   const struct apack_q8_0 *pg, int p0, const int P,
							   __m512 (*out)[4])
{
	const __m512i x80 = _mm512_set1_epi8((char)0x80);
	__m512 acc[4][4];
#pragma GCC unroll 4
	for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
		for (int p = 0; p < 4; p++)
			acc[r][p] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		__m512i W[4];
		__m512 dw[4];
#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			const uint8_t *wb = w + (size_t)r * ws + (size_t)b * 34;
			W[r] = _mm512_xor_si512(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb + 2))), x80);
			dw[r] = _mm512_set1_ps(ld_fp16(wb));
		}
#pragma GCC unroll 4
		for (int p = 0; p < P; p++) {
			const __m512i as = _mm512_loadu_si512((const void *)pg[b].q[p0 + p]);
			const __m512 da = _mm512_loadu_ps(pg[b].d2[p0 + p]);
#pragma GCC unroll 4
			for (int r = 0; r < 4; r++) {
				__m512i is = _mm512_dpbusd_epi32(_mm512_loadu_si512((const void *)pg[b].c[p0 + p]), W[r], as);
				acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], da), _mm512_cvtepi32_ps(is), acc[r][p]);
			}
		}
	}
#pragma GCC unroll 4
	for (int r = 0; r < 4; r++)
#pragma GCC unroll 4
		for (int p = 0; p < 4; p++)
			out[r][p] = acc[r][p];
}

/* hsum8_chain of both halves of acc[r][p] and acc[r][q] for the 4 rows, in
 * registers: lane 4k + j of the result is row (k >> 1) + 2 * (j & 1), pair
 * p (j < 2) or q, half k & 1. */
static inline __m512 q80_fold(__m512 (*acc)[4], int p, int q)
{
	__m512 s[2];
	for (int i = 0; i < 2; i++) {
		const int pp = i ? q : p;
		__m512 t01 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[0][pp], acc[1][pp], 0x88),
					   _mm512_shuffle_f32x4(acc[0][pp], acc[1][pp], 0xDD));
		__m512 t23 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2][pp], acc[3][pp], 0x88),
					   _mm512_shuffle_f32x4(acc[2][pp], acc[3][pp], 0xDD));
		s[i] = _mm512_add_ps(_mm512_shuffle_ps(t01, t23, 0x44), _mm512_shuffle_ps(t01, t23, 0xEE));
	}
	return _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], 0x88), _mm512_shuffle_ps(s[0], s[1], 0xDD));
}

static void a5_gemm_q8_0(int64_t k, const void *w, size_t ws, const void *apack, int64_t M, uint8_t *out,
			 size_t os_n, size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)scratch;
	(void)grp;
	int64_t nb = k / QK8;
	for (int64_t g = 0; g * 16 < M; g++) {
		const struct apack_q8_0 *pg = (const struct apack_q8_0 *)apack + g * nb;
		int64_t mv = M - g * 16 < 16 ? M - g * 16 : 16;
		int npairs = (int)((mv + 1) / 2);
		for (int n0 = 0; n0 < 16; n0 += 4) {
			const uint8_t *wr = (const uint8_t *)w + (size_t)n0 * ws;
			for (int p0 = 0; p0 < npairs; p0 += 4) {
				__m512 acc[4][4];
				int P = npairs - p0 < 4 ? npairs - p0 : 4;
				switch (P) {
				case 4: q80_tile(nb, wr, ws, pg, p0, 4, acc); break;
				case 3: q80_tile(nb, wr, ws, pg, p0, 3, acc); break;
				case 2: q80_tile(nb, wr, ws, pg, p0, 2, acc); break;
				default: q80_tile(nb, wr, ws, pg, p0, 1, acc); break;
				}
				for (int p = 0; p < P; p += 2) {
					const int q = p + 1 < P ? p + 1 : p;
					float v[16];
					_mm512_storeu_ps(v, q80_fold(acc, p, q));
					for (int l = 0; l < 16; l++) {
						int kk = l >> 2, j = l & 3, pp = j < 2 ? p : q;
						int64_t m = g * 16 + 2 * (p0 + pp) + (kk & 1);
						if ((j >= 2 && q == p) || m >= M)
							continue;
						int r = (kk >> 1) + 2 * (j & 1);
						memcpy(out + (size_t)(n0 + r) * os_n + (size_t)m * os_m, &v[l], 4);
					}
				}
			}
		}
	}
}


/* ---- Q6_K prefill in ggml's 8-lane order (see vec_kseq.h): one weight row
 * x P pairs of activation rows, two outputs per zmm; the row's q (0..63)
 * and scales are widened once per superblock and pass. ---- */
static inline __attribute__((always_inline)) void q6_row(int64_t nsb, const uint8_t *wr, const struct apack_q6p *pg,
							 const int P, float (*l)[16])
{
	const __m256i m4 = _mm256_set1_epi8(0xf), m2 = _mm256_set1_epi8(3);
	__m512 acc[8];
#pragma GCC unroll 8
	for (int p = 0; p < 8; p++)
		acc[p] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nsb; b++) {
		const uint8_t *wb = wr + b * 210;
		__m512i W[8], SV[8];
		__m512i sc = _mm512_broadcast_i64x4(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wb + 192))));
#pragma GCC unroll 2
		for (int n = 0; n < 2; n++) {
			__m256i h = _mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * n));
			__m256i l0 = _mm256_loadu_si256((const __m256i *)(wb + 64 * n));
			__m256i l1 = _mm256_loadu_si256((const __m256i *)(wb + 64 * n + 32));
			W[4 * n + 0] = _mm512_broadcast_i64x4(_mm256_or_si256(_mm256_and_si256(l0, m4),
									    _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)));
			W[4 * n + 1] = _mm512_broadcast_i64x4(_mm256_or_si256(
				_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4)));
			W[4 * n + 2] = _mm512_broadcast_i64x4(
				_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
						_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4)));
			W[4 * n + 3] = _mm512_broadcast_i64x4(
				_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
						_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4)));
		}
#pragma GCC unroll 8
		for (int g = 0; g < 8; g++) /* int16 lanes: 8 x scale 2g, 8 x scale 2g+1, twice */
			SV[g] = _mm512_permutexvar_epi16(
				_mm512_broadcast_i64x4(_mm256_set_m128i(_mm_set1_epi16((short)(2 * g + 1)), _mm_set1_epi16((short)(2 * g)))),
				sc);
		__m512 dw = _mm512_set1_ps(ld_fp16(wb + 208));
#pragma GCC unroll 8
		for (int p = 0; p < P; p++) {
			__m512i off = _mm512_madd_epi16(sc, _mm512_loadu_si512((const void *)pg[b].bs[p]));
			__m512i sumi = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(off, 5));
#pragma GCC unroll 8
			for (int g = 0; g < 8; g++)
				sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(W[g],
						_mm512_loadu_si512((const void *)pg[b].q[p][g])), SV[g]));
			acc[p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_loadu_ps(pg[b].d2[p])), _mm512_cvtepi32_ps(sumi), acc[p]);
		}
	}
#pragma GCC unroll 8
	for (int p = 0; p < P; p++)
		_mm512_storeu_ps(l[p], acc[p]);
}

static void a5_gemm_q6_k(int64_t k, const void *w, size_t ws, const void *apack, int64_t M, uint8_t *out,
			 size_t os_n, size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)scratch;
	(void)grp;
	int64_t nsb = k / QKK;
	for (int64_t g = 0; g * 16 < M; g++) {
		const struct apack_q6p *pg = (const struct apack_q6p *)apack + g * nsb;
		int64_t mv = M - g * 16 < 16 ? M - g * 16 : 16;
		int P = (int)((mv + 1) / 2);
		for (int n = 0; n < 16; n++) {
			const uint8_t *wr = (const uint8_t *)w + (size_t)n * ws;
			float l[8][16];
			switch (P) {
			case 8: q6_row(nsb, wr, pg, 8, l); break;
			case 7: q6_row(nsb, wr, pg, 7, l); break;
			case 6: q6_row(nsb, wr, pg, 6, l); break;
			case 5: q6_row(nsb, wr, pg, 5, l); break;
			case 4: q6_row(nsb, wr, pg, 4, l); break;
			case 3: q6_row(nsb, wr, pg, 3, l); break;
			case 2: q6_row(nsb, wr, pg, 2, l); break;
			default: q6_row(nsb, wr, pg, 1, l); break;
			}
			for (int p = 0; p < P; p++)
				for (int h = 0; h < 2; h++) {
					int64_t m = g * 16 + 2 * p + h;
					if (m >= M)
						continue;
					float v = hsum8_chain(l[p] + 8 * h);
					memcpy(out + (size_t)n * os_n + (size_t)m * os_m, &v, 4);
				}
		}
	}
}

/* ---- Q6_K single row (decode) in ggml's 8-lane order (vec_kseq.h): the
 * same int32 lanes as the AVX2 dot (vec_avx2.c), two 32-element groups per
 * zmm (groups 2i and 2i + 1 of a half: ql and the activations contiguous),
 * the 2 high bits of each q moved to bits 4..5 by one variable shift and
 * mask, merged with the low nibble by one vpternlogd, madd + add fused
 * into vpdpwssd; the two 256-bit halves of the accumulator (the same lanes
 * of even and odd groups) added at the end of the superblock. Rows read one
 * after another. ---- */
static inline __attribute__((always_inline)) float q6k_row1(int64_t nsb, const uint8_t *wb, const struct act_q8_k *a)
{
	const __m512i m4 = _mm512_set1_epi8(0xf), m30 = _mm512_set1_epi8(0x30);
	/* q of groups 0 | 1: high bits 0..1 | 2..3 to 4..5; groups 2 | 3: 4..5 | 6..7 */
	const __m512i shl01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
	const __m512i shr23 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
	/* 128-bit chunk c of the pair (n, i) scaled by sc[8n + 4i + c]: word 4i + c
	 * of that half's 8 scales, in every word of the chunk */
	__m512i pick[2];
	for (int i = 0; i < 2; i++) {
		int8_t idx[64];
		for (int c = 0; c < 4; c++)
			for (int e = 0; e < 16; e++)
				idx[16 * c + e] = (int8_t)(2 * (4 * i + c) + (e & 1));
		pick[i] = _mm512_loadu_si512((const void *)idx);
	}
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < nsb; b++, wb += 210, a++) {
		prefetch_ahead(wb, 210);
		__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wb + 192)));
		__m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a->bsums));
		__m512i s = _mm512_setzero_si512();
#pragma GCC unroll 2
		for (int n = 0; n < 2; n++) {
			__m512i L = _mm512_loadu_si512((const void *)(wb + 64 * n));
			__m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * n)));
			__m512i q01 = _mm512_ternarylogic_epi32(L, _mm512_and_si512(_mm512_sllv_epi16(H, shl01), m30), m4, 0xE4);
			__m512i q23 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(L, 4),
							       _mm512_and_si512(_mm512_srlv_epi16(H, shr23), m30), m4, 0xE4);
			__m512i hs = _mm512_broadcast_i32x4(n ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
			const int8_t *q8 = a->q + 128 * n;
			s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q01, _mm512_loadu_si512((const void *)q8)),
						_mm512_shuffle_epi8(hs, pick[0]));
			s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q23, _mm512_loadu_si512((const void *)(q8 + 64))),
						_mm512_shuffle_epi8(hs, pick[1]));
		}
		__m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1)),
						_mm256_slli_epi32(off, 5));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb + 208) * a->d), _mm256_cvtepi32_ps(sumi), acc);
	}
	return hsum256_ps(acc);
}

static void a5_dot_q6_k(int64_t k, const void *w, const void *act, float *out)
{
	*out = q6k_row1(k / QKK, w, act);
}

static void a5_dotr4_q6_k(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	for (int r = 0; r < 4; r++)
		out[r] = q6k_row1(k / QKK, (const uint8_t *)w + (size_t)r * ws, act);
}

/* ---- activation quantizers: the scalar ones' arithmetic (the same float
 * products, round-to-nearest-even), 16 lanes at a time ---- */

static float round_fp16(float x)
{
	return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

static void a5_quant_q8_0(int64_t n, const float *x, struct act_q8_0 *y)
{
	const __m512 sgn = _mm512_set1_ps(-0.0f);
	for (int64_t b = 0; b < n / QK8; b++, x += QK8, y++) {
		__m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
		float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sgn, v0), _mm512_andnot_ps(sgn, v1)));
		float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
		__m512 vid = _mm512_set1_ps(id);
		__m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
		__m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
		_mm_storeu_si128((__m128i *)y->q, _mm512_cvtepi32_epi8(q0));
		_mm_storeu_si128((__m128i *)(y->q + 16), _mm512_cvtepi32_epi8(q1));
		int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
		y->d = round_fp16(d);
		y->s = round_fp16(d * (float)sum);
	}
}

static void a5_quant_q8_k(int64_t n, const float *x, struct act_q8_k *y)
{
	const __m512 sgn = _mm512_set1_ps(-0.0f);
	for (int64_t b = 0; b < n / QKK; b++, x += QKK, y++) {
		__m512 m = _mm512_setzero_ps();
		for (int j = 0; j < QKK; j += 16)
			m = _mm512_max_ps(m, _mm512_andnot_ps(sgn, _mm512_loadu_ps(x + j)));
		float amax = _mm512_reduce_max_ps(m);
		if (amax == 0.0f) {
			memset(y, 0, sizeof(*y));
			continue;
		}
		/* the first element of largest magnitude keeps its sign */
		float max = 0.0f;
		__m512 va = _mm512_set1_ps(amax);
		for (int j = 0; j < QKK; j += 16) {
			__mmask16 hit = _mm512_cmp_ps_mask(_mm512_andnot_ps(sgn, _mm512_loadu_ps(x + j)), va, _CMP_EQ_OQ);
			if (hit) {
				max = x[j + __builtin_ctz(hit)];
				break;
			}
		}
		float iscale = -127.0f / max;
		__m512 vs = _mm512_set1_ps(iscale);
		const __m512i lim = _mm512_set1_epi32(127);
		for (int j = 0; j < QKK; j += 16) {
			__m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + j))), lim);
			__m128i q8 = _mm512_cvtepi32_epi8(q);
			_mm_storeu_si128((__m128i *)(y->q + j), q8);
			y->bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(q);
		}
		y->d = 1.0f / iscale;
	}
}

void cpu_kernels_avx512(struct cpu_kernels *k)
{
	k->quant_q8_0 = a5_quant_q8_0;
	k->quant_q8_k = a5_quant_q8_k;
	cpu_kernels_avx2_dots(k);
	k->dot_f32 = a5_dot_f32;
	k->dot[ALICE_TYPE_Q8_0] = a5_dot_q8_0;
	k->dotr4[ALICE_TYPE_Q8_0] = a5_dotr4_q8_0;
	k->dotr4_max[ALICE_TYPE_Q8_0] = (int64_t)4 << 20;
	k->gemm[ALICE_TYPE_Q8_0] = a5_gemm_q8_0;
	k->pack_q8_0 = a5_pack_q8_0;
	/* Q4_K/Q6_K: llama.cpp's orders (vec_kseq.h); the old 4-column dot4
	 * kernels had their own lane order, so prefill without a GEMM takes
	 * the single-row dot */
	k->dot[ALICE_TYPE_Q4_K] = x_dot1_q4_k;
	k->dotx[ALICE_TYPE_Q4_K] = x_dotx_q4_k;
	const char *ex = getenv("ALICE_CPU_EXACT");
	kseq_q4k_exact = ex && *ex && strcmp(ex, "0") != 0;
	cpu_kernels_kgemm512(k, kseq_q4k_exact); /* Q4_K prefill without AMX */
	k->dotr4[ALICE_TYPE_Q4_K] = x_dotr4s_q4_k;
	k->dotn[ALICE_TYPE_Q4_K] = x_dotn_q4_k;
	k->dot[ALICE_TYPE_Q6_K] = a5_dot_q6_k; /* ggml's lanes, as the AVX2 one and the GEMM */
	k->dotr4[ALICE_TYPE_Q6_K] = a5_dotr4_q6_k;
	k->gemm[ALICE_TYPE_Q6_K] = a5_gemm_q6_k;
	k->q6_k_pairs = true;
	/* decode: every row kernel reads its rows one after another (README:
	 * rows read side by side stream from DRAM at half the rate here) */
	k->isa = "avx512";
}
#endif
