/* test_synth.c — core/synth.c: every architecture in the registry can be
 * made as a tiny synthetic model (its own tensor table, the code
 * alice-mkmodel uses), loaded and stepped on the CPU backend with finite
 * logits (an encoder: finite embeddings); bad shapes are errors that name the key. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alice/model.h"
#include "alice/quant.h"
#include "alice/synth.h"
#include "support/models.h"
#include "support/paths.h"

static const char *synth_path(const char *arch, const char *tag)
{
	static char path[4096];
	char name[128];
	snprintf(name, sizeof(name), "synth-%s-%s.gguf", arch, tag);
	snprintf(path, sizeof(path), "%s", alice_test_path(alice_test_build_dir(), name));
	return path;
}

static void expect_finite_logits(struct alice_context *c, int32_t n_vocab, const char *arch, const char *what)
{
	cr_assert_eq(alice_context_n_logits(c), 1, "%s %s", arch, what);
	const float *l = alice_context_logits(c, 0);
	cr_assert_not_null(l, "%s %s", arch, what);
	for (int32_t v = 0; v < n_vocab; v++)
		cr_assert(isfinite(l[v]), "%s %s: logit %d = %g", arch, what, v, (double)l[v]);
}

/* A 5-token prompt, then one decode step. */
static void load_and_step(const char *arch, const char *path)
{
	struct alice_model *m = alice_test_load_model(path, "cpu");
	cr_expect_str_eq(alice_model_arch(m), arch);
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = 64;
	struct alice_context *c = NULL;
	struct alice_error err = {0};
	cp.embeddings = alice_model_is_encoder(m); /* an encoder (bert) computes embeddings only */
	cr_assert_eq(alice_context_create(m, &cp, &c, &err), ALICE_OK, "%s: %s", arch, err.msg);
	int32_t n_vocab = alice_model_n_vocab(m);
	int32_t tok[5] = {1, 450, 4996, 17354, 1701}, pos[5] = {0, 1, 2, 3, 4}, seq[5] = {0};
	if (cp.embeddings) { /* the whole sequence at once, every row's hidden state finite */
		bool all[5] = {true, true, true, true, true};
		struct alice_batch in = {.n_tokens = 5, .token = tok, .pos = pos, .seq = seq, .logits = all};
		cr_assert_eq(alice_context_decode(c, &in, &err), ALICE_OK, "%s: %s", arch, err.msg);
		for (int32_t r = 0; r < 5; r++) {
			const float *e = alice_context_embd(c, r);
			cr_assert_not_null(e, "%s row %d", arch, r);
			for (int32_t k = 0; k < alice_model_n_embd(m); k++)
				cr_assert(isfinite(e[k]), "%s row %d [%d] = %g", arch, r, k, (double)e[k]);
		}
		alice_context_free(c);
		alice_model_free(m);
		return;
	}
	struct alice_batch prompt = {.n_tokens = 5, .token = tok, .pos = pos, .seq = seq};
	cr_assert_eq(alice_context_decode(c, &prompt, &err), ALICE_OK, "%s prefill: %s", arch, err.msg);
	expect_finite_logits(c, n_vocab, arch, "prefill");
	int32_t next = 0, next_pos = 5;
	const float *l = alice_context_logits(c, 0);
	for (int32_t v = 1; v < n_vocab; v++)
		if (l[v] > l[next])
			next = v;
	struct alice_batch step = {.n_tokens = 1, .token = &next, .pos = &next_pos, .seq = seq};
	cr_assert_eq(alice_context_decode(c, &step, &err), ALICE_OK, "%s decode: %s", arch, err.msg);
	expect_finite_logits(c, n_vocab, arch, "decode");
	alice_context_free(c);
	alice_model_free(m);
}

Test(synth, every_registered_arch_loads_and_decodes)
{
	size_t n = 0;
	for (const char *arch; (arch = alice_synth_arch(n)); n++) {
		/* Q8_0 matrices; F32 1-D tensors and F32-only ones as the table says */
		load_and_step(arch, alice_test_synth_model(arch, NULL, ALICE_TYPE_Q8_0, synth_path(arch, "q8")));
		/* more layers than the default two (hybrid and windowed families mix layer kinds) */
		load_and_step(arch, alice_test_synth_model(arch, "block_count=4", ALICE_TYPE_F16, synth_path(arch, "f16")));
	}
	cr_expect_geq(n, 6, "the registry lists %zu architectures", n);
}

static enum alice_status try_synth(const char *arch, const char *shape, struct alice_error *err)
{
	char vocab_path[4096];
	snprintf(vocab_path, sizeof(vocab_path), "%s/vocab/ggml-vocab-llama-spm.gguf", alice_test_fixtures_dir());
	struct alice_gguf *vocab = NULL;
	cr_assert_eq(alice_gguf_open(vocab_path, &vocab, err), ALICE_OK, "%s", err->msg);
	struct alice_synth_params p = {.arch = arch, .shape = shape, .type = ALICE_TYPE_F16, .vocab = vocab};
	enum alice_status st = alice_synth_write(&p, synth_path(arch ? arch : "none", "bad"), err);
	alice_gguf_close(vocab);
	return st;
}

Test(synth, bad_shapes_are_named)
{
	struct {
		const char *arch, *shape, *want;
	} cases[] = {
		{"gemma3n", "", "architecture gemma3n is not supported (supported: llama"},
		{"llama", "embedding_length", "shape word 'embedding_length' is not key=value"},
		{"llama", "embedding_length=x", "embedding_length=x is not an unsigned 32-bit integer"},
		{"llama", "attention.head_count=3", "head_count (3) must be a positive multiple of head_count_kv (2)"},
		{"llama", "vocab_size=100", "the vocabulary has 32000 tokens but the shape's vocab_size is 100"},
		{"qwen35", "ssm.inner_size=60", "qwen35 ssm dims inconsistent"},
		{"qwen35", "rope.dimension_sections=-1,3,2,0", "qwen35.rope.dimension_sections[0] = -1 is out of range"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct alice_error err = {0};
		cr_expect_neq(try_synth(cases[i].arch, cases[i].shape, &err), ALICE_OK, "%s: accepted", cases[i].shape);
		cr_expect(strstr(err.msg, cases[i].want) != NULL, "'%s': error does not say '%s': %s", cases[i].shape,
			  cases[i].want, err.msg);
	}
}
