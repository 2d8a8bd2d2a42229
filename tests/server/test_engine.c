// ctest-labels: unit;server
/* core/engine.c with the real bundled model (tiny-tolstoy, CPU backend):
 * batching must not change greedy tokens, slots must not leak state, cancel,
 * queue limit, stop strings, max_tokens, request validation. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/engine.h"
#include "alice/grammar.h"
#include "alice/model.h"
#include "alice/tokenizer.h"
#include "support/models.h"

#define MODEL_PATH ALICE_SOURCE_DIR "/models/tiny-tolstoy-Q8_0.gguf"
#define MAX_TOK 600

/* tiny-tolstoy's end-of-generation tokens; banning them makes runs last max_tokens */
static const struct alice_logit_bias no_eog[] = {{0, -100.0f}, {2, -100.0f}};

struct run {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int32_t tokens[MAX_TOK];
	float logprob[MAX_TOK];   /* the chosen token's (logprobs requests) */
	float top_lp[MAX_TOK][3]; /* the first 3 alternatives' */
	int32_t top_tok[MAX_TOK][3];
	int n_tokens;
	char text[8192];
	size_t text_len;
	enum alice_engine_finish finish;
	int32_t stop_index; /* DONE: which stop string ended it */
	int32_t n_completion, n_prompt;
	int n_done_events;
	struct alice_engine *engine; /* for cancel-after-first-token */
	uint64_t id;
	bool cancel_after_first;
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
			for (int k = 0; k < 3; k++) {
				r->top_lp[r->n_tokens][k] = k < ev->n_top ? ev->top[k].logprob : 0.0f;
				r->top_tok[r->n_tokens][k] = k < ev->n_top ? ev->top[k].token : -1;
			}
			r->tokens[r->n_tokens++] = ev->token.token;
		}
		if (r->cancel_after_first && r->n_tokens == 1)
			alice_engine_cancel(r->engine, ev->id); /* allowed from a callback */
	} else {
		r->finish = ev->finish;
		r->stop_index = ev->stop_index;
		r->n_completion = ev->n_completion;
		r->n_prompt = ev->n_prompt;
		r->n_done_events++;
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

/* Whether the test backend has the device sampling ops beyond TOPK (the
 * cpu and cuda backends; not vulkan) */
static bool backend_draws(void)
{
	const char *be = getenv("ALICE_TEST_BACKEND");
	return !(be && strcmp(be, "vulkan") == 0);
}

static struct alice_model *model;
static const struct alice_tokenizer *tok;

static void setup(void)
{
	/* ALICE_TEST_BACKEND: the same tests on a GPU backend (the device scripts) */
	const char *be = getenv("ALICE_TEST_BACKEND");
	model = alice_test_load_model(MODEL_PATH, be && *be ? be : "cpu");
	tok = alice_model_tokenizer(model);
}

static void teardown(void)
{
	alice_model_free(model);
	model = NULL;
}

static struct alice_engine *engine_new(uint32_t slots, uint32_t queue, uint32_t n_batch)
{
	struct alice_engine_params p;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	alice_engine_params_default(&p);
	p.n_slots = slots;
	p.max_queue = queue;
	p.n_batch = n_batch;
	p.n_ctx = 512;
	cr_assert_eq(alice_engine_create(model, &p, &e, &err), ALICE_OK, "%s", err.msg);
	return e;
}

static int32_t *encode(const char *text, size_t *n)
{
	int32_t *t = NULL;
	*n = 0;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_tokenizer_encode(tok, text, strlen(text), true, true, &t, n, &err), ALICE_OK, "%s", err.msg);
	return t;
}

/* A greedy request for prompt reporting to r; the caller frees q->prompt. */
static void request_init(struct alice_engine_request *q, struct run *r, const char *prompt, int32_t max_tokens)
{
	size_t n;
	memset(q, 0, sizeof(*q));
	q->prompt = encode(prompt, &n);
	q->n_prompt = (int32_t)n;
	q->max_tokens = max_tokens;
	alice_sampling_params_default(&q->sampling);
	q->sampling.temperature = 0;
	q->on_event = on_event;
	q->user = r;
}

