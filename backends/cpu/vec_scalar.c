/* vec_scalar.c — portable kernels (the fallback on every ISA) and the
 * run-time choice of the kernel table (ALICE_CPU_ISA=scalar|avx2 (no
 * AVX-VNNI)|avxvnni|avx512 (no AMX)|neon caps it, for testing). The
 * quantized dots have no scalar version: the matmul's generic path
 * dequantizes the weight row and rounds activations exactly as the integer
 * kernels see them, so results agree. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

const struct cpu_kernels *cpu_k CPU_HIDDEN;

static float s_dot_f32(int64_t n, const float *a, const float *b)
{
	float acc[8] = {0};
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			acc[j] += a[i + j] * b[i + j];
	float s = 0.0f;
	for (; i < n; i++)
		s += a[i] * b[i];
	for (int j = 0; j < 8; j++)
		s += acc[j];
	return s;
}

static float s_dot_f16_f32(int64_t n, const uint16_t *a, const float *b)
{
	float s = 0.0f;
	for (int64_t i = 0; i < n; i++)
		s += alice_fp16_to_fp32(a[i]) * b[i];
	return s;
}

static void s_axpy_f16(int64_t n, float s, const uint16_t *x, float *acc)
{
	for (int64_t i = 0; i < n; i++)
		acc[i] += s * alice_fp16_to_fp32(x[i]);
}

static void s_axpy_f32(int64_t n, float s, const float *x, float *acc)
{
	for (int64_t i = 0; i < n; i++)
		acc[i] += s * x[i];
}

static void s_scale_f32(int64_t n, float s, float *x)
{
	for (int64_t i = 0; i < n; i++)
		x[i] *= s;
}

static void s_f16_to_f32(int64_t n, const uint16_t *src, float *dst)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] = alice_fp16_to_fp32(src[i]);
}

static void s_f32_to_f16(int64_t n, const float *src, uint16_t *dst)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] = alice_fp32_to_fp16(src[i]);
}

static void s_round_bf16(int64_t n, const float *x, float *y, uint16_t *yb)
{
	for (int64_t i = 0; i < n; i++) {
		uint16_t h = alice_fp32_to_bf16(x[i]);
		if (y)
			y[i] = alice_bf16_to_fp32(h);
		if (yb)
			yb[i] = h;
	}
}

static float round_fp16(float x)
{
	return alice_fp16_to_fp32(alice_fp32_to_fp16(x));
}

/* Q8_0/Q8_1-style: d = amax/127, q = round-to-even(x * 127/amax). */
static void s_quant_q8_0(int64_t n, const float *x, struct act_q8_0 *y)
{
	for (int64_t b = 0; b < n / QK8; b++, x += QK8, y++) {
		float amax = 0.0f;
		for (int j = 0; j < QK8; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
		int sum = 0;
		for (int j = 0; j < QK8; j++) {
			int q = (int)nearbyintf(x[j] * id);
			y->q[j] = (int8_t)q;
			sum += q;
		}
		y->d = round_fp16(d);
		y->s = round_fp16(d * (float)sum);
	}
}

/* Q8_K-style: the value of largest magnitude maps to -127. */
static void s_quant_q8_k(int64_t n, const float *x, struct act_q8_k *y)
{
	for (int64_t b = 0; b < n / QKK; b++, x += QKK, y++) {
		float max = 0.0f, amax = 0.0f;
		for (int j = 0; j < QKK; j++) {
			float ax = fabsf(x[j]);
			if (ax > amax) {
				amax = ax;
				max = x[j];
			}
		}
		if (amax == 0.0f) {
			memset(y, 0, sizeof(*y));
			continue;
		}
		float iscale = -127.0f / max;
		for (int j = 0; j < QKK; j++) {
			int v = (int)nearbyintf(iscale * x[j]);
			y->q[j] = (int8_t)(v > 127 ? 127 : v);
		}
		for (int j = 0; j < QKK / 16; j++) {
			int s = 0;
			for (int i = 0; i < 16; i++)
				s += y->q[j * 16 + i];
			y->bsums[j] = (int16_t)s;
		}
		y->d = 1.0f / iscale;
	}
}

/* Q4_1 and Q5_1 against Q8_1-style blocks, as ggml's generic dots: the
 * integer sum times d_w d_a plus m_w times the block's fp16-rounded
 * d_a sum(q) (the generic dequantize-and-dot path misses that rounding:
 * 0.45-1.2 logit at position 0 of the parity fixtures) */
static float s_h(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return alice_fp16_to_fp32(h);
}

static void s_dot_q4_1(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	float sumf = 0.0f;
	for (int64_t b = 0; b < k / QK8; b++, wb += 20, a++) {
		int sumi = 0;
		for (int j = 0; j < QK8 / 2; j++)
			sumi += (wb[4 + j] & 0xf) * a->q[j] + (wb[4 + j] >> 4) * a->q[j + QK8 / 2];
		sumf += (s_h(wb) * a->d) * (float)sumi + s_h(wb + 2) * a->s;
	}
	*out = sumf;
}

static void s_dot_q5_1(int64_t k, const void *w, const void *act, float *out)
{
	const uint8_t *wb = w;
	const struct act_q8_0 *a = act;
	float sumf = 0.0f;
	for (int64_t b = 0; b < k / QK8; b++, wb += 24, a++) {
		uint32_t qh;
		memcpy(&qh, wb + 4, 4);
		int sumi = 0;
		for (int j = 0; j < QK8 / 2; j++) {
			int x0 = (wb[8 + j] & 0xf) | (int)(((qh >> j) << 4) & 0x10);
			int x1 = (wb[8 + j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
			sumi += x0 * a->q[j] + x1 * a->q[j + QK8 / 2];
		}
		sumf += (s_h(wb) * a->d) * (float)sumi + s_h(wb + 2) * a->s;
	}
	*out = sumf;
}

void cpu_kernels_scalar(struct cpu_kernels *k)
{
	memset(k, 0, sizeof(*k));
	k->isa = "scalar";
	k->dot_f32 = s_dot_f32;
	k->dot_f16_f32 = s_dot_f16_f32;
	k->axpy_f16 = s_axpy_f16;
	k->axpy_f32 = s_axpy_f32;
	k->scale_f32 = s_scale_f32;
	k->f16_to_f32 = s_f16_to_f32;
	k->f32_to_f16 = s_f32_to_f16;
	k->round_bf16 = s_round_bf16;
	k->quant_q8_0 = s_quant_q8_0;
	k->quant_q8_k = s_quant_q8_k;
	k->dot[ALICE_TYPE_Q4_1] = s_dot_q4_1;
	k->dot[ALICE_TYPE_Q5_1] = s_dot_q5_1;
}

enum act_fmt cpu_act_of(uint32_t type)
{
	switch (type) {
	case ALICE_TYPE_F32: return ACT_F32;
	case ALICE_TYPE_F16: return ACT_F16;
	case ALICE_TYPE_BF16: return ACT_BF16;
	case ALICE_TYPE_Q2_K:
	case ALICE_TYPE_Q3_K:
	case ALICE_TYPE_Q4_K:
	case ALICE_TYPE_Q5_K:
	case ALICE_TYPE_Q6_K:
	case ALICE_TYPE_IQ4_XS:
		return ACT_Q8_K;
	default:
		return ACT_Q8_0; /* Q4_0..Q8_0, IQ4_NL, MXFP4, Q1_0 */
	}
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

struct x86_feat {
	bool avx2, avx512; /* avx512: F+BW+VL+DQ+VNNI, with OS support */
	bool avx_vnni;     /* VEX vpdpbusd on ymm */
	bool amx;          /* AMX-TILE + AMX-INT8, tile data granted by the OS */
};

/* Linux hands out the 8 KiB AMX tile state only on request (per process). */
static bool amx_permit(void)
{
#if defined(__x86_64__) && defined(SYS_arch_prctl)
	const long req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
	return syscall(SYS_arch_prctl, req_xcomp_perm, xfeature_xtiledata) == 0;
#else
	return false;
#endif
}

static struct x86_feat x86_detect(void)
{
	struct x86_feat f = {false, false, false, false};
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return f;
	bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12), f16c = c & (1u << 29);
	if (!osxsave || !avx || !fma || !f16c)
		return f;
	unsigned xlo, xhi;
	__asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
	if ((xlo & 0x6) != 0x6)
		return f;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return f;
	f.avx2 = b & (1u << 5);
	unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
	__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
	f.avx_vnni = f.avx2 && (a1 & (1u << 4));
	bool a512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31)) &&
		    (c & (1u << 11)) && (xlo & 0xe0) == 0xe0;
	f.avx512 = f.avx2 && a512;
	bool amx = (d & (1u << 24)) && (d & (1u << 25)) && (xlo & 0x60000) == 0x60000;
	f.amx = f.avx512 && amx && amx_permit();
	return f;
}
#endif

/* The SIMD features cpuid reports (and the OS enables), as words, so that
 * figures taken on different machines can be told apart (device_info). */
void cpu_flags_string(char *out, size_t len)
{
	out[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d, a1 = 0, b1 = 0, c1 = 0, d1 = 0;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return;
	unsigned c_1 = c;
	unsigned xlo = 0, xhi = 0;
	if (c_1 & (1u << 27))
		__asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		b = c = d = 0;
	__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
	bool ymm = (xlo & 0x6) == 0x6, zmm = ymm && (xlo & 0xe0) == 0xe0;
	const struct {
		const char *name;
		bool on;
	} f[] = {
		{"fma", ymm && (c_1 & (1u << 12))},	 {"f16c", ymm && (c_1 & (1u << 29))},
		{"avx2", ymm && (b & (1u << 5))},	 {"avx_vnni", ymm && (a1 & (1u << 4))},
		{"avx512f", zmm && (b & (1u << 16))},	 {"avx512dq", zmm && (b & (1u << 17))},
		{"avx512bw", zmm && (b & (1u << 30))},	 {"avx512vl", zmm && (b & (1u << 31))},
		{"avx512_vnni", zmm && (c & (1u << 11))}, {"avx512_vbmi", zmm && (c & (1u << 1))},
		{"avx512_bf16", zmm && (a1 & (1u << 5))}, {"avx512_fp16", zmm && (d & (1u << 23))},
		{"amx_tile", (d & (1u << 24)) != 0},	 {"amx_int8", (d & (1u << 25)) != 0},
		{"amx_bf16", (d & (1u << 22)) != 0},
	};
	size_t n = 0;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].on && n + strlen(f[i].name) + 2 < len)
			n += (size_t)snprintf(out + n, len - n, "%s%s", n ? " " : "", f[i].name);
#elif defined(__aarch64__)
	snprintf(out, len, "neon");
#else
	(void)len;
#endif
}

