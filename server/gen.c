/* gen.c — POST /v1/chat/completions and /v1/completions: prompt rendering,
 * tokenization, context checks, submission of one engine request per choice,
 * and the replies (one JSON body, or an SSE stream of chunks).
 *
 * A struct srv_gen lives from the request until every choice's terminal
 * engine event has arrived AND the reply is done (or the client is gone).
 * A client that disconnects cancels its choices at once: the connection's
 * close callback covers failed writes, and a read watcher on the socket
 * notices a peer that closes while nothing is being written. */
#define _GNU_SOURCE
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>

#include "alice/grammar.h"
#include "alice/log.h"
#include "alice/tokenizer.h"
#include "sse.h"

struct srv_choice {
	struct srv_gen *gen;
	int index;
	int prompt_index;
	uint64_t engine_id;
	bool live; /* submitted, terminal event not yet seen */
	char *text;
	size_t len, cap;
	size_t text_offset; /* completions logprobs: bytes of token pieces so far */
	struct json_object *lp;     /* chat: content array; completions: legacy object */
	enum alice_engine_finish finish;
	int32_t n_prompt, n_completion;
	int32_t n_cached; /* prompt tokens reused from the prefix cache */
	double prefill_ms, decode_ms;
	char *error;
	enum alice_status error_status;
};

struct srv_gen {
	struct srv_gen *next, *prev;
	struct srv *srv;
	struct srv_http http;
	struct evhttp_connection *evcon;
	struct event *watch;
	enum srv_kind kind;
	bool stream, include_usage, logprobs, echo;
	int top_logprobs;
	char id[48];
	int64_t created;
	struct srv_choice *choices;
	size_t n_choices, n_live;
	int64_t prompt_tokens; /* counted once per prompt */
	bool client_gone, replied;
};

/* ---- lifetime ---- */

int srv_gen_count(const struct srv *s)
{
	int n = 0;
	for (const struct srv_gen *g = s->gens; g; g = g->next)
		n++;
	return n;
}

static void gen_unwatch(struct srv_gen *g)
{
	if (g->watch) {
		event_free(g->watch);
		g->watch = NULL;
	}
	if (g->evcon) {
		evhttp_connection_set_closecb(g->evcon, NULL, NULL);
		g->evcon = NULL;
	}
}

static void gen_free(struct srv_gen *g)
{
	struct srv *s = g->srv;
	gen_unwatch(g);
	if (g->prev)
		g->prev->next = g->next;
	else if (s->gens == g)
		s->gens = g->next;
	if (g->next)
		g->next->prev = g->prev;
	for (size_t i = 0; i < g->n_choices; i++) {
		free(g->choices[i].text);
		free(g->choices[i].error);
		json_object_put(g->choices[i].lp);
	}
	free(g->choices);
	free(g);
}

static void gen_cancel(struct srv_gen *g)
{
	for (size_t i = 0; i < g->n_choices; i++)
		if (g->choices[i].live)
			alice_engine_cancel(g->srv->engine, g->choices[i].engine_id);
}

void srv_gen_cancel_all(struct srv *s)
{
	for (struct srv_gen *g = s->gens; g; g = g->next)
		gen_cancel(g);
}

/* evhttp is closing the connection (failed write, or server shutdown). */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
	struct srv_gen *g = arg;
	if (g->watch) {
		event_free(g->watch);
		g->watch = NULL;
	}
	g->evcon = NULL; /* being freed; our close callback goes with it */
	if (g->http.req && !evhttp_request_get_connection(g->http.req)) {
		/* detached by evhttp after a network error: the request is ours to free */
		evhttp_request_free(g->http.req);
	}
	g->http.req = NULL;
	if (!g->client_gone) {
		g->client_gone = true;
		alice_log(ALICE_LOG_INFO, "req %llu: client disconnected; cancelling",
			  (unsigned long long)g->http.id);
	}
	gen_cancel(g);
	(void)evcon;
}

/* Read readiness on a connection we are not reading from: EOF or error means
 * the client went away. Pipelined bytes: stop watching (evhttp will read them). */
static void on_watch(evutil_socket_t fd, short what, void *arg)
{
	struct srv_gen *g = arg;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	event_free(g->watch);
	g->watch = NULL;
	if (n > 0)
		return;
	if (!g->client_gone) {
		g->client_gone = true;
		alice_log(ALICE_LOG_INFO, "req %llu: client disconnected; cancelling",
			  (unsigned long long)g->http.id);
	}
	gen_cancel(g);
	(void)what;
}

/* ---- JSON pieces ---- */

static struct json_object *json_str_n(const char *s, size_t n)
{
	return json_object_new_string_len(s, (int)n);
}

static struct json_object *token_bytes_json(const char *p, size_t n)
{
	struct json_object *a = json_object_new_array_ext((int)n);
	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_int((unsigned char)p[i]));
	return a;
}