static enum alice_status submit(struct alice_engine *e, struct run *r, const char *prompt, int32_t max_tokens,
				const char *const *stop, size_t n_stop, bool ban_eog)
{
	struct alice_engine_request q;
	struct alice_error err = {{0}};
	request_init(&q, r, prompt, max_tokens);
	if (ban_eog) {
		q.sampling.logit_bias = no_eog;
		q.sampling.n_logit_bias = 2;
	}
	q.stop = stop;
	q.n_stop = n_stop;
	r->engine = e;
	enum alice_status st = alice_engine_submit(e, &q, &r->id, &err);
	free((int32_t *)q.prompt);
	return st;
}

static const char *prompts[] = {
	"Prince Andrew looked at", "Natasha", "The old count said", "Pierre went to the window and",
	"In the morning the", "Moscow was burning", "<|im_start|>user\nWho is Pierre?<|im_end|>\n<|im_start|>assistant\n",
};
#define N_PROMPTS (sizeof(prompts) / sizeof(prompts[0]))

TestSuite(engine, .init = setup, .fini = teardown, .timeout = 600);

Test(engine, batching_does_not_change_greedy_tokens)
{
	static struct run alone[N_PROMPTS], together[N_PROMPTS];
	/* one slot: each request alone, one after the other (slot reuse) */
	struct alice_engine *e1 = engine_new(1, 16, 512);
	for (size_t i = 0; i < N_PROMPTS; i++) {
		run_init(&alone[i]);
		cr_assert_eq(submit(e1, &alone[i], prompts[i], 24 + (int)i * 3, NULL, 0, true), ALICE_OK);
		run_wait(&alone[i]);
		cr_assert_eq(alone[i].finish, ALICE_ENGINE_FINISH_LENGTH);
		cr_assert_eq(alone[i].n_tokens, 24 + (int)i * 3);
	}
	alice_engine_free(e1);
	/* 3 slots, small batch: prefill chunks mixed with decode rows, queueing */
	struct alice_engine *e3 = engine_new(3, 16, 8);
	for (size_t i = 0; i < N_PROMPTS; i++) {
		run_init(&together[i]);
		cr_assert_eq(submit(e3, &together[i], prompts[i], 24 + (int)i * 3, NULL, 0, true), ALICE_OK);
	}
	for (size_t i = 0; i < N_PROMPTS; i++) {
		run_wait(&together[i]);
		cr_assert_eq(together[i].n_tokens, alone[i].n_tokens, "prompt %zu", i);
		for (int k = 0; k < alone[i].n_tokens; k++)
			cr_assert_eq(together[i].tokens[k], alone[i].tokens[k],
				     "prompt %zu ('%s'): token %d differs batched (%d) vs alone (%d)", i, prompts[i], k,
				     together[i].tokens[k], alone[i].tokens[k]);
		cr_assert_str_eq(together[i].text, alone[i].text);
		cr_assert_eq(together[i].n_done_events, 1);
	}
	alice_engine_free(e3);
}

Test(engine, cancel_frees_the_slot)
{
	struct alice_engine *e = engine_new(1, 4, 512);
	static struct run r, after;
	run_init(&r);
	r.cancel_after_first = true;
	cr_assert_eq(submit(e, &r, "Natasha", 400, NULL, 0, true), ALICE_OK);
	run_wait(&r);
	cr_assert_eq(r.finish, ALICE_ENGINE_FINISH_CANCELLED);
	cr_assert_lt(r.n_completion, 5, "cancelled after %d tokens", r.n_completion);
	struct alice_engine_stats st;
	alice_engine_stats(e, &st);
	cr_assert_eq(st.slots_busy, 0);
	/* the slot serves the next request normally */
	run_init(&after);
	cr_assert_eq(submit(e, &after, "Natasha", 5, NULL, 0, true), ALICE_OK);
	run_wait(&after);
	cr_assert_eq(after.finish, ALICE_ENGINE_FINISH_LENGTH);
	cr_assert_eq(after.n_tokens, 5);
	alice_engine_free(e);
}

