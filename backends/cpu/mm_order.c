/* mm_order.c — llama.cpp's float-weight dot-product orders (see mm_order.h):
 * a portable version (fmaf) and an AVX-512 one with the same arithmetic. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <string.h>

#include "cpu_internal.h"
#include "mm_order.h"

enum mm_order cpu_mm_order(uint32_t type, bool multi, int64_t K, int64_t N)
{
	bool gemm = multi && N % 4 == 0;
	switch (type) {
	case ALICE_TYPE_BF16: return gemm && K % 32 == 0 ? MM_ORD_GEMM_BF16 : MM_ORD_VEC_BF16;
	case ALICE_TYPE_F16: return gemm && K % 16 == 0 ? MM_ORD_GEMM16 : MM_ORD_VEC_F16;
	default: return gemm && K % 16 == 0 ? MM_ORD_GEMM16 : MM_ORD_VEC_F32;
	}
}

/* the AVX-512 horizontal sum: halves i + 8, i + 4, then (0+2) + (1+3) */
static inline __attribute__((always_inline)) float red16(const float *a)
{
	float t8[8], t4[4];
	for (int i = 0; i < 8; i++)
		t8[i] = a[i + 8] + a[i];
	for (int i = 0; i < 4; i++)
		t4[i] = t8[i + 4] + t8[i];
	return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

/* per 16 values: the 8 odd, then the 8 even (the AVX2 BF16 tiles' rows) */
static void split_odd_even(int64_t K, const float *x, float *dst)
{
	for (int64_t g = 0; g + 16 <= K; g += 16)
		for (int i = 0; i < 8; i++) {
			dst[g + i] = x[g + 2 * i + 1];
			dst[g + 8 + i] = x[g + 2 * i];
		}
}

/* a product rounded on its own: the compiler must not fuse it into the add
 * that follows (llama.cpp's vec_dot tail is not contracted) */
static inline __attribute__((always_inline)) float unfused_mul(float a, float b)
{
	float p = a * b;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
	__asm__("" : "+x"(p));
#elif defined(__GNUC__) && defined(__aarch64__)
	__asm__("" : "+w"(p));
#endif
	return p;
}

/* ---- portable ---- */

static inline __attribute__((always_inline)) float gemm16_s(int64_t K, const float *w, const float *x)
{
	float acc[16] = {0};
	for (int64_t l = 0; l + 16 <= K; l += 16)
		for (int i = 0; i < 16; i++)
			acc[i] = fmaf(w[l + i], x[l + i], acc[i]);
	return red16(acc);
}

static inline __attribute__((always_inline)) float vec_s(int64_t K, const float *w, const float *x, bool dtail)
{
	float acc[4][16] = {{0}};
	int64_t np = K & ~(int64_t)63, i = 0;
	for (; i < np; i += 64)
		for (int j = 0; j < 4; j++)
			for (int l = 0; l < 16; l++)
				acc[j][l] = fmaf(w[i + 16 * j + l], x[i + 16 * j + l], acc[j][l]);
	for (int l = 0; l < 16; l++) {
		acc[0][l] += acc[2][l];
		acc[1][l] += acc[3][l];
	}
	for (int l = 0; l < 16; l++)
		acc[0][l] += acc[1][l];
	float s = red16(acc[0]);
	if (dtail) {
		double d = s;
		for (; i < K; i++)
			d += (double)(w[i] * x[i]);
		return (float)d;
	}
	for (; i < K; i++)
		s = s + unfused_mul(w[i], x[i]);
	return s;
}

/* vdpbf16ps on one 32-element step: lane j += p[2j+1], then += p[2j]
 * (products of BF16 values are exact in float) */
static inline __attribute__((always_inline)) void dpbf16_s(float *acc, const float *w, const float *x)
{
	for (int j = 0; j < 16; j++) {
		float a = acc[j] + w[2 * j + 1] * x[2 * j + 1];
		acc[j] = a + w[2 * j] * x[2 * j];
	}
}

static inline __attribute__((always_inline)) float gemm_bf16_s(int64_t K, const float *w, const float *x)
{
	float acc[16] = {0};
	for (int64_t l = 0; l + 32 <= K; l += 32)
		dpbf16_s(acc, w + l, x + l);
	return red16(acc);
}

static inline __attribute__((always_inline)) float vec_bf16_s(int64_t K, const float *w, const float *x)
{
	float c1[16] = {0}, c2[16] = {0};
	int64_t i = 0;
	for (; i + 64 <= K; i += 64) {
		dpbf16_s(c1, w + i, x + i);
		dpbf16_s(c2, w + i + 32, x + i + 32);
	}
	double s = (double)red16(c1);
	s += (double)red16(c2);
	for (; i < K; i++)
		s += (double)(w[i] * x[i]);
	return (float)s;
}


static inline __attribute__((always_inline)) float port_dot(enum mm_order o, int64_t K, const float *w, const float *x)
{
	switch (o) {
	case MM_ORD_GEMM16: return gemm16_s(K, w, x);
	case MM_ORD_VEC_F32: return vec_s(K, w, x, false);
	case MM_ORD_VEC_F16: return vec_s(K, w, x, true);
	case MM_ORD_GEMM_BF16: return gemm_bf16_s(K, w, x);
	case MM_ORD_VEC_BF16: return vec_bf16_s(K, w, x);
	}
	return 0.0f;
}

/* the portable code built twice: fmaf is an instruction in the FMA clone */
static float port_generic(enum mm_order o, int64_t K, const float *w, const float *x)
{
	return port_dot(o, K, w, x);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static float port_fma(enum mm_order o, int64_t K, const float *w, const float *x)
{
	return port_dot(o, K, w, x);
}

static bool have_fma(void)
{
	static atomic_int have = -1;
	int h = atomic_load_explicit(&have, memory_order_relaxed);
	if (h < 0) {
		__builtin_cpu_init();
		const char *cap = getenv("ALICE_CPU_ISA");
		h = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !(cap && !strcmp(cap, "scalar"));
		atomic_store_explicit(&have, h, memory_order_relaxed);
	}
	return h != 0;
}
#else
#define port_fma port_generic
static bool have_fma(void)
{
	return false;
}
#endif

/* ---- AVX-512 (the same arithmetic, lanes in registers) ---- */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MMO_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,f16c")))

/* red16 in registers: the same additions in the same order */
MMO_AVX512 static inline __attribute__((always_inline)) float red16_v(__m512 a)
{
	__m256 t8 = _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
	__m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
	__m128 u = _mm_add_ps(t4, _mm_movehl_ps(t4, t4)); /* t4[0] + t4[2], t4[1] + t4[3] */
	return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

MMO_AVX512 static float gemm16_v(int64_t K, const float *w, const float *x)
{
	__m512 acc = _mm512_setzero_ps();
	for (int64_t l = 0; l + 16 <= K; l += 16)
		acc = _mm512_fmadd_ps(_mm512_loadu_ps(w + l), _mm512_loadu_ps(x + l), acc);
	return red16_v(acc);
}

MMO_AVX512 static float vec_v(int64_t K, const float *w, const float *x, bool dtail)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int64_t np = K & ~(int64_t)63, i = 0;
	for (; i < np; i += 64) {
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
		a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
		a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
		a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
	}
	a0 = _mm512_add_ps(a0, a2);
	a1 = _mm512_add_ps(a1, a3);
	float s = red16_v(_mm512_add_ps(a0, a1));
	if (dtail) {
		double d = s;
		for (; i < K; i++)
			d += (double)(w[i] * x[i]);
		return (float)d;
	}
	for (; i < K; i++)
		s = s + unfused_mul(w[i], x[i]);
	return s;
}

/* one vdpbf16ps step on floats: products, then odd lanes, then even lanes */
MMO_AVX512 static __m512 dpbf16_v(__m512 acc, const float *w, const float *x)
{
	const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	__m512 p0 = _mm512_mul_ps(_mm512_loadu_ps(w), _mm512_loadu_ps(x));
	__m512 p1 = _mm512_mul_ps(_mm512_loadu_ps(w + 16), _mm512_loadu_ps(x + 16));
	acc = _mm512_add_ps(acc, _mm512_permutex2var_ps(p0, odd, p1));
	return _mm512_add_ps(acc, _mm512_permutex2var_ps(p0, even, p1));
}

MMO_AVX512 static float gemm_bf16_v(int64_t K, const float *w, const float *x)
{
	__m512 acc = _mm512_setzero_ps();
	for (int64_t l = 0; l + 32 <= K; l += 32)
		acc = dpbf16_v(acc, w + l, x + l);
	return red16_v(acc);
}

MMO_AVX512 static float vec_bf16_v(int64_t K, const float *w, const float *x)
{
	__m512 c1 = _mm512_setzero_ps(), c2 = c1;
	int64_t i = 0;
	for (; i + 64 <= K; i += 64) {
		c1 = dpbf16_v(c1, w + i, x + i);
		c2 = dpbf16_v(c2, w + i + 32, x + i + 32);
	}
	double s = (double)red16_v(c1);
	s += (double)red16_v(c2);
	for (; i < K; i++)
		s += (double)(w[i] * x[i]);
	return (float)s;
}
#endif

static bool use_avx512(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	static atomic_int have = -1;
	int h = atomic_load_explicit(&have, memory_order_relaxed);
	if (h < 0) {
		__builtin_cpu_init();
		const char *cap = getenv("ALICE_CPU_ISA"); /* the test levels below AVX-512 */
		h = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
		    __builtin_cpu_supports("avx512vl") &&
		    __builtin_cpu_supports("fma") && !(cap && (!strcmp(cap, "avx2") || !strcmp(cap, "avxvnni") || !strcmp(cap, "scalar")));
		atomic_store_explicit(&have, h, memory_order_relaxed);
	}
	return h != 0;
#else
	return false;
#endif
}

float cpu_mm_order_dot(enum mm_order o, int64_t K, const float *w, const float *x)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (use_avx512()) {
		switch (o) {
		case MM_ORD_GEMM16: return gemm16_v(K, w, x);
		case MM_ORD_VEC_F32: return vec_v(K, w, x, false);
		case MM_ORD_VEC_F16: return vec_v(K, w, x, true);
		case MM_ORD_GEMM_BF16: return gemm_bf16_v(K, w, x);
		case MM_ORD_VEC_BF16: return vec_bf16_v(K, w, x);
		}
	}
#endif
	return have_fma() ? port_fma(o, K, w, x) : port_generic(o, K, w, x);
}

/* ---- raw weight rows (widened on the fly) ---- */

static inline __attribute__((always_inline)) float w_at(uint32_t t, const void *w, int64_t i)
{
	uint16_t h;
	switch (t) {
	case ALICE_TYPE_F16:
		memcpy(&h, (const uint8_t *)w + 2 * i, 2);
		return alice_fp16_to_fp32(h);
	case ALICE_TYPE_BF16:
		memcpy(&h, (const uint8_t *)w + 2 * i, 2);
		return alice_bf16_to_fp32(h);
	default: return ((const float *)w)[i];
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
MMO_AVX512 static inline __m512 w16(uint32_t t, const void *w, int64_t i)
{
	if (t == ALICE_TYPE_F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i)));
	if (t == ALICE_TYPE_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(
			_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i))), 16));
	return _mm512_loadu_ps((const float *)w + i);
}

