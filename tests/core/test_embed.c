// ctest-labels: unit
/* Embeddings (core/embed.c, the embeddings engine and context): vectors of
 * the qwen3 fixture (last-token pooling) and of a synthetic BERT equal
 * llama.cpp's (tests/data/embeddings/README.md says how those were made),
 * have unit length, and are bit-identical whether an input runs alone or
 * batched with others (CPU). */
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/embed.h"
#include "alice/engine.h"
#include "alice/gguf.h"
#include "alice/model.h"
#include "alice/quant.h"
#include "alice/synth.h"
#include "support/models.h"
#include "support/paths.h"

/* llama.cpp's vectors are f32 from the same weights and the same op order up
 * to summation order inside the kernels: 1e-4 per component is the bound
 * the task sets, some hundred times the differences we see. */
#define TOL 1e-4f
#define MAX_IN 8
#define MAX_D 4096

struct res {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int n_done;
	float vec[MAX_IN][MAX_D];
	int32_t n_embd[MAX_IN], n_vectors[MAX_IN];
	enum alice_engine_finish finish[MAX_IN];
};

struct slotref {
	struct res *r;
	int i;
};

static void on_event(const struct alice_engine_event *ev, void *user)
{
	struct slotref *s = user;
	struct res *r = s->r;
	if (ev->type != ALICE_ENGINE_EVENT_DONE)
		return;
	pthread_mutex_lock(&r->mu);
	r->finish[s->i] = ev->finish;
	r->n_embd[s->i] = ev->n_embd;
	r->n_vectors[s->i] = ev->n_vectors;
	if (ev->embd && ev->n_embd <= MAX_D)
		memcpy(r->vec[s->i], ev->embd, (size_t)ev->n_embd * sizeof(float));
	r->n_done++;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* Embeds inputs[0..n) through one engine, all submitted at once (so they
 * share steps when n_slots > 1). */
static void embed_all(struct alice_model *m, int pooling, uint32_t n_slots, int n, int32_t *const *toks,
		      const int32_t *n_toks, struct res *r)
{
	struct alice_engine_params p;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	alice_engine_params_default(&p);
	p.n_slots = n_slots;
	p.n_ctx = 512;
	p.embeddings = true;
	p.pooling = pooling;
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_OK, "%s", err.msg);
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	struct slotref refs[MAX_IN];
	for (int i = 0; i < n; i++) {
		refs[i] = (struct slotref){r, i};
		struct alice_engine_request q = {0};
		q.prompt = toks[i];
		q.n_prompt = n_toks[i];
		q.on_event = on_event;
		q.user = &refs[i];
		cr_assert_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_OK, "%s", err.msg);
	}
	pthread_mutex_lock(&r->mu);
	while (r->n_done < n)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	alice_engine_free(e);
	for (int i = 0; i < n; i++)
		cr_assert_eq(r->finish[i], ALICE_ENGINE_FINISH_STOP, "input %d did not finish", i);
}

/* The same through the context directly: every input in ONE decode call
 * (seq i = input i), or input `only` alone; pooled and normalised rows. */
static void context_embed(struct alice_model *m, enum alice_pooling pooling, int n, int32_t *const *toks,
			  const int32_t *n_toks, int only, float (*out)[MAX_D])
{
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = 512;
	cp.n_seq = (uint32_t)n;
	cp.embeddings = true;
	struct alice_context *c = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_context_create(m, &cp, &c, &err), ALICE_OK, "%s", err.msg);
	int32_t tok[512], pos[512], seq[512];
	bool want[512];
	int32_t nt = 0;
	for (int i = 0; i < n; i++) {
		if (only >= 0 && i != only)
			continue;
		for (int32_t k = 0; k < n_toks[i]; k++, nt++) {
			tok[nt] = toks[i][k];
			pos[nt] = k;
			seq[nt] = i;
			want[nt] = true;
		}
	}
	struct alice_batch b = {nt, tok, pos, seq, want, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	int32_t row = 0, d = alice_model_n_embd(m);
	for (int i = 0; i < n; i++) {
		if (only >= 0 && i != only)
			continue;
		alice_embd_pool(alice_context_embd(c, row), n_toks[i], d, pooling, out[i]);
		alice_embd_normalize(out[i], d);
		row += n_toks[i];
	}
	cr_assert_null(alice_context_logits(c, 0), "an embeddings context has no logits");
	alice_context_free(c);
}