Test(engine, queue_limit_and_shutdown_cancels)
{
	struct alice_engine *e = engine_new(1, 1, 512);
	static struct run r[3];
	for (int i = 0; i < 3; i++)
		run_init(&r[i]);
	cr_assert_eq(submit(e, &r[0], "Natasha", 450, NULL, 0, true), ALICE_OK);
	cr_assert_eq(submit(e, &r[1], "Natasha", 450, NULL, 0, true), ALICE_OK);
	/* one running (or about to), one waiting: the next is refused */
	enum alice_status st = submit(e, &r[2], "Natasha", 450, NULL, 0, true);
	cr_assert_eq(st, ALICE_ERR_RANGE, "third request: %s", alice_status_str(st));
	alice_engine_free(e); /* cancels both, each gets exactly one DONE */
	cr_assert(r[0].done && r[1].done && !r[2].done);
	cr_assert_eq(r[0].n_done_events, 1);
	cr_assert_eq(r[1].finish, ALICE_ENGINE_FINISH_CANCELLED);
}

Test(engine, stop_strings_and_max_tokens)
{
	struct alice_engine *e = engine_new(2, 4, 512);
	static struct run full, cut;
	run_init(&full);
	cr_assert_eq(submit(e, &full, "Prince Andrew looked at", 30, NULL, 0, true), ALICE_OK);
	run_wait(&full);
	cr_assert_eq(full.finish, ALICE_ENGINE_FINISH_LENGTH);
	cr_assert_eq(full.n_completion, 30);
	cr_assert_eq(full.stop_index, -1, "no stop string ended it");
	cr_assert_gt(full.text_len, 20);
	/* a stop string from the middle of the text (spanning token pieces) */
	char stop[8];
	size_t at = full.text_len / 2;
	memcpy(stop, full.text + at, 5);
	stop[5] = '\0';
	const char *stops[] = {"\xc2\xa7never", stop};
	run_init(&cut);
	cr_assert_eq(submit(e, &cut, "Prince Andrew looked at", 30, stops, 2, true), ALICE_OK);
	run_wait(&cut);
	cr_assert_eq(cut.finish, ALICE_ENGINE_FINISH_STOP);
	cr_assert_eq(cut.stop_index, 1, "the event names the stop string that matched");
	const char *first = strstr(full.text, stop);
	cr_assert_not_null(first);
	cr_assert_eq(cut.text_len, (size_t)(first - full.text), "got '%s' for stop '%s' in '%s'", cut.text, stop,
		     full.text);
	cr_assert(memcmp(cut.text, full.text, cut.text_len) == 0);
	alice_engine_free(e);
}

Test(engine, rejects_bad_requests)
{
	struct alice_engine *e = engine_new(1, 4, 512);
	static struct run r;
	run_init(&r);
	struct alice_engine_request q = {0};
	struct alice_error err = {{0}};
	int32_t big[600];
	for (int i = 0; i < 600; i++)
		big[i] = 100;
	alice_sampling_params_default(&q.sampling);
	q.on_event = on_event;
	q.user = &r;
	q.prompt = big;
	q.n_prompt = 0;
	cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_ERR_INVALID);
	q.n_prompt = 600; /* beyond the slot's 512 positions */
	cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_ERR_INVALID);
	cr_assert(strstr(err.msg, "600") && strstr(err.msg, "512"), "%s", err.msg);
	big[3] = 99999;
	q.n_prompt = 10;
	cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_ERR_INVALID);
	alice_engine_free(e);
	cr_assert(!r.done, "a refused request never gets events");
}

/* ignore_eos: a request whose every step picks an end-of-generation token
 * (a +100 bias on EOS) ends at once without it, and runs to max_tokens with
 * it, the EOG tokens reported as ordinary tokens. */
