/* test_ops.c — every op of backend.h, on every backend the loader finds
 * (ALICE_BACKEND_PATH; cpu now, cuda/vulkan when built), against a plain
 * double-precision scalar reference written here, on seeded random inputs.
 *
 * One Criterion test per backend x op (parameterized); each runs that op's
 * cases (types, odd shapes, strided views, broadcast, M=1/M>1, GQA, windows)
 * and logs one line per case. A backend whose probe fails is skipped with its
 * reason; an op a backend does not support is reported, and is a failure
 * only for the core set the llama family needs (case.core).
 *
 * Error measure: NMSE = sum (out - ref)^2 / sum ref^2 over the output, with
 * a bound per case explained where the bound is chosen (bound_*). MUL_MAT's
 * reference is alice_dequantize(weights) . (unrounded f32 activations) in
 * double, so its bound is what the activation rounding of the weight type's
 * dot product (F16 / BF16 / Q8_0 / Q8_K, as llama.cpp does) can cost. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"
#include "support/op_case.h"
#include "support/op_cases_sample.h"

/* ---- error bounds (NMSE) ------------------------------------------------
 * Activations are N(0,1). Rounding x to a format with relative error u
 * (uniform) gives NMSE u^2/3 on a dot product whose other side is exact:
 *   F16: u = 2^-11 -> 8e-8;  BF16: u = 2^-8 -> 5e-6.
 * Q8_0 (32-blocks): error uniform in +-d/2, d = amax/127; amax of 32 normals
 * is ~2.1-3.5 -> NMSE (amax/127)^2/12 = 2.3e-5 .. 6.3e-5.
 * Q8_K (256-blocks): amax of 256 normals ~2.9-4 -> 4.3e-5 .. 8.3e-5.
 * Bounds are set ~2x above the worst of these; float32 paths get 1e-9
 * (float summation over K <= 4096 terms is ~1e-12). */
#define BOUND_EXACT 1e-12
#define BOUND_F32 1e-9
#define BOUND_F16_ACT 3e-7
#define BOUND_BF16_ACT 1.5e-5
#define BOUND_Q8_0_ACT 1.5e-4
#define BOUND_Q8_K_ACT 2e-4
/* RoPE: the CPU reproduces llama.cpp's float recurrence theta *= base^(-2/n)
 * (angle error ~ pos * i * 6e-8 rad); positions up to 4096 -> < 1e-7. */
#define BOUND_ROPE 1e-6
/* Attention with an F16 cache: q may be rounded to F16 (8e-8 on scores),
 * amplified by the softmax over scores of magnitude ~3. */
#define BOUND_ATTN_F16 2e-6
/* ...and the V accumulator may be kept in F16 as llama.cpp's CPU flash
 * attention does for short batches (< 64 query tokens): every cell's fma and
 * every rescale on a new maximum rounds the running sum to F16, a relative
 * error uniform in +-2^-11, variance <= (2^-11)^2/3 = 7.9e-8 of the sum's
 * square. Partial sums are no larger than the final one on average (softmax
 * weights <= 1, random V), so over n cells the NMSE is <= n * 7.9e-8 plus the
 * ~ln(n) rescales; bound: 2e-6 + 2 * (n + 8) * 7.9e-8 (2x as above). */
#define BOUND_ATTN_F16_ACC(n) (BOUND_ATTN_F16 + 2.0 * ((n) + 8) * 7.9e-8)

/* Quantized weights [K, N] from N(0,1) values (the reference quantizer), or,
 * for types without one, random codes with a sane scale field. */
static void fill_weights(struct tcase *c, int i, struct rng *r)
{
	struct alice_tensor *t = &c->t[i];
	const struct alice_type_info *ti = alice_type_info(t->type);
	int64_t K = t->ne[0];
	float *row = malloc((size_t)K * sizeof(float));
	for (int64_t n = 0; n < t->ne[1] * t->ne[2] * t->ne[3]; n++) {
		int64_t i1 = n % t->ne[1], i2 = (n / t->ne[1]) % t->ne[2], i3 = n / (t->ne[1] * t->ne[2]);
		uint8_t *dst = c->host[i] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
		for (int64_t k = 0; k < K; k++)
			row[k] = (float)rng_gauss(r);
		if (ti->block_size == 1) {
			for (int64_t k = 0; k < K; k++) {
				if (t->type == ALICE_TYPE_F32)
					memcpy(dst + 4 * k, &row[k], 4);
				else {
					uint16_t h = t->type == ALICE_TYPE_F16 ? alice_fp32_to_fp16(row[k])
									      : alice_fp32_to_bf16(row[k]);
					memcpy(dst + 2 * k, &h, 2);
				}
			}
		} else if (ti->can_quantize) {
			cr_assert(alice_quantize(t->type, row, dst, K), "quantize %s", ti->name);
		} else {
			size_t bytes = alice_row_size(t->type, K);
			for (size_t b = 0; b < bytes; b++)
				dst[b] = (uint8_t)rng_u64(r);
			/* IQ4_NL / IQ4_XS: fp16 d first in each block */
			for (int64_t b = 0; b < K / ti->block_size; b++) {
				uint16_t h = alice_fp32_to_fp16((float)(0.01 + 0.01 * rng_unif(r)));
				memcpy(dst + b * ti->type_size, &h, 2);
			}
		}
	}
	free(row);
}

/* Dequantized row n (flat over dims 1..3) of weight tensor i. */
static void weight_row(struct tcase *c, int i, int64_t i1, int64_t i2, int64_t i3, float *out)
{
	struct alice_tensor *t = &c->t[i];
	const uint8_t *p = c->host[i] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
	alice_dequantize(t->type, p, out, t->ne[0]);
}

/* ---- reference ops and case builders ------------------------------------- */

static bool type_is_core(uint32_t type)
{
	switch (type) {
	case ALICE_TYPE_F32: case ALICE_TYPE_F16: case ALICE_TYPE_Q8_0: case ALICE_TYPE_Q4_0:
	case ALICE_TYPE_Q4_K: case ALICE_TYPE_Q5_K: case ALICE_TYPE_Q6_K:
		return true;
	default:
		return false;
	}
}

static double mm_bound(uint32_t type)
{
	switch (type) {
	case ALICE_TYPE_F32: return BOUND_F32;
	case ALICE_TYPE_F16: return BOUND_F16_ACT;
	case ALICE_TYPE_BF16: return BOUND_BF16_ACT;
	case ALICE_TYPE_Q2_K: case ALICE_TYPE_Q3_K: case ALICE_TYPE_Q4_K: case ALICE_TYPE_Q5_K:
	case ALICE_TYPE_Q6_K: case ALICE_TYPE_IQ4_XS:
		return BOUND_Q8_K_ACT;
	default:
		return BOUND_Q8_0_ACT;
	}
}

static const uint32_t weight_types[] = {
	ALICE_TYPE_F32,	 ALICE_TYPE_F16,  ALICE_TYPE_BF16,   ALICE_TYPE_Q4_0,  ALICE_TYPE_Q4_1,
	ALICE_TYPE_Q5_0, ALICE_TYPE_Q5_1, ALICE_TYPE_Q8_0,   ALICE_TYPE_Q2_K,  ALICE_TYPE_Q3_K,
	ALICE_TYPE_Q4_K, ALICE_TYPE_Q5_K, ALICE_TYPE_Q6_K,   ALICE_TYPE_IQ4_NL, ALICE_TYPE_IQ4_XS,
	ALICE_TYPE_MXFP4, ALICE_TYPE_Q1_0,
};
#define N_WEIGHT_TYPES (sizeof(weight_types) / sizeof(weight_types[0]))

/* types some backend packs (tensor_pack): their cases run once more packed */
static bool packs(uint32_t type)
{
	return type == ALICE_TYPE_Q8_0 || type == ALICE_TYPE_Q6_K;
}