static size_t token_piece(struct srv *s, int32_t id, char *buf, size_t cap)
{
	size_t n = alice_tokenizer_piece(alice_model_tokenizer(s->model), id, false, buf, cap);
	return n < cap ? n : cap;
}

/* OpenAI chat format: {token, logprob, bytes, top_logprobs:[{token, logprob, bytes}]} */
static struct json_object *chat_logprob_entry(struct srv *s, const struct alice_engine_event *ev)
{
	char buf[256];
	size_t n = token_piece(s, ev->token.token, buf, sizeof(buf)), cl;
	char *clean = srv_utf8_sanitize(buf, n, &cl);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "token", clean ? json_str_n(clean, cl) : json_object_new_string(""));
	free(clean);
	json_object_object_add(o, "logprob", json_object_new_double(ev->token.logprob));
	json_object_object_add(o, "bytes", token_bytes_json(buf, n));
	struct json_object *top = json_object_new_array();
	for (int32_t i = 0; i < ev->n_top; i++) {
		struct json_object *t = json_object_new_object();
		n = token_piece(s, ev->top[i].token, buf, sizeof(buf));
		clean = srv_utf8_sanitize(buf, n, &cl);
		json_object_object_add(t, "token", clean ? json_str_n(clean, cl) : json_object_new_string(""));
		free(clean);
		json_object_object_add(t, "logprob", json_object_new_double(ev->top[i].logprob));
		json_object_object_add(t, "bytes", token_bytes_json(buf, n));
		json_object_array_add(top, t);
	}
	json_object_object_add(o, "top_logprobs", top);
	return o;
}

static struct json_object *legacy_logprobs_new(void)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "tokens", json_object_new_array());
	json_object_object_add(o, "token_logprobs", json_object_new_array());
	json_object_object_add(o, "top_logprobs", json_object_new_array());
	json_object_object_add(o, "text_offset", json_object_new_array());
	return o;
}

/* Completions (legacy) format: parallel arrays; top_logprobs as {token: logprob}. */
static void legacy_logprob_add(struct srv *s, struct json_object *lp, size_t *offset,
			       const struct alice_engine_event *ev, int top_n)
{
	char buf[256];
	size_t n = token_piece(s, ev->token.token, buf, sizeof(buf)), cl;
	char *clean = srv_utf8_sanitize(buf, n, &cl);
	struct json_object *a;
	json_object_object_get_ex(lp, "tokens", &a);
	json_object_array_add(a, clean ? json_str_n(clean, cl) : json_object_new_string(""));
	free(clean);
	json_object_object_get_ex(lp, "token_logprobs", &a);
	json_object_array_add(a, json_object_new_double(ev->token.logprob));
	json_object_object_get_ex(lp, "top_logprobs", &a);
	if (top_n > 0) {
		struct json_object *t = json_object_new_object();
		for (int32_t i = 0; i < ev->n_top; i++) {
			char b2[256];
			size_t n2 = token_piece(s, ev->top[i].token, b2, sizeof(b2) - 1), c2;
			char *k = srv_utf8_sanitize(b2, n2, &c2);
			if (k && !json_object_object_get_ex(t, k, NULL))
				json_object_object_add(t, k, json_object_new_double(ev->top[i].logprob));
			free(k);
		}
		json_object_array_add(a, t);
	} else {
		json_object_array_add(a, NULL);
	}
	json_object_object_get_ex(lp, "text_offset", &a);
	json_object_array_add(a, json_object_new_int64((int64_t)*offset));
	*offset += n;
}

static const char *finish_reason(enum alice_engine_finish f)
{
	return f == ALICE_ENGINE_FINISH_STOP ? "stop" : "length";
}

static void usage_totals(const struct srv_gen *g, int64_t *completion, double *prefill, double *decode)
{
	*completion = 0;
	*prefill = *decode = 0;
	for (size_t i = 0; i < g->n_choices; i++) {
		const struct srv_choice *c = &g->choices[i];
		*completion += c->n_completion;
		if (c->prefill_ms > *prefill)
			*prefill = c->prefill_ms;
		if (c->decode_ms > *decode)
			*decode = c->decode_ms;
	}
}

/* A measurement rounded for reading (3 decimals), still a JSON number. */
static struct json_object *json_measure(double d)
{
	char b[64];
	snprintf(b, sizeof(b), "%.3f", d);
	return json_object_new_double_s(d, b);
}

/* Cached prompt tokens, counted once per prompt like prompt_tokens. */
static int64_t cached_total(const struct srv_gen *g)
{
	int64_t cached = 0;
	for (size_t i = 0; i < g->n_choices; i++)
		if (i == 0 || g->choices[i].prompt_index != g->choices[i - 1].prompt_index)
			cached += g->choices[i].n_cached;
	return cached;
}