Test(engine, ignore_eos_generates_past_eog)
{
	int32_t eos = alice_tokenizer_eos(tok);
	cr_assert(eos >= 0 && alice_tokenizer_is_eog(tok, eos));
	const struct alice_logit_bias force_eos[] = {{eos, 100.0f}};
	struct alice_engine *e = engine_new(2, 4, 512);
	static struct run stop, go;
	for (int pass = 0; pass < 2; pass++) {
		struct run *r = pass ? &go : &stop;
		run_init(r);
		struct alice_engine_request q;
		struct alice_error err = {{0}};
		request_init(&q, r, "Natasha", 6);
		q.sampling.logit_bias = force_eos;
		q.sampling.n_logit_bias = 1;
		q.ignore_eos = pass == 1;
		cr_assert_eq(alice_engine_submit(e, &q, &r->id, &err), ALICE_OK, "%s", err.msg);
		free((int32_t *)q.prompt);
		run_wait(r);
	}
	cr_assert_eq(stop.finish, ALICE_ENGINE_FINISH_STOP);
	cr_assert_eq(stop.n_tokens, 0);
	cr_assert_eq(stop.n_completion, 1);
	cr_assert_eq(go.finish, ALICE_ENGINE_FINISH_LENGTH);
	cr_assert_eq(go.n_tokens, 6);
	cr_assert_eq(go.n_completion, 6);
	for (int i = 0; i < go.n_tokens; i++)
		cr_assert_eq(go.tokens[i], eos, "token %d", i);
	alice_engine_free(e);
}

/* A core grammar constraint handed straight to the engine: the text is what
 * the grammar allows, and the request ends when nothing more may follow. */
Test(engine, grammar_constraint)
{
	static const char gbnf[] = "root ::= [0-9] [0-9] [0-9] \"!\"";
	struct alice_error err = {{0}};
	struct alice_grammar *g = NULL;
	struct alice_grammar_vocab *v = NULL;
	cr_assert_eq(alice_grammar_parse(gbnf, sizeof(gbnf) - 1, &g, &err, NULL), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_grammar_vocab_from_tokenizer(tok, &v, &err), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_grammar_vocab_size(v), (size_t)alice_tokenizer_n_vocab(tok));
	struct alice_engine *e = engine_new(1, 4, 512);
	static struct run r;
	run_init(&r);
	struct alice_engine_request q;
	request_init(&q, &r, "Natasha", 20);
	cr_assert_eq(alice_grammar_constraint_create(g, v, tok, &q.grammar, &err), ALICE_OK, "%s", err.msg);
	alice_grammar_free(g); /* the constraint holds its own reference */
	cr_assert_eq(alice_engine_submit(e, &q, &r.id, &err), ALICE_OK, "%s", err.msg);
	free((int32_t *)q.prompt);
	run_wait(&r);
	cr_assert_eq(r.finish, ALICE_ENGINE_FINISH_STOP);
	cr_assert_eq(r.text_len, 4, "'%s'", r.text);
	for (int i = 0; i < 3; i++)
		cr_assert(r.text[i] >= '0' && r.text[i] <= '9', "'%s'", r.text);
	cr_assert_eq(r.text[3], '!');
	alice_engine_free(e); /* frees the constraint */
	alice_grammar_vocab_free(v);
}

/* The constraint on its own, as the CLI drives it: masks speak token ids,
 * accept advances by a token's bytes, and misuse is an error, not a crash. */