static void build_mul_mat(struct tcase **cs, int *n, struct rng *r)
{
	for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
		uint32_t type = weight_types[ti];
		int64_t bs = alice_type_info(type)->block_size;
		int64_t kq = bs > 32 ? 256 : 32; /* K granularity (Q1_0 is 128) */
		/* K, N, M, batch (ne2 of x; w has ne2 = 1 or 2), x padding, import */
		/* pack: the weights in the backend's packed layout (tensor_pack), where it has one */
		struct { int64_t K, N, M, b2, w2; int pad; bool imp, pack; } sh[] = {
			{8 * kq, 64, 1, 1, 1, 0, true, false},    /* decode */
			{2048, 64, 1, 1, 1, 0, false, true},      /* decode, packed */
			{4096, 16, 3, 1, 1, 0, false, true},      /* decode, packed, a row split over warps */
			{2048, 40, 8, 1, 1, 0, false, true},      /* batched decode columns, packed */
			{2048, 48, 20, 1, 1, 0, false, true},     /* prefill, more columns, packed */
			{2048, 33, 9, 1, 1, 0, false, true},      /* prefill, packed */
			{8 * kq, 136, 144, 1, 1, 0, false, false}, /* prefill, several tiles both ways */
			{2048, 136, 144, 1, 1, 0, false, true},   /* the same packed */
			{bs == 32 ? 64 * kq : 0, 40, 1, 1, 1, 0, false, false}, /* decode, more than 32 blocks a lane set (split K) */
			{2 * kq, 33, 7, 1, 1, 0, false, false},    /* odd N, prefill */
			{4 * kq, 16, 17, 1, 1, 3, false, false},   /* strided activations, M > tile */
			{kq * (bs > 32 ? 1 : 3), 9, 2, 4, 2, 0, false, false}, /* batch: w broadcast over 2 */
			{bs == 1 ? 67 : 0, 5, 3, 1, 1, 1, false, false}, /* odd K (plain types only) */
		};
		for (size_t s = 0; s < sizeof(sh) / sizeof(sh[0]); s++) {
			if (sh[s].K == 0 || (sh[s].pack && !packs(type)))
				continue;
			int64_t K = sh[s].K, N = sh[s].N, M = sh[s].M;
			struct tcase *c = new_case(cs, n, "MUL_MAT %s K=%lld N=%lld M=%lld batch=%lld/%lld%s%s%s",
						   alice_type_name(type), (long long)K, (long long)N, (long long)M,
						   (long long)sh[s].b2, (long long)sh[s].w2,
						   sh[s].pad ? " strided-x" : "", sh[s].imp ? " imported-w" : "",
						   sh[s].pack ? " packed-w" : "");
			c->node.op = ALICE_OP_MUL_MAT;
			tc_tensor(c, ALICE_TYPE_F32, N, M, sh[s].b2, 1, 0);
			int w = tc_tensor(c, type, K, N, sh[s].w2, 1, 0);
			int x = tc_tensor(c, ALICE_TYPE_F32, K, M, sh[s].b2, 1, sh[s].pad);
			c->import[w] = sh[s].imp;
			c->pack[w] = sh[s].pack;
			c->node.src[0] = w;
			c->node.src[1] = x;
			fill_weights(c, w, r);
			fill_gauss(c, x, r, 1.0);
			c->bound = mm_bound(type);
			c->core = type_is_core(type);
			double *ref = alloc_ref(c);
			float *wr = malloc((size_t)K * sizeof(float));
			int64_t r2 = sh[s].b2 / sh[s].w2;
			for (int64_t b = 0; b < sh[s].b2; b++)
				for (int64_t nn = 0; nn < N; nn++) {
					weight_row(c, w, nn, b / r2, 0, wr);
					for (int64_t m = 0; m < M; m++) {
						double acc = 0.0;
						for (int64_t k = 0; k < K; k++)
							acc += (double)wr[k] * get_el(c, x, k + K * (m + M * b));
						ref[nn + N * (m + M * b)] = acc;
					}
				}
			free(wr);
		}
	}
}

static void build_get_rows(struct tcase **cs, int *n, struct rng *r)
{
	for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
	    for (int pk = 0; pk < 2; pk++) {
		uint32_t type = weight_types[ti];
		if (pk && !packs(type))
			continue;
		int64_t bs = alice_type_info(type)->block_size;
		int64_t K = pk ? 2048 : bs == 1 ? 45 : (bs > 32 ? 512 : 96);
		struct tcase *c = new_case(cs, n, "GET_ROWS %s ne0=%lld rows=10 ids=6%s", alice_type_name(type),
					   (long long)K, pk ? " packed" : "");
		c->node.op = ALICE_OP_GET_ROWS;
		tc_tensor(c, ALICE_TYPE_F32, K, 6, 1, 1, type == ALICE_TYPE_F32 ? 2 : 0);
		int s = tc_tensor(c, type, K, 10, 1, 1, 0);
		c->pack[s] = pk;
		int ids = tc_tensor(c, ALICE_TYPE_I32, 6, 1, 1, 1, 0);
		c->node.src[0] = s;
		c->node.src[1] = ids;
		fill_weights(c, s, r);
		static const int idv[6] = {3, 0, 9, 3, 7, 1};
		for (int i = 0; i < 6; i++)
			set_el(c, ids, i, idv[i]);
		c->bound = BOUND_EXACT;
		c->core = type_is_core(type);
		double *ref = alloc_ref(c);
		float *wr = malloc((size_t)K * sizeof(float));
		for (int i = 0; i < 6; i++) {
			weight_row(c, s, idv[i], 0, 0, wr);
			for (int64_t k = 0; k < K; k++)
				ref[k + K * i] = wr[k];
		}
		free(wr);
	    }
	}
}

static void build_binary(struct tcase **cs, int *n, struct rng *r)
{
	struct { int64_t a[4], b[4]; int pad; } sh[] = {
		{{33, 4, 3, 1}, {33, 4, 3, 1}, 0},
		{{33, 4, 3, 1}, {33, 1, 1, 1}, 0},
		{{33, 4, 3, 2}, {1, 4, 1, 2}, 2},
		{{64, 5, 1, 1}, {64, 5, 1, 1}, 1},
	};
	for (int op = ALICE_OP_ADD; op <= ALICE_OP_MUL; op++)
		for (size_t s = 0; s < sizeof(sh) / sizeof(sh[0]); s++) {
			const int64_t *a = sh[s].a, *b = sh[s].b;
			struct tcase *c = new_case(cs, n, "%s [%lld,%lld,%lld,%lld] %s [%lld,%lld,%lld,%lld]%s",
						   op == ALICE_OP_ADD ? "ADD" : "MUL", (long long)a[0],
						   (long long)a[1], (long long)a[2], (long long)a[3],
						   op == ALICE_OP_ADD ? "+" : "*", (long long)b[0], (long long)b[1],
						   (long long)b[2], (long long)b[3], sh[s].pad ? " strided" : "");
			c->node.op = (uint32_t)op;
			tc_tensor(c, ALICE_TYPE_F32, a[0], a[1], a[2], a[3], 0);
			int x = tc_tensor(c, ALICE_TYPE_F32, a[0], a[1], a[2], a[3], sh[s].pad);
			int y = tc_tensor(c, ALICE_TYPE_F32, b[0], b[1], b[2], b[3], 0);
			c->node.src[0] = x;
			c->node.src[1] = y;
			fill_gauss(c, x, r, 1.0);
			fill_gauss(c, y, r, 1.0);
			c->bound = BOUND_EXACT;
			double *ref = alloc_ref(c);
			for (int64_t i = 0; i < nelem(&c->t[0]); i++) {
				int64_t i0 = i % a[0], i1 = (i / a[0]) % a[1], i2 = (i / (a[0] * a[1])) % a[2],
					i3 = i / (a[0] * a[1] * a[2]);
				int64_t j = (i0 % b[0]) + b[0] * ((i1 % b[1]) + b[1] * ((i2 % b[2]) + b[2] * (i3 % b[3])));
				double u = get_el(c, x, i), v = get_el(c, y, j);
				ref[i] = (float)(op == ALICE_OP_ADD ? u + v : u * v);
			}
		}
}

static double act_ref(int act, double x)
{
	switch (act) {
	case ALICE_ACT_SILU: return x / (1.0 + exp(-x));
	case ALICE_ACT_GELU_TANH:
		return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
	case ALICE_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
	case ALICE_ACT_SOFTPLUS: return log1p(exp(x));
	case ALICE_ACT_EXP: return exp(x);
	case ALICE_ACT_NEG: return -x;
	case ALICE_ACT_RELU: return x > 0 ? x : 0;
	case ALICE_ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
	}
	return NAN;
}

static const char *const act_names[] = {"SILU", "GELU_TANH", "SIGMOID", "SOFTPLUS",
					"EXP",	"NEG",	     "RELU",	"GELU_ERF"};

