/* http.c — the top of the server: the router (route table lookup, CORS
 * preflight, methods, API key, server state, body limit; conn.c checks
 * the head of most requests before their body is read), the background
 * model loader, signals and graceful shutdown, and srv_run. Routes live in
 * routes.c and route_*.c / gen*.c; replies in reply.c. */
#define _GNU_SOURCE
#include "server.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include "alice/chat_template.h"
#include "alice/grammar.h"
#include "alice/embed.h"
#include "alice/log.h"
#include "auth.h"
#include "chat_tmpl.h"
#include "conn.h"
#include "reply.h"
#include "responses_store.h"
#include "routes.h"

#define SHUTDOWN_GRACE_MS 5000.0

/* ---- router ---- */

static bool check_api_key(struct srv *s, struct evhttp_request *req, struct srv_api_error *e)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *auth = evhttp_find_header(in, "Authorization"), *xkey = evhttp_find_header(in, "x-api-key");
	return srv_auth_check(s, auth, auth ? strlen(auth) : 0, xkey, xkey ? strlen(xkey) : 0, e);
}

/* Framing the router refuses (the early check in conn.c sees most heads
 * first; this covers pipelined ones): two Content-Length headers, or one
 * with Transfer-Encoding. */
static bool ambiguous_length(struct evhttp_request *req)
{
	int n_cl = 0, n_te = 0;
	const struct evkeyval *kv;
	for (kv = evhttp_request_get_input_headers(req)->tqh_first; kv; kv = kv->next.tqe_next) {
		if (strcasecmp(kv->key, "Content-Length") == 0)
			n_cl++;
		else if (strcasecmp(kv->key, "Transfer-Encoding") == 0)
			n_te++;
	}
	return n_cl > 1 || (n_cl && n_te);
}

/* CORS preflight: 204 with Allow (and the CORS headers with --cors-origin). */
static void reply_options(struct srv *s, struct srv_http *h)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(h->req);
	evhttp_add_header(oh, "Allow", h->route->allow);
	if (s->cfg.cors_origin && s->cfg.cors_origin[0]) {
		evhttp_add_header(oh, "Access-Control-Allow-Methods", h->route->allow);
		evhttp_add_header(oh, "Access-Control-Allow-Headers",
				  "Authorization, Content-Type, x-api-key, anthropic-version");
		evhttp_add_header(oh, "Access-Control-Max-Age", "86400");
	}
	srv_reply_body(h, 204, NULL, NULL);
}

/* Whether the route may run now; else e says why (404/405/401/503/413). */
static bool admit(struct srv *s, struct srv_http *h, enum evhttp_cmd_type cmd, size_t len, struct srv_api_error *e)
{
	const struct srv_route *rt = h->route;
	if (!rt) {
		srv_api_error_set(e, 404, "invalid_request_error", "not_found", NULL, "unknown route %s %.80s",
				  h->method, h->path);
		return false;
	}
	if (cmd != rt->method && !(rt->method == EVHTTP_REQ_GET && cmd == EVHTTP_REQ_HEAD)) {
		evhttp_add_header(evhttp_request_get_output_headers(h->req), "Allow", rt->allow);
		srv_api_error_set(e, 405, "invalid_request_error", "method_not_allowed", NULL,
				  "%s is not allowed on %s; allowed: %s", h->method, rt->path, rt->allow);
		return false;
	}
	if (srv_auth_required(s, rt) && !check_api_key(s, h->req, e))
		return false;
	if (rt->flags & SRV_ROUTE_ANYTIME)
		return true;
	if (s->state != SRV_READY) {
		if (s->state == SRV_LOADING)
			srv_api_error_set(e, 503, "unavailable_error", "model_loading", NULL,
					  "the model is still loading; retry shortly");
		else
			srv_api_error_set(e, 503, "unavailable_error", "shutting_down", NULL, "the server is shutting down");
		return false;
	}
	if ((rt->flags & SRV_ROUTE_GENERATE) && alice_engine_pooling(s->engine) >= 0) {
		srv_api_error_invalid(e, NULL,
				      "this server serves embeddings only (--embeddings, or an embedding model): %s is "
				      "not available; start it without --embeddings and with a generative model",
				      rt->path);
		return false;
	}
	if (len > s->cfg.max_body) {
		srv_api_error_set(e, 413, "invalid_request_error", "body_too_large", NULL,
				  "the request body is %zu bytes; the limit is %zu (--max-body)", len, s->cfg.max_body);
		return false;
	}
	return true;
}

