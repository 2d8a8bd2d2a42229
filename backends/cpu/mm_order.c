/* mm_order.c — llama.cpp's float-weight dot-product orders (see mm_order.h):
 * a portable version (fmaf) and an AVX-512 one with the same arithmetic. */
#include <math.h>
#include <stdatomic.h>

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

static float gemm16_s(int64_t K, const float *w, const float *x)
{
	float acc[16] = {0};
	for (int64_t l = 0; l + 16 <= K; l += 16)
		for (int i = 0; i < 16; i++)
			acc[i] = fmaf(w[l + i], x[l + i], acc[i]);
	return red16(acc);
}

static float vec_s(int64_t K, const float *w, const float *x, bool dtail)
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

static float gemm_bf16_s(int64_t K, const float *w, const float *x)
{
	float acc[16] = {0};
	for (int64_t l = 0; l + 32 <= K; l += 32)
		dpbf16_s(acc, w + l, x + l);
	return red16(acc);
}

static float vec_bf16_s(int64_t K, const float *w, const float *x)
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

/* ---- AVX-512 (the same arithmetic, lanes in registers) ---- */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MMO_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))

MMO_AVX512 static float red16_v(__m512 a)
{
	float t[16];
	_mm512_storeu_ps(t, a);
	return red16(t);
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
		h = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
		    __builtin_cpu_supports("fma");
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
	switch (o) {
	case MM_ORD_GEMM16: return gemm16_s(K, w, x);
	case MM_ORD_VEC_F32: return vec_s(K, w, x, false);
	case MM_ORD_VEC_F16: return vec_s(K, w, x, true);
	case MM_ORD_GEMM_BF16: return gemm_bf16_s(K, w, x);
	case MM_ORD_VEC_BF16: return vec_bf16_s(K, w, x);
	}
	return 0.0f;
}
