/* parity_run.c — the llama.cpp parity check of one fixture model, shared
 * by the parity tests (the method of tests/core/test_parity.c, factored out
 * so other architectures' tests run exactly the same checks): for each
 * reference prompt, tokens equal the reference's; all prompt tokens are
 * decoded in one batch with logits at every position; top-1 equals the
 * reference's where its top-1/top-2 margin exceeds max(0.1, bound); the
 * top-10 logits are within `bound` at every position, their median error
 * within `median`, position 0 within `pos0`; the long prompt's full last row
 * within `bound`; the 24-token greedy continuation is identical (it may part
 * only at a reference near-tie). Failures are Criterion expectations. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend_loader.h"
#include "alice/model.h"
#include "alice/tokenizer.h"
#include "support/models.h"
#include "support/parity_refs.h"
#include "support/parity_run.h"
#include "support/paths.h"

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static int32_t argmax(const float *l, int32_t n)
{
	int32_t best = 0;
	for (int32_t i = 1; i < n; i++)
		if (l[i] > l[best])
			best = i; /* strict: ties go to the lowest id */
	return best;
}

/* Worst |ours - ref| over the reference's top-10 of one position. */
static float top10_err(const float *l, const struct alice_ref_top *t, int32_t n_vocab)
{
	float worst = 0.0f;
	for (int k = 0; k < ALICE_REF_TOPK; k++) {
		if (t->id[k] < 0 || t->id[k] >= n_vocab)
			return INFINITY;
		float e = fabsf(l[t->id[k]] - t->logit[k]);
		if (isnan(e))
			return INFINITY;
		if (e > worst)
			worst = e;
	}
	return worst;
}

#define MAX_MSGS 8

struct tally {
	int fails;
	char msgs[MAX_MSGS][256];
};

static void note(struct tally *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct tally *t, const char *fmt, ...)
{
	if (t->fails < MAX_MSGS) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(t->msgs[t->fails], sizeof(t->msgs[0]), fmt, ap);
		va_end(ap);
	}
	t->fails++;
}

/* ALICE_CPU_EXACT=1 on the cpu backend (x86-64, not the scalar test
 * level): llama.cpp's arithmetic everywhere, so every fixture's logits must
 * be its references' bits (all bounds 0, no near-tie exemption). CI runs it
 * at the avx2 table (core_test_parity_cpu_exact). */
static bool cpu_bit_exact(const char *backend)
{
#if defined(__x86_64__)
	const char *ex = getenv("ALICE_CPU_EXACT"), *isa = getenv("ALICE_CPU_ISA");
	return ex && *ex && strcmp(ex, "0") != 0 && strcmp(backend, "cpu") == 0 && !(isa && strcmp(isa, "scalar") == 0);
#else
	(void)backend;
	return false;
#endif
}

