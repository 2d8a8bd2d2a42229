/* vec_neon.c — AArch64 NEON kernels (baseline ARMv8: every aarch64 CPU has
 * them, so no run-time check). Integer dots widen int8 x int8 products to
 * int16 (vmull_s8) and accumulate pairwise into int32 (vpadalq_s16). Types
 * without a kernel here take the generic path (dequantize + F32 dot). */
#include <string.h>

#include "cpu_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

static float n_dot_f32(int64_t n, const float *a, const float *b)
{
	float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
		s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
		s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
		s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
	}
	for (; i + 4 <= n; i += 4)
		s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
	float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

static inline float32x4_t ld_h4(const uint16_t *p)
{
	return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static inline float h2f(uint16_t h)
{
	return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

static float n_dot_f16_f32(int64_t n, const uint16_t *a, const float *b)
{
	float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		s0 = vfmaq_f32(s0, ld_h4(a + i), vld1q_f32(b + i));
		s1 = vfmaq_f32(s1, ld_h4(a + i + 4), vld1q_f32(b + i + 4));
	}
	float s = vaddvq_f32(vaddq_f32(s0, s1));
	for (; i < n; i++)
		s += h2f(a[i]) * b[i];
	return s;
}

static void n_axpy_f16(int64_t n, float s, const uint16_t *x, float *acc)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), ld_h4(x + i), s));
	for (; i < n; i++)
		acc[i] += s * h2f(x[i]);
}

static void n_axpy_f32(int64_t n, float s, const float *x, float *acc)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), vld1q_f32(x + i), s));
	for (; i < n; i++)
		acc[i] += s * x[i];
}

static void n_scale_f32(int64_t n, float s, float *x)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), s));
	for (; i < n; i++)
		x[i] *= s;
}

static void n_f16_to_f32(int64_t n, const uint16_t *src, float *dst)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1q_f32(dst + i, ld_h4(src + i));
	for (; i < n; i++)
		dst[i] = h2f(src[i]);
}

static void n_f32_to_f16(int64_t n, const float *src, uint16_t *dst)
{
	int64_t i = 0;
	for (; i + 4 <= n; i += 4)
		vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
	for (; i < n; i++)
		dst[i] = alice_fp32_to_fp16(src[i]);
}

static void n_dot_f16(int64_t k, const void *w, const void *act, float *out)
{
	const uint16_t *a = w, *b = act;
	float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
	int64_t i = 0;
	for (; i + 8 <= k; i += 8) {
		s0 = vfmaq_f32(s0, ld_h4(a + i), ld_h4(b + i));
		s1 = vfmaq_f32(s1, ld_h4(a + i + 4), ld_h4(b + i + 4));
	}
	float s = vaddvq_f32(vaddq_f32(s0, s1));
	for (; i < k; i++)
		s += h2f(a[i]) * h2f(b[i]);
	*out = s;
}

static inline float ld_fp16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return h2f(h);
}

/* sum of 16 int8 x int8 products */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
	acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
	return vpadalq_s16(acc, vmull_s8(vget_high_s8(a), vget_high_s8(b)));
}

static void n_dot_q8_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	float32x4_t acc = vdupq_n_f32(0.0f);
	for (int64_t b = 0; b < k / QK8; b++, wb += 34, a++) {
		int32x4_t s = dot16(vdupq_n_s32(0), vld1q_s8((const int8_t *)wb + 2), vld1q_s8(a->q));
		s = dot16(s, vld1q_s8((const int8_t *)wb + 18), vld1q_s8(a->q + 16));
		acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), ld_fp16(wb) * a->d);
	}
	*out = vaddvq_f32(acc);
}

static void n_dot_q4_0(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	float32x4_t acc = vdupq_n_f32(0.0f);
	const uint8x16_t m4 = vdupq_n_u8(0xf);
	const int8x16_t off = vdupq_n_s8(8);
	for (int64_t b = 0; b < k / QK8; b++, wb += 18, a++) {
		uint8x16_t v = vld1q_u8(wb + 2);
		int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m4)), off);
		int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), off);
		int32x4_t s = dot16(vdupq_n_s32(0), lo, vld1q_s8(a->q));
		s = dot16(s, hi, vld1q_s8(a->q + 16));
		acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), ld_fp16(wb) * a->d);
	}
	*out = vaddvq_f32(acc);
}

