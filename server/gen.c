/* gen.c — POST /v1/chat/completions and /v1/completions: the request's
 * lifecycle. gen_prepare.c turns the body into a validated plan; here one
 * engine request per choice is submitted, the engine's events come back
 * through the message queue, and the reply (one JSON body from
 * gen_response.c, or an SSE stream of chunks) is written.
 *
 * A struct srv_gen lives from the request until every choice's terminal
 * engine event has arrived AND the reply is done (or the client is gone).
 * A client that disconnects cancels its choices at once: the connection's
 * close callback covers failed writes, and a read watcher on the socket
 * notices a peer that closes while nothing is being written.
 *
 * Out of memory on the engine thread fails that request, never the process:
 * each choice's DONE message is allocated before submitting, and a token
 * event that cannot be copied cancels its choice, which then ends as a 500. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/bufferevent.h>

#include "alice/grammar.h"
#include "alice/log.h"
#include "alice/tokenizer.h"
#include "gen.h"
#include "reply.h"
#include "routes.h"
#include "sse.h"

static void gen_on_msg(struct srv_msg *base, void *ctx);

/* ---- messages ---- */

/* An engine event copied for the event thread. */
struct gen_msg {
	struct srv_msg base;
	struct srv_choice *choice;
	struct alice_engine_event ev; /* text, top and error are our copies */
	bool lost_text; /* DONE: the text could not be copied */
};

static struct gen_msg *gen_msg_new(void)
{
	struct gen_msg *m = calloc(1, sizeof(*m));
	if (m)
		m->base.run = gen_on_msg;
	return m;
}

static void gen_msg_free(struct gen_msg *m)
{
	if (!m)
		return;
	free((void *)m->ev.text);
	free((void *)m->ev.top);
	free((void *)m->ev.error);
	free(m);
}

/* Deep-copy the event's pointers into m; false when out of memory (m keeps
 * what was copied). */
static bool msg_copy(struct gen_msg *m, const struct alice_engine_event *ev)
{
	m->ev = *ev;
	m->ev.text = NULL;
	m->ev.top = NULL;
	m->ev.error = NULL;
	m->ev.text_len = 0;
	m->ev.n_top = 0;
	char *t = malloc(ev->text_len + 1);
	if (!t)
		return false;
	memcpy(t, ev->text, ev->text_len);
	t[ev->text_len] = '\0';
	m->ev.text = t;
	m->ev.text_len = ev->text_len;
	if (ev->n_top > 0) {
		struct alice_token_logprob *top = malloc((size_t)ev->n_top * sizeof(*top));
		if (!top)
			return false;
		memcpy(top, ev->top, (size_t)ev->n_top * sizeof(*top));
		m->ev.top = top;
		m->ev.n_top = ev->n_top;
	}
	return !ev->error || (m->ev.error = strdup(ev->error)) != NULL;
}

/* Engine thread: copy the event and post it to the event thread. */
static void on_engine_event(const struct alice_engine_event *ev, void *user)
{
	struct srv_choice *c = user;
	struct srv_gen *g = c->gen;
	if (ev->type == ALICE_ENGINE_EVENT_DONE) {
		struct gen_msg *m = c->done_msg; /* ours since the submit */
		c->done_msg = NULL;
		m->choice = c;
		m->lost_text = !msg_copy(m, ev);
		srv_msgq_post(&g->srv->q, &m->base);
		return;
	}
	if (__atomic_load_n(&c->lost, __ATOMIC_RELAXED))
		return;
	struct gen_msg *m = gen_msg_new();
	if (m && msg_copy(m, ev)) {
		m->choice = c;
		srv_msgq_post(&g->srv->q, &m->base);
		return;
	}
	gen_msg_free(m);
	__atomic_store_n(&c->lost, 1, __ATOMIC_RELAXED);
	alice_engine_cancel(g->srv->engine, ev->id); /* its DONE turns into a 500 */
}

/* ---- lifetime ---- */

static void stop_heartbeat(struct srv_gen *g)
{
	if (g->heartbeat) {
		event_free(g->heartbeat);
		g->heartbeat = NULL;
	}
}

