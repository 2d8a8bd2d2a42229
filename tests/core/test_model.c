/* test_model.c — model loading errors on hand-patched GGUFs (unsupported
 * architecture, missing tensor, wrong shape or type, missing or unsupported
 * hyper-parameters) and the context's batch semantics (split batches, mixed
 * sequences, logits only for the rows that ask, truncate/clear, range errors)
 * on a fixture model through the CPU backend; tiny-tolstoy generates English. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alice/model.h"
#include "alice/quant.h"
#include "alice/tokenizer.h"
#include "support/gguf_patch.h"
#include "support/models.h"
#include "support/paths.h"

#define BASE_MODEL "llama2-spm-F16" /* small llama fixture: n_embd 32, 2 layers, untied */

static char tmpdir[256];

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/alice-test-model-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	(void)!system(cmd);
}

static const char *fixture_model(const char *name)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/models/%s.gguf", alice_test_fixtures_dir(), name);
	return path;
}

/* ---- patched copies of a fixture ---- */

static const char *write_patched(const char *src_name, const struct alice_gguf_patch *p, const char *out_name)
{
	static char out[512];
	snprintf(out, sizeof(out), "%s/%s.gguf", tmpdir, out_name);
	return alice_test_write_patched_gguf(fixture_model(src_name), p, out);
}

static enum alice_status try_load(const char *path, struct alice_error *err)
{
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.path = path;
	mp.backend = "cpu";
	mp.n_threads = 2;
	struct alice_model *m = NULL;
	enum alice_status st = alice_model_load(&mp, &m, err);
	if (st == ALICE_OK)
		cr_assert_not_null(m);
	else
		cr_assert_null(m);
	alice_model_free(m);
	return st;
}

Test(model_load, unsupported_architecture, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct alice_gguf_patch p = {.set_str_key = "general.architecture", .set_str_val = "gemma3n"};
	const char *path = write_patched(BASE_MODEL, &p, "gemma3n");
	struct alice_error err = {0};
	cr_assert_eq(try_load(path, &err), ALICE_ERR_UNSUPPORTED, "%s", err.msg);
	cr_expect(strstr(err.msg, "architecture gemma3n is not supported yet") != NULL, "%s", err.msg);
	cr_expect(strstr(err.msg, "supported: llama, qwen2, qwen3") != NULL, "%s", err.msg);
	cr_expect(strstr(err.msg, path) != NULL, "error should name the file: %s", err.msg);
}

Test(model_load, missing_tensor, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct alice_gguf_patch p = {.drop_tensor = "blk.1.ffn_up.weight"};
	const char *path = write_patched(BASE_MODEL, &p, "missing");
	struct alice_error err = {0};
	cr_assert_eq(try_load(path, &err), ALICE_ERR_INVALID, "%s", err.msg);
	cr_expect(strstr(err.msg, "missing tensor blk.1.ffn_up.weight") != NULL, "%s", err.msg);
}

Test(model_load, wrong_shape, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct alice_gguf_patch p = {.shape_tensor = "blk.0.attn_q.weight", .new_ne1 = 128};
	const char *path = write_patched(BASE_MODEL, &p, "shape");
	struct alice_error err = {0};
	cr_assert_eq(try_load(path, &err), ALICE_ERR_INVALID, "%s", err.msg);
	cr_expect(strstr(err.msg, "tensor blk.0.attn_q.weight has shape [32, 128, 1, 1], expected [32, 256]") != NULL,
		  "%s", err.msg);
}

Test(model_load, norm_must_be_f32, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct alice_gguf_patch p = {.type_tensor = "blk.1.attn_norm.weight"};
	const char *path = write_patched(BASE_MODEL, &p, "type");
	struct alice_error err = {0};
	cr_assert_eq(try_load(path, &err), ALICE_ERR_UNSUPPORTED, "%s", err.msg);
	cr_expect(strstr(err.msg, "blk.1.attn_norm.weight has type F16") != NULL, "%s", err.msg);
}

Test(model_load, unsupported_quant_type, .init = make_tmpdir, .fini = remove_tmpdir)
{
	/* IQ2_XXS (16): ggml knows it, we do not dequantize it */
	struct alice_gguf_patch p = {.type_tensor = "blk.0.attn_q.weight", .new_type = 16};
	const char *path = write_patched("llama-spm-Q8_0", &p, "iq2xxs");
	struct alice_error err = {0};
	cr_assert_eq(try_load(path, &err), ALICE_ERR_UNSUPPORTED, "%s", err.msg);
	cr_expect(strstr(err.msg, "tensor blk.0.attn_q.weight has type IQ2_XXS (16), which is not supported") != NULL,
		  "%s", err.msg);
}

