/* test_mix_cuda.c — the CUDA backend's one-column mat-vec launch may hold
 * products of two weight types of one input: a Q4_K_M layer's Q4_K Q and K
 * with its Q6_K V (backends/cuda/mmvq.cu, set.mix). Each row keeps its own
 * type's kernel, so every output must equal, bit for bit, the product run
 * alone; the backend's log must say the mixed launch ran. K = 512 takes
 * Q6_K as the file has it, K = 2048 its packed form. Skipped where no
 * CUDA device is present. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/log.h"
#include "alice/quant.h"
#include "support/mm_run.h"

#define NQ 256
#define NKV 64

enum { T_X, T_WQ, T_WK, T_WV, T_DQ, T_DK, T_DV, T_COUNT };

static const uint32_t wtype[T_COUNT] = {[T_WQ] = ALICE_TYPE_Q4_K, [T_WK] = ALICE_TYPE_Q4_K, [T_WV] = ALICE_TYPE_Q6_K};
static const int64_t rows[T_COUNT] = {[T_WQ] = NQ, [T_WK] = NKV, [T_WV] = NKV, [T_DQ] = NQ, [T_DK] = NKV, [T_DV] = NKV};

static int g_mix_logs;

static void sink(enum alice_log_level level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	if (strstr(msg, "products of one input in one mat-vec launch"))
		g_mix_logs++;
}

/* the products of nodes [first, first + n) of Q, K, V (one graph), their
 * outputs read into out[T_DQ ..] */
static void run(int64_t K, uint8_t *const *wq, const float *x, int first, int n, float **out)
{
	struct mm_run r;
	mm_run_open(&r, "cuda");
	const struct alice_backend_vtable *vt = r.vt;
	struct alice_tensor t[T_COUNT];
	struct alice_buffer *wb = NULL, *cb = NULL;
	uint64_t off[T_COUNT] = {0}, wtot = 0, ctot = 0;
	for (int i = T_WQ; i <= T_WV; i++) {
		off[i] = wtot;
		wtot += (alice_row_size(wtype[i], K) * (uint64_t)rows[i] + 255) & ~(uint64_t)255;
	}
	cr_assert_eq(vt->buffer_alloc(r.ctx, wtot, ALICE_BUFFER_WEIGHTS, &wb), ALICE_OK);
	for (int i = T_WQ; i <= T_WV; i++) {
		cr_assert_eq(vt->buffer_write(r.ctx, wb, off[i], wq[i], alice_row_size(wtype[i], K) * (uint64_t)rows[i]),
			     ALICE_OK);
		mm_set_tensor(&t[i], wtype[i], K, rows[i], wb, off[i]);
		if (ALICE_VT_HAS(vt, tensor_pack))
			cr_assert_eq(vt->tensor_pack(r.ctx, &t[i]), ALICE_OK, "%s", vt->last_error(r.ctx));
	}
	const int64_t crows[T_COUNT] = {[T_X] = K, [T_DQ] = NQ, [T_DK] = NKV, [T_DV] = NKV};
	for (int i = 0; i < T_COUNT; i++)
		if (i == T_X || i >= T_DQ) {
			off[i] = ctot;
			ctot += ((uint64_t)crows[i] * 4 + 255) & ~(uint64_t)255;
		}
	cr_assert_eq(vt->buffer_alloc(r.ctx, ctot, ALICE_BUFFER_COMPUTE, &cb), ALICE_OK);
	for (int i = 0; i < T_COUNT; i++)
		if (i == T_X || i >= T_DQ)
			mm_set_tensor(&t[i], ALICE_TYPE_F32, crows[i], 1, cb, off[i]);
	cr_assert_eq(vt->buffer_write(r.ctx, cb, off[T_X], x, (uint64_t)K * 4), ALICE_OK);
	struct alice_node nd[3];
	for (int i = 0; i < n; i++) {
		mm_node_mul_mat(&nd[i]);
		nd[i].dst = T_DQ + first + i;
		nd[i].src[0] = T_WQ + first + i;
		nd[i].src[1] = T_X;
	}
	struct alice_graph g = {.n_tensors = T_COUNT, .n_nodes = (uint32_t)n, .tensors = t, .nodes = nd};
	cr_assert_eq(vt->graph_compute(r.ctx, &g), ALICE_OK, "%s", vt->last_error(r.ctx));
	for (int i = first; i < first + n; i++)
		cr_assert_eq(vt->buffer_read(r.ctx, cb, off[T_DQ + i], out[T_DQ + i], (uint64_t)rows[T_DQ + i] * 4),
			     ALICE_OK);
	vt->buffer_free(r.ctx, cb);
	vt->buffer_free(r.ctx, wb);
	mm_run_close(&r);
}

Test(mix_cuda, mixed_launch_equals_each_product_alone, .timeout = 300)
{
	alice_log_set_sink(sink, NULL);
	enum alice_log_level lv = alice_log_get_level();
	alice_log_set_level(ALICE_LOG_DEBUG);
	const int64_t ks[2] = {512, 2048};
	for (int kc = 0; kc < 2; kc++) {
		const int64_t K = ks[kc];
		uint64_t seed = 0x13198a2e03707344ull + (uint64_t)K;
		float *x = malloc(sizeof(float) * (size_t)K), *wf = malloc(sizeof(float) * (size_t)K);
		cr_assert(x && wf);
		for (int64_t k = 0; k < K; k++)
			x[k] = mm_rng_gauss(&seed);
		uint8_t *wq[T_COUNT] = {0};
		for (int i = T_WQ; i <= T_WV; i++) {
			size_t rs = alice_row_size(wtype[i], K);
			wq[i] = malloc(rs * (size_t)rows[i]);
			cr_assert_not_null(wq[i]);
			for (int64_t n = 0; n < rows[i]; n++) {
				for (int64_t k = 0; k < K; k++)
					wf[k] = mm_rng_gauss(&seed);
				cr_assert(alice_quantize(wtype[i], wf, wq[i] + n * rs, K));
			}
		}
		float *alone[T_COUNT] = {0}, *mixed[T_COUNT] = {0};
		for (int i = T_DQ; i <= T_DV; i++) {
			alone[i] = malloc(sizeof(float) * (size_t)rows[i]);
			mixed[i] = malloc(sizeof(float) * (size_t)rows[i]);
			cr_assert(alone[i] && mixed[i]);
		}
		for (int i = 0; i < 3; i++)
			run(K, wq, x, i, 1, alone);
		const int before = g_mix_logs;
		run(K, wq, x, 0, 3, mixed);
		cr_expect_gt(g_mix_logs, before, "K %lld: the three products did not share a launch", (long long)K);
		for (int i = T_DQ; i <= T_DV; i++) {
			int64_t bad = 0, first = -1;
			for (int64_t n = 0; n < rows[i]; n++)
				if (memcmp(&alone[i][n], &mixed[i][n], sizeof(float))) {
					bad++;
					first = first < 0 ? n : first;
				}
			cr_expect_eq(bad, 0, "K %lld, product %d: %lld of %lld rows differ (first %lld: %.9g alone, %.9g mixed)",
				     (long long)K, i - T_DQ, (long long)bad, (long long)rows[i], (long long)first,
				     first >= 0 ? alone[i][first] : 0.0, first >= 0 ? mixed[i][first] : 0.0);
			free(alone[i]);
			free(mixed[i]);
		}
		for (int i = T_WQ; i <= T_WV; i++)
			free(wq[i]);
		free(x);
		free(wf);
	}
	alice_log_set_level(lv);
	alice_log_set_sink(NULL, NULL);
}