static void gen_unwatch(struct srv_gen *g)
{
	stop_heartbeat(g);
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
	s->n_gens--;
	for (size_t i = 0; i < g->n_choices; i++) {
		free(g->choices[i].text.p);
		free(g->choices[i].raw.p);
		free(g->choices[i].error);
		json_object_put(g->choices[i].lp);
		gen_msg_free(g->choices[i].done_msg);
	}
	free(g->choices);
	if (g->api && g->api_state)
		g->api->free_state(g->api_state);
	json_object_put(g->parse_opts.tools);
	free(g);
}

static void gen_cancel(struct srv_gen *g)
{
	for (size_t i = 0; i < g->n_choices; i++)
		if (g->choices[i].live)
			alice_engine_cancel(g->srv->engine, g->choices[i].engine_id);
}

static void prep_wait_idle(void);

void srv_gen_cancel_all(struct srv *s)
{
	prep_wait_idle(); /* no prep worker may touch the model after this */
	for (struct srv_gen *g = s->gens; g; g = g->next)
		gen_cancel(g);
}

static void client_gone(struct srv_gen *g)
{
	if (!g->client_gone) {
		g->client_gone = true;
		alice_log(ALICE_LOG_INFO, "req %llu: client disconnected; cancelling", (unsigned long long)g->http.id);
	}
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
	stop_heartbeat(g);
	g->evcon = NULL; /* being freed; our close callback goes with it */
	if (g->http.req && !evhttp_request_get_connection(g->http.req)) {
		/* detached by evhttp after a network error: the request is ours to free */
		evhttp_request_free(g->http.req);
	}
	g->http.req = NULL;
	client_gone(g);
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
	if (n <= 0)
		client_gone(g);
	(void)what;
}

static void start_watch(struct srv_gen *g)
{
	g->evcon = evhttp_request_get_connection(g->http.req);
	if (!g->evcon)
		return;
	evhttp_connection_set_closecb(g->evcon, on_conn_close, g);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(g->evcon);
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	if (fd < 0)
		return;
	g->watch = event_new(g->srv->base, fd, EV_READ | EV_PERSIST, on_watch, g);
	if (g->watch)
		event_add(g->watch, NULL);
}

/* ---- the end of the request ---- */

/* The request itself could not be served (see engine.h): a 400, not a 500. */
static bool request_fault(const struct srv_choice *c)
{
	return c->error_status == ALICE_ERR_INVALID || c->error_status == ALICE_ERR_RANGE;
}

static void failure_error(const struct srv_choice *failed, struct srv_api_error *e)
{
	const char *msg = failed->error ? failed->error : "generation failed";
	if (request_fault(failed))
		srv_api_error_invalid(e, NULL, "the request cannot be completed: %s", msg);
	else
		srv_api_error_set(e, 500, "server_error", "backend_error", NULL, "%s", msg);
}

static void send_json_event(struct srv_gen *g, struct json_object *o)
{
	if (g->http.req)
		srv_sse_send_json(g->http.req, o);
	json_object_put(o);
}

static void finish_stream(struct srv_gen *g, const struct srv_choice *failed)
{
	if (g->api && g->http.req) {
		struct srv_api_error e;
		if (failed)
			failure_error(failed, &e);
		if (!g->client_gone)
			g->api->stream_end(g, failed ? &e : NULL);
		srv_sse_end(g->http.req);
	} else if (g->http.req) {
		if (failed) {
			struct srv_api_error e;
			failure_error(failed, &e);
			send_json_event(g, srv_api_error_json(&e));
		} else if (g->include_usage && !g->client_gone) {
			send_json_event(g, gen_usage_chunk(g));
		}
		srv_sse_finish(g->http.req);
	}
	srv_request_done(&g->http, g->client_gone ? 499 : failed ? (request_fault(failed) ? 400 : 500) : 200);
}