static void build_unary_glu(struct tcase **cs, int *n, struct rng *r)
{
	for (int glu = 0; glu < 2; glu++)
		for (int act = 0; act < 8; act++) {
			int pad = act % 2;
			struct tcase *c = new_case(cs, n, "%s %s [67,3,2]%s", glu ? "GLU" : "UNARY", act_names[act],
						   pad ? " strided" : "");
			c->node.op = glu ? ALICE_OP_GLU : ALICE_OP_UNARY;
			c->node.ip[0] = act;
			tc_tensor(c, ALICE_TYPE_F32, 67, 3, 2, 1, 0);
			int x = tc_tensor(c, ALICE_TYPE_F32, 67, 3, 2, 1, pad);
			c->node.src[0] = x;
			fill_gauss(c, x, r, 2.0);
			int g = -1;
			if (glu) {
				g = tc_tensor(c, ALICE_TYPE_F32, 67, 3, 2, 1, 0);
				c->node.src[1] = g;
				fill_gauss(c, g, r, 1.0);
			}
			/* GELU_TANH may be llama.cpp's CPU F16 table (input and result
			 * rounded to F16), as the cpu backend computes it (backend.h) */
			c->bound = act == ALICE_ACT_GELU_TANH ? BOUND_F16_ACT : BOUND_F32;
			c->core = act == ALICE_ACT_SILU || act == ALICE_ACT_GELU_TANH;
			double *ref = alloc_ref(c);
			for (int64_t i = 0; i < nelem(&c->t[0]); i++)
				ref[i] = act_ref(act, get_el(c, x, i)) * (glu ? get_el(c, g, i) : 1.0);
		}
}

static void build_scale_softcap(struct tcase **cs, int *n, struct rng *r)
{
	for (int which = 0; which < 2; which++) {
		struct tcase *c = new_case(cs, n, "%s [100,7] strided", which ? "SOFTCAP cap=5" : "SCALE *0.125+0.5");
		c->node.op = which ? ALICE_OP_SOFTCAP : ALICE_OP_SCALE;
		c->node.fp[0] = which ? 5.0f : 0.125f;
		c->node.fp[1] = which ? 0.0f : 0.5f;
		tc_tensor(c, ALICE_TYPE_F32, 100, 7, 1, 1, 0);
		int x = tc_tensor(c, ALICE_TYPE_F32, 100, 7, 1, 1, 1);
		c->node.src[0] = x;
		fill_gauss(c, x, r, 8.0);
		c->bound = BOUND_F32;
		double *ref = alloc_ref(c);
		for (int64_t i = 0; i < nelem(&c->t[0]); i++) {
			double v = get_el(c, x, i);
			ref[i] = which ? 5.0 * tanh(v / 5.0) : v * 0.125 + 0.5;
		}
	}
}

static void build_norm(struct tcase **cs, int *n, struct rng *r)
{
	for (int v = 0; v < 4; v++) {
		bool l2 = v == 3, weight = v == 1 || v == 2;
		int pad = v == 2 ? 5 : 0;
		struct tcase *c = new_case(cs, n, "%s [257,5,2]%s%s", l2 ? "L2_NORM" : "RMS_NORM",
					   weight ? " *weight" : "", pad ? " strided" : "");
		c->node.op = l2 ? ALICE_OP_L2_NORM : ALICE_OP_RMS_NORM;
		c->node.fp[0] = l2 ? 1e-12f : 1e-5f;
		tc_tensor(c, ALICE_TYPE_F32, 257, 5, 2, 1, 0);
		int x = tc_tensor(c, ALICE_TYPE_F32, 257, 5, 2, 1, pad);
		c->node.src[0] = x;
		fill_gauss(c, x, r, 3.0);
		int w = -1;
		if (weight) {
			w = tc_tensor(c, ALICE_TYPE_F32, 257, 1, 1, 1, 0);
			c->node.src[1] = w;
			fill_gauss(c, w, r, 1.0);
		}
		c->bound = BOUND_F32;
		c->core = !l2;
		double *ref = alloc_ref(c);
		for (int64_t row = 0; row < 10; row++) {
			double ss = 0.0;
			for (int64_t i = 0; i < 257; i++) {
				double e = get_el(c, x, i + 257 * row);
				ss += e * e;
			}
			double sc = l2 ? 1.0 / fmax(sqrt(ss), 1e-12) : 1.0 / sqrt(ss / 257.0 + 1e-5);
			for (int64_t i = 0; i < 257; i++)
				ref[i + 257 * row] = get_el(c, x, i + 257 * row) * sc * (w >= 0 ? get_el(c, w, i) : 1.0);
		}
	}
}

/* NORM (LayerNorm): plain, * weight + bias (broadcast), strided input.
 * Not core: the BERT encoder needs it, the llama family does not. */
static void build_layer_norm(struct tcase **cs, int *n, struct rng *r)
{
	for (int v = 0; v < 3; v++) {
		bool affine = v > 0;
		int pad = v == 2 ? 3 : 0;
		struct tcase *c = new_case(cs, n, "NORM [384,4,3]%s%s", affine ? " *weight +bias" : "",
					   pad ? " strided" : "");
		c->node.op = ALICE_OP_NORM;
		c->node.fp[0] = 1e-12f;
		tc_tensor(c, ALICE_TYPE_F32, 384, 4, 3, 1, 0);
		int x = tc_tensor(c, ALICE_TYPE_F32, 384, 4, 3, 1, pad);
		c->node.src[0] = x;
		fill_gauss(c, x, r, 3.0);
		for (int64_t i = 0; i < nelem(&c->t[x]); i++) /* an offset mean, as residual streams have */
			set_el(c, x, i, get_el(c, x, i) + 5.0);
		int w = -1, b = -1;
		if (affine) {
			w = tc_tensor(c, ALICE_TYPE_F32, 384, 1, 1, 1, 0);
			b = tc_tensor(c, ALICE_TYPE_F32, 384, 1, 1, 1, 0);
			c->node.src[1] = w;
			c->node.src[2] = b;
			fill_gauss(c, w, r, 1.0);
			fill_gauss(c, b, r, 0.5);
		}
		c->bound = BOUND_F32;
		c->core = false;
		double *ref = alloc_ref(c);
		for (int64_t row = 0; row < 12; row++) {
			double m = 0.0, var = 0.0;
			for (int64_t i = 0; i < 384; i++)
				m += get_el(c, x, i + 384 * row);
			m /= 384.0;
			for (int64_t i = 0; i < 384; i++) {
				double e = get_el(c, x, i + 384 * row) - m;
				var += e * e;
			}
			double sc = 1.0 / sqrt(var / 384.0 + 1e-12);
			for (int64_t i = 0; i < 384; i++)
				ref[i + 384 * row] = (get_el(c, x, i + 384 * row) - m) * sc * (w >= 0 ? get_el(c, w, i) : 1.0) +
						     (b >= 0 ? get_el(c, b, i) : 0.0);
		}
	}
}