static void k4_unpack(const uint8_t *q, uint8_t *sc, uint8_t *mn)
{
	for (int j = 0; j < 4; j++) {
		sc[j] = q[j] & 63;
		mn[j] = q[j + 4] & 63;
		sc[j + 4] = (uint8_t)((q[j + 8] & 0xf) | ((q[j] >> 6) << 4));
		mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
	}
}

static void n_dot_q4_k(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	const uint8x16_t m4 = vdupq_n_u8(0xf);
	float s = 0.0f;
	for (int64_t b = 0; b < k / QKK; b++, wb += 144, a++) {
		uint8_t sc[8], mn[8];
		k4_unpack(wb + 4, sc, mn);
		int summ = 0;
		for (int j = 0; j < 8; j++)
			summ += mn[j] * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
		const uint8_t *qs = wb + 16;
		int sumi = 0;
		for (int j = 0; j < 4; j++) {
			uint8x16_t v0 = vld1q_u8(qs + 32 * j), v1 = vld1q_u8(qs + 32 * j + 16);
			const int8_t *q8 = a->q + 64 * j;
			int32x4_t lo = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(v0, m4)), vld1q_s8(q8));
			lo = dot16(lo, vreinterpretq_s8_u8(vandq_u8(v1, m4)), vld1q_s8(q8 + 16));
			int32x4_t hi = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), vld1q_s8(q8 + 32));
			hi = dot16(hi, vreinterpretq_s8_u8(vshrq_n_u8(v1, 4)), vld1q_s8(q8 + 48));
			sumi += vaddvq_s32(lo) * sc[2 * j] + vaddvq_s32(hi) * sc[2 * j + 1];
		}
		s += ld_fp16(wb) * a->d * (float)sumi - ld_fp16(wb + 2) * a->d * (float)summ;
	}
	*out = s;
}

static void n_dot_q6_k(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_k *a = act;
	const uint8x16_t m4 = vdupq_n_u8(0xf), m2 = vdupq_n_u8(3);
	const int8x16_t off = vdupq_n_s8(32);
	float s = 0.0f;
	for (int64_t b = 0; b < k / QKK; b++, wb += 210, a++) {
		const int8_t *sc = (const int8_t *)(wb + 192);
		int sumi = 0;
		for (int n = 0; n < 2; n++) {
			const uint8_t *ql = wb + 64 * n, *qh = wb + 128 + 32 * n;
			const int8_t *q8 = a->q + 128 * n;
			for (int c = 0; c < 2; c++) { /* l in [16c, 16c + 16) */
				uint8x16_t l0 = vld1q_u8(ql + 16 * c), l1 = vld1q_u8(ql + 32 + 16 * c);
				uint8x16_t h = vld1q_u8(qh + 16 * c);
				uint8x16_t u[4];
				u[0] = vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(h, m2), 4));
				u[1] = vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 2), m2), 4));
				u[2] = vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 4), m2), 4));
				u[3] = vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(h, 6), 4));
				for (int g = 0; g < 4; g++) {
					int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(u[g]), off);
					int32x4_t d = dot16(vdupq_n_s32(0), q, vld1q_s8(q8 + 32 * g + 16 * c));
					sumi += vaddvq_s32(d) * sc[8 * n + 2 * g + c];
				}
			}
		}
		s += ld_fp16(wb + 208) * a->d * (float)sumi;
	}
	*out = s;
}

void cpu_kernels_neon(struct cpu_kernels *k)
{
	k->dot_f32 = n_dot_f32;
	k->dot_f16_f32 = n_dot_f16_f32;
	k->axpy_f16 = n_axpy_f16;
	k->axpy_f32 = n_axpy_f32;
	k->scale_f32 = n_scale_f32;
	k->f16_to_f32 = n_f16_to_f32;
	k->f32_to_f16 = n_f32_to_f16;
	k->dot[ALICE_TYPE_F16] = n_dot_f16;
	k->dot[ALICE_TYPE_Q8_0] = n_dot_q8_0;
	k->dot[ALICE_TYPE_Q4_0] = n_dot_q4_0;
	k->dot[ALICE_TYPE_Q4_K] = n_dot_q4_k;
	k->dot[ALICE_TYPE_Q6_K] = n_dot_q6_k;
	k->isa = "neon";
}
#endif