Test(model_load, missing_hyperparameter, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct alice_gguf_patch p = {.drop_key = "llama.embedding_length"};
	const char *path = write_patched(BASE_MODEL, &p, "nokey");
	struct alice_error err = {0};
	cr_assert_eq(try_load(path, &err), ALICE_ERR_INVALID, "%s", err.msg);
	cr_expect(strstr(err.msg, "missing hyper-parameter llama.embedding_length") != NULL, "%s", err.msg);
}

Test(model_load, yarn_rope_scaling_unsupported, .init = make_tmpdir, .fini = remove_tmpdir)
{
	struct alice_gguf_patch p = {.set_str_key = "llama.rope.scaling.type", .set_str_val = "yarn"};
	const char *path = write_patched(BASE_MODEL, &p, "yarn");
	struct alice_error err = {0};
	cr_assert_eq(try_load(path, &err), ALICE_ERR_UNSUPPORTED, "%s", err.msg);
	cr_expect(strstr(err.msg, "llama.rope.scaling.type = \"yarn\" is not supported yet") != NULL, "%s", err.msg);
}

Test(model_load, missing_file)
{
	struct alice_error err = {0};
	cr_assert_neq(try_load("/nonexistent/dir/model.gguf", &err), ALICE_OK);
	cr_expect(strstr(err.msg, "/nonexistent/dir/model.gguf") != NULL, "%s", err.msg);
}

/* ---- batch semantics on a fixture ---- */

/* The context tests run on ALICE_TEST_BACKEND (default cpu), like test_parity. */
static struct alice_model *load_fixture(const char *name)
{
	return alice_test_load_model(fixture_model(name), NULL);
}

static struct alice_context *make_ctx(struct alice_model *m, uint32_t n_ctx, uint32_t n_seq, uint32_t n_batch)
{
	struct alice_context_params cp = {.n_ctx = n_ctx, .n_seq = n_seq, .n_batch = n_batch};
	struct alice_context *c = NULL;
	struct alice_error err = {0};
	cr_assert_eq(alice_context_create(m, &cp, &c, &err), ALICE_OK, "%s", err.msg);
	return c;
}

#define NT 23
static const int32_t prompt_a[NT] = {1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203,
				     29889, 512, 263, 11813, 5720, 491, 278, 7205, 29892, 385, 2030};
static const int32_t prompt_b[NT] = {1, 822, 6088, 29918, 5975, 29898, 2084, 1125, 13, 1678, 9995, 7761,
				     278, 1833, 1196, 310, 263, 934, 29889, 15945, 29908, 13, 259};

/* Logits of every position of one prompt, decoded alone in one batch. */
static float *reference_rows(struct alice_model *m, const int32_t *toks, int n)
{
	struct alice_context *c = make_ctx(m, 64, 1, 512);
	int32_t pos[NT];
	bool want[NT];
	for (int i = 0; i < n; i++) {
		pos[i] = i;
		want[i] = true;
	}
	struct alice_batch b = {.n_tokens = n, .token = toks, .pos = pos, .logits = want};
	struct alice_error err = {0};
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	int nv = alice_model_n_vocab(m);
	float *rows = malloc((size_t)n * nv * sizeof(float));
	cr_assert_not_null(rows);
	for (int i = 0; i < n; i++)
		memcpy(rows + (size_t)i * nv, alice_context_logits(c, i), nv * sizeof(float));
	alice_context_free(c);
	return rows;
}

static float max_diff(const float *a, const float *b, int n)
{
	float d = 0.0f;
	for (int i = 0; i < n; i++) {
		float e = fabsf(a[i] - b[i]);
		if (!(e <= d))
			d = isnan(e) ? INFINITY : e;
	}
	return d;
}

/* Same positions through other batch layouts give the same logits up to
 * rounding drift (different matmul blocking and attention regimes: an F16
 * model, so a few F16 roundings; see test_parity's F16 bound). */
#define LAYOUT_TOL 0.4f

