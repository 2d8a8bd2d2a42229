/* test_quant.c — the ggml type table, fp16/bf16 conversion, and the reference
 * (de)quantizers of core/quant.c: round trips on seeded random data with
 * per-format error bounds, hand-built blocks, and a check against llama.cpp's
 * quantized fixture files and their F32 sources. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alice/gguf.h"
#include "alice/quant.h"

/* ---- seeded random data ------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rng_unit(void) /* (0, 1) */
{
	return ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
}

static void fill_gauss(float *x, int64_t n, uint64_t seed)
{
	rng_state = seed;
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(sqrt(-2.0 * log(rng_unit())) * cos(2.0 * M_PI * rng_unit()));
}

static void fill_uniform(float *x, int64_t n, uint64_t seed)
{
	rng_state = seed;
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)(2.0 * rng_unit() - 1.0);
}

static double rel_rms(const float *a, const float *ref, int64_t n)
{
	double e = 0, s = 0;
	for (int64_t i = 0; i < n; i++) {
		double d = (double)a[i] - (double)ref[i];
		e += d * d;
		s += (double)ref[i] * (double)ref[i];
	}
	return s > 0 ? sqrt(e / s) : sqrt(e);
}

/* ---- type table --------------------------------------------------------------- */

Test(quant, type_table)
{
	static const struct {
		uint32_t id;
		const char *name;
		uint32_t bs, ts;
	} want[] = {
		{ 0, "F32", 1, 4 },	    { 1, "F16", 1, 2 },		 { 2, "Q4_0", 32, 18 },
		{ 3, "Q4_1", 32, 20 },	    { 6, "Q5_0", 32, 22 },	 { 7, "Q5_1", 32, 24 },
		{ 8, "Q8_0", 32, 34 },	    { 9, "Q8_1", 32, 36 },	 { 10, "Q2_K", 256, 84 },
		{ 11, "Q3_K", 256, 110 },   { 12, "Q4_K", 256, 144 },	 { 13, "Q5_K", 256, 176 },
		{ 14, "Q6_K", 256, 210 },   { 15, "Q8_K", 256, 292 },	 { 16, "IQ2_XXS", 256, 66 },
		{ 17, "IQ2_XS", 256, 74 },  { 18, "IQ3_XXS", 256, 98 },	 { 19, "IQ1_S", 256, 50 },
		{ 20, "IQ4_NL", 32, 18 },   { 21, "IQ3_S", 256, 110 },	 { 22, "IQ2_S", 256, 82 },
		{ 23, "IQ4_XS", 256, 136 }, { 24, "I8", 1, 1 },		 { 25, "I16", 1, 2 },
		{ 26, "I32", 1, 4 },	    { 27, "I64", 1, 8 },	 { 28, "F64", 1, 8 },
		{ 29, "IQ1_M", 256, 56 },   { 30, "BF16", 1, 2 },	 { 34, "TQ1_0", 256, 54 },
		{ 35, "TQ2_0", 256, 66 },   { 39, "MXFP4", 32, 17 },	 { 40, "NVFP4", 64, 36 },
		{ 41, "Q1_0", 128, 18 },    { 42, "Q2_0", 64, 18 },
	};
	static const uint32_t removed[] = { 4, 5, 31, 32, 33, 36, 37, 38, 43, 44, 1000, UINT32_MAX };
	static const uint32_t supported[] = { 0, 1, 30, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
					      20, 23, 39, 41, 24, 25, 26, 27, 28 };
	static const uint32_t quantizable[] = { 0, 1, 30, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 39, 41 };

	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		const struct alice_type_info *ti = alice_type_info(want[i].id);
		cr_assert_not_null(ti, "type %u", want[i].id);
		cr_expect_str_eq(ti->name, want[i].name);
		cr_expect_eq(ti->block_size, want[i].bs, "%s block size", want[i].name);
		cr_expect_eq(ti->type_size, want[i].ts, "%s type size", want[i].name);
		cr_expect_str_eq(alice_type_name(want[i].id), want[i].name);
		cr_expect_eq(alice_type_from_name(want[i].name), (int)want[i].id, "%s", want[i].name);
		bool sup = false, q = false;
		for (size_t k = 0; k < sizeof supported / sizeof supported[0]; k++)
			sup |= supported[k] == want[i].id;
		for (size_t k = 0; k < sizeof quantizable / sizeof quantizable[0]; k++)
			q |= quantizable[k] == want[i].id;
		cr_expect_eq(ti->supported, sup, "%s supported", want[i].name);
		cr_expect_eq(ti->can_quantize, q, "%s can_quantize", want[i].name);
	}
	for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
		cr_expect_null(alice_type_info(removed[i]), "id %u should be unknown", removed[i]);
		cr_expect_str_eq(alice_type_name(removed[i]), "unknown");
		cr_expect_eq(alice_row_size(removed[i], 256), 0);
		float x[256] = { 0 };
		uint8_t buf[2048];
		cr_expect_not(alice_quantize(removed[i], x, buf, 256));
	}
	/* every id below the count is either named or NULL; names are unique */
	for (uint32_t t = 0; t < ALICE_TYPE_COUNT; t++) {
		const struct alice_type_info *ti = alice_type_info(t);
		if (ti)
			cr_expect_eq(alice_type_from_name(ti->name), (int)t);
	}
}

