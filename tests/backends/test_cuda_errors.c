/* test_cuda_errors.c — the CUDA backend's failure paths through the model
 * API (issue #7), on the gemma2-F32 and qwen35-F16 fixtures:
 *  - a context whose KV cache cannot fit fails to create with a message
 *    naming the bytes needed and the device memory free (no crash);
 *  - a CUDA error during a step (ALICE_CUDA_INJECT_FAULT=N: the context's
 *    Nth graph_compute meets a real launch error, see backends/cuda/
 *    backend.cu) fails that decode with ALICE_ERR_BACKEND and the CUDA
 *    message; the process and the context live on: the next decodes
 *    succeed, and a request re-run from a cleared sequence gives exactly
 *    the logits it gave before the fault;
 *  - the same through the engine (what the server serves): the faulted
 *    request ends with FINISH_ERROR / ALICE_ERR_BACKEND (the server's 500),
 *    the next requests finish normally with identical greedy tokens.
 * Needs a CUDA device: skipped where the cuda backend cannot run. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend_loader.h"
#include "alice/engine.h"
#include "alice/model.h"
#include "support/paths.h"

static void need_cuda(void)
{
	struct alice_backend *b = NULL;
	struct alice_error err = {0};
	if (alice_backend_open("cuda", NULL, &b, &err) != ALICE_OK)
		cr_skip_test("cuda backend unavailable here: %s", err.msg);
	alice_backend_close(b);
}

static struct alice_model *load(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/models/%s.gguf", alice_test_fixtures_dir(), name);
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.path = path;
	mp.backend = "cuda";
	struct alice_model *m = NULL;
	struct alice_error err = {0};
	cr_assert_eq(alice_model_load(&mp, &m, &err), ALICE_OK, "load %s: %s", name, err.msg);
	return m;
}

/* 2^24 positions x 127 sequences x 1 KiB of F16 K+V per cell (gemma2
 * fixture: 2 layers, 2 kv heads of 64+64) = 2.2 TB of KV cache. */
Test(cuda_errors, oom_at_context_creation_names_sizes, .timeout = 120)
{
	need_cuda();
	struct alice_model *m = load("gemma2-F32");
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = 1u << 24;
	cp.n_seq = 127;
	struct alice_context *c = NULL;
	struct alice_error err = {0};
	enum alice_status st = alice_context_create(m, &cp, &c, &err);
	fprintf(stderr, "cuda_errors: oversized context: %s: %s\n", alice_status_str(st), err.msg);
	cr_expect_neq(st, ALICE_OK, "a 2.2 TB KV cache was created");
	cr_expect_null(c);
	cr_expect(strstr(err.msg, "KV cache") && strstr(err.msg, "needed") && strstr(err.msg, "free"),
		  "the message should name the KV cache, the size needed and the memory free: %s", err.msg);
	/* the model is still usable: a normal context works */
	cp.n_ctx = 256;
	cp.n_seq = 1;
	cr_expect_eq(alice_context_create(m, &cp, &c, &err), ALICE_OK, "%s", err.msg);
	alice_context_free(c);
	alice_model_free(m);
}

static enum alice_status decode(struct alice_context *c, const int32_t *tok, int32_t n, int32_t pos0,
				struct alice_error *err)
{
	int32_t pos[64], seq[64];
	bool want[64];
	cr_assert(n <= 64);
	for (int32_t i = 0; i < n; i++) {
		pos[i] = pos0 + i;
		seq[i] = 0;
		want[i] = i == n - 1;
	}
	struct alice_batch b = {.n_tokens = n, .token = tok, .pos = pos, .seq = seq, .logits = want};
	return alice_context_decode(c, &b, err);
}

/* prompt of 12 tokens then 3 single-token steps; the logits of the last
 * step into out (n_vocab) */
static enum alice_status request(struct alice_context *c, float *out, int32_t n_vocab, struct alice_error *err)
{
	static const int32_t prompt[12] = {1, 17, 230, 45, 9, 88, 301, 12, 7, 64, 150, 3};
	alice_context_seq_clear(c, 0);
	enum alice_status st = decode(c, prompt, 12, 0, err);
	for (int32_t s = 0; s < 3 && st == ALICE_OK; s++) {
		int32_t tok = 20 + s;
		st = decode(c, &tok, 1, 12 + s, err);
	}
	if (st == ALICE_OK)
		memcpy(out, alice_context_logits(c, 0), (size_t)n_vocab * sizeof(float));
	return st;
}