static void build_rope(struct tcase **cs, int *n, struct rng *r)
{
	struct { int mode, hd, nd; bool ff; float scale; int pad; } v[] = {
		{ALICE_ROPE_NORMAL, 64, 64, false, 1.0f, 0}, {ALICE_ROPE_NEOX, 64, 64, false, 1.0f, 0},
		{ALICE_ROPE_NORMAL, 64, 32, true, 0.25f, 2}, {ALICE_ROPE_NEOX, 128, 64, true, 1.0f, 4},
		{ALICE_ROPE_NEOX, 80, 80, false, 0.5f, 0},  {ALICE_ROPE_IMROPE, 64, 64, false, 1.0f, 0},
		{ALICE_ROPE_IMROPE, 128, 128, true, 1.0f, 2},
	};
	for (size_t s = 0; s < sizeof(v) / sizeof(v[0]); s++) {
		int hd = v[s].hd, nd = v[s].nd, nh = 3, nt = 5;
		bool im = v[s].mode == ALICE_ROPE_IMROPE;
		struct tcase *c = new_case(cs, n, "ROPE %s head_dim=%d n_dims=%d%s freq_scale=%g%s",
					   v[s].mode == 0 ? "normal" : im ? "imrope" : "neox", hd, nd,
					   v[s].ff ? " freq-factors" : "", v[s].scale, v[s].pad ? " strided" : "");
		c->node.op = ALICE_OP_ROPE;
		c->node.ip[0] = nd;
		c->node.ip[1] = v[s].mode;
		int sect[4] = {nd / 2 - 2 * (nd / 6), nd / 6, nd / 6, 0};
		if (im)
			for (int k = 0; k < 4; k++)
				c->node.ip[2 + k] = sect[k];
		c->node.fp[0] = 10000.0f;
		c->node.fp[1] = v[s].scale;
		tc_tensor(c, ALICE_TYPE_F32, hd, nh, nt, 1, 0);
		int x = tc_tensor(c, ALICE_TYPE_F32, hd, nh, nt, 1, v[s].pad);
		int pos = tc_tensor(c, ALICE_TYPE_I32, (im ? 4 : 1) * nt, 1, 1, 1, 0);
		c->node.src[0] = x;
		c->node.src[1] = pos;
		fill_gauss(c, x, r, 1.0);
		for (int i = 0; i < (im ? 4 : 1) * nt; i++)
			set_el(c, pos, i, (double)(rng_u64(r) % 4096));
		int ff = -1;
		if (v[s].ff) {
			ff = tc_tensor(c, ALICE_TYPE_F32, nd / 2, 1, 1, 1, 0);
			c->node.src[2] = ff;
			for (int i = 0; i < nd / 2; i++)
				set_el(c, ff, i, 1.0 + 3.0 * rng_unif(r));
		}
		c->bound = BOUND_ROPE;
		c->core = !im;
		double *ref = alloc_ref(c);
		int sd = sect[0] + sect[1] + sect[2] + sect[3];
		for (int t = 0; t < nt; t++)
			for (int h = 0; h < nh; h++) {
				int64_t base = (int64_t)hd * (h + nh * t);
				for (int i = 0; i < nd / 2; i++) {
					int which = 0;
					if (im) {
						int sec = i % sd;
						if (sec % 3 == 1 && sec < 3 * sect[1])
							which = 1;
						else if (sec % 3 == 2 && sec < 3 * sect[2])
							which = 2;
						else if (sec % 3 == 0 && sec < 3 * sect[0])
							which = 0;
						else
							which = 3;
					}
					double p = get_el(c, pos, t + which * nt);
					double th = p * v[s].scale * pow(10000.0, -2.0 * i / nd) /
						    (ff >= 0 ? get_el(c, ff, i) : 1.0);
					int a = v[s].mode == ALICE_ROPE_NORMAL ? 2 * i : i;
					int b = v[s].mode == ALICE_ROPE_NORMAL ? 2 * i + 1 : i + nd / 2;
					double x0 = get_el(c, x, base + a), x1 = get_el(c, x, base + b);
					ref[base + a] = x0 * cos(th) - x1 * sin(th);
					ref[base + b] = x0 * sin(th) + x1 * cos(th);
				}
				for (int i = nd; i < hd; i++)
					ref[base + i] = get_el(c, x, base + i);
			}
	}
}

/* An ATTENTION case: its shape, cache type, soft-cap, window (0 none),
 * q padding; two: the tokens are two sequences, the first half at the end of
 * cells [0, ncell/2), the rest at the end of [ncell/2, ncell) (a server
 * step's layout). */
struct attn_variant {
	int dk, dv, nh, nkv, nt, ncell;
	uint32_t kt;
	float cap;
	int window;
	int pad;
	bool two;
	bool spread; /* one token per sequence, as a decode step (no run continues) */
};

static void build_attention_cases(struct tcase **cs, int *n, struct rng *r, const struct attn_variant *v, size_t nv);

static void build_attention(struct tcase **cs, int *n, struct rng *r)
{
	static const struct attn_variant v[] = {
		{64, 64, 8, 8, 1, 40, ALICE_TYPE_F16, 0.0f, 0, 0, false, false},
		{64, 64, 8, 2, 7, 40, ALICE_TYPE_F16, 0.0f, 0, 0, false, false},
		{64, 64, 8, 1, 5, 33, ALICE_TYPE_F32, 0.0f, 0, 2, false, false},
		{128, 128, 4, 2, 6, 50, ALICE_TYPE_F16, 0.0f, 8, 0, false, false},
		/* long decode ranges: a token's range cut into several splits */
		{128, 128, 16, 4, 3, 1100, ALICE_TYPE_F16, 0.0f, 0, 0, false, false},
		{64, 64, 8, 8, 2, 600, ALICE_TYPE_F16, 0.0f, 0, 0, false, false},
		{64, 32, 6, 3, 4, 20, ALICE_TYPE_F16, 30.0f, 0, 0, false, false},
		{32, 32, 4, 4, 9, 64, ALICE_TYPE_F32, 50.0f, 5, 1, false, false},
		/* >= 64 tokens: the prefill regime (64-cell tiles, F32 accumulator) */
		{64, 64, 4, 2, 70, 150, ALICE_TYPE_F16, 0.0f, 0, 0, false, false},
		{64, 32, 4, 4, 66, 100, ALICE_TYPE_F32, 30.0f, 40, 1, false, false},
	};
	build_attention_cases(cs, n, r, v, sizeof(v) / sizeof(v[0]));
}

static void build_attention_cases(struct tcase **cs, int *n, struct rng *r, const struct attn_variant *v, size_t nv)
{
	for (size_t s = 0; s < nv; s++) {
		int dk = v[s].dk, dv = v[s].dv, nh = v[s].nh, nkv = v[s].nkv, nt = v[s].nt, nc = v[s].ncell;
		struct tcase *c = new_case(cs, n, "ATTENTION %s d_k=%d d_v=%d heads=%d/%d tokens=%d cells=%d%s%s%s%s%s",
					   alice_type_name(v[s].kt), dk, dv, nh, nkv, nt, nc,
					   v[s].cap != 0.0f ? " soft-cap" : "", v[s].window ? " window" : "",
					   v[s].pad ? " strided-q" : "", v[s].two ? " two-seq" : "",
					   v[s].spread ? " one-per-seq" : "");
		c->node.op = ALICE_OP_ATTENTION;
		float scale = 1.0f / sqrtf((float)dk) * (v[s].cap != 0.0f ? 8.0f : 1.0f);
		c->node.fp[0] = scale;
		c->node.fp[1] = v[s].cap;
		tc_tensor(c, ALICE_TYPE_F32, dv, nh, nt, 1, 0);
		int q = tc_tensor(c, ALICE_TYPE_F32, dk, nh, nt, 1, v[s].pad);
		int k = tc_tensor(c, v[s].kt, dk, nkv, nc, 1, 0);
		int vv = tc_tensor(c, v[s].kt, dv, nkv, nc, 1, 0);
		int rg = tc_tensor(c, ALICE_TYPE_I32, 2, nt, 1, 1, 0);
		c->node.src[0] = q;
		c->node.src[1] = k;
		c->node.src[2] = vv;
		c->node.src[3] = rg;
		fill_gauss(c, q, r, 1.0);
		fill_gauss(c, k, r, 1.0);
		fill_gauss(c, vv, r, 1.0);
		for (int t = 0; t < nt; t++) {
			/* causal: token t sits at cell nc - nt + t; windowed: last `window` cells */
			int end = nc - nt + t + 1, beg = v[s].window ? end - v[s].window : 0;
			if (v[s].two) { /* sequence 0: tokens [0, nt/2) ending cells [0, nc/2) */
				int h0 = nt / 2, base = t < h0 ? 0 : nc / 2, len = nc / 2, k0 = t < h0 ? h0 : nt - h0;
				int i = t < h0 ? t : t - h0;
				end = base + len - k0 + i + 1;
				beg = v[s].window ? end - v[s].window : base;
				if (beg < base)
					beg = base;
			}
			if (v[s].spread) { /* 37 t mod nc/2 never steps by one (nc/2 > 37) */
				end = nc / 2 + (int)((37 * (int64_t)t) % (nc / 2)) + 1;
				beg = v[s].window ? end - v[s].window : 0;
			}
			if (beg < 0)
				beg = 0;
			set_el(c, rg, 2 * t, beg);
			set_el(c, rg, 2 * t + 1, end);
		}
		c->bound = v[s].kt == ALICE_TYPE_F16 ? BOUND_ATTN_F16_ACC(nc) : BOUND_F32;
		double *ref = alloc_ref(c);
		double *sc = malloc((size_t)nc * sizeof(double));
		for (int t = 0; t < nt; t++)
			for (int h = 0; h < nh; h++) {
				int hk = h / (nh / nkv);
				int beg = (int)get_el(c, rg, 2 * t), end = (int)get_el(c, rg, 2 * t + 1);
				double mx = -INFINITY, sum = 0.0;
				for (int ce = beg; ce < end; ce++) {
					double d = 0.0;
					for (int i = 0; i < dk; i++)
						d += get_el(c, q, i + (int64_t)dk * (h + nh * t)) *
						     get_el(c, k, i + (int64_t)dk * (hk + nkv * ce));
					d *= scale;
					if (v[s].cap != 0.0f)
						d = v[s].cap * tanh(d / v[s].cap);
					sc[ce] = d;
					mx = fmax(mx, d);
				}
				for (int ce = beg; ce < end; ce++) {
					sc[ce] = exp(sc[ce] - mx);
					sum += sc[ce];
				}
				for (int i = 0; i < dv; i++) {
					double acc = 0.0;
					for (int ce = beg; ce < end; ce++)
						acc += sc[ce] * get_el(c, vv, i + (int64_t)dv * (hk + nkv * ce));
					ref[i + (int64_t)dv * (h + nh * t)] = sum > 0 ? acc / sum : 0.0;
				}
			}
		free(sc);
	}
}

