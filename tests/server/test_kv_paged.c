// ctest-labels: unit;server
/* The engine over the paged KV cache (core/engine.c, core/kv_pool.c), on
 * $ALICE_TEST_BACKEND (default cpu):
 *  - a pool much smaller than slots x context: many concurrent greedy
 *    requests all complete, some of them had to wait in the queue for
 *    blocks, none failed, and each gives exactly its tokens alone (a fresh
 *    one-slot engine without prefix cache), on tiny-tolstoy and on the
 *    recurrent qwen35 fixture;
 *  - a prompt sharing a long prefix with another slot's sequence (running
 *    or cached) maps that prefix's whole blocks instead of prefilling them:
 *    it reports them as cached tokens, the other slot keeps its history,
 *    the blocks count as shared, and the output equals the fresh one;
 *  - a pool smaller than one context is refused at creation. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alice/engine.h"
#include "alice/model.h"
#include "support/models.h"
#include "support/paths.h"

#define TINY ALICE_SOURCE_DIR "/models/tiny-tolstoy-Q8_0.gguf"
#define MAX_GEN 48
#define MAX_PROMPT 160

struct kp_run {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int32_t prompt[MAX_PROMPT];
	int32_t n_prompt, max_tokens;
	int32_t tokens[MAX_GEN];
	int n_tokens;
	int32_t n_cached;
	enum alice_engine_finish finish;
	char error[256];
};

static void kp_on_event(const struct alice_engine_event *ev, void *user)
{
	struct kp_run *r = user;
	pthread_mutex_lock(&r->mu);
	if (ev->type == ALICE_ENGINE_EVENT_TOKEN) {
		if (r->n_tokens < MAX_GEN)
			r->tokens[r->n_tokens++] = ev->token.token;
	} else {
		r->n_cached = ev->n_cached;
		r->finish = ev->finish;
		if (ev->error)
			snprintf(r->error, sizeof(r->error), "%s", ev->error);
		r->done = true;
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static struct alice_engine *kp_engine(struct alice_model *m, uint32_t slots, uint32_t kv_cells, bool no_cache)
{
	struct alice_engine_params p;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	alice_engine_params_default(&p);
	p.n_slots = slots;
	p.n_ctx = 256;
	p.n_batch = 64;
	p.max_queue = 256;
	p.n_kv_cells = kv_cells;
	p.no_prefix_cache = no_cache;
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_OK, "%s", err.msg);
	return e;
}

static void kp_init(struct kp_run *r, const int32_t *prompt, int32_t n, int32_t max_tokens)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	memcpy(r->prompt, prompt, (size_t)n * sizeof(*prompt));
	r->n_prompt = n;
	r->max_tokens = max_tokens;
}

static void kp_submit(struct alice_engine *e, struct kp_run *r)
{
	struct alice_engine_request q = {0};
	q.prompt = r->prompt;
	q.n_prompt = r->n_prompt;
	q.max_tokens = r->max_tokens;
	q.ignore_eos = true; /* every request runs to max_tokens */
	alice_sampling_params_default(&q.sampling);
	q.sampling.temperature = 0.0f;
	q.on_event = kp_on_event;
	q.user = r;
	struct alice_error err = {{0}};
	uint64_t id;
	cr_assert_eq(alice_engine_submit(e, &q, &id, &err), ALICE_OK, "%s", err.msg);
}