Test(engine, grammar_constraint_api)
{
	static const char gbnf[] = "root ::= \"ab\"";
	struct alice_error err = {{0}};
	struct alice_grammar *g = NULL;
	struct alice_grammar_vocab *v = NULL, *small = NULL;
	struct alice_grammar_constraint *c = NULL;
	cr_assert_eq(alice_grammar_parse(gbnf, sizeof(gbnf) - 1, &g, &err, NULL), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_grammar_vocab_from_tokenizer(tok, &v, &err), ALICE_OK, "%s", err.msg);
	const char *piece = "a";
	size_t len = 1;
	cr_assert_eq(alice_grammar_vocab_build(&piece, &len, NULL, 1, &small, &err), ALICE_OK);
	cr_expect_eq(alice_grammar_constraint_create(g, small, tok, &c, &err), ALICE_ERR_INVALID); /* not tok's trie */
	cr_expect_null(c);
	cr_assert_eq(alice_grammar_constraint_create(g, v, tok, &c, &err), ALICE_OK, "%s", err.msg);
	alice_grammar_free(g);
	int32_t n_vocab = alice_tokenizer_n_vocab(tok);
	uint8_t *mask = malloc((size_t)n_vocab);
	cr_assert_not_null(mask);
	cr_expect_eq(alice_grammar_constraint_mask(c, mask, n_vocab - 1, &err), ALICE_ERR_INVALID);
	cr_assert_eq(alice_grammar_constraint_mask(c, mask, n_vocab, &err), ALICE_OK, "%s", err.msg);
	int32_t a = alice_tokenizer_find(tok, "a", 1), b = alice_tokenizer_find(tok, "b", 1);
	cr_assert(a >= 0 && b >= 0, "tiny-tolstoy has the tokens 'a' and 'b'");
	cr_expect(mask[a] && !mask[b]);
	for (int32_t t = 0; t < n_vocab; t++)
		if (alice_tokenizer_is_eog(tok, t))
			cr_expect(!mask[t], "EOG token %d allowed before the grammar can end", t);
	bool must_end = true;
	cr_expect_eq(alice_grammar_constraint_accept(c, b, &must_end, &err), ALICE_ERR_INVALID);
	cr_expect_eq(alice_grammar_constraint_accept(c, n_vocab + 5, &must_end, &err), ALICE_ERR_RANGE);
	cr_assert_eq(alice_grammar_constraint_accept(c, a, &must_end, &err), ALICE_OK, "%s", err.msg);
	cr_expect(!must_end);
	cr_assert_eq(alice_grammar_constraint_accept(c, b, &must_end, &err), ALICE_OK, "%s", err.msg);
	cr_expect(must_end);
	free(mask);
	alice_grammar_constraint_free(c);
	alice_grammar_constraint_free(NULL);
	alice_grammar_vocab_free(small);
	alice_grammar_vocab_free(v);
}

/* Sampling on the backend (TOPK for greedy and top-k rows, SAMPLE_TEMP for
 * temperature-only rows; the default where the backend has the ops) picks
 * exactly the tokens of sampling whole rows on the host (ALICE_TOPK=0), for
 * seeded requests of every kind, several in flight (3 slots, prefill chunks
 * mixed with decode rows, so a step mixes the kinds). */