static void gen_complete(struct srv_gen *g)
{
	const struct srv_choice *failed = NULL;
	for (size_t i = 0; i < g->n_choices && !failed; i++)
		if (g->choices[i].finish == ALICE_ENGINE_FINISH_ERROR)
			failed = &g->choices[i];
	gen_counts(g, &g->http.counts);
	gen_unwatch(g);
	g->replied = true;
	if (g->stream) {
		finish_stream(g, failed);
	} else if (!g->http.req) {
		srv_request_done(&g->http, 499);
	} else if (failed || g->client_gone) {
		struct srv_api_error e;
		if (failed)
			failure_error(failed, &e);
		else
			srv_api_error_set(&e, 499, "invalid_request_error", "client_closed", NULL,
					  "the client closed the connection");
		srv_reply_error(&g->http, &e);
	} else {
		srv_reply_json(&g->http, 200, g->api ? g->api->body(g) : gen_body(g));
	}
}

/* ---- engine events (event thread) ---- */

static void send_chunk(struct srv_gen *g, const struct srv_choice *c, const char *text, size_t len, bool role,
		       const char *finish, struct json_object *lp)
{
	if (g->http.req)
		send_json_event(g, gen_chunk(g, c, text, len, role, finish, lp));
}

/* A parsed chat stream: the text so far into c->raw, and the deltas of its
 * parse out (logprobs ride with the first of them). */
static void send_parsed(struct srv_gen *g, struct srv_choice *c, const char *text, size_t len, bool final)
{
	if (!alice_sb_addn(&c->raw, text, len) && len) {
		__atomic_store_n(&c->lost, 1, __ATOMIC_RELAXED);
		return;
	}
	bool lp_used = false;
	struct json_object *lp = g->logprobs && json_object_array_length(c->lp) > 0 ? c->lp : NULL;
	struct json_object *chunks = gen_tools_deltas(g, c, final, lp, &lp_used);
	for (size_t i = 0; chunks && i < json_object_array_length(chunks); i++)
		send_json_event(g, json_object_get(json_object_array_get_idx(chunks, i)));
	json_object_put(chunks);
	if (lp_used) {
		json_object_put(c->lp);
		c->lp = gen_logprobs_new(g);
	}
}

static void on_token(struct srv_gen *g, struct srv_choice *c, const struct alice_engine_event *ev)
{
	if (g->logprobs)
		gen_logprobs_add(g, c, ev);
	if (!g->stream || g->api) /* an api's closing events repeat the whole text */
		alice_sb_addn(&c->text, ev->text, ev->text_len);
	if (!g->stream)
		return;
	if (g->api) {
		if (ev->text_len > 0 && g->http.req && !g->client_gone) {
			stop_heartbeat(g);
			g->api->stream_text(g, ev->text, ev->text_len);
		}
		return;
	}
	if (g->parse) {
		if (ev->text_len > 0 && g->http.req && !g->client_gone) {
			stop_heartbeat(g);
			send_parsed(g, c, ev->text, ev->text_len, false);
		}
		return;
	}
	/* logprobs ride with the next chunk that has text */
	if (ev->text_len > 0 && g->http.req && !g->client_gone) {
		stop_heartbeat(g);
		send_chunk(g, c, ev->text, ev->text_len, false, NULL, g->logprobs ? c->lp : NULL);
		if (g->logprobs) {
			json_object_put(c->lp);
			c->lp = gen_logprobs_new(g);
		}
	}
}

