/* vmath.h — scalar emulations of llama.cpp's CPU vector math, lane by lane,
 * where its rounding differs from libm and the parity references depend on
 * it (see tests/core/test_parity.c). Header-only; callers compile these into
 * FMA-enabled clones where speed matters (fmaf is an instruction there). */
#ifndef ALICE_CPU_VMATH_H
#define ALICE_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ggml's AVX-512 vector expf (a polynomial after the ARM optimized-routines
 * method: max error ~1.5 ulp). Used by llama.cpp's tiled flash-attention
 * softmax and by its vectorized SiLU. 0 below -104 (where the result
 * underflows anyway), +inf above the float range. */
static inline __attribute__((always_inline)) float v_expf(float x)
{
	if (!(x > -104.0f))
		return 0.0f;
	float z = fmaf(x, 0x1.715476p+0f, 0x1.8p23f);
	float n = z - 0x1.8p23f;
	float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
	float u = b * b;
	float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
		       fmaf(0x1.ffffecp-1f, b, 1.0f));
	int ni = (int)n;
	if (ni < -126 || ni > 127)
		return ldexpf(j, ni);
	uint32_t bits = (uint32_t)(ni + 127) << 23; /* 2^n exactly: one rounding, as scalef */
	float p2;
	memcpy(&p2, &bits, 4);
	return j * p2;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* v_expf on 8 (AVX2) and 16 (AVX-512) lanes: lane by lane the same
 * operations, so the same bits; lanes that would need ldexpf (results
 * below the normal range) come back marked in *slow for the caller to
 * redo with v_expf. */
__attribute__((target("avx2,fma"))) static inline __m256 v_expf_y(__m256 x, int *slow)
{
	const __m256 big = _mm256_set1_ps(0x1.8p23f);
	__m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), big), big);
	__m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
	__m256 u = _mm256_mul_ps(b, b);
	__m256 j = _mm256_fmadd_ps(
		_mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
				_mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
		u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
	__m256i ni = _mm256_cvttps_epi32(n);
	const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_GT_OQ); /* else 0 */
	__m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(-126), ni),
				      _mm256_cmpgt_epi32(ni, _mm256_set1_epi32(127)));
	*slow = _mm256_movemask_ps(_mm256_and_ps(live, _mm256_castsi256_ps(out)));
	__m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
	return _mm256_and_ps(live, _mm256_mul_ps(j, p2));
}

__attribute__((target("avx512f,avx2,fma"))) static inline __m512 v_expf_z(__m512 x, __mmask16 *slow)
{
	const __m512 big = _mm512_set1_ps(0x1.8p23f);
	__m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), big), big);
	__m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
	__m512 u = _mm512_mul_ps(b, b);
	__m512 j = _mm512_fmadd_ps(
		_mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
				_mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
		u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
	__m512i ni = _mm512_cvttps_epi32(n);
	__mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_GT_OQ);
	*slow = live & (_mm512_cmplt_epi32_mask(ni, _mm512_set1_epi32(-126)) |
			_mm512_cmpgt_epi32_mask(ni, _mm512_set1_epi32(127)));
	__m512 p2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(ni, _mm512_set1_epi32(127)), 23));
	return _mm512_maskz_mul_ps(live, j, p2);
}
#endif

/* SiLU as ggml's vector kernel computes it: x / (1 + v_expf(-x)). */
static inline __attribute__((always_inline)) float v_silu(float x)
{
	return x / (1.0f + v_expf(0.0f - x));
}

#endif
