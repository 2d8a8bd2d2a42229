/* quant.c — ggml type table, fp16/bf16 conversion and the scalar reference
 * dequantizers and quantizers (see quant.h).
 *
 * Block layouts are ggml's (ggml-common.h); all multi-byte fields are little
 * endian and read with memcpy, so blocks need no alignment. The quantizers
 * follow the arithmetic of llama.cpp's reference ("_ref") quantizers closely
 * enough to produce the same bytes for the simple types and (almost always)
 * for the K-quants, so models we make compare like-for-like with theirs.
 *
 * This file is also compiled into each backend .so: it must depend on nothing
 * but libc/libm. */
#include "alice/quant.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <string.h>

#define QK_K 256

/* ---- type table ----------------------------------------------------------- */

#define T_(id_, name_, bs_, ts_, sup_, q_) \
	[id_] = { .name = name_, .block_size = bs_, .type_size = ts_, .supported = sup_, .can_quantize = q_ }

/* Ids ggml removed (4, 5, 31-33, 36-38) have no entry (name NULL -> unknown). */
static const struct alice_type_info type_table[ALICE_TYPE_COUNT] = {
	T_(0, "F32", 1, 4, true, true),
	T_(1, "F16", 1, 2, true, true),
	T_(2, "Q4_0", 32, 18, true, true),
	T_(3, "Q4_1", 32, 20, true, true),
	T_(6, "Q5_0", 32, 22, true, true),
	T_(7, "Q5_1", 32, 24, true, true),
	T_(8, "Q8_0", 32, 34, true, true),
	T_(9, "Q8_1", 32, 36, true, true),
	T_(10, "Q2_K", QK_K, 84, true, true),
	T_(11, "Q3_K", QK_K, 110, true, true),
	T_(12, "Q4_K", QK_K, 144, true, true),
	T_(13, "Q5_K", QK_K, 176, true, true),
	T_(14, "Q6_K", QK_K, 210, true, true),
	T_(15, "Q8_K", QK_K, 292, true, true),
	T_(16, "IQ2_XXS", QK_K, 66, false, false),
	T_(17, "IQ2_XS", QK_K, 74, false, false),
	T_(18, "IQ3_XXS", QK_K, 98, false, false),
	T_(19, "IQ1_S", QK_K, 50, false, false),
	T_(20, "IQ4_NL", 32, 18, true, false),
	T_(21, "IQ3_S", QK_K, 110, false, false),
	T_(22, "IQ2_S", QK_K, 82, false, false),
	T_(23, "IQ4_XS", QK_K, 136, true, false),
	/* plain integer / f64 types: dequantize converts to float (may round) */
	T_(24, "I8", 1, 1, true, false),
	T_(25, "I16", 1, 2, true, false),
	T_(26, "I32", 1, 4, true, false),
	T_(27, "I64", 1, 8, true, false),
	T_(28, "F64", 1, 8, true, false),
	T_(29, "IQ1_M", QK_K, 56, false, false),
	T_(30, "BF16", 1, 2, true, true),
	T_(34, "TQ1_0", QK_K, 54, false, false),
	T_(35, "TQ2_0", QK_K, 66, false, false),
	T_(39, "MXFP4", 32, 17, true, true),
	T_(40, "NVFP4", 64, 36, false, false),
	T_(41, "Q1_0", 128, 18, true, true),
	T_(42, "Q2_0", 64, 18, false, false),
};

const struct alice_type_info *alice_type_info(uint32_t type)
{
	if (type >= ALICE_TYPE_COUNT || !type_table[type].name)
		return NULL;
	return &type_table[type];
}

const char *alice_type_name(uint32_t type)
{
	const struct alice_type_info *ti = alice_type_info(type);
	return ti ? ti->name : "unknown";
}

int alice_type_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int t = 0; t < ALICE_TYPE_COUNT; t++) {
		const char *n = type_table[t].name;
		if (!n)
			continue;
		size_t i = 0;
		while (n[i] && name[i] && toupper((unsigned char)name[i]) == (unsigned char)n[i])
			i++;
		if (!n[i] && !name[i])
			return t;
	}
	return -1;
}

size_t alice_row_size(uint32_t type, int64_t n)
{
	const struct alice_type_info *ti = alice_type_info(type);
	if (!ti || n < 0 || n % ti->block_size)
		return 0;
	return (size_t)(n / ti->block_size) * ti->type_size;
}

/* ---- half / bfloat16 ------------------------------------------------------- */

static uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