struct ref {
	int n;
	int32_t *toks[MAX_IN];
	int32_t n_toks[MAX_IN];
	float *emb[MAX_IN];
	int32_t n_emb;
	char pooling[16];
};

static void ref_load(const char *name, struct ref *rf)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/tests/data/embeddings/%s", alice_test_source_dir(), name);
	struct json_object *o = json_object_from_file(path), *cases, *v;
	cr_assert_not_null(o, "cannot read %s", path);
	cr_assert(json_object_object_get_ex(o, "cases", &cases));
	cr_assert(json_object_object_get_ex(o, "pooling", &v));
	snprintf(rf->pooling, sizeof(rf->pooling), "%s", json_object_get_string(v));
	rf->n = (int)json_object_array_length(cases);
	cr_assert(rf->n > 0 && rf->n <= MAX_IN);
	for (int i = 0; i < rf->n; i++) {
		struct json_object *c = json_object_array_get_idx(cases, i), *t, *e;
		cr_assert(json_object_object_get_ex(c, "tokens", &t) && json_object_object_get_ex(c, "embedding", &e));
		rf->n_toks[i] = (int32_t)json_object_array_length(t);
		rf->toks[i] = malloc((size_t)rf->n_toks[i] * sizeof(int32_t));
		for (int32_t k = 0; k < rf->n_toks[i]; k++)
			rf->toks[i][k] = json_object_get_int(json_object_array_get_idx(t, (size_t)k));
		rf->n_emb = (int32_t)json_object_array_length(e);
		rf->emb[i] = malloc((size_t)rf->n_emb * sizeof(float));
		for (int32_t k = 0; k < rf->n_emb; k++)
			rf->emb[i][k] = (float)json_object_get_double(json_object_array_get_idx(e, (size_t)k));
	}
	json_object_put(o);
}

static void ref_free(struct ref *rf)
{
	for (int i = 0; i < rf->n; i++) {
		free(rf->toks[i]);
		free(rf->emb[i]);
	}
}

/* Our vectors vs llama.cpp's, unit length, and alone == batched bit for bit. */
static void check_model(const char *model_path, const char *ref_name)
{
	struct ref rf = {0};
	ref_load(ref_name, &rf);
	enum alice_pooling pooling;
	cr_assert(alice_pooling_parse(rf.pooling, &pooling));
	struct alice_model *m = alice_test_load_model(model_path, "cpu");
	cr_assert_eq(alice_model_n_embd(m), rf.n_emb);
	static struct res batched, alone;
	embed_all(m, pooling, 4, rf.n, rf.toks, rf.n_toks, &batched);
	float worst = 0.0f;
	for (int i = 0; i < rf.n; i++) {
		cr_assert_eq(batched.n_vectors[i], 1);
		double len = 0;
		for (int32_t k = 0; k < rf.n_emb; k++) {
			float d = fabsf(batched.vec[i][k] - rf.emb[i][k]);
			worst = d > worst ? d : worst;
			cr_expect(d <= TOL, "%s input %d [%d]: ours %.7g, llama.cpp %.7g", ref_name, i, k,
				  batched.vec[i][k], rf.emb[i][k]);
			len += (double)batched.vec[i][k] * batched.vec[i][k];
		}
		cr_expect(fabs(sqrt(len) - 1.0) < 1e-5, "input %d: length %.8f", i, sqrt(len));
		embed_all(m, pooling, 1, 1, &rf.toks[i], &rf.n_toks[i], &alone);
		cr_expect(memcmp(alone.vec[0], batched.vec[i], (size_t)rf.n_emb * sizeof(float)) == 0,
			  "input %d: alone and with others in the engine differ", i);
	}
	/* one decode call holding every input vs each alone: bit for bit */
	static float all[MAX_IN][MAX_D], one[MAX_IN][MAX_D];
	context_embed(m, pooling, rf.n, rf.toks, rf.n_toks, -1, all);
	for (int i = 0; i < rf.n; i++) {
		context_embed(m, pooling, rf.n, rf.toks, rf.n_toks, i, one);
		cr_expect(memcmp(one[i], all[i], (size_t)rf.n_emb * sizeof(float)) == 0,
			  "input %d: alone and in a batch of %d differ", i, rf.n);
		cr_expect(memcmp(one[i], batched.vec[i], (size_t)rf.n_emb * sizeof(float)) == 0,
			  "input %d: the context and the engine differ", i);
	}
	fprintf(stderr, "%s: max abs diff vs llama.cpp %.3g over %d inputs\n", ref_name, (double)worst, rf.n);
	alice_model_free(m);
	ref_free(&rf);
}

