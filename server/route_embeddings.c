/* route_embeddings.c — POST /v1/embeddings (and /embeddings): OpenAI's
 * embeddings API on an embeddings engine (engine.h).
 *
 * `input` is a string, an array of strings, an array of token ids or an
 * array of arrays of token ids; each input is one engine request, so the
 * inputs of one call (and of concurrent calls) are batched together. The
 * engine hands back each input's L2-normalised vector; the reply lists
 * them in input order, as floats or as base64 of little-endian float32.
 *
 * Which server serves what (llama-server's rule, README): /v1/embeddings
 * needs an embeddings server (--embeddings, or a GGUF that is an embedding
 * model: an encoder such as BERT, or one with <arch>.pooling_type), and
 * such a server refuses the generation routes (http.c, SRV_ROUTE_GENERATE).
 * Pooling "none" gives one vector per token, which OpenAI's shape cannot
 * carry: /v1/embeddings refuses it, /embeddings returns the per-token
 * arrays.
 *
 * The inputs are tokenized here, on the event thread (bounded by
 * --max-body); unlike gen_prepare's grammar work, there is nothing slower
 * than the tokenizer to move to a worker. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/embed.h"
#include "alice/log.h"
#include "alice/tokenizer.h"
#include "reply.h"
#include "routes.h"

struct embed_in {
	int32_t *toks;
	size_t n;
	uint64_t engine_id;
	float *vec;      /* n_vectors * n_embd, our copy */
	int32_t n_vectors;
	bool live;
};

struct embed_req {
	struct srv *srv;
	struct srv_http http; /* http.req NULL once the client is gone */
	struct evhttp_connection *evcon;
	struct embed_in *in;
	size_t n_in, n_live;
	bool base64, per_token;
	char model[128];
	int32_t n_embd;
	int64_t prompt_tokens;
	char *error; /* the first failure */
	bool replied; /* answered early (a submit failed): the rest only drains */
	enum alice_status error_status;
};

/* An engine DONE, copied for the event thread. */
struct embed_msg {
	struct srv_msg base;
	struct embed_req *r;
	size_t i;
	enum alice_engine_finish finish;
	enum alice_status error_status;
	char error[256];
	float *vec;
	int32_t n_vectors;
};

static void embed_free(struct embed_req *r)
{
	if (r->evcon)
		evhttp_connection_set_closecb(r->evcon, NULL, NULL);
	for (size_t i = 0; r->in && i < r->n_in; i++) {
		free(r->in[i].toks);
		free(r->in[i].vec);
	}
	free(r->in);
	free(r->error);
	r->srv->n_gens--; /* a graceful shutdown waits for us like for a generation */
	free(r);
}

static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
	struct embed_req *r = arg;
	r->evcon = NULL;
	if (r->http.req && !evhttp_request_get_connection(r->http.req))
		evhttp_request_free(r->http.req); /* detached by evhttp: ours to free */
	r->http.req = NULL;
	for (size_t i = 0; i < r->n_in; i++)
		if (r->in[i].live)
			alice_engine_cancel(r->srv->engine, r->in[i].engine_id);
	(void)evcon;
}

static void b64(const unsigned char *p, size_t n, char *out)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = '\0';
}

static struct json_object *vector_json(const struct embed_req *r, const float *v)
{
	if (r->base64) {
		/* little-endian float32, as OpenAI's base64 format */
		size_t nb = (size_t)r->n_embd * 4;
		unsigned char *le = malloc(nb);
		char *s = malloc(nb / 3 * 4 + 8);
		struct json_object *o = NULL;
		if (le && s) {
			for (int32_t k = 0; k < r->n_embd; k++) {
				uint32_t u;
				memcpy(&u, &v[k], 4);
				for (int b = 0; b < 4; b++)
					le[4 * k + b] = (unsigned char)(u >> (8 * b));
			}
			b64(le, nb, s);
			o = json_object_new_string(s);
		}
		free(le);
		free(s);
		return o;
	}
	struct json_object *a = json_object_new_array_ext(r->n_embd);
	for (int32_t k = 0; a && k < r->n_embd; k++)
		json_object_array_add(a, json_object_new_double((double)v[k]));
	return a;
}