static struct json_object *usage_json(const struct srv_gen *g)
{
	int64_t completion;
	double prefill, decode;
	usage_totals(g, &completion, &prefill, &decode);
	/* generation speed after each choice's first token */
	double tps = decode > 0 ? (double)(completion - (int64_t)g->n_choices) * 1000.0 / decode : 0.0;
	if (tps < 0)
		tps = 0;
	struct json_object *u = json_object_new_object();
	json_object_object_add(u, "prompt_tokens", json_object_new_int64(g->prompt_tokens));
	json_object_object_add(u, "completion_tokens", json_object_new_int64(completion));
	json_object_object_add(u, "total_tokens", json_object_new_int64(g->prompt_tokens + completion));
	struct json_object *details = json_object_new_object();
	json_object_object_add(details, "cached_tokens", json_object_new_int64(cached_total(g)));
	json_object_object_add(u, "prompt_tokens_details", details);
	json_object_object_add(u, "tokens_per_second", json_measure(tps));
	json_object_object_add(u, "prefill_ms", json_measure(prefill));
	json_object_object_add(u, "decode_ms", json_measure(decode));
	return u;
}

static struct json_object *chunk_base(const struct srv_gen *g)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(g->id));
	json_object_object_add(o, "object", json_object_new_string(g->kind == SRV_KIND_CHAT ? "chat.completion.chunk"
											   : "text_completion"));
	json_object_object_add(o, "created", json_object_new_int64(g->created));
	json_object_object_add(o, "model", json_object_new_string(g->srv->model_id));
	json_object_object_add(o, "system_fingerprint", json_object_new_string("alice-llm-" ALICE_VERSION));
	return o;
}

/* One streamed chunk for one choice. text may be NULL (no content key in
 * chat deltas); finish NULL = still running; lp borrowed or NULL. */
static void send_chunk(struct srv_gen *g, const struct srv_choice *c, const char *text, size_t len,
		       bool role, const char *finish, struct json_object *lp)
{
	if (!g->http.req)
		return;
	struct json_object *o = chunk_base(g);
	struct json_object *ch = json_object_new_object();
	json_object_object_add(ch, "index", json_object_new_int(c->index));
	if (g->kind == SRV_KIND_CHAT) {
		struct json_object *d = json_object_new_object();
		if (role)
			json_object_object_add(d, "role", json_object_new_string("assistant"));
		if (text)
			json_object_object_add(d, "content", json_str_n(text, len));
		json_object_object_add(ch, "delta", d);
		if (lp) {
			struct json_object *l = json_object_new_object();
			json_object_object_add(l, "content", json_object_get(lp));
			json_object_object_add(ch, "logprobs", l);
		} else {
			json_object_object_add(ch, "logprobs", NULL);
		}
	} else {
		json_object_object_add(ch, "text", json_str_n(text ? text : "", text ? len : 0));
		json_object_object_add(ch, "logprobs", lp ? json_object_get(lp) : NULL);
	}
	json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
	struct json_object *arr = json_object_new_array();
	json_object_array_add(arr, ch);
	json_object_object_add(o, "choices", arr);
	if (g->include_usage)
		json_object_object_add(o, "usage", NULL);
	srv_sse_send_json(g->http.req, o);
	json_object_put(o);
}

/* ---- completion of the whole request ---- */

/* The request itself could not be served (see engine.h): a 400, not a 500. */
static bool request_fault(const struct srv_choice *c)
{
	return c->error_status == ALICE_ERR_INVALID || c->error_status == ALICE_ERR_RANGE;
}