static void on_done(struct srv_gen *g, struct srv_choice *c, const struct gen_msg *m)
{
	const struct alice_engine_event *ev = &m->ev;
	c->live = false;
	g->n_live--;
	c->finish = ev->finish;
	c->n_prompt = ev->n_prompt;
	c->n_completion = ev->n_completion;
	c->n_cached = ev->n_cached;
	c->n_drafted = ev->n_drafted;
	c->n_accepted = ev->n_accepted;
	c->prefill_ms = ev->prefill_ms;
	c->decode_ms = ev->decode_ms;
	c->error_status = ev->error_status;
	if (ev->error)
		c->error = strdup(ev->error);
	if (m->lost_text || __atomic_load_n(&c->lost, __ATOMIC_RELAXED) || c->text.oom) {
		c->finish = ALICE_ENGINE_FINISH_ERROR;
		c->error_status = ALICE_ERR_NOMEM;
		free(c->error);
		c->error = strdup("out of memory while collecting the generated text");
	}
	if (c->finish == ALICE_ENGINE_FINISH_ERROR)
		alice_log(request_fault(c) ? ALICE_LOG_INFO : ALICE_LOG_ERROR, "req %llu choice %d: %s",
			  (unsigned long long)g->http.id, c->index, c->error ? c->error : "failed");
	c->stop_index = ev->stop_index;
	if (!g->stream || g->api)
		alice_sb_addn(&c->text, ev->text, ev->text_len);
	if (!g->stream)
		return;
	if (!g->http.req || g->client_gone || c->finish == ALICE_ENGINE_FINISH_ERROR ||
	    c->finish == ALICE_ENGINE_FINISH_CANCELLED)
		return;
	if (g->api) { /* its closing events come with the end of the stream */
		if (ev->text_len > 0)
			g->api->stream_text(g, ev->text, ev->text_len);
		return;
	}
	if (g->parse) {
		send_parsed(g, c, ev->text, ev->text_len, true);
		/* logprobs of tokens whose text sent nothing (a call's closing tag) */
		if (g->logprobs && json_object_array_length(c->lp) > 0)
			send_chunk(g, c, "", 0, false, NULL, c->lp);
		send_chunk(g, c, NULL, 0, false, gen_choice_finish(g, c), NULL);
		return;
	}
	bool has_lp = g->logprobs && (g->kind != SRV_KIND_CHAT || json_object_array_length(c->lp) > 0);
	if (ev->text_len > 0)
		send_chunk(g, c, ev->text, ev->text_len, false, NULL, has_lp ? c->lp : NULL);
	else if (has_lp && g->kind == SRV_KIND_CHAT)
		send_chunk(g, c, "", 0, false, NULL, c->lp);
	send_chunk(g, c, NULL, 0, false, gen_finish_reason(c->finish), NULL);
}

static void gen_on_msg(struct srv_msg *base, void *ctx)
{
	struct gen_msg *m = (struct gen_msg *)base;
	struct srv_choice *c = m->choice;
	struct srv_gen *g = c->gen;
	(void)ctx;
	if (m->ev.type == ALICE_ENGINE_EVENT_TOKEN) {
		on_token(g, c, &m->ev);
		gen_msg_free(m);
		return;
	}
	on_done(g, c, m);
	gen_msg_free(m);
	if (g->n_live == 0) {
		if (!g->replied)
			gen_complete(g);
		gen_free(g);
	}
}

/* ---- the start of the request ---- */

/* The completions echo: the prompt's text before the generated text. */
static void echo_prompt(struct srv *s, struct srv_choice *c, const struct srv_prompt *p)
{
	if (p->text) {
		alice_sb_add(&c->text, p->text);
		return;
	}
	char *t = NULL, *clean = NULL;
	size_t tl = 0, cl = 0;
	if (alice_tokenizer_decode(alice_model_tokenizer(s->model), p->tokens, p->n_tokens, false, &t, &tl, NULL) ==
		    ALICE_OK &&
	    (clean = alice_utf8_repair(t, tl, &cl)))
		alice_sb_addn(&c->text, clean, cl);
	free(clean);
	free(t);
}

static struct srv_gen *gen_create(struct srv *s, struct srv_http *h, const struct gen_plan *p)
{
	struct srv_gen *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	const struct srv_gen_request *r = &p->r;
	g->srv = s;
	g->http = *h;
	g->kind = r->kind;
	g->stream = r->stream;
	g->include_usage = r->include_usage;
	g->logprobs = r->sampling.logprobs;
	g->top_logprobs = r->sampling.n_probs;
	g->echo = r->echo;
	g->api = p->api;
	g->parse = p->parse;
	g->forced_call = p->forced_call;
	g->parse_opts = p->parse_opts;
	g->parse_opts.tools = json_object_get(p->parse_opts.tools);
	g->created = (int64_t)time(NULL);
	snprintf(g->id, sizeof(g->id), "%s-%016llx", r->kind == SRV_KIND_CHAT ? "chatcmpl" : "cmpl",
		 (unsigned long long)gen_random64());
	g->n_choices = p->n_prompts * (size_t)r->n;
	for (size_t i = 0; i < p->n_prompts; i++)
		g->prompt_tokens += (int64_t)p->prompts[i].n;
	/* linked at once: gen_free unlinks */
	g->next = s->gens;
	if (s->gens)
		s->gens->prev = g;
	s->gens = g;
	s->n_gens++;
	if (!(g->choices = calloc(g->n_choices, sizeof(*g->choices))))
		goto nomem;
	for (size_t i = 0; i < g->n_choices; i++) {
		struct srv_choice *c = &g->choices[i];
		c->gen = g;
		c->index = (int)i;
		c->prompt_index = (int)(i / (size_t)r->n);
		if (g->logprobs && !(c->lp = gen_logprobs_new(g)))
			goto nomem;
		if (!(c->done_msg = gen_msg_new()))
			goto nomem;
		if (g->echo && r->kind == SRV_KIND_COMPLETION)
			echo_prompt(s, c, &r->prompts[c->prompt_index]);
		if (c->text.oom)
			goto nomem;
	}
	return g;
nomem:
	gen_free(g);
	return NULL;
}

