/* vec_avx2.c — AVX2 + FMA + F16C kernels (this file is compiled with those
 * flags; nothing in it runs unless the CPU has them). Quantized dots are
 * integer: unsigned weights x signed Q8 activations through maddubs, the
 * signed ones through the sign trick, scaled per block in float. */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "vec_x86.h"

static float a2_dot_f32(int64_t n, const float *a, const float *b)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
	float s = hsum256_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

static inline __m256 ld_h8(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static float a2_dot_f16_f32(int64_t n, const uint16_t *a, const float *b)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = s0;
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		s0 = _mm256_fmadd_ps(ld_h8(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(ld_h8(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(ld_h8(a + i), _mm256_loadu_ps(b + i), s0);
	float s = hsum256_ps(_mm256_add_ps(s0, s1));
	for (; i < n; i++)
		s += _cvtsh_ss(a[i]) * b[i];
	return s;
}

static void a2_axpy_f16(int64_t n, float s, const uint16_t *x, float *acc)
{
	__m256 vs = _mm256_set1_ps(s);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vs, ld_h8(x + i), _mm256_loadu_ps(acc + i)));
	for (; i < n; i++)
		acc[i] += s * _cvtsh_ss(x[i]);
}

static void a2_axpy_f32(int64_t n, float s, const float *x, float *acc)
{
	__m256 vs = _mm256_set1_ps(s);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + i), _mm256_loadu_ps(acc + i)));
	for (; i < n; i++)
		acc[i] += s * x[i];
}

static void a2_scale_f32(int64_t n, float s, float *x)
{
	__m256 vs = _mm256_set1_ps(s);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(vs, _mm256_loadu_ps(x + i)));
	for (; i < n; i++)
		x[i] *= s;
}

static void a2_f16_to_f32(int64_t n, const uint16_t *src, float *dst)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, ld_h8(src + i));
	for (; i < n; i++)
		dst[i] = _cvtsh_ss(src[i]);
}

static void a2_f32_to_f16(int64_t n, const float *src, uint16_t *dst)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

/* alice_fp32_to_bf16 on 8 lanes: round to nearest even, NaNs made quiet
 * (it ran a library call per element: half the time of a Qwen3-0.6B
 * prefill matmul of N = 1024 went to rounding its activations) */
static void a2_round_bf16(int64_t n, const float *x, float *y, uint16_t *yb)
{
	const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), hi = _mm256_set1_epi32((int)0xffff0000u),
		      mag = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x400000);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
		__m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(v, bias), _mm256_and_si256(_mm256_srli_epi32(v, 16), one)), hi);
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, mag), inf);
		r = _mm256_blendv_epi8(r, _mm256_and_si256(_mm256_or_si256(v, quiet), hi), nan);
		if (y)
			_mm256_storeu_si256((__m256i *)(y + i), r);
		if (yb) {
			__m256i h = _mm256_srli_epi32(r, 16);
			__m128i p = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
			_mm_storeu_si128((__m128i *)(yb + i), p);
		}
	}
	for (; i < n; i++) {
		uint16_t h = alice_fp32_to_bf16(x[i]);
		if (y)
			y[i] = alice_bf16_to_fp32(h);
		if (yb)
			yb[i] = h;
	}
}

/* ---- weight x activation dots ---- */

static void a2_dot_f16(int64_t k, const void *w, const void *act, float *out)
{
	const uint16_t *a = w, *b = act;
	__m256 s0 = _mm256_setzero_ps(), s1 = s0;
	int64_t i = 0;
	for (; i + 16 <= k; i += 16) {
		s0 = _mm256_fmadd_ps(ld_h8(a + i), ld_h8(b + i), s0);
		s1 = _mm256_fmadd_ps(ld_h8(a + i + 8), ld_h8(b + i + 8), s1);
	}
	for (; i + 8 <= k; i += 8)
		s0 = _mm256_fmadd_ps(ld_h8(a + i), ld_h8(b + i), s0);
	float s = hsum256_ps(_mm256_add_ps(s0, s1));
	for (; i < k; i++)
		s += _cvtsh_ss(a[i]) * _cvtsh_ss(b[i]);
	*out = s;
}

