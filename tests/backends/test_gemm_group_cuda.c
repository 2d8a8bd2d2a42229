/* test_gemm_group_cuda.c — the CUDA backend multiplies a prefill's products
 * of one input (Q, K and V; gate and up, with their GLU) as one GEMM over
 * one F16 copy of their weights, then puts each member's rows in its dst
 * (backends/cuda/matmul.cu, gemm_multi). Checked here against the products
 * one by one (ALICE_CUDA_GEMM_GROUP=0): every output within the summation
 * order's error of the same operands, a column of 1e4 in every output, on
 * one sequence's run of rows and on a step that mixes runs with decode rows
 * (mat-vec columns between the GEMM runs), with launch fusion on and off;
 * the backend's log must say the group's copy was made. Skipped where no
 * CUDA device is present. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/log.h"
#include "alice/quant.h"
#include "support/mm_run.h"

#define K 512
#define NQ 256
#define NKV 64
#define NF 384
#define M 40

enum { T_X, T_WQ, T_WK, T_WV, T_WG, T_WU, T_DQ, T_DK, T_DV, T_DG, T_DU, T_H, T_REG, T_COUNT };

static const uint32_t wtype[T_COUNT] = {
	[T_WQ] = ALICE_TYPE_Q4_K, [T_WK] = ALICE_TYPE_Q4_K, [T_WV] = ALICE_TYPE_Q6_K,
	[T_WG] = ALICE_TYPE_Q4_K, [T_WU] = ALICE_TYPE_Q4_K,
};
static const int64_t wrows[T_COUNT] = {[T_WQ] = NQ, [T_WK] = NKV, [T_WV] = NKV, [T_WG] = NF, [T_WU] = NF};

static int g_group_logs;

static void sink(enum alice_log_level level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	if (strstr(msg, "products of one input"))
		g_group_logs++;
}

struct gg_out {
	float *d[T_COUNT]; /* dq dk dv dg du h, host copies */
};

/* x, the weights (quantized from seeded floats) and, with mixed, a row
 * regime: a run of 20 rows, 4 one-row sequences, a run of 16 */