Test(context, split_batches_match_one_batch, .timeout = 120)
{
	struct alice_model *m = load_fixture(BASE_MODEL);
	int nv = alice_model_n_vocab(m);
	float *ref = reference_rows(m, prompt_a, NT);
	struct alice_context *c = make_ctx(m, 64, 1, 5); /* 23 tokens -> 5 chunks */
	int32_t pos[NT];
	bool want[NT];
	for (int i = 0; i < NT; i++) {
		pos[i] = i;
		want[i] = true;
	}
	struct alice_batch b = {.n_tokens = NT, .token = prompt_a, .pos = pos, .logits = want};
	struct alice_error err = {0};
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_context_n_logits(c), NT);
	for (int i = 0; i < NT; i++)
		cr_expect_leq(max_diff(alice_context_logits(c, i), ref + (size_t)i * nv, nv), LAYOUT_TOL, "row %d", i);
	cr_expect_eq(alice_context_seq_len(c, 0), NT);
	alice_context_free(c);
	free(ref);
	alice_model_free(m);
}

Test(context, mixed_sequences_in_one_batch, .timeout = 120)
{
	struct alice_model *m = load_fixture(BASE_MODEL);
	int nv = alice_model_n_vocab(m);
	float *ra = reference_rows(m, prompt_a, NT);
	float *rb = reference_rows(m, prompt_b, NT);
	struct alice_context *c = make_ctx(m, 64, 3, 512);
	/* interleave: a0 b0 a1 b1 ... in sequences 2 and 0 */
	int32_t tok[2 * NT], pos[2 * NT], seq[2 * NT];
	bool want[2 * NT];
	for (int i = 0; i < NT; i++) {
		tok[2 * i] = prompt_a[i];
		pos[2 * i] = i;
		seq[2 * i] = 2;
		tok[2 * i + 1] = prompt_b[i];
		pos[2 * i + 1] = i;
		seq[2 * i + 1] = 0;
		want[2 * i] = want[2 * i + 1] = true;
	}
	struct alice_batch b = {.n_tokens = 2 * NT, .token = tok, .pos = pos, .seq = seq, .logits = want};
	struct alice_error err = {0};
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_context_n_logits(c), 2 * NT);
	for (int i = 0; i < NT; i++) {
		cr_expect_leq(max_diff(alice_context_logits(c, 2 * i), ra + (size_t)i * nv, nv), LAYOUT_TOL, "a row %d", i);
		cr_expect_leq(max_diff(alice_context_logits(c, 2 * i + 1), rb + (size_t)i * nv, nv), LAYOUT_TOL, "b row %d",
			      i);
	}
	cr_expect_eq(alice_context_seq_len(c, 2), NT);
	cr_expect_eq(alice_context_seq_len(c, 0), NT);
	cr_expect_eq(alice_context_seq_len(c, 1), 0);

	/* one more decode step for both, in one batch */
	int32_t t2[2] = {prompt_a[0], prompt_b[0]}, p2[2] = {NT, NT}, s2[2] = {2, 0};
	struct alice_batch b2 = {.n_tokens = 2, .token = t2, .pos = p2, .seq = s2, .logits = NULL};
	cr_assert_eq(alice_context_decode(c, &b2, &err), ALICE_OK, "%s", err.msg);
	cr_expect_eq(alice_context_n_logits(c), 1, "logits = NULL: last token only");
	alice_context_free(c);
	free(ra);
	free(rb);
	alice_model_free(m);
}

Test(context, logits_only_for_rows_that_ask, .timeout = 120)
{
	struct alice_model *m = load_fixture(BASE_MODEL);
	int nv = alice_model_n_vocab(m);
	float *ref = reference_rows(m, prompt_a, NT);
	struct alice_context *c = make_ctx(m, 64, 1, 512);
	int32_t pos[NT];
	bool want[NT] = {0};
	for (int i = 0; i < NT; i++)
		pos[i] = i;
	want[3] = want[11] = want[NT - 1] = true;
	struct alice_batch b = {.n_tokens = NT, .token = prompt_a, .pos = pos, .logits = want};
	struct alice_error err = {0};
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_context_n_logits(c), 3);
	cr_expect_leq(max_diff(alice_context_logits(c, 0), ref + 3 * (size_t)nv, nv), LAYOUT_TOL);
	cr_expect_leq(max_diff(alice_context_logits(c, 1), ref + 11 * (size_t)nv, nv), LAYOUT_TOL);
	cr_expect_leq(max_diff(alice_context_logits(c, 2), ref + (size_t)(NT - 1) * nv, nv), LAYOUT_TOL);
	cr_expect_null(alice_context_logits(c, 3));
	cr_expect_null(alice_context_logits(c, -1));

	/* no row asks: the cache still fills, no logits */
	alice_context_seq_clear(c, 0);
	bool none[NT] = {0};
	b.logits = none;
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	cr_expect_eq(alice_context_n_logits(c), 0);
	cr_expect_eq(alice_context_seq_len(c, 0), NT);
	alice_context_free(c);
	free(ref);
	alice_model_free(m);
}