/* Map a submit failure to its reply. */
static void submit_error(const struct srv_gen *g, enum alice_status st, const struct alice_error *aerr,
			 struct srv_api_error *e)
{
	if (st == ALICE_ERR_RANGE)
		srv_api_error_set(e, 503, "unavailable_error", "queue_full", NULL, "the server is busy (%s); retry shortly",
				  aerr->msg);
	else if (st == ALICE_ERR_INVALID)
		srv_api_error_invalid(e, g->kind == SRV_KIND_CHAT ? "messages" : "prompt", "%s", aerr->msg);
	else
		srv_api_error_set(e, 503, "unavailable_error", NULL, NULL, "cannot queue the request: %s",
				  aerr->msg[0] ? aerr->msg : alice_status_str(st));
}

/* One engine request per choice; stops at the first failure. */
static enum alice_status gen_submit(struct srv_gen *g, const struct gen_plan *p, struct alice_error *aerr)
{
	struct srv *s = g->srv;
	for (size_t i = 0; i < g->n_choices; i++) {
		struct srv_choice *c = &g->choices[i];
		struct alice_engine_request q = {0};
		q.prompt = p->prompts[c->prompt_index].tokens;
		q.n_prompt = (int32_t)p->prompts[c->prompt_index].n;
		q.max_tokens = p->r.max_tokens > 0 ? (int32_t)p->r.max_tokens : -1;
		q.sampling = p->r.sampling;
		q.sampling.seed = p->seed + (uint64_t)i;
		q.stop = p->stops;
		q.n_stop = p->n_stops;
		q.ignore_eos = p->r.ignore_eos;
		/* formats whose call marker is a control token */
		q.render_special = p->parse_opts.format == ALICE_TOOL_FORMAT_MISTRAL ||
				   p->parse_opts.format == ALICE_TOOL_FORMAT_MISTRAL_ARGS ||
				   p->parse_opts.format == ALICE_TOOL_FORMAT_LLAMA3;
		q.no_spec = p->r.no_spec;
		q.spec_n_max = (int32_t)p->r.spec_n_max;
		q.spec_n_min = (int32_t)p->r.spec_n_min;
		q.spec_p_min = p->r.spec_p_min;
		q.on_event = on_engine_event;
		q.user = c;
		enum alice_status st = ALICE_OK;
		if (p->r.grammar) {
			st = alice_grammar_constraint_create(p->r.grammar, s->grammar_vocab, alice_model_tokenizer(s->model),
							     &q.grammar, aerr);
			if (st == ALICE_ERR_RANGE) /* the grammar's fault (gen_prepare checks this first): 400 */
				st = ALICE_ERR_INVALID;
		}
		if (st == ALICE_OK)
			st = alice_engine_submit(s->engine, &q, &c->engine_id, aerr);
		if (st != ALICE_OK) {
			alice_grammar_constraint_free(q.grammar);
			return st;
		}
		c->live = true;
		g->n_live++;
	}
	return ALICE_OK;
}

/* A stream waiting for its first token (queued, or in prefill) sends an SSE
 * comment every interval: half of --timeout, between 0.5 and 5 s. */