Test(quant, names)
{
	cr_expect_eq(alice_type_from_name("q4_k"), ALICE_TYPE_Q4_K);
	cr_expect_eq(alice_type_from_name("Bf16"), ALICE_TYPE_BF16);
	cr_expect_eq(alice_type_from_name("iq4_xs"), ALICE_TYPE_IQ4_XS);
	cr_expect_eq(alice_type_from_name("Q4_K_M"), -1); /* a file type, not a tensor type */
	cr_expect_eq(alice_type_from_name("Q4"), -1);
	cr_expect_eq(alice_type_from_name(""), -1);
	cr_expect_eq(alice_type_from_name(NULL), -1);
	cr_expect_eq(alice_type_from_name("unknown"), -1);
}

Test(quant, row_size)
{
	cr_expect_eq(alice_row_size(ALICE_TYPE_F32, 7), 28);
	cr_expect_eq(alice_row_size(ALICE_TYPE_F16, 3), 6);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q4_0, 4096), 128 * 18);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q4_0, 33), 0);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q4_K, 4096), 16 * 144);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q4_K, 4096 + 32), 0);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q6_K, 256), 210);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q1_0, 256), 36);
	cr_expect_eq(alice_row_size(ALICE_TYPE_MXFP4, 64), 34);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q8_0, 0), 0);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q8_0, -32), 0);
	cr_expect_eq(alice_row_size(16 /* IQ2_XXS: named, unsupported */, 256), 66);
	cr_expect_eq(alice_row_size(ALICE_TYPE_Q8_0, (int64_t)1 << 36), ((size_t)1 << 31) * 34);
}

/* ---- fp16 / bf16 ---------------------------------------------------------------- */

Test(quant, fp16_all_values_round_trip)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = alice_fp16_to_fp32((uint16_t)h);
		uint16_t back = alice_fp32_to_fp16(f);
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
			cr_assert(isnan(f), "0x%04x should be NaN", h);
			cr_assert((back & 0x7c00) == 0x7c00 && (back & 0x3ff), "0x%04x -> 0x%04x not NaN", h, back);
		} else {
			cr_assert_eq(back, h, "0x%04x -> %g -> 0x%04x", h, f, back);
		}
	}
	cr_expect_eq(alice_fp16_to_fp32(0x3c00), 1.0f);
	cr_expect_eq(alice_fp16_to_fp32(0xc000), -2.0f);
	cr_expect_eq(alice_fp16_to_fp32(0x7bff), 65504.0f);
	cr_expect_eq(alice_fp16_to_fp32(0x0001), 0x1p-24f);
	cr_expect_eq(alice_fp16_to_fp32(0x0400), 0x1p-14f);
}

