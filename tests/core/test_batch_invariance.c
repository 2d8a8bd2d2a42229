/* A sequence's logits must not depend on what else shares its step: the
 * server batches every active request into one decode call, and greedy
 * requests must give the same tokens concurrently as alone. On the CPU
 * backend this holds bit for bit, also when the neighbour is a long prefill
 * (64+ tokens switches llama.cpp's attention regime for that sequence only).
 * Runs on $ALICE_TEST_BACKEND (default cpu); the GPU backends are held to
 * the same bit-exactness. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/model.h"
#include "support/models.h"
#include "support/paths.h"

#define PROMPT 12

static struct alice_context *make_ctx(struct alice_model *m)
{
	struct alice_context_params p;
	alice_context_params_default(&p);
	p.n_ctx = 256;
	p.n_seq = 2;
	p.n_batch = 256;
	struct alice_context *c = NULL;
	struct alice_error e = {{0}};
	cr_assert_eq(alice_context_create(m, &p, &c, &e), ALICE_OK, "%s", e.msg);
	return c;
}

static void decode(struct alice_context *c, int n, const int32_t *t, const int32_t *p, const int32_t *s,
		   const bool *w)
{
	struct alice_batch b = {n, t, p, s, w, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	struct alice_error e = {{0}};
	cr_assert_eq(alice_context_decode(c, &b, &e), ALICE_OK, "%s", e.msg);
}

static void check_model(const char *file, int neighbour)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/models/%s", alice_test_fixtures_dir(), file);
	struct alice_model *m = alice_test_load_model(path, NULL); /* $ALICE_TEST_BACKEND */
	int32_t nv = alice_model_n_vocab(m);
	int32_t tok[PROMPT], pos[PROMPT], seq[PROMPT] = {0};
	for (int i = 0; i < PROMPT; i++) {
		tok[i] = 100 + 37 * i;
		pos[i] = i;
	}
	int32_t x = 200, px = PROMPT, sx = 0;

	/* alone: prompt, then one decode step */
	struct alice_context *c1 = make_ctx(m);
	decode(c1, PROMPT, tok, pos, seq, NULL);
	decode(c1, 1, &x, &px, &sx, NULL);
	float *alone = malloc(sizeof(float) * (size_t)nv);
	cr_assert_not_null(alone);
	memcpy(alone, alice_context_logits(c1, 0), sizeof(float) * (size_t)nv);

	/* the same decode step sharing a step with another sequence's prefill */
	struct alice_context *c2 = make_ctx(m);
	decode(c2, PROMPT, tok, pos, seq, NULL);
	int n = neighbour + 1;
	int32_t *bt = malloc(sizeof(int32_t) * (size_t)n), *bp = malloc(sizeof(int32_t) * (size_t)n),
		*bs = malloc(sizeof(int32_t) * (size_t)n);
	bool *bw = calloc((size_t)n, sizeof(bool));
	cr_assert(bt && bp && bs && bw);
	bt[0] = x; bp[0] = PROMPT; bs[0] = 0; bw[0] = true;
	for (int i = 1; i < n; i++) {
		bt[i] = 300 + 7 * i;
		bp[i] = i - 1;
		bs[i] = 1;
	}
	bw[n - 1] = true;
	decode(c2, n, bt, bp, bs, bw);
	const float *batched = alice_context_logits(c2, 0);
	double worst = 0;
	for (int32_t i = 0; i < nv; i++)
		worst = fmax(worst, fabs((double)alone[i] - batched[i]));
	cr_expect_eq(worst, 0.0, "%s: logits alone vs beside a %d-token prefill differ by %g", file, neighbour,
		     worst);
	free(bt); free(bp); free(bs); free(bw); free(alone);
	alice_context_free(c1);
	alice_context_free(c2);
	alice_model_free(m);
}

/* Parameters are plain indices: Criterion runs each case in a re-executed
 * (PIE, so relocated) worker, where a pointer from the parent is not valid. */
static const char *const files[] = {"llama-spm-Q8_0.gguf", "llama-spm-Q4_K_M.gguf", "llama2-spm-F16.gguf",
				    "qwen2-Q4_K_M.gguf",   "qwen3-BF16.gguf",       "gemma2-F32.gguf",
				    "qwen35-F16.gguf"};