static void on_heartbeat(evutil_socket_t fd, short what, void *arg)
{
	struct srv_gen *g = arg;
	if (g->http.req && !g->client_gone)
		srv_sse_keepalive(g->http.req);
	(void)fd;
	(void)what;
}

static void start_heartbeat(struct srv_gen *g)
{
	long ms = (long)g->srv->cfg.timeout_s * 500;
	ms = ms < 500 ? 500 : ms > 5000 ? 5000 : ms;
	g->heartbeat = event_new(g->srv->base, -1, EV_PERSIST, on_heartbeat, g);
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	if (g->heartbeat)
		event_add(g->heartbeat, &tv);
}

static void gen_start_reply(struct srv_gen *g)
{
	start_watch(g);
	if (!g->stream)
		return;
	srv_reply_stream_start(&g->http);
	start_heartbeat(g);
	if (g->api) {
		g->api->stream_start(g);
		return;
	}
	for (size_t i = 0; i < g->n_choices; i++) {
		struct srv_choice *c = &g->choices[i];
		if (g->kind == SRV_KIND_CHAT)
			send_chunk(g, c, "", 0, true, NULL, NULL);
		else if (c->text.n > 0) /* echo */
			send_chunk(g, c, c->text.p, c->text.n, false, NULL, NULL);
	}
}

/* A prepared plan on the event thread: create the generation, submit, reply. */
static void gen_start(struct srv *s, struct srv_http *h, struct gen_plan *p)
{
	struct srv_api_error e;
	struct srv_gen *g = gen_create(s, h, p);
	if (!g) {
		gen_plan_free(p);
		srv_reply_nomem(h);
		return;
	}
	g->api_state = p->api_state; /* the generation's now */
	p->api_state = NULL;
	struct alice_error aerr = {{0}};
	enum alice_status st = gen_submit(g, p, &aerr);
	gen_plan_free(p);
	if (st != ALICE_OK) {
		submit_error(g, st, &aerr, &e);
		gen_cancel(g);
		srv_reply_error(&g->http, &e);
		g->replied = true;
		if (g->n_live == 0)
			gen_free(g);
		return;
	}
	gen_start_reply(g);
}

/* ---- preparing off the event thread ----
 *
 * gen_prepare (parse the body, convert a JSON schema, compile a grammar,
 * render and tokenize) costs up to tens of ms on a large body, so it runs
 * on a prep worker: the event thread copies the body, queues a job and goes
 * back to serving (/health keeps answering); the worker posts the job back
 * through the message queue and gen_prep_done finishes it on the event
 * thread. At most PREP_WORKERS workers run; they exit when the queue is
 * empty. A job counts in s->n_gens, so a graceful shutdown waits for it, and
 * srv_gen_cancel_all waits until no worker touches the model any more (it
 * runs before teardown frees the model). */
#define PREP_WORKERS 2

struct prep_job {
	struct srv_msg base;
	struct prep_job *qnext;
	struct srv *srv;
	struct srv_http http; /* http.req NULL once the connection closed */
	struct evhttp_connection *evcon;
	enum srv_kind kind;
	const struct gen_api *api; /* NULL: chat/completions */
	char *body;
	size_t len;
	struct gen_plan plan;
	struct srv_api_error e;
	int rc;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t idle;
	struct prep_job *head, *tail;
	int n_workers;
	int n_busy; /* jobs queued or being prepared */
} prep = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0};

static void prep_run(struct prep_job *j)
{
	j->rc = j->api ? gen_prepare_api(j->srv, j->api, j->body, j->len, &j->plan, &j->e)
		       : gen_prepare(j->srv, j->kind, j->body, j->len, &j->plan, &j->e);
	free(j->body);
	j->body = NULL;
}

static void *prep_worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&prep.mu);
		struct prep_job *j = prep.head;
		if (!j) {
			prep.n_workers--;
			pthread_mutex_unlock(&prep.mu);
			return NULL;
		}
		prep.head = j->qnext;
		if (!prep.head)
			prep.tail = NULL;
		pthread_mutex_unlock(&prep.mu);
		struct srv *s = j->srv;
		prep_run(j);
		srv_msgq_post(&s->q, &j->base); /* j belongs to the event thread now */
		pthread_mutex_lock(&prep.mu);
		if (--prep.n_busy == 0)
			pthread_cond_broadcast(&prep.idle);
		pthread_mutex_unlock(&prep.mu);
	}
}