static void embed_reply(struct embed_req *r)
{
	struct srv_api_error e;
	if (r->error) {
		bool client = r->error_status == ALICE_ERR_INVALID || r->error_status == ALICE_ERR_RANGE;
		if (client)
			srv_api_error_invalid(&e, "input", "%s", r->error);
		else
			srv_api_error_set(&e, 500, "server_error", NULL, NULL, "embedding failed: %s", r->error);
		srv_reply_error(&r->http, &e);
		return;
	}
	r->http.counts.prompt_tokens = r->prompt_tokens; /* the log line and alice_prompt_tokens_total */
	struct json_object *data = json_object_new_array_ext((int)r->n_in);
	for (size_t i = 0; i < r->n_in; i++) {
		struct embed_in *in = &r->in[i];
		struct json_object *item = json_object_new_object(), *emb;
		json_object_object_add(item, "object", json_object_new_string("embedding"));
		json_object_object_add(item, "index", json_object_new_int((int)i));
		if (r->per_token) {
			emb = json_object_new_array_ext(in->n_vectors);
			for (int32_t t = 0; t < in->n_vectors; t++)
				json_object_array_add(emb, vector_json(r, in->vec + (size_t)t * (size_t)r->n_embd));
		} else {
			emb = vector_json(r, in->vec);
		}
		json_object_object_add(item, "embedding", emb);
		json_object_array_add(data, item);
	}
	struct json_object *o = json_object_new_object(), *usage = json_object_new_object();
	json_object_object_add(o, "object", json_object_new_string("list"));
	json_object_object_add(o, "data", data);
	json_object_object_add(o, "model", json_object_new_string(r->model));
	json_object_object_add(usage, "prompt_tokens", json_object_new_int64(r->prompt_tokens));
	json_object_object_add(usage, "total_tokens", json_object_new_int64(r->prompt_tokens));
	json_object_object_add(o, "usage", usage);
	srv_reply_json(&r->http, 200, o);
}

static void on_msg(struct srv_msg *base, void *ctx)
{
	struct embed_msg *m = (struct embed_msg *)base;
	struct embed_req *r = m->r;
	struct embed_in *in = &r->in[m->i];
	(void)ctx;
	in->live = false;
	r->n_live--;
	if (m->finish == ALICE_ENGINE_FINISH_STOP && m->vec) {
		in->vec = m->vec;
		in->n_vectors = m->n_vectors;
		m->vec = NULL;
	} else if (!r->error) {
		r->error = strdup(m->error[0] ? m->error
					       : m->finish == ALICE_ENGINE_FINISH_CANCELLED ? "cancelled" : "out of memory");
		r->error_status = m->error[0] ? m->error_status : ALICE_ERR_BACKEND;
	}
	free(m->vec);
	free(m);
	if (r->n_live > 0)
		return;
	if (r->replied)
		; /* answered when the submit failed */
	else if (r->http.req)
		embed_reply(r);
	else
		srv_request_done(&r->http, 499);
	embed_free(r);
}

/* Engine thread: copy the vectors and post them. */
static void on_engine_event(const struct alice_engine_event *ev, void *user)
{
	struct embed_msg *m = user; /* allocated before the submit */
	if (ev->type != ALICE_ENGINE_EVENT_DONE)
		return;
	m->finish = ev->finish;
	m->error_status = ev->error_status;
	if (ev->error)
		snprintf(m->error, sizeof(m->error), "%s", ev->error);
	if (ev->finish == ALICE_ENGINE_FINISH_STOP && ev->embd) {
		size_t nf = (size_t)ev->n_vectors * (size_t)ev->n_embd;
		if ((m->vec = malloc(nf * sizeof(float)))) {
			memcpy(m->vec, ev->embd, nf * sizeof(float));
			m->n_vectors = ev->n_vectors;
		}
	}
	srv_msgq_post(&m->r->srv->q, &m->base);
}

/* ---- parsing ---- */

static bool tokens_of(struct srv *s, struct json_object *a, size_t idx, struct embed_in *in, struct srv_api_error *e)
{
	size_t n = json_object_array_length(a);
	int32_t n_vocab = alice_model_n_vocab(s->model);
	if (n == 0) {
		srv_api_error_invalid(e, "input", "input[%zu] is an empty array of token ids", idx);
		return false;
	}
	if (!(in->toks = malloc(n * sizeof(int32_t)))) {
		srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
		return false;
	}
	for (size_t k = 0; k < n; k++) {
		struct json_object *t = json_object_array_get_idx(a, k);
		int64_t v = t && json_object_is_type(t, json_type_int) ? json_object_get_int64(t) : -1;
		if (v < 0 || v >= n_vocab) {
			srv_api_error_invalid(e, "input", "input token %zu of input %zu must be a token id in [0, %d)", k,
					      idx, n_vocab);
			return false;
		}
		in->toks[k] = (int32_t)v;
	}
	in->n = n;
	return true;
}