/* the K % 64 tail's products (each rounded to float, as in the scalar
 * tail), 16 at a time, into p */
MMO_AVX512 static inline __attribute__((always_inline)) void tail_products(uint32_t t, int64_t n, const void *w,
									   const float *x, float *p)
{
	for (int64_t i = 0; i < n; i += 16) {
		__mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 wv;
		if (t == ALICE_TYPE_F16)
			wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i));
		else if (t == ALICE_TYPE_BF16)
			wv = _mm512_castsi512_ps(_mm512_slli_epi32(
				_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i)), 16));
		else
			wv = _mm512_maskz_loadu_ps(m, (const float *)w + i);
		_mm512_storeu_ps(p + i, _mm512_mul_ps(wv, _mm512_maskz_loadu_ps(m, x + i)));
	}
}

MMO_AVX512 static inline float vec_raw_v(uint32_t t, int64_t K, const void *w,
									const float *x, bool dtail)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int64_t np = K & ~(int64_t)63, i = 0;
	for (; i < np; i += 64) {
		a0 = _mm512_fmadd_ps(w16(t, w, i), _mm512_loadu_ps(x + i), a0);
		a1 = _mm512_fmadd_ps(w16(t, w, i + 16), _mm512_loadu_ps(x + i + 16), a1);
		a2 = _mm512_fmadd_ps(w16(t, w, i + 32), _mm512_loadu_ps(x + i + 32), a2);
		a3 = _mm512_fmadd_ps(w16(t, w, i + 48), _mm512_loadu_ps(x + i + 48), a3);
	}
	a0 = _mm512_add_ps(a0, a2);
	a1 = _mm512_add_ps(a1, a3);
	float s = np ? red16_v(_mm512_add_ps(a0, a1)) : 0.0f;
	float p[64];
	tail_products(t, K - i, (const uint8_t *)w + i * (t == ALICE_TYPE_F32 ? 4 : 2), x + i, p);
	if (dtail) {
		double d = s;
		for (int64_t l = 0; l < K - i; l++)
			d += (double)p[l];
		return (float)d;
	}
	for (int64_t l = 0; l < K - i; l++)
		s = s + p[l];
	return s;
}

MMO_AVX512 static __m512 dpbf16_raw(__m512 acc, __m512 w0, __m512 w1, const float *x)
{
	const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
	const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	__m512 p0 = _mm512_mul_ps(w0, _mm512_loadu_ps(x));
	__m512 p1 = _mm512_mul_ps(w1, _mm512_loadu_ps(x + 16));
	acc = _mm512_add_ps(acc, _mm512_permutex2var_ps(p0, odd, p1));
	return _mm512_add_ps(acc, _mm512_permutex2var_ps(p0, even, p1));
}