Test(engine, backend_sampling_equals_host_sampling)
{
	static const struct alice_logit_bias bias[] = {{100, 4.0f}, {200, -100.0f}, {300, -2.5f}, {13, 1.5f}};
	struct kind {
		float temperature;
		int32_t top_k;
		float top_p, min_p;
		float repeat, freq, pres; /* penalties: LOGIT_ADJUST before TOPK / SAMPLE_TEMP */
		int n_bias;
		int n_probs; /* > 0: logprobs with that many alternatives (LOGSUMEXP) */
	} kinds[] = {
		{0.0f, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0},	    /* greedy: TOPK */
		{0.8f, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0},	    /* temperature only: SAMPLE_TEMP */
		{1.5f, 0, 1.0f, 0.0f, 1, 0, 0, 0, 0},	    /* hot: most of the vocabulary live */
		{0.7f, 40, 1.0f, 0.0f, 1, 0, 0, 0, 0},	    /* top-k: TOPK */
		{1.2f, 20, 0.9f, 0.0f, 1, 0, 0, 0, 0},	    /* top-k then top-p: TOPK */
		{0.9f, 0, 0.9f, 0.05f, 1, 0, 0, 0, 0},	    /* top-p / min-p without top-k: whole rows either way */
		{0.0f, 0, 1.0f, 0.0f, 1.3f, 0, 0, 0, 0},	    /* greedy, repeat penalty */
		{0.8f, 0, 1.0f, 0.0f, 1, 0.6f, 0.4f, 0, 0},    /* drawn, frequency + presence */
		{0.7f, 40, 1.0f, 0.0f, 1.2f, 0.3f, 0, 4, 0},   /* top-k, every edit */
		{0.0f, 0, 1.0f, 0.0f, 1, 0, 0, 4, 0},	    /* greedy, logit bias (a ban) */
		{1.1f, 0, 1.0f, 0.0f, 0.8f, -0.5f, 0.2f, 4, 0}, /* drawn, penalties below 1 / negative, bias */
		{0.0f, 0, 1.0f, 0.0f, 1, 0, 0, 4, 3},	    /* greedy, bias, logprobs: TOPK + LOGSUMEXP */
		{0.9f, 0, 1.0f, 0.0f, 1, 0, 0, 0, 3},	    /* drawn, logprobs: the drawn token's value */
		{0.8f, 30, 1.0f, 0.0f, 1, 0, 0, 0, 2},	    /* top-k, logprobs */
		{0.8f, 0, 1.0f, 0.0f, 1.2f, 0, 0, 0, 3},    /* logprobs with penalties: whole rows */
	};
	enum { NK = sizeof(kinds) / sizeof(kinds[0]), NR = NK * N_PROMPTS };
	static struct run dev[NR], host[NR];
	struct alice_engine_stats st[2];
	for (int pass = 0; pass < 2; pass++) {
		struct run *rs = pass ? host : dev;
		if (pass)
			setenv("ALICE_TOPK", "0", 1);
		struct alice_engine *e = engine_new(3, NR, 8);
		unsetenv("ALICE_TOPK");
		for (int i = 0; i < NR; i++) {
			const struct kind *k = &kinds[i % NK];
			struct alice_engine_request q;
			struct alice_error err = {{0}};
			run_init(&rs[i]);
			request_init(&q, &rs[i], prompts[i / NK], 20);
			q.sampling.temperature = k->temperature;
			q.sampling.top_k = k->top_k;
			q.sampling.top_p = k->top_p;
			q.sampling.min_p = k->min_p;
			q.sampling.repeat_penalty = k->repeat;
			q.sampling.frequency_penalty = k->freq;
			q.sampling.presence_penalty = k->pres;
			q.sampling.logit_bias = k->n_bias ? bias : NULL;
			q.sampling.n_logit_bias = (size_t)k->n_bias;
			q.sampling.seed = 4242u + (uint64_t)i;
			q.sampling.logprobs = k->n_probs > 0;
			q.sampling.n_probs = k->n_probs;
			cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_OK, "%s", err.msg);
			free((int32_t *)q.prompt);
		}
		for (int i = 0; i < NR; i++)
			run_wait(&rs[i]);
		alice_engine_stats(e, &st[pass]);
		alice_engine_free(e);
	}
	/* the backend pass chose every token on the device but the top-p /
	 * min-p ones (kind 5) and the logprobs-with-penalties ones (the last);
	 * the host pass none */
	uint64_t whole = 0, all = 0;
	for (int i = 0; i < NR; i++) { /* an end-of-generation token is picked but not reported */
		uint64_t picks = (uint64_t)dev[i].n_tokens + (dev[i].finish == ALICE_ENGINE_FINISH_STOP);
		all += picks;
		whole += i % NK == 5 || i % NK == NK - 1 ? picks : 0;
	}
	if (backend_draws()) /* Vulkan reads more rows whole (no SAMPLE_TEMP, LOGIT_ADJUST, LOGSUMEXP) */
		cr_expect_eq(st[0].picks_host, whole, "backend pass: %llu tokens from whole rows, expected %llu",
			     (unsigned long long)st[0].picks_host, (unsigned long long)whole);
	cr_expect_eq(st[0].picks_device + st[0].picks_host, all);
	cr_expect_eq(st[1].picks_device, 0);
	for (int i = 0; i < NR; i++) {
		const struct kind *k = &kinds[i % NK];
		cr_assert_eq(dev[i].n_tokens, host[i].n_tokens, "request %d (kind %d, T %g, top_k %d): %d vs %d tokens", i,
			     i % NK, (double)k->temperature, k->top_k, dev[i].n_tokens, host[i].n_tokens);
		for (int t = 0; t < dev[i].n_tokens; t++) {
			cr_assert_eq(dev[i].tokens[t], host[i].tokens[t],
				     "request %d (kind %d, T %g, top_k %d, top_p %g): token %d is %d on the backend, %d on the "
				     "host",
				     i, i % NK, (double)k->temperature, k->top_k, (double)k->top_p, t, dev[i].tokens[t],
				     host[i].tokens[t]);
			/* logprobs: the same bits from the device's normaliser */
			cr_assert_eq(memcmp(&dev[i].logprob[t], &host[i].logprob[t], sizeof(float)), 0,
				     "request %d (kind %d) token %d: logprob %.9g on the backend, %.9g on the host", i, i % NK,
				     t, (double)dev[i].logprob[t], (double)host[i].logprob[t]);
			for (int a = 0; a < 3; a++)
				cr_assert(dev[i].top_tok[t][a] == host[i].top_tok[t][a] &&
						  memcmp(&dev[i].top_lp[t][a], &host[i].top_lp[t][a], sizeof(float)) == 0,
					  "request %d (kind %d) token %d alternative %d: %d %.9g vs %d %.9g", i, i % NK, t, a,
					  dev[i].top_tok[t][a], (double)dev[i].top_lp[t][a], host[i].top_tok[t][a],
					  (double)host[i].top_lp[t][a]);
		}
		cr_assert_eq(dev[i].finish, host[i].finish, "request %d", i);
	}
}