Test(context, truncate_and_clear, .timeout = 120)
{
	struct alice_model *m = load_fixture(BASE_MODEL);
	int nv = alice_model_n_vocab(m);
	float *ref = reference_rows(m, prompt_a, NT);
	struct alice_context *c = make_ctx(m, 64, 1, 512);
	int32_t pos[NT];
	for (int i = 0; i < NT; i++)
		pos[i] = i;
	/* decode prompt_b's first 15 tokens, truncate to prompt_a's shared BOS, continue with prompt_a */
	struct alice_batch b = {.n_tokens = 15, .token = prompt_b, .pos = pos};
	struct alice_error err = {0};
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	cr_expect_not(alice_context_seq_truncate(c, 0, 16), "cannot grow");
	cr_expect(alice_context_seq_truncate(c, 0, 1));
	cr_expect_eq(alice_context_seq_len(c, 0), 1);
	bool want[NT];
	for (int i = 0; i < NT; i++)
		want[i] = true;
	struct alice_batch b2 = {.n_tokens = NT - 1, .token = prompt_a + 1, .pos = pos + 1, .logits = want};
	cr_assert_eq(alice_context_decode(c, &b2, &err), ALICE_OK, "%s", err.msg);
	for (int i = 1; i < NT; i++)
		cr_expect_leq(max_diff(alice_context_logits(c, i - 1), ref + (size_t)i * nv, nv), LAYOUT_TOL, "row %d", i);
	alice_context_seq_clear(c, 0);
	cr_expect_eq(alice_context_seq_len(c, 0), 0);
	alice_context_free(c);
	free(ref);
	alice_model_free(m);
}

Test(context, range_errors, .timeout = 120)
{
	struct alice_model *m = load_fixture(BASE_MODEL);
	struct alice_context *c = make_ctx(m, 8, 2, 512);
	struct alice_error err = {0};
	int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, pos[10], seq[10] = {0};
	for (int i = 0; i < 10; i++)
		pos[i] = i;
	struct alice_batch b = {.n_tokens = 3, .token = tok, .pos = pos + 1, .seq = seq};
	cr_expect_eq(alice_context_decode(c, &b, &err), ALICE_ERR_RANGE, "gap: position 1 on an empty sequence");
	cr_expect(strstr(err.msg, "does not continue") != NULL, "%s", err.msg);
	seq[0] = 2;
	b.pos = pos;
	cr_expect_eq(alice_context_decode(c, &b, &err), ALICE_ERR_RANGE, "sequence 2 of 2");
	seq[0] = 0;
	int32_t bad[3] = {1, 32000, 2};
	b.token = bad;
	cr_expect_eq(alice_context_decode(c, &b, &err), ALICE_ERR_RANGE, "token id = n_vocab");
	b.token = tok;
	b.n_tokens = 9;
	cr_expect_eq(alice_context_decode(c, &b, &err), ALICE_ERR_RANGE, "9 tokens in n_ctx 8");
	cr_expect(strstr(err.msg, "full") != NULL, "%s", err.msg);
	cr_expect_eq(alice_context_seq_len(c, 0), 0, "a rejected batch changes nothing");
	b.n_tokens = 8;
	cr_expect_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	b.n_tokens = 0;
	cr_expect_eq(alice_context_decode(c, &b, &err), ALICE_ERR_INVALID);
	alice_context_free(c);
	alice_model_free(m);
}