static inline __m256 ld_bf8(const uint16_t *p)
{
	__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
	return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

static void a2_dot_bf16(int64_t k, const void *w, const void *act, float *out)
{
	const uint16_t *a = w, *b = act;
	__m256 s0 = _mm256_setzero_ps(), s1 = s0;
	int64_t i = 0;
	for (; i + 16 <= k; i += 16) {
		s0 = _mm256_fmadd_ps(ld_bf8(a + i), ld_bf8(b + i), s0);
		s1 = _mm256_fmadd_ps(ld_bf8(a + i + 8), ld_bf8(b + i + 8), s1);
	}
	for (; i + 8 <= k; i += 8)
		s0 = _mm256_fmadd_ps(ld_bf8(a + i), ld_bf8(b + i), s0);
	float s = hsum256_ps(_mm256_add_ps(s0, s1));
	for (; i < k; i++)
		s += alice_bf16_to_fp32(a[i]) * alice_bf16_to_fp32(b[i]);
	*out = s;
}

/* signed x signed int8 dot of 32 lanes -> 8 int32 */
static inline __m256i dot_s8(__m256i x, __m256i y)
{
	__m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
	return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}

static void a2_dot_q8_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < k / QK8; b++, wb += 34, a++) {
		prefetch_ahead(wb, 34);
		__m256i qw = _mm256_loadu_si256((const __m256i *)(wb + 2));
		__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
		__m256 d = _mm256_set1_ps(ld_fp16(wb) * a->d);
		acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_s8(qw, qa)), acc);
	}
	*out = hsum256_ps(acc);
}

/* 1 weight row x 4 activation rows (prefill): each output exactly
 * a2_dot_q8_0's chain, the weight block and |w| loaded and formed once
 * (tiny-tolstoy pp64 at ALICE_CPU_ISA=avx2 +5-13 %; a 4-weight-row decode
 * twin lost 2-6 % of tg64 and was dropped). */
static void a2_dot4_q8_0(int64_t k, const void *w, const void *act, size_t stride, float *out)
{
	const uint8_t *wb = w, *ab = act;
	const __m256i one = _mm256_set1_epi16(1);
	__m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
	for (int64_t b = 0; b < k / QK8; b++, wb += 34) {
		__m256i qw = _mm256_loadu_si256((const __m256i *)(wb + 2));
		__m256i ax = _mm256_sign_epi8(qw, qw);
		float dw = ld_fp16(wb);
		for (int r = 0; r < 4; r++) {
			const struct act_q8_0 *a = (const struct act_q8_0 *)(ab + (size_t)r * stride) + b;
			__m256i sy = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a->q), qw);
			__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), one);
			acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a->d), _mm256_cvtepi32_ps(p), acc[r]);
		}
	}
	for (int r = 0; r < 4; r++)
		out[r] = hsum256_ps(acc[r]);
}

/* ---- activation rounding, as vec_scalar.c's (vec_avx512.c's a5_quant_*
 * on ymm): it ran scalar here, 0.4 ms for a 64 x 2048 prefill operand ---- */
static inline int32_t hsum_epi32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
	return _mm_cvtsi128_si32(s);
}

static inline float hmax256_ps(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

/* 32 int32 (4 vectors, in order) -> 32 int8 */
static inline __m256i pack32_epi8(__m256i a, __m256i b, __m256i c, __m256i d)
{
	__m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
	return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static float round_fp16(float x)
{
	return _cvtsh_ss(_cvtss_sh(x, 0));
}

static void a2_quant_q8_0(int64_t n, const float *x, struct act_q8_0 *y)
{
	const __m256 sgn = _mm256_set1_ps(-0.0f);
	for (int64_t b = 0; b < n / QK8; b++, x += QK8, y++) {
		__m256 v[4];
		__m256 m = _mm256_setzero_ps();
		for (int i = 0; i < 4; i++) {
			v[i] = _mm256_loadu_ps(x + 8 * i);
			m = _mm256_max_ps(m, _mm256_andnot_ps(sgn, v[i]));
		}
		float amax = hmax256_ps(m);
		float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
		__m256 vid = _mm256_set1_ps(id);
		__m256i q[4];
		for (int i = 0; i < 4; i++)
			q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid));
		_mm256_storeu_si256((__m256i *)y->q, pack32_epi8(q[0], q[1], q[2], q[3]));
		int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
		y->d = round_fp16(d);
		y->s = round_fp16(d * (float)sum);
	}
}

