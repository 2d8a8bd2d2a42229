// ctest-labels: unit;server
/* Speculative decoding in core/engine.c (spec.h) with the bundled
 * tiny-tolstoy Q8_0 as the target and its Q4_0 sibling as the draft:
 * greedy and seeded sampled outputs are token for token those of the plain
 * engine (alone and 4 concurrent), sampled tokens follow the plain
 * distribution (chi-square), grammar requests keep their constraint, a draft
 * with another vocabulary is refused, recurrent models do not speculate. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alice/engine.h"
#include "alice/grammar.h"
#include "alice/model.h"
#include "alice/spec.h"
#include "alice/tokenizer.h"
#include "support/gguf_patch.h"
#include "support/models.h"
#include "support/paths.h"

#define TARGET ALICE_SOURCE_DIR "/models/tiny-tolstoy-Q8_0.gguf"
#define DRAFT ALICE_SHARED_MODELS_DIR "/tiny-tolstoy-Q4_0.gguf"
#define MAX_TOK 64

struct run {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int32_t tokens[MAX_TOK];
	float logprob[MAX_TOK], top_logprob[MAX_TOK]; /* the token's, and the best alternative's */
	int n_tokens;
	char text[2048];
	size_t text_len;
	enum alice_engine_finish finish;
	int32_t n_drafted, n_accepted;
};

