/* vec_avx512.c — AVX-512 (F/BW/VL/DQ + VNNI) kernels: the AVX2 set with the
 * hot quantized dots replaced by VNNI (vpdpbusd) versions. Built with those
 * flags; only called when cpuid reports them. */
#include <string.h>

#include "cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "vec_x86.h"

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

/* Q8_0: two blocks per 512-bit step; per-lane scales (8 lanes per block). */
static void a5_dot_q8_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	int64_t nb = k / QK8, b = 0;
	__m512 acc = _mm512_setzero_ps();
	for (; b + 2 <= nb; b += 2, wb += 68, a += 2) {
		prefetch_ahead(wb, 68);
		__m512i qw = ld2x256(wb + 2, wb + 36);
		__m512i qa = ld2x256(a[0].q, a[1].q);
		__m512i dp = dpbs(_mm512_setzero_si512(), qw, qa);
		__m512 d = _mm512_insertf32x8(_mm512_set1_ps(ld_fp16(wb) * a[0].d),
					      _mm256_set1_ps(ld_fp16(wb + 34) * a[1].d), 1);
		acc = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dp), acc);
	}
	float s = _mm512_reduce_add_ps(acc);
	for (; b < nb; b++, wb += 34, a++) {
		__m256i qw = _mm256_loadu_si256((const __m256i *)(wb + 2));
		__m256i qa = _mm256_loadu_si256((const __m256i *)a->q);
		__m256i ax = _mm256_sign_epi8(qw, qw), sy = _mm256_sign_epi8(qa, qw);
		__m256i dp = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy);
		__m128i t = _mm_add_epi32(_mm256_castsi256_si128(dp), _mm256_extracti128_si256(dp, 1));
		t = _mm_hadd_epi32(t, t);
		t = _mm_hadd_epi32(t, t);
		s += ld_fp16(wb) * a->d * (float)_mm_cvtsi128_si32(t);
	}
	*out = s;
}

/* ---- 4 activation rows at a time (prefill) ---- */

static void a5_dot4_q8_0(int64_t k, const void *w, const void *act, size_t stride, float *out)
{
	const uint8_t *wb = w;
	const uint8_t *ab = act;
	int64_t nb = k / QK8, b = 0;
	__m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
	for (; b + 2 <= nb; b += 2, wb += 68) {
		__m512i qw = ld2x256(wb + 2, wb + 36);
		__mmask64 neg = _mm512_movepi8_mask(qw);
		__m512i ax = _mm512_abs_epi8(qw);
		float dw0 = ld_fp16(wb), dw1 = ld_fp16(wb + 34);
		for (int c = 0; c < 4; c++) {
			const struct act_q8_0 *a = (const struct act_q8_0 *)(ab + c * stride) + b;
			__m512i qa = ld2x256(a[0].q, a[1].q);
			__m512i sa = _mm512_mask_sub_epi8(qa, neg, _mm512_setzero_si512(), qa);
			__m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sa);
			__m512 d = _mm512_insertf32x8(_mm512_set1_ps(dw0 * a[0].d), _mm256_set1_ps(dw1 * a[1].d), 1);
			acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dp), acc[c]);
		}
	}
	for (int c = 0; c < 4; c++) {
		out[c] = _mm512_reduce_add_ps(acc[c]);
		if (b < nb) {
			float r;
			a5_dot_q8_0(QK8, wb, (const struct act_q8_0 *)(ab + c * stride) + b, &r);
			out[c] += r;
		}
	}
}

static inline __attribute__((always_inline)) void q4k_dotn(int64_t k, const void *w, const void *act,
								 size_t stride, float *out, const int nc)
{
	const uint8_t *wb = w;
	const uint8_t *ab = act;
	const __m512i m4 = _mm512_set1_epi8(0xf);
	__m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
	__m128 accm[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
	for (int64_t b = 0; b < k / QKK; b++, wb += 144) {
		prefetch_ahead(wb, 144);
		uint32_t u[4];
		k4_scales_mins(wb + 4, u);
		__m256i ms = _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
		__m128i mins = _mm256_extracti128_si256(ms, 1);
		const uint8_t *sc = (const uint8_t *)u;
		float dw = ld_fp16(wb), dmin = ld_fp16(wb + 2);
		const uint8_t *qs = wb + 16;
		__m512i lo[2], hi[2], slo[2], shi[2];
		for (int p = 0; p < 2; p++) {
			__m512i q4 = _mm512_loadu_si512((const void *)(qs + 64 * p));
			lo[p] = _mm512_and_si512(q4, m4);
			hi[p] = _mm512_and_si512(_mm512_srli_epi16(q4, 4), m4);
			slo[p] = _mm512_inserti64x4(_mm512_set1_epi16(sc[4 * p]), _mm256_set1_epi16(sc[4 * p + 2]), 1);
			shi[p] = _mm512_inserti64x4(_mm512_set1_epi16(sc[4 * p + 1]), _mm256_set1_epi16(sc[4 * p + 3]), 1);
		}
		for (int c = 0; c < nc; c++) {
			const struct act_q8_k *a = (const struct act_q8_k *)(ab + c * stride) + b;
			__m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)a->bsums),
						    _mm_loadu_si128((const __m128i *)(a->bsums + 8)));
			accm[c] = _mm_fmadd_ps(_mm_set1_ps(dmin * a->d), _mm_cvtepi32_ps(_mm_madd_epi16(mins, bs)), accm[c]);
			__m512i sumi = _mm512_setzero_si512();
			for (int p = 0; p < 2; p++) {
				const int8_t *q8 = a->q + 128 * p;
				__m512i alo = ld2x256(q8, q8 + 64), ahi = ld2x256(q8 + 32, q8 + 96);
				sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(lo[p], alo), slo[p]));
				sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(hi[p], ahi), shi[p]));
			}
			acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dw * a->d), _mm512_cvtepi32_ps(sumi), acc[c]);
		}
	}
	for (int c = 0; c < nc; c++) {
		__m128 m = _mm_add_ps(accm[c], _mm_movehl_ps(accm[c], accm[c]));
		m = _mm_add_ss(m, _mm_movehdup_ps(m));
		out[c] = _mm512_reduce_add_ps(acc[c]) - _mm_cvtss_f32(m);
	}
}