static void handle_request(struct evhttp_request *req, void *arg)
{
	struct srv *s = arg;
	struct srv_http hs, *h = &hs;
	struct srv_api_error e;
	if (!srv_conn_dispatched(s, req))
		return;
	srv_http_begin(h, s, req);
	h->route = srv_route_find(h->path);
	if (ambiguous_length(req)) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		srv_api_error_set(&e, 400, "invalid_request_error", "bad_header", NULL,
				  "more than one Content-Length, or Content-Length with Transfer-Encoding");
		srv_reply_error(h, &e);
		return;
	}
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	if (h->route && cmd == EVHTTP_REQ_OPTIONS) {
		reply_options(s, h);
		return;
	}
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	if (!admit(s, h, cmd, len, &e)) {
		srv_reply_error(h, &e);
		return;
	}
	const char *body = len ? (const char *)evbuffer_pullup(in, (ev_ssize_t)len) : "";
	h->route->handle(s, h, body, len);
}

/* ---- loader thread ---- */

/* The loader's one message, allocated before the thread starts (so the
 * loader never allocates to report), also its argument. */
struct load_msg {
	struct srv_msg base;
	struct srv *srv;
	bool ok;
	char error[700];
};

/* The engine's events of one round go to the event thread with one
 * wake-up (alice_engine_params.on_round). */
static void engine_round(void *user, bool begin)
{
	struct srv *s = user;
	srv_msgq_hold(&s->q, begin);
}

static enum alice_status load_model(struct srv *s, struct load_msg *m)
{
	struct alice_error err = {{0}};
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.path = s->cfg.model_path;
	mp.backend = s->cfg.backend;
	mp.backend_dir = s->cfg.backend_dir;
	mp.n_threads = s->cfg.n_threads;
	enum alice_status st = alice_model_load(&mp, &s->model, &err);
	if (st != ALICE_OK) {
		snprintf(m->error, sizeof(m->error), "cannot load model %s: %s (%s)", s->cfg.model_path, err.msg,
			 alice_status_str(st));
		return st;
	}
	if (s->cfg.draft_path) {
		mp.path = s->cfg.draft_path;
		if (s->cfg.backend_draft)
			mp.backend = s->cfg.backend_draft;
		if ((st = alice_model_load(&mp, &s->draft, &err)) != ALICE_OK) {
			snprintf(m->error, sizeof(m->error), "cannot load draft model %s: %s (%s)", s->cfg.draft_path,
				 err.msg, alice_status_str(st));
			return st;
		}
		if ((st = alice_spec_check_vocab(s->model, s->cfg.model_path, s->draft, s->cfg.draft_path, &err)) !=
		    ALICE_OK) {
			snprintf(m->error, sizeof(m->error), "%s", err.msg);
			return st;
		}
		if (alice_model_is_recurrent(s->draft)) {
			snprintf(m->error, sizeof(m->error),
				 "draft model %s (%s) is recurrent: its state cannot be rewound after a rejected draft",
				 s->cfg.draft_path, alice_model_arch(s->draft));
			return ALICE_ERR_INVALID;
		}
	}
	struct alice_engine_params ep;
	alice_engine_params_default(&ep);
	ep.spec = s->cfg.spec;
	ep.spec.draft = s->draft;
	ep.n_slots = (uint32_t)s->cfg.n_parallel;
	ep.n_ctx = (uint32_t)s->cfg.n_ctx;
	ep.n_batch = (uint32_t)s->cfg.n_batch;
	ep.max_queue = (uint32_t)s->cfg.queue;
	ep.no_prefix_cache = s->cfg.no_prefix_cache;
	ep.n_kv_cells = s->cfg.kv_cells;
	/* an embedding model (an encoder, or a GGUF naming its pooling) serves
	 * embeddings without --embeddings (README: "Embeddings") */
	ep.embeddings = s->cfg.embeddings || alice_model_is_encoder(s->model) || alice_model_pooling(s->model) >= 0;
	ep.pooling = s->cfg.pooling;
	ep.on_round = engine_round;
	ep.round_user = s;
	if ((st = alice_engine_create(s->model, &ep, &s->engine, &err)) != ALICE_OK) {
		snprintf(m->error, sizeof(m->error), "cannot start the engine for %s: %s", s->cfg.model_path, err.msg);
		return st;
	}
	if ((st = srv_chat_setup(s, m->error, sizeof(m->error))) != ALICE_OK)
		return st;
	if (alice_grammar_vocab_from_tokenizer(alice_model_tokenizer(s->model), &s->grammar_vocab, &err) != ALICE_OK)
		alice_log(ALICE_LOG_WARN, "grammar token trie: %s; grammar requests will fail", err.msg);
	return ALICE_OK;
}

