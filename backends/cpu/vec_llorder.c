/* vec_llorder.c — quantized dots with llama.cpp's exact float arithmetic
 * (its x86 AVX-512 build, the one the parity references were made with) for
 * the types whose order only llama.cpp's own kernels define: Q2_K, Q3_K,
 * Q5_K, IQ4_XS, Q4_0 and (ALICE_CPU_EXACT, AVX2 tables) Q4_K. Integer block sums are exact whatever the method;
 * what must match is which integers are converted to float and in which
 * order they are accumulated:
 *  - Q3_K, Q5_K, IQ4_XS (fewer than 8 rows of a sequence), Q4_0 (N % 8 != 0):
 *    ggml's AVX2 vec_dot: 8 float lanes, lane l holding the products of
 *    elements 4l..4l+3 of each 32 (times their scale), one fma per
 *    super-block (Q4_0: per block), horizontal sum (hi + lo, then 0+2, 1+3);
 *  - Q2_K (and Q4_0 with N % 8 == 0) are repacked by llama.cpp: one scalar
 *    chain per output; Q2_K's mat-vec (a sequence's single row and the last
 *    count % 4 rows) adds once per super-block, its gemm (rows in groups of
 *    4) once per 128-element half, mins in a second chain subtracted last;
 *  - IQ4_XS with >= 8 rows of a sequence (N % 8 == 0): its "IQ panel" gemm,
 *    one scalar chain, one fma per super-block.
 * The row's place (rows of its sequence in the op, index among them) comes
 * from MUL_MAT src2 (backend.h). AVX2 kernels (target clones) with a
 * portable fallback of the same arithmetic; installed per type (table at the
 * end) once within ~15% of the speed of the kernels they replace, and all
 * of them under ALICE_CPU_EXACT. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

static inline float h2f(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return alice_fp16_to_fp32(h);
}

/* the 8-lane horizontal sum of ggml's hsum_float_8 */
static inline float hsum8(const float *a)
{
	float t[4];
	for (int i = 0; i < 4; i++)
		t[i] = a[i + 4] + a[i];
	return (t[0] + t[2]) + (t[1] + t[3]);
}

static const int8_t kv_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static inline bool rep_gemm(int32_t count, int32_t index)
{
	return count >= 4 && index < count - count % 4;
}

/* the repacked kernels' two chains: acc += S dd, accm += M dm (one fma each
 * per super-block, or per part of one in their gemm), the sums restarted */
static inline void chains_add(float *acc, float *accm, int32_t *S, int32_t *M, float dd, float dm)
{
	*acc = fmaf((float)*S, dd, *acc);
	*accm = fmaf((float)*M, dm, *accm);
	*S = *M = 0;
}

/* ---- decoders shared by both versions ---- */

static inline void q3k_scales(const uint8_t *s12, int *sc)
{
	uint32_t aux[3];
	memcpy(aux, s12, 12);
	uint32_t w[4] = {(aux[0] & 0x0f0f0f0f) | (((aux[2] >> 0) & 0x03030303) << 4),
			 (aux[1] & 0x0f0f0f0f) | (((aux[2] >> 2) & 0x03030303) << 4),
			 ((aux[0] >> 4) & 0x0f0f0f0f) | (((aux[2] >> 4) & 0x03030303) << 4),
			 ((aux[1] >> 4) & 0x0f0f0f0f) | (((aux[2] >> 6) & 0x03030303) << 4)};
	for (int i = 0; i < 16; i++)
		sc[i] = (int)((w[i / 4] >> (8 * (i % 4))) & 0xff) - 32;
}