MMO_AVX512 static inline float vec_bf16_raw_v(int64_t K, const void *w, const float *x)
{
	__m512 c1 = _mm512_setzero_ps(), c2 = c1;
	int64_t i = 0;
	for (; i + 64 <= K; i += 64) {
		c1 = dpbf16_raw(c1, w16(ALICE_TYPE_BF16, w, i), w16(ALICE_TYPE_BF16, w, i + 16), x + i);
		c2 = dpbf16_raw(c2, w16(ALICE_TYPE_BF16, w, i + 32), w16(ALICE_TYPE_BF16, w, i + 48), x + i + 32);
	}
	double s = 0.0; /* the sum of two +0 trees when no block ran */
	if (i) {
		s = (double)red16_v(c1);
		s += (double)red16_v(c2);
	}
	float p[64];
	tail_products(ALICE_TYPE_BF16, K - i, (const uint16_t *)w + i, x + i, p);
	for (int64_t l = 0; l < K - i; l++)
		s += (double)p[l];
	return (float)s;
}

/* 4 activation rows, one chain each */
MMO_AVX512 static void gemm4_raw_v(enum mm_order o, uint32_t t, int64_t K, const void *w, const float *x, int64_t xs,
				   float *out)
{
	__m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
	if (o == MM_ORD_GEMM_BF16) {
		for (int64_t l = 0; l + 32 <= K; l += 32) {
			__m512 w0 = w16(t, w, l), w1 = w16(t, w, l + 16);
			c0 = dpbf16_raw(c0, w0, w1, x + l);
			c1 = dpbf16_raw(c1, w0, w1, x + xs + l);
			c2 = dpbf16_raw(c2, w0, w1, x + 2 * xs + l);
			c3 = dpbf16_raw(c3, w0, w1, x + 3 * xs + l);
		}
	} else {
		for (int64_t l = 0; l + 16 <= K; l += 16) {
			__m512 wv = w16(t, w, l);
			c0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + l), c0);
			c1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + xs + l), c1);
			c2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 2 * xs + l), c2);
			c3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 3 * xs + l), c3);
		}
	}
	out[0] = red16_v(c0);
	out[1] = red16_v(c1);
	out[2] = red16_v(c2);
	out[3] = red16_v(c3);
}

/* 4 weight rows x 4 activation rows, each output one chain in the gemm
 * order (as gemm_raw_v). BF16: the weights' odd and even elements come
 * straight from the 32-bit pairs, the activations' by one permute per row,
 * and each product is added with an fma: a product of two BF16 values is
 * exact in float (16 significant bits; normal range), so fma(w, x, acc) is
 * the rounded acc + w x of the vdpbf16ps step. */
MMO_AVX512 static void gemm4x4_raw_v(enum mm_order o, uint32_t t, int64_t K, const void *w, size_t ws, const float *x,
				     int64_t xs, float *out, size_t os_n, size_t os_m)
{
	__m512 c[4][4];
	_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
		_Pragma("GCC unroll 4") for (int b = 0; b < 4; b++)
			c[a][b] = _mm512_setzero_ps();
	const uint8_t *wr[4] = {w, (const uint8_t *)w + ws, (const uint8_t *)w + 2 * ws, (const uint8_t *)w + 3 * ws};
	if (o == MM_ORD_GEMM_BF16) {
		const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
		const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
		const __m512i hi16 = _mm512_set1_epi32((int)0xffff0000u);
		for (int64_t l = 0; l + 32 <= K; l += 32) {
			__m512 wo[4], we[4];
			_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++) {
				__m512i p = _mm512_loadu_si512((const void *)(wr[a] + 2 * l));
				wo[a] = _mm512_castsi512_ps(_mm512_and_si512(p, hi16));
				we[a] = _mm512_castsi512_ps(_mm512_slli_epi32(p, 16));
			}
			_Pragma("GCC unroll 4") for (int b = 0; b < 4; b++) {
				__m512 x0 = _mm512_loadu_ps(x + b * xs + l), x1 = _mm512_loadu_ps(x + b * xs + l + 16);
				__m512 xo = _mm512_permutex2var_ps(x0, odd, x1), xe = _mm512_permutex2var_ps(x0, even, x1);
				_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++) {
					c[a][b] = _mm512_fmadd_ps(wo[a], xo, c[a][b]);
					c[a][b] = _mm512_fmadd_ps(we[a], xe, c[a][b]);
				}
			}
		}
	} else {
		for (int64_t l = 0; l + 16 <= K; l += 16) {
			__m512 wv[4];
			_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
				wv[a] = w16(t, wr[a], l);
			_Pragma("GCC unroll 4") for (int b = 0; b < 4; b++) {
				__m512 xv = _mm512_loadu_ps(x + b * xs + l);
				_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
					c[a][b] = _mm512_fmadd_ps(wv[a], xv, c[a][b]);
			}
		}
	}
	_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
		_Pragma("GCC unroll 4") for (int b = 0; b < 4; b++) {
			float v = red16_v(c[a][b]);
			memcpy((uint8_t *)out + (size_t)a * os_n + (size_t)b * os_m, &v, 4);
		}
}

MMO_AVX512 static inline float gemm_raw_v(enum mm_order o, uint32_t t, int64_t K, const void *w, const float *x)
{
	__m512 c = _mm512_setzero_ps();
	if (o == MM_ORD_GEMM_BF16) {
		for (int64_t l = 0; l + 32 <= K; l += 32)
			c = dpbf16_raw(c, w16(t, w, l), w16(t, w, l + 16), x + l);
	} else {
		for (int64_t l = 0; l + 16 <= K; l += 16)
			c = _mm512_fmadd_ps(w16(t, w, l), _mm512_loadu_ps(x + l), c);
	}
	return red16_v(c);
}
/* ---- BF16 with vdpbf16ps (AVX512_BF16), the default where the CPU has
 * it: the same pairs and the same chains as the emulation above (lane l
 * of a step adds the odd product, then the even one, of the pair 2l,
 * 2l + 1), flushing denormal inputs and results as the instruction does,
 * which is what llama.cpp's own AVX512_BF16 kernels do. The activations
 * are floats already rounded to BF16, so converting them is exact.
 * ALICE_CPU_EXACT=1 keeps the emulation (no flushing). ---- */
#define MMO_BF16 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))

static bool use_bf16dp(void)
{
	static atomic_int have = -1;
	int h = atomic_load_explicit(&have, memory_order_relaxed);
	if (h < 0) {
		__builtin_cpu_init();
		const char *ex = getenv("ALICE_CPU_EXACT");
		h = use_avx512() && __builtin_cpu_supports("avx512bf16") && !(ex && *ex && strcmp(ex, "0") != 0);
		atomic_store_explicit(&have, h, memory_order_relaxed);
	}
	return h != 0;
}

MMO_BF16 static inline __attribute__((always_inline)) __m512bh xbf16(const float *x)
{
	return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
}

MMO_BF16 static inline __attribute__((always_inline)) __m512bh wbf16(const void *w, int64_t i)
{
	return (__m512bh)_mm512_loadu_si512((const void *)((const uint16_t *)w + i));
}