/* The model, engine and token trie are published to the event thread by
 * the queue's mutex (srv_msgq_post). */
static void *loader_main(void *arg)
{
	struct load_msg *m = arg;
	struct srv *s = m->srv;
	m->ok = load_model(s, m) == ALICE_OK;
	if (!m->ok) {
		alice_engine_free(s->engine);
		alice_chat_template_free(s->chat_tmpl);
		alice_model_free(s->model);
		alice_model_free(s->draft);
		s->draft = NULL;
		s->chat_tmpl = NULL;
		s->engine = NULL;
		s->model = NULL;
	}
	__atomic_store_n(&s->loader_done, 1, __ATOMIC_RELEASE);
	srv_msgq_post(&s->q, &m->base);
	return NULL;
}

static void set_model_id(struct srv *s)
{
	const char *base = strrchr(s->cfg.model_path, '/');
	base = base ? base + 1 : s->cfg.model_path;
	snprintf(s->model_id, sizeof(s->model_id), "%s", base);
	size_t n = strlen(s->model_id);
	if (n > 5 && strcmp(s->model_id + n - 5, ".gguf") == 0)
		s->model_id[n - 5] = '\0';
}

static void on_loaded(struct srv *s)
{
	set_model_id(s);
	s->created = (int64_t)time(NULL);
	if ((int64_t)alice_engine_n_ctx(s->engine) > (int64_t)alice_model_n_ctx_train(s->model))
		alice_log(ALICE_LOG_WARN, "--ctx-size %u is beyond the %d positions the model was trained on",
			  alice_engine_n_ctx(s->engine), alice_model_n_ctx_train(s->model));
	if (s->state == SRV_LOADING)
		s->state = SRV_READY;
	if (s->cfg.spec.mode != ALICE_SPEC_NONE)
		alice_log(ALICE_LOG_INFO, "speculative decoding: %s, draft-max %u, draft-min %u%s",
			  s->cfg.spec.mode == ALICE_SPEC_NGRAM ? "n-gram prompt lookup" : s->cfg.draft_path,
			  s->cfg.spec.n_max, s->cfg.spec.n_min,
			  alice_model_is_recurrent(s->model) ? " (off: the model is recurrent)" : "");
	struct alice_engine_stats est;
	alice_engine_stats(s->engine, &est);
	alice_log(ALICE_LOG_INFO,
		  "model %s loaded: arch %s, backend %s (%s), %d slots x %u positions, KV pool %llu cells, chat "
		  "template %s (%s)",
		  s->model_id, alice_model_arch(s->model), alice_model_backend_name(s->model),
		  alice_model_device_name(s->model), s->cfg.n_parallel, alice_engine_n_ctx(s->engine),
		  (unsigned long long)est.kv_cells_total,
		  alice_chat_template_name(s->chat_tmpl), alice_chat_format_name(s->chat_format));
	if (alice_engine_pooling(s->engine) >= 0)
		alice_log(ALICE_LOG_INFO, "embeddings server: /v1/embeddings with %s pooling; generation routes refused",
			  alice_pooling_name(alice_engine_pooling(s->engine)));
}

static void on_load_msg(struct srv_msg *base, void *ctx)
{
	struct load_msg *m = (struct load_msg *)base;
	struct srv *s = m->srv;
	(void)ctx;
	if (!s->base) {
		/* after the loop (shutdown): nothing to announce */
	} else if (m->ok) {
		on_loaded(s);
	} else {
		alice_log(ALICE_LOG_ERROR, "%s", m->error);
		s->state = SRV_FAILED;
		s->exit_code = 1;
		event_base_loopbreak(s->base);
	}
	free(m);
}