static void a2_quant_q8_k(int64_t n, const float *x, struct act_q8_k *y)
{
	const __m256 sgn = _mm256_set1_ps(-0.0f);
	for (int64_t b = 0; b < n / QKK; b++, x += QKK, y++) {
		__m256 m = _mm256_setzero_ps();
		for (int j = 0; j < QKK; j += 8)
			m = _mm256_max_ps(m, _mm256_andnot_ps(sgn, _mm256_loadu_ps(x + j)));
		float amax = hmax256_ps(m);
		if (amax == 0.0f) {
			memset(y, 0, sizeof(*y));
			continue;
		}
		/* the first element of largest magnitude keeps its sign */
		float max = 0.0f;
		__m256 va = _mm256_set1_ps(amax);
		for (int j = 0; j < QKK; j += 8) {
			int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sgn, _mm256_loadu_ps(x + j)), va, _CMP_EQ_OQ));
			if (hit) {
				max = x[j + __builtin_ctz((unsigned)hit)];
				break;
			}
		}
		float iscale = -127.0f / max;
		__m256 vs = _mm256_set1_ps(iscale);
		const __m256i lim = _mm256_set1_epi32(127);
		for (int j = 0; j < QKK; j += 32) {
			__m256i q[4];
			for (int i = 0; i < 4; i++)
				q[i] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * i))), lim);
			_mm256_storeu_si256((__m256i *)(y->q + j), pack32_epi8(q[0], q[1], q[2], q[3]));
			y->bsums[j / 16] = (int16_t)hsum_epi32(_mm256_add_epi32(q[0], q[1]));
			y->bsums[j / 16 + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(q[2], q[3]));
		}
		y->d = 1.0f / iscale;
	}
}

/* Q8_0 prefill (gemm_rows: the activation rows read in place): 2 weight
 * rows x MR (1..4) activation rows in registers, each output exactly
 * a2_dot_q8_0's chain. AVX2: |w| and d_w formed once per block for MR
 * rows, each activation block loaded once for both weight rows; the lane
 * sums by vpsignb, vpmaddubsw, vpmaddwd. AVX-VNNI: w + 128 as u8 against
 * the signed activations by one vpdpbusd, started from -128 * sum(a) of
 * each lane's 4 elements: the same exact lane sums. */
static inline __attribute__((always_inline)) void q80_tile2(const int MR, const bool vnni, int64_t nb, const uint8_t *w,
							    size_t ws, const float *dwr, const struct act_q8_0 *a,
							    int64_t nbs, uint8_t *out, size_t os_n, size_t os_m)
{
	const __m256i one = _mm256_set1_epi16(1), x80 = _mm256_set1_epi8((char)0x80);
	const uint8_t *wr[2] = {w, w + ws};
	__m256 acc[2][4];
	_Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)
		_Pragma("GCC unroll 4") for (int m = 0; m < MR; m++) acc[r][m] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		__m256i aw[2];
		__m256 dw[2];
		_Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
			const uint8_t *blk = wr[r] + (size_t)b * 34;
			__m256i q = _mm256_loadu_si256((const __m256i *)(blk + 2));
			aw[r] = vnni ? _mm256_xor_si256(q, x80) : _mm256_sign_epi8(q, q);
			dw[r] = _mm256_broadcast_ss(dwr + (size_t)r * (size_t)nb + b);
		}
		_Pragma("GCC unroll 4") for (int m = 0; m < MR; m++) {
			const struct act_q8_0 *ab = a + m * nbs + b;
			__m256i qa = _mm256_loadu_si256((const __m256i *)ab->q);
			__m256 da = _mm256_broadcast_ss(&ab->d);
			__asm__("" : "+x"(da)); /* one vmulps per pair, not vmulss + vbroadcastss */
			__m256i corr = _mm256_setzero_si256();
			if (vnni)
				corr = _mm256_sub_epi32(corr, dpbusd_vex(corr, x80, qa));
			_Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
				__m256i p;
				if (vnni) {
					p = dpbusd_vex(corr, aw[r], qa);
				} else {
					__m256i sy = _mm256_sign_epi8(qa, _mm256_loadu_si256((const __m256i *)(wr[r] + (size_t)b * 34 + 2)));
					p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw[r], sy), one);
				}
				acc[r][m] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], da), _mm256_cvtepi32_ps(p), acc[r][m]);
			}
		}
	}
	/* unrolled: acc stays in registers (a loop here kept it in memory) */
	_Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)
		_Pragma("GCC unroll 4") for (int m = 0; m < MR; m++) {
			float v = hsum256_ps(acc[r][m]);
			memcpy(out + (size_t)r * os_n + (size_t)m * os_m, &v, 4);
		}
}