static void on_event(const struct alice_engine_event *ev, void *user)
{
	struct run *r = user;
	pthread_mutex_lock(&r->mu);
	if (ev->text_len && r->text_len + ev->text_len < sizeof(r->text)) {
		memcpy(r->text + r->text_len, ev->text, ev->text_len);
		r->text_len += ev->text_len;
		r->text[r->text_len] = '\0';
	}
	if (ev->type == ALICE_ENGINE_EVENT_TOKEN) {
		if (r->n_tokens < MAX_TOK) {
			r->logprob[r->n_tokens] = ev->token.logprob;
			r->top_logprob[r->n_tokens] = ev->n_top > 0 ? ev->top[0].logprob : 1.0f;
			r->tokens[r->n_tokens++] = ev->token.token;
		}
	} else {
		r->finish = ev->finish;
		r->n_drafted = ev->n_drafted;
		r->n_accepted = ev->n_accepted;
		r->done = true;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
}

static void run_init(struct run *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
}

static void run_wait(struct run *r)
{
	pthread_mutex_lock(&r->mu);
	while (!r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

static struct alice_model *target, *draft;
static const struct alice_tokenizer *tok;

static void setup(void)
{
	target = alice_test_load_model(TARGET, "cpu");
	draft = alice_test_load_model(DRAFT, "cpu");
	tok = alice_model_tokenizer(target);
}

static void teardown(void)
{
	alice_model_free(target);
	alice_model_free(draft);
}

static struct alice_engine *engine_new_ctx(uint32_t slots, enum alice_spec_mode mode, uint32_t n_ctx)
{
	struct alice_engine_params p;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	alice_engine_params_default(&p);
	p.n_slots = slots;
	p.n_ctx = n_ctx;
	p.n_batch = 64;
	alice_spec_params_default(&p.spec);
	p.spec.mode = mode;
	p.spec.draft = mode == ALICE_SPEC_DRAFT ? draft : NULL;
	p.spec.n_max = 8;
	p.spec.p_min = 0.0f; /* draft every step: the equality holds whatever is drafted */
	p.spec.ngram_n = 2;
	cr_assert_eq(alice_engine_create(target, &p, &e, &err), ALICE_OK, "%s", err.msg);
	return e;
}

static struct alice_engine *engine_new(uint32_t slots, enum alice_spec_mode mode)
{
	return engine_new_ctx(slots, mode, 256);
}

static const char *prompts[] = {
	"Prince Andrew looked at", "Natasha", "The old count said", "Pierre went to the window and",
	"In the morning the", "Moscow was burning", "The princess", "He said that he",
	"Napoleon", "The soldiers were", "She looked at him and said", "It was a",
	"Rostov", "The count and the countess", "At that moment", "Denisov",
	"The carriage", "Prince Vasili", "When he came in", "The French",
};
#define N_PROMPTS (sizeof(prompts) / sizeof(prompts[0]))

/* tiny-tolstoy's end-of-generation tokens; banning them makes runs last max_tokens */
static const struct alice_logit_bias no_eog[] = {{0, -100.0f}, {2, -100.0f}};

static bool allow_eog; /* the draft's argmax knows no logit bias */

struct samp {
	float temperature;
	int32_t top_k;
	float top_p;
	uint64_t seed;
};

static void submit(struct alice_engine *e, struct run *r, const char *prompt, int32_t max_tokens,
		   const struct samp *sm, struct alice_grammar_constraint *g)
{
	struct alice_engine_request q;
	struct alice_error err = {{0}};
	memset(&q, 0, sizeof(q));
	int32_t *t = NULL;
	size_t n = 0;
	cr_assert_eq(alice_tokenizer_encode(tok, prompt, strlen(prompt), true, true, &t, &n, &err), ALICE_OK);
	q.prompt = t;
	q.n_prompt = (int32_t)n;
	q.max_tokens = max_tokens;
	alice_sampling_params_default(&q.sampling);
	q.sampling.temperature = 0;
	if (sm) {
		q.sampling.temperature = sm->temperature;
		q.sampling.top_k = sm->top_k;
		q.sampling.top_p = sm->top_p;
		q.sampling.seed = sm->seed;
	}
	if (!allow_eog) {
		q.sampling.logit_bias = no_eog;
		q.sampling.n_logit_bias = 2;
	}
	q.sampling.logprobs = true; /* they must be the model's, speculating or not */
	q.sampling.n_probs = 2;
	q.grammar = g;
	q.on_event = on_event;
	q.user = r;
	run_init(r);
	cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_OK, "%s", err.msg);
	free(t);
}

static void expect_same(const struct run *a, const struct run *b, const char *what, size_t i)
{
	cr_assert_eq(a->n_tokens, b->n_tokens, "%s, prompt %zu: %d vs %d tokens", what, i, a->n_tokens, b->n_tokens);
	for (int k = 0; k < a->n_tokens; k++)
		cr_assert_eq(a->tokens[k], b->tokens[k], "%s, prompt %zu ('%s'): token %d is %d, plain %d", what, i,
			     prompts[i], k, a->tokens[k], b->tokens[k]);
	cr_assert_str_eq(a->text, b->text, "%s, prompt %zu", what, i);
	cr_assert_arr_eq(a->logprob, b->logprob, sizeof(float) * (size_t)a->n_tokens, "%s, prompt %zu: logprobs", what, i);
	cr_assert_arr_eq(a->top_logprob, b->top_logprob, sizeof(float) * (size_t)a->n_tokens,
			 "%s, prompt %zu: top logprobs", what, i);
}

#define GREEDY_TOK 40

/* plain reference, then `mode` alone (1 slot) and with 4 requests in flight */
static void check_equal(enum alice_spec_mode mode, const struct samp *sm)
{
	static struct run plain[N_PROMPTS], alone[N_PROMPTS], together[N_PROMPTS];
	struct samp s[N_PROMPTS];
	for (size_t i = 0; i < N_PROMPTS; i++) {
		if (sm) {
			s[i] = *sm;
			s[i].seed = sm->seed + i;
		}
	}
	struct alice_engine *e = engine_new(1, ALICE_SPEC_NONE);
	for (size_t i = 0; i < N_PROMPTS; i++) {
		submit(e, &plain[i], prompts[i], GREEDY_TOK, sm ? &s[i] : NULL, NULL);
		run_wait(&plain[i]);
		cr_assert_eq(plain[i].n_drafted, 0);
	}
	alice_engine_free(e);
	int64_t drafted = 0, accepted = 0;
	e = engine_new(1, mode);
	for (size_t i = 0; i < N_PROMPTS; i++) {
		submit(e, &alone[i], prompts[i], GREEDY_TOK, sm ? &s[i] : NULL, NULL);
		run_wait(&alone[i]);
		expect_same(&alone[i], &plain[i], "alone", i);
		drafted += alone[i].n_drafted;
		accepted += alone[i].n_accepted;
	}
	alice_engine_free(e);
	e = engine_new(4, mode);
	for (size_t i = 0; i < N_PROMPTS; i += 4) {
		for (size_t j = i; j < i + 4 && j < N_PROMPTS; j++)
			submit(e, &together[j], prompts[j], GREEDY_TOK, sm ? &s[j] : NULL, NULL);
		for (size_t j = i; j < i + 4 && j < N_PROMPTS; j++) {
			run_wait(&together[j]);
			expect_same(&together[j], &plain[j], "4 concurrent", j);
		}
	}
	alice_engine_free(e);
	/* the comparison means something only if drafts were verified and
	 * both accepted and rejected */
	cr_assert_gt(accepted, 0, "no drafted token was accepted (%lld drafted)", (long long)drafted);
	cr_assert_lt(accepted, drafted, "every drafted token was accepted (%lld)", (long long)drafted);
	fprintf(stderr, "spec %s%s: %lld drafted, %lld accepted (%.1f%%)\n", mode == ALICE_SPEC_DRAFT ? "draft" : "ngram",
		sm ? " sampled" : " greedy", (long long)drafted, (long long)accepted,
		drafted ? 100.0 * (double)accepted / (double)drafted : 0.0);
}

TestSuite(spec, .init = setup, .fini = teardown, .timeout = 600);

Test(spec, greedy_draft_model_equals_plain)
{
	check_equal(ALICE_SPEC_DRAFT, NULL);
}

Test(spec, greedy_ngram_equals_plain)
{
	check_equal(ALICE_SPEC_NGRAM, NULL);
}

/* seeded sampling: every seed gives the plain engine's tokens */
Test(spec, sampled_draft_model_equals_plain)
{
	struct samp sm = {0.8f, 40, 0.95f, 1000};
	check_equal(ALICE_SPEC_DRAFT, &sm);
}

Test(spec, sampled_ngram_equals_plain)
{
	struct samp sm = {0.5f, 0, 1.0f, 2000}; /* warm enough to differ by seed, cool enough to repeat itself */
	check_equal(ALICE_SPEC_NGRAM, &sm);
}

/* The distribution of sampled tokens: one prompt, many seeds, a small top-k
 * window; per generated position, the counts of each token with and
 * without speculation go into a chi-square test of homogeneity (categories
 * with fewer than 10 expected draws pooled). The plain and speculative runs
 * use different seeds, so the test compares distributions, not sequences.
 * Deterministic (fixed seeds); an engine that accepted every draft fails
 * it by far (checked when this test was written). */
#define DIST_SEEDS 300
#define DIST_POS 6
#define DIST_TOK 12
/* repeats itself, so prompt lookup drafts too */
#define DIST_PROMPT "The old count said: the count, the count, the count, the count, the count"
static void histogram(struct alice_engine *e, uint64_t seed0, int32_t (*out)[DIST_TOK], int64_t *drafted)
{
	static struct run r[4];
	struct samp sm = {1.0f, 4, 1.0f, 0};
	for (int i = 0; i < DIST_SEEDS; i += 4) {
		for (int j = 0; j < 4; j++) {
			sm.seed = seed0 + (uint64_t)(i + j);
			submit(e, &r[j], DIST_PROMPT, DIST_TOK, &sm, NULL);
		}
		for (int j = 0; j < 4; j++) {
			run_wait(&r[j]);
			cr_assert_eq(r[j].n_tokens, DIST_TOK);
			memcpy(out[i + j], r[j].tokens, sizeof(out[0]));
			*drafted += r[j].n_drafted;
		}
	}
}

/* P(chi2_df > x) < 0.001 critical value, Wilson-Hilferty */
static double chi2_crit(int df)
{
	double z = 3.0902, h = 2.0 / (9.0 * df);
	return df * pow(1.0 - h + z * sqrt(h), 3);
}

struct cat {
	int32_t tok;
	int a, b;
};

static double chi2_position(int32_t (*a)[DIST_TOK], int32_t (*b)[DIST_TOK], int pos, int *df)
{
	struct cat c[2 * DIST_SEEDS];
	int n = 0;
	for (int s = 0; s < 2 * DIST_SEEDS; s++) {
		int32_t t = s < DIST_SEEDS ? a[s][pos] : b[s - DIST_SEEDS][pos];
		int k = 0;
		while (k < n && c[k].tok != t)
			k++;
		if (k == n)
			c[n++] = (struct cat){t, 0, 0};
		if (s < DIST_SEEDS)
			c[k].a++;
		else
			c[k].b++;
	}
	/* pool categories expected below 10 per sample into one */
	struct cat pooled[2 * DIST_SEEDS + 1];
	int m = 0;
	struct cat rest = {-1, 0, 0};
	for (int k = 0; k < n; k++) {
		if ((c[k].a + c[k].b) / 2.0 < 10.0) {
			rest.a += c[k].a;
			rest.b += c[k].b;
		} else {
			pooled[m++] = c[k];
		}
	}
	if (rest.a + rest.b > 0)
		pooled[m++] = rest;
	double x = 0;
	for (int k = 0; k < m; k++) {
		double e = (pooled[k].a + pooled[k].b) / 2.0; /* equal sample sizes */
		x += (pooled[k].a - e) * (pooled[k].a - e) / e + (pooled[k].b - e) * (pooled[k].b - e) / e;
	}
	*df = m - 1;
	return x;
}

static void check_distribution(enum alice_spec_mode mode)
{
	static int32_t plain[DIST_SEEDS][DIST_TOK], spec[DIST_SEEDS][DIST_TOK];
	int64_t d0 = 0, d1 = 0;
	struct alice_engine *e = engine_new(4, ALICE_SPEC_NONE);
	histogram(e, 1, plain, &d0);
	alice_engine_free(e);
	e = engine_new(4, mode);
	histogram(e, 100001, spec, &d1);
	alice_engine_free(e);
	cr_assert_gt(d1, DIST_SEEDS, "speculation drafted only %lld tokens", (long long)d1);
	double x = 0;
	int df = 0;
	for (int pos = 1; pos <= DIST_POS; pos++) {
		int d;
		x += chi2_position(plain, spec, pos, &d);
		df += d;
	}
	cr_assert_gt(df, 0);
	double crit = chi2_crit(df);
	fprintf(stderr, "spec %s distribution: chi2 %.1f, df %d, critical (p 0.001) %.1f\n",
		mode == ALICE_SPEC_DRAFT ? "draft" : "ngram", x, df, crit);
	cr_expect_lt(x, crit, "sampled tokens with speculation do not follow the plain distribution: chi2 %.1f > %.1f (df %d)",
		     x, crit, df);
}

Test(spec, sampled_distribution_draft_model)
{
	check_distribution(ALICE_SPEC_DRAFT);
}

Test(spec, sampled_distribution_ngram)
{
	check_distribution(ALICE_SPEC_NGRAM);
}

/* A grammar constrains drafted and verified tokens alike: the same text as
 * without speculation, which the grammar allows. */
Test(spec, grammar_with_draft)
{
	static const char gbnf[] = "root ::= (\"the \" | \"count \" | \"said \" | [a-z]+ \" \")+";
	struct alice_error err = {{0}};
	struct alice_grammar *g = NULL;
	struct alice_grammar_vocab *v = NULL;
	cr_assert_eq(alice_grammar_parse(gbnf, sizeof(gbnf) - 1, &g, &err, NULL), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_grammar_vocab_from_tokenizer(tok, &v, &err), ALICE_OK, "%s", err.msg);
	static struct run r[2];
	for (int k = 0; k < 2; k++) {
		struct alice_engine *e = engine_new(1, k ? ALICE_SPEC_DRAFT : ALICE_SPEC_NONE);
		struct alice_grammar_constraint *c = NULL;
		cr_assert_eq(alice_grammar_constraint_create(g, v, tok, &c, &err), ALICE_OK, "%s", err.msg);
		submit(e, &r[k], "The old count said", 30, NULL, c);
		run_wait(&r[k]);
		alice_engine_free(e);
	}
	cr_assert_str_eq(r[1].text, r[0].text);
	cr_assert_gt(r[1].n_drafted, 0);
	for (size_t i = 0; i < r[1].text_len; i++)
		cr_assert((r[1].text[i] >= 'a' && r[1].text[i] <= 'z') || r[1].text[i] == ' ', "'%s'", r[1].text);
	alice_grammar_free(g);
	alice_grammar_vocab_free(v);
}

/* A model drafting for itself computes the target's K/V bit for bit (the
 * prompt in the target's prefill chunks, later tokens as one-row steps),
 * so every drafted token is accepted: the upper bound the machinery
 * allows. Prompts longer than a prefill chunk (64 here), one slot, so
 * later requests reuse a cached prefix in both models. */
Test(spec, self_draft_accepts_everything)
{
	struct alice_model *saved = draft;
	draft = target;
	struct alice_engine *e = engine_new_ctx(1, ALICE_SPEC_DRAFT, 512);
	draft = saved;
	char long_prompt[2048] = "";
	for (int i = 0; i < 12; i++)
		strcat(long_prompt, "Prince Andrew looked at the old count and said that he ");
	const char *ps[] = {long_prompt, "Natasha", long_prompt, "The old count said"};
	static struct run r[4];
	int64_t drafted = 0;
	allow_eog = true;
	for (int i = 0; i < 4; i++) {
		submit(e, &r[i], ps[i], 48, NULL, NULL);
		run_wait(&r[i]);
		drafted += r[i].n_drafted;
		if (r[i].n_tokens == 48) /* ran to its length: every draft was used */
			cr_expect_eq(r[i].n_accepted, r[i].n_drafted, "request %d: %d of %d drafted tokens accepted", i,
				     r[i].n_accepted, r[i].n_drafted);
		else /* it ended on an end-of-generation token: only the drafts past it go unused */
			cr_expect_leq(r[i].n_drafted - r[i].n_accepted, 8, "request %d: %d of %d drafted tokens accepted",
				      i, r[i].n_accepted, r[i].n_drafted);
	}
	allow_eog = false;
	alice_engine_free(e);
	cr_assert_gt(drafted, 40, "only %lld tokens drafted", (long long)drafted);
}

/* speculative: false (no_spec) drafts nothing */
Test(spec, per_request_off)
{
	struct alice_engine *e = engine_new(1, ALICE_SPEC_DRAFT);
	static struct run r;
	struct alice_engine_request q;
	struct alice_error err = {{0}};
	memset(&q, 0, sizeof(q));
	int32_t *t = NULL;
	size_t n = 0;
	cr_assert_eq(alice_tokenizer_encode(tok, "Natasha", 7, true, true, &t, &n, &err), ALICE_OK);
	q.prompt = t;
	q.n_prompt = (int32_t)n;
	q.max_tokens = 20;
	alice_sampling_params_default(&q.sampling);
	q.sampling.temperature = 0;
	q.no_spec = true;
	q.on_event = on_event;
	q.user = &r;
	run_init(&r);
	cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_OK, "%s", err.msg);
	free(t);
	run_wait(&r);
	cr_assert_eq(r.n_drafted, 0);
	struct alice_engine_stats st;
	alice_engine_stats(e, &st);
	cr_assert_eq(st.draft_tokens, 0);
	alice_engine_free(e);
}

/* A draft must share the vocabulary: another tokenizer, or the same one
 * with another special id, is refused naming both files. */
Test(spec, draft_with_other_vocab_refused)
{
	struct alice_error err = {{0}};
	cr_assert_eq(alice_spec_check_vocab(target, TARGET, draft, DRAFT, &err), ALICE_OK, "%s", err.msg);
	char other[4096];
	snprintf(other, sizeof other, "%s/models/llama-spm-Q8_0.gguf", alice_test_fixtures_dir());
	struct alice_model *m = alice_test_load_model(other, "cpu");
	cr_assert_eq(alice_spec_check_vocab(target, TARGET, m, other, &err), ALICE_ERR_INVALID);
	cr_assert(strstr(err.msg, other) && strstr(err.msg, TARGET), "%s", err.msg);
	alice_model_free(m);

	char patched[] = "/tmp/alice-spec-eos-XXXXXX";
	int fd = mkstemp(patched);
	cr_assert(fd >= 0);
	struct alice_gguf_patch p = {0};
	p.set_u32_key = "tokenizer.ggml.eos_token_id";
	p.set_u32_val = 5;
	alice_test_write_patched_gguf(DRAFT, &p, patched);
	m = alice_test_load_model(patched, "cpu");
	cr_assert_eq(alice_spec_check_vocab(target, TARGET, m, patched, &err), ALICE_ERR_INVALID);
	cr_assert(strstr(err.msg, "EOS") && strstr(err.msg, patched), "%s", err.msg);
	alice_model_free(m);
	unlink(patched);
}

/* The qwen35 hybrid's recurrent state cannot be rewound: the engine runs
 * without speculation (logged) and answers as usual. */
Test(spec, recurrent_model_does_not_speculate)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/models/qwen35-F16.gguf", alice_test_fixtures_dir());
	struct alice_model *m = alice_test_load_model(path, "cpu");
	struct alice_engine_params p;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	alice_engine_params_default(&p);
	p.n_slots = 1;
	p.n_ctx = 128;
	alice_spec_params_default(&p.spec);
	p.spec.mode = ALICE_SPEC_NGRAM;
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_OK, "%s", err.msg);
	static struct run r;
	int32_t prompt[12];
	for (int i = 0; i < 12; i++)
		prompt[i] = 100 + (i % 3); /* repeats: n-gram lookup would find drafts */
	struct alice_engine_request q;
	memset(&q, 0, sizeof(q));
	q.prompt = prompt;
	q.n_prompt = 12;
	q.max_tokens = 16;
	alice_sampling_params_default(&q.sampling);
	q.sampling.temperature = 0;
	q.on_event = on_event;
	q.user = &r;
	run_init(&r);
	cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_OK, "%s", err.msg);
	run_wait(&r);
	cr_assert_neq(r.finish, ALICE_ENGINE_FINISH_ERROR);
	cr_assert_eq(r.n_drafted, 0);
	alice_engine_free(e);
	alice_model_free(m);
}