float alice_fp16_to_fp32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;
	if (exp == 0) {
		float v = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
		return u2f(f2u(v) | sign);
	}
	if (exp == 31)
		return u2f(sign | 0x7f800000u | (mant << 13));
	return u2f(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t alice_fp32_to_fp16(float f)
{
	uint32_t x = f2u(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t a = x & 0x7fffffffu;
	if (a > 0x7f800000u) /* NaN: keep payload top bits, force quiet */
		return (uint16_t)(sign | 0x7e00 | (a >> 13));
	if (a >= 0x477ff000u) /* >= 65520 rounds to inf */
		return sign | 0x7c00;
	if (a < 0x38800000u) {
		/* below the smallest normal: adding 0.5 (ulp 2^-24, the fp16
		 * subnormal step) rounds to nearest even for us */
		float s = u2f(a) + 0.5f;
		return (uint16_t)(sign | (f2u(s) - 0x3f000000u));
	}
	uint32_t r = (a + 0xfffu + ((a >> 13) & 1)) >> 13;
	return (uint16_t)(sign | (r - 0x1c000u));
}

float alice_bf16_to_fp32(uint16_t h)
{
	return u2f((uint32_t)h << 16);
}

uint16_t alice_fp32_to_bf16(float f)
{
	uint32_t x = f2u(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

/* ---- small helpers ----------------------------------------------------------- */

static float ld_h(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return alice_fp16_to_fp32(h);
}

static void st_h(uint8_t *p, float f)
{
	uint16_t h = alice_fp32_to_fp16(f);
	memcpy(p, &h, 2);
}

/* Round to nearest, ties to even (what ggml's nearest_int does in range). */
static int nearest(float f)
{
	return (int)lrintf(f);
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* e8m0 exponent byte -> 2^(e-128): half the scale, since the fp4 value table
 * below is stored doubled. */
static float e8m0_half(uint8_t e)
{
	return u2f(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

static const int8_t kv_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
				     1, 13, 25, 38, 53, 69, 89, 113 };
static const int8_t kv_mxfp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* 6-bit scale j and min j of a Q4_K/Q5_K 12-byte scales field */
static void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
	}
}

/* ---- dequantizers: one block each ------------------------------------------------ */

static void dq_q4_0(const uint8_t *b, float *y)
{
	float d = ld_h(b);
	for (int j = 0; j < 16; j++) {
		y[j] = (float)((b[2 + j] & 0xf) - 8) * d;
		y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
	}
}

static void dq_q4_1(const uint8_t *b, float *y)
{
	float d = ld_h(b), m = ld_h(b + 2);
	for (int j = 0; j < 16; j++) {
		y[j] = (float)(b[4 + j] & 0xf) * d + m;
		y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
	}
}

static void dq_q5_0(const uint8_t *b, float *y)
{
	float d = ld_h(b);
	uint32_t qh;
	memcpy(&qh, b + 2, 4);
	for (int j = 0; j < 16; j++) {
		int lo = (b[6 + j] & 0xf) | (int)(((qh >> j) & 1) << 4);
		int hi = (b[6 + j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
		y[j] = (float)(lo - 16) * d;
		y[j + 16] = (float)(hi - 16) * d;
	}
}

static void dq_q5_1(const uint8_t *b, float *y)
{
	float d = ld_h(b), m = ld_h(b + 2);
	uint32_t qh;
	memcpy(&qh, b + 4, 4);
	for (int j = 0; j < 16; j++) {
		int lo = (b[8 + j] & 0xf) | (int)(((qh >> j) & 1) << 4);
		int hi = (b[8 + j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
		y[j] = (float)lo * d + m;
		y[j + 16] = (float)hi * d + m;
	}
}

static void dq_q8_0(const uint8_t *b, float *y)
{
	float d = ld_h(b);
	for (int j = 0; j < 32; j++)
		y[j] = (float)(int8_t)b[2 + j] * d;
}

static void dq_q8_1(const uint8_t *b, float *y)
{
	float d = ld_h(b); /* b+2 holds d*sum(q), not needed here */
	for (int j = 0; j < 32; j++)
		y[j] = (float)(int8_t)b[4 + j] * d;
}

/* Q2_K: scales[16] (lo nibble scale, hi nibble min), qs[64], d, dmin */
static void dq_q2_k(const uint8_t *b, float *y)
{
	const uint8_t *sc = b, *qs = b + 16;
	float d = ld_h(b + 80), dmin = ld_h(b + 82);
	for (int e = 0; e < QK_K; e++) {
		int q = (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
		uint8_t s = sc[e / 16];
		y[e] = d * (float)(s & 0xf) * (float)q - dmin * (float)(s >> 4);
	}
}

static void q3k_scales(const uint8_t *s12, int8_t *out)
{
	for (int j = 0; j < 16; j++) {
		int lo = j < 8 ? s12[j] & 0xf : s12[j - 8] >> 4;
		int hi = (s12[8 + j % 4] >> (2 * (j / 4))) & 3;
		out[j] = (int8_t)((lo | (hi << 4)) - 32);
	}
}

/* Q3_K: hmask[32], qs[64], scales[12], d */
static void dq_q3_k(const uint8_t *b, float *y)
{
	const uint8_t *hm = b, *qs = b + 32;
	int8_t sc[16];
	q3k_scales(b + 96, sc);
	float d = ld_h(b + 108);
	for (int e = 0; e < QK_K; e++) {
		int q = (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
		if (!((hm[e % 32] >> (e / 32)) & 1))
			q -= 4;
		y[e] = d * (float)sc[e / 16] * (float)q;
	}
}

/* Q4_K: d, dmin, scales[12], qs[128] */
static void dq_q4_k(const uint8_t *b, float *y)
{
	float d = ld_h(b), dmin = ld_h(b + 2);
	const uint8_t *qs = b + 16;
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		k4_scale_min(j, b + 4, &sc, &m);
		float d1 = d * sc, m1 = dmin * m;
		const uint8_t *q = qs + (j / 2) * 32;
		int sh = (j & 1) * 4;
		for (int l = 0; l < 32; l++)
			y[j * 32 + l] = d1 * (float)((q[l] >> sh) & 0xf) - m1;
	}
}

/* Q5_K: d, dmin, scales[12], qh[32], qs[128] */
static void dq_q5_k(const uint8_t *b, float *y)
{
	float d = ld_h(b), dmin = ld_h(b + 2);
	const uint8_t *qh = b + 16, *qs = b + 48;
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		k4_scale_min(j, b + 4, &sc, &m);
		float d1 = d * sc, m1 = dmin * m;
		const uint8_t *q = qs + (j / 2) * 32;
		int sh = (j & 1) * 4;
		for (int l = 0; l < 32; l++) {
			int v = ((q[l] >> sh) & 0xf) | (((qh[l] >> j) & 1) << 4);
			y[j * 32 + l] = d1 * (float)v - m1;
		}
	}
}

/* Q6_K: ql[128], qh[64], scales[16] (int8), d */
static void dq_q6_k(const uint8_t *b, float *y)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = ld_h(b + 208);
	for (int e = 0; e < QK_K; e++) {
		int n = e / 128, r = e % 128, g = r / 32, l = r % 32;
		int lo = (ql[n * 64 + (g & 1) * 32 + l] >> ((g >> 1) * 4)) & 0xf;
		int hi = (qh[n * 32 + l] >> (2 * g)) & 3;
		y[e] = d * (float)sc[e / 16] * (float)((lo | (hi << 4)) - 32);
	}
}

/* Q8_K: float d, qs[256], bsums[16] */
static void dq_q8_k(const uint8_t *b, float *y)
{
	float d;
	memcpy(&d, b, 4);
	for (int j = 0; j < QK_K; j++)
		y[j] = d * (float)(int8_t)b[4 + j];
}

static void dq_iq4_nl(const uint8_t *b, float *y)
{
	float d = ld_h(b);
	for (int j = 0; j < 16; j++) {
		y[j] = d * (float)kv_iq4nl[b[2 + j] & 0xf];
		y[j + 16] = d * (float)kv_iq4nl[b[2 + j] >> 4];
	}
}

/* IQ4_XS: d, scales_h (u16), scales_l[4], qs[128] */
static void dq_iq4_xs(const uint8_t *b, float *y)
{
	float d = ld_h(b);
	uint16_t sh;
	memcpy(&sh, b + 2, 2);
	const uint8_t *sl = b + 4, *qs = b + 8;
	for (int ib = 0; ib < 8; ib++) {
		int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4);
		float dl = d * (float)(ls - 32);
		for (int j = 0; j < 16; j++) {
			y[ib * 32 + j] = dl * (float)kv_iq4nl[qs[ib * 16 + j] & 0xf];
			y[ib * 32 + j + 16] = dl * (float)kv_iq4nl[qs[ib * 16 + j] >> 4];
		}
	}
}

/* MXFP4: e8m0 exponent, qs[16] of e2m1 codes */
static void dq_mxfp4(const uint8_t *b, float *y)
{
	float d = e8m0_half(b[0]);
	for (int j = 0; j < 16; j++) {
		y[j] = (float)kv_mxfp4[b[1 + j] & 0xf] * d;
		y[j + 16] = (float)kv_mxfp4[b[1 + j] >> 4] * d;
	}
}

/* Q1_0: d, 128 sign bits (bit j%8 of byte j/8; set = +d) */
static void dq_q1_0(const uint8_t *b, float *y)
{
	float d = ld_h(b);
	for (int j = 0; j < 128; j++)
		y[j] = ((b[2 + j / 8] >> (j % 8)) & 1) ? d : -d;
}

typedef void (*dq_block_fn)(const uint8_t *, float *);

static dq_block_fn dq_block(uint32_t type)
{
	switch (type) {
	case ALICE_TYPE_Q4_0: return dq_q4_0;
	case ALICE_TYPE_Q4_1: return dq_q4_1;
	case ALICE_TYPE_Q5_0: return dq_q5_0;
	case ALICE_TYPE_Q5_1: return dq_q5_1;
	case ALICE_TYPE_Q8_0: return dq_q8_0;
	case ALICE_TYPE_Q8_1: return dq_q8_1;
	case ALICE_TYPE_Q2_K: return dq_q2_k;
	case ALICE_TYPE_Q3_K: return dq_q3_k;
	case ALICE_TYPE_Q4_K: return dq_q4_k;
	case ALICE_TYPE_Q5_K: return dq_q5_k;
	case ALICE_TYPE_Q6_K: return dq_q6_k;
	case ALICE_TYPE_Q8_K: return dq_q8_k;
	case ALICE_TYPE_IQ4_NL: return dq_iq4_nl;
	case ALICE_TYPE_IQ4_XS: return dq_iq4_xs;
	case ALICE_TYPE_MXFP4: return dq_mxfp4;
	case ALICE_TYPE_Q1_0: return dq_q1_0;
	default: return NULL;
	}
}

void alice_dequantize(uint32_t type, const void *src, float *dst, int64_t n)
{
	const uint8_t *s = src;
	const struct alice_type_info *ti = alice_type_info(type);
	if (!ti || !ti->supported || n <= 0 || n % ti->block_size)
		return;
	switch (type) {
	case ALICE_TYPE_F32:
		memcpy(dst, s, (size_t)n * 4);
		return;
	case ALICE_TYPE_F16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = ld_h(s + 2 * i);
		return;
	case ALICE_TYPE_BF16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, s + 2 * i, 2);
			dst[i] = alice_bf16_to_fp32(h);
		}
		return;
	case ALICE_TYPE_I8:
		for (int64_t i = 0; i < n; i++)
			dst[i] = (float)(int8_t)s[i];
		return;
	case ALICE_TYPE_I16:
		for (int64_t i = 0; i < n; i++) {
			int16_t v;
			memcpy(&v, s + 2 * i, 2);
			dst[i] = (float)v;
		}
		return;
	case ALICE_TYPE_I32:
		for (int64_t i = 0; i < n; i++) {
			int32_t v;
			memcpy(&v, s + 4 * i, 4);
			dst[i] = (float)v;
		}
		return;
	case ALICE_TYPE_I64:
		for (int64_t i = 0; i < n; i++) {
			int64_t v;
			memcpy(&v, s + 8 * i, 8);
			dst[i] = (float)v;
		}
		return;
	case ALICE_TYPE_F64:
		for (int64_t i = 0; i < n; i++) {
			double v;
			memcpy(&v, s + 8 * i, 8);
			dst[i] = (float)v;
		}
		return;
	default:
		break;
	}
	dq_block_fn fn = dq_block(type);
	int64_t nb = n / ti->block_size;
	for (int64_t i = 0; i < nb; i++)
		fn(s + (size_t)i * ti->type_size, dst + i * ti->block_size);
}

/* ---- quantizers: simple 32-element blocks --------------------------------------- */

/* Value with the largest magnitude (first one on ties), keeping its sign. */
static float signed_absmax(const float *x, int n, float *amax_out)
{
	float amax = 0.0f, max = 0.0f;
	for (int i = 0; i < n; i++) {
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			max = x[i];
		}
	}
	*amax_out = amax;
	return max;
}

static void min_max(const float *x, int n, float *mn, float *mx)
{
	float lo = FLT_MAX, hi = -FLT_MAX;
	for (int i = 0; i < n; i++) {
		if (x[i] < lo)
			lo = x[i];
		if (x[i] > hi)
			hi = x[i];
	}
	*mn = lo;
	*mx = hi;
}

static void q_q4_0(const float *x, uint8_t *b)
{
	float amax, max = signed_absmax(x, 32, &amax);
	float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	st_h(b, d);
	for (int j = 0; j < 16; j++) {
		int a = imin(15, (int8_t)(x[j] * id + 8.5f));
		int c = imin(15, (int8_t)(x[j + 16] * id + 8.5f));
		b[2 + j] = (uint8_t)(a | (c << 4));
	}
}

static void q_q4_1(const float *x, uint8_t *b)
{
	float mn, mx;
	min_max(x, 32, &mn, &mx);
	float d = (mx - mn) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	st_h(b, d);
	st_h(b + 2, mn);
	for (int j = 0; j < 16; j++) {
		int a = imin(15, (int8_t)((x[j] - mn) * id + 0.5f));
		int c = imin(15, (int8_t)((x[j + 16] - mn) * id + 0.5f));
		b[4 + j] = (uint8_t)(a | (c << 4));
	}
}

static void q_q5_0(const float *x, uint8_t *b)
{
	float amax, max = signed_absmax(x, 32, &amax);
	float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	st_h(b, d);
	uint32_t qh = 0;
	for (int j = 0; j < 16; j++) {
		int a = imin(31, (int8_t)(x[j] * id + 16.5f));
		int c = imin(31, (int8_t)(x[j + 16] * id + 16.5f));
		b[6 + j] = (uint8_t)((a & 0xf) | ((c & 0xf) << 4));
		qh |= (uint32_t)(a >> 4) << j;
		qh |= (uint32_t)(c >> 4) << (j + 16);
	}
	memcpy(b + 2, &qh, 4);
}

static void q_q5_1(const float *x, uint8_t *b)
{
	float mn, mx;
	min_max(x, 32, &mn, &mx);
	float d = (mx - mn) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	st_h(b, d);
	st_h(b + 2, mn);
	uint32_t qh = 0;
	for (int j = 0; j < 16; j++) {
		int a = imin(31, (uint8_t)((x[j] - mn) * id + 0.5f));
		int c = imin(31, (uint8_t)((x[j + 16] - mn) * id + 0.5f));
		b[8 + j] = (uint8_t)((a & 0xf) | ((c & 0xf) << 4));
		qh |= (uint32_t)(a >> 4) << j;
		qh |= (uint32_t)(c >> 4) << (j + 16);
	}
	memcpy(b + 4, &qh, 4);
}

static void q_q8_0(const float *x, uint8_t *b)
{
	float amax;
	signed_absmax(x, 32, &amax);
	float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	st_h(b, d);
	for (int j = 0; j < 32; j++)
		b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void q_q8_1(const float *x, uint8_t *b)
{
	float amax;
	signed_absmax(x, 32, &amax);
	float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
	st_h(b, d);
	int sum = 0;
	for (int j = 0; j < 32; j++) {
		int8_t q = (int8_t)roundf(x[j] * id);
		b[4 + j] = (uint8_t)q;
		sum += q;
	}
	st_h(b + 2, (float)sum * d);
}

static void q_mxfp4(const float *x, uint8_t *b)
{
	float amax;
	signed_absmax(x, 32, &amax);
	/* 2^(floor(log2 amax) - 2): the largest code (6) then covers amax */
	float ef = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0.0f;
	uint8_t e = (uint8_t)(ef < 0.0f ? 0.0f : ef > 254.0f ? 254.0f : ef);
	float d = e8m0_half(e);
	b[0] = e;
	for (int j = 0; j < 32; j++) {
		int best = 0;
		float best_err = fabsf((float)kv_mxfp4[0] * d - x[j]);
		for (int k = 1; k < 16; k++) {
			float err = fabsf((float)kv_mxfp4[k] * d - x[j]);
			if (err < best_err) {
				best = k;
				best_err = err;
			}
		}
		if (j < 16)
			b[1 + j] = (uint8_t)best;
		else
			b[1 + j - 16] |= (uint8_t)(best << 4);
	}
}

static void q_q1_0(const float *x, uint8_t *b)
{
	float sum = 0.0f;
	for (int j = 0; j < 128; j++)
		sum += fabsf(x[j]);
	st_h(b, sum / 128.0f);
	memset(b + 2, 0, 16);
	for (int j = 0; j < 128; j++)
		if (x[j] >= 0.0f)
			b[2 + j / 8] |= (uint8_t)(1u << (j % 8));
}

/* ---- K-quant scale searches ------------------------------------------------------- */

#define GROUP_EPS 1e-15f

/* Symmetric: find a scale s so x ~ s*(L-nmax), L in [0, 2*nmax), weighted by
 * x^2. Starts from -nmax/max and tries 18 nearby inverse scales, keeping the
 * one that maximizes (sum w x l)^2 / sum w l^2 (least-squares optimum). */
static float search_sym(int n, int nmax, const float *x, int8_t *L)
{
	float amax, max = signed_absmax(x, n, &amax);
	if (amax < GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	float sumlx = 0.0f, suml2 = 0.0f;
	float iscale = (float)-nmax / max;
	for (int i = 0; i < n; i++) {
		int l = imax(-nmax, imin(nmax - 1, nearest(iscale * x[i])));
		L[i] = (int8_t)(l + nmax);
		float w = x[i] * x[i];
		sumlx += w * x[i] * (float)l;
		suml2 += w * (float)l * (float)l;
	}
	float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
	float best = scale * sumlx;
	for (int is = -9; is <= 9; is++) {
		if (!is)
			continue;
		iscale = -((float)nmax + 0.1f * (float)is) / max;
		sumlx = suml2 = 0.0f;
		for (int i = 0; i < n; i++) {
			int l = imax(-nmax, imin(nmax - 1, nearest(iscale * x[i])));
			float w = x[i] * x[i];
			sumlx += w * x[i] * (float)l;
			suml2 += w * (float)l * (float)l;
		}
		if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
			for (int i = 0; i < n; i++)
				L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, nearest(iscale * x[i]))));
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

/* Symmetric 3-bit: start from -nmax/max, then coordinate descent on single
 * levels (up to 5 sweeps) to improve the x^2-weighted least-squares fit. */
static float search_sym3(int n, int nmax, const float *x, int8_t *L)
{
	float amax, max = signed_absmax(x, n, &amax);
	if (amax < GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	float iscale = (float)-nmax / max;
	float sumlx = 0.0f, suml2 = 0.0f;
	for (int i = 0; i < n; i++) {
		int l = imax(-nmax, imin(nmax - 1, nearest(iscale * x[i])));
		L[i] = (int8_t)l;
		float w = x[i] * x[i];
		sumlx += w * x[i] * (float)l;
		suml2 += w * (float)l * (float)l;
	}
	for (int sweep = 0; sweep < 5; sweep++) {
		int changed = 0;
		for (int i = 0; i < n; i++) {
			float w = x[i] * x[i];
			float slx = sumlx - w * x[i] * (float)L[i];
			if (slx <= 0.0f)
				continue;
			float sl2 = suml2 - w * (float)L[i] * (float)L[i];
			int nl = imax(-nmax, imin(nmax - 1, nearest(x[i] * sl2 / slx)));
			if (nl == L[i])
				continue;
			slx += w * x[i] * (float)nl;
			sl2 += w * (float)nl * (float)nl;
			if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
				L[i] = (int8_t)nl;
				sumlx = slx;
				suml2 = sl2;
				changed++;
			}
		}
		if (!changed)
			break;
	}
	for (int i = 0; i < n; i++)
		L[i] = (int8_t)(L[i] + nmax);
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Affine: x ~ scale*L - mn, L in [0, nmax], mn >= 0 (the returned *mn).
 * Tries nstep+1 inverse scales (rmin + rdelta*k + nmax)/(max-min); for each
 * rounding solves weighted least squares for (scale, min) and keeps the one
 * with the smallest weighted squared (or absolute, use_mad) error. */
static float search_affine(int n, int nmax, const float *x, const float *w, uint8_t *L,
			   float *mn, float rmin, float rdelta, int nstep, bool use_mad)
{
	uint8_t Laux[32];
	float min = x[0], max = x[0];
	float sum_w = w[0], sum_x = sum_w * x[0];
	for (int i = 1; i < n; i++) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (min > 0.0f)
		min = 0.0f;
	if (max == min) {
		memset(L, 0, (size_t)n);
		*mn = -min;
		return 0.0f;
	}
	float iscale = (float)nmax / (max - min);
	float scale = 1.0f / iscale;
	float best_err = 0.0f;
	for (int i = 0; i < n; i++) {
		int l = nearest(iscale * (x[i] - min));
		L[i] = (uint8_t)imax(0, imin(nmax, l));
		float diff = scale * (float)L[i] + min - x[i];
		best_err += w[i] * (use_mad ? fabsf(diff) : diff * diff);
	}
	for (int is = 0; is <= nstep; is++) {
		iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
		float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
		for (int i = 0; i < n; i++) {
			int l = imax(0, imin(nmax, nearest(iscale * (x[i] - min))));
			Laux[i] = (uint8_t)l;
			sum_l += w[i] * (float)l;
			sum_l2 += w[i] * (float)l * (float)l;
			sum_xl += w[i] * (float)l * x[i];
		}
		float D = sum_w * sum_l2 - sum_l * sum_l;
		if (D <= 0.0f)
			continue;
		float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
		float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
		if (this_min > 0.0f) {
			this_min = 0.0f;
			this_scale = sum_xl / sum_l2;
		}
		float err = 0.0f;
		for (int i = 0; i < n; i++) {
			float diff = this_scale * (float)Laux[i] + this_min - x[i];
			err += w[i] * (use_mad ? fabsf(diff) : diff * diff);
		}
		if (err < best_err) {
			memcpy(L, Laux, (size_t)n);
			best_err = err;
			scale = this_scale;
			min = this_min;
		}
	}
	*mn = -min;
	return scale;
}

/* Pack 2-bit levels of 256 values: byte (e/128)*32 + e%32, shift 2*((e%128)/32). */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
	for (int j = 0; j < QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
						  (L[j + l + 96] << 6));
}

/* ---- K-quant quantizers: one 256-element super-block each ------------------------ */

static void q_q2_k(const float *x, uint8_t *b)
{
	uint8_t L[QK_K], *sc = b, *qs = b + 16;
	float w[16], mins[16], scales[16];
	float max_scale = 0.0f, max_min = 0.0f;
	for (int j = 0; j < 16; j++) {
		for (int l = 0; l < 16; l++)
			w[l] = fabsf(x[16 * j + l]);
		scales[j] = search_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	memset(sc, 0, 16);
	if (max_scale > 0.0f) {
		float iscale = 15.0f / max_scale;
		for (int j = 0; j < 16; j++)
			sc[j] = (uint8_t)nearest(iscale * scales[j]);
		st_h(b + 80, max_scale / 15.0f);
	} else {
		st_h(b + 80, 0.0f);
	}
	if (max_min > 0.0f) {
		float iscale = 15.0f / max_min;
		for (int j = 0; j < 16; j++)
			sc[j] |= (uint8_t)(nearest(iscale * mins[j]) << 4);
		st_h(b + 82, max_min / 15.0f);
	} else {
		st_h(b + 82, 0.0f);
	}
	float dd = ld_h(b + 80), dm = ld_h(b + 82);
	for (int j = 0; j < 16; j++) {
		float d = dd * (float)(sc[j] & 0xf);
		if (d == 0.0f)
			continue;
		float m = dm * (float)(sc[j] >> 4);
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (uint8_t)imax(0, imin(3, nearest((x[16 * j + i] + m) / d)));
	}
	pack_2bit(L, qs);
}

static void q_q3_k(const float *x, uint8_t *b)
{
	int8_t L[QK_K];
	float scales[16];
	float max_scale = 0.0f, amax = 0.0f;
	for (int j = 0; j < 16; j++) {
		scales[j] = search_sym3(16, 4, x + 16 * j, L + 16 * j);
		if (fabsf(scales[j]) > amax) {
			amax = fabsf(scales[j]);
			max_scale = scales[j];
		}
	}
	uint8_t *hm = b, *qs = b + 32, *s12 = b + 96;
	memset(b, 0, 110);
	if (max_scale != 0.0f) {
		float iscale = -32.0f / max_scale;
		for (int j = 0; j < 16; j++) {
			int l = (int8_t)nearest(iscale * scales[j]);
			l = imax(-32, imin(31, l)) + 32;
			if (j < 8)
				s12[j] = (uint8_t)(l & 0xf);
			else
				s12[j - 8] |= (uint8_t)((l & 0xf) << 4);
			s12[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
		}
		st_h(b + 108, 1.0f / iscale);
	} else {
		st_h(b + 108, 0.0f);
	}
	int8_t sc[16];
	q3k_scales(s12, sc);
	float dd = ld_h(b + 108);
	for (int j = 0; j < 16; j++) {
		float d = dd * (float)sc[j];
		if (d == 0.0f)
			continue;
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (int8_t)(imax(-4, imin(3, nearest(x[16 * j + i] / d))) + 4);
	}
	uint8_t U[QK_K];
	for (int j = 0; j < QK_K; j++) {
		int l = L[j];
		if (l > 3) {
			hm[j % 32] |= (uint8_t)(1u << (j / 32));
			l -= 4;
		}
		U[j] = (uint8_t)l;
	}
	pack_2bit(U, qs);
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): 8 sub-blocks of 32 with 6-bit
 * scales and mins. Fills L (levels) and the d, dmin, scales[12] header. */
static void q_k4_header(const float *x, uint8_t *b, uint8_t *L, int nmax, float rmin, int nstep)
{
	float w[32], mins[8], scales[8];
	float max_scale = 0.0f, max_min = 0.0f;
	for (int j = 0; j < 8; j++) {
		const float *xj = x + 32 * j;
		float sum_x2 = 0.0f;
		for (int l = 0; l < 32; l++)
			sum_x2 += xj[l] * xj[l];
		float av_x = sqrtf(sum_x2 / 32.0f);
		for (int l = 0; l < 32; l++)
			w[l] = av_x + fabsf(xj[l]);
		scales[j] = search_affine(32, nmax, xj, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
	float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
	uint8_t *s = b + 4;
	memset(s, 0, 12);
	for (int j = 0; j < 8; j++) {
		uint8_t ls = (uint8_t)nearest(inv_scale * scales[j]);
		uint8_t lm = (uint8_t)nearest(inv_min * mins[j]);
		ls = ls > 63 ? 63 : ls;
		lm = lm > 63 ? 63 : lm;
		if (j < 4) {
			s[j] = ls;
			s[j + 4] = lm;
		} else {
			s[j + 4] = (uint8_t)((ls & 0xf) | ((lm & 0xf) << 4));
			s[j - 4] |= (uint8_t)((ls >> 4) << 6);
			s[j] |= (uint8_t)((lm >> 4) << 6);
		}
	}
	st_h(b, max_scale / 63.0f);
	st_h(b + 2, max_min / 63.0f);
	float dd = ld_h(b), dm = ld_h(b + 2);
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		k4_scale_min(j, s, &sc, &m);
		float d = dd * (float)sc;
		if (d == 0.0f)
			continue;
		float mm = dm * (float)m;
		for (int i = 0; i < 32; i++)
			L[32 * j + i] = (uint8_t)imax(0, imin(nmax, nearest((x[32 * j + i] + mm) / d)));
	}
}

static void q_q4_k(const float *x, uint8_t *b)
{
	uint8_t L[QK_K];
	q_k4_header(x, b, L, 15, -1.0f, 20);
	uint8_t *q = b + 16;
	for (int j = 0; j < QK_K; j += 64, q += 32)
		for (int l = 0; l < 32; l++)
			q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

static void q_q5_k(const float *x, uint8_t *b)
{
	uint8_t L[QK_K];
	q_k4_header(x, b, L, 31, -0.5f, 15);
	uint8_t *qh = b + 16, *ql = b + 48;
	memset(qh, 0, 32);
	for (int j = 0; j < QK_K; j += 64, ql += 32) {
		int bit = j / 32; /* sub-block index of the low half */
		for (int l = 0; l < 32; l++) {
			int l1 = L[j + l], l2 = L[j + l + 32];
			if (l1 > 15) {
				l1 -= 16;
				qh[l] |= (uint8_t)(1u << bit);
			}
			if (l2 > 15) {
				l2 -= 16;
				qh[l] |= (uint8_t)(1u << (bit + 1));
			}
			ql[l] = (uint8_t)(l1 | (l2 << 4));
		}
	}
}

static void q_q6_k(const float *x, uint8_t *b)
{
	int8_t L[QK_K];
	float scales[16];
	float max_scale = 0.0f, max_abs = 0.0f;
	for (int j = 0; j < 16; j++) {
		scales[j] = search_sym(16, 32, x + 16 * j, L + 16 * j);
		if (fabsf(scales[j]) > max_abs) {
			max_abs = fabsf(scales[j]);
			max_scale = scales[j];
		}
	}
	memset(b, 0, 210);
	if (max_abs < GROUP_EPS)
		return; /* all zero: d = 0 */
	int8_t *sc = (int8_t *)(b + 192);
	float iscale = -128.0f / max_scale;
	st_h(b + 208, 1.0f / iscale);
	for (int j = 0; j < 16; j++)
		sc[j] = (int8_t)imin(127, nearest(iscale * scales[j]));
	float dd = ld_h(b + 208);
	for (int j = 0; j < 16; j++) {
		float d = dd * (float)sc[j];
		if (d == 0.0f)
			continue;
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (int8_t)(imax(-32, imin(31, nearest(x[16 * j + i] / d))) + 32);
	}
	uint8_t *ql = b, *qh = b + 128;
	for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
		for (int l = 0; l < 32; l++) {
			int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
			ql[l] = (uint8_t)((q1 & 0xf) | ((q3 & 0xf) << 4));
			ql[l + 32] = (uint8_t)((q2 & 0xf) | ((q4 & 0xf) << 4));
			qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
		}
	}
}

static void q_q8_k(const float *x, uint8_t *b)
{
	float amax, max = signed_absmax(x, QK_K, &amax);
	memset(b, 0, 292);
	if (amax == 0.0f)
		return;
	float iscale = -127.0f / max;
	int8_t *qs = (int8_t *)(b + 4);
	for (int j = 0; j < QK_K; j++)
		qs[j] = (int8_t)imin(127, nearest(iscale * x[j]));
	for (int j = 0; j < 16; j++) {
		int sum = 0;
		for (int i = 0; i < 16; i++)
			sum += qs[16 * j + i];
		int16_t s16 = (int16_t)sum;
		memcpy(b + 260 + 2 * j, &s16, 2);
	}
	float d = 1.0f / iscale;
	memcpy(b, &d, 4);
}

typedef void (*q_block_fn)(const float *, uint8_t *);

static q_block_fn q_block(uint32_t type)
{
	switch (type) {
	case ALICE_TYPE_Q4_0: return q_q4_0;
	case ALICE_TYPE_Q4_1: return q_q4_1;
	case ALICE_TYPE_Q5_0: return q_q5_0;
	case ALICE_TYPE_Q5_1: return q_q5_1;
	case ALICE_TYPE_Q8_0: return q_q8_0;
	case ALICE_TYPE_Q8_1: return q_q8_1;
	case ALICE_TYPE_Q2_K: return q_q2_k;
	case ALICE_TYPE_Q3_K: return q_q3_k;
	case ALICE_TYPE_Q4_K: return q_q4_k;
	case ALICE_TYPE_Q5_K: return q_q5_k;
	case ALICE_TYPE_Q6_K: return q_q6_k;
	case ALICE_TYPE_Q8_K: return q_q8_k;
	case ALICE_TYPE_MXFP4: return q_mxfp4;
	case ALICE_TYPE_Q1_0: return q_q1_0;
	default: return NULL;
	}
}

bool alice_quantize(uint32_t type, const float *src, void *dst, int64_t n)
{
	const struct alice_type_info *ti = alice_type_info(type);
	if (!ti || !ti->can_quantize || n < 0 || n % ti->block_size)
		return false;
	uint8_t *d = dst;
	switch (type) {
	case ALICE_TYPE_F32:
		memcpy(d, src, (size_t)n * 4);
		return true;
	case ALICE_TYPE_F16:
		for (int64_t i = 0; i < n; i++)
			st_h(d + 2 * i, src[i]);
		return true;
	case ALICE_TYPE_BF16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t h = alice_fp32_to_bf16(src[i]);
			memcpy(d + 2 * i, &h, 2);
		}
		return true;
	default:
		break;
	}
	q_block_fn fn = q_block(type);
	if (!fn)
		return false;
	int64_t nb = n / ti->block_size;
	for (int64_t i = 0; i < nb; i++)
		fn(src + i * ti->block_size, d + (size_t)i * ti->type_size);
	return true;
}