static inline __attribute__((always_inline)) void q80_gemm(const bool vnni, int64_t k, const void *w, size_t ws,
							   const void *act, int64_t M, uint8_t *out, size_t os_n,
							   size_t os_m, void *scratch)
{
	int64_t nb = k / QK8;
	const struct act_q8_0 *a = act;
	float *dw = scratch; /* the 16 rows' block scales as floats, once for all tiles */
	for (int r = 0; r < 16; r++)
		for (int64_t b = 0; b < nb; b++)
			dw[r * nb + b] = ld_fp16((const uint8_t *)w + (size_t)r * ws + (size_t)b * 34);
	for (int r = 0; r < 16; r += 2) {
		const uint8_t *wr = (const uint8_t *)w + (size_t)r * ws;
		const float *dr = dw + r * nb;
		uint8_t *o = out + (size_t)r * os_n;
		int64_t m = 0;
		for (; m + 4 <= M; m += 4)
			q80_tile2(4, vnni, nb, wr, ws, dr, a + m * nb, nb, o + (size_t)m * os_m, os_n, os_m);
		switch (M - m) {
		case 3: q80_tile2(3, vnni, nb, wr, ws, dr, a + m * nb, nb, o + (size_t)m * os_m, os_n, os_m); break;
		case 2: q80_tile2(2, vnni, nb, wr, ws, dr, a + m * nb, nb, o + (size_t)m * os_m, os_n, os_m); break;
		case 1: q80_tile2(1, vnni, nb, wr, ws, dr, a + m * nb, nb, o + (size_t)m * os_m, os_n, os_m); break;
		default: break;
		}
	}
}

static void a2_gemm_q8_0(int64_t k, const void *w, size_t ws, const void *act, int64_t M, uint8_t *out, size_t os_n,
			 size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)grp;
	q80_gemm(false, k, w, ws, act, M, out, os_n, os_m, scratch);
}

static void vn_gemm_q8_0(int64_t k, const void *w, size_t ws, const void *act, int64_t M, uint8_t *out, size_t os_n,
			 size_t os_m, void *scratch, const uint8_t *grp)
{
	(void)grp;
	q80_gemm(true, k, w, ws, act, M, out, os_n, os_m, scratch);
}

static void a2_dot_q4_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	__m256 acc = _mm256_setzero_ps();
	const __m256i m4 = _mm256_set1_epi8(0xf), off = _mm256_set1_epi8(8);
	for (int64_t b = 0; b < k / QK8; b++, wb += 18, a++) {
		prefetch_ahead(wb, 18);
		__m128i t = _mm_loadu_si128((const __m128i *)(wb + 2));
		__m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), m4);
		q = _mm256_sub_epi8(q, off);
		__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
		__m256 d = _mm256_set1_ps(ld_fp16(wb) * a->d);
		acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_s8(q, qa)), acc);
	}
	*out = hsum256_ps(acc);
}

/* u8 (0..63) x s8 dot with one int16 scale per 16-lane half -> 8 int32 */
static inline __m256i dot_u8_sc(__m256i u, __m256i s, __m256i sc16)
{
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc16);
}

static void a2_dot_q4_k(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	const __m256i m4 = _mm256_set1_epi8(0xf);
	__m256 acc = _mm256_setzero_ps();
	__m128 accm = _mm_setzero_ps();
	for (int64_t b = 0; b < k / QKK; b++, wb += 144, a++) {
		prefetch_ahead(wb, 144);
		uint32_t u[4];
		k4_scales_mins(wb + 4, u);
		/* 16 int16: scales 0..7, mins 8..15 */
		__m256i ms = _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
		__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a->bsums),
					    _mm_loadu_si128((const __m128i *)(a->bsums + 8)));
		__m128i pm = _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), bs);
		accm = _mm_fmadd_ps(_mm_set1_ps(ld_fp16(wb + 2) * a->d), _mm_cvtepi32_ps(pm), accm);
		__m128i sc128 = _mm256_castsi256_si128(ms);
		__m256i sc = _mm256_set_m128i(sc128, sc128);
		const uint8_t *qs = wb + 16;
		__m256i sumi = _mm256_setzero_si256();
		for (int j = 0; j < 4; j++) {
			__m256i q4 = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
			__m256i lo = _mm256_and_si256(q4, m4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
			__m256i alo = _mm256_loadu_si256((const __m256i *)(a->q + 64 * j));
			__m256i ahi = _mm256_loadu_si256((const __m256i *)(a->q + 64 * j + 32));
			__m256i sl = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(((4 * j + 1) << 8) | (4 * j))));
			__m256i sh = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(((4 * j + 3) << 8) | (4 * j + 2))));
			sumi = _mm256_add_epi32(sumi, dot_u8_sc(lo, alo, sl));
			sumi = _mm256_add_epi32(sumi, dot_u8_sc(hi, ahi, sh));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * a->d), _mm256_cvtepi32_ps(sumi), acc);
	}
	__m128 m = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
	m = _mm_add_ss(m, _mm_movehdup_ps(m));
	*out = hsum256_ps(acc) - _mm_cvtss_f32(m);
}