/* bad speculation settings are refused by name */
Test(spec, bad_params_refused)
{
	struct alice_spec_params p;
	struct alice_error err = {{0}};
	alice_spec_params_default(&p);
	p.mode = ALICE_SPEC_NGRAM;
	p.n_max = 33;
	cr_assert_eq(alice_spec_params_check(&p, &err), ALICE_ERR_INVALID);
	cr_assert(strstr(err.msg, "draft-max"), "%s", err.msg);
	alice_spec_params_default(&p);
	p.mode = ALICE_SPEC_DRAFT; /* no draft model */
	cr_assert_eq(alice_spec_params_check(&p, &err), ALICE_ERR_INVALID);
	alice_spec_params_default(&p);
	p.p_min = 1.5f;
	cr_assert_eq(alice_spec_params_check(&p, &err), ALICE_ERR_INVALID);
	cr_assert(strstr(err.msg, "draft-p-min"), "%s", err.msg);
}

/* prompt lookup: the latest earlier occurrence of the last n tokens */
Test(spec, ngram_lookup)
{
	int32_t ctx[] = {1, 2, 3, 4, 9, 2, 3, 5, 6, 7, 2, 3};
	int32_t out[8];
	int32_t k = alice_spec_ngram_draft(ctx, 12, 2, 3, out);
	cr_assert_eq(k, 3);
	cr_assert(out[0] == 5 && out[1] == 6 && out[2] == 7);
	cr_assert_eq(alice_spec_ngram_draft(ctx, 12, 3, 4, out), 0); /* 7 2 3 never occurred before */
	cr_assert_eq(alice_spec_ngram_draft(ctx, 2, 2, 4, out), 0);
	k = alice_spec_ngram_draft(ctx, 12, 1, 8, out); /* last "3": after 2 3 at 5..6 */
	cr_assert_eq(k, 5);
	cr_assert_eq(out[0], 5);
}