Test(embed, qwen3_last_matches_llama_cpp)
{
	check_model(alice_test_path(alice_test_fixtures_dir(), "models/qwen3-BF16.gguf"), "qwen3-BF16-last.json");
}

/* The synthetic BERT the references were computed on: what `alice-mkmodel
 * --arch bert --type F32 --vocab ggml-vocab-bert-bge.gguf` writes (seed 42);
 * one file per test (Criterion runs tests in parallel processes). */
static const char *bert_model(const char *tag)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/test-embed-bert-F32-%s.gguf", alice_test_build_dir(), tag);
	char vocab_path[4096];
	snprintf(vocab_path, sizeof(vocab_path), "%s/vocab/ggml-vocab-bert-bge.gguf", alice_test_fixtures_dir());
	struct alice_gguf *vocab = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_gguf_open(vocab_path, &vocab, &err), ALICE_OK, "%s", err.msg);
	struct alice_synth_params p = {
		.arch = "bert", .shape = "", .type = ALICE_TYPE_F32, .tied = true, .vocab = vocab, .seed = 42, .n_threads = 2};
	enum alice_status st = alice_synth_write(&p, path, &err);
	alice_gguf_close(vocab);
	cr_assert_eq(st, ALICE_OK, "synthetic bert: %s", err.msg);
	return path;
}

Test(embed, bert_mean_matches_llama_cpp)
{
	check_model(bert_model("mean"), "bert-synth-F32-mean.json");
}

Test(embed, bert_cls_matches_llama_cpp)
{
	check_model(bert_model("cls"), "bert-synth-F32-cls.json");
}

/* An encoder needs an embeddings context, and no more positions than its
 * position embeddings have. */