/* ---- the event loop: messages, shutdown, signals ---- */

static void exit_soon(struct srv *s)
{
	struct timeval tv = {0, 100000}; /* let the last replies flush */
	event_base_loopexit(s->base, &tv);
}

static void on_notify(evutil_socket_t fd, short what, void *arg)
{
	struct srv *s = arg;
	srv_msgq_drain(&s->q, s);
	if (s->state == SRV_STOPPING && s->n_gens == 0)
		exit_soon(s);
	(void)fd;
	(void)what;
}

static void shutdown_tick(evutil_socket_t fd, short what, void *arg)
{
	struct srv *s = arg;
	if (s->n_gens == 0) {
		exit_soon(s);
		return;
	}
	if (srv_now_ms() - s->shutdown_started > SHUTDOWN_GRACE_MS)
		srv_gen_cancel_all(s);
	struct timeval tv = {0, 100000};
	evtimer_add(s->ev_shutdown, &tv);
	(void)fd;
	(void)what;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct srv *s = arg;
	if (s->state == SRV_STOPPING || s->state == SRV_LOADING) {
		/* second signal, or nothing to finish: stop now */
		alice_log(ALICE_LOG_INFO, "signal %d: stopping now", (int)sig);
		srv_gen_cancel_all(s);
		if (s->state == SRV_LOADING)
			s->state = SRV_STOPPING;
		event_base_loopexit(s->base, NULL);
		return;
	}
	alice_log(ALICE_LOG_INFO, "signal %d: no longer accepting; finishing %d request(s)", (int)sig, s->n_gens);
	s->state = SRV_STOPPING;
	s->shutdown_started = srv_now_ms();
	if (s->listener) {
		evhttp_del_accept_socket(s->http, s->listener);
		s->listener = NULL;
	}
	shutdown_tick(-1, 0, s);
	(void)what;
}

/* ---- run ---- */

/* The bound port (the asked one, or the kernel's pick for port 0). */
static int bound_port(struct srv *s)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	evutil_socket_t fd = evhttp_bound_socket_get_fd(s->listener);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			return ntohs(((struct sockaddr_in *)&ss)->sin_port);
		if (ss.ss_family == AF_INET6)
			return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return s->cfg.port;
}