Test(quant, fp16_rounding)
{
	/* ties to even in the normal range: 1 + 2^-11 is halfway between 1 and 1+2^-10 */
	cr_expect_eq(alice_fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
	cr_expect_eq(alice_fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
	cr_expect_eq(alice_fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
	/* overflow: 65519 rounds down to max, 65520 (halfway) to inf */
	cr_expect_eq(alice_fp32_to_fp16(65519.0f), 0x7bff);
	cr_expect_eq(alice_fp32_to_fp16(65520.0f), 0x7c00);
	cr_expect_eq(alice_fp32_to_fp16(-1e10f), 0xfc00);
	cr_expect_eq(alice_fp32_to_fp16(INFINITY), 0x7c00);
	cr_expect_eq(alice_fp32_to_fp16(-INFINITY), 0xfc00);
	/* subnormals: 2^-25 is halfway between 0 and 2^-24 -> 0; 3*2^-25 -> 2*2^-24 */
	cr_expect_eq(alice_fp32_to_fp16(0x1p-25f), 0x0000);
	cr_expect_eq(alice_fp32_to_fp16(3 * 0x1p-25f), 0x0002);
	cr_expect_eq(alice_fp32_to_fp16(0x1p-25f * 1.0001f), 0x0001);
	cr_expect_eq(alice_fp32_to_fp16(-0x1p-24f), 0x8001);
	cr_expect_eq(alice_fp32_to_fp16(1e-10f), 0x0000);
	cr_expect_eq(alice_fp32_to_fp16(-0.0f), 0x8000);
	/* largest subnormal rounding up into the smallest normal */
	cr_expect_eq(alice_fp32_to_fp16(0x1p-14f - 0x1p-26f), 0x0400);
	/* NaN stays NaN (quiet) */
	uint16_t n = alice_fp32_to_fp16(NAN);
	cr_expect((n & 0x7c00) == 0x7c00 && (n & 0x200));
	/* every value lands on the nearest half (checked against double arithmetic) */
	rng_state = 77;
	for (int i = 0; i < 200000; i++) {
		float f = (float)((rng_unit() - 0.5) * pow(2.0, (int)(rng_unit() * 40) - 26));
		if (fabsf(f) >= 65504.0f || f == 0.0f)
			continue;
		/* on magnitudes, so the neighbours h-1 and h+1 stay on one side of zero */
		float a = fabsf(f);
		uint16_t h = alice_fp32_to_fp16(a);
		double g = alice_fp16_to_fp32(h), err = fabs(g - a);
		cr_assert_eq(alice_fp32_to_fp16(-a), h | 0x8000);
		bool ok = err <= fabs((double)alice_fp16_to_fp32((uint16_t)(h + 1)) - a);
		if (h > 0)
			ok = ok && err <= fabs((double)alice_fp16_to_fp32((uint16_t)(h - 1)) - a);
		cr_assert(ok,
			  "%a -> %a not nearest", a, g);
	}
}

Test(quant, bf16)
{
	cr_expect_eq(alice_fp32_to_bf16(1.0f), 0x3f80);
	cr_expect_eq(alice_bf16_to_fp32(0x3f80), 1.0f);
	cr_expect_eq(alice_bf16_to_fp32(0xc040), -3.0f);
	/* ties to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 */
	cr_expect_eq(alice_fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
	cr_expect_eq(alice_fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
	cr_expect_eq(alice_fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
	cr_expect_eq(alice_fp32_to_bf16(INFINITY), 0x7f80);
	cr_expect_eq(alice_fp32_to_bf16(-INFINITY), 0xff80);
	cr_expect_eq(alice_fp32_to_bf16(FLT_MAX), 0x7f80); /* rounds up to inf */
	/* NaN -> quiet NaN, also for a signalling NaN whose payload sits in the low bits */
	uint32_t snan = 0x7f800001u;
	float fs;
	memcpy(&fs, &snan, 4);
	uint16_t b = alice_fp32_to_bf16(fs);
	cr_expect_eq(b, 0x7fc0);
	cr_expect(isnan(alice_bf16_to_fp32(b)));
	cr_expect_eq(alice_fp32_to_bf16(-NAN) & 0xffc0, 0xffc0);
	for (uint32_t h = 0; h < 65536; h++) {
		float f = alice_bf16_to_fp32((uint16_t)h);
		if (isnan(f))
			continue;
		cr_assert_eq(alice_fp32_to_bf16(f), h);
	}
}

/* ---- round trips ------------------------------------------------------------------ */

/* Relative RMS error bounds for quantize -> dequantize of N(0,1) data (uniform
 * data is no worse for the integer grids: its extremes are closer to its RMS).
 * The expected error of a uniform quantizer with step D is D/sqrt(12); each
 * bound is that estimate for a Gaussian block plus ~20% for the fp16-rounded
 * scales. `min` only catches a quantizer that silently stores floats. */
struct rt_bound {
	uint32_t type;
	double max, min;
	const char *why;
};

static const struct rt_bound rt_bounds[] = {
	{ ALICE_TYPE_F16, 4e-4, 1e-5, "11-bit significand: |err| <= 2^-11 |x|, RMS ~ 2^-11/sqrt(3)" },
	{ ALICE_TYPE_BF16, 3e-3, 1e-4, "8-bit significand: |err| <= 2^-8 |x|, RMS ~ 2^-8/sqrt(3)" },
	{ ALICE_TYPE_Q8_0, 0.0065, 0.003, "step amax/127, amax of 32 N(0,1) ~ 2.3 -> 0.018/sqrt(12) = 0.0052" },
	{ ALICE_TYPE_Q8_1, 0.0065, 0.003, "same grid as Q8_0" },
	{ ALICE_TYPE_Q8_K, 0.0085, 0.002, "step amax/127 over 256 values, amax ~ 2.9 -> 0.0066" },
	{ ALICE_TYPE_Q4_0, 0.105, 0.05, "step amax/8 ~ 0.29 -> 0.083" },
	{ ALICE_TYPE_Q4_1, 0.10, 0.05, "step range/15, range of 32 N(0,1) ~ 4.1 -> 0.079" },
	{ ALICE_TYPE_Q5_0, 0.052, 0.025, "step amax/16 -> 0.042" },
	{ ALICE_TYPE_Q5_1, 0.048, 0.02, "step range/31 -> 0.038" },
	{ ALICE_TYPE_Q2_K, 0.35, 0.2, "4 levels over range of 16 N(0,1) ~ 3.5: step 1.17 -> 0.34 (search lowers it)" },
	{ ALICE_TYPE_Q3_K, 0.18, 0.1, "8 levels, step amax/4 of 16 values (amax ~ 1.95) -> 0.14, plus 6-bit scales" },
	{ ALICE_TYPE_Q4_K, 0.09, 0.05, "16 levels over range of 32 values (~4.1): 0.273 -> 0.079" },
	{ ALICE_TYPE_Q5_K, 0.046, 0.02, "32 levels: 0.132 -> 0.038" },
	{ ALICE_TYPE_Q6_K, 0.022, 0.01, "64 levels, step amax/32 of 16 values -> 0.061 -> 0.0176" },
	{ ALICE_TYPE_MXFP4, 0.17, 0.06,
	  "e2m1 (1 mantissa bit), scale 2^(floor(log2 amax)-2): values above 6 units clip; ~0.11 Gaussian, ~0.14 U(-1,1)" },
	{ ALICE_TYPE_Q1_0, 0.62, 0.45, "sign * mean|x|: 1 - (E|x|)^2/E[x^2] = 1 - 2/pi -> 0.603" },
};

static void check_round_trip(const struct rt_bound *b, const float *x, int64_t n, const char *dist)
{
	size_t rs = alice_row_size(b->type, n);
	cr_assert_gt(rs, 0);
	uint8_t *q = malloc(rs), *q2 = malloc(rs);
	float *y = malloc((size_t)n * sizeof(float));
	cr_assert(q && q2 && y);
	memset(q, 0xa5, rs);
	memset(q2, 0x5a, rs);
	cr_assert(alice_quantize(b->type, x, q, n), "%s quantize", alice_type_name(b->type));
	cr_assert(alice_quantize(b->type, x, q2, n));
	cr_expect_eq(memcmp(q, q2, rs), 0, "%s quantizer not deterministic (or leaves bytes unset)",
		     alice_type_name(b->type));
	alice_dequantize(b->type, q, y, n);
	double e = rel_rms(y, x, n);
	double bound = b->max;
	if (b->type == ALICE_TYPE_Q1_0 && strcmp(dist, "uniform") == 0)
		bound = 0.52; /* U(-1,1): 1 - (1/2)^2 / (1/3) = 1/4 -> 0.5 */
	cr_expect_leq(e, bound, "%s %s n=%lld: rel RMS %.5f > %.5f (%s)", alice_type_name(b->type), dist,
		      (long long)n, e, bound, b->why);
	cr_expect_geq(e, b->min, "%s %s n=%lld: rel RMS %.6f suspiciously small", alice_type_name(b->type), dist,
		      (long long)n, e);
	if (n == 4096)
		cr_log_info("%-6s %-7s rel RMS %.5f (bound %.4f)", alice_type_name(b->type), dist, e, bound);
	free(q);
	free(q2);
	free(y);
}

Test(quant, round_trip_error_bounds)
{
	static const int64_t lens[] = { 256, 768, 4096, 65536 };
	for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
		int64_t n = lens[li];
		float *g = malloc((size_t)n * sizeof(float)), *u = malloc((size_t)n * sizeof(float));
		cr_assert(g && u);
		fill_gauss(g, n, 1000 + (uint64_t)n);
		fill_uniform(u, n, 2000 + (uint64_t)n);
		for (size_t i = 0; i < sizeof rt_bounds / sizeof rt_bounds[0]; i++) {
			check_round_trip(&rt_bounds[i], g, n, "gauss");
			check_round_trip(&rt_bounds[i], u, n, "uniform");
		}
		free(g);
		free(u);
	}
	/* 32-element-block types also take rows that are not a multiple of 256 */
	float x[96];
	fill_gauss(x, 96, 5);
	for (size_t i = 0; i < sizeof rt_bounds / sizeof rt_bounds[0]; i++) {
		uint32_t bs = alice_type_info(rt_bounds[i].type)->block_size;
		if (96 % bs == 0)
			check_round_trip(&rt_bounds[i], x, 96, "gauss");
	}
}

Test(quant, every_quantizable_type_is_covered)
{
	for (uint32_t t = 0; t < ALICE_TYPE_COUNT; t++) {
		const struct alice_type_info *ti = alice_type_info(t);
		if (!ti || !ti->can_quantize || t == ALICE_TYPE_F32)
			continue;
		bool found = false;
		for (size_t i = 0; i < sizeof rt_bounds / sizeof rt_bounds[0]; i++)
			found |= rt_bounds[i].type == t;
		cr_expect(found, "%s has a quantizer but no round-trip bound", ti->name);
	}
}

Test(quant, exact_round_trips)
{
	enum { N = 4096 };
	static float x[N], y[N];
	static uint8_t q[N * 4];
	fill_gauss(x, N, 9);
	x[0] = 0.0f;
	x[1] = -0.0f;
	x[2] = 1e-40f; /* subnormal */
	x[3] = INFINITY;
	cr_assert(alice_quantize(ALICE_TYPE_F32, x, q, N));
	alice_dequantize(ALICE_TYPE_F32, q, y, N);
	cr_expect_eq(memcmp(x, y, sizeof x), 0);

	/* values already representable in f16 / bf16 come back bit-exact */
	for (int i = 0; i < N; i++)
		x[i] = alice_fp16_to_fp32(alice_fp32_to_fp16(x[i]));
	cr_assert(alice_quantize(ALICE_TYPE_F16, x, q, N));
	alice_dequantize(ALICE_TYPE_F16, q, y, N);
	cr_expect_eq(memcmp(x, y, sizeof x), 0);
	for (int i = 0; i < N; i++)
		x[i] = alice_bf16_to_fp32(alice_fp32_to_bf16(x[i] * 1e20f));
	cr_assert(alice_quantize(ALICE_TYPE_BF16, x, q, N));
	alice_dequantize(ALICE_TYPE_BF16, q, y, N);
	cr_expect_eq(memcmp(x, y, sizeof x), 0);

	/* values on a Q8_0 grid (integers -127..127 times a power of two) are exact */
	for (int b = 0; b < N / 32; b++)
		for (int j = 0; j < 32; j++)
			x[b * 32 + j] = (float)((j == 0 ? 127 : (int)(rng_next() % 255) - 127)) * 0x1p-7f;
	cr_assert(alice_quantize(ALICE_TYPE_Q8_0, x, q, N));
	alice_dequantize(ALICE_TYPE_Q8_0, q, y, N);
	cr_expect_eq(memcmp(x, y, sizeof x), 0);
}

Test(quant, zero_input)
{
	enum { N = 512 };
	static float x[N], y[N];
	static uint8_t q[N * 4];
	for (uint32_t t = 0; t < ALICE_TYPE_COUNT; t++) {
		const struct alice_type_info *ti = alice_type_info(t);
		if (!ti || !ti->can_quantize)
			continue;
		for (int i = 0; i < N; i++)
			y[i] = 1.0f;
		cr_assert(alice_quantize(t, x, q, N));
		alice_dequantize(t, q, y, N);
		for (int i = 0; i < N; i++)
			cr_assert(y[i] == 0.0f, "%s: zero in, %g out at %d", ti->name, y[i], i);
	}
}

/* Awkward blocks: constants, spikes, mixed magnitudes inside one super-block,
 * tiny values. Output must be finite and never worse than all zeros. */
Test(quant, awkward_blocks)
{
	enum { N = 1024 };
	static float x[N], y[N];
	static uint8_t q[N * 4];
	for (int pat = 0; pat < 7; pat++) {
		fill_gauss(x, N, 40 + (uint64_t)pat);
		for (int i = 0; i < N; i++) {
			switch (pat) {
			case 0: x[i] = 3.0f; break;
			case 1: x[i] = -0.25f; break;
			case 2: x[i] = (i % 97 == 0) ? 100.0f : 1e-3f * x[i]; break;
			case 3: x[i] *= (i / 16) % 2 ? 1e-4f : 10.0f; break; /* sub-blocks of very different scale */
			case 4: x[i] = fabsf(x[i]) + 5.0f; break;	 /* all positive, offset */
			case 5: x[i] = -fabsf(x[i]) - 5.0f; break;	 /* all negative, offset */
			case 6: x[i] *= 1e-6f; break;			 /* scales near fp16's subnormals */
			}
		}
		for (uint32_t t = 0; t < ALICE_TYPE_COUNT; t++) {
			const struct alice_type_info *ti = alice_type_info(t);
			if (!ti || !ti->can_quantize)
				continue;
			cr_assert(alice_quantize(t, x, q, N));
			alice_dequantize(t, q, y, N);
			for (int i = 0; i < N; i++)
				cr_assert(isfinite(y[i]), "%s pattern %d: element %d = %g", ti->name, pat, i, y[i]);
			double e = rel_rms(y, x, N);
			/* Q4_K/Q5_K at |x| ~ 1e-6: d = max_scale/63 and dmin fall into
			 * fp16's subnormals and the min term dominates; llama.cpp's
			 * reference quantizer (which ours matches byte for byte)
			 * behaves the same, so only finiteness is required there. */
			bool underflows = pat == 6 && (t == ALICE_TYPE_Q4_K || t == ALICE_TYPE_Q5_K);
			if (!underflows)
				cr_expect_leq(e, 1.0, "%s pattern %d: rel RMS %.4f", ti->name, pat, e);
			if (pat <= 1)
				cr_expect_leq(e, 1e-3, "%s: constant block not reproduced (%.5f)", ti->name, e);
		}
	}
}

Test(quant, no_quantizer)
{
	float x[256] = { 0 };
	uint8_t q[1024];
	cr_expect_not(alice_quantize(ALICE_TYPE_IQ4_NL, x, q, 256));
	cr_expect_not(alice_quantize(ALICE_TYPE_IQ4_XS, x, q, 256));
	cr_expect_not(alice_quantize(ALICE_TYPE_I32, x, q, 256));
	cr_expect_not(alice_quantize(16, x, q, 256));
	cr_expect_not(alice_quantize(ALICE_TYPE_Q4_0, x, q, 31)); /* not a block multiple */
}

/* ---- hand-built blocks (layouts not covered by the fixture files) ----------------- */

static void put_h(uint8_t *p, float f)
{
	uint16_t h = alice_fp32_to_fp16(f);
	memcpy(p, &h, 2);
}

Test(quant, handmade_blocks)
{
	static const int8_t kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
	static const float fp4[16] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6 };
	uint8_t b[512];
	float y[256];

	/* IQ4_NL: d, 16 bytes; element j low nibble of byte j, j+16 high nibble */
	put_h(b, 0.5f);
	for (int j = 0; j < 16; j++)
		b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
	alice_dequantize(ALICE_TYPE_IQ4_NL, b, y, 32);
	for (int j = 0; j < 16; j++) {
		cr_expect_eq(y[j], 0.5f * kv[j]);
		cr_expect_eq(y[j + 16], 0.5f * kv[15 - j]);
	}

	/* IQ4_XS: d, scales_h, scales_l[4], qs[128]; sub-block ib scale
	 * (lo nibble of scales_l[ib/2] >> 4*(ib%2)) | (2 bits of scales_h) << 4, minus 32 */
	memset(b, 0, 136);
	put_h(b, 0.25f);
	uint16_t sh = 0;
	int ls[8] = { 0, 1, 31, 32, 33, 47, 63, 40 };
	for (int ib = 0; ib < 8; ib++) {
		b[4 + ib / 2] |= (uint8_t)((ls[ib] & 0xf) << (4 * (ib % 2)));
		sh |= (uint16_t)(((ls[ib] >> 4) & 3) << (2 * ib));
	}
	memcpy(b + 2, &sh, 2);
	for (int i = 0; i < 128; i++)
		b[8 + i] = (uint8_t)((i % 16) | (((i + 3) % 16) << 4));
	alice_dequantize(ALICE_TYPE_IQ4_XS, b, y, 256);
	for (int ib = 0; ib < 8; ib++)
		for (int j = 0; j < 16; j++) {
			float dl = 0.25f * (float)(ls[ib] - 32);
			cr_expect_eq(y[ib * 32 + j], dl * kv[j]);
			cr_expect_eq(y[ib * 32 + j + 16], dl * kv[(j + 3) % 16]);
		}

	/* MXFP4: e8m0 exponent e -> 2^(e-127); e2m1 codes, same nibble order as Q4_0 */
	b[0] = 127 + 3;
	for (int j = 0; j < 16; j++)
		b[1 + j] = (uint8_t)(j | ((15 - j) << 4));
	alice_dequantize(ALICE_TYPE_MXFP4, b, y, 32);
	for (int j = 0; j < 16; j++) {
		cr_expect_eq(y[j], 8.0f * fp4[j]);
		cr_expect_eq(y[j + 16], 8.0f * fp4[15 - j]);
	}
	b[0] = 1; /* 2^-126 */
	alice_dequantize(ALICE_TYPE_MXFP4, b, y, 32);
	cr_expect_eq(y[1], 0x1p-126f * 0.5f);
	cr_expect_eq(y[7], 0x1p-126f * 6.0f);

	/* Q1_0: d, 128 bits (bit j%8 of byte j/8), set = +d, clear = -d */
	put_h(b, 0.75f);
	for (int i = 0; i < 16; i++)
		b[2 + i] = (uint8_t)(0x35 + 17 * i);
	alice_dequantize(ALICE_TYPE_Q1_0, b, y, 128);
	for (int j = 0; j < 128; j++)
		cr_expect_eq(y[j], ((b[2 + j / 8] >> (j % 8)) & 1) ? 0.75f : -0.75f, "Q1_0 element %d", j);

	/* Q8_1: d, s (= d * sum), 32 int8 */
	put_h(b, 0.125f);
	put_h(b + 2, 99.0f);
	for (int j = 0; j < 32; j++)
		b[4 + j] = (uint8_t)(int8_t)(j * 7 - 100);
	alice_dequantize(ALICE_TYPE_Q8_1, b, y, 32);
	for (int j = 0; j < 32; j++)
		cr_expect_eq(y[j], 0.125f * (float)(j * 7 - 100));

	/* Q8_K: f32 d, 256 int8, 16 int16 sums; quantizer fills the sums */
	float x[256];
	fill_gauss(x, 256, 3);
	cr_assert(alice_quantize(ALICE_TYPE_Q8_K, x, b, 256));
	for (int j = 0; j < 16; j++) {
		int s = 0;
		for (int i = 0; i < 16; i++)
			s += (int8_t)b[4 + 16 * j + i];
		int16_t got;
		memcpy(&got, b + 260 + 2 * j, 2);
		cr_expect_eq(got, s);
	}
	/* Q8_1's s field holds d * sum(q) */
	cr_assert(alice_quantize(ALICE_TYPE_Q8_1, x, b, 32));
	int s = 0;
	for (int j = 0; j < 32; j++)
		s += (int8_t)b[4 + j];
	uint16_t dh, shh;
	memcpy(&dh, b, 2);
	memcpy(&shh, b + 2, 2);
	cr_expect_eq(shh, alice_fp32_to_fp16(alice_fp16_to_fp32(dh) * (float)s) , "Q8_1 s");

	/* plain integer / f64 types convert */
	int32_t i32[4] = { -5, 0, 7, 1 << 20 };
	alice_dequantize(ALICE_TYPE_I32, i32, y, 4);
	cr_expect(y[0] == -5.0f && y[1] == 0.0f && y[2] == 7.0f && y[3] == (float)(1 << 20));
	double f64[2] = { 1.5, -2.25 };
	alice_dequantize(ALICE_TYPE_F64, f64, y, 2);
	cr_expect(y[0] == 1.5f && y[1] == -2.25f);
	int8_t i8[2] = { -128, 127 };
	alice_dequantize(ALICE_TYPE_I8, i8, y, 2);
	cr_expect(y[0] == -128.0f && y[1] == 127.0f);
}

Test(quant, dequantize_speed)
{
	/* references, not kernels; still a 10M-element tensor must load quickly */
	const int64_t n = 10 * 1024 * 1024;
	uint8_t *q = malloc((size_t)n * 2); /* F16 is the largest of these */
	float *y = malloc((size_t)n * sizeof(float));
	cr_assert(q && y);
	float x[4096];
	fill_gauss(x, 4096, 11);
	static const uint32_t types[] = { ALICE_TYPE_Q4_K, ALICE_TYPE_Q6_K, ALICE_TYPE_Q8_0, ALICE_TYPE_F16,
					  ALICE_TYPE_Q3_K, ALICE_TYPE_IQ4_XS };
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		size_t rs = alice_row_size(types[t], 4096);
		/* tile a quantized 4096-row (random bytes for IQ4_XS: any bytes are valid) */
		uint8_t row[4096 * 2];
		if (!alice_quantize(types[t], x, row, 4096))
			for (size_t i = 0; i < rs; i++)
				row[i] = (uint8_t)(i * 31 + 7);
		for (int64_t r = 0; r < n / 4096; r++)
			memcpy(q + (size_t)r * rs, row, rs);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		alice_dequantize(types[t], q, y, n);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
		cr_log_info("dequantize %s 10M elements: %.3f s", alice_type_name(types[t]), s);
		/* generous for a loaded 2-core CI box; typically ~0.05-0.1 s */
		cr_expect_lt(s, 1.0, "%s dequantize of 10M elements took %.2f s", alice_type_name(types[t]), s);
		cr_expect(isfinite(y[n - 1]));
	}
	free(q);
	free(y);
}

/* ---- llama.cpp fixture files --------------------------------------------------------- */

#define TENSORS_FILE ALICE_FIXTURES_DIR "/tensors/llama-spm-F32-tensors.gguf"

/* Worst relative RMS error per file and type, from the fixtures README
 * (gguf-py's dequantizer). Ours must be at least as close. */
static const struct {
	const char *file;
	const char *type;
	double worst;
} readme_worst[] = {
	{ "Q8_0", "Q2_K", 0.2969 },   { "Q8_0", "Q8_0", 0.0054 },   { "Q5_1", "Q2_K", 0.2969 },
	{ "Q5_1", "Q5_1", 0.0381 },   { "Q5_0", "Q2_K", 0.2969 },   { "Q5_0", "Q5_0", 0.0429 },
	{ "Q4_K_M", "Q2_K", 0.2969 }, { "Q4_K_M", "Q4_K", 0.0719 }, { "Q4_K_M", "Q6_K", 0.0178 },
	{ "Q4_1", "Q2_K", 0.2969 },   { "Q4_1", "Q4_1", 0.0787 },   { "Q4_0", "Q2_K", 0.2969 },
	{ "Q4_0", "Q4_0", 0.0865 },   { "IQ4_XS", "IQ4_XS", 0.0770 }, { "IQ4_XS", "Q2_K", 0.2969 },
	{ "Q3_K_M", "Q2_K", 0.2969 }, { "Q3_K_M", "Q3_K", 0.1514 }, { "Q3_K_M", "Q4_K", 0.0714 },
	{ "Q3_K_M", "Q5_K", 0.0363 },
};

/* Per-type totals over all files, for the report and the byte-identity checks. */
struct type_stats {
	double worst_err;     /* dequantized file vs F32 source */
	int64_t blocks, same; /* our quantization vs the file's, block by block */
	double ours_sq, theirs_sq, src_sq; /* summed squared errors */
	double worst_ratio;   /* max over tensors of our rel RMS / theirs */
	int tensors;
};

static const struct alice_gguf_tensor_info *src_for(struct alice_gguf *src, const char *name, bool *cut)
{
	int64_t i = alice_gguf_find_tensor(src, name);
	*cut = false;
	if (i < 0 && strcmp(name, "token_embd.weight") == 0) {
		i = alice_gguf_find_tensor(src, "token_embd.weight.rows_0_1023");
		*cut = true;
	}
	return i < 0 ? NULL : alice_gguf_tensor(src, i);
}

static int64_t n_elems(const struct alice_gguf_tensor_info *t)
{
	int64_t n = 1;
	for (uint32_t d = 0; d < t->n_dims; d++)
		n *= t->ne[d];
	return n;
}

static void check_model_file(struct alice_gguf *src, const char *ftype, struct type_stats *st)
{
	char path[512];
	snprintf(path, sizeof path, "%s/models/llama-spm-%s.gguf", ALICE_FIXTURES_DIR, ftype);
	struct alice_gguf *g = NULL;
	struct alice_error err = { { 0 } };
	cr_assert_eq(alice_gguf_open(path, &g, &err), ALICE_OK, "%s: %s", path, err.msg);
	double worst[ALICE_TYPE_COUNT] = { 0 };
	bool seen[ALICE_TYPE_COUNT] = { false };
	int64_t nt = alice_gguf_n_tensors(g);
	cr_assert_gt(nt, 0);
	for (int64_t i = 0; i < nt; i++) {
		const struct alice_gguf_tensor_info *t = alice_gguf_tensor(g, i);
		bool cut;
		const struct alice_gguf_tensor_info *s = src_for(src, t->name, &cut);
		cr_assert_not_null(s, "%s: tensor %s has no F32 source", ftype, t->name);
		cr_assert_eq(s->type, ALICE_TYPE_F32);
		cr_assert_eq(s->ne[0], t->ne[0], "%s: %s row length", ftype, t->name);
		int64_t n = n_elems(s);
		if (!cut)
			cr_assert_eq(n, n_elems(t), "%s: %s size", ftype, t->name);
		cr_assert_lt(t->type, ALICE_TYPE_COUNT);
		const struct alice_type_info *ti = alice_type_info(t->type);
		cr_assert(ti && ti->supported, "%s: %s has unsupported type %u", ftype, t->name, t->type);
		size_t rs = alice_row_size(t->type, n);
		cr_assert_gt(rs, 0);
		cr_assert_leq(rs, t->nbytes);
		const float *x = s->data;
		float *y = malloc((size_t)n * sizeof(float));
		cr_assert(y);
		alice_dequantize(t->type, t->data, y, n);
		double e = rel_rms(y, x, n);
		if (t->type == ALICE_TYPE_F32)
			cr_expect_eq(memcmp(y, x, (size_t)n * 4), 0, "%s: F32 tensor %s differs", ftype, t->name);
		seen[t->type] = true;
		if (e > worst[t->type])
			worst[t->type] = e;
		struct type_stats *ts = &st[t->type];
		if (e > ts->worst_err)
			ts->worst_err = e;

		/* requantize the source with our reference quantizer */
		if (ti->can_quantize && t->type != ALICE_TYPE_F32) {
			uint8_t *q = malloc(rs);
			float *z = malloc((size_t)n * sizeof(float));
			cr_assert(q && z);
			cr_assert(alice_quantize(t->type, x, q, n));
			int64_t nb = (int64_t)(rs / ti->type_size);
			int64_t same = 0;
			for (int64_t b = 0; b < nb; b++)
				same += memcmp(q + b * ti->type_size, (const uint8_t *)t->data + b * ti->type_size,
					       ti->type_size) == 0;
			alice_dequantize(t->type, q, z, n);
			double eo = rel_rms(z, x, n);
			ts->blocks += nb;
			ts->same += same;
			double sq = 0;
			for (int64_t k = 0; k < n; k++)
				sq += (double)x[k] * x[k];
			ts->ours_sq += eo * eo * sq;
			ts->theirs_sq += e * e * sq;
			ts->src_sq += sq;
			if (e > 0 && eo / e > ts->worst_ratio)
				ts->worst_ratio = eo / e;
			ts->tensors++;
			free(q);
			free(z);
		}
		free(y);
	}
	for (uint32_t t = 0; t < ALICE_TYPE_COUNT; t++) {
		if (!seen[t] || t == ALICE_TYPE_F32)
			continue;
		double ref = -1;
		for (size_t k = 0; k < sizeof readme_worst / sizeof readme_worst[0]; k++)
			if (!strcmp(readme_worst[k].file, ftype) && !strcmp(readme_worst[k].type, alice_type_name(t)))
				ref = readme_worst[k].worst;
		cr_assert_geq(ref, 0, "%s: type %s not in the README table", ftype, alice_type_name(t));
		cr_log_info("llama-spm-%-6s %-6s worst rel RMS %.5f (README %.4f)", ftype, alice_type_name(t),
			    worst[t], ref);
		cr_expect_leq(worst[t], ref * 1.02 + 1e-6, "%s %s: worst %.5f > README %.4f", ftype,
			      alice_type_name(t), worst[t], ref);
		/* same dequantization as gguf-py: the worst error matches its rounded value */
		cr_expect_geq(worst[t], ref * 0.98 - 5e-5, "%s %s: worst %.5f absurdly below README %.4f", ftype,
			      alice_type_name(t), worst[t], ref);
	}
	for (size_t k = 0; k < sizeof readme_worst / sizeof readme_worst[0]; k++)
		if (!strcmp(readme_worst[k].file, ftype))
			cr_expect(seen[alice_type_from_name(readme_worst[k].type)], "%s: no %s tensor", ftype,
				  readme_worst[k].type);
	alice_gguf_close(g);
}

Test(quant_fixture, dequantize_and_requantize_llama_cpp_files)
{
	static const char *files[] = { "Q8_0", "Q5_1", "Q5_0", "Q4_K_M", "Q4_1", "Q4_0", "IQ4_XS", "Q3_K_M" };
	struct alice_gguf *src = NULL;
	struct alice_error err = { { 0 } };
	cr_assert_eq(alice_gguf_open(TENSORS_FILE, &src, &err), ALICE_OK, "%s", err.msg);
	static struct type_stats st[ALICE_TYPE_COUNT];
	memset(st, 0, sizeof st);
	for (size_t f = 0; f < sizeof files / sizeof files[0]; f++)
		check_model_file(src, files[f], st);
	alice_gguf_close(src);

	for (uint32_t t = 0; t < ALICE_TYPE_COUNT; t++) {
		struct type_stats *ts = &st[t];
		if (!ts->tensors)
			continue;
		double frac = (double)ts->same / (double)ts->blocks;
		double ours = sqrt(ts->ours_sq / ts->src_sq), theirs = sqrt(ts->theirs_sq / ts->src_sq);
		cr_log_info("requantize %-5s: %lld/%lld blocks byte-identical (%.4f); rel RMS ours %.5f llama.cpp "
			    "%.5f (worst tensor ratio %.4f)",
			    alice_type_name(t), (long long)ts->same, (long long)ts->blocks, frac, ours, theirs,
			    ts->worst_ratio);
		/* llama-quantize without an imatrix runs the reference quantizers,
		 * which ours reproduce operation for operation: every block of every
		 * type (simple and K-quants) comes out byte-identical. */
		cr_expect_eq(ts->same, ts->blocks, "%s: only %lld of %lld blocks identical to llama.cpp's",
			     alice_type_name(t), (long long)ts->same, (long long)ts->blocks);
		cr_expect_leq(ours, theirs * 1.0001, "%s: our error %.5f vs llama.cpp %.5f", alice_type_name(t),
			      ours, theirs);
	}
}