static inline __attribute__((always_inline)) void q6k_dotn(int64_t k, const void *w, const void *act,
								 size_t stride, float *out, const int nc)
{
	const uint8_t *wb = w;
	const uint8_t *ab = act;
	const __m512i m4 = _mm512_set1_epi8(0xf), m2 = _mm512_set1_epi8(3);
	__m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
	for (int64_t b = 0; b < k / QKK; b++, wb += 210) {
		prefetch_ahead(wb, 210);
		__m128i sc8 = _mm_loadu_si128((const __m128i *)(wb + 192));
		__m256i sc16 = _mm256_cvtepi8_epi16(sc8);
		/* int16 lanes, 8 per scale: q01 of half n uses scales 8n..8n+3, q23 8n+4..8n+7 */
		__m512i scq[2][2], q[2][2];
		for (int n = 0; n < 2; n++) {
			for (int h = 0; h < 2; h++) {
				int s0 = 8 * n + 4 * h;
				__m512i idx = _mm512_set_epi16(
					s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 3, s0 + 2, s0 + 2, s0 + 2,
					s0 + 2, s0 + 2, s0 + 2, s0 + 2, s0 + 2, s0 + 1, s0 + 1, s0 + 1, s0 + 1, s0 + 1, s0 + 1,
					s0 + 1, s0 + 1, s0, s0, s0, s0, s0, s0, s0, s0);
				scq[n][h] = _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(sc16));
			}
			const uint8_t *ql = wb + 64 * n, *qh = wb + 128 + 32 * n;
			__m256i hh = _mm256_loadu_si256((const __m256i *)qh);
			__m512i l = _mm512_loadu_si512((const void *)ql);
			__m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(hh), _mm256_srli_epi16(hh, 2), 1);
			__m512i h23 = _mm512_srli_epi16(h01, 4);
			q[n][0] = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(h01, m2), 4));
			q[n][1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
						  _mm512_slli_epi16(_mm512_and_si512(h23, m2), 4));
		}
		float dw = ld_fp16(wb + 208);
		for (int c = 0; c < nc; c++) {
			const struct act_q8_k *a = (const struct act_q8_k *)(ab + c * stride) + b;
			__m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a->bsums));
			__m512i sumi = _mm512_castsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
			sumi = _mm512_inserti64x4(sumi, _mm256_setzero_si256(), 1);
			for (int n = 0; n < 2; n++)
				for (int h = 0; h < 2; h++) {
					__m512i qa = _mm512_loadu_si512((const void *)(a->q + 128 * n + 64 * h));
					sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q[n][h], qa), scq[n][h]));
				}
			acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dw * a->d), _mm512_cvtepi32_ps(sumi), acc[c]);
		}
	}
	for (int c = 0; c < nc; c++)
		out[c] = _mm512_reduce_add_ps(acc[c]);
}

static void a5_dot4_q4_k(int64_t k, const void *w, const void *act, size_t stride, float *out)
{
	q4k_dotn(k, w, act, stride, out, 4);
}

static void a5_dot4_q6_k(int64_t k, const void *w, const void *act, size_t stride, float *out)
{
	q6k_dotn(k, w, act, stride, out, 4);
}

/* ---- 4 weight rows at a time with one activation row (decode) ---- */