static void run(const char *group, const char *fuse, bool mixed, const float *x, uint8_t *const *wq, struct gg_out *o)
{
	setenv("ALICE_CUDA_GEMM_GROUP", group, 1);
	setenv("ALICE_CUDA_FUSE", fuse, 1);
	struct mm_run r;
	mm_run_open(&r, "cuda");
	unsetenv("ALICE_CUDA_FUSE");
	const struct alice_backend_vtable *vt = r.vt;
	struct alice_tensor t[T_COUNT];
	struct alice_buffer *wb = NULL, *cb = NULL;
	uint64_t woff[T_COUNT] = {0}, wtot = 0;
	for (int i = T_WQ; i <= T_WU; i++) {
		woff[i] = wtot;
		wtot += (alice_row_size(wtype[i], K) * (uint64_t)wrows[i] + 255) & ~(uint64_t)255;
	}
	cr_assert_eq(vt->buffer_alloc(r.ctx, wtot, ALICE_BUFFER_WEIGHTS, &wb), ALICE_OK);
	for (int i = T_WQ; i <= T_WU; i++) {
		cr_assert_eq(vt->buffer_write(r.ctx, wb, woff[i], wq[i], alice_row_size(wtype[i], K) * (uint64_t)wrows[i]),
			     ALICE_OK);
		mm_set_tensor(&t[i], wtype[i], K, wrows[i], wb, woff[i]);
		if (ALICE_VT_HAS(vt, tensor_pack))
			cr_assert_eq(vt->tensor_pack(r.ctx, &t[i]), ALICE_OK, "%s", vt->last_error(r.ctx));
	}
	const int64_t drows[T_COUNT] = {[T_X] = K, [T_DQ] = NQ, [T_DK] = NKV, [T_DV] = NKV, [T_DG] = NF, [T_DU] = NF, [T_H] = NF};
	uint64_t coff[T_COUNT] = {0}, ctot = 0;
	for (int i = 0; i < T_COUNT; i++) {
		if (i >= T_WQ && i <= T_WU)
			continue;
		coff[i] = ctot;
		ctot += ((uint64_t)(i == T_REG ? 2 : drows[i]) * M * 4 + 255) & ~(uint64_t)255;
	}
	cr_assert_eq(vt->buffer_alloc(r.ctx, ctot, ALICE_BUFFER_COMPUTE, &cb), ALICE_OK);
	for (int i = 0; i < T_COUNT; i++)
		if (i < T_WQ || i > T_WU)
			mm_set_tensor(&t[i], i == T_REG ? ALICE_TYPE_I32 : ALICE_TYPE_F32, i == T_REG ? 2 : drows[i], M, cb,
				      coff[i]);
	cr_assert_eq(vt->buffer_write(r.ctx, cb, coff[T_X], x, (uint64_t)K * M * 4), ALICE_OK);
	int32_t reg[2 * M];
	for (int m = 0; m < M; m++) {
		int c = m < 20 ? 20 : m < 24 ? 1 : 16, i0 = m < 20 ? 0 : m < 24 ? m : 24;
		reg[2 * m] = c;
		reg[2 * m + 1] = m - i0;
	}
	cr_assert_eq(vt->buffer_write(r.ctx, cb, coff[T_REG], reg, sizeof(reg)), ALICE_OK);
	struct alice_node nd[6];
	const int mm[5][2] = {{T_DQ, T_WQ}, {T_DK, T_WK}, {T_DV, T_WV}, {T_DG, T_WG}, {T_DU, T_WU}};
	for (int i = 0; i < 5; i++) {
		mm_node_mul_mat(&nd[i]);
		nd[i].dst = mm[i][0];
		nd[i].src[0] = mm[i][1];
		nd[i].src[1] = T_X;
		if (mixed) {
			nd[i].src[2] = T_REG;
			nd[i].ip[0] = 20;
		}
	}
	memset(&nd[5], 0, sizeof(nd[5]));
	nd[5].op = ALICE_OP_GLU;
	nd[5].dst = T_H;
	nd[5].src[0] = T_DG;
	nd[5].src[1] = T_DU;
	for (int s = 2; s < ALICE_MAX_SRC; s++)
		nd[5].src[s] = -1;
	nd[5].ip[0] = ALICE_ACT_SILU;
	struct alice_graph g = {.n_tensors = T_COUNT, .n_nodes = 6, .tensors = t, .nodes = nd};
	cr_assert_eq(vt->graph_compute(r.ctx, &g), ALICE_OK, "%s", vt->last_error(r.ctx));
	for (int i = T_DQ; i <= T_H; i++) {
		o->d[i] = malloc((size_t)drows[i] * M * 4);
		cr_assert_not_null(o->d[i]);
		cr_assert_eq(vt->buffer_read(r.ctx, cb, coff[i], o->d[i], (uint64_t)drows[i] * M * 4), ALICE_OK);
	}
	vt->buffer_free(r.ctx, cb);
	vt->buffer_free(r.ctx, wb);
	mm_run_close(&r);
	unsetenv("ALICE_CUDA_GEMM_GROUP");
}

/* sum |w x| of output (n, m) of the weights at wf (rows of K) */
static double abs_sum(const float *wf, const float *x, int64_t n, int64_t m)
{
	double s = 0;
	for (int64_t k = 0; k < K; k++)
		s += fabs((double)wf[n * K + k] * x[m * K + k]);
	return s;
}

/* Each product within 3e-6 of its sum |w x| (F32 sums of the same F16
 * products in another order); h = silu(g) u within what those bounds on
 * g and u allow (|silu'| < 1.1) plus a few ulps. */