static void gen_complete(struct srv_gen *g)
{
	struct srv *s = g->srv;
	int64_t completion;
	double prefill, decode;
	usage_totals(g, &completion, &prefill, &decode);
	g->http.prompt_tokens = g->prompt_tokens;
	g->http.cached_tokens = cached_total(g);
	g->http.completion_tokens = completion;
	g->http.prefill_ms = prefill;
	g->http.decode_ms = decode;
	const struct srv_choice *failed = NULL;
	for (size_t i = 0; i < g->n_choices && !failed; i++)
		if (g->choices[i].finish == ALICE_ENGINE_FINISH_ERROR)
			failed = &g->choices[i];
	gen_unwatch(g);

	if (g->stream) {
		if (g->http.req) {
			if (failed) {
				struct srv_api_error e;
				if (request_fault(failed))
					srv_api_error_invalid(&e, NULL, "the request cannot be completed: %s",
							      failed->error ? failed->error : "generation failed");
				else
					srv_api_error_set(&e, 500, "server_error", "backend_error", NULL, "%s",
							  failed->error ? failed->error : "generation failed");
				struct json_object *eo = srv_api_error_json(&e);
				srv_sse_send_json(g->http.req, eo);
				json_object_put(eo);
			} else if (g->include_usage && !g->client_gone) {
				struct json_object *o = chunk_base(g);
				json_object_object_add(o, "choices", json_object_new_array());
				json_object_object_add(o, "usage", usage_json(g));
				srv_sse_send_json(g->http.req, o);
				json_object_put(o);
			}
			srv_sse_finish(g->http.req);
		}
		g->http.status = g->client_gone ? 499 : failed ? (request_fault(failed) ? 400 : 500) : 200;
		srv_log_request(&g->http);
		g->replied = true;
		return;
	}
	if (!g->http.req) {
		g->http.status = 499;
		srv_log_request(&g->http);
		g->replied = true;
		return;
	}
	if (failed || g->client_gone) {
		struct srv_api_error e;
		if (failed && request_fault(failed))
			srv_api_error_invalid(&e, NULL, "the request cannot be completed: %s",
					      failed->error ? failed->error : "generation failed");
		else if (failed)
			srv_api_error_set(&e, 500, "server_error", "backend_error", NULL, "%s",
					  failed->error ? failed->error : "generation failed");
		else
			srv_api_error_set(&e, 499, "invalid_request_error", "client_closed", NULL,
					  "the client closed the connection");
		srv_reply_error(&g->http, &e);
		g->replied = true;
		return;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(g->id));
	json_object_object_add(o, "object",
			       json_object_new_string(g->kind == SRV_KIND_CHAT ? "chat.completion" : "text_completion"));
	json_object_object_add(o, "created", json_object_new_int64(g->created));
	json_object_object_add(o, "model", json_object_new_string(s->model_id));
	json_object_object_add(o, "system_fingerprint", json_object_new_string("alice-llm-" ALICE_VERSION));
	struct json_object *arr = json_object_new_array();
	for (size_t i = 0; i < g->n_choices; i++) {
		struct srv_choice *c = &g->choices[i];
		struct json_object *ch = json_object_new_object();
		json_object_object_add(ch, "index", json_object_new_int(c->index));
		struct json_object *text = json_str_n(c->text ? c->text : "", c->len);
		if (g->kind == SRV_KIND_CHAT) {
			struct json_object *m = json_object_new_object();
			json_object_object_add(m, "role", json_object_new_string("assistant"));
			json_object_object_add(m, "content", text);
			json_object_object_add(ch, "message", m);
			if (g->logprobs) {
				struct json_object *l = json_object_new_object();
				json_object_object_add(l, "content", json_object_get(c->lp));
				json_object_object_add(ch, "logprobs", l);
			} else {
				json_object_object_add(ch, "logprobs", NULL);
			}
		} else {
			json_object_object_add(ch, "text", text);
			json_object_object_add(ch, "logprobs", g->logprobs ? json_object_get(c->lp) : NULL);
		}
		json_object_object_add(ch, "finish_reason", json_object_new_string(finish_reason(c->finish)));
		json_object_array_add(arr, ch);
	}
	json_object_object_add(o, "choices", arr);
	json_object_object_add(o, "usage", usage_json(g));
	srv_reply_json(&g->http, 200, o);
	g->replied = true;
}

/* ---- engine events (event thread) ---- */

static bool text_append(struct srv_choice *c, const char *t, size_t n)
{
	if (c->len + n + 1 > c->cap) {
		size_t cap = (c->len + n + 1) * 2;
		char *p = realloc(c->text, cap);
		if (!p)
			return false;
		c->text = p;
		c->cap = cap;
	}
	memcpy(c->text + c->len, t, n);
	c->len += n;
	c->text[c->len] = '\0';
	return true;
}

void srv_gen_on_message(struct srv *s, struct srv_msg *m)
{
	struct srv_gen *g = m->gen;
	struct srv_choice *c = &g->choices[m->choice];
	const struct alice_engine_event *ev = &m->ev;
	bool live_reply = g->http.req && !g->client_gone;

	if (ev->type == ALICE_ENGINE_EVENT_TOKEN) {
		if (g->logprobs) {
			if (g->kind == SRV_KIND_CHAT)
				json_object_array_add(c->lp, chat_logprob_entry(s, ev));
			else
				legacy_logprob_add(s, c->lp, &c->text_offset, ev, g->top_logprobs);
		}
		if (g->stream) {
			/* logprobs ride with the next chunk that has text */
			if (ev->text_len > 0 && live_reply) {
				send_chunk(g, c, ev->text, ev->text_len, false, NULL, g->logprobs ? c->lp : NULL);
				if (g->logprobs) {
					json_object_put(c->lp);
					c->lp = g->kind == SRV_KIND_CHAT ? json_object_new_array() : legacy_logprobs_new();
				}
			}
		} else {
			text_append(c, ev->text, ev->text_len);
		}
		srv_msg_free(m);
		return;
	}

	/* DONE */
	c->live = false;
	g->n_live--;
	c->finish = ev->finish;
	c->n_prompt = ev->n_prompt;
	c->n_completion = ev->n_completion;
	c->n_cached = ev->n_cached;
	c->prefill_ms = ev->prefill_ms;
	c->decode_ms = ev->decode_ms;
	if (ev->error)
		c->error = strdup(ev->error);
	c->error_status = ev->error_status;
	if (ev->finish == ALICE_ENGINE_FINISH_ERROR)
		alice_log(request_fault(c) ? ALICE_LOG_INFO : ALICE_LOG_ERROR, "req %llu choice %d: %s",
			  (unsigned long long)g->http.id, c->index, ev->error ? ev->error : "failed");
	if (g->stream) {
		if (live_reply && ev->finish != ALICE_ENGINE_FINISH_ERROR &&
		    ev->finish != ALICE_ENGINE_FINISH_CANCELLED) {
			bool has_lp = g->logprobs && (g->kind == SRV_KIND_CHAT
							      ? json_object_array_length(c->lp) > 0
							      : true);
			if (ev->text_len > 0)
				send_chunk(g, c, ev->text, ev->text_len, false, NULL, has_lp ? c->lp : NULL);
			else if (has_lp && g->kind == SRV_KIND_CHAT)
				send_chunk(g, c, "", 0, false, NULL, c->lp);
			send_chunk(g, c, NULL, 0, false, finish_reason(c->finish), NULL);
		}
	} else {
		text_append(c, ev->text, ev->text_len);
	}
	srv_msg_free(m);
	if (g->n_live == 0) {
		if (!g->replied)
			gen_complete(g);
		gen_free(g);
	}
}