static inline void k4_sm(const uint8_t *q, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

static inline int iq4xs_ls(const uint8_t *b, int ib)
{
	uint16_t sh;
	memcpy(&sh, b + 2, 2);
	return (((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4)) - 32;
}

/* ---- portable ---- */

static void p_q4_0(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw, float *out)
{
	(void)count;
	(void)index;
	const uint8_t *b = w;
	const struct act_q8_0 *a = act;
	float acc = 0.0f, lanes[8] = {0};
	for (int64_t i = 0; i < k / QK8; i++, b += 18, a++) {
		int32_t ln[8] = {0}, t = 0;
		for (int e = 0; e < 32; e++) {
			int v = (e < 16 ? (b[2 + e] & 0xF) : (b[2 + e - 16] >> 4)) - 8;
			ln[e / 4] += v * a->q[e];
		}
		float d = h2f(b) * a->d;
		for (int l = 0; l < 8; l++) {
			t += ln[l];
			lanes[l] = fmaf(d, (float)ln[l], lanes[l]);
		}
		acc = fmaf((float)t, d, acc);
	}
	*out = nw % 8 == 0 ? acc : hsum8(lanes);
}

static void p_q3_k(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw, float *out)
{
	(void)count;
	(void)index;
	(void)nw;
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	float acc[8] = {0};
	for (int64_t sb = 0; sb < k / QKK; sb++, b += 110, a++) {
		int sc[16];
		q3k_scales(b + 96, sc);
		int32_t ln[8] = {0};
		for (int g = 0; g < 8; g++) {
			int j = g / 4, x = g % 4;
			for (int e = 0; e < 32; e++) {
				int q = ((b[32 + 32 * j + e] >> (2 * x)) & 3) - (((b[e] >> (4 * j + x)) & 1) ? 0 : 4);
				ln[e / 4] += sc[2 * g + (e >= 16)] * q * a->q[32 * g + e];
			}
		}
		float d = a->d * h2f(b + 108);
		for (int l = 0; l < 8; l++)
			acc[l] = fmaf(d, (float)ln[l], acc[l]);
	}
	*out = hsum8(acc);
}

static void p_q5_k(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw, float *out)
{
	(void)count;
	(void)index;
	(void)nw;
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	float acc[8] = {0}, summs = 0.0f;
	for (int64_t sb = 0; sb < k / QKK; sb++, b += 176, a++) {
		int32_t ln[8] = {0}, im = 0;
		for (int s = 0; s < 8; s++) {
			int sc, m;
			k4_sm(b + 4, s, &sc, &m);
			im += m * (a->bsums[2 * s] + a->bsums[2 * s + 1]);
			for (int e = 0; e < 32; e++) {
				int q = ((b[48 + 32 * (s / 2) + e] >> (4 * (s & 1))) & 0xF) | (((b[16 + e] >> s) & 1) << 4);
				ln[e / 4] += sc * q * a->q[32 * s + e];
			}
		}
		float d = a->d * h2f(b), dmin = -a->d * h2f(b + 2);
		summs = fmaf(dmin, (float)im, summs);
		for (int l = 0; l < 8; l++)
			acc[l] = fmaf(d, (float)ln[l], acc[l]);
	}
	*out = hsum8(acc) + summs;
}

static void p_iq4_xs(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw, float *out)
{
	(void)index;
	bool panel = count >= 8 && nw % 8 == 0;
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	float acc[8] = {0}, acc1 = 0.0f;
	for (int64_t sb = 0; sb < k / QKK; sb++, b += 136, a++) {
		int32_t ln[8] = {0}, S = 0;
		for (int ib = 0; ib < 8; ib++) {
			int ls = iq4xs_ls(b, ib);
			for (int e = 0; e < 32; e++) {
				uint8_t q = b[8 + 16 * ib + (e & 15)];
				ln[e / 4] += ls * kv_iq4nl[e < 16 ? q & 0xf : q >> 4] * a->q[32 * ib + e];
			}
		}
		float d = h2f(b) * a->d;
		for (int l = 0; l < 8; l++) {
			S += ln[l];
			acc[l] = fmaf(d, (float)ln[l], acc[l]);
		}
		acc1 = fmaf((float)S, d, acc1);
	}
	*out = panel ? acc1 : hsum8(acc);
}

static void p_q2_k(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw, float *out)
{
	(void)nw;
	bool gemm = rep_gemm(count, index);
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	float acc = 0.0f, accm = 0.0f;
	for (int64_t sb = 0; sb < k / QKK; sb++, b += 84, a++) {
		float dd = h2f(b + 80) * a->d, dm = h2f(b + 82) * a->d;
		int32_t S = 0, M = 0;
		for (int h = 0; h < 2; h++) {
			for (int e = 0; e < 128; e++) {
				int j = e / 32, l = e % 32, si = 8 * h + e / 16;
				S += (b[si] & 0xF) * ((b[16 + 32 * h + l] >> (2 * j)) & 3) * a->q[128 * h + e];
			}
			for (int s = 0; s < 8; s++)
				M += (b[8 * h + s] >> 4) * a->bsums[8 * h + s];
			if (gemm)
				chains_add(&acc, &accm, &S, &M, dd, dm);
		}
		if (!gemm)
			chains_add(&acc, &accm, &S, &M, dd, dm);
	}
	*out = acc - accm;
}

/* ---- AVX2 (the same arithmetic; integer lane sums with maddubs/madd) ---- */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LLO_AVX2 __attribute__((target("avx2,fma,f16c")))

/* int32 lane l = sum of the 4 signed-byte products of elements 4l..4l+3 */
LLO_AVX2 static inline __m256i dot4s(__m256i x, __m256i y)
{
	__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
	return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* the same with a per-16-element int16 scale (lanes 0-3: s0, lanes 4-7: s1) */
LLO_AVX2 static inline __m256i dot4s_sc(__m256i x, __m256i y, int s0, int s1)
{
	__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
	return _mm256_madd_epi16(p, _mm256_set_m128i(_mm_set1_epi16((int16_t)s1), _mm_set1_epi16((int16_t)s0)));
}

LLO_AVX2 static inline int32_t hsum_i32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
	return _mm_cvtsi128_si32(s);
}

LLO_AVX2 static inline float hsum8_v(__m256 v)
{
	float t[8];
	_mm256_storeu_ps(t, v);
	return hsum8(t);
}

LLO_AVX2 static inline float h2f_v(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

LLO_AVX2 static inline __m256i nib32(const uint8_t *q16)
{
	__m128i q = _mm_loadu_si128((const __m128i *)q16), m = _mm_set1_epi8(0xF);
	return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

LLO_AVX2 static void v_q4_0(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw,
			    float *out)
{
	(void)count;
	(void)index;
	const uint8_t *b = w;
	const struct act_q8_0 *a = act;
	const __m256i eight = _mm256_set1_epi8(8);
	int64_t nb = k / QK8;
	if (nw % 8 != 0) { /* not repacked by llama.cpp: its 8-lane vec_dot / tinyBLAS order */
		__m256 lanes = _mm256_setzero_ps();
		for (int64_t i = 0; i < nb; i++, b += 18, a++) {
			__m256i ln = dot4s(_mm256_sub_epi8(nib32(b + 2), eight), _mm256_loadu_si256((const __m256i *)a->q));
			lanes = _mm256_fmadd_ps(_mm256_set1_ps(h2f_v(b) * a->d), _mm256_cvtepi32_ps(ln), lanes);
		}
		*out = hsum8_v(lanes);
		return;
	}
	float acc = 0.0f;
	int64_t i = 0;
	for (; i + 8 <= nb; i += 8, b += 144, a += 8) { /* 8 blocks' sums and scales at once, then the chain */
		__m256i l[8];
		for (int j = 0; j < 8; j++)
			l[j] = dot4s(_mm256_sub_epi8(nib32(b + 18 * j + 2), eight), _mm256_loadu_si256((const __m256i *)a[j].q));
		__m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(l[0], l[1]), _mm256_hadd_epi32(l[2], l[3]));
		__m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(l[4], l[5]), _mm256_hadd_epi32(l[6], l[7]));
		__m256i r = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
		uint16_t dh[8];
		for (int j = 0; j < 8; j++)
			memcpy(&dh[j], b + 18 * j, 2);
		__m256 dv = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh)),
					  _mm256_setr_ps(a[0].d, a[1].d, a[2].d, a[3].d, a[4].d, a[5].d, a[6].d, a[7].d));
		float fs[8], fd[8];
		_mm256_storeu_ps(fs, _mm256_cvtepi32_ps(r));
		_mm256_storeu_ps(fd, dv);
		for (int j = 0; j < 8; j++)
			acc = fmaf(fs[j], fd[j], acc);
	}
	for (; i < nb; i++, b += 18, a++) {
		__m256i ln = dot4s(_mm256_sub_epi8(nib32(b + 2), eight), _mm256_loadu_si256((const __m256i *)a->q));
		acc = fmaf((float)hsum_i32(ln), h2f_v(b) * a->d, acc);
	}
	*out = acc;
}