Test(model, getters)
{
	struct alice_model *m = load_fixture(BASE_MODEL);
	cr_expect_str_eq(alice_model_arch(m), "llama");
	cr_expect_str_eq(alice_model_backend_name(m), alice_test_backend());
	cr_expect_eq(alice_model_n_vocab(m), 32000);
	cr_expect_eq(alice_model_n_embd(m), 32);
	cr_expect_eq(alice_model_n_ctx_train(m), 4096);
	cr_expect_not(alice_model_is_recurrent(m));
	cr_expect_gt(alice_model_n_params(m), 32000u * 32u * 2u);
	cr_expect_gt(alice_model_weight_bytes(m), 0u);
	cr_expect_not_null(alice_model_tokenizer(m));
	cr_expect_not_null(alice_model_gguf(m));
	alice_model_free(m);
	alice_model_free(NULL);
	alice_context_free(NULL);
}

/* The CPU backend runs on a copy of the weights by default (faster than
 * the file's pages in a VM), on the mapping with ALICE_MMAP=1: the same
 * logits either way. */
static float *cpu_logits(bool mmap, bool *in_place)
{
	if (mmap)
		setenv("ALICE_MMAP", "1", 1);
	else
		unsetenv("ALICE_MMAP");
	struct alice_model *m = alice_test_load_model(fixture_model(BASE_MODEL), "cpu");
	unsetenv("ALICE_MMAP");
	*in_place = alice_model_weights_in_place(m);
	float *rows = reference_rows(m, prompt_b, NT);
	alice_model_free(m);
	return rows;
}

Test(model, cpu_weights_copied_or_in_place, .timeout = 120)
{
	bool copy_in_place = true, map_in_place = false;
	float *a = cpu_logits(false, &copy_in_place), *b = cpu_logits(true, &map_in_place);
	cr_expect_not(copy_in_place, "the CPU backend should run on a copy of the weights by default");
	cr_expect(map_in_place, "ALICE_MMAP=1 should keep the weights in the mapping");
	cr_expect(!memcmp(a, b, (size_t)NT * 32000 * sizeof(float)), "logits differ between the copy and the mapping");
	free(a);
	free(b);
}

/* tiny-tolstoy (trained llama, Q8_0) greedy from the README's prompt: the
 * F32 sample continues " him. / "I am not going to bed," said the countess.
 * Q8_0 must at least start the same way and keep writing English words. */
Test(model, tiny_tolstoy_writes_english, .timeout = 120)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/models/tiny-tolstoy-Q8_0.gguf", alice_test_source_dir());
	struct alice_model *m = alice_test_load_model(path, "cpu");
	struct alice_error err = {0};
	const struct alice_tokenizer *tok = alice_model_tokenizer(m);
	int32_t *toks = NULL;
	size_t n = 0;
	const char *prompt = "Prince Andrew looked at";
	cr_assert_eq(alice_tokenizer_encode(tok, prompt, strlen(prompt), true, false, &toks, &n, &err), ALICE_OK);
	struct alice_context *c = make_ctx(m, 256, 1, 512);
	int32_t pos[64], gen[48];
	for (size_t i = 0; i < n; i++)
		pos[i] = (int32_t)i;
	struct alice_batch b = {.n_tokens = (int32_t)n, .token = toks, .pos = pos};
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	int nv = alice_model_n_vocab(m), n_gen = 48;
	for (int s = 0; s < n_gen; s++) {
		const float *l = alice_context_logits(c, 0);
		int best = 0;
		for (int v = 1; v < nv; v++)
			if (l[v] > l[best])
				best = v;
		gen[s] = best;
		int32_t p = (int32_t)n + s;
		struct alice_batch nb = {.n_tokens = 1, .token = &gen[s], .pos = &p};
		cr_assert_eq(alice_context_decode(c, &nb, &err), ALICE_OK, "%s", err.msg);
	}
	char *text = NULL;
	size_t len = 0;
	cr_assert_eq(alice_tokenizer_decode(tok, gen, (size_t)n_gen, false, &text, &len, &err), ALICE_OK);
	fprintf(stderr, "tiny-tolstoy Q8_0 greedy: \"%s%s\"\n", prompt, text);
	cr_expect(strncmp(text, " him.", 5) == 0, "continuation starts \"%.10s\"", text);
	size_t letters = 0;
	for (size_t i = 0; i < len; i++)
		letters += (text[i] >= 'a' && text[i] <= 'z') || (text[i] >= 'A' && text[i] <= 'Z') || text[i] == ' ';
	cr_expect_gt(letters * 10, len * 8, "mostly letters and spaces: \"%s\"", text);
	cr_expect(strstr(text, " the ") || strstr(text, " a ") || strstr(text, " said "), "%s", text);
	free(text);
	free(toks);
	alice_context_free(c);
	alice_model_free(m);
}