/* Q6_K: scales of one 128-half as int16 lanes, 8 lanes (16 elements) each */
static void a2_dot_q6_k(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	const __m256i m4 = _mm256_set1_epi8(0xf), m2 = _mm256_set1_epi8(3);
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < k / QKK; b++, wb += 210, a++) {
		prefetch_ahead(wb, 210);
		__m128i sc8 = _mm_loadu_si128((const __m128i *)(wb + 192));
		__m256i sc16 = _mm256_cvtepi8_epi16(sc8);
		/* the -32 offset of every q: 32 * sum(scale_i * bsum_i) */
		__m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a->bsums));
		__m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
		for (int n = 0; n < 2; n++) {
			const uint8_t *ql = wb + 64 * n, *qh = wb + 128 + 32 * n;
			const int8_t *q8 = a->q + 128 * n;
			__m256i h = _mm256_loadu_si256((const __m256i *)qh);
			__m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
			__m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
			__m256i q[4];
			q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
					       _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
			q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
			q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
			q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
			/* this half's 8 scales as int16, in both 128-bit lanes */
			__m128i h16 = n ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16);
			__m256i hs = _mm256_set_m128i(h16, h16);
			for (int g = 0; g < 4; g++) {
				/* lanes 0..7: scale 2g, lanes 8..15: scale 2g + 1 */
				__m256i scv = _mm256_shuffle_epi8(
					hs, _mm256_set_m128i(_mm_set1_epi16((short)(((4 * g + 3) << 8) | (4 * g + 2))),
							     _mm_set1_epi16((short)(((4 * g + 1) << 8) | (4 * g)))));
				__m256i qa = _mm256_loadu_si256((const __m256i *)(q8 + 32 * g));
				sumi = _mm256_add_epi32(sumi, dot_u8_sc(q[g], qa, scv));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb + 208) * a->d), _mm256_cvtepi32_ps(sumi), acc);
	}
	*out = hsum256_ps(acc);
}

/* 32 bits -> 32 bytes, 0xff where the bit is set (bit e -> byte e) */
static inline __m256i bits_to_bytes(uint32_t x)
{
	const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
					      2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bm = _mm256_set1_epi64x(0x8040201008040201ll);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
	return _mm256_cmpeq_epi8(_mm256_and_si256(v, bm), bm);
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles then high nibbles */
static inline __m256i nibbles(const uint8_t *p)
{
	__m128i t = _mm_loadu_si128((const __m128i *)p);
	return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0xf));
}

static inline int hsum256_i32(__m256i v)
{
	__m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
	t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
	return _mm_cvtsi128_si32(t);
}

static void a2_dot_q4_1(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	__m256 acc = _mm256_setzero_ps();
	float accm = 0.0f;
	for (int64_t b = 0; b < k / QK8; b++, wb += 20, a++) {
		prefetch_ahead(wb, 20);
		__m256i q = nibbles(wb + 4);
		__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
		__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, qa), _mm256_set1_epi16(1));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * a->d), _mm256_cvtepi32_ps(p), acc);
		accm += ld_fp16(wb + 2) * a->s;
	}
	*out = hsum256_ps(acc) + accm;
}

