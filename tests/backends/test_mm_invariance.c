/* test_mm_invariance.c — a batched decode MUL_MAT (src2 + ip[0] = 1: every
 * column is its own sequence's one row) gives each column bit for bit what
 * that column gives alone (M = 1), on every backend found, for the weight
 * types with decode kernels of their own and for the column counts where
 * the backends switch kernels (CUDA: mat-vec up to 8 columns per pass, rows
 * per warp, tensor cores from 16). Shapes cover every split of a row over
 * warps (K = 2048 .. 8192, N from 40 to 2100). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"
#include "support/mm_run.h"

struct inv_param {
	char backend[ALICE_BACKEND_NAME_MAX];
};

ParameterizedTestParameters(mm_invariance, columns_equal_alone)
{
	static struct inv_param params[16];
	size_t np = mm_backend_names((char (*)[ALICE_BACKEND_NAME_MAX])params, 16);
	return cr_make_param_array(struct inv_param, params, np);
}

/* outputs of a that are not bit for bit those of b */
static int64_t n_differ(const float *a, const float *b, int64_t n)
{
	int64_t d = 0;
	for (int64_t i = 0; i < n; i++)
		d += memcmp(&a[i], &b[i], 4) != 0;
	return d;
}

ParameterizedTest(struct inv_param *p, mm_invariance, columns_equal_alone, .timeout = 900)
{
	struct mm_run r;
	mm_run_open(&r, p->backend);

	static const uint32_t types[] = {ALICE_TYPE_Q4_K, ALICE_TYPE_Q6_K, ALICE_TYPE_Q8_0, ALICE_TYPE_F16,
					 ALICE_TYPE_Q4_0, ALICE_TYPE_Q5_K};
	static const struct { int64_t K, N; } shapes[] = {{2048, 2100}, {4096, 96}, {8192, 40}, {2304, 64}};
	static const int64_t cols[] = {9, 16, 40, 72};
	uint64_t seed = 0x243f6a8885a308d3ull;
	int bad = 0, checked = 0;
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
		for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
			const uint32_t type = types[ti];
			const int64_t K = shapes[si].K, N = shapes[si].N, M = 72;
			size_t rs = alice_row_size(type, K);
			uint8_t *w = malloc(rs * (size_t)N);
			float *row = malloc(sizeof(float) * (size_t)K), *x = malloc(sizeof(float) * (size_t)(K * M));
			for (int64_t n = 0; n < N; n++) {
				for (int64_t k = 0; k < K; k++)
					row[k] = mm_rng_gauss(&seed);
				if (type == ALICE_TYPE_F16)
					for (int64_t k = 0; k < K; k++) {
						uint16_t h = alice_fp32_to_fp16(row[k]);
						memcpy(w + n * (int64_t)rs + 2 * k, &h, 2);
					}
				else
					cr_assert(alice_quantize(type, row, w + n * (int64_t)rs, K));
			}
			for (int64_t i = 0; i < K * M; i++)
				x[i] = mm_rng_gauss(&seed);
			float *alone = malloc(sizeof(float) * (size_t)(N * M)), *batch = malloc(sizeof(float) * (size_t)(N * M));
			float *plain = malloc(sizeof(float) * (size_t)(N * M));
			/* pk 1: the weights repacked by the backend (tensor_pack), for the
			 * types a backend packs (the CUDA one: Q8_0, Q6_K) */
			const bool packs = ALICE_VT_HAS(r.vt, tensor_pack) &&
					   (type == ALICE_TYPE_Q8_0 || type == ALICE_TYPE_Q6_K);
			for (int pk = 0; pk < (packs ? 2 : 1); pk++) {
				r.pack = pk;
				for (int64_t m = 0; m < M; m++)
					mm_run_mul_mat(&r, type, w, K, N, x + m * K, 1, alone + m * N, true);
				if (!pk) {
					memcpy(plain, alone, sizeof(float) * (size_t)(N * M));
				} else if (type == ALICE_TYPE_Q6_K) {
					/* packed Q6_K keeps the arithmetic: the same bits */
					const int64_t diff = n_differ(alone, plain, N * M);
					checked++;
					if (diff) {
						bad++;
						cr_log_error("[%s] Q6_K K=%lld N=%lld: %lld of %lld outputs differ packed",
							     p->backend, (long long)K, (long long)N, (long long)diff,
							     (long long)(N * M));
					}
				}
				for (size_t ci = 0; ci < sizeof(cols) / sizeof(cols[0]); ci++) {
					const int64_t mc = cols[ci];
					mm_run_mul_mat(&r, type, w, K, N, x, mc, batch, true);
					const int64_t diff = n_differ(alone, batch, N * mc);
					checked++;
					if (diff) {
						bad++;
						cr_log_error("[%s] %s%s K=%lld N=%lld: %lld of %lld outputs of a %lld-column "
							     "step differ from their column alone",
							     p->backend, alice_type_name(type), pk ? " (packed)" : "",
							     (long long)K, (long long)N, (long long)diff, (long long)(N * mc),
							     (long long)mc);
					}
				}
			}
			r.pack = false;
			free(plain);
			free(w);
			free(row);
			free(x);
			free(alone);
			free(batch);
		}
	mm_run_close(&r);
	cr_assert_eq(bad, 0, "[%s] %d of %d batched MUL_MATs differ from their columns alone", p->backend, bad,
		     checked);
}