LLO_AVX2 static void v_q3_k(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw,
			    float *out)
{
	(void)count;
	(void)index;
	(void)nw;
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	__m256 acc = _mm256_setzero_ps();
	const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
	for (int64_t sb = 0; sb < k / QKK; sb++, b += 110, a++) {
		int sc[16];
		q3k_scales(b + 96, sc);
		__m256i hm = _mm256_loadu_si256((const __m256i *)b), ln = _mm256_setzero_si256();
		for (int g = 0; g < 8; g++) {
			int j = g / 4, x = g % 4;
			__m256i qs = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * j));
			__m256i lo = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * x)), m3);
			__m256i hb = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * j + x)), one);
			__m256i q = _mm256_sub_epi8(_mm256_add_epi8(lo, _mm256_slli_epi16(hb, 2)), four);
			ln = _mm256_add_epi32(ln, dot4s_sc(q, _mm256_loadu_si256((const __m256i *)(a->q + 32 * g)),
							     sc[2 * g], sc[2 * g + 1]));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(a->d * h2f_v(b + 108)), _mm256_cvtepi32_ps(ln), acc);
	}
	*out = hsum8_v(acc);
}

/* Q4_K/Q5_K 6-bit scales and mins: bytes 0-7 scales, 8-15 mins */
static inline void k4_unpack(const uint8_t *s12, uint32_t *u)
{
	memcpy(u, s12, 12);
	uint32_t m2 = u[2];
	u[3] = ((m2 >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
	uint32_t lo1 = u[1] & 0x3f3f3f3f;
	u[1] = (m2 & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
	u[2] = lo1;
	u[0] &= 0x3f3f3f3f;
}

LLO_AVX2 static void v_q5_k(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw,
			    float *out)
{
	(void)count;
	(void)index;
	(void)nw;
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	__m256 acc = _mm256_setzero_ps();
	float summs = 0.0f;
	const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
	for (int64_t sb = 0; sb < k / QKK; sb++, b += 176, a++) {
		_mm_prefetch((const char *)b + 4 * 176, _MM_HINT_T0);
		_mm_prefetch((const char *)b + 4 * 176 + 64, _MM_HINT_T0);
		_mm_prefetch((const char *)b + 4 * 176 + 128, _MM_HINT_T0);
		uint32_t u[4];
		k4_unpack(b + 4, u);
		const uint8_t *sc = (const uint8_t *)u;
		/* mins . (bsums summed per 32): exact int */
		__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a->bsums),
					    _mm_loadu_si128((const __m128i *)(a->bsums + 8)));
		__m128i pm = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadu_si64(sc + 8)), bs);
		pm = _mm_add_epi32(pm, _mm_unpackhi_epi64(pm, pm));
		pm = _mm_add_epi32(pm, _mm_shuffle_epi32(pm, 1));
		int32_t im = _mm_cvtsi128_si32(pm);
		__m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16)), ln = _mm256_setzero_si256();
		const int8_t *q8 = a->q;