MMO_BF16 static inline __attribute__((always_inline)) float vec_bf16_dp(int64_t K, const void *w, const float *x)
{
	__m512 c1 = _mm512_setzero_ps(), c2 = c1;
	int64_t i = 0;
	for (; i + 64 <= K; i += 64) {
		c1 = _mm512_dpbf16_ps(c1, wbf16(w, i), xbf16(x + i));
		c2 = _mm512_dpbf16_ps(c2, wbf16(w, i + 32), xbf16(x + i + 32));
	}
	double s = 0.0; /* the sum of two +0 trees when no block ran */
	if (i) {
		s = (double)red16_v(c1);
		s += (double)red16_v(c2);
	}
	float p[64];
	tail_products(ALICE_TYPE_BF16, K - i, (const uint16_t *)w + i, x + i, p);
	for (int64_t l = 0; l < K - i; l++)
		s += (double)p[l];
	return (float)s;
}

MMO_BF16 static inline __attribute__((always_inline)) float gemm_bf16_dp(int64_t K, const void *w, const float *x)
{
	__m512 c = _mm512_setzero_ps();
	for (int64_t l = 0; l + 32 <= K; l += 32)
		c = _mm512_dpbf16_ps(c, wbf16(w, l), xbf16(x + l));
	return red16_v(c);
}

MMO_BF16 static float dot_bf16_dp(enum mm_order o, int64_t K, const void *w, const float *x)
{
	return o == MM_ORD_GEMM_BF16 ? gemm_bf16_dp(K, w, x) : vec_bf16_dp(K, w, x);
}

/* the same with the activation row converted to BF16 once for all rows
 * (K % 64 == 0; it was converted again for every weight row) */
MMO_BF16 static inline __attribute__((always_inline)) float vec_bf16_dpx(int64_t K, const void *w, const uint16_t *xb)
{
	__m512 c1 = _mm512_setzero_ps(), c2 = c1;
	for (int64_t i = 0; i + 64 <= K; i += 64) {
		c1 = _mm512_dpbf16_ps(c1, wbf16(w, i), wbf16(xb, i));
		c2 = _mm512_dpbf16_ps(c2, wbf16(w, i + 32), wbf16(xb, i + 32));
	}
	double s = (double)red16_v(c1);
	s += (double)red16_v(c2);
	return (float)s;
}

MMO_BF16 static inline __attribute__((always_inline)) float gemm_bf16_dpx(int64_t K, const void *w, const uint16_t *xb)
{
	__m512 c = _mm512_setzero_ps();
	for (int64_t l = 0; l + 32 <= K; l += 32)
		c = _mm512_dpbf16_ps(c, wbf16(w, l), wbf16(xb, l));
	return red16_v(c);
}

MMO_BF16 static void rows_bf16_dp(enum mm_order o, int64_t K, const void *w, size_t ws, const float *x, int64_t n,
				  float *out, size_t os)
{
	if (K % 64 == 0 && K > 0 && K <= 16384) {
		uint16_t xb[16384] __attribute__((aligned(64)));
		for (int64_t i = 0; i < K; i += 32)
			_mm512_storeu_si512((void *)(xb + i), (__m512i)xbf16(x + i));
		if (o == MM_ORD_GEMM_BF16) {
			for (int64_t r = 0; r < n; r++) {
				float v = gemm_bf16_dpx(K, (const uint8_t *)w + (size_t)r * ws, xb);
				memcpy((uint8_t *)out + (size_t)r * os, &v, 4);
			}
		} else {
			for (int64_t r = 0; r < n; r++) {
				float v = vec_bf16_dpx(K, (const uint8_t *)w + (size_t)r * ws, xb);
				memcpy((uint8_t *)out + (size_t)r * os, &v, 4);
			}
		}
		return;
	}
	for (int64_t r = 0; r < n; r++) {
		const void *wr = (const uint8_t *)w + (size_t)r * ws;
		float v = o == MM_ORD_GEMM_BF16 ? gemm_bf16_dp(K, wr, x) : vec_bf16_dp(K, wr, x);
		memcpy((uint8_t *)out + (size_t)r * os, &v, 4);
	}
}

/* 4 weight rows x 4 activation rows in the gemm order */
MMO_BF16 static void gemm4x4_bf16_dp(int64_t K, const void *w, size_t ws, const float *x, int64_t xs, float *out,
				     size_t os_n, size_t os_m)
{
	__m512 c[4][4];
	_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
		_Pragma("GCC unroll 4") for (int b = 0; b < 4; b++)
			c[a][b] = _mm512_setzero_ps();
	for (int64_t l = 0; l + 32 <= K; l += 32) {
		__m512bh wv[4];
		_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
			wv[a] = wbf16((const uint8_t *)w + (size_t)a * ws, l);
		_Pragma("GCC unroll 4") for (int b = 0; b < 4; b++) {
			__m512bh xv = xbf16(x + b * xs + l);
			_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
				c[a][b] = _mm512_dpbf16_ps(c[a][b], wv[a], xv);
		}
	}
	_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
		_Pragma("GCC unroll 4") for (int b = 0; b < 4; b++) {
			float v = red16_v(c[a][b]);
			memcpy((uint8_t *)out + (size_t)a * os_n + (size_t)b * os_m, &v, 4);
		}
}
/* 4 weight rows x NX activation rows already packed as BF16 (converted
 * once per op rather than once per 4 weight rows), each output its gemm
 * order chain: 4 x 6 accumulators fill the register file, so each weight
 * load serves 6 rows. */
MMO_BF16 static inline __attribute__((always_inline)) void gemm4xn_bf16p(const int NX, int64_t K, const void *w,
									  size_t ws, const uint16_t *xb, int64_t xbs,
									  float *out, size_t os_n, size_t os_m)
{
	__m512 c[4][6];
	_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
		_Pragma("GCC unroll 6") for (int b = 0; b < NX; b++)
			c[a][b] = _mm512_setzero_ps();
	for (int64_t l = 0; l + 32 <= K; l += 32) {
		__m512bh wv[4];
		_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
			wv[a] = wbf16((const uint8_t *)w + (size_t)a * ws, l);
		_Pragma("GCC unroll 6") for (int b = 0; b < NX; b++) {
			__m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(xb + b * xbs + l));
			_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
				c[a][b] = _mm512_dpbf16_ps(c[a][b], wv[a], xv);
		}
	}
	_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
		_Pragma("GCC unroll 6") for (int b = 0; b < NX; b++) {
			float v = red16_v(c[a][b]);
			memcpy((uint8_t *)out + (size_t)a * os_n + (size_t)b * os_m, &v, 4);
		}
}