static void a2_dot_q5_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	__m256 acc = _mm256_setzero_ps();
	const __m256i h5 = _mm256_set1_epi8(0x10), off = _mm256_set1_epi8(16);
	for (int64_t b = 0; b < k / QK8; b++, wb += 22, a++) {
		prefetch_ahead(wb, 22);
		uint32_t qh;
		memcpy(&qh, wb + 2, 4);
		__m256i q = _mm256_or_si256(nibbles(wb + 6), _mm256_and_si256(bits_to_bytes(qh), h5));
		q = _mm256_sub_epi8(q, off);
		__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * a->d), _mm256_cvtepi32_ps(dot_s8(q, qa)), acc);
	}
	*out = hsum256_ps(acc);
}

static void a2_dot_q5_1(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	__m256 acc = _mm256_setzero_ps();
	float accm = 0.0f;
	const __m256i h5 = _mm256_set1_epi8(0x10);
	for (int64_t b = 0; b < k / QK8; b++, wb += 24, a++) {
		prefetch_ahead(wb, 24);
		uint32_t qh;
		memcpy(&qh, wb + 4, 4);
		__m256i q = _mm256_or_si256(nibbles(wb + 8), _mm256_and_si256(bits_to_bytes(qh), h5));
		__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
		__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, qa), _mm256_set1_epi16(1));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * a->d), _mm256_cvtepi32_ps(p), acc);
		accm += ld_fp16(wb + 2) * a->s;
	}
	*out = hsum256_ps(acc) + accm;
}

static const int8_t kv_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t kv_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static void a2_dot_iq4_nl(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kv_iq4nl));
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < k / QK8; b++, wb += 18, a++) {
		prefetch_ahead(wb, 18);
		__m256i q = _mm256_shuffle_epi8(tab, nibbles(wb + 2));
		__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * a->d), _mm256_cvtepi32_ps(dot_s8(q, qa)), acc);
	}
	*out = hsum256_ps(acc);
}

static inline float e8m0_half(uint8_t e)
{
	uint32_t u = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void a2_dot_mxfp4(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kv_mxfp4));
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < k / QK8; b++, wb += 17, a++) {
		prefetch_ahead(wb, 17);
		__m256i q = _mm256_shuffle_epi8(tab, nibbles(wb + 1));
		__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
		acc = _mm256_fmadd_ps(_mm256_set1_ps(e8m0_half(wb[0]) * a->d), _mm256_cvtepi32_ps(dot_s8(q, qa)), acc);
	}
	*out = hsum256_ps(acc);
}

/* Q1_0: 128 signs of +-d; per 32-element activation block sum +-a. */
static void a2_dot_q1_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	const __m256i one = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	float s = 0.0f;
	for (int64_t b = 0; b < k / 128; b++, wb += 18) {
		float d = ld_fp16(wb);
		__m256 acc = _mm256_setzero_ps();
		for (int j = 0; j < 4; j++, a++) {
			uint32_t bits;
			memcpy(&bits, wb + 2 + 4 * j, 4);
			__m256i pm = _mm256_or_si256(bits_to_bytes(~bits), one); /* set: +1, clear: -1 */
			__m256i sa = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a->q), pm);
			__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(one, sa), ones16);
			acc = _mm256_fmadd_ps(_mm256_set1_ps(a->d), _mm256_cvtepi32_ps(p), acc);
		}
		s += d * hsum256_ps(acc);
	}
	*out = s;
}

static void a2_dot_iq4_xs(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kv_iq4nl));
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < k / QKK; b++, wb += 136, a++) {
		prefetch_ahead(wb, 136);
		uint16_t sh;
		memcpy(&sh, wb + 2, 2);
		const uint8_t *sl = wb + 4, *qs = wb + 8;
		__m256i sumi = _mm256_setzero_si256();
		for (int ib = 0; ib < 8; ib++) {
			int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4);
			__m256i q = _mm256_shuffle_epi8(tab, nibbles(qs + 16 * ib));
			__m256i qa = _mm256_loadu_si256((const __m256i *)(a->q + 32 * ib));
			__m256i ax = _mm256_sign_epi8(q, q), sy = _mm256_sign_epi8(qa, q);
			__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16((short)(ls - 32)));
			sumi = _mm256_add_epi32(sumi, p);
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * a->d), _mm256_cvtepi32_ps(sumi), acc);
	}
	*out = hsum256_ps(acc);
}