/* The pipelined engine (a step launched before the previous step's tokens
 * reach the host, fed from its picks on the device) gives every request
 * the tokens, text and finish of the step-by-step engine (ALICE_PIPELINE=0):
 * greedy and drawn requests with and without a logit bias, requests that
 * end on a stop string, on end-of-generation or on max_tokens while their
 * next step is in flight, a penalised one (never pipelined) beside them,
 * logprobs requests, more requests than slots. */
Test(engine, pipelined_steps_equal_step_by_step)
{
	static const struct alice_logit_bias bias[] = {{100, 3.0f}, {13, 1.5f}};
	static const char *const stops[] = {"the"};
	enum { NR = 18 };
	static struct run runs[2][NR];
	struct alice_engine_stats st[2];
	for (int pass = 0; pass < 2; pass++) {
		setenv("ALICE_PIPELINE", pass ? "0" : "1", 1); /* 1: also where steps are not asynchronous */
		struct alice_engine *e = engine_new(3, NR, 16);
		unsetenv("ALICE_PIPELINE");
		for (int i = 0; i < NR; i++) {
			struct alice_engine_request q;
			struct alice_error err = {{0}};
			struct run *r = &runs[pass][i];
			run_init(r);
			request_init(&q, r, prompts[i % N_PROMPTS], i % 6 == 5 ? 1 + i % 3 : 24);
			q.sampling.temperature = i % 3 == 1 ? 0.9f : 0.0f;
			q.sampling.seed = 99u + (uint64_t)i;
			if (i % 4 == 2) {
				q.sampling.logit_bias = bias;
				q.sampling.n_logit_bias = 2;
			}
			if (i % 5 == 3) {
				q.stop = stops;
				q.n_stop = 1;
			}
			if (i == 7)
				q.sampling.presence_penalty = 0.5f;
			if (i == 10 || i == 13) { /* logprobs from the device, drawn and greedy */
				q.sampling.logprobs = true;
				q.sampling.n_probs = 2;
			}
			cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_OK, "%s", err.msg);
			free((int32_t *)q.prompt);
		}
		for (int i = 0; i < NR; i++)
			run_wait(&runs[pass][i]);
		alice_engine_stats(e, &st[pass]);
		alice_engine_free(e);
	}
	cr_expect_gt(st[0].steps_fed, 20, "the pipelined pass fed %llu steps", (unsigned long long)st[0].steps_fed);
	cr_expect_eq(st[1].steps_fed, 0);
	for (int i = 0; i < NR; i++) {
		const struct run *a = &runs[0][i], *b = &runs[1][i];
		cr_assert_eq(a->n_tokens, b->n_tokens, "request %d: %d tokens pipelined, %d step by step", i, a->n_tokens,
			     b->n_tokens);
		for (int t = 0; t < a->n_tokens; t++) {
			cr_assert_eq(a->tokens[t], b->tokens[t], "request %d token %d: %d vs %d", i, t, a->tokens[t],
				     b->tokens[t]);
			cr_assert(memcmp(&a->logprob[t], &b->logprob[t], sizeof(float)) == 0 &&
					  memcmp(a->top_lp[t], b->top_lp[t], sizeof(a->top_lp[t])) == 0,
				  "request %d token %d: logprobs differ", i, t);
		}
		cr_assert_str_eq(a->text, b->text, "request %d", i);
		cr_assert_eq(a->finish, b->finish, "request %d", i);
		cr_assert_eq(a->n_completion, b->n_completion, "request %d", i);
		cr_assert_eq(a->n_done_events, 1, "request %d", i);
	}
}