MMO_BF16 static void gemm4xn_bf16p_any(int nx, int64_t K, const void *w, size_t ws, const uint16_t *xb, int64_t xbs,
				       float *out, size_t os_n, size_t os_m)
{
	switch (nx) {
	case 6: gemm4xn_bf16p(6, K, w, ws, xb, xbs, out, os_n, os_m); break;
	case 5: gemm4xn_bf16p(5, K, w, ws, xb, xbs, out, os_n, os_m); break;
	case 4: gemm4xn_bf16p(4, K, w, ws, xb, xbs, out, os_n, os_m); break;
	case 3: gemm4xn_bf16p(3, K, w, ws, xb, xbs, out, os_n, os_m); break;
	case 2: gemm4xn_bf16p(2, K, w, ws, xb, xbs, out, os_n, os_m); break;
	default: gemm4xn_bf16p(1, K, w, ws, xb, xbs, out, os_n, os_m); break;
	}
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
/* F16 gemm order (GEMM16), 4 weight rows x NX float activation rows: each
 * weight load widened once for 6 rows (the 4 x 4 tile loads 2 per fma 4) */
MMO_AVX512 static inline __attribute__((always_inline)) void gemm4xn_f16(const int NX, int64_t K, const void *w,
									size_t ws, const float *x, int64_t xs, float *out,
									size_t os_n, size_t os_m)
{
	__m512 c[4][6];
	_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
		_Pragma("GCC unroll 6") for (int b = 0; b < NX; b++)
			c[a][b] = _mm512_setzero_ps();
	for (int64_t l = 0; l + 16 <= K; l += 16) {
		__m512 wv[4];
		_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
			wv[a] = w16(ALICE_TYPE_F16, (const uint8_t *)w + (size_t)a * ws, l);
		_Pragma("GCC unroll 6") for (int b = 0; b < NX; b++) {
			__m512 xv = _mm512_loadu_ps(x + b * xs + l);
			_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
				c[a][b] = _mm512_fmadd_ps(wv[a], xv, c[a][b]);
		}
	}
	_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
		_Pragma("GCC unroll 6") for (int b = 0; b < NX; b++) {
			float v = red16_v(c[a][b]);
			memcpy((uint8_t *)out + (size_t)a * os_n + (size_t)b * os_m, &v, 4);
		}
}

MMO_AVX512 static void gemm4xn_f16_any(int nx, int64_t K, const void *w, size_t ws, const float *x, int64_t xs,
				       float *out, size_t os_n, size_t os_m)
{
	switch (nx) {
	case 6: gemm4xn_f16(6, K, w, ws, x, xs, out, os_n, os_m); break;
	case 5: gemm4xn_f16(5, K, w, ws, x, xs, out, os_n, os_m); break;
	case 4: gemm4xn_f16(4, K, w, ws, x, xs, out, os_n, os_m); break;
	case 3: gemm4xn_f16(3, K, w, ws, x, xs, out, os_n, os_m); break;
	case 2: gemm4xn_f16(2, K, w, ws, x, xs, out, os_n, os_m); break;
	default: gemm4xn_f16(1, K, w, ws, x, xs, out, os_n, os_m); break;
	}
}
#endif

/* portable: widen into a stack chunk-free loop through the float versions */
static inline __attribute__((always_inline)) float raw_s(enum mm_order o, uint32_t t, int64_t K, const void *w, const float *x)
{
	float buf[1024];
	if (t == ALICE_TYPE_F32)
		return port_dot(o, K, (const float *)w, x);
	if (K <= 1024) {
		for (int64_t i = 0; i < K; i++)
			buf[i] = w_at(t, w, i);
		return port_dot(o, K, buf, x);
	}
	/* long rows: exact per-element versions of the same orders */
	switch (o) {
	case MM_ORD_GEMM16: {
		float acc[16] = {0};
		for (int64_t l = 0; l + 16 <= K; l += 16)
			for (int i = 0; i < 16; i++)
				acc[i] = fmaf(w_at(t, w, l + i), x[l + i], acc[i]);
		return red16(acc);
	}
	case MM_ORD_GEMM_BF16: {
		float acc[16] = {0};
		for (int64_t l = 0; l + 32 <= K; l += 32)
			for (int j = 0; j < 16; j++) {
				float a = acc[j] + w_at(t, w, l + 2 * j + 1) * x[l + 2 * j + 1];
				acc[j] = a + w_at(t, w, l + 2 * j) * x[l + 2 * j];
			}
		return red16(acc);
	}
	case MM_ORD_VEC_BF16: {
		float c1[16] = {0}, c2[16] = {0};
		int64_t i = 0;
		for (; i + 64 <= K; i += 64)
			for (int j = 0; j < 16; j++) {
				float a = c1[j] + w_at(t, w, i + 2 * j + 1) * x[i + 2 * j + 1];
				c1[j] = a + w_at(t, w, i + 2 * j) * x[i + 2 * j];
				a = c2[j] + w_at(t, w, i + 32 + 2 * j + 1) * x[i + 32 + 2 * j + 1];
				c2[j] = a + w_at(t, w, i + 32 + 2 * j) * x[i + 32 + 2 * j];
			}
		double s = (double)red16(c1);
		s += (double)red16(c2);
		for (; i < K; i++)
			s += (double)(w_at(t, w, i) * x[i]);
		return (float)s;
	}
	default: {
		float acc[4][16] = {{0}};
		int64_t np = K & ~(int64_t)63, i = 0;
		for (; i < np; i += 64)
			for (int j = 0; j < 4; j++)
				for (int l = 0; l < 16; l++)
					acc[j][l] = fmaf(w_at(t, w, i + 16 * j + l), x[i + 16 * j + l], acc[j][l]);
		for (int l = 0; l < 16; l++) {
			acc[0][l] += acc[2][l];
			acc[1][l] += acc[3][l];
		}
		for (int l = 0; l < 16; l++)
			acc[0][l] += acc[1][l];
		float s = red16(acc[0]);
		if (o == MM_ORD_VEC_F16) {
			double d = s;
			for (; i < K; i++)
				d += (double)(w_at(t, w, i) * x[i]);
			return (float)d;
		}
		for (; i < K; i++)
			s = s + unfused_mul(w_at(t, w, i), x[i]);
		return s;
	}
	}
}

static float raw_generic(enum mm_order o, uint32_t t, int64_t K, const void *w, const float *x)
{
	return raw_s(o, t, K, w, x);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static float raw_fma(enum mm_order o, uint32_t t, int64_t K, const void *w,
							 const float *x)
{
	return raw_s(o, t, K, w, x);
}
#else
#define raw_fma raw_generic
#endif

float cpu_mm_order_dot_raw(enum mm_order o, uint32_t t, int64_t K, const void *w, const float *x)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (t == ALICE_TYPE_BF16 && (o == MM_ORD_GEMM_BF16 || o == MM_ORD_VEC_BF16) && use_bf16dp())
		return dot_bf16_dp(o, K, w, x);
	if (use_avx512()) {
		switch (o) {
		case MM_ORD_GEMM16:
		case MM_ORD_GEMM_BF16: return gemm_raw_v(o, t, K, w, x);
		case MM_ORD_VEC_F32: return vec_raw_v(t, K, w, x, false);
		case MM_ORD_VEC_F16: return vec_raw_v(t, K, w, x, true);
		case MM_ORD_VEC_BF16: return vec_bf16_raw_v(K, w, x);
		}
	}
#endif
	return have_fma() ? raw_fma(o, t, K, w, x) : raw_generic(o, t, K, w, x);
}

void cpu_mm_order_dot_raw4(enum mm_order o, uint32_t t, int64_t K, const void *w, const float *x, int64_t xstride,
			   float *out)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (t == ALICE_TYPE_BF16 && o == MM_ORD_GEMM_BF16 && use_bf16dp()) {
		for (int c = 0; c < 4; c++)
			out[c] = dot_bf16_dp(o, K, w, x + c * xstride);
		return;
	}
	if (use_avx512() && (o == MM_ORD_GEMM16 || o == MM_ORD_GEMM_BF16)) {
		gemm4_raw_v(o, t, K, w, x, xstride, out);
		return;
	}
#endif
	for (int c = 0; c < 4; c++)
		out[c] = cpu_mm_order_dot_raw(o, t, K, w, x + c * xstride);
}