static void a2_dot_q5_k(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	const __m256i m4 = _mm256_set1_epi8(0xf), one = _mm256_set1_epi8(1);
	__m256 acc = _mm256_setzero_ps();
	__m128 accm = _mm_setzero_ps();
	for (int64_t b = 0; b < k / QKK; b++, wb += 176, a++) {
		prefetch_ahead(wb, 176);
		uint32_t u[4];
		k4_scales_mins(wb + 4, u);
		__m256i ms = _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
		__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a->bsums),
					    _mm_loadu_si128((const __m128i *)(a->bsums + 8)));
		__m128i pm = _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), bs);
		accm = _mm_fmadd_ps(_mm_set1_ps(ld_fp16(wb + 2) * a->d), _mm_cvtepi32_ps(pm), accm);
		__m128i sc128 = _mm256_castsi256_si128(ms);
		__m256i sc = _mm256_set_m128i(sc128, sc128);
		__m256i hb = _mm256_loadu_si256((const __m256i *)(wb + 16));
		const uint8_t *qs = wb + 48;
		__m256i sumi = _mm256_setzero_si256();
		for (int j = 0; j < 4; j++) {
			__m256i q4 = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
			__m256i lo = _mm256_or_si256(_mm256_and_si256(q4, m4),
						     _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
			hb = _mm256_srli_epi16(hb, 1);
			__m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4, 4), m4),
						     _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
			hb = _mm256_srli_epi16(hb, 1);
			__m256i alo = _mm256_loadu_si256((const __m256i *)(a->q + 64 * j));
			__m256i ahi = _mm256_loadu_si256((const __m256i *)(a->q + 64 * j + 32));
			__m256i sl = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(((4 * j + 1) << 8) | (4 * j))));
			__m256i shs = _mm256_shuffle_epi8(sc, _mm256_set1_epi16((short)(((4 * j + 3) << 8) | (4 * j + 2))));
			sumi = _mm256_add_epi32(sumi, dot_u8_sc(lo, alo, sl));
			sumi = _mm256_add_epi32(sumi, dot_u8_sc(hi, ahi, shs));
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb) * a->d), _mm256_cvtepi32_ps(sumi), acc);
	}
	__m128 m = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
	m = _mm_add_ss(m, _mm_movehdup_ps(m));
	*out = hsum256_ps(acc) - _mm_cvtss_f32(m);
}

/* int16 lanes: 8 x scale s0, then 8 x scale s0+1 (scales given as int8[16]) */
static inline __m256i sc16_pair(__m128i sc8, int s0)
{
	__m256i v = _mm256_shuffle_epi8(_mm256_set_m128i(sc8, sc8),
					_mm256_set_m128i(_mm_set1_epi16((short)(0x8000 | (s0 + 1))),
							 _mm_set1_epi16((short)(0x8000 | s0))));
	return _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8);
}

/* Q2_K and Q3_K: 2-bit planes (+ Q3_K's high bit), 16 scales of 16 elements */
static void a2_dot_q2_k(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	const __m256i m2 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(0xf);
	__m256 acc = _mm256_setzero_ps();
	float accm = 0.0f;
	for (int64_t b = 0; b < k / QKK; b++, wb += 84, a++) {
		prefetch_ahead(wb, 84);
		__m128i raw = _mm_loadu_si128((const __m128i *)wb);
		__m128i sc8 = _mm_and_si128(raw, _mm256_castsi256_si128(m4));
		__m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm256_castsi256_si128(m4)));
		int summ = hsum256_i32(_mm256_madd_epi16(mins16, _mm256_loadu_si256((const __m256i *)a->bsums)));
		accm += ld_fp16(wb + 82) * a->d * (float)summ;
		__m256i sumi = _mm256_setzero_si256();
		for (int n = 0; n < 2; n++) {
			__m256i qs = _mm256_loadu_si256((const __m256i *)(wb + 16 + 32 * n));
			for (int g = 0; g < 4; g++) {
				__m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * g), m2);
				__m256i qa = _mm256_loadu_si256((const __m256i *)(a->q + 128 * n + 32 * g));
				sumi = _mm256_add_epi32(sumi, dot_u8_sc(q, qa, sc16_pair(sc8, 8 * n + 2 * g)));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb + 80) * a->d), _mm256_cvtepi32_ps(sumi), acc);
	}
	*out = hsum256_ps(acc) - accm;
}