/* The edges: a request that runs until its slot's context is full (drafts
 * must stop at the last position), and the same prompt again on the same
 * slot (the prefix cache keeps only accepted tokens' KV), give the plain
 * tokens. */
Test(spec, context_full_and_prefix_reuse)
{
	static struct run plain[3], spec[3];
	for (int k = 0; k < 2; k++) {
		for (int m = 0; m < 2; m++) {
			struct alice_engine *e = engine_new_ctx(1, m ? (k ? ALICE_SPEC_NGRAM : ALICE_SPEC_DRAFT)
								     : ALICE_SPEC_NONE, 48);
			struct run *r = m ? spec : plain;
			for (int i = 0; i < 3; i++) { /* the same prompt three times: cached prefix */
				submit(e, &r[i], "The old count said", -1, NULL, NULL);
				run_wait(&r[i]);
				cr_assert_eq(r[i].finish, ALICE_ENGINE_FINISH_LENGTH);
			}
			alice_engine_free(e);
		}
		for (int i = 0; i < 3; i++) {
			cr_assert_eq(spec[i].n_tokens, plain[i].n_tokens, "run %d: %d vs %d tokens", i, spec[i].n_tokens,
				     plain[i].n_tokens);
			cr_assert_arr_eq(spec[i].tokens, plain[i].tokens, sizeof(int32_t) * (size_t)plain[i].n_tokens,
					 "%s, run %d", k ? "ngram" : "draft", i);
		}
		cr_assert_gt(spec[0].n_accepted, 0, "%s: nothing accepted", k ? "ngram" : "draft");
	}
}