/* ---- AVX2 + FMA (the ALICE_CPU_ISA=avx2 level): 2 x 2 tiles, each
 * output's 16 gemm lanes as two ymm, the same arithmetic as above ---- */
#if defined(__x86_64__) && defined(__GNUC__)
#define MMO_AVX2 __attribute__((target("avx2,fma,f16c")))

MMO_AVX2 static inline float red16_y(__m256 lo, __m256 hi)
{
	__m256 t8 = _mm256_add_ps(hi, lo); /* a[i + 8] + a[i] */
	__m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
	__m128 u = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
	return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

MMO_AVX2 static inline __m256 w8(uint32_t t, const uint8_t *w, int64_t i)
{
	if (t == ALICE_TYPE_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 2 * i)));
	return _mm256_loadu_ps((const float *)w + i);
}

MMO_AVX2 static void gemm2x2_raw_y(enum mm_order o, uint32_t t, int64_t K, const void *w, size_t ws, const float *x,
				   int64_t xs, float *out, size_t os_n, size_t os_m)
{
	__m256 c[2][2][2];
	_Pragma("GCC unroll 2") for (int a = 0; a < 2; a++)
		_Pragma("GCC unroll 2") for (int b = 0; b < 2; b++) c[a][b][0] = c[a][b][1] = _mm256_setzero_ps();
	const uint8_t *wr[2] = {w, (const uint8_t *)w + ws};
	if (o == MM_ORD_GEMM_BF16) {
		const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
		for (int64_t l = 0; l + 32 <= K; l += 32) {
			__m256 wo[2][2], we[2][2];
			_Pragma("GCC unroll 2") for (int a = 0; a < 2; a++)
				_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
					__m256i p = _mm256_loadu_si256((const __m256i *)(wr[a] + 2 * l + 32 * h));
					wo[a][h] = _mm256_castsi256_ps(_mm256_and_si256(p, hi16));
					we[a][h] = _mm256_castsi256_ps(_mm256_slli_epi32(p, 16));
				}
			_Pragma("GCC unroll 2") for (int b = 0; b < 2; b++) {
				const float *xb = x + b * xs + l;
				_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
					__m256 x0 = _mm256_loadu_ps(xb + 16 * h), x1 = _mm256_loadu_ps(xb + 16 * h + 8);
					__m256 xo = _mm256_castpd_ps(_mm256_permute4x64_pd(
						_mm256_castps_pd(_mm256_shuffle_ps(x0, x1, 0xDD)), 0xD8));
					__m256 xe = _mm256_castpd_ps(_mm256_permute4x64_pd(
						_mm256_castps_pd(_mm256_shuffle_ps(x0, x1, 0x88)), 0xD8));
					_Pragma("GCC unroll 2") for (int a = 0; a < 2; a++) {
						c[a][b][h] = _mm256_fmadd_ps(wo[a][h], xo, c[a][b][h]);
						c[a][b][h] = _mm256_fmadd_ps(we[a][h], xe, c[a][b][h]);
					}
				}
			}
		}
	} else {
		for (int64_t l = 0; l + 16 <= K; l += 16) {
			__m256 wv[2][2];
			_Pragma("GCC unroll 2") for (int a = 0; a < 2; a++) {
				wv[a][0] = w8(t, wr[a], l);
				wv[a][1] = w8(t, wr[a], l + 8);
			}
			_Pragma("GCC unroll 2") for (int b = 0; b < 2; b++)
				_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
					__m256 xv = _mm256_loadu_ps(x + b * xs + l + 8 * h);
					_Pragma("GCC unroll 2") for (int a = 0; a < 2; a++)
						c[a][b][h] = _mm256_fmadd_ps(wv[a][h], xv, c[a][b][h]);
				}
		}
	}
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++) {
			float v = red16_y(c[a][b][0], c[a][b][1]);
			memcpy((uint8_t *)out + (size_t)a * os_n + (size_t)b * os_m, &v, 4);
		}
}
/* the vec_dot orders for one row (decode at the avx2 level) */
MMO_AVX2 static inline __attribute__((always_inline)) void odd_even_y(const float *x, __m256 *xo, __m256 *xe)
{
	__m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
	*xo = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x0, x1, 0xDD)), 0xD8));
	*xe = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(x0, x1, 0x88)), 0xD8));
}

MMO_AVX2 static inline __attribute__((always_inline)) float vec_raw_y(const enum mm_order o, const uint32_t t, int64_t K,
								    const void *wv, const float *x, const float *xsp)
{
	const uint8_t *w = wv;
	int64_t i = 0;
	float p[64];
	if (o == MM_ORD_VEC_BF16) {
		const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
		__m256 c[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
		for (; i + 64 <= K; i += 64)
			_Pragma("GCC unroll 2") for (int g = 0; g < 2; g++) /* elements 32g .. 32g + 31: chain c[g] */
				_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
					__m256i pw = _mm256_loadu_si256((const __m256i *)(w + 2 * (i + 32 * g + 16 * h)));
					__m256 xo, xe;
					if (xsp) { /* x split once per row run (split_odd_even) */
						xo = _mm256_loadu_ps(xsp + i + 32 * g + 16 * h);
						xe = _mm256_loadu_ps(xsp + i + 32 * g + 16 * h + 8);
					} else {
						odd_even_y(x + i + 32 * g + 16 * h, &xo, &xe);
					}
					c[g][h] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(pw, hi16)), xo, c[g][h]);
					c[g][h] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(pw, 16)), xe, c[g][h]);
				}
		double s = 0.0;
		if (i) {
			s = (double)red16_y(c[0][0], c[0][1]);
			s += (double)red16_y(c[1][0], c[1][1]);
		}
		for (int64_t l = i; l < K; l++) {
			uint32_t u = (uint32_t)((const uint16_t *)w)[l] << 16;
			float f;
			memcpy(&f, &u, 4);
			p[l - i] = f * x[l];
		}
		for (int64_t l = 0; l < K - i; l++)
			s += (double)p[l];
		return (float)s;
	}
	__m256 a[4][2];
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
		a[j][0] = a[j][1] = _mm256_setzero_ps();
	for (; i + 64 <= K; i += 64)
		_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
			_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
				a[j][h] = _mm256_fmadd_ps(w8(t, w, i + 16 * j + 8 * h), _mm256_loadu_ps(x + i + 16 * j + 8 * h), a[j][h]);
	float s = 0.0f;
	if (i)
		_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
			a[0][h] = _mm256_add_ps(a[0][h], a[2][h]);
			a[1][h] = _mm256_add_ps(a[1][h], a[3][h]);
			a[0][h] = _mm256_add_ps(a[0][h], a[1][h]);
		}
	if (i)
		s = red16_y(a[0][0], a[0][1]);
	for (int64_t l = i; l < K; l++) {
		float wl = t == ALICE_TYPE_F16 ? _cvtsh_ss(((const uint16_t *)w)[l]) : ((const float *)w)[l];
		p[l - i] = wl * x[l];
	}
	if (o == MM_ORD_VEC_F16) {
		double d = s;
		for (int64_t l = 0; l < K - i; l++)
			d += (double)p[l];
		return (float)d;
	}
	for (int64_t l = 0; l < K - i; l++)
		s = s + p[l];
	return s;
}