/* Constrained requests picked on the device (the grammar's mask goes down
 * as bits, TOKEN_MASK, then TOPK / SAMPLE_TEMP) give the host sampler's
 * tokens (ALICE_TOPK=0 reads every row whole and masks it there): greedy,
 * drawn, top-k and biased requests, several at once. */
Test(engine, grammar_on_device_equals_host)
{
	static const char gbnf[] = "root ::= [a-z ,]+ (\".\" | \"!\")";
	static const struct alice_logit_bias bias[] = {{100, 2.0f}, {13, -1.5f}};
	enum { NR = 8 };
	static struct run runs[2][NR];
	struct alice_engine_stats st[2];
	struct alice_error err = {{0}};
	struct alice_grammar *g = NULL;
	struct alice_grammar_vocab *v = NULL;
	cr_assert_eq(alice_grammar_parse(gbnf, sizeof(gbnf) - 1, &g, &err, NULL), ALICE_OK, "%s", err.msg);
	cr_assert_eq(alice_grammar_vocab_from_tokenizer(tok, &v, &err), ALICE_OK, "%s", err.msg);
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			setenv("ALICE_TOPK", "0", 1);
		struct alice_engine *e = engine_new(4, NR, 64);
		unsetenv("ALICE_TOPK");
		for (int i = 0; i < NR; i++) {
			struct alice_engine_request q;
			run_init(&runs[pass][i]);
			request_init(&q, &runs[pass][i], prompts[i % N_PROMPTS], 30);
			q.sampling.temperature = i % 4 == 0 ? 0.0f : 0.9f;
			q.sampling.top_k = i % 4 == 2 ? 20 : 0;
			q.sampling.seed = 7u + (uint64_t)i;
			if (i % 4 == 3) {
				q.sampling.logit_bias = bias;
				q.sampling.n_logit_bias = 2;
			}
			cr_assert_eq(alice_grammar_constraint_create(g, v, tok, &q.grammar, &err), ALICE_OK, "%s", err.msg);
			cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_OK, "%s", err.msg);
			free((int32_t *)q.prompt);
		}
		for (int i = 0; i < NR; i++)
			run_wait(&runs[pass][i]);
		alice_engine_stats(e, &st[pass]);
		alice_engine_free(e);
	}
	alice_grammar_free(g);
	alice_grammar_vocab_free(v);
	if (backend_draws())
		cr_expect_eq(st[0].picks_host, 0, "device pass: %llu tokens from whole rows",
			     (unsigned long long)st[0].picks_host);
	else /* Vulkan: no SAMPLE_TEMP, drawn rows are read whole; greedy and top-k rows are masked on the device */
		cr_expect_gt(st[0].picks_device, 0);
	cr_expect_eq(st[1].picks_device, 0);
	for (int i = 0; i < NR; i++) {
		const struct run *a = &runs[0][i], *b = &runs[1][i];
		cr_assert_eq(a->n_tokens, b->n_tokens, "request %d: %d tokens masked on the device, %d on the host", i,
			     a->n_tokens, b->n_tokens);
		for (int t = 0; t < a->n_tokens; t++)
			cr_assert_eq(a->tokens[t], b->tokens[t], "request %d token %d: %d vs %d", i, t, a->tokens[t],
				     b->tokens[t]);
		cr_assert_str_eq(a->text, b->text, "request %d", i);
		cr_assert_eq(a->finish, b->finish, "request %d", i);
		for (size_t c = 0; c + 1 < a->text_len; c++)
			cr_assert((a->text[c] >= 'a' && a->text[c] <= 'z') || a->text[c] == ' ' || a->text[c] == ',',
				  "request %d: '%s' breaks the grammar", i, a->text);
	}
}