static void fault_case(const char *model)
{
	need_cuda();
	/* calls 1-4: the first request; the 6th (the second request's first step) fails */
	cr_assert_eq(setenv("ALICE_CUDA_INJECT_FAULT", "6", 1), 0);
	struct alice_model *m = load(model);
	int32_t nv = alice_model_n_vocab(m);
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = 256;
	cp.n_seq = 1;
	struct alice_context *c = NULL;
	struct alice_error err = {0};
	cr_assert_eq(alice_context_create(m, &cp, &c, &err), ALICE_OK, "%s", err.msg);
	float *ref = malloc((size_t)nv * sizeof(float)), *got = malloc((size_t)nv * sizeof(float));
	cr_assert(ref && got);
	cr_assert_eq(request(c, ref, nv, &err), ALICE_OK, "first request: %s", err.msg);
	enum alice_status st = request(c, got, nv, &err);
	fprintf(stderr, "cuda_errors [%s]: injected fault: %s: %s\n", model, alice_status_str(st), err.msg);
	cr_expect_eq(st, ALICE_ERR_BACKEND, "the faulted request should fail with a backend error");
	cr_expect(strstr(err.msg, "ALICE_CUDA_INJECT_FAULT") != NULL, "message: %s", err.msg);
	/* the context lives on: the same request again, twice (plain launches,
	 * then a captured graph replay), gives the first run's logits exactly */
	for (int rep = 0; rep < 2; rep++) {
		cr_assert_eq(request(c, got, nv, &err), ALICE_OK, "request after the fault: %s", err.msg);
		float worst = 0.0f;
		for (int32_t v = 0; v < nv; v++) {
			float e = fabsf(got[v] - ref[v]);
			if (!(e <= worst))
				worst = isnan(e) ? INFINITY : e;
		}
		cr_expect(worst == 0.0f, "[%s] run %d after the fault differs from the first by %g", model, rep, worst);
	}
	free(ref);
	free(got);
	alice_context_free(c);
	alice_model_free(m);
}

Test(cuda_errors, fault_in_step_fails_request_only_gemma2, .timeout = 120)
{
	fault_case("gemma2-F32");
}

Test(cuda_errors, fault_in_step_fails_request_only_qwen35, .timeout = 120)
{
	fault_case("qwen35-F16");
}

/* ---- through the engine ---- */

struct ereq {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	int32_t tokens[64];
	int n_tokens;
	enum alice_engine_finish finish;
	enum alice_status error_status;
	char error[512];
};

static void on_event(const struct alice_engine_event *ev, void *user)
{
	struct ereq *r = user;
	pthread_mutex_lock(&r->mu);
	if (ev->type == ALICE_ENGINE_EVENT_TOKEN) {
		if (r->n_tokens < 64)
			r->tokens[r->n_tokens++] = ev->token.token;
	} else {
		r->finish = ev->finish;
		r->error_status = ev->error_status;
		snprintf(r->error, sizeof(r->error), "%s", ev->error ? ev->error : "");
		r->done = true;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
}

static void engine_request(struct alice_engine *e, struct ereq *r)
{
	static const int32_t prompt[10] = {1, 17, 230, 45, 9, 88, 301, 12, 7, 64};
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	struct alice_engine_request q = {0};
	q.prompt = prompt;
	q.n_prompt = 10;
	q.max_tokens = 8;
	alice_sampling_params_default(&q.sampling);
	q.sampling.temperature = 0;
	q.on_event = on_event;
	q.user = r;
	struct alice_error err = {0};
	cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_OK, "%s", err.msg);
	pthread_mutex_lock(&r->mu);
	while (!r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

Test(cuda_errors, engine_fault_fails_one_request, .timeout = 120)
{
	need_cuda();
	/* the 2nd graph_compute of the backend context: the first request's
	 * first step after its prefill (the engine computes nothing before) */
	cr_assert_eq(setenv("ALICE_CUDA_INJECT_FAULT", "2", 1), 0);
	struct alice_model *m = load("qwen35-F16");
	struct alice_engine_params p;
	alice_engine_params_default(&p);
	p.n_slots = 2;
	p.n_ctx = 256;
	struct alice_engine *e = NULL;
	struct alice_error err = {0};
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_OK, "%s", err.msg);
	struct ereq a, b, c;
	engine_request(e, &a);
	fprintf(stderr, "cuda_errors engine: faulted request: finish %s, status %s: %s\n",
		alice_engine_finish_name(a.finish), alice_status_str(a.error_status), a.error);
	cr_expect_eq(a.finish, ALICE_ENGINE_FINISH_ERROR);
	cr_expect_eq(a.error_status, ALICE_ERR_BACKEND, "a backend failure (500), not a request fault (400)");
	cr_expect(strstr(a.error, "ALICE_CUDA_INJECT_FAULT") != NULL, "error: %s", a.error);
	engine_request(e, &b);
	engine_request(e, &c);
	cr_expect(b.finish == ALICE_ENGINE_FINISH_LENGTH || b.finish == ALICE_ENGINE_FINISH_STOP, "after the fault: %s %s",
		  alice_engine_finish_name(b.finish), b.error);
	cr_expect_eq(b.finish, c.finish);
	cr_expect(b.n_tokens == c.n_tokens && memcmp(b.tokens, c.tokens, (size_t)b.n_tokens * sizeof(int32_t)) == 0,
		  "greedy tokens after the fault differ between two runs");
	alice_engine_free(e);
	alice_model_free(m);
}