static int http_setup(struct srv *s)
{
	const struct srv_config *cfg = &s->cfg;
	s->base = event_base_new();
	s->http = s->base ? evhttp_new(s->base) : NULL;
	if (!s->http) {
		alice_log(ALICE_LOG_ERROR, "cannot create the event loop");
		return -1;
	}
	/* A Content-Length over --max-body gets a JSON 413 from the early head
	 * check (conn.c) before the body is read; evhttp reads no more than
	 * --max-body of any body (a chunked one beyond gets its plain 413). */
	evhttp_set_max_body_size(s->http, (ev_ssize_t)cfg->max_body);
	evhttp_set_max_headers_size(s->http, 64 * 1024);
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
						   EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	evhttp_set_timeout(s->http, cfg->timeout_s > 0 ? cfg->timeout_s : 600);
	evhttp_set_gencb(s->http, handle_request, s);
	if (srv_conn_setup(s) != 0) {
		alice_log(ALICE_LOG_ERROR, "out of memory");
		return -1;
	}
	struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	int gai = getaddrinfo(cfg->host, NULL, &hints, &ai);
	if (gai != 0) {
		alice_log(ALICE_LOG_ERROR, "cannot listen on %s:%d: cannot resolve the --host address '%s': %s", cfg->host,
			  cfg->port, cfg->host, gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
		return -1;
	}
	freeaddrinfo(ai);
	errno = 0;
	s->listener = evhttp_bind_socket_with_handle(s->http, cfg->host, (ev_uint16_t)cfg->port);
	if (!s->listener) {
		int err = errno;
		alice_log(ALICE_LOG_ERROR, "cannot listen on %s:%d: %s", cfg->host, cfg->port,
			  err ? strerror(err) : "the address cannot be bound");
		return -1;
	}
	srv_conn_listening(s);
	s->ev_notify = event_new(s->base, s->q.notify_rd, EV_READ | EV_PERSIST, on_notify, s);
	s->ev_sigint = evsignal_new(s->base, SIGINT, on_signal, s);
	s->ev_sigterm = evsignal_new(s->base, SIGTERM, on_signal, s);
	s->ev_shutdown = evtimer_new(s->base, shutdown_tick, s);
	if (!s->ev_notify || !s->ev_sigint || !s->ev_sigterm || !s->ev_shutdown) {
		alice_log(ALICE_LOG_ERROR, "cannot create events");
		return -1;
	}
	event_add(s->ev_notify, NULL);
	event_add(s->ev_sigint, NULL);
	event_add(s->ev_sigterm, NULL);
	alice_log(ALICE_LOG_INFO, "alice-llm-server %s listening on http://%s:%d (loading %s)", ALICE_VERSION,
		  cfg->host, bound_port(s), cfg->model_path);
	return 0;
}

static int start_loader(struct srv *s)
{
	struct load_msg *m = calloc(1, sizeof(*m));
	if (!m) {
		alice_log(ALICE_LOG_ERROR, "out of memory");
		return -1;
	}
	m->base.run = on_load_msg;
	m->srv = s;
	if (pthread_create(&s->loader, NULL, loader_main, m) != 0) {
		free(m);
		alice_log(ALICE_LOG_ERROR, "cannot start the loader thread");
		return -1;
	}
	s->loader_started = true;
	s->state = SRV_LOADING;
	return 0;
}

static void free_events(struct srv *s)
{
	if (s->ev_notify)
		event_free(s->ev_notify);
	if (s->ev_sigint)
		event_free(s->ev_sigint);
	if (s->ev_sigterm)
		event_free(s->ev_sigterm);
	if (s->ev_shutdown)
		event_free(s->ev_shutdown);
	if (s->base)
		event_base_free(s->base);
	s->base = NULL;
}

/* After the loop: cancel what is left, close connections, stop the engine
 * and deliver its last events (they free the generations). */
static void teardown(struct srv *s)
{
	if (s->loader_started)
		pthread_join(s->loader, NULL);
	srv_gen_cancel_all(s);
	if (s->http)
		evhttp_free(s->http); /* closes connections; close callbacks detach gens */
	srv_conn_teardown(s);
	alice_engine_free(s->engine); /* the cancelled requests' DONE events land in the queue */
	free_events(s);               /* a late load message sees no event base */
	srv_msgq_drain(&s->q, s);
	alice_grammar_vocab_free(s->grammar_vocab);
	alice_chat_template_free(s->chat_tmpl);
	alice_model_free(s->model);
	srv_responses_store_free(s->responses);
	alice_model_free(s->draft);
}

int srv_run(const struct srv_config *cfg)
{
	struct srv *s = calloc(1, sizeof(*s));
	int rc = 1;
	if (!s)
		return 1;
	s->cfg = *cfg;
	srv_log_use_json(cfg->log_json);
	signal(SIGPIPE, SIG_IGN);
	if (srv_msgq_init(&s->q) != 0) {
		alice_log(ALICE_LOG_ERROR, "pipe: %s", strerror(errno));
		goto out;
	}
	if (!(s->responses = srv_responses_store_new(cfg->responses_store))) {
		alice_log(ALICE_LOG_ERROR, "out of memory");
		goto out;
	}
	if (http_setup(s) != 0 || start_loader(s) != 0)
		goto out;
	event_base_dispatch(s->base);
	rc = s->exit_code;
	if (!__atomic_load_n(&s->loader_done, __ATOMIC_ACQUIRE)) {
		/* Stopped while the model is still loading (a load cannot be
		 * interrupted): leave the loader and its state to process exit. */
		alice_log(ALICE_LOG_INFO, "exiting while the model is still loading");
		if (s->listener)
			evhttp_del_accept_socket(s->http, s->listener);
		return rc;
	}
out:
	teardown(s);
	srv_msgq_close(&s->q);
	alice_log_set_sink(NULL, NULL); /* the core's own sink again */
	free(s);
	return rc;
}
