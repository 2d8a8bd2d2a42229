/* test_mm_prefill.c — a prefill MUL_MAT (M > 8 columns, one sequence) of
 * quantized weights computes llama.cpp's CPU arithmetic: activations rounded
 * to the weight type's dot-product partner (Q8_K blocks for the K-quants and
 * IQ4_XS, Q8_0 blocks for the 32-blocks), then products exact, so each
 * output is the double-precision sum of dequantized weight x rounded
 * activation up to float rounding of the scales and of the sum over blocks:
 * |out - ref| <= 3e-6 sum |w x|. An F16 GEMM (11-bit operands) misses this
 * by ~10x at K = 256 (and Vulkan's activation rounding missed it on
 * lavapipe, whose fma is a multiply and an add). On cuda a column's result
 * also may not depend on how many columns the launch has. Every backend found; the quantized
 * types of llama.cpp's files, K with and without a partial 256-chunk. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"
#include "support/mm_run.h"

static bool kquant(uint32_t type)
{
	return alice_type_info(type)->block_size == 256;
}

/* Q4_1 / Q5_1 dot Q8_1 blocks: d_w d_x sum q_w q_x + m_w s_x, with s_x
 * the block's fp16 sum (fp16(d_x sum q_x)), not d_x sum q_x itself */
static bool q81(uint32_t type)
{
	return type == ALICE_TYPE_Q4_1 || type == ALICE_TYPE_Q5_1;
}

/* x's columns as llama.cpp's CPU rounds them for the weight type; xs: the
 * Q8_1 block sums [M][K/32] (Q4_1 / Q5_1) */
static void round_acts(uint32_t type, const float *x, int64_t K, int64_t M, float *xr, float *xs)
{
	if (!kquant(type)) {
		/* ggml-cpu's SIMD rounding (our CPU backend's): q = rint(x 127/amax),
		 * d = fp16(amax/127), s = fp16(d sum q) with d unrounded */
		for (int64_t b = 0; b < K / 32 * M; b++) {
			const float *v = x + 32 * b;
			float amax = 0.0f;
			for (int j = 0; j < 32; j++)
				amax = fmaxf(amax, fabsf(v[j]));
			float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
			float dh = alice_fp16_to_fp32(alice_fp32_to_fp16(d));
			int sum = 0;
			for (int j = 0; j < 32; j++) {
				int q = (int)nearbyintf(v[j] * id);
				sum += q;
				xr[32 * b + j] = dh * (float)q;
			}
			xs[b] = alice_fp16_to_fp32(alice_fp32_to_fp16(d * (float)sum));
		}
		return;
	}
	size_t rs = alice_row_size(ALICE_TYPE_Q8_K, K);
	uint8_t *q = malloc(rs);
	for (int64_t m = 0; m < M; m++) {
		cr_assert(alice_quantize(ALICE_TYPE_Q8_K, x + m * K, q, K));
		alice_dequantize(ALICE_TYPE_Q8_K, q, xr + m * K, K);
	}
	free(q);
}

struct mmp_param {
	char backend[ALICE_BACKEND_NAME_MAX];
};

ParameterizedTestParameters(mm_prefill, cpu_arithmetic)
{
	static struct mmp_param params[16];
	size_t np = mm_backend_names((char (*)[ALICE_BACKEND_NAME_MAX])params, 16);
	return cr_make_param_array(struct mmp_param, params, np);
}