static void build_kv_write_flat(struct tcase **cs, int *n, struct rng *r);

static void build_kv_write(struct tcase **cs, int *n, struct rng *r)
{
	for (int f = 0; f < 2; f++) {
		uint32_t type = f ? ALICE_TYPE_F32 : ALICE_TYPE_F16;
		struct tcase *c = new_case(cs, n, "KV_WRITE %s cache [64,2,16] rows [64,2,3]%s",
					   alice_type_name(type), f ? " strided-src" : "");
		c->node.op = ALICE_OP_KV_WRITE;
		tc_tensor(c, type, 64, 2, 16, 1, 0);
		int s = tc_tensor(c, ALICE_TYPE_F32, 64, 2, 3, 1, f);
		int ids = tc_tensor(c, ALICE_TYPE_I32, 3, 1, 1, 1, 0);
		c->node.src[0] = s;
		c->node.src[1] = ids;
		fill_gauss(c, 0, r, 1.0);
		fill_gauss(c, s, r, 1.0);
		static const int cells[3] = {5, 0, 15};
		for (int i = 0; i < 3; i++)
			set_el(c, ids, i, cells[i]);
		c->bound = BOUND_EXACT;
		double *ref = alloc_ref(c);
		for (int64_t i = 0; i < nelem(&c->t[0]); i++)
			ref[i] = get_el(c, 0, i);
		for (int i = 0; i < 3; i++)
			for (int e = 0; e < 128; e++) {
				double val = get_el(c, s, e + 128 * i);
				ref[e + 128 * cells[i]] = f ? (double)(float)val
							    : alice_fp16_to_fp32(alice_fp32_to_fp16((float)val));
			}
	}
	build_kv_write_flat(cs, n, r);
}

static void build_kv_write_flat(struct tcase **cs, int *n, struct rng *r)
{
	/* cache [128, 1, 8] written from rows [128, 2]: the cell dim is 2 */
	struct tcase *c = new_case(cs, n, "KV_WRITE F16 cache [128,1,8] rows [128,2]");
	c->node.op = ALICE_OP_KV_WRITE;
	tc_tensor(c, ALICE_TYPE_F16, 128, 1, 8, 1, 0);
	int s = tc_tensor(c, ALICE_TYPE_F32, 128, 2, 1, 1, 0);
	int ids = tc_tensor(c, ALICE_TYPE_I32, 2, 1, 1, 1, 0);
	c->node.src[0] = s;
	c->node.src[1] = ids;
	fill_gauss(c, 0, r, 1.0);
	fill_gauss(c, s, r, 1.0);
	set_el(c, ids, 0, 7);
	set_el(c, ids, 1, 2);
	c->bound = BOUND_EXACT;
	double *ref = alloc_ref(c);
	for (int64_t i = 0; i < nelem(&c->t[0]); i++)
		ref[i] = get_el(c, 0, i);
	for (int i = 0; i < 2; i++)
		for (int e = 0; e < 128; e++)
			ref[e + 128 * (i == 0 ? 7 : 2)] =
				alice_fp16_to_fp32(alice_fp32_to_fp16((float)get_el(c, s, e + 128 * i)));
}

static void build_copy(struct tcase **cs, int *n, struct rng *r)
{
	struct { uint32_t from, to; bool transpose; int pad; } v[] = {
		{ALICE_TYPE_F32, ALICE_TYPE_F16, false, 0}, {ALICE_TYPE_F16, ALICE_TYPE_F32, false, 2},
		{ALICE_TYPE_F32, ALICE_TYPE_BF16, false, 0}, {ALICE_TYPE_BF16, ALICE_TYPE_F32, false, 0},
		{ALICE_TYPE_F32, ALICE_TYPE_F32, true, 0},  {ALICE_TYPE_F32, ALICE_TYPE_F16, false, 3},
	};
	for (size_t s = 0; s < sizeof(v) / sizeof(v[0]); s++) {
		struct tcase *c = new_case(cs, n, "COPY %s -> %s [31,6,2]%s%s", alice_type_name(v[s].from),
					   alice_type_name(v[s].to), v[s].transpose ? " transposed-src" : "",
					   v[s].pad ? " strided-src" : "");
		c->node.op = ALICE_OP_COPY;
		tc_tensor(c, v[s].to, 31, 6, 2, 1, 0);
		int x = tc_tensor(c, v[s].from, 31, 6, 2, 1, v[s].pad);
		if (v[s].transpose) { /* a [31,6] view of a [6,31] matrix */
			c->t[x].nb[0] = 6 * 4;
			c->t[x].nb[1] = 4;
		}
		c->node.src[0] = x;
		fill_gauss(c, x, r, 10.0);
		c->core = v[s].from != ALICE_TYPE_BF16 && v[s].to != ALICE_TYPE_BF16;
		c->bound = BOUND_EXACT;
		double *ref = alloc_ref(c);
		for (int64_t i = 0; i < nelem(&c->t[0]); i++) {
			float val = (float)get_el(c, x, i);
			ref[i] = v[s].to == ALICE_TYPE_F16 ? alice_fp16_to_fp32(alice_fp32_to_fp16(val))
			       : v[s].to == ALICE_TYPE_BF16 ? alice_bf16_to_fp32(alice_fp32_to_bf16(val))
							    : val;
		}
	}
}

typedef void (*builder_fn)(struct tcase **cs, int *n, struct rng *r);

static const struct {
	const char *name;
	builder_fn build;
} op_groups[] = {
	{"MUL_MAT", build_mul_mat},   {"GET_ROWS", build_get_rows}, {"ADD_MUL", build_binary},
	{"UNARY_GLU", build_unary_glu}, {"SCALE_SOFTCAP", build_scale_softcap}, {"NORM", build_norm}, {"LAYER_NORM", build_layer_norm},
	{"ROPE", build_rope},	      {"ATTENTION", build_attention}, {"KV_WRITE", build_kv_write},
	{"COPY", build_copy},         {"TOPK", build_topk}, {"SAMPLE_TEMP", build_sample_temp},
	{"LOGIT_ADJUST", build_logit_adjust}, {"FEED", build_feed}, {"LOGSUMEXP", build_logsumexp},
	{"TOKEN_MASK", build_token_mask},
};
#define N_GROUPS (int)(sizeof(op_groups) / sizeof(op_groups[0]))

/* ---- running a case on a backend ----------------------------------------- */

enum outcome { OUT_PASS, OUT_FAIL, OUT_UNSUPPORTED };