void alice_parity_run(const char *name, const struct alice_parity_bound *tb)
{
	const bool bit_exact = cpu_bit_exact(alice_test_backend());
	const float bound = bit_exact ? 0.0f : tb->bound, median_bound = bit_exact ? 0.0f : tb->median;
	const bool verbose = getenv("ALICE_PARITY_VERBOSE") != NULL; /* per-position errors */
	float top1_margin = bound > 0.1f ? bound : 0.1f;
	char err_msg[512];
	struct alice_parity_refs *refs = alice_parity_refs_load(alice_test_fixtures_dir(), name, err_msg, sizeof(err_msg));
	cr_assert_not_null(refs, "%s", err_msg);

	const char *backend = alice_test_backend();
	/* exact types on the cpu backend: no near-tie exemption (its x86 AVX2
	 * and AVX-512 kernels follow llama.cpp's orders, checked on both levels;
	 * the ALICE_CPU_ISA=scalar test level and other ISAs do not) */
	bool exact = false;
#if defined(__x86_64__)
	const char *isa = getenv("ALICE_CPU_ISA");
	exact = tb->cpu_exact && strcmp(backend, "cpu") == 0 && !(isa && strcmp(isa, "scalar") == 0);
#endif
	exact = exact || bit_exact;
	if (exact)
		top1_margin = -1.0f;
	/* the tight pos-0 bound assumes llama.cpp's activation rounding, which
	 * the cpu backend does and backend.h lets other backends skip */
	const float pos0_bound = bit_exact ? 0.0f : strcmp(backend, "cpu") == 0 ? tb->pos0 : tb->bound;
	struct alice_error err = {0};
	if (strcmp(backend, "cpu") != 0) {
		struct alice_backend *be = NULL;
		if (alice_backend_open(backend, NULL, &be, &err) != ALICE_OK) {
			alice_parity_refs_free(refs);
			cr_skip_test("backend %s unavailable here: %s", backend, err.msg);
		}
		alice_backend_close(be);
	}

	char path[4096];
	snprintf(path, sizeof(path), "%s/models/%s.gguf", alice_test_fixtures_dir(), name);
	struct alice_model *m = alice_test_load_model(path, backend); /* asserts, naming the file */
	const int32_t n_vocab = alice_model_n_vocab(m);
	cr_assert_eq(n_vocab, refs->n_vocab, "%s: n_vocab %d, reference %d", name, n_vocab, refs->n_vocab);

	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = 1024;
	cp.n_batch = 512;
	struct alice_context *c = NULL;
	cr_assert_eq(alice_context_create(m, &cp, &c, &err), ALICE_OK, "%s: context: %s", name, err.msg);

	struct tally median_t = {0};
	struct tally tok_t = {0}, top1_t = {0}, logit_t = {0}, full_t = {0}, gen_t = {0}, pos0_t = {0};
	float worst = 0.0f, worst_full = 0.0f;
	const char *worst_where = "";
	char worst_buf[128] = "";
	int gen_full = 0, gen_partial = 0, gen_steps_checked = 0, gen_steps_total = 0;
	float *errs = NULL; /* every prompt position's top-10 error, for the median */
	size_t n_errs = 0, cap_errs = 0;
	float worst_pos0 = 0.0f;

	for (int32_t pi = 0; pi < refs->n_prompts; pi++) {
		const struct alice_ref_prompt *p = &refs->prompts[pi];
		{
			int32_t *got = NULL;
			size_t n_got = 0;
			enum alice_status ts = alice_tokenizer_encode(alice_model_tokenizer(m), p->text, strlen(p->text),
								      p->add_special, p->parse_special, &got, &n_got,
								      &err);
			if (ts != ALICE_OK) {
				note(&tok_t, "%s/%s: tokenize failed: %s", name, p->id, err.msg);
			} else if (n_got != (size_t)p->n_tokens ||
				   memcmp(got, p->tokens, n_got * sizeof(int32_t))) {
				size_t d = 0;
				while (d < n_got && d < (size_t)p->n_tokens && got[d] == p->tokens[d])
					d++;
				note(&tok_t, "%s/%s: %zu tokens, reference %d (first difference at %zu)", name, p->id,
				     n_got, p->n_tokens, d);
			}
			free(got);
		}
		const int32_t n = p->n_tokens;
		int32_t *pos = malloc((size_t)n * sizeof(int32_t));
		int32_t *seq = calloc((size_t)n, sizeof(int32_t));
		bool *want = malloc((size_t)n * sizeof(bool));
		cr_assert(pos && seq && want);
		for (int32_t i = 0; i < n; i++) {
			pos[i] = i;
			want[i] = true;
		}
		alice_context_seq_clear(c, 0);
		struct alice_batch b = {.n_tokens = n, .token = p->tokens, .pos = pos, .seq = seq, .logits = want};
		cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s/%s: decode: %s", name, p->id, err.msg);
		cr_assert_eq(alice_context_n_logits(c), n);
		for (int32_t i = 0; i < n; i++) {
			const float *l = alice_context_logits(c, i);
			const struct alice_ref_top *rt = &p->positions[i];
			float e = top10_err(l, rt, n_vocab);
			if (verbose)
				fprintf(stderr, "  %s/%s pos %d: top-10 error %.5f\n", name, p->id, i, e);
			if (n_errs == cap_errs) {
				cap_errs = cap_errs ? cap_errs * 2 : 1024;
				errs = realloc(errs, cap_errs * sizeof(*errs));
				cr_assert_not_null(errs);
			}
			errs[n_errs++] = e;
			if (i == 0) {
				if (e > worst_pos0)
					worst_pos0 = e;
				if (!(e <= pos0_bound))
					note(&pos0_t, "%s/%s pos 0: top-10 logit error %.4g > %.3g", name, p->id, e,
					     pos0_bound);
			}
			if (e > worst) {
				worst = e;
				snprintf(worst_buf, sizeof(worst_buf), "%s pos %d", p->id, i);
				worst_where = worst_buf;
			}
			if (!(e <= bound))
				note(&logit_t, "%s/%s pos %d: top-10 logit error %.4g > %.3g", name, p->id, i, e, bound);
			int32_t am = argmax(l, n_vocab);
			if (rt->logit[0] - rt->logit[1] > top1_margin && am != rt->id[0])
				note(&top1_t, "%s/%s pos %d: top-1 %d, reference %d (margin %.3f)", name, p->id, i, am,
				     rt->id[0], rt->logit[0] - rt->logit[1]);
		}
		if (p->last_logits_row >= 0) {
			const float *l = alice_context_logits(c, n - 1);
			const float *r = refs->bin + (size_t)p->last_logits_row * (size_t)n_vocab;
			float fe = 0.0f;
			for (int32_t v = 0; v < n_vocab; v++) {
				float e = fabsf(l[v] - r[v]);
				if (isnan(e))
					e = INFINITY;
				if (e > fe)
					fe = e;
			}
			if (fe > worst_full)
				worst_full = fe;
			if (!(fe <= bound))
				note(&full_t, "%s/%s: full last row max error %.4g > %.3g", name, p->id, fe, bound);
		}

		/* greedy continuation, one token per decode */
		int32_t next = argmax(alice_context_logits(c, n - 1), n_vocab);
		bool parted = false;
		gen_steps_total += p->n_gen;
		for (int32_t s = 0; s < p->n_gen; s++) {
			const struct alice_ref_top *rs = &p->gen_steps[s];
			float margin = rs->logit[0] - rs->logit[1];
			if (next != p->gen_tokens[s]) {
				if (margin < bound && !exact) { /* a near-tie: either token is right; stop here */
					parted = true;
					break;
				}
				note(&gen_t, "%s/%s: greedy step %d: %d, reference %d (margin %.3f)", name, p->id, s, next,
				     p->gen_tokens[s], margin);
				parted = true;
				break;
			}
			gen_steps_checked++;
			if (s + 1 == p->n_gen)
				break;
			int32_t ps = n + s, sq = 0;
			bool w = true;
			struct alice_batch gb = {.n_tokens = 1, .token = &next, .pos = &ps, .seq = &sq, .logits = &w};
			cr_assert_eq(alice_context_decode(c, &gb, &err), ALICE_OK, "%s/%s: decode step %d: %s", name,
				     p->id, s, err.msg);
			const float *l = alice_context_logits(c, 0);
			float e = top10_err(l, &p->gen_steps[s + 1], n_vocab);
			if (verbose)
				fprintf(stderr, "  %s/%s gen step %d: top-10 error %.5f\n", name, p->id, s + 1, e);
			if (e > worst) {
				worst = e;
				snprintf(worst_buf, sizeof(worst_buf), "%s gen step %d", p->id, s + 1);
				worst_where = worst_buf;
			}
			if (!(e <= bound))
				note(&logit_t, "%s/%s gen step %d: top-10 logit error %.4g > %.3g", name, p->id, s + 1, e,
				     bound);
			next = argmax(l, n_vocab);
		}
		if (parted)
			gen_partial++;
		else
			gen_full++;
		free(pos);
		free(seq);
		free(want);
	}

	qsort(errs, n_errs, sizeof(*errs), cmp_float);
	float median = n_errs ? errs[n_errs / 2] : 0.0f;
	float p90 = n_errs ? errs[n_errs * 9 / 10] : 0.0f;
	free(errs);
	if (!(median <= median_bound))
		note(&median_t, "%s: median top-10 logit error %.4g > %.3g", name, median, median_bound);
	fprintf(stderr,
		"parity %-18s backend %s: top-10 logit error worst %.5f (%s), median %.5f, p90 %.5f, pos-0 worst %.5f, "
		"full-row %.5f (bounds: any %.3f, median %.3f, pos 0 %.3f); greedy: %d/%d prompts identical for all "
		"24 steps, %d/%d steps compared\n",
		name, backend, worst, worst_where, median, p90, worst_pos0, worst_full, bound, median_bound, pos0_bound,
		gen_full, refs->n_prompts, gen_steps_checked, gen_steps_total);
	struct tally *all[] = {&tok_t, &top1_t, &logit_t, &full_t, &gen_t, &pos0_t, &median_t};
	const char *what[] = {"tokenizer", "top-1", "top-10 logits", "full row", "greedy", "position 0", "median"};
	int total = 0;
	for (int k = 0; k < 7; k++) {
		for (int i = 0; i < all[k]->fails && i < MAX_MSGS; i++)
			fprintf(stderr, "  %s: %s\n", what[k], all[k]->msgs[i]);
		if (all[k]->fails > MAX_MSGS)
			fprintf(stderr, "  %s: ... %d more\n", what[k], all[k]->fails - MAX_MSGS);
		total += all[k]->fails;
	}
	alice_context_free(c);
	alice_model_free(m);
	alice_parity_refs_free(refs);
	cr_expect_eq(tok_t.fails, 0, "%s: %d tokenizer mismatches", name, tok_t.fails);
	cr_expect_eq(top1_t.fails, 0, "%s: %d top-1 mismatches", name, top1_t.fails);
	cr_expect_eq(logit_t.fails, 0, "%s: %d positions over the logit bound %.3f (%s)", name, logit_t.fails, bound,
		     tb->why);
	cr_expect_eq(full_t.fails, 0, "%s: full-row error over the bound", name);
	cr_expect_eq(gen_t.fails, 0, "%s: greedy continuation differs", name);
	cr_expect_eq(pos0_t.fails, 0, "%s: logits at position 0 (no attention mixing) differ", name);
	cr_expect_eq(median_t.fails, 0, "%s: median logit error over the bound", name);
	(void)total;
}