/* one loop per order and type, the row kernel inlined: the generic one kept
 * its accumulators in memory (F16 decode at 28 GB/s against 42 on zmm) */
#define ROWS_Y(o, t, xsp)                                                                                       \
	for (int64_t r = 0; r < n; r++) {                                                                       \
		float v = vec_raw_y(o, t, K, (const uint8_t *)w + (size_t)r * ws, x, xsp);                     \
		memcpy((uint8_t *)out + (size_t)r * os, &v, 4);                                                 \
	}
MMO_AVX2 static void rows_y(enum mm_order o, uint32_t t, int64_t K, const void *w, size_t ws, const float *x,
			   int64_t n, float *out, size_t os)
{
	if (o == MM_ORD_VEC_BF16 && K <= 8192) { /* x's odd and even elements split once for all rows */
		float xsp[8192];
		split_odd_even(K, x, xsp);
		ROWS_Y(MM_ORD_VEC_BF16, ALICE_TYPE_BF16, xsp)
	} else if (o == MM_ORD_VEC_BF16) {
		ROWS_Y(MM_ORD_VEC_BF16, ALICE_TYPE_BF16, NULL)
	} else if (o == MM_ORD_VEC_F16 && t == ALICE_TYPE_F16) {
		ROWS_Y(MM_ORD_VEC_F16, ALICE_TYPE_F16, NULL)
	} else if (o == MM_ORD_VEC_F16) {
		ROWS_Y(MM_ORD_VEC_F16, ALICE_TYPE_F32, NULL)
	} else if (t == ALICE_TYPE_F16) {
		ROWS_Y(MM_ORD_VEC_F32, ALICE_TYPE_F16, NULL)
	} else {
		ROWS_Y(MM_ORD_VEC_F32, ALICE_TYPE_F32, NULL)
	}
}
#undef ROWS_Y

/* The gemm orders on weight rows widened to floats (cpu_mm_order_widen4:
 * vcvtph2ps in the loop cost a third of the fma rate), 4 weight rows x NX
 * (1..3) activation rows, elements [k0, k1) added to acc. Each output's 16
 * lanes are two independent chains of 8 (lane blocks h = 0, 1), taken in
 * two passes so that 12 accumulators, the NX activation vectors and a
 * weight vector fit the 16 registers: 7 loads per 12 fmas (both halves at
 * once, as 2 x 3 tiles: 14, and load-bound at 67% of the fma rate).
 * F16: lane block h of a 16-element step takes elements 8h..8h+7. BF16:
 * the rows (weights and activations alike) hold each 16 values' 8 odd
 * elements before their 8 even ones; lane block h of a 32-element step
 * holds pairs 8h..8h+7 and adds the odd product, then the even one (exact
 * products, so fma is the vdpbf16ps step). */
MMO_AVX2 static inline __attribute__((always_inline)) void wtile_y(const int NX, const bool bf16, int64_t k0, int64_t k1,
								  int64_t K, const float *w, const float *x, int64_t xs,
								  float *acc, uint8_t *out, size_t os_n, size_t os_m)
{
	const int64_t step = bf16 ? 32 : 16;
	_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
		__m256 c[4][3];
		_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
			_Pragma("GCC unroll 3") for (int b = 0; b < NX; b++)
				c[a][b] = k0 ? _mm256_loadu_ps(acc + (a * NX + b) * 16 + 8 * h) : _mm256_setzero_ps();
		const int64_t o0 = bf16 ? 16 * h : 8 * h;
		for (int64_t l = k0; l + step <= k1; l += step)
			_Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
				if (e && !bf16)
					break;
				const int64_t o = l + o0 + 8 * e;
				__m256 xv[3];
				_Pragma("GCC unroll 3") for (int b = 0; b < NX; b++) xv[b] = _mm256_loadu_ps(x + b * xs + o);
				_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++) {
					__m256 wv = _mm256_loadu_ps(w + 4 * (o - k0) + 8 * a);
					_Pragma("GCC unroll 3") for (int b = 0; b < NX; b++) c[a][b] = _mm256_fmadd_ps(wv, xv[b], c[a][b]);
				}
			}
		if (h == 1 && k1 == K) { /* the last chunk: the lanes' sums go out */
			_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
				_Pragma("GCC unroll 3") for (int b = 0; b < NX; b++) {
					float v = red16_y(_mm256_loadu_ps(acc + (a * NX + b) * 16), c[a][b]);
					memcpy(out + (size_t)a * os_n + (size_t)b * os_m, &v, 4);
				}
		} else {
			_Pragma("GCC unroll 4") for (int a = 0; a < 4; a++)
				_Pragma("GCC unroll 3") for (int b = 0; b < NX; b++)
					_mm256_storeu_ps(acc + (a * NX + b) * 16 + 8 * h, c[a][b]);
		}
	}
}

MMO_AVX2 static void wtile_any(bool bf16, int nx, int64_t k0, int64_t k1, int64_t K, const float *w, const float *x,
			       int64_t xs, float *acc, uint8_t *out, size_t os_n, size_t os_m)
{
#define WT(n, b) wtile_y(n, b, k0, k1, K, w, x, xs, acc, out, os_n, os_m)
	if (bf16) {
		if (nx == 3)
			WT(3, true);
		else if (nx == 2)
			WT(2, true);
		else
			WT(1, true);
	} else {
		if (nx == 3)
			WT(3, false);
		else if (nx == 2)
			WT(2, false);
		else
			WT(1, false);
	}
#undef WT
}

/* n values of one F16 row widened into the 4-row interleaved layout (its
 * 8-value chunks 32 floats apart) */
MMO_AVX2 static void widen4_f16_y(int64_t n, const uint16_t *w, float *dst)
{
	for (int64_t i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + 4 * i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))));
}
#endif

bool cpu_mm_order_f16_tiles(int64_t K)
{
	return K % 16 == 0 && (use_avx512() || have_fma());
}

void cpu_mm_order_gemm_f16(int64_t K, const void *w, size_t ws, const float *x, int64_t xs, int nx, float *out,
			   size_t os_n, size_t os_m)
{
#if defined(__x86_64__) && defined(__GNUC__)
	gemm4xn_f16_any(nx, K, w, ws, x, xs, out, os_n, os_m);
#else
	(void)K, (void)w, (void)ws, (void)x, (void)xs, (void)nx, (void)out, (void)os_n, (void)os_m;
#endif
}

void cpu_mm_order_wtile(uint32_t t, int nx, int64_t k0, int64_t k1, int64_t K, const float *w, const float *x,
			int64_t xs, float *acc, uint8_t *out, size_t os_n, size_t os_m)
{
#if defined(__x86_64__) && defined(__GNUC__)
	wtile_any(t == ALICE_TYPE_BF16, nx, k0, k1, K, w, x, xs, acc, out, os_n, os_m);
#else
	(void)t, (void)nx, (void)k0, (void)k1, (void)K, (void)w, (void)x, (void)xs, (void)acc, (void)out, (void)os_n,
		(void)os_m;
#endif
}