static void a2_dot_q3_k(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < k / QKK; b++, wb += 110, a++) {
		prefetch_ahead(wb, 110);
		const uint8_t *s12 = wb + 96;
		int8_t scv[16];
		for (int j = 0; j < 16; j++) {
			int lo = j < 8 ? s12[j] & 0xf : s12[j - 8] >> 4;
			int hi = (s12[8 + j % 4] >> (2 * (j / 4))) & 3;
			scv[j] = (int8_t)((lo | (hi << 4)) - 32);
		}
		__m128i sc8 = _mm_loadu_si128((const __m128i *)scv);
		/* q = u - 4 with u = q2 | hbit << 2 in 0..7: subtract 4 * sum(scale * bsum) */
		__m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), _mm256_loadu_si256((const __m256i *)a->bsums));
		__m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 2));
		__m256i hm = _mm256_loadu_si256((const __m256i *)wb);
		for (int n = 0; n < 2; n++) {
			__m256i qs = _mm256_loadu_si256((const __m256i *)(wb + 32 + 32 * n));
			for (int g = 0; g < 4; g++) {
				__m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * g), m2);
				__m256i h = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * n + g), one);
				q = _mm256_or_si256(q, _mm256_slli_epi16(h, 2));
				__m256i qa = _mm256_loadu_si256((const __m256i *)(a->q + 128 * n + 32 * g));
				sumi = _mm256_add_epi32(sumi, dot_u8_sc(q, qa, sc16_pair(sc8, 8 * n + 2 * g)));
			}
		}
		acc = _mm256_fmadd_ps(_mm256_set1_ps(ld_fp16(wb + 108) * a->d), _mm256_cvtepi32_ps(sumi), acc);
	}
	*out = hsum256_ps(acc);
}

void cpu_kernels_avx2_dots(struct cpu_kernels *k)
{
	k->dot_f32 = a2_dot_f32;
	k->dot_f16_f32 = a2_dot_f16_f32;
	k->axpy_f16 = a2_axpy_f16;
	k->axpy_f32 = a2_axpy_f32;
	k->scale_f32 = a2_scale_f32;
	k->f16_to_f32 = a2_f16_to_f32;
	k->f32_to_f16 = a2_f32_to_f16;
	k->round_bf16 = a2_round_bf16;
	k->dot[ALICE_TYPE_F16] = a2_dot_f16;
	k->dot[ALICE_TYPE_BF16] = a2_dot_bf16;
	k->dot[ALICE_TYPE_Q8_0] = a2_dot_q8_0;
	k->dot4[ALICE_TYPE_Q8_0] = a2_dot4_q8_0;
	k->dot[ALICE_TYPE_Q4_0] = a2_dot_q4_0;
	k->dot[ALICE_TYPE_Q4_K] = a2_dot_q4_k;
	k->dot[ALICE_TYPE_Q6_K] = a2_dot_q6_k;
	k->dot[ALICE_TYPE_Q4_1] = a2_dot_q4_1;
	k->dot[ALICE_TYPE_Q5_0] = a2_dot_q5_0;
	k->dot[ALICE_TYPE_Q5_1] = a2_dot_q5_1;
	k->dot[ALICE_TYPE_IQ4_NL] = a2_dot_iq4_nl;
	k->dot[ALICE_TYPE_IQ4_XS] = a2_dot_iq4_xs;
	k->dot[ALICE_TYPE_MXFP4] = a2_dot_mxfp4;
	k->dot[ALICE_TYPE_Q1_0] = a2_dot_q1_0;
	k->dot[ALICE_TYPE_Q5_K] = a2_dot_q5_k;
	k->dot[ALICE_TYPE_Q2_K] = a2_dot_q2_k;
	k->dot[ALICE_TYPE_Q3_K] = a2_dot_q3_k;
}

void cpu_kernels_avx2(struct cpu_kernels *k, bool vnni)
{
	cpu_kernels_avx2_dots(k);
	k->quant_q8_0 = a2_quant_q8_0;
	k->quant_q8_k = a2_quant_q8_k;
	/* ggml's chain, as the dot: in both modes */
	k->gemm[ALICE_TYPE_Q8_0] = vnni ? vn_gemm_q8_0 : a2_gemm_q8_0;
	k->gemm_rows[ALICE_TYPE_Q8_0] = true;
	const char *ex = getenv("ALICE_CPU_EXACT");
	cpu_kernels_kgemm2(k, ex && *ex && strcmp(ex, "0") != 0, vnni); /* Q4_K prefill GEMM */
	k->isa = vnni ? "avx2+vnni" : "avx2";
}

#endif