/* Engine thread: deep-copy the event and post it to the event thread. */
static void on_engine_event(const struct alice_engine_event *ev, void *user)
{
	struct srv_choice *c = user;
	struct srv_gen *g = c->gen;
	struct srv_msg *m = calloc(1, sizeof(*m));
	if (!m)
		goto oom;
	m->kind = SRV_MSG_ENGINE;
	m->gen = g;
	m->choice = (int)(c - g->choices);
	m->ev = *ev;
	m->ev.text = NULL;
	m->ev.top = NULL;
	m->ev.error = NULL;
	char *t = malloc(ev->text_len + 1);
	if (!t)
		goto oom;
	memcpy(t, ev->text, ev->text_len);
	t[ev->text_len] = '\0';
	m->ev.text = t;
	if (ev->n_top > 0) {
		struct alice_token_logprob *top = malloc((size_t)ev->n_top * sizeof(*top));
		if (!top)
			goto oom;
		memcpy(top, ev->top, (size_t)ev->n_top * sizeof(*top));
		m->ev.top = top;
	}
	if (ev->error && !(m->ev.error = strdup(ev->error)))
		goto oom;
	srv_post(g->srv, m);
	return;
oom:
	/* The DONE event must arrive or the request would hang: without memory
	 * for the copy there is no safe way on; fail loudly. */
	alice_log(ALICE_LOG_ERROR, "out of memory posting an engine event");
	abort();
}

/* ---- grammar constraint ---- */

/* The parsed grammar is shared by the request's choices; the last state to
 * go frees it (states are freed on the engine thread). */
struct gen_grammar_shared {
	struct alice_grammar *grammar;
	int refs; /* atomic */
};

static void grammar_shared_put(struct gen_grammar_shared *sh)
{
	if (sh && __atomic_sub_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		alice_grammar_free(sh->grammar);
		free(sh);
	}
}

struct gen_grammar {
	struct gen_grammar_shared *shared;
	struct alice_grammar_state *st;
	const struct alice_grammar_vocab *vocab;
	const struct alice_tokenizer *tok;
};

static enum alice_status grammar_mask(void *p, uint8_t *mask, int32_t n_vocab, struct alice_error *err)
{
	struct gen_grammar *gg = p;
	(void)n_vocab;
	return alice_grammar_state_mask(gg->st, gg->vocab, mask, err);
}

static enum alice_status grammar_accept(void *p, int32_t token, bool *must_end, struct alice_error *err)
{
	struct gen_grammar *gg = p;
	size_t n = 0;
	bool special = false;
	const char *b = alice_tokenizer_token_bytes(gg->tok, token, &n, &special);
	if (!b)
		return alice_fail(err, ALICE_ERR_RANGE, "token %d has no bytes", token);
	enum alice_status st = alice_grammar_state_accept_bytes(gg->st, b, n, err);
	if (st != ALICE_OK)
		return st;
	*must_end = alice_grammar_state_must_end(gg->st);
	return ALICE_OK;
}

static void grammar_free(void *p)
{
	struct gen_grammar *gg = p;
	if (!gg)
		return;
	alice_grammar_state_free(gg->st);
	grammar_shared_put(gg->shared);
	free(gg);
}