static struct cpu_kernels k_table;
static pthread_once_t k_once = PTHREAD_ONCE_INIT;

static void select_once(void)
{
	struct cpu_kernels k;
	cpu_kernels_scalar(&k);
	/* ALICE_CPU_ISA caps the level (for tests); it never enables an ISA the
	 * CPU lacks. */
	const char *force = getenv("ALICE_CPU_ISA");
	int cap = 99;
	if (force && strcmp(force, "scalar") == 0)
		cap = 0;
	else if (force && strcmp(force, "avx2") == 0) /* AVX2 without AVX-VNNI */
		cap = 1;
	else if (force && strcmp(force, "avxvnni") == 0)
		cap = 2;
	else if (force && strcmp(force, "avx512") == 0)
		cap = 3;
#if defined(__x86_64__) || defined(__i386__)
	struct x86_feat f = x86_detect();
	bool amx = false;
#if defined(__x86_64__)
	amx = f.amx && cap >= 4;
	if (amx)
		cpu_kernels_amx(&k);
#endif
	if (amx)
		(void)0;
	else if (f.avx512 && cap >= 3)
		cpu_kernels_avx512(&k);
	else if (f.avx2 && cap >= 1)
		cpu_kernels_avx2(&k, f.avx_vnni && cap >= 2);
	if (f.avx2 && cap >= 1) /* llama.cpp's orders for the types only its kernels define */
		cpu_kernels_llorder(&k, true);
#elif defined(__aarch64__)
	if (cap >= 1)
		cpu_kernels_neon(&k);
#endif
	k_table = k;
	cpu_k = &k_table;
}

void cpu_kernels_select(void)
{
	pthread_once(&k_once, select_once);
}