static enum outcome run_case(const struct alice_backend_vtable *vt, struct alice_backend_ctx *ctx,
			     bool can_import, struct tcase *c, double *nmse_out, char *msg, size_t msg_len)
{
	struct alice_buffer *buf = NULL, *imp[MAXT] = {0};
	enum outcome res = OUT_FAIL;
	uint64_t total = 0, off[MAXT];
	for (int i = 0; i < c->nt; i++) {
		off[i] = total;
		if (!(c->import[i] && can_import))
			total += (c->size[i] + 255) & ~(uint64_t)255;
	}
	*nmse_out = NAN;
	if (vt->buffer_alloc(ctx, total, ALICE_BUFFER_COMPUTE, &buf) != ALICE_OK) {
		snprintf(msg, msg_len, "buffer_alloc: %s", vt->last_error(ctx));
		return OUT_FAIL;
	}
	struct alice_tensor t[MAXT];
	memcpy(t, c->t, sizeof(t));
	for (int i = 0; i < c->nt; i++) {
		if (c->import[i] && can_import) {
			if (vt->buffer_import(ctx, c->host[i], c->size[i], &imp[i]) != ALICE_OK) {
				snprintf(msg, msg_len, "buffer_import: %s", vt->last_error(ctx));
				goto out;
			}
			t[i].buf = imp[i];
			t[i].offset = 0;
		} else {
			t[i].buf = buf;
			t[i].offset = off[i];
			if (vt->buffer_write(ctx, buf, off[i], c->host[i], c->size[i]) != ALICE_OK) {
				snprintf(msg, msg_len, "buffer_write: %s", vt->last_error(ctx));
				goto out;
			}
			if (c->pack[i] && ALICE_VT_HAS(vt, tensor_pack) && vt->tensor_pack(ctx, &t[i]) != ALICE_OK) {
				snprintf(msg, msg_len, "tensor_pack: %s", vt->last_error(ctx));
				goto out;
			}
		}
	}
	struct alice_graph g = {.n_tensors = (uint32_t)c->nt, .n_nodes = 1, .tensors = t, .nodes = &c->node};
	if (!vt->supports_op(ctx, &g, &c->node)) {
		snprintf(msg, msg_len, "not supported");
		res = OUT_UNSUPPORTED;
		goto out;
	}
	if (vt->graph_compute(ctx, &g) != ALICE_OK) {
		snprintf(msg, msg_len, "graph_compute: %s", vt->last_error(ctx));
		goto out;
	}
	/* read dst back into the host copy, then compare its logical elements */
	if (vt->buffer_read(ctx, buf, off[0], c->host[0], c->size[0]) != ALICE_OK) {
		snprintf(msg, msg_len, "buffer_read: %s", vt->last_error(ctx));
		goto out;
	}
	if (c->bits) {
		for (int64_t i = 0; i < nelem(&c->t[0]); i++) {
			float o = (float)get_el(c, 0, i), e = (float)c->ref[i];
			if (memcmp(&o, &e, sizeof(o)) != 0) {
				snprintf(msg, msg_len, "element %lld is %.9g, expected %.9g", (long long)i, (double)o, (double)e);
				goto out;
			}
		}
		*nmse_out = 0;
		snprintf(msg, msg_len, "bit-identical");
		res = OUT_PASS;
		goto out;
	}
	double num = 0.0, den = 0.0;
	bool finite = true;
	for (int64_t i = 0; i < nelem(&c->t[0]); i++) {
		double o = get_el(c, 0, i), e = c->ref[i];
		finite = finite && isfinite(o);
		num += (o - e) * (o - e);
		den += e * e;
	}
	double nmse = den > 0 ? num / den : num;
	*nmse_out = nmse;
	if (!finite) {
		snprintf(msg, msg_len, "non-finite output");
	} else if (!(nmse <= c->bound)) {
		snprintf(msg, msg_len, "NMSE %.3g > bound %.3g", nmse, c->bound);
	} else {
		snprintf(msg, msg_len, "NMSE %.3g <= %.3g", nmse, c->bound);
		res = OUT_PASS;
	}
out:
	for (int i = 0; i < MAXT; i++)
		if (imp[i])
			vt->buffer_free(ctx, imp[i]);
	vt->buffer_free(ctx, buf);
	return res;
}

/* ---- Criterion: one test per backend x op group --------------------------- */

struct op_param {
	char backend[ALICE_BACKEND_NAME_MAX];
	int group;
};

ParameterizedTestParameters(ops, backend_op)
{
	static struct op_param params[32 * 16];
	static size_t np;
	np = 0;
	struct alice_backend_listing *list = NULL;
	size_t n = 0;
	if (alice_backend_list(NULL, &list, &n, NULL) == ALICE_OK) {
		for (size_t i = 0; i < n && np + N_GROUPS <= sizeof(params) / sizeof(params[0]); i++) {
			if (list[i].shadowed)
				continue;
			for (int g = 0; g < N_GROUPS; g++) {
				snprintf(params[np].backend, sizeof(params[np].backend), "%s", list[i].name);
				params[np].group = g;
				np++;
			}
		}
	}
	alice_backend_list_free(list);
	return cr_make_param_array(struct op_param, params, np);
}

ParameterizedTest(struct op_param *p, ops, backend_op, .timeout = 600)
{
	/* ALICE_TEST_OPS=MUL_MAT,ATTENTION: only those groups (device runs that
	 * repeat one group under several settings) */
	const char *only = getenv("ALICE_TEST_OPS");
	if (only && *only) {
		const char *nm = op_groups[p->group].name, *f = strstr(only, nm);
		size_t l = strlen(nm);
		while (f && !((f == only || f[-1] == ',') && (f[l] == 0 || f[l] == ',')))
			f = strstr(f + 1, nm);
		if (!f)
			cr_skip_test("%s: not in ALICE_TEST_OPS", nm);
	}
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	enum alice_status st = alice_backend_open(p->backend, NULL, &be, &err);
	if (st == ALICE_ERR_UNSUPPORTED && strstr(err.msg, "cannot run here"))
		cr_skip_test("%s: skipped: %s", p->backend, err.msg);
	cr_assert_eq(st, ALICE_OK, "open %s: %s", p->backend, err.msg);
	struct alice_backend_ctx *ctx = NULL;
	cr_assert_eq(alice_backend_init(be, NULL, &ctx, &err), ALICE_OK, "%s", err.msg);
	struct alice_device_info info;
	memset(&info, 0, sizeof(info));
	be->vt->device_info(0, &info);
	bool can_import = be->vt->buffer_import && (info.flags & ALICE_DEVICE_HOST_IMPORT);

	struct tcase *cs = NULL;
	int nc = 0;
	struct rng r = {0x9e3779b97f4a7c15ull ^ (uint64_t)(p->group + 1) * 0x100000001b3ull};
	op_groups[p->group].build(&cs, &nc, &r);
	int n_fail = 0, n_unsup = 0;
	char failures[2048] = "";
	size_t fl = 0;
	for (int i = 0; i < nc; i++) {
		char msg[600];
		double nmse;
		enum outcome o = run_case(be->vt, ctx, can_import, &cs[i], &nmse, msg, sizeof(msg));
		const char *tag = o == OUT_PASS ? "ok" : o == OUT_UNSUPPORTED ? (cs[i].core ? "FAIL (unsupported core op)" : "unsupported") : "FAIL";
		cr_log_info("[%s] %-70s %s: %s", p->backend, cs[i].name, tag, msg);
		fprintf(stderr, "[%s] %-70s %s: %s\n", p->backend, cs[i].name, tag, msg);
		if (o == OUT_UNSUPPORTED && !cs[i].core) {
			n_unsup++;
		} else if (o != OUT_PASS) {
			n_fail++;
			int w = snprintf(failures + fl, sizeof(failures) - fl, "%s%s (%s)", fl ? "; " : "",
					 cs[i].name, msg);
			if (w > 0 && fl + (size_t)w < sizeof(failures))
				fl += (size_t)w;
		}
	}
	for (int i = 0; i < nc; i++)
		tc_free(&cs[i]);
	free(cs);
	be->vt->free(ctx);
	alice_backend_close(be);
	cr_assert_eq(n_fail, 0, "[%s] %s: %d of %d cases failed: %s", p->backend, op_groups[p->group].name,
		     n_fail, nc, failures);
	if (n_unsup)
		fprintf(stderr, "[%s] %s: %d case(s) not supported by this backend\n", p->backend,
			    op_groups[p->group].name, n_unsup);
}

/* The backends found (not shadowed), one parameter each, at most max. */
static size_t backend_params(struct op_param *params, size_t max)
{
	size_t np = 0, n = 0;
	struct alice_backend_listing *list = NULL;
	if (alice_backend_list(NULL, &list, &n, NULL) == ALICE_OK)
		for (size_t i = 0; i < n && np < max; i++)
			if (!list[i].shadowed)
				snprintf(params[np++].backend, sizeof(params[0].backend), "%s", list[i].name);
	alice_backend_list_free(list);
	return np;
}