static bool text_of(struct srv *s, struct json_object *str, size_t idx, struct embed_in *in, struct srv_api_error *e)
{
	size_t len = (size_t)json_object_get_string_len(str);
	struct alice_error aerr = {{0}};
	if (len == 0) {
		srv_api_error_invalid(e, "input", "input %zu is an empty string", idx);
		return false;
	}
	/* special tokens as the model adds them (BOS, or BERT's [CLS] ... [SEP]) */
	if (alice_tokenizer_encode(alice_model_tokenizer(s->model), json_object_get_string(str), len, true, false,
				   &in->toks, &in->n, &aerr) != ALICE_OK) {
		srv_api_error_invalid(e, "input", "cannot tokenize input %zu: %s", idx, aerr.msg);
		return false;
	}
	if (in->n == 0) {
		srv_api_error_invalid(e, "input", "input %zu has no tokens", idx);
		return false;
	}
	return true;
}

/* The inputs of `input`; false with e set. */
static bool parse_input(struct srv *s, struct json_object *v, struct embed_req *r, struct srv_api_error *e)
{
	const char *shape = "'input' must be a string, an array of strings, an array of token ids or an array of "
			    "arrays of token ids";
	bool one = json_object_is_type(v, json_type_string) ||
		   (json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0 &&
		    json_object_is_type(json_object_array_get_idx(v, 0), json_type_int));
	if (one && !(r->in = calloc(1, sizeof(*r->in)))) {
		srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
		return false;
	}
	if (json_object_is_type(v, json_type_string)) {
		r->n_in = 1;
		return text_of(s, v, 0, &r->in[0], e);
	}
	if (!json_object_is_type(v, json_type_array)) {
		srv_api_error_invalid(e, "input", "%s", shape);
		return false;
	}
	size_t n = json_object_array_length(v);
	if (n == 0) {
		srv_api_error_invalid(e, "input", "'input' is empty");
		return false;
	}
	struct json_object *first = json_object_array_get_idx(v, 0);
	if (first && json_object_is_type(first, json_type_int)) { /* one input of token ids */
		r->n_in = 1;
		return tokens_of(s, v, 0, &r->in[0], e);
	}
	/* every input is a sequence: all of them must fit the slots and the queue at once */
	size_t max_in = (size_t)s->cfg.queue + (size_t)s->cfg.n_parallel;
	if (n > max_in) {
		srv_api_error_invalid(e, "input",
				      "'input' has %zu items; one request may have at most %zu (--parallel %d + --queue %d)",
				      n, max_in, s->cfg.n_parallel, s->cfg.queue);
		return false;
	}
	if (!(r->in = calloc(n, sizeof(*r->in)))) {
		srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
		return false;
	}
	r->n_in = n;
	for (size_t i = 0; i < n; i++) {
		struct json_object *it = json_object_array_get_idx(v, i);
		bool ok;
		if (it && json_object_is_type(it, json_type_string))
			ok = text_of(s, it, i, &r->in[i], e);
		else if (it && json_object_is_type(it, json_type_array))
			ok = tokens_of(s, it, i, &r->in[i], e);
		else {
			srv_api_error_invalid(e, "input", "input[%zu]: %s", i, shape);
			ok = false;
		}
		if (!ok)
			return false;
	}
	return true;
}