#pragma GCC unroll 4
		for (int p = 0; p < 4; p++) {
			__m256i qs = _mm256_loadu_si256((const __m256i *)(b + 48 + 32 * p));
			__m256i q0 = _mm256_or_si256(_mm256_and_si256(qs, m4), _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
			qh = _mm256_srli_epi16(qh, 1);
			__m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 4), m4),
						     _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
			qh = _mm256_srli_epi16(qh, 1);
			__m256i p0 = _mm256_maddubs_epi16(q0, _mm256_loadu_si256((const __m256i *)(q8 + 64 * p)));
			__m256i p1 = _mm256_maddubs_epi16(q1, _mm256_loadu_si256((const __m256i *)(q8 + 64 * p + 32)));
			p0 = _mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * p]));
			p1 = _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * p + 1]));
			ln = _mm256_add_epi32(ln, _mm256_add_epi32(p0, p1));
		}
		float d = a->d * h2f_v(b), dmin = -a->d * h2f_v(b + 2);
		summs = fmaf(dmin, (float)im, summs);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(ln), acc);
	}
	*out = hsum8_v(acc) + summs;
}

LLO_AVX2 static void v_iq4_xs(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw,
			      float *out)
{
	(void)index;
	bool panel = count >= 8 && nw % 8 == 0;
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	const __m128i tbl = _mm_loadu_si128((const __m128i *)kv_iq4nl), m4 = _mm_set1_epi8(0xF);
	const __m256i ones = _mm256_set1_epi16(1);
	__m256 acc = _mm256_setzero_ps();
	float acc1 = 0.0f;
	for (int64_t sb = 0; sb < k / QKK; sb++, b += 136, a++) {
		__m256i ln = _mm256_setzero_si256();
#pragma GCC unroll 8
		for (int ib = 0; ib < 8; ib++) {
			__m128i q = _mm_loadu_si128((const __m128i *)(b + 8 + 16 * ib));
			__m256i v = _mm256_set_m128i(_mm_shuffle_epi8(tbl, _mm_and_si128(_mm_srli_epi16(q, 4), m4)),
						     _mm_shuffle_epi8(tbl, _mm_and_si128(q, m4)));
			__m256i y = _mm256_loadu_si256((const __m256i *)(a->q + 32 * ib));
			__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(y, v));
			p = _mm256_madd_epi16(p, ones); /* 4-element sums, then the block scale */
			ln = _mm256_add_epi32(ln, _mm256_mullo_epi32(p, _mm256_set1_epi32(iq4xs_ls(b, ib))));
		}
		float d = h2f_v(b) * a->d;
		if (panel)
			acc1 = fmaf((float)hsum_i32(ln), d, acc1);
		else
			acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(ln), acc);
	}
	*out = panel ? acc1 : hsum8_v(acc);
}