/* Bad graphs give an error status and a message, never a crash, and the
 * context stays usable. */
ParameterizedTestParameters(ops, rejects_bad_nodes)
{
	static struct op_param params[32];
	size_t np = backend_params(params, 32);
	return cr_make_param_array(struct op_param, params, np);
}

ParameterizedTest(struct op_param *p, ops, rejects_bad_nodes)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	enum alice_status st = alice_backend_open(p->backend, NULL, &be, &err);
	if (st == ALICE_ERR_UNSUPPORTED && strstr(err.msg, "cannot run here"))
		cr_skip_test("%s: skipped: %s", p->backend, err.msg);
	cr_assert_eq(st, ALICE_OK, "%s", err.msg);
	struct alice_backend_ctx *ctx = NULL;
	cr_assert_eq(alice_backend_init(be, NULL, &ctx, &err), ALICE_OK, "%s", err.msg);
	const struct alice_backend_vtable *vt = be->vt;
	struct rng r = {12345};
	struct tcase *cs = NULL;
	int nc = 0;
	build_mul_mat(&cs, &nc, &r); /* cs[0]: F32 decode case */
	struct tcase *c = &cs[0];
	c->import[1] = false;
	char msg[600];
	double nmse;
	cr_assert_eq(run_case(vt, ctx, false, c, &nmse, msg, sizeof(msg)), OUT_PASS, "%s", msg);
	/* K mismatch */
	c->t[2].ne[0] -= 1;
	cr_assert_neq(run_case(vt, ctx, false, c, &nmse, msg, sizeof(msg)), OUT_PASS);
	cr_log_info("[%s] K mismatch: %s", p->backend, msg);
	c->t[2].ne[0] += 1;
	/* weight extends past its buffer */
	c->t[1].ne[1] += 1000;
	cr_assert_neq(run_case(vt, ctx, false, c, &nmse, msg, sizeof(msg)), OUT_PASS);
	cr_log_info("[%s] out of bounds: %s", p->backend, msg);
	c->t[1].ne[1] -= 1000;
	c->t[0].ne[0] += 1000;
	cr_assert_neq(run_case(vt, ctx, false, c, &nmse, msg, sizeof(msg)), OUT_PASS);
	c->t[0].ne[0] -= 1000;
	/* bad tensor index and unknown op */
	c->node.src[1] = 77;
	cr_assert_neq(run_case(vt, ctx, false, c, &nmse, msg, sizeof(msg)), OUT_PASS);
	c->node.src[1] = 2;
	c->node.op = 999;
	cr_assert_neq(run_case(vt, ctx, false, c, &nmse, msg, sizeof(msg)), OUT_PASS);
	c->node.op = ALICE_OP_MUL_MAT;
	/* an unsupported weight type (IQ2_XXS) */
	c->t[1].type = 16;
	cr_assert_neq(run_case(vt, ctx, false, c, &nmse, msg, sizeof(msg)), OUT_PASS);
	c->t[1].type = ALICE_TYPE_F32;
	/* and the context still works */
	cr_assert_eq(run_case(vt, ctx, false, c, &nmse, msg, sizeof(msg)), OUT_PASS, "%s", msg);
	for (int i = 0; i < nc; i++)
		tc_free(&cs[i]);
	free(cs);
	/* GET_ROWS with an id out of range */
	cs = NULL;
	nc = 0;
	build_get_rows(&cs, &nc, &r);
	set_el(&cs[0], 2, 1, 10);
	cr_assert_neq(run_case(vt, ctx, false, &cs[0], &nmse, msg, sizeof(msg)), OUT_PASS);
	cr_log_info("[%s] bad row id: %s", p->backend, msg);
	set_el(&cs[0], 2, 1, -1);
	cr_assert_neq(run_case(vt, ctx, false, &cs[0], &nmse, msg, sizeof(msg)), OUT_PASS);
	for (int i = 0; i < nc; i++)
		tc_free(&cs[i]);
	free(cs);
	/* ATTENTION with a cell range past the cache */
	cs = NULL;
	nc = 0;
	build_attention(&cs, &nc, &r);
	set_el(&cs[0], 4, 1, 1000);
	cr_assert_neq(run_case(vt, ctx, false, &cs[0], &nmse, msg, sizeof(msg)), OUT_PASS);
	cr_log_info("[%s] bad range: %s", p->backend, msg);
	for (int i = 0; i < nc; i++)
		tc_free(&cs[i]);
	free(cs);
	/* FEED with a pick index past the picks (bad input data), then a good one */
	cs = NULL;
	nc = 0;
	build_feed(&cs, &nc, &r);
	set_el(&cs[1], 2, 5, (double)cs[1].t[3].ne[0]);
	cr_assert_neq(run_case(vt, ctx, false, &cs[1], &nmse, msg, sizeof(msg)), OUT_PASS);
	cr_log_info("[%s] bad pick index: %s", p->backend, msg);
	cr_assert_eq(run_case(vt, ctx, false, &cs[0], &nmse, msg, sizeof(msg)), OUT_PASS, "%s", msg);
	for (int i = 0; i < nc; i++)
		tc_free(&cs[i]);
	free(cs);
	vt->free(ctx);
	alice_backend_close(be);
}

/* ---- ATTENTION over a paged cache (ABI 1.4, src4) ------------------------
 * The same case through a block table must give exactly the contiguous
 * layout's output, bit for bit: K/V rows scattered over shuffled physical
 * blocks (more blocks than the table maps; the spare ones hold NaN, so a
 * row read from a wrong place shows), the blocks no range touches left
 * unmapped (-1). Cell counts are whole blocks, so the virtual extent (and
 * with it any split or tile the backend takes) equals the contiguous one's. */

static void paged_clone(const struct tcase *s, struct tcase *d, struct rng *r, int bs)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%.150s paged bs=%d", s->name, bs);
	d->node = s->node;
	d->bound = s->bound;
	d->core = s->core;
	for (int i = 0; i < 2; i++) { /* dst, q */
		d->t[i] = s->t[i];
		d->size[i] = s->size[i];
		d->host[i] = calloc(1, s->size[i] + 64);
		memcpy(d->host[i], s->host[i], s->size[i]);
	}
	d->nt = 2;
	const struct alice_tensor *ks = &s->t[2], *vs = &s->t[3];
	int64_t nc = ks->ne[2], nblk = nc / bs, nphys = nblk + 3;
	int k = tc_tensor(d, ks->type, ks->ne[0], ks->ne[1], nphys * bs, 1, 0);
	int v = tc_tensor(d, vs->type, vs->ne[0], vs->ne[1], nphys * bs, 1, 0);
	int rg = d->nt++;
	d->t[rg] = s->t[4];
	d->size[rg] = s->size[4];
	d->host[rg] = calloc(1, s->size[4] + 64);
	memcpy(d->host[rg], s->host[4], s->size[4]);
	int tb = tc_tensor(d, ALICE_TYPE_I32, nblk, 1, 1, 1, 0);
	for (int64_t i = 0; i < nelem(&d->t[k]); i++)
		set_el(d, k, i, NAN);
	for (int64_t i = 0; i < nelem(&d->t[v]); i++)
		set_el(d, v, i, NAN);
	/* the blocks some range touches */
	bool *used = calloc((size_t)nblk, 1);
	for (int64_t t = 0; t < s->t[4].ne[1]; t++) {
		int beg = (int)get_el(d, rg, 2 * t), end = (int)get_el(d, rg, 2 * t + 1);
		for (int c = beg; c < end; c++)
			used[c / bs] = true;
	}
	int64_t *perm = malloc((size_t)nphys * sizeof(*perm));
	for (int64_t i = 0; i < nphys; i++)
		perm[i] = i;
	for (int64_t i = nphys - 1; i > 0; i--) {
		int64_t j = (int64_t)(rng_u64(r) % (uint64_t)(i + 1)), x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	int64_t rk = ks->ne[0] * ks->ne[1], rv = vs->ne[0] * vs->ne[1]; /* elements per cell */
	for (int64_t b = 0; b < nblk; b++) {
		set_el(d, tb, b, used[b] ? (double)perm[b] : -1.0);
		if (!used[b])
			continue;
		for (int64_t c = 0; c < bs; c++) {
			int64_t from = b * bs + c, to = perm[b] * bs + c;
			for (int64_t e = 0; e < rk; e++)
				set_el(d, k, to * rk + e, get_el((struct tcase *)s, 2, from * rk + e));
			for (int64_t e = 0; e < rv; e++)
				set_el(d, v, to * rv + e, get_el((struct tcase *)s, 3, from * rv + e));
		}
	}
	free(perm);
	free(used);
	d->node.src[1] = k;
	d->node.src[2] = v;
	d->node.src[3] = rg;
	d->node.src[4] = tb;
	d->node.ip[0] = bs;
	d->ref = malloc((size_t)nelem(&s->t[0]) * sizeof(double));
	memcpy(d->ref, s->ref, (size_t)nelem(&s->t[0]) * sizeof(double));
}

