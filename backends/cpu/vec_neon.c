/* vec_neon.c — AArch64 NEON kernels. */
#include "cpu_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

static float n_dot_f32(int64_t n, const float *a, const float *b)
{
	float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
		s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
	}
	float s = vaddvq_f32(vaddq_f32(s0, s1));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

void cpu_kernels_neon(struct cpu_kernels *k)
{
	k->dot_f32 = n_dot_f32;
	k->isa = "neon";
}
#endif