ParameterizedTest(struct mmp_param *p, mm_prefill, cpu_arithmetic, .timeout = 900)
{
	/* cuda: its integer prefill GEMM, whatever the build's default; a
	 * value set outside (ALICE_CUDA_MMQ=0: the F16 GEMM) is kept */
	setenv("ALICE_CUDA_MMQ", "1", 0);
	struct mm_run r;
	mm_run_open(&r, p->backend);
	/* the CPU's GEMM tiles and Vulkan's F32 GEMM may order a column's sum
	 * by the launch width (one sequence's run has one width); cuda's
	 * integer GEMM never does */
	const bool invariant = strcmp(p->backend, "cuda") == 0;

	static const uint32_t types[] = {ALICE_TYPE_Q4_K, ALICE_TYPE_Q5_K, ALICE_TYPE_Q6_K, ALICE_TYPE_Q3_K,
					 ALICE_TYPE_Q2_K, ALICE_TYPE_IQ4_XS, ALICE_TYPE_Q4_0, ALICE_TYPE_Q4_1,
					 ALICE_TYPE_Q5_0, ALICE_TYPE_Q5_1, ALICE_TYPE_Q8_0, ALICE_TYPE_IQ4_NL};
	/* M = 130 first: the smaller launches' columns must equal its own */
	static const int64_t cols[] = {130, 40, 9};
	uint64_t seed = 0x13198a2e03707344ull;
	int bad = 0, checked = 0;
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
		const uint32_t type = types[ti];
		const struct { int64_t K, N; } shapes[] = {{256, 100}, {1024, 64}, {kquant(type) ? 512 : 288, 70}};
		for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
			const int64_t K = shapes[si].K, N = shapes[si].N, M = cols[0];
			size_t rs = alice_row_size(type, K);
			uint8_t *w = malloc(rs * (size_t)N);
			float *wd = malloc(sizeof(float) * (size_t)(K * N));
			float *x = malloc(sizeof(float) * (size_t)(K * M)), *xr = malloc(sizeof(float) * (size_t)(K * M));
			for (int64_t n = 0; n < N; n++) {
				for (int64_t k = 0; k < K; k++)
					wd[n * K + k] = mm_rng_gauss(&seed);
				uint8_t *wr = w + n * (int64_t)rs;
				if (alice_type_info(type)->can_quantize) {
					cr_assert(alice_quantize(type, wd + n * K, wr, K));
				} else { /* IQ4_XS / IQ4_NL: random blocks, a sane fp16 d first */
					uint32_t bs = alice_type_info(type)->type_size;
					for (size_t i = 0; i < rs; i++)
						wr[i] = (uint8_t)mm_rng_next(&seed);
					for (size_t b = 0; b < rs; b += bs) {
						uint16_t h = alice_fp32_to_fp16(0.002f * (float)(1 + (mm_rng_next(&seed) & 7)));
						memcpy(wr + b, &h, 2);
					}
				}
				alice_dequantize(type, w + n * (int64_t)rs, wd + n * K, K);
			}
			for (int64_t i = 0; i < K * M; i++)
				x[i] = mm_rng_gauss(&seed);
			float *xs = malloc(sizeof(float) * (size_t)(K / 32 * M));
			round_acts(type, x, K, M, xr, xs);
			float *full = malloc(sizeof(float) * (size_t)(N * M)), *part = malloc(sizeof(float) * (size_t)(N * M));
			mm_run_mul_mat(&r, type, w, K, N, x, M, full, false);
			double worst = 0.0;
			int64_t over = 0;
			for (int64_t m = 0; m < M; m++)
				for (int64_t n = 0; n < N; n++) {
					double ref = 0.0, mag = 0.0;
					for (int64_t k = 0; k < K; k++) {
						double t = (double)wd[n * K + k] * xr[m * K + k];
						ref += t;
						mag += fabs(t);
					}
					for (int64_t b = 0; q81(type) && b < K / 32; b++) {
						/* m_w s_x in place of m_w sum x */
						uint16_t h;
						memcpy(&h, w + n * (int64_t)rs + b * alice_type_info(type)->type_size + 2, 2);
						double mw = alice_fp16_to_fp32(h), sx = 0.0;
						for (int64_t k = 32 * b; k < 32 * b + 32; k++)
							sx += xr[m * K + k];
						ref += mw * (xs[m * (K / 32) + b] - sx);
					}
					double e = fabs(full[m * N + n] - ref) / (mag > 0 ? mag : 1.0);
					worst = e > worst ? e : worst;
					if (!(e <= 3e-6) && over < 6)
						cr_log_info("  n %lld m %lld: %g vs %g (sum |w x| %g)", (long long)n, (long long)m,
							    full[m * N + n], ref, mag);
					over += !(e <= 3e-6);
				}
			int64_t diff = 0;
			for (size_t ci = 1; invariant && ci < sizeof(cols) / sizeof(cols[0]); ci++) {
				mm_run_mul_mat(&r, type, w, K, N, x, cols[ci], part, false);
				for (int64_t i = 0; i < N * cols[ci]; i++)
					diff += memcmp(&full[i], &part[i], 4) != 0;
			}
			checked++;
			if (over || diff) {
				bad++;
				cr_log_error("[%s] %s K=%lld N=%lld: %lld of %lld outputs off the CPU arithmetic "
					     "(worst %.3g of sum |w x|, bound 3e-6); %lld outputs of the 40/9-column "
					     "launches differ from the 130-column one",
					     p->backend, alice_type_name(type), (long long)K, (long long)N, (long long)over,
					     (long long)(N * M), worst, (long long)diff);
			} else {
				cr_log_info("[%s] %s K=%lld N=%lld: worst %.3g of sum |w x|", p->backend,
					    alice_type_name(type), (long long)K, (long long)N, worst);
			}
			free(w);
			free(wd);
			free(x);
			free(xr);
			free(xs);
			free(full);
			free(part);
		}
	}
	mm_run_close(&r);
	cr_assert_eq(bad, 0, "[%s] %d of %d prefill MUL_MATs off the CPU arithmetic or not column-invariant",
		     p->backend, bad, checked);
}