/* The byte trie that grammar masks walk, built once per model (loader thread). */
enum alice_status srv_grammar_vocab_build(const struct alice_tokenizer *tok, struct alice_grammar_vocab **out,
					  struct alice_error *err)
{
	enum alice_status st = ALICE_ERR_NOMEM;
	int32_t n = alice_tokenizer_n_vocab(tok);
	const char **pieces = calloc((size_t)n, sizeof(*pieces));
	size_t *lens = calloc((size_t)n, sizeof(*lens));
	uint8_t *kinds = calloc((size_t)n, 1);
	*out = NULL;
	if (!pieces || !lens || !kinds) {
		alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (int32_t i = 0; i < n; i++) {
		bool special = false;
		pieces[i] = alice_tokenizer_token_bytes(tok, i, &lens[i], &special);
		if (!pieces[i]) {
			pieces[i] = "";
			lens[i] = 0;
		}
		kinds[i] = alice_tokenizer_is_eog(tok, i) ? ALICE_GRAMMAR_TOKEN_EOG
			   : special		   ? ALICE_GRAMMAR_TOKEN_CONTROL
						   : ALICE_GRAMMAR_TOKEN_TEXT;
	}
	st = alice_grammar_vocab_build(pieces, lens, kinds, (size_t)n, out, err);
out:
	free(pieces);
	free(lens);
	free(kinds);
	return st;
}

/* ---- the handler ---- */

static uint64_t random_seed(void)
{
	uint64_t x = 0;
	if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
	}
	return x;
}

struct gen_prompt {
	int32_t *tokens;
	size_t n;
};

/* Render and tokenize every prompt; checks that need the model. */
static int build_prompts(struct srv *s, struct srv_gen_request *r, struct gen_prompt **out, size_t *n_out,
			 struct srv_api_error *e)
{
	const struct alice_tokenizer *tok = alice_model_tokenizer(s->model);
	int32_t n_vocab = alice_model_n_vocab(s->model);
	size_t np = r->kind == SRV_KIND_CHAT ? 1 : r->n_prompts;
	struct gen_prompt *ps = calloc(np, sizeof(*ps));
	struct alice_error aerr = {{0}};
	if (!ps)
		goto nomem;
	*out = ps;
	*n_out = np;
	if (r->kind == SRV_KIND_CHAT) {
		struct alice_chat_message *msgs = calloc(r->n_messages, sizeof(*msgs));
		if (!msgs)
			goto nomem;
		for (size_t i = 0; i < r->n_messages; i++) {
			msgs[i].role = r->messages[i].role;
			msgs[i].content = r->messages[i].content;
		}
		char *text = NULL;
		size_t len = 0;
		enum alice_status st = alice_chat_render(s->chat_format, msgs, r->n_messages, true, NULL, &text,
							 &len, &aerr);
		free(msgs);
		if (st != ALICE_OK) {
			srv_api_error_invalid(e, "messages", "%s", aerr.msg);
			return -1;
		}
		st = alice_tokenizer_encode(tok, text, len, true, true, &ps[0].tokens, &ps[0].n, &aerr);
		free(text);
		if (st != ALICE_OK) {
			srv_api_error_invalid(e, "messages", "cannot tokenize the messages: %s", aerr.msg);
			return -1;
		}
	} else {
		for (size_t i = 0; i < np; i++) {
			struct srv_prompt *p = &r->prompts[i];
			if (p->tokens) {
				for (size_t k = 0; k < p->n_tokens; k++)
					if (p->tokens[k] >= n_vocab) {
						srv_api_error_invalid(e, "prompt",
								      "prompt token %d is not in the vocabulary (size %d)",
								      p->tokens[k], n_vocab);
						return -1;
					}
				ps[i].tokens = malloc(p->n_tokens * sizeof(int32_t));
				if (!ps[i].tokens)
					goto nomem;
				memcpy(ps[i].tokens, p->tokens, p->n_tokens * sizeof(int32_t));
				ps[i].n = p->n_tokens;
			} else if (alice_tokenizer_encode(tok, p->text, strlen(p->text), true, true, &ps[i].tokens,
							  &ps[i].n, &aerr) != ALICE_OK) {
				srv_api_error_invalid(e, "prompt", "cannot tokenize the prompt: %s", aerr.msg);
				return -1;
			}
		}
	}
	uint32_t n_ctx = alice_engine_n_ctx(s->engine);
	for (size_t i = 0; i < np; i++) {
		const char *param = r->kind == SRV_KIND_CHAT ? "messages" : "prompt";
		if (ps[i].n == 0) {
			srv_api_error_invalid(e, param, "the prompt is empty (0 tokens)");
			return -1;
		}
		if (ps[i].n > n_ctx) {
			srv_api_error_invalid(e, param,
					      "the prompt has %zu tokens, more than the context size of %u tokens",
					      ps[i].n, n_ctx);
			return -1;
		}
		if (r->max_tokens > 0 && ps[i].n + (uint64_t)r->max_tokens > n_ctx) {
			srv_api_error_invalid(e, "max_tokens",
					      "the prompt has %zu tokens and max_tokens is %lld: %llu > the context size of %u tokens",
					      ps[i].n, (long long)r->max_tokens,
					      (unsigned long long)(ps[i].n + (uint64_t)r->max_tokens), n_ctx);
			return -1;
		}
	}
	for (size_t i = 0; i < r->n_logit_bias; i++)
		if (r->logit_bias[i].token >= n_vocab) {
			srv_api_error_invalid(e, "logit_bias", "logit_bias token %lld is not in the vocabulary (size %d)",
					      (long long)r->logit_bias[i].token, n_vocab);
			return -1;
		}
	return 0;
nomem:
	srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
	return -1;
}