LLO_AVX2 static void v_q2_k(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw,
			    float *out)
{
	(void)nw;
	bool gemm = rep_gemm(count, index);
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	const __m256i m3 = _mm256_set1_epi8(3);
	float acc = 0.0f, accm = 0.0f;
	for (int64_t sb = 0; sb < k / QKK; sb++, b += 84, a++) {
		float dd = h2f_v(b + 80) * a->d, dm = h2f_v(b + 82) * a->d;
		int32_t S = 0, M = 0;
		for (int h = 0; h < 2; h++) {
			__m256i qs = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * h)), hv = _mm256_setzero_si256();
			for (int j = 0; j < 4; j++) {
				__m256i q = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * j)), m3);
				__m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(a->q + 128 * h + 32 * j)));
				int s0 = b[8 * h + 2 * j] & 0xF, s1 = b[8 * h + 2 * j + 1] & 0xF;
				hv = _mm256_add_epi32(hv, _mm256_madd_epi16(p, _mm256_set_m128i(_mm_set1_epi16((int16_t)s1),
											       _mm_set1_epi16((int16_t)s0))));
			}
			S += hsum_i32(hv);
			for (int s = 0; s < 8; s++)
				M += (b[8 * h + s] >> 4) * a->bsums[8 * h + s];
			if (gemm)
				chains_add(&acc, &accm, &S, &M, dd, dm);
		}
		if (!gemm)
			chains_add(&acc, &accm, &S, &M, dd, dm);
	}
	*out = acc - accm;
}

/* Q4_K, ALICE_CPU_EXACT only (the default kernels already give a
 * sequence's single row this gemv order). llama.cpp repacks Q4_K weights
 * with N % 8 == 0: its gemv adds one fma per superblock (S_b, and M_b in a
 * second chain subtracted last), its gemm (a sequence's rows in groups of
 * 4) one per pair of sub-blocks. Other N: ggml's AVX2 vec_dot, 8 lanes
 * (elements 4l..4l+3 of each 32) with one fma per superblock, the mins in
 * 4 lanes (sub-blocks 2i, 2i+1), hsum8(acc) + ((m0 + m2) + (m1 + m3)).
 * AVX2 only, as every table that installs it: the repacked orders from
 * vec_kgemm2.c; vec_dot's 8 lanes are the madd lanes below. */
LLO_AVX2 static void v_q4_k(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw,
			    float *out)
{
	if (nw % 8 == 0) {
		(rep_gemm(count, index) ? cpu_q4k_gemm_row_avx2 : cpu_q4k_gemv_avx2)(k, w, act, out);
		return;
	}
	const uint8_t *b = w;
	const struct act_q8_k *a = act;
	const __m256i m4 = _mm256_set1_epi8(0xF);
	__m256 lanes = _mm256_setzero_ps();
	float ml[4] = {0};
	for (int64_t i = 0; i < k / QKK; i++, b += 144, a++) {
		int sc[8], mn[8];
		for (int sub = 0; sub < 8; sub++)
			k4_sm(b + 4, sub, &sc[sub], &mn[sub]);
		__m256i sumi = _mm256_setzero_si256();
		for (int p = 0; p < 4; p++) {
			__m256i q4 = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * p));
			__m256i pl = _mm256_maddubs_epi16(_mm256_and_si256(q4, m4),
							  _mm256_loadu_si256((const __m256i *)(a->q + 64 * p)));
			__m256i ph = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q4, 4), m4),
							  _mm256_loadu_si256((const __m256i *)(a->q + 64 * p + 32)));
			sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(pl, _mm256_set1_epi16((int16_t)sc[2 * p])),
								       _mm256_madd_epi16(ph, _mm256_set1_epi16((int16_t)sc[2 * p + 1]))));
			int32_t mp = mn[2 * p] * (a->bsums[4 * p] + a->bsums[4 * p + 1]) +
				     mn[2 * p + 1] * (a->bsums[4 * p + 2] + a->bsums[4 * p + 3]);
			ml[p] = fmaf(-a->d * h2f_v(b + 2), (float)mp, ml[p]);
		}
		lanes = _mm256_fmadd_ps(_mm256_set1_ps(a->d * h2f_v(b)), _mm256_cvtepi32_ps(sumi), lanes);
	}
	*out = hsum8_v(lanes) + ((ml[0] + ml[2]) + (ml[1] + ml[3]));
}