/* Wait until no job is queued or being prepared (bounded: a job's work is
 * bounded by --max-body and the grammar caps). */
static void prep_wait_idle(void)
{
	pthread_mutex_lock(&prep.mu);
	while (prep.n_busy > 0)
		pthread_cond_wait(&prep.idle, &prep.mu);
	pthread_mutex_unlock(&prep.mu);
}

/* evhttp closes the connection while the job is out (client gone, shutdown). */
static void prep_conn_close(struct evhttp_connection *evcon, void *arg)
{
	struct prep_job *j = arg;
	j->evcon = NULL;
	if (j->http.req && !evhttp_request_get_connection(j->http.req))
		evhttp_request_free(j->http.req); /* detached by evhttp: ours to free */
	j->http.req = NULL;
	(void)evcon;
}

static void gen_prep_done(struct srv_msg *m, void *ctx)
{
	struct prep_job *j = (struct prep_job *)m;
	struct srv *s = ctx;
	s->n_gens--;
	if (j->evcon)
		evhttp_connection_set_closecb(j->evcon, NULL, NULL);
	if (!s->base || !j->http.req) { /* torn down, or the client left meanwhile */
		if (s->base)
			srv_request_done(&j->http, 499);
		gen_plan_free(&j->plan);
		free(j);
		return;
	}
	if (j->rc != 0) {
		gen_plan_free(&j->plan);
		srv_reply_error(&j->http, &j->e);
	} else {
		gen_start(s, &j->http, &j->plan);
	}
	free(j);
}

static void gen_handle(struct srv *s, struct srv_http *h, enum srv_kind kind, const struct gen_api *api,
		       const char *body, size_t len)
{
	struct prep_job *j = calloc(1, sizeof(*j));
	char *copy = j ? malloc(len + 1) : NULL;
	if (!copy) {
		free(j);
		srv_reply_nomem(h);
		return;
	}
	memcpy(copy, body, len);
	copy[len] = 0;
	j->base.run = gen_prep_done;
	j->srv = s;
	j->http = *h;
	j->kind = kind;
	j->api = api;
	j->body = copy;
	j->len = len;
	s->n_gens++;
	pthread_mutex_lock(&prep.mu);
	prep.n_busy++;
	if (prep.tail)
		prep.tail->qnext = j;
	else
		prep.head = j;
	prep.tail = j;
	bool spawn = prep.n_workers < PREP_WORKERS;
	if (spawn)
		prep.n_workers++;
	pthread_mutex_unlock(&prep.mu);
	if (spawn) {
		pthread_t t;
		pthread_attr_t at;
		bool ok = pthread_attr_init(&at) == 0;
		if (ok) {
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			ok = pthread_create(&t, &at, prep_worker, NULL) == 0;
			pthread_attr_destroy(&at);
		}
		if (!ok) {
			pthread_mutex_lock(&prep.mu);
			bool none = prep.n_workers == 1; /* only the one we failed to start */
			if (!none)
				prep.n_workers--;
			pthread_mutex_unlock(&prep.mu);
			if (none) /* no worker at all: prepare here (it counts itself out) */
				prep_worker(NULL);
		}
	}
	/* after queueing: a job finished inline has already been posted, and its
	 * closecb must not point at it; the message runs only after we return */
	j->evcon = h->req ? evhttp_request_get_connection(h->req) : NULL;
	if (j->evcon)
		evhttp_connection_set_closecb(j->evcon, prep_conn_close, j);
}

void srv_route_chat(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	gen_handle(s, h, SRV_KIND_CHAT, NULL, body, len);
}

void srv_route_completions(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	gen_handle(s, h, SRV_KIND_COMPLETION, NULL, body, len);
}

void srv_gen_handle_api(struct srv *s, struct srv_http *h, const struct gen_api *api, const char *body, size_t len)
{
	gen_handle(s, h, SRV_KIND_CHAT, api, body, len);
}