size_t cpu_mm_order_widened_row(uint32_t t, int64_t K)
{
	if (t != ALICE_TYPE_F16 && t != ALICE_TYPE_BF16)
		return 0;
	if (t == ALICE_TYPE_F16 ? !cpu_mm_order_f16_tiles(K) : !cpu_mm_order_bf16_packed(K))
		return 0;
	return use_avx512() ? 0 : (size_t)K * 4;
}

void cpu_mm_order_widen4(uint32_t t, int64_t k0, int64_t k1, const void *w, size_t ws, float *dst)
{
	float f[16], g[16];
	const int64_t K = k1 - k0;
	for (int a = 0; a < 4; a++) {
		const uint16_t *wr = (const uint16_t *)((const uint8_t *)w + (size_t)a * ws) + k0;
		if (t == ALICE_TYPE_F16) {
#if defined(__x86_64__) && defined(__GNUC__)
			widen4_f16_y(K, wr, dst + 8 * a);
			continue;
#else
			for (int64_t i = 0; i < K; i++)
				dst[4 * (i & ~(int64_t)7) + 8 * a + (i & 7)] = alice_fp16_to_fp32(wr[i]);
			continue;
#endif
		}
		for (int64_t i = 0; i + 16 <= K; i += 16) {
			for (int e = 0; e < 16; e++) {
				uint32_t u = (uint32_t)wr[i + e] << 16;
				memcpy(&f[e], &u, 4);
			}
			split_odd_even(16, f, g);
			memcpy(dst + 4 * i + 8 * a, g, 32);
			memcpy(dst + 4 * (i + 8) + 8 * a, g + 8, 32);
		}
	}
}

size_t cpu_mm_order_bf16_packed(int64_t K)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (K % 32 != 0)
		return 0;
	if (use_bf16dp())
		return (size_t)K * 2;
	if (!use_avx512() && have_fma())
		return (size_t)K * 4;
#else
	(void)K;
#endif
	return 0;
}

void cpu_mm_order_bf16_pack(int64_t K, const float *x, void *xp)
{
#if defined(__x86_64__) && defined(__GNUC__)
	bool bf16 = use_bf16dp();
#else
	bool bf16 = false;
#endif
	if (bf16) { /* already rounded: rounding again gives the same bits */
		cpu_k->round_bf16(K, x, NULL, xp);
		return;
	}
	split_odd_even(K, x, xp);
}

void cpu_mm_order_gemm_bf16p(int64_t K, const void *w, size_t ws, const void *xp, size_t xps, int nx, float *out,
			     size_t os_n, size_t os_m)
{
#if defined(__x86_64__) && defined(__GNUC__)
	gemm4xn_bf16p_any(nx, K, w, ws, xp, (int64_t)(xps / 2), out, os_n, os_m);
#else
	(void)K, (void)w, (void)ws, (void)xp, (void)xps, (void)nx, (void)out, (void)os_n, (void)os_m;
#endif
}

void cpu_mm_order_dot_raw4x4(enum mm_order o, uint32_t t, int64_t K, const void *w, size_t ws, const float *x,
			     int64_t xstride, float *out, size_t os_n, size_t os_m)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (t == ALICE_TYPE_BF16 && o == MM_ORD_GEMM_BF16 && use_bf16dp()) {
		gemm4x4_bf16_dp(K, w, ws, x, xstride, out, os_n, os_m);
		return;
	}
	if (use_avx512() && (o == MM_ORD_GEMM16 || o == MM_ORD_GEMM_BF16) && (t == ALICE_TYPE_BF16) == (o == MM_ORD_GEMM_BF16)) {
		gemm4x4_raw_v(o, t, K, w, ws, x, xstride, out, os_n, os_m);
		return;
	}
	if (have_fma() && (o == MM_ORD_GEMM16 || o == MM_ORD_GEMM_BF16) && (t == ALICE_TYPE_BF16) == (o == MM_ORD_GEMM_BF16)) {
		for (int a = 0; a < 4; a += 2)
			for (int b = 0; b < 4; b += 2)
				gemm2x2_raw_y(o, t, K, (const uint8_t *)w + (size_t)a * ws, ws, x + b * xstride, xstride,
					      (float *)((uint8_t *)out + (size_t)a * os_n + (size_t)b * os_m), os_n, os_m);
		return;
	}
#endif
	for (int a = 0; a < 4; a++) {
		float r4[4];
		cpu_mm_order_dot_raw4(o, t, K, (const uint8_t *)w + (size_t)a * ws, x, xstride, r4);
		for (int b = 0; b < 4; b++)
			memcpy((uint8_t *)out + (size_t)a * os_n + (size_t)b * os_m, &r4[b], 4);
	}
}

/* Many weight rows against one activation row (decode): the order and the
 * ISA are chosen once, and the row kernel is inlined into the loop, so short
 * rows (tiny models, K = 16) do not pay a dispatch per row. */
#if defined(__x86_64__) && defined(__GNUC__)
#define ROWS_V(expr)                                                                                            \
	for (int64_t r = 0; r < n; r++) {                                                                       \
		const void *wr = (const uint8_t *)w + (size_t)r * ws;                                           \
		float v = (expr);                                                                               \
		memcpy((uint8_t *)out + (size_t)r * os, &v, 4);                                                 \
	}
MMO_AVX512 static void rows_v(enum mm_order o, uint32_t t, int64_t K, const void *w, size_t ws, const float *x,
			      int64_t n, float *out, size_t os)
{
	switch (o) {
	case MM_ORD_GEMM16:
	case MM_ORD_GEMM_BF16: ROWS_V(gemm_raw_v(o, t, K, wr, x)) break;
	case MM_ORD_VEC_F32: ROWS_V(vec_raw_v(t, K, wr, x, false)) break;
	case MM_ORD_VEC_F16: ROWS_V(vec_raw_v(t, K, wr, x, true)) break;
	case MM_ORD_VEC_BF16: ROWS_V(vec_bf16_raw_v(K, wr, x)) break;
	}
}
#undef ROWS_V
#endif

void cpu_mm_order_dot_rows(enum mm_order o, uint32_t t, int64_t K, const void *w, size_t ws, const float *x,
			   int64_t n, float *out, size_t os)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (t == ALICE_TYPE_BF16 && (o == MM_ORD_GEMM_BF16 || o == MM_ORD_VEC_BF16) && use_bf16dp()) {
		rows_bf16_dp(o, K, w, ws, x, n, out, os);
		return;
	}
	if (use_avx512()) {
		rows_v(o, t, K, w, ws, x, n, out, os);
		return;
	}
#endif
	bool fma = have_fma();
#if defined(__x86_64__) && defined(__GNUC__)
	if (fma && (o == MM_ORD_VEC_F32 || o == MM_ORD_VEC_F16 || o == MM_ORD_VEC_BF16) &&
	    (t == ALICE_TYPE_BF16) == (o == MM_ORD_VEC_BF16)) {
		rows_y(o, t, K, w, ws, x, n, out, os);
		return;
	}
#endif
	for (int64_t r = 0; r < n; r++) {
		const void *wr = (const uint8_t *)w + (size_t)r * ws;
		float v = fma ? raw_fma(o, t, K, wr, x) : raw_generic(o, t, K, wr, x);
		memcpy((uint8_t *)out + (size_t)r * os, &v, 4);
	}
}
