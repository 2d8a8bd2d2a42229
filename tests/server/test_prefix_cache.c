// ctest-labels: unit;server
/* The engine's prefix cache (core/engine.c) with the bundled tiny-tolstoy on
 * the CPU backend: a repeated prompt reuses all but its last token, a new
 * request goes to the idle slot sharing the longest prefix, the engine stats
 * count cached tokens and KV cells, and greedy tokens are the same with and
 * without the cache. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alice/engine.h"
#include "alice/model.h"
#include "alice/tokenizer.h"
#include "support/models.h"

#define MODEL_PATH ALICE_SOURCE_DIR "/models/tiny-tolstoy-Q8_0.gguf"
#define MAX_TOK 64

struct pc_run {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int32_t tokens[MAX_TOK];
	int n_tokens;
	int32_t n_cached, n_prompt;
	enum alice_engine_finish finish;
};

static void pc_on_event(const struct alice_engine_event *ev, void *user)
{
	struct pc_run *r = user;
	pthread_mutex_lock(&r->mu);
	if (ev->type == ALICE_ENGINE_EVENT_TOKEN) {
		if (r->n_tokens < MAX_TOK)
			r->tokens[r->n_tokens++] = ev->token.token;
	} else {
		r->n_cached = ev->n_cached;
		r->n_prompt = ev->n_prompt;
		r->finish = ev->finish;
		r->done = true;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
}

static struct alice_model *model;

static void setup(void)
{
	model = alice_test_load_model(MODEL_PATH, "cpu");
}

static void teardown(void)
{
	alice_model_free(model);
}

static struct alice_engine *pc_engine(uint32_t slots, bool no_cache)
{
	struct alice_engine_params p;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	alice_engine_params_default(&p);
	p.n_slots = slots;
	p.n_ctx = 256;
	p.no_prefix_cache = no_cache;
	cr_assert_eq(alice_engine_create(model, &p, &e, &err), ALICE_OK, "%s", err.msg);
	return e;
}

/* Greedy run of `text` (max 12 tokens, end-of-generation banned); waits. */
static void pc_run_text(struct alice_engine *e, const char *text, struct pc_run *r)
{
	static const struct alice_logit_bias no_eog[] = {{0, -100.0f}, {2, -100.0f}};
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	int32_t *toks = NULL;
	size_t n = 0;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_tokenizer_encode(alice_model_tokenizer(model), text, strlen(text), true, false, &toks,
					    &n, &err),
		     ALICE_OK);
	struct alice_engine_request q = {0};
	q.prompt = toks;
	q.n_prompt = (int32_t)n;
	q.max_tokens = 12;
	alice_sampling_params_default(&q.sampling);
	q.sampling.temperature = 0.0f;
	q.sampling.logit_bias = no_eog;
	q.sampling.n_logit_bias = 2;
	q.on_event = pc_on_event;
	q.user = r;
	uint64_t id;
	cr_assert_eq(alice_engine_submit(e, &q, &id, &err), ALICE_OK, "%s", err.msg);
	free(toks);
	pthread_mutex_lock(&r->mu);
	while (!r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	cr_assert_eq(r->finish, ALICE_ENGINE_FINISH_LENGTH);
}

/* Stats are final once the engine released the request's slot. */
static void pc_stats(struct alice_engine *e, uint64_t n_done, struct alice_engine_stats *st)
{
	for (int i = 0; i < 5000; i++) {
		alice_engine_stats(e, st);
		if (st->requests_done >= n_done)
			return;
		usleep(1000);
	}
	cr_assert_fail("the engine did not release the slots");
}

static const char *A = "Prince Andrew looked at the sky over the field of Austerlitz and thought";
static const char *B = "Natasha danced at her first ball, and the old count watched her";

Test(prefix_cache, repeated_prompt_reuses_all_but_last, .init = setup, .fini = teardown)
{
	struct alice_engine *e = pc_engine(1, false);
	struct pc_run r1, r2;
	pc_run_text(e, A, &r1);
	pc_run_text(e, A, &r2);
	cr_assert_eq(r1.n_cached, 0);
	cr_assert_eq(r2.n_cached, r2.n_prompt - 1, "cached %d of %d", r2.n_cached, r2.n_prompt);
	cr_assert_eq(r1.n_tokens, r2.n_tokens);
	cr_assert_arr_eq(r1.tokens, r2.tokens, (size_t)r1.n_tokens * sizeof(int32_t));
	struct alice_engine_stats st;
	pc_stats(e, 2, &st);
	cr_assert_eq(st.prompt_tokens, (uint64_t)(r1.n_prompt + r2.n_prompt));
	cr_assert_eq(st.prompt_tokens_cached, (uint64_t)r2.n_cached);
	cr_assert_eq(st.kv_cells_total, 256);
	/* prompt + the generated tokens that were fed back (all but the last) */
	cr_assert_eq(st.kv_cells_used, (uint64_t)(r2.n_prompt + r2.n_tokens - 1), "kv %llu",
		     (unsigned long long)st.kv_cells_used);
	alice_engine_free(e);
}

Test(prefix_cache, picks_the_slot_with_the_longest_prefix, .init = setup, .fini = teardown)
{
	struct alice_engine *e = pc_engine(2, false);
	struct pc_run ra, rb, ra2, rb2;
	pc_run_text(e, A, &ra);  /* slot 0 */
	pc_run_text(e, B, &rb);  /* slot 1: only BOS shared, so the unused slot is taken */
	pc_run_text(e, A, &ra2); /* back to A's slot */
	pc_run_text(e, B, &rb2); /* and B's: B's cache survived A's second run */
	cr_assert_eq(rb.n_cached, 0, "B shares little with A: the unused slot is taken (%d cached)", rb.n_cached);
	cr_assert_eq(ra2.n_cached, ra2.n_prompt - 1);
	cr_assert_eq(rb2.n_cached, rb2.n_prompt - 1);
	cr_assert_arr_eq(ra.tokens, ra2.tokens, (size_t)ra.n_tokens * sizeof(int32_t));
	cr_assert_arr_eq(rb.tokens, rb2.tokens, (size_t)rb.n_tokens * sizeof(int32_t));
	alice_engine_free(e);
}

Test(prefix_cache, same_tokens_without_the_cache, .init = setup, .fini = teardown)
{
	struct alice_engine *on = pc_engine(1, false), *off = pc_engine(1, true);
	char longer[512];
	snprintf(longer, sizeof(longer), "%s %s", A, B);
	struct pc_run a1, a2, b1, b2;
	pc_run_text(on, A, &a1);
	pc_run_text(on, longer, &a2); /* extends A: reuses A's prompt */
	pc_run_text(off, A, &b1);
	pc_run_text(off, longer, &b2);
	cr_assert_gt(a2.n_cached, 5);
	cr_assert_eq(b2.n_cached, 0);
	cr_assert_arr_eq(a1.tokens, b1.tokens, (size_t)a1.n_tokens * sizeof(int32_t));
	cr_assert_eq(a2.n_tokens, b2.n_tokens);
	cr_assert_arr_eq(a2.tokens, b2.tokens, (size_t)a2.n_tokens * sizeof(int32_t));
	struct alice_engine_stats st;
	pc_stats(off, 2, &st);
	cr_assert_eq(st.kv_cells_used, 0, "nothing stays cached with no_prefix_cache");
	alice_engine_free(on);
	alice_engine_free(off);
}