/* The longest run of tokens whose ranges continue each other (ATTENTION's
 * ip[1] hint, backend.h). */
static int attn_max_run(struct tcase *c)
{
	int rg = c->node.src[3], nt = (int)c->t[rg].ne[1], best = nt > 0, run = 1;
	for (int t = 1; t < nt; t++) {
		int b0 = (int)get_el(c, rg, 2 * t - 2), e0 = (int)get_el(c, rg, 2 * t - 1);
		int b1 = (int)get_el(c, rg, 2 * t), e1 = (int)get_el(c, rg, 2 * t + 1);
		run = e1 == e0 + 1 && (b1 == b0 || b1 == b0 + 1) ? run + 1 : 1;
		best = run > best ? run : best;
	}
	return best;
}

ParameterizedTestParameters(ops, attention_paged)
{
	static struct op_param params[32];
	size_t np = backend_params(params, 32);
	return cr_make_param_array(struct op_param, params, np);
}

ParameterizedTest(struct op_param *p, ops, attention_paged, .timeout = 600)
{
	struct alice_backend *be = NULL;
	struct alice_error err = {{0}};
	enum alice_status st = alice_backend_open(p->backend, NULL, &be, &err);
	if (st == ALICE_ERR_UNSUPPORTED && strstr(err.msg, "cannot run here"))
		cr_skip_test("%s: skipped: %s", p->backend, err.msg);
	cr_assert_eq(st, ALICE_OK, "%s", err.msg);
	struct alice_backend_ctx *ctx = NULL;
	cr_assert_eq(alice_backend_init(be, NULL, &ctx, &err), ALICE_OK, "%s", err.msg);
	const struct alice_backend_vtable *vt = be->vt;
	/* every kernel regime: decode over long ranges (splits; the GQA decode
	 * kernel for F16 d 64/128), short batches, soft-cap, windows, F32
	 * caches, >= 16 and >= 64 token runs (flash / tiled prefill), two
	 * sequences in one op, many one-token sequences (a batched decode) */
	static const struct attn_variant v[] = {
		{64, 64, 8, 2, 1, 1104, ALICE_TYPE_F16, 0.0f, 0, 0, false, false},
		{128, 128, 16, 4, 3, 1104, ALICE_TYPE_F16, 0.0f, 0, 0, true, false},
		{64, 64, 8, 8, 7, 48, ALICE_TYPE_F16, 0.0f, 0, 0, false, false},
		{64, 64, 8, 1, 5, 48, ALICE_TYPE_F32, 0.0f, 0, 2, false, false},
		{128, 128, 4, 2, 6, 64, ALICE_TYPE_F16, 0.0f, 8, 0, false, false},
		{64, 32, 6, 3, 4, 32, ALICE_TYPE_F16, 30.0f, 0, 0, true, false},
		{64, 64, 4, 2, 70, 160, ALICE_TYPE_F16, 0.0f, 0, 0, false, false},
		{128, 128, 4, 2, 40, 192, ALICE_TYPE_F16, 0.0f, 0, 0, true, false},
		{64, 64, 4, 2, 20, 96, ALICE_TYPE_F16, 0.0f, 24, 0, false, false},
		{64, 32, 4, 4, 66, 128, ALICE_TYPE_F32, 30.0f, 40, 1, false, false},
		{64, 64, 8, 2, 24, 96, ALICE_TYPE_F16, 0.0f, 0, 0, false, true},
		{128, 128, 8, 2, 20, 112, ALICE_TYPE_F16, 0.0f, 0, 0, false, true},
	};
	static const int bss[] = {16, 16, 1, 16, 64, 16, 32, 16, 16, 64, 16, 16};
	struct rng r = {0x5eed0f9a6edull};
	struct tcase *cs = NULL;
	int nc = 0;
	build_attention_cases(&cs, &nc, &r, v, sizeof(v) / sizeof(v[0]));
	int n_fail = 0, n_unsup = 0, n_cases = nc;
	for (int i = 0; i < nc; i++) {
		char msg[600], pmsg[600];
		double nmse, pnmse;
		enum outcome o = run_case(vt, ctx, false, &cs[i], &nmse, msg, sizeof(msg));
		struct tcase pc;
		paged_clone(&cs[i], &pc, &r, bss[i]);
		enum outcome po = run_case(vt, ctx, false, &pc, &pnmse, pmsg, sizeof(pmsg));
		bool same = o == OUT_PASS && po == OUT_PASS && memcmp(cs[i].host[0], pc.host[0], cs[i].size[0]) == 0;
		fprintf(stderr, "[%s] %-80s contiguous %s, paged %s: %s\n", p->backend, pc.name, msg, pmsg,
			o == OUT_UNSUPPORTED || po == OUT_UNSUPPORTED ? "unsupported" : same ? "bit-identical" : "FAIL");
		if (o == OUT_UNSUPPORTED && po == OUT_UNSUPPORTED)
			n_unsup++;
		else if (!same)
			n_fail++;
		tc_free(&pc);
		if (o == OUT_PASS) { /* the hint ip[1] (longest run) changes nothing */
			void *out0 = malloc(cs[i].size[0]);
			memcpy(out0, cs[i].host[0], cs[i].size[0]);
			cs[i].node.ip[1] = attn_max_run(&cs[i]);
			enum outcome ho = run_case(vt, ctx, false, &cs[i], &nmse, msg, sizeof(msg));
			bool hsame = ho == OUT_PASS && memcmp(out0, cs[i].host[0], cs[i].size[0]) == 0;
			if (!hsame) {
				fprintf(stderr, "[%s] %s with hint ip[1] = %d: %s: FAIL (differs without it)\n", p->backend,
					cs[i].name, cs[i].node.ip[1], msg);
				n_fail++;
			}
			cs[i].node.ip[1] = 0;
			free(out0);
		}
	}
	for (int i = 0; i < nc; i++)
		tc_free(&cs[i]);
	free(cs);
	/* a range over an unmapped block is an error, not a read */
	cs = NULL;
	nc = 0;
	build_attention_cases(&cs, &nc, &r, &v[2], 1);
	struct tcase pc;
	paged_clone(&cs[0], &pc, &r, 16);
	set_el(&pc, 5, 1, -1); /* block 1 of 3: every token's range covers it */
	char msg[600];
	double nmse;
	cr_assert_neq(run_case(vt, ctx, false, &pc, &nmse, msg, sizeof(msg)), OUT_PASS);
	fprintf(stderr, "[%s] unmapped block in a range: %s\n", p->backend, msg);
	tc_free(&pc);
	tc_free(&cs[0]);
	free(cs);
	vt->free(ctx);
	alice_backend_close(be);
	cr_assert_eq(n_fail, 0, "[%s] %d of %d paged ATTENTION cases differ from the contiguous layout", p->backend,
		     n_fail, n_cases);
	cr_assert_eq(n_unsup, 0, "[%s] paged ATTENTION not supported", p->backend);
}

/* The list must not be empty: with no backend found every test above would
 * vanish silently. */
Test(ops, some_backend_found)
{
	struct alice_backend_listing *list = NULL;
	size_t n = 0;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_list(NULL, &list, &n, &err), ALICE_OK, "%s", err.msg);
	bool cpu = false;
	for (size_t i = 0; i < n; i++)
		cpu = cpu || (strcmp(list[i].name, "cpu") == 0 && list[i].loadable);
	alice_backend_list_free(list);
	cr_assert(cpu, "the cpu backend was not found (ALICE_BACKEND_PATH=%s)",
		  getenv("ALICE_BACKEND_PATH") ? getenv("ALICE_BACKEND_PATH") : "(unset)");
}