Test(embed, bert_context_errors)
{
	struct alice_model *m = alice_test_load_model(bert_model("errors"), "cpu");
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	struct alice_context *c = NULL;
	struct alice_error err = {{0}};
	cp.n_ctx = 128;
	cr_expect_eq(alice_context_create(m, &cp, &c, &err), ALICE_ERR_UNSUPPORTED);
	cr_expect(strstr(err.msg, "only computes embeddings") != NULL, "%s", err.msg);
	cp.embeddings = true;
	cp.n_ctx = 4096;
	cr_expect_eq(alice_context_create(m, &cp, &c, &err), ALICE_ERR_RANGE);
	cr_expect(strstr(err.msg, "positions for 512 tokens") != NULL, "%s", err.msg);
	cp.n_ctx = 128;
	cr_assert_eq(alice_context_create(m, &cp, &c, &err), ALICE_OK, "%s", err.msg);
	/* a sequence split over two decode calls cannot attend bidirectionally */
	int32_t tok[2] = {101, 102}, pos[2] = {0, 1}, seq[2] = {0, 0};
	struct alice_batch b = {1, tok, pos, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	cr_assert_eq(alice_context_decode(c, &b, &err), ALICE_OK, "%s", err.msg);
	struct alice_batch b2 = {1, tok + 1, pos + 1, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	cr_expect_eq(alice_context_decode(c, &b2, &err), ALICE_ERR_RANGE);
	alice_context_free(c);
	alice_model_free(m);
}

/* The engine's own checks: an embeddings input must fit one batch; the
 * pooling comes from the GGUF unless overridden; a generation engine has none. */
Test(embed, engine_limits_and_pooling)
{
	struct alice_model *m = alice_test_load_model(bert_model("engine"), "cpu");
	struct alice_engine_params p;
	struct alice_engine *e = NULL;
	struct alice_error err = {{0}};
	alice_engine_params_default(&p);
	p.n_slots = 2;
	p.n_batch = 8;
	p.embeddings = true;
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_OK, "%s", err.msg);
	cr_expect_eq(alice_engine_pooling(e), ALICE_POOLING_MEAN, "the GGUF's bert.pooling_type");
	cr_expect_eq(alice_engine_max_embd_tokens(e), 8u);
	int32_t toks[9] = {101, 7592, 2088, 7592, 2088, 7592, 2088, 7592, 102};
	struct alice_engine_request q = {0};
	q.prompt = toks;
	q.n_prompt = 9;
	q.on_event = on_event;
	cr_expect_eq(alice_engine_submit(e, &q, NULL, &err), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "at most 8") != NULL, "%s", err.msg);
	alice_engine_free(e);
	p.pooling = ALICE_POOLING_CLS;
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_OK, "%s", err.msg);
	cr_expect_eq(alice_engine_pooling(e), ALICE_POOLING_CLS, "--pooling overrides the GGUF");
	alice_engine_free(e);
	p.embeddings = false; /* an encoder cannot generate */
	cr_expect_eq(alice_engine_create(m, &p, &e, &err), ALICE_ERR_UNSUPPORTED);
	alice_model_free(m);

	m = alice_test_load_model(alice_test_path(alice_test_fixtures_dir(), "models/qwen3-BF16.gguf"), "cpu");
	alice_engine_params_default(&p);
	p.n_slots = 1;
	p.n_ctx = 64;
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_OK, "%s", err.msg);
	cr_expect_eq(alice_engine_pooling(e), -1, "a generation engine has no pooling");
	alice_engine_free(e);
	p.embeddings = true; /* no pooling_type in the file: none */
	cr_assert_eq(alice_engine_create(m, &p, &e, &err), ALICE_OK, "%s", err.msg);
	cr_expect_eq(alice_engine_pooling(e), ALICE_POOLING_NONE);
	alice_engine_free(e);
	alice_model_free(m);
}

Test(embed, pooling_and_normalize)
{
	float rows[6] = {1, 2, 3, 4, 5, 6}, out[2];
	alice_embd_pool(rows, 3, 2, ALICE_POOLING_MEAN, out);
	cr_expect(out[0] == 3.0f && out[1] == 4.0f);
	alice_embd_pool(rows, 3, 2, ALICE_POOLING_CLS, out);
	cr_expect(out[0] == 1.0f && out[1] == 2.0f);
	alice_embd_pool(rows, 3, 2, ALICE_POOLING_LAST, out);
	cr_expect(out[0] == 5.0f && out[1] == 6.0f);
	float v[2] = {3, 4}, z[2] = {0, 0};
	alice_embd_normalize(v, 2);
	cr_expect(fabsf(v[0] - 0.6f) < 1e-7f && fabsf(v[1] - 0.8f) < 1e-7f);
	alice_embd_normalize(z, 2);
	cr_expect(z[0] == 0.0f && z[1] == 0.0f);
	enum alice_pooling p;
	cr_expect(alice_pooling_parse("cls", &p) && p == ALICE_POOLING_CLS);
	cr_expect(!alice_pooling_parse("max", &p));
}
