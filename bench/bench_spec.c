/* bench_spec.c — decode speed with speculative decoding: the engine (one
 * slot) generates -n greedy tokens for each of a few fixed prose prompts,
 * once plainly and once speculating (a draft model or prompt lookup);
 * reports decode tokens/s of both (first to last token, so prefill is not
 * in it), the speed-up, and drafted / accepted tokens. The same tokens come
 * out both ways (spec.h), which is checked. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/engine.h"
#include "alice/model.h"
#include "alice/tokenizer.h"
#include "bench_spec.h"

static const char *const prompts[] = {
	"Prince Andrew looked at the sky and thought",
	"The old count said to Natasha",
	"Pierre went to the window and",
	"In the morning the army",
};
#define N_PROMPTS (sizeof(prompts) / sizeof(prompts[0]))

struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	int32_t n_completion, n_drafted, n_accepted;
	double decode_ms;
	uint64_t hash; /* of the token ids: plain and speculative must agree */
	char error[256];
};

static void on_event(const struct alice_engine_event *ev, void *user)
{
	struct waiter *w = user;
	pthread_mutex_lock(&w->mu);
	if (ev->type == ALICE_ENGINE_EVENT_TOKEN) {
		w->hash = (w->hash ^ (uint64_t)(uint32_t)ev->token.token) * 1099511628211ull;
	} else {
		w->n_completion = ev->n_completion;
		w->n_drafted = ev->n_drafted;
		w->n_accepted = ev->n_accepted;
		w->decode_ms = ev->decode_ms;
		if (ev->finish == ALICE_ENGINE_FINISH_ERROR)
			snprintf(w->error, sizeof w->error, "%s", ev->error ? ev->error : "failed");
		w->done = 1;
		pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
}

struct totals {
	double decode_ms;
	int64_t tokens, drafted, accepted;
	uint64_t hash;
};

static int run_engine(struct alice_model *m, const struct alice_spec_params *sp, int n, struct totals *t,
		      char *error, size_t error_len)
{
	struct alice_engine_params ep;
	alice_engine_params_default(&ep);
	ep.n_slots = 1;
	ep.n_ctx = 1024;
	ep.no_prefix_cache = true;
	if (sp)
		ep.spec = *sp;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	if (alice_engine_create(m, &ep, &e, &err) != ALICE_OK) {
		snprintf(error, error_len, "%s", err.msg);
		return -1;
	}
	const struct alice_tokenizer *tok = alice_model_tokenizer(m);
	/* the end-of-generation tokens are banned: every run is n tokens */
	struct alice_logit_bias bias[2] = {{alice_tokenizer_eos(tok), -100.0f}, {alice_tokenizer_eot(tok), -100.0f}};
	memset(t, 0, sizeof(*t));
	int rc = 0;
	for (size_t i = 0; i < N_PROMPTS && rc == 0; i++) {
		int32_t *ids = NULL;
		size_t n_ids = 0;
		if (alice_tokenizer_encode(tok, prompts[i], strlen(prompts[i]), true, true, &ids, &n_ids, &err) !=
		    ALICE_OK) {
			snprintf(error, error_len, "%s", err.msg);
			rc = -1;
			break;
		}
		struct waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
				   .hash = 14695981039346656037ull};
		struct alice_engine_request q = {0};
		q.prompt = ids;
		q.n_prompt = (int32_t)n_ids;
		q.max_tokens = n;
		alice_sampling_params_default(&q.sampling);
		q.sampling.temperature = 0;
		q.sampling.logit_bias = bias;
		q.sampling.n_logit_bias = bias[1].token >= 0 ? 2 : 1;
		q.on_event = on_event;
		q.user = &w;
		if (alice_engine_submit(e, &q, NULL, &err) != ALICE_OK) {
			snprintf(error, error_len, "%s", err.msg);
			free(ids);
			rc = -1;
			break;
		}
		free(ids);
		pthread_mutex_lock(&w.mu);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.mu);
		pthread_mutex_unlock(&w.mu);
		if (w.error[0]) {
			snprintf(error, error_len, "%s", w.error);
			rc = -1;
		}
		t->decode_ms += w.decode_ms;
		t->tokens += w.n_completion - 1; /* the first token ends the prefill */
		t->drafted += w.n_drafted;
		t->accepted += w.n_accepted;
		t->hash = t->hash * 31 + w.hash;
	}
	alice_engine_free(e);
	return rc;
}

int bench_spec_run(const struct bench_spec_opts *o)
{
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.backend = o->backend;
	mp.backend_dir = o->backend_dir;
	mp.n_threads = o->threads;
	struct alice_error err = {{0}};
	struct alice_model *m = NULL, *d = NULL;
	char error[512] = "";
	int rc = 1;
	mp.path = o->model;
	if (alice_model_load(&mp, &m, &err) != ALICE_OK) {
		fprintf(stderr, "alice-bench: %s: %s\n", o->model, err.msg);
		return 1;
	}
	struct alice_spec_params sp = o->spec;
	if (o->draft) {
		mp.path = o->draft;
		if (alice_model_load(&mp, &d, &err) != ALICE_OK) {
			fprintf(stderr, "alice-bench: %s: %s\n", o->draft, err.msg);
			goto out;
		}
		if (alice_spec_check_vocab(m, o->model, d, o->draft, &err) != ALICE_OK) {
			fprintf(stderr, "alice-bench: %s\n", err.msg);
			goto out;
		}
		sp.draft = d;
	}
	const char *mode = o->draft ? o->draft : "ngram";
	if (!o->json) {
		printf("| model | speculation | draft-max | tg | plain t/s | spec t/s | speed-up | drafted | accepted | acceptance |\n");
		printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	} else {
		printf("[\n");
	}
	for (int rep = 0; rep < o->r; rep++) {
		struct totals a, b;
		if (run_engine(m, NULL, o->n, &a, error, sizeof error) != 0 ||
		    run_engine(m, &sp, o->n, &b, error, sizeof error) != 0) {
			fprintf(stderr, "alice-bench: %s\n", error);
			goto out;
		}
		if (a.hash != b.hash) {
			fprintf(stderr, "alice-bench: speculation changed the greedy tokens\n");
			goto out;
		}
		double ta = a.decode_ms > 0 ? a.tokens * 1000.0 / a.decode_ms : 0,
		       tb = b.decode_ms > 0 ? b.tokens * 1000.0 / b.decode_ms : 0;
		double acc = b.drafted ? (double)b.accepted / (double)b.drafted : 0;
		if (o->json)
			printf("  {\"model\": \"%s\", \"speculation\": \"%s\", \"draft_max\": %u, \"tg\": %d, "
			       "\"plain_tps\": %.3f, \"spec_tps\": %.3f, \"speedup\": %.3f, \"drafted\": %lld, "
			       "\"accepted\": %lld, \"acceptance\": %.4f}%s\n",
			       alice_model_name(m), mode, sp.n_max, o->n, ta, tb, ta > 0 ? tb / ta : 0,
			       (long long)b.drafted, (long long)b.accepted, acc, rep + 1 < o->r ? "," : "");
		else
			printf("| %s | %s | %u | %d x %zu | %.1f | %.1f | %.2fx | %lld | %lld | %.1f%% |\n", alice_model_name(m),
			       mode, sp.n_max, o->n, N_PROMPTS, ta, tb, ta > 0 ? tb / ta : 0, (long long)b.drafted,
			       (long long)b.accepted, 100.0 * acc);
		fflush(stdout);
	}
	if (o->json)
		printf("]\n");
	rc = 0;
out:
	alice_model_free(d);
	alice_model_free(m);
	return rc;
}
