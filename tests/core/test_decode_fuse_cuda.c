// ctest-labels: unit
/* test_decode_fuse_cuda.c — two fusions of a CUDA decode step, each with
 * its switch (read when the backend context is made):
 *  - ALICE_CUDA_ROPE_MV: a one-token step's Q/K/V mat-vec also rotates q
 *    and k (ROPE, NORMAL pairs) and writes the K and V cache cells
 *    (backends/cuda/rope.cuh) in place of a rope launch;
 *  - ALICE_CUDA_ATT_XQ: the decode attention kernel rounds its output for
 *    the o-proj mat-vec (attention.cu) in place of a k_quant_x launch.
 * Each runs the separate kernel's arithmetic on the same values, so every
 * logit of every step (later steps read the cache cells written) must be
 * the same bits with the switch at 0, and the backend's log must say the
 * fused form ran. Cases: a Q4_K_M file (Q6_K V beside Q4_K Q / K in one
 * launch), packed Q8_0 (four rows a warp), Q4_K. Skipped without CUDA. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/log.h"
#include "alice/model.h"
#include "alice/quant.h"
#include "support/models.h"
#include "support/paths.h"

struct fusion {
	const char *var, *log;
};
static const struct fusion fusions[] = {
	{"ALICE_CUDA_ROPE_MV", "rotated and the KV cache written by the Q/K/V mat-vec"},
	{"ALICE_CUDA_ATT_XQ", "attention output rounded for the mat-vec by the attention kernel"},
};
static const struct fusion *g_fu;
static int g_logs;

static void sink(enum alice_log_level level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	if (strstr(msg, g_fu->log))
		g_logs++;
}

static void decode(struct alice_context *c, int n, const int32_t *t, const int32_t *p, const int32_t *s)
{
	bool w[2] = {true, true};
	struct alice_batch b = {n, t, p, s, w, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	struct alice_error e = {{0}};
	cr_assert_eq(alice_context_decode(c, &b, &e), ALICE_OK, "%s", e.msg);
}

/* every logits row of: a 9-token prompt, then 12 one-token steps (one
 * sequence: the fused launch) with two two-token steps (two sequences:
 * not fused) among them */
static float *run(const char *path, const char *on, size_t *n_out)
{
	setenv(g_fu->var, on, 1);
	struct alice_model *m = alice_test_load_model(path, "cuda");
	unsetenv(g_fu->var);
	int32_t nv = alice_model_n_vocab(m);
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = 64;
	cp.n_seq = 2;
	cp.n_batch = 16;
	struct alice_context *c = NULL;
	struct alice_error e = {{0}};
	cr_assert_eq(alice_context_create(m, &cp, &c, &e), ALICE_OK, "%s", e.msg);
	float *out = malloc(sizeof(float) * (size_t)nv * 24);
	cr_assert_not_null(out);
	size_t n = 0;
	int32_t tok[9], pos[9], seq[9] = {0};
	for (int i = 0; i < 9; i++) {
		tok[i] = (100 + 37 * i) % nv;
		pos[i] = i;
	}
	bool w[9];
	for (int i = 0; i < 9; i++)
		w[i] = i == 8;
	struct alice_batch b = {9, tok, pos, seq, w, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	cr_assert_eq(alice_context_decode(c, &b, &e), ALICE_OK, "%s", e.msg);
	memcpy(out + n, alice_context_logits(c, 0), sizeof(float) * (size_t)nv);
	n += (size_t)nv;
	int32_t n1 = 0; /* sequence 1's tokens so far: its positions continue from 0 */
	for (int step = 0; step < 12; step++) {
		bool two = step == 4 || step == 8;
		int32_t t[2] = {(200 + 7 * step) % nv, (300 + 11 * step) % nv};
		int32_t p[2] = {9 + step, n1}, s[2] = {0, 1};
		n1 += two;
		decode(c, two ? 2 : 1, t, p, s);
		for (int r = 0; r < (two ? 2 : 1); r++, n += (size_t)nv)
			memcpy(out + n, alice_context_logits(c, r), sizeof(float) * (size_t)nv);
	}
	alice_context_free(c);
	alice_model_free(m);
	*n_out = n;
	return out;
}

static void check(const char *path, int f)
{
	g_fu = &fusions[f];
	g_logs = 0;
	alice_log_set_sink(sink, NULL);
	enum alice_log_level lv = alice_log_get_level();
	alice_log_set_level(ALICE_LOG_DEBUG);
	size_t n0, n1;
	float *off = run(path, "0", &n0);
	cr_expect_eq(g_logs, 0, "%s: the fused form ran with %s=0", path, g_fu->var);
	float *on = run(path, "1", &n1);
	alice_log_set_level(lv);
	alice_log_set_sink(NULL, NULL);
	cr_expect_gt(g_logs, 0, "%s: the fused form of %s never ran", path, g_fu->var);
	cr_assert_eq(n0, n1);
	size_t bad = 0, first = 0;
	for (size_t i = 0; i < n0; i++)
		if (memcmp(&off[i], &on[i], sizeof(float))) {
			if (!bad)
				first = i;
			bad++;
		}
	cr_expect_eq(bad, 0, "%s, %s: %zu of %zu logits differ (first at %zu: %.9g vs %.9g)", path, g_fu->var, bad, n0,
		     first, bad ? off[first] : 0.0, bad ? on[first] : 0.0);
	free(off);
	free(on);
}

/* cases: fusion x model (0: the Q4_K_M fixture, 1: synthetic Q8_0, 2:
 * synthetic Q4_K); parameters are indices (Criterion re-executes workers).
 * The fixture's 2 heads of 64 a KV head are half a 256-block: the
 * attention kernel does not round those (ATT_XQ on the synthetic ones). */
ParameterizedTestParameters(decode_fuse_cuda, each)
{
	static int cases[] = {0, 1, 2, 4, 5};
	return cr_make_param_array(int, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(int *c, decode_fuse_cuda, each, .timeout = 300)
{
	alice_test_require_backend("cuda");
	int f = *c / 3, m = *c % 3;
	char path[4096];
	if (m == 0) {
		snprintf(path, sizeof path, "%s/models/llama-spm-Q4_K_M.gguf", alice_test_fixtures_dir());
		check(path, f);
		return;
	}
	static const uint32_t types[2] = {ALICE_TYPE_Q8_0, ALICE_TYPE_Q4_K};
	char name[64];
	/* one file per case: Criterion runs the cases in parallel processes */
	snprintf(name, sizeof name, "decode-fuse-llama-%s-%d.gguf", m == 1 ? "q8" : "q4k", f);
	check(alice_test_synth_model("llama",
				     "embedding_length=512 feed_forward_length=1024 attention.head_count=8 "
				     "attention.head_count_kv=2",
				     types[m - 1], alice_test_path(alice_test_build_dir(), name)),
	      f);
}