static void kp_wait(struct kp_run *r)
{
	pthread_mutex_lock(&r->mu);
	while (!r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

/* Stats once n_done requests released their slots. */
static void kp_stats(struct alice_engine *e, uint64_t n_done, struct alice_engine_stats *st)
{
	for (int i = 0; i < 10000; i++) {
		alice_engine_stats(e, st);
		if (st->requests_done >= n_done)
			return;
		usleep(1000);
	}
	cr_assert_fail("the engine did not release the slots");
}

/* Prompt i: 6 .. 60 tokens, mostly distinct (a shared first token). */
static int32_t kp_prompt(int i, int32_t *out)
{
	int32_t n = 6 + (i * 23) % 55;
	out[0] = 1;
	for (int32_t j = 1; j < n; j++)
		out[j] = 100 + (int32_t)(((uint32_t)i * 7919u + (uint32_t)j * 131u) % 900u);
	return n;
}

#define N_REQ 40

static void check_small_pool(const char *path)
{
	struct alice_model *m = alice_test_load_model(path, NULL);
	static struct kp_run alone[N_REQ], busy[N_REQ];
	int32_t prompt[MAX_PROMPT];
	/* alone: one request at a time, the default pool, no cache */
	struct alice_engine *e1 = kp_engine(m, 1, 0, true);
	for (int i = 0; i < N_REQ; i++) {
		int32_t n = kp_prompt(i, prompt);
		kp_init(&alone[i], prompt, n, 8 + (i * 13) % 40);
		kp_submit(e1, &alone[i]);
		kp_wait(&alone[i]);
		cr_assert_eq(alone[i].finish, ALICE_ENGINE_FINISH_LENGTH, "alone %d: %s", i, alone[i].error);
	}
	alice_engine_free(e1);
	/* 16 slots of 256 positions over a pool of 256 cells (16 blocks): a
	 * request needs 1-7 blocks, so only a few run at once */
	struct alice_engine *e = kp_engine(m, 16, 256, false);
	struct alice_engine_stats st;
	alice_engine_stats(e, &st);
	cr_assert_eq(st.kv_cells_total, 256);
	cr_assert_eq(st.kv_blocks_total, 256 / ALICE_KV_BLOCK);
	cr_assert_eq(st.kv_block_cells, ALICE_KV_BLOCK);
	for (int i = 0; i < N_REQ; i++) {
		kp_init(&busy[i], alone[i].prompt, alone[i].n_prompt, alone[i].max_tokens);
		kp_submit(e, &busy[i]);
	}
	uint32_t max_used = 0;
	for (int i = 0; i < N_REQ; i++) {
		alice_engine_stats(e, &st);
		max_used = st.kv_blocks_used > max_used ? st.kv_blocks_used : max_used;
		kp_wait(&busy[i]);
	}
	for (int i = 0; i < N_REQ; i++) {
		cr_assert_eq(busy[i].finish, ALICE_ENGINE_FINISH_LENGTH, "request %d: %s (%s)", i,
			     alice_engine_finish_name(busy[i].finish), busy[i].error);
		cr_assert_eq(busy[i].n_tokens, alone[i].n_tokens, "request %d", i);
		cr_assert_arr_eq(busy[i].tokens, alone[i].tokens, (size_t)alone[i].n_tokens * sizeof(int32_t),
				 "request %d: concurrent tokens differ from its tokens alone", i);
	}
	kp_stats(e, N_REQ, &st);
	cr_assert_gt(st.requests_kv_waited, 0, "some requests must have waited for KV blocks");
	cr_assert_leq(max_used, st.kv_blocks_total);
	cr_assert_eq(st.slots_busy, 0);
	cr_assert_eq(st.kv_blocks_cached, st.kv_blocks_used, "idle: every held block is an evictable cache");
	cr_assert_eq(st.kv_blocks_available + st.kv_blocks_used, st.kv_blocks_total, "nothing reserved when idle");
	fprintf(stderr, "%s: %d requests over %u blocks: %llu waited for blocks\n", path, N_REQ, st.kv_blocks_total,
		(unsigned long long)st.requests_kv_waited);
	alice_engine_free(e);
	alice_model_free(m);
}

Test(kv_paged, small_pool_requests_wait_and_match_alone)
{
	check_small_pool(TINY);
}

Test(kv_paged, small_pool_recurrent_hybrid)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/models/qwen35-F16.gguf", alice_test_fixtures_dir());
	check_small_pool(path);
}

Test(kv_paged, prefix_blocks_shared_across_slots)
{
	struct alice_model *m = alice_test_load_model(TINY, NULL);
	int32_t p1[MAX_PROMPT], p2[MAX_PROMPT];
	/* a 40-token common prefix; the second prompt is long enough (100) that
	 * the prefix is under half of it: it takes another slot and shares */
	int32_t n1 = 56, n2 = 100, common = 40;
	for (int32_t j = 0; j < n2; j++)
		p2[j] = j < common ? 200 + (j * 37) % 500 : 120 + (j * 53) % 700;
	for (int32_t j = 0; j < n1; j++)
		p1[j] = j < common ? p2[j] : 150 + (j * 29) % 600;
	struct kp_run fresh1, fresh2, a, b;
	struct alice_engine *f = kp_engine(m, 1, 0, true);
	kp_init(&fresh1, p1, n1, 40);
	kp_submit(f, &fresh1);
	kp_wait(&fresh1);
	kp_init(&fresh2, p2, n2, 24);
	kp_submit(f, &fresh2);
	kp_wait(&fresh2);
	alice_engine_free(f);

	struct alice_engine *e = kp_engine(m, 4, 0, false);
	kp_init(&a, p1, n1, 40);
	kp_submit(e, &a);
	/* the second once the first is generating (its prompt's KV complete):
	 * it shares from a running sequence, or from its cache if it is done */
	pthread_mutex_lock(&a.mu);
	while (a.n_tokens == 0 && !a.done)
		pthread_cond_wait(&a.cv, &a.mu);
	pthread_mutex_unlock(&a.mu);
	kp_init(&b, p2, n2, 24);
	kp_submit(e, &b);
	kp_wait(&a);
	kp_wait(&b);
	cr_assert_eq(a.finish, ALICE_ENGINE_FINISH_LENGTH, "%s", a.error);
	cr_assert_eq(b.finish, ALICE_ENGINE_FINISH_LENGTH, "%s", b.error);
	cr_assert_eq(a.n_cached, 0);
	cr_assert_eq(b.n_cached, common / ALICE_KV_BLOCK * ALICE_KV_BLOCK,
		     "the second request maps the whole blocks of the common prefix (%d cached)", b.n_cached);
	cr_assert_arr_eq(a.tokens, fresh1.tokens, (size_t)fresh1.n_tokens * sizeof(int32_t));
	cr_assert_eq(b.n_tokens, fresh2.n_tokens);
	cr_assert_arr_eq(b.tokens, fresh2.tokens, (size_t)fresh2.n_tokens * sizeof(int32_t),
			 "a shared prefix must give the fresh output");
	struct alice_engine_stats st;
	kp_stats(e, 2, &st);
	cr_assert_eq(st.kv_blocks_shared, (uint32_t)(common / ALICE_KV_BLOCK), "both slots hold the prefix blocks");
	cr_assert_eq(st.prompt_tokens_cached, (uint64_t)b.n_cached);
	/* the first slot kept its history: its prompt again reuses all but its last token */
	struct kp_run a2;
	kp_init(&a2, p1, n1, 40);
	kp_submit(e, &a2);
	kp_wait(&a2);
	cr_assert_eq(a2.n_cached, n1 - 1);
	cr_assert_arr_eq(a2.tokens, fresh1.tokens, (size_t)fresh1.n_tokens * sizeof(int32_t));
	alice_engine_free(e);
	alice_model_free(m);
}

Test(kv_paged, pool_smaller_than_a_context_is_refused)
{
	struct alice_model *m = alice_test_load_model(TINY, NULL);
	struct alice_engine_params p;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	alice_engine_params_default(&p);
	p.n_slots = 4;
	p.n_ctx = 256;
	p.n_kv_cells = 200;
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_ERR_RANGE);
	cr_assert(strstr(err.msg, "KV pool"), "%s", err.msg);
	cr_assert_null(e);
	alice_model_free(m);
}