static void check(const struct gg_out *ref, const struct gg_out *got, const float *x, float *const *wf, const char *what)
{
	const int64_t drows[T_COUNT] = {[T_DQ] = NQ, [T_DK] = NKV, [T_DV] = NKV, [T_DG] = NF, [T_DU] = NF, [T_H] = NF};
	const int wof[T_COUNT] = {[T_DQ] = T_WQ, [T_DK] = T_WK, [T_DV] = T_WV, [T_DG] = T_WG, [T_DU] = T_WU};
	for (int i = T_DQ; i <= T_H; i++) {
		int64_t bad = 0, first = -1;
		for (int64_t m = 0; m < M; m++)
			for (int64_t n = 0; n < drows[i]; n++) {
				const int64_t e = n + m * drows[i];
				double bound;
				if (i == T_H) {
					const double bg = 3e-6 * abs_sum(wf[T_WG], x, n, m), bu = 3e-6 * abs_sum(wf[T_WU], x, n, m);
					const double g = fabs(ref->d[T_DG][e]), u = fabs(ref->d[T_DU][e]);
					bound = 1.1 * bg * (u + bu) + (g + bg) * bu + 1e-6 * fabs(ref->d[T_H][e]);
				} else {
					bound = 3e-6 * abs_sum(wf[wof[i]], x, n, m);
				}
				if (!(fabs((double)ref->d[i][e] - got->d[i][e]) <= bound)) {
					if (first < 0)
						first = e;
					bad++;
				}
			}
		cr_expect_eq(bad, 0, "%s, output %d: %lld of %lld outside the bound (first at %lld: %.9g vs %.9g)", what, i,
			     (long long)bad, (long long)(drows[i] * M), (long long)first, first >= 0 ? ref->d[i][first] : 0.0,
			     first >= 0 ? got->d[i][first] : 0.0);
	}
}

static void free_out(struct gg_out *o)
{
	for (int i = 0; i < T_COUNT; i++)
		free(o->d[i]);
}

Test(gemm_group_cuda, grouped_products_match_one_by_one, .timeout = 300)
{
	uint64_t seed = 0x243f6a8885a308d3ull;
	float *x = malloc(sizeof(float) * K * M);
	cr_assert_not_null(x);
	for (int64_t i = 0; i < (int64_t)K * M; i++)
		x[i] = mm_rng_gauss(&seed);
	for (int64_t k = 0; k < K; k++)
		x[7 * K + k] *= 1e4f; /* a column far larger than the rest */
	uint8_t *wq[T_COUNT] = {0};
	float *wf[T_COUNT] = {0};
	for (int i = T_WQ; i <= T_WU; i++) {
		size_t rs = alice_row_size(wtype[i], K);
		wq[i] = malloc(rs * (size_t)wrows[i]);
		wf[i] = malloc(sizeof(float) * K * (size_t)wrows[i]);
		cr_assert(wq[i] && wf[i]);
		for (int64_t n = 0; n < wrows[i]; n++) {
			for (int64_t k = 0; k < K; k++)
				wf[i][n * K + k] = mm_rng_gauss(&seed);
			cr_assert(alice_quantize(wtype[i], wf[i] + n * K, wq[i] + n * rs, K));
			alice_dequantize(wtype[i], wq[i] + n * rs, wf[i] + n * K, K);
		}
	}
	alice_log_set_sink(sink, NULL);
	enum alice_log_level lv = alice_log_get_level();
	alice_log_set_level(ALICE_LOG_DEBUG);
	for (int mixed = 0; mixed < 2; mixed++)
		for (int fuse = 0; fuse < 2; fuse++) {
			char what[64];
			snprintf(what, sizeof what, "%s, fusion %s", mixed ? "runs and decode rows" : "one run",
				 fuse ? "on" : "off");
			struct gg_out ref = {{0}}, got = {{0}};
			run("0", fuse ? "1" : "0", mixed, x, wq, &ref);
			const int before = g_group_logs;
			run("1", fuse ? "1" : "0", mixed, x, wq, &got);
			cr_expect_gt(g_group_logs, before, "%s: no group copy was made", what);
			check(&ref, &got, x, wf, what);
			free_out(&ref);
			free_out(&got);
		}
	alice_log_set_level(lv);
	alice_log_set_sink(NULL, NULL);
	for (int i = 0; i < T_COUNT; i++) {
		free(wq[i]);
		free(wf[i]);
	}
	free(x);
}