static void free_prompts(struct gen_prompt *ps, size_t n)
{
	for (size_t i = 0; ps && i < n; i++)
		free(ps[i].tokens);
	free(ps);
}

static void start_watch(struct srv *s, struct srv_gen *g)
{
	g->evcon = evhttp_request_get_connection(g->http.req);
	if (!g->evcon)
		return;
	evhttp_connection_set_closecb(g->evcon, on_conn_close, g);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(g->evcon);
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	if (fd < 0)
		return;
	g->watch = event_new(s->base, fd, EV_READ | EV_PERSIST, on_watch, g);
	if (g->watch)
		event_add(g->watch, NULL);
}

void srv_gen_handle(struct srv *s, struct srv_http *h, enum srv_kind kind, const char *body, size_t len)
{
	struct srv_gen_request r;
	struct srv_api_error e;
	struct gen_prompt *ps = NULL;
	size_t np = 0;
	struct alice_grammar *grammar = NULL;
	struct gen_grammar_shared *shared = NULL;
	struct srv_gen *g = NULL;
	const char *stops[SRV_MAX_STOP + 8];
	size_t n_stop = 0;

	if (srv_openai_parse(kind, body, len, &r, &e) != 0) {
		srv_reply_error(h, &e);
		return;
	}
	if (srv_limits_check(&s->cfg.limits, &r, &e) != 0)
		goto fail;
	if (build_prompts(s, &r, &ps, &np, &e) != 0)
		goto fail;
	if (r.grammar) {
		struct alice_error aerr = {{0}};
		if (alice_grammar_parse(r.grammar, strlen(r.grammar), &grammar, &aerr, NULL) != ALICE_OK) {
			srv_api_error_invalid(&e, "grammar", "invalid grammar: %s", aerr.msg);
			goto fail;
		}
		if (!s->grammar_vocab) {
			srv_api_error_set(&e, 500, "server_error", NULL, NULL,
					  "grammars are unavailable: the token trie could not be built at load");
			goto fail;
		}
		shared = calloc(1, sizeof(*shared));
		if (!shared)
			goto nomem;
		shared->grammar = grammar;
		shared->refs = 1; /* ours, dropped at the end of this function */
		grammar = NULL;
	}
	for (size_t i = 0; i < r.n_stop; i++)
		stops[n_stop++] = r.stop[i];
	if (kind == SRV_KIND_CHAT)
		for (const char *const *cs = alice_chat_stop_strings(s->chat_format); *cs && n_stop < 12; cs++)
			stops[n_stop++] = *cs;

	if (np * (size_t)r.n > (size_t)s->cfg.queue + (size_t)s->cfg.n_parallel) {
		srv_api_error_invalid(&e, "n",
				      "this request needs %zu sequences (prompts x n); the server runs %d at once and queues %d",
				      np * (size_t)r.n, s->cfg.n_parallel, s->cfg.queue);
		goto fail;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		goto nomem;
	g->srv = s;
	g->http = *h;
	g->kind = kind;
	g->stream = r.stream;
	g->include_usage = r.include_usage;
	g->logprobs = r.logprobs;
	g->top_logprobs = r.top_logprobs;
	g->echo = r.echo;
	g->created = (int64_t)time(NULL);
	snprintf(g->id, sizeof(g->id), "%s-%016llx", kind == SRV_KIND_CHAT ? "chatcmpl" : "cmpl",
		 (unsigned long long)random_seed());
	g->n_choices = np * (size_t)r.n;
	g->choices = calloc(g->n_choices, sizeof(*g->choices));
	if (!g->choices)
		goto nomem;
	for (size_t i = 0; i < np; i++)
		g->prompt_tokens += (int64_t)ps[i].n;

	uint64_t base_seed = r.has_seed ? r.seed : random_seed();
	struct alice_logit_bias *bias = NULL;
	if (r.n_logit_bias) {
		bias = calloc(r.n_logit_bias, sizeof(*bias));
		if (!bias)
			goto nomem;
		for (size_t i = 0; i < r.n_logit_bias; i++) {
			bias[i].token = (int32_t)r.logit_bias[i].token;
			bias[i].bias = r.logit_bias[i].bias;
		}
	}
	/* linked before submitting: events may arrive as soon as we return */
	g->next = s->gens;
	if (s->gens)
		s->gens->prev = g;
	s->gens = g;

	for (size_t i = 0; i < g->n_choices; i++) {
		struct srv_choice *c = &g->choices[i];
		c->gen = g;
		c->index = (int)i;
		c->prompt_index = (int)(i / (size_t)r.n);
		if (g->logprobs)
			c->lp = kind == SRV_KIND_CHAT ? json_object_new_array() : legacy_logprobs_new();
		if (g->echo && kind == SRV_KIND_COMPLETION) {
			const struct srv_prompt *p = &r.prompts[c->prompt_index];
			if (p->text) {
				text_append(c, p->text, strlen(p->text));
			} else {
				char *t = NULL;
				size_t tl = 0;
				if (alice_tokenizer_decode(alice_model_tokenizer(s->model), p->tokens, p->n_tokens, false,
							   &t, &tl, NULL) == ALICE_OK) {
					size_t cl = 0;
					char *clean = srv_utf8_sanitize(t, tl, &cl);
					if (clean)
						text_append(c, clean, cl);
					free(clean);
				}
				free(t);
			}
		}
	}

	struct alice_error aerr = {{0}};
	enum alice_status st = ALICE_OK;
	for (size_t i = 0; i < g->n_choices && st == ALICE_OK; i++) {
		struct srv_choice *c = &g->choices[i];
		struct alice_engine_request q = {0};
		q.prompt = ps[c->prompt_index].tokens;
		q.n_prompt = (int32_t)ps[c->prompt_index].n;
		q.max_tokens = r.max_tokens > 0 ? (int32_t)r.max_tokens : -1;
		alice_sampling_params_default(&q.sampling);
		q.sampling.temperature = (float)r.temperature;
		q.sampling.top_k = (int32_t)r.top_k;
		q.sampling.top_p = (float)r.top_p;
		q.sampling.min_p = (float)r.min_p;
		q.sampling.seed = base_seed + (uint64_t)i;
		q.sampling.repeat_penalty = (float)r.repeat_penalty;
		q.sampling.frequency_penalty = (float)r.frequency_penalty;
		q.sampling.presence_penalty = (float)r.presence_penalty;
		q.sampling.logit_bias = bias;
		q.sampling.n_logit_bias = r.n_logit_bias;
		q.sampling.logprobs = r.logprobs;
		q.sampling.n_probs = r.top_logprobs;
		q.stop = stops;
		q.n_stop = n_stop;
		q.on_event = on_engine_event;
		q.user = c;
		struct gen_grammar *gg = NULL;
		if (shared) {
			gg = calloc(1, sizeof(*gg));
			if (!gg || alice_grammar_state_create(shared->grammar, &gg->st, &aerr) != ALICE_OK) {
				free(gg);
				st = ALICE_ERR_NOMEM;
				break;
			}
			gg->shared = shared;
			__atomic_add_fetch(&shared->refs, 1, __ATOMIC_ACQ_REL);
			gg->vocab = s->grammar_vocab;
			gg->tok = alice_model_tokenizer(s->model);
			q.constraint = gg;
			q.constraint_mask = grammar_mask;
			q.constraint_accept = grammar_accept;
			q.constraint_free = grammar_free;
		}
		st = alice_engine_submit(s->engine, &q, &c->engine_id, &aerr);
		if (st == ALICE_OK) {
			c->live = true;
			g->n_live++;
		} else {
			grammar_free(gg);
		}
	}
	free(bias);
	if (st != ALICE_OK) {
		if (st == ALICE_ERR_RANGE)
			srv_api_error_set(&e, 503, "unavailable_error", "queue_full", NULL,
					  "the server is busy (%s); retry shortly", aerr.msg);
		else if (st == ALICE_ERR_INVALID)
			srv_api_error_invalid(&e, kind == SRV_KIND_CHAT ? "messages" : "prompt", "%s", aerr.msg);
		else
			srv_api_error_set(&e, 503, "unavailable_error", NULL, NULL, "cannot queue the request: %s",
					  aerr.msg[0] ? aerr.msg : alice_status_str(st));
		gen_cancel(g);
		srv_reply_error(&g->http, &e);
		g->replied = true;
		if (g->n_live == 0)
			gen_free(g);
		goto out;
	}
	start_watch(s, g);
	if (g->stream) {
		srv_add_cors_headers(g->srv, g->http.req);
		srv_sse_start(g->http.req);
		for (size_t i = 0; i < g->n_choices; i++) {
			struct srv_choice *c = &g->choices[i];
			if (kind == SRV_KIND_CHAT)
				send_chunk(g, c, "", 0, true, NULL, NULL);
			else if (c->len > 0) /* echo */
				send_chunk(g, c, c->text, c->len, false, NULL, NULL);
		}
	}
out:
	grammar_shared_put(shared);
	free_prompts(ps, np);
	srv_gen_request_clear(&r);
	return;
nomem:
	srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
fail:
	alice_grammar_free(grammar);
	if (shared) {
		alice_grammar_free(shared->grammar);
		free(shared);
	}
	free_prompts(ps, np);
	srv_gen_request_clear(&r);
	if (g) {
		free(g->choices);
		free(g);
	}
	srv_reply_error(h, &e);
}
