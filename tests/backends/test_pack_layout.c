/* test_pack_layout.c — the CUDA backend's packed weight layouts
 * (backends/cuda/pack_layout.cuh), checked on the CPU: each packer's byte
 * map is a permutation of a run, and every field a kernel reads at the
 * layout's offsets (a block's quants, scales, d) is that block's field in
 * the file's layout, with the alignment the kernels' wide loads assume. A
 * packer and its readers that disagree fail here without a GPU. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alice/quant.h"

#include "../../backends/cuda/pack_layout.cuh"

static void check_permutation(int run, int (*src)(int))
{
	char *seen = calloc((size_t)run, 1);
	cr_assert_not_null(seen);
	for (int o = 0; o < run; o++) {
		const int s = src(o);
		cr_assert(s >= 0 && s < run, "packed byte %d maps to %d, outside the %d-byte run", o, s, run);
		cr_assert(!seen[s], "source byte %d is taken twice (packed byte %d)", s, o);
		seen[s] = 1;
	}
	free(seen);
}

/* n_runs runs of random weights of type t (block bytes by, qk values a
 * block), packed with src */
static void make_runs(uint32_t t, int n_runs, int run, int (*src)(int), uint8_t **orig, uint8_t **packed)
{
	const int64_t k = (int64_t)run / (t == ALICE_TYPE_Q8_0 ? 34 : 210) * (t == ALICE_TYPE_Q8_0 ? 32 : 256) * n_runs;
	float *x = malloc(sizeof(float) * (size_t)k);
	*orig = malloc((size_t)run * (size_t)n_runs);
	*packed = malloc((size_t)run * (size_t)n_runs);
	cr_assert(x && *orig && *packed);
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (int64_t i = 0; i < k; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (float)((int64_t)(s >> 33) % 2001 - 1000) / 250.0f;
	}
	cr_assert(alice_quantize(t, x, *orig, k));
	for (int r = 0; r < n_runs; r++)
		for (int o = 0; o < run; o++)
			(*packed)[r * run + o] = (*orig)[r * run + src(o)];
	free(x);
}

Test(pack_layout, q8_0)
{
	check_permutation(PL_Q80_RUN, pl_q80_src);
	uint8_t *orig, *packed;
	make_runs(ALICE_TYPE_Q8_0, 3, PL_Q80_RUN, pl_q80_src, &orig, &packed);
	for (int r = 0; r < 3; r++)
		for (int j = 0; j < 8; j++) {
			const uint8_t *b = orig + r * PL_Q80_RUN + 34 * j, *p = packed + r * PL_Q80_RUN;
			cr_assert_eq(pl_q80_q(j) % 16, 0, "block %d's quants not 16-byte aligned", j);
			cr_assert_eq(memcmp(p + pl_q80_d(j), b, 2), 0, "run %d block %d: scale", r, j);
			cr_assert_eq(memcmp(p + pl_q80_q(j), b + 2, 32), 0, "run %d block %d: quants", r, j);
		}
	free(orig);
	free(packed);
}

Test(pack_layout, q6_k)
{
	check_permutation(PL_Q6K_RUN, pl_q6k_src);
	uint8_t *orig, *packed;
	make_runs(ALICE_TYPE_Q6_K, 2, PL_Q6K_RUN, pl_q6k_src, &orig, &packed);
	for (int r = 0; r < 2; r++)
		for (int j = 0; j < 8; j++) {
			const uint8_t *b = orig + r * PL_Q6K_RUN + 210 * j, *p = packed + r * PL_Q6K_RUN;
			/* 16-byte quant loads, 8-byte scale loads (mmvq.cu q6_lane) */
			cr_assert_eq(pl_q6k_q(j) % 16, 0, "super-block %d's quants not 16-byte aligned", j);
			cr_assert_eq(pl_q6k_sc(j) % 8, 0, "super-block %d's scales not 8-byte aligned", j);
			cr_assert_eq(memcmp(p + pl_q6k_q(j), b, 192), 0, "run %d super-block %d: ql / qh", r, j);
			cr_assert_eq(memcmp(p + pl_q6k_sc(j), b + 192, 16), 0, "run %d super-block %d: scales", r, j);
			cr_assert_eq(memcmp(p + pl_q6k_d(j), b + 208, 2), 0, "run %d super-block %d: d", r, j);
		}
	free(orig);
	free(packed);
}