struct bi_case {
	int file;
	int neighbour;
};

ParameterizedTestParameters(batch, decode_beside_prefill)
{
	static struct bi_case cases[] = {{0, 7}, {0, 70}, {1, 70}, {2, 70}, {3, 70}, {4, 70}, {5, 70}, {6, 70}};
	return cr_make_param_array(struct bi_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bi_case *c, batch, decode_beside_prefill, .timeout = 300)
{
	check_model(files[c->file], c->neighbour);
}

/* Many sequences decoding in one step (the server under load): every row
 * equals that sequence's step alone, bit for bit. Prompts differ in length
 * and content; the batched prefill is one step too. */
#define MANY 64
static void check_many(const char *file)
{
	char path[4096];
	if (file[0] == '/')
		snprintf(path, sizeof path, "%s", file);
	else
		snprintf(path, sizeof path, "%s/models/%s", alice_test_fixtures_dir(), file);
	struct alice_model *m = alice_test_load_model(path, NULL);
	int32_t nv = alice_model_n_vocab(m);
	struct alice_context_params p;
	alice_context_params_default(&p);
	p.n_ctx = 32;
	p.n_seq = MANY;
	p.n_batch = 512;
	struct alice_context *cb = NULL, *c1 = NULL;
	struct alice_error e = {{0}};
	/* alone: the same context shape (a server's context is fixed; the
	 * attention's split count follows the cache size), one sequence active */
	cr_assert_eq(alice_context_create(m, &p, &cb, &e), ALICE_OK, "%s", e.msg);
	cr_assert_eq(alice_context_create(m, &p, &c1, &e), ALICE_OK, "%s", e.msg);
	int32_t tok[MANY * 8], pos[MANY * 8], seq[MANY * 8], len[MANY];
	bool want[MANY * 8];
	int n = 0;
	for (int s = 0; s < MANY; s++) {
		len[s] = 1 + s % 7;
		for (int i = 0; i < len[s]; i++, n++) {
			tok[n] = (100 + 37 * s + 11 * i) % nv;
			pos[n] = i;
			seq[n] = s;
			want[n] = false;
		}
	}
	decode(cb, n, tok, pos, seq, want);
	int32_t dt[MANY], dp[MANY], ds[MANY];
	bool dw[MANY];
	for (int s = 0; s < MANY; s++) {
		dt[s] = (500 + 13 * s) % nv;
		dp[s] = len[s];
		ds[s] = s;
		dw[s] = true;
	}
	decode(cb, MANY, dt, dp, ds, dw);
	cr_assert_eq(alice_context_n_logits(cb), MANY);
	int bad = 0;
	double worst = 0;
	for (int s = 0, at = 0; s < MANY; at += len[s], s++) {
		int32_t z[8];
		for (int i = 0; i < 8; i++)
			z[i] = s;
		decode(c1, len[s], tok + at, pos + at, z, NULL);
		decode(c1, 1, &dt[s], &dp[s], z, NULL);
		alice_context_seq_clear(c1, s);
		const float *alone = alice_context_logits(c1, 0), *batched = alice_context_logits(cb, s);
		double w = 0;
		for (int32_t i = 0; i < nv; i++)
			w = fmax(w, fabs((double)alone[i] - batched[i]));
		bad += w != 0.0;
		worst = fmax(worst, w);
	}
	cr_expect_eq(bad, 0, "%s: %d of %d rows of a %d-row decode step differ from their step alone (worst %g)", file,
		     bad, MANY, MANY, worst);
	alice_context_free(cb);
	alice_context_free(c1);
	alice_model_free(m);
}

ParameterizedTestParameters(batch, decode_many_rows)
{
	static int cases[] = {0, 1, 2, 3, 4, 5, 6};
	return cr_make_param_array(int, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(int *f, batch, decode_many_rows, .timeout = 300)
{
	check_many(files[*f]);
}

/* The same on a model of real shapes (ALICE_INV_MODEL: a GGUF path, e.g.
 * alice-mkmodel --shape llama-1b --type Q4_K_M), where the GPU backends'
 * batched kernels (tensor cores from 16 rows) run; the fixtures' rows are
 * too short for them. */
Test(batch, decode_many_rows_model, .timeout = 600)
{
	const char *f = getenv("ALICE_INV_MODEL");
	if (!f || !*f)
		cr_skip_test("ALICE_INV_MODEL not set (a model of real shapes for the GPU batched kernels)");
	check_many(f);
}

/* Speculative verification: k drafted tokens of one sequence decoded as one
 * step of k rows marked solo give, row for row, the logits of decoding them
 * one at a time (bit for bit), also beside another sequence's decode row. */
#define VERIFY_K 9
static void check_verify_path(const char *path)
{
	const char *file = path;
	struct alice_model *m = alice_test_load_model(path, NULL);
	int32_t nv = alice_model_n_vocab(m);
	int32_t tok[PROMPT], pos[PROMPT], seq[PROMPT] = {0};
	for (int i = 0; i < PROMPT; i++) {
		tok[i] = 100 + 37 * i;
		pos[i] = i;
	}
	struct alice_context *c1 = make_ctx(m), *c2 = make_ctx(m);
	decode(c1, PROMPT, tok, pos, seq, NULL);
	decode(c2, PROMPT, tok, pos, seq, NULL);
	int32_t one = 1, zero = 0;
	decode(c2, 1, &tok[0], &zero, &one, NULL); /* sequence 1: the neighbour */
	float *alone = malloc(sizeof(float) * (size_t)nv * VERIFY_K);
	cr_assert_not_null(alone);
	int32_t vt[VERIFY_K + 1], vp[VERIFY_K + 1], vs[VERIFY_K + 1];
	bool vw[VERIFY_K + 1], solo[VERIFY_K + 1];
	for (int i = 0; i < VERIFY_K; i++) {
		vt[i] = (400 + 53 * i) % nv;
		vp[i] = PROMPT + i;
		vs[i] = 0;
		vw[i] = solo[i] = true;
		decode(c1, 1, &vt[i], &vp[i], &vs[i], NULL);
		memcpy(alone + (size_t)i * nv, alice_context_logits(c1, 0), sizeof(float) * (size_t)nv);
	}
	vt[VERIFY_K] = 77; /* the neighbour's decode row, not solo */
	vp[VERIFY_K] = 1;
	vs[VERIFY_K] = 1;
	vw[VERIFY_K] = true;
	solo[VERIFY_K] = false;
	struct alice_batch b = {VERIFY_K + 1, vt, vp, vs, vw, solo, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	struct alice_error e = {{0}};
	cr_assert_eq(alice_context_decode(c2, &b, &e), ALICE_OK, "%s", e.msg);
	int bad = 0;
	double worst = 0;
	for (int i = 0; i < VERIFY_K; i++) {
		const float *v = alice_context_logits(c2, i);
		double w = 0;
		for (int32_t t = 0; t < nv; t++)
			w = fmax(w, fabs((double)alone[(size_t)i * nv + t] - v[t]));
		bad += w != 0.0;
		worst = fmax(worst, w);
	}
	cr_expect_eq(bad, 0, "%s: %d of %d solo rows differ from one-token decodes (worst %g)", file, bad, VERIFY_K,
		     worst);
	free(alone);
	alice_context_free(c1);
	alice_context_free(c2);
	alice_model_free(m);
}

static void check_verify(const char *file)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/models/%s", alice_test_fixtures_dir(), file);
	check_verify_path(path);
}

ParameterizedTestParameters(batch, verify_rows)
{
	static int cases[] = {0, 1, 2, 3, 4, 5};
	return cr_make_param_array(int, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(int *f, batch, verify_rows, .timeout = 300)
{
	check_verify(files[*f]);
}

/* the bundled model and its Q4_0 sibling, target and draft of the
 * speculative tests */
Test(batch, verify_rows_tolstoy, .timeout = 300)
{
	check_verify_path(ALICE_SOURCE_DIR "/models/tiny-tolstoy-Q8_0.gguf");
	check_verify_path(ALICE_SHARED_MODELS_DIR "/tiny-tolstoy-Q4_0.gguf");
}