static void handle(struct srv *s, struct srv_http *h, const char *body, size_t len, bool oai)
{
	struct srv_api_error e;
	int pooling = alice_engine_pooling(s->engine);
	if (pooling < 0) {
		srv_api_error_invalid(&e, NULL,
				      "this server does not serve embeddings: start it with --embeddings (the model "
				      "%s is not an embedding model)",
				      s->model_id);
		srv_reply_error(h, &e);
		return;
	}
	if (oai && pooling == ALICE_POOLING_NONE) {
		srv_api_error_invalid(&e, NULL,
				      "pooling 'none' gives one vector per token, which /v1/embeddings cannot return; "
				      "use /embeddings, or start the server with --pooling mean|cls|last");
		srv_reply_error(h, &e);
		return;
	}
	struct json_object *o = srv_json_parse_object(body, len, &e), *v;
	if (!o) {
		srv_reply_error(h, &e);
		return;
	}
	struct embed_req *r = calloc(1, sizeof(*r));
	if (!r) {
		json_object_put(o);
		srv_reply_nomem(h);
		return;
	}
	r->srv = s;
	r->http = *h;
	r->n_embd = alice_model_n_embd(s->model);
	r->per_token = pooling == ALICE_POOLING_NONE;
	s->n_gens++;
	snprintf(r->model, sizeof(r->model), "%s", s->model_id);
	if (json_object_object_get_ex(o, "model", &v) && !json_object_is_type(v, json_type_null)) {
		if (!json_object_is_type(v, json_type_string)) {
			srv_api_error_invalid(&e, "model", "'model' must be a string");
			goto fail;
		}
		snprintf(r->model, sizeof(r->model), "%s", json_object_get_string(v));
	}
	if (json_object_object_get_ex(o, "encoding_format", &v) && !json_object_is_type(v, json_type_null)) {
		const char *f = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
		if (strcmp(f, "float") && strcmp(f, "base64")) {
			srv_api_error_invalid(&e, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
			goto fail;
		}
		r->base64 = strcmp(f, "base64") == 0;
	}
	if (json_object_object_get_ex(o, "dimensions", &v) && !json_object_is_type(v, json_type_null) &&
	    (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) != r->n_embd)) {
		srv_api_error_invalid(&e, "dimensions", "'dimensions' must be the model's embedding size %d", r->n_embd);
		goto fail;
	}
	if (!json_object_object_get_ex(o, "input", &v)) {
		srv_api_error_invalid(&e, "input", "'input' is required");
		goto fail;
	}
	if (!parse_input(s, v, r, &e))
		goto fail;
	uint32_t max = alice_engine_max_embd_tokens(s->engine);
	for (size_t i = 0; i < r->n_in; i++) {
		if (r->in[i].n > max) {
			srv_api_error_invalid(&e, "input",
					      "input %zu has %zu tokens; at most %u fit the context and batch "
					      "(--ctx-size, --batch-size)",
					      i, r->in[i].n, max);
			goto fail;
		}
		r->prompt_tokens += (int64_t)r->in[i].n;
	}
	json_object_put(o);
	o = NULL;
	/* every message exists before the first submit: the engine thread never allocates to report */
	struct embed_msg **msgs = calloc(r->n_in, sizeof(*msgs));
	bool nomem = !msgs;
	for (size_t i = 0; !nomem && i < r->n_in; i++)
		nomem = !(msgs[i] = calloc(1, sizeof(**msgs)));
	if (nomem) {
		for (size_t i = 0; msgs && i < r->n_in; i++)
			free(msgs[i]);
		free(msgs);
		srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
		goto fail;
	}
	size_t i = 0;
	for (; i < r->n_in; i++) {
		msgs[i]->base.run = on_msg;
		msgs[i]->r = r;
		msgs[i]->i = i;
		struct alice_engine_request q = {0};
		q.prompt = r->in[i].toks;
		q.n_prompt = (int32_t)r->in[i].n;
		q.on_event = on_engine_event;
		q.user = msgs[i];
		struct alice_error aerr = {{0}};
		enum alice_status st = alice_engine_submit(s->engine, &q, &r->in[i].engine_id, &aerr);
		if (st != ALICE_OK) {
			if (st == ALICE_ERR_RANGE)
				srv_api_error_set(&e, 503, "unavailable_error", "queue_full", NULL,
						  "the server is busy (%s); retry shortly", aerr.msg);
			else if (st == ALICE_ERR_INVALID)
				srv_api_error_invalid(&e, "input", "input %zu: %s", i, aerr.msg);
			else
				srv_api_error_set(&e, 503, "unavailable_error", NULL, NULL, "cannot queue the request: %s",
						  aerr.msg);
			break;
		}
		r->in[i].live = true;
		r->n_live++;
	}
	for (size_t k = i; k < r->n_in; k++)
		free(msgs[k]); /* never submitted */
	free(msgs);
	if (i < r->n_in) {
		/* the submitted ones still report; reply now and let them drain */
		for (size_t k = 0; k < i; k++)
			alice_engine_cancel(s->engine, r->in[k].engine_id);
		srv_reply_error(&r->http, &e);
		r->replied = true;
		if (r->n_live == 0)
			embed_free(r);
		return;
	}
	r->evcon = evhttp_request_get_connection(r->http.req);
	if (r->evcon)
		evhttp_connection_set_closecb(r->evcon, on_conn_close, r);
	return;
fail:
	json_object_put(o);
	srv_reply_error(&r->http, &e);
	embed_free(r);
}

void srv_route_embeddings(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	handle(s, h, body, len, true);
}

void srv_route_embeddings_native(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	handle(s, h, body, len, false);
}