static void a5_dotr4_q4_k(int64_t k, const void *w, size_t ws, const void *act, float *out)
{
	const uint8_t *w0 = w;
	const __m512i m4 = _mm512_set1_epi8(0xf);
	/* int16 lane index into [8 scales] for the lo / hi nibble halves of a
	 * 64-byte group p: lo covers sub-blocks 4p, 4p+2; hi 4p+1, 4p+3 */
	__m512i ix[2][2];
	for (int p = 0; p < 2; p++)
		for (int h = 0; h < 2; h++)
			ix[p][h] = _mm512_inserti64x4(_mm512_set1_epi16((short)(4 * p + h)),
						      _mm256_set1_epi16((short)(4 * p + h + 2)), 1);
	__m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
	__m128 accm[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
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
		for (int r = 0; r < 4; r++) {
			const uint8_t *wb = w0 + r * ws + b * 144;
			prefetch_ahead(wb, 144);
			uint32_t u[4];
			k4_scales_mins(wb + 4, u);
			__m256i ms = _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
			__m128i pm = _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), bs);
			accm[r] = _mm_fmadd_ps(_mm_set1_ps(ld_fp16(wb + 2) * a->d), _mm_cvtepi32_ps(pm), accm[r]);
			__m512i ms5 = _mm512_castsi256_si512(ms);
			__m512i sumi = _mm512_setzero_si512();
			for (int p = 0; p < 2; p++) {
				__m512i q4 = _mm512_loadu_si512((const void *)(wb + 16 + 64 * p));
				__m512i lo = _mm512_and_si512(q4, m4);
				__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q4, 4), m4);
				__m512i sl = _mm512_permutexvar_epi16(ix[p][0], ms5);
				__m512i sh = _mm512_permutexvar_epi16(ix[p][1], ms5);
				sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(lo, alo[p]), sl));
				sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(hi, ahi[p]), sh));
			}
			acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(ld_fp16(wb) * a->d), _mm512_cvtepi32_ps(sumi), acc[r]);
		}
	}
	for (int r = 0; r < 4; r++) {
		__m128 m = _mm_add_ps(accm[r], _mm_movehl_ps(accm[r], accm[r]));
		m = _mm_add_ss(m, _mm_movehdup_ps(m));
		out[r] = _mm512_reduce_add_ps(acc[r]) - _mm_cvtss_f32(m);
	}
}

static void a5_dotr4_q6_k(int64_t k, const void *w, size_t ws, const void *act, float *out)
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
	__m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
	const struct act_q8_k *a = act;
	for (int64_t b = 0; b < k / QKK; b++, a++) {
		__m512i qa[2][2];
		for (int n = 0; n < 2; n++)
			for (int h = 0; h < 2; h++)
				qa[n][h] = _mm512_loadu_si512((const void *)(a->q + 128 * n + 64 * h));
		__m256i bsv = _mm256_loadu_si256((const __m256i *)a->bsums);
		for (int r = 0; r < 4; r++) {
			const uint8_t *wb = w0 + r * ws + b * 210;
			prefetch_ahead(wb, 210);
			__m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wb + 192)));
			__m512i sc5 = _mm512_castsi256_si512(sc16);
			__m256i off = _mm256_madd_epi16(sc16, bsv);
			__m512i sumi = _mm512_castsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
			sumi = _mm512_inserti64x4(sumi, _mm256_setzero_si256(), 1);
			for (int n = 0; n < 2; n++) {
				const uint8_t *ql = wb + 64 * n, *qh = wb + 128 + 32 * n;
				__m256i hh = _mm256_loadu_si256((const __m256i *)qh);
				__m512i l = _mm512_loadu_si512((const void *)ql);
				__m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(hh), _mm256_srli_epi16(hh, 2), 1);
				__m512i h23 = _mm512_srli_epi16(h01, 4);
				__m512i q0 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(h01, m2), 4));
				__m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
							     _mm512_slli_epi16(_mm512_and_si512(h23, m2), 4));
				sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q0, qa[n][0]),
										 _mm512_permutexvar_epi16(idx[n][0], sc5)));
				sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q1, qa[n][1]),
										 _mm512_permutexvar_epi16(idx[n][1], sc5)));
			}
			acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(ld_fp16(wb + 208) * a->d), _mm512_cvtepi32_ps(sumi), acc[r]);
		}
	}
	for (int r = 0; r < 4; r++)
		out[r] = _mm512_reduce_add_ps(acc[r]);
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
	k->dotr4[ALICE_TYPE_Q4_K] = a5_dotr4_q4_k;
	k->dotr4[ALICE_TYPE_Q6_K] = a5_dotr4_q6_k;
	k->dot4[ALICE_TYPE_Q8_0] = a5_dot4_q8_0;
	k->dot4[ALICE_TYPE_Q4_K] = a5_dot4_q4_k;
	k->dot4[ALICE_TYPE_Q6_K] = a5_dot4_q6_k;
	cpu_kernels_avx2_dots(k);
	k->dot_f32 = a5_dot_f32;
	k->dot[ALICE_TYPE_Q8_0] = a5_dot_q8_0;
	/* Q4_K/Q6_K single rows keep the AVX2 dots (measured faster streaming
	 * from DRAM here); decode uses dotr4. A Q8_0 dotr4 measured slower
	 * (1.3 vs 0.9 ms CPU, K=2048 N=8192), so Q8_0 has none. */
	k->isa = "avx512";
}
#endif
