// ctest-labels: unit;parity
/* test_fusion.c — a GPU backend records chains of nodes as one kernel (the
 * residual add, norm and activation rounding; the Q/K/V and gate/up
 * mat-vecs with their GLU; the rotations and cache writes). Fused, every
 * element takes the same operations in the same order as node by node, so
 * the logits must be the same bits with fusion off ($ALICE_VK_FUSE=0,
 * $ALICE_CUDA_FUSE=0): prefill and decode steps of one and two sequences.
 * Runs on $ALICE_TEST_BACKEND; the CPU backend does not fuse (skipped). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/model.h"
#include "alice/quant.h"
#include "support/models.h"
#include "support/paths.h"

static const char *fuse_var(void)
{
	const char *b = alice_test_backend();
	if (strcmp(b, "vulkan") == 0)
		return "ALICE_VK_FUSE";
	if (strcmp(b, "cuda") == 0)
		return "ALICE_CUDA_FUSE";
	return NULL;
}

static void decode(struct alice_context *c, int n, const int32_t *t, const int32_t *p, const int32_t *s,
		   const bool *w)
{
	struct alice_batch b = {n, t, p, s, w, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	struct alice_error e = {{0}};
	cr_assert_eq(alice_context_decode(c, &b, &e), ALICE_OK, "%s", e.msg);
}

/* every logits row of: two prompts in one step, four steps of both, two of
 * one, then a 20-token chunk of one (a prefill product of one run of rows,
 * where Q/K/V fuse on the cooperative-matrix GEMM) */
static float *run(const char *path, const char *fuse, size_t *n_out)
{
	setenv(fuse_var(), fuse, 1);
	struct alice_model *m = alice_test_load_model(path, NULL);
	unsetenv(fuse_var());
	int32_t nv = alice_model_n_vocab(m);
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = 64;
	cp.n_seq = 2;
	cp.n_batch = 64;
	struct alice_context *c = NULL;
	struct alice_error e = {{0}};
	cr_assert_eq(alice_context_create(m, &cp, &c, &e), ALICE_OK, "%s", e.msg);
	size_t cap = (size_t)nv * 64, n = 0;
	float *out = malloc(cap * sizeof(float));
	cr_assert_not_null(out);
	int32_t tok[21], pos[21], seq[21];
	bool want[21];
	for (int i = 0; i < 21; i++) {
		tok[i] = (100 + 37 * i) % nv;
		pos[i] = i < 12 ? i : i - 12;
		seq[i] = i < 12 ? 0 : 1;
		want[i] = true;
	}
	decode(c, 21, tok, pos, seq, want);
	for (int r = 0; r < alice_context_n_logits(c); r++, n += (size_t)nv)
		memcpy(out + n, alice_context_logits(c, r), sizeof(float) * (size_t)nv);
	for (int step = 0; step < 6; step++) {
		int rows = step < 4 ? 2 : 1;
		int32_t t[2] = {(200 + 7 * step) % nv, (300 + 11 * step) % nv};
		int32_t p[2] = {12 + step, 9 + step}, s[2] = {0, 1};
		bool w[2] = {true, true};
		decode(c, rows, t, p, s, w);
		for (int r = 0; r < rows; r++, n += (size_t)nv)
			memcpy(out + n, alice_context_logits(c, r), sizeof(float) * (size_t)nv);
	}
	int32_t ct[20], cpos[20], cs[20];
	bool cw[20];
	for (int i = 0; i < 20; i++) {
		ct[i] = (400 + 13 * i) % nv;
		cpos[i] = 18 + i;
		cs[i] = 0;
		cw[i] = true;
	}
	decode(c, 20, ct, cpos, cs, cw);
	for (int r = 0; r < alice_context_n_logits(c); r++, n += (size_t)nv)
		memcpy(out + n, alice_context_logits(c, r), sizeof(float) * (size_t)nv);
	alice_context_free(c);
	alice_model_free(m);
	*n_out = n;
	return out;
}

static void check(const char *path)
{
	if (!fuse_var())
		cr_skip_test("backend %s does not fuse nodes", alice_test_backend());
	size_t n0, n1;
	/* ALICE_TEST_FUSE_ON: the "on" value (a subset of the fusions, to find which differs) */
	const char *on_v = getenv("ALICE_TEST_FUSE_ON");
	float *off = run(path, "0", &n0), *on = run(path, on_v && *on_v ? on_v : "1", &n1);
	cr_assert_eq(n0, n1);
	size_t bad = 0, first = 0;
	for (size_t i = 0; i < n0; i++)
		if (memcmp(&off[i], &on[i], sizeof(float))) {
			if (!bad)
				first = i;
			bad++;
		}
	cr_expect_eq(bad, 0, "%s: %zu of %zu logits differ with fusion on (first at %zu: %.9g vs %.9g)", path, bad, n0,
		     first, bad ? off[first] : 0.0, bad ? on[first] : 0.0);
	free(off);
	free(on);
}

static const char *const fixtures[] = {"llama-spm-Q4_K_M.gguf", "llama-spm-Q8_0.gguf", "llama-spm-Q4_0.gguf",
				       "llama2-spm-F16.gguf",   "qwen2-Q4_K_M.gguf",   "qwen3-BF16.gguf",
				       "gemma2-F32.gguf",       "qwen35-F16.gguf"};

ParameterizedTestParameters(fusion, fixture)
{
	static int cases[] = {0, 1, 2, 3, 4, 5, 6, 7};
	return cr_make_param_array(int, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(int *f, fusion, fixture, .timeout = 300)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/models/%s", alice_test_fixtures_dir(), fixtures[*f]);
	check(path);
}

/* Rows of several 256-element chunks and a ragged last one (Q8_0's blocks
 * of 32), the shapes the fixtures' 256-wide rows do not reach. Parameters
 * are indices: Criterion's workers are re-executed, parent pointers invalid. */
struct synth_case {
	uint32_t type;
	const char *shape, *tag;
};
static const struct synth_case synth[] = {
	{ALICE_TYPE_Q8_0, "embedding_length=800 feed_forward_length=1056 attention.head_count=10 attention.head_count_kv=2", "q8"},
	{ALICE_TYPE_Q4_K, "embedding_length=768 feed_forward_length=1536 attention.head_count=12 attention.head_count_kv=4", "q4k"},
};

ParameterizedTestParameters(fusion, synthetic)
{
	static int cases[] = {0, 1};
	return cr_make_param_array(int, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(int *i, fusion, synthetic, .timeout = 300)
{
	if (!fuse_var())
		cr_skip_test("backend %s does not fuse nodes", alice_test_backend());
	const struct synth_case *c = &synth[*i];
	char name[64];
	snprintf(name, sizeof name, "fusion-llama-%s.gguf", c->tag);
	check(alice_test_synth_model("llama", c->shape, c->type, alice_test_path(alice_test_build_dir(), name)));
}