#endif

/* dot[] entries for the single-row callers (a sequence's only row) */
#define ONE_ROW(name, fn)                                                                    \
	static void name(int64_t k, const void *w, const void *act, float *out)             \
	{                                                                                    \
		fn(k, w, act, 1, 0, 8, out);                                                 \
	}
ONE_ROW(p1_q4_0, p_q4_0)
ONE_ROW(p1_q3_k, p_q3_k)
ONE_ROW(p1_q5_k, p_q5_k)
ONE_ROW(p1_iq4_xs, p_iq4_xs)
ONE_ROW(p1_q2_k, p_q2_k)
#if defined(__x86_64__) && defined(__GNUC__)
ONE_ROW(v1_q4_0, v_q4_0)
ONE_ROW(v1_q3_k, v_q3_k)
ONE_ROW(v1_q4_k, v_q4_k)
ONE_ROW(v1_q5_k, v_q5_k)
ONE_ROW(v1_iq4_xs, v_iq4_xs)
ONE_ROW(v1_q2_k, v_q2_k)
#endif

static void set_type(struct cpu_kernels *k, uint32_t t, vec_dotx_fn x, vec_dot_fn one)
{
	k->dotx[t] = x;
	k->dot[t] = one;
	k->dot4[t] = NULL;
	k->dotr4[t] = NULL;
	k->dotn[t] = NULL;
	k->gemm[t] = NULL;
}

/* on: installed; off: exact but not yet within ~15% of the kernels it would
 * replace (bench_mul_mat), so that type keeps its faster, inexact order */
struct llo_entry {
	uint32_t type;
	vec_dotx_fn x;
	vec_dot_fn one;
	bool on;
};

void cpu_kernels_llorder(struct cpu_kernels *k, bool avx2)
{
	static const struct llo_entry portable[] = {
		{ALICE_TYPE_Q2_K, p_q2_k, p1_q2_k, true},	  {ALICE_TYPE_Q3_K, p_q3_k, p1_q3_k, true},
		{ALICE_TYPE_Q5_K, p_q5_k, p1_q5_k, true},	  {ALICE_TYPE_IQ4_XS, p_iq4_xs, p1_iq4_xs, true},
		{ALICE_TYPE_Q4_0, p_q4_0, p1_q4_0, false},
	};
	const struct llo_entry *t = portable;
	size_t n = sizeof(portable) / sizeof(portable[0]);
#if defined(__x86_64__) && defined(__GNUC__)
	static const struct llo_entry vec[] = {
		{ALICE_TYPE_Q2_K, v_q2_k, v1_q2_k, true},	  {ALICE_TYPE_Q3_K, v_q3_k, v1_q3_k, true},
		{ALICE_TYPE_Q5_K, v_q5_k, v1_q5_k, true},	  {ALICE_TYPE_IQ4_XS, v_iq4_xs, v1_iq4_xs, true},
		{ALICE_TYPE_Q4_0, v_q4_0, v1_q4_0, false},
	};
	if (avx2) {
		t = vec;
		n = sizeof(vec) / sizeof(vec[0]);
	}
#else
	(void)avx2;
#endif
	/* ALICE_CPU_EXACT: every entry, however slow */
	const char *ex = getenv("ALICE_CPU_EXACT");
	const bool exact = ex && *ex && strcmp(ex, "0") != 0;
	for (size_t i = 0; i < n; i++)
		if (t[i].on || exact)
			set_type(k, t[i].type, t[i].x, t[i].one);
	/* Q4_K: under ALICE_CPU_EXACT where the table has no exact kernel of
	 * its own (the AVX-512 and AMX tables do: vec_kseq.h) */
#if defined(__x86_64__) && defined(__GNUC__)
	if (exact && avx2 && !k->dotx[ALICE_TYPE_Q4_K])
		set_type(k, ALICE_TYPE_Q4_K, v_q4_k, v1_q4_k);
#endif
}
