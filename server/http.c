/* http.c — the event loop: evhttp routes, API key, body limit, CORS, OpenAI
 * error bodies, the request log line, the background model loader, signals
 * and graceful shutdown. The completion routes live in gen.c. */
#define _GNU_SOURCE
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include "alice/grammar.h"
#include "alice/log.h"
#include "alice/tokenizer.h"
#include "sse.h"

#define SHUTDOWN_GRACE_MS 5000.0

double srv_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- messages from other threads ---- */

void srv_post(struct srv *s, struct srv_msg *m)
{
	m->next = NULL;
	pthread_mutex_lock(&s->mu);
	bool was_empty = s->msg_head == NULL;
	if (s->msg_tail)
		s->msg_tail->next = m;
	else
		s->msg_head = m;
	s->msg_tail = m;
	pthread_mutex_unlock(&s->mu);
	if (was_empty) {
		char c = 1;
		/* non-blocking; a full pipe already guarantees a wake-up */
		ssize_t w = write(s->notify_wr, &c, 1);
		(void)w;
	}
}

void srv_msg_free(struct srv_msg *m)
{
	if (!m)
		return;
	free(m->error);
	free((void *)m->ev.text);
	free((void *)m->ev.top);
	free((void *)m->ev.error);
	free(m);
}

/* ---- replies ---- */

/* CORS is off unless --cors-origin names the allowed origin (or "*"). */
void srv_add_cors_headers(struct srv *s, struct evhttp_request *req)
{
	const char *origin = s->cfg.cors_origin;
	if (!origin || !origin[0])
		return;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Access-Control-Allow-Origin", origin);
	if (strcmp(origin, "*") != 0)
		evhttp_add_header(h, "Vary", "Origin");
}

static void add_common_headers(struct srv *s, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	srv_add_cors_headers(s, req);
	evhttp_add_header(h, "Server", "alice-llm/" ALICE_VERSION);
}

void srv_reply_json(struct srv_http *h, int status, struct json_object *obj)
{
	struct evbuffer *b = evbuffer_new();
	size_t len = 0;
	const char *txt = srv_json_text(obj, &len);
	if (b) {
		evbuffer_add(b, txt, len);
		evbuffer_add(b, "\n", 1);
	}
	struct evkeyvalq *hd = evhttp_request_get_output_headers(h->req);
	add_common_headers(h->srv, h->req);
	evhttp_add_header(hd, "Content-Type", "application/json");
	const char *reason = status == 200 ? "OK" : NULL;
	evhttp_send_reply(h->req, status, reason, b);
	if (b)
		evbuffer_free(b);
	json_object_put(obj);
	h->status = status;
	srv_log_request(h);
}

void srv_reply_error(struct srv_http *h, const struct srv_api_error *e)
{
	struct evkeyvalq *hd = evhttp_request_get_output_headers(h->req);
	if (e->status == 503)
		evhttp_add_header(hd, "Retry-After", "1");
	if (e->status == 401)
		evhttp_add_header(hd, "WWW-Authenticate", "Bearer");
	srv_reply_json(h, e->status, srv_api_error_json(e));
}

static const char *method_name(enum evhttp_cmd_type t)
{
	switch (t) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	case EVHTTP_REQ_TRACE: return "TRACE";
	case EVHTTP_REQ_CONNECT: return "CONNECT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	}
	return "?";
}

static struct srv *g_log_srv; /* for the JSON log sink */

void srv_log_request(struct srv_http *h)
{
	double ms = srv_now_ms() - h->t_start;
	srv_metrics_observe(h);
	if (h->srv->cfg.log_json) {
		char path[200];
		size_t o = 0;
		/* the path is URL-decoded text from the client: escape for JSON */
		for (const char *p = h->path; *p && o + 7 < sizeof(path); p++) {
			unsigned char c = (unsigned char)*p;
			if (c == '"' || c == '\\') {
				path[o++] = '\\';
				path[o++] = (char)c;
			} else if (c < 0x20 || c >= 0x7f) {
				o += (size_t)snprintf(path + o, sizeof(path) - o, "\\u%04x", c);
			} else {
				path[o++] = (char)c;
			}
		}
		path[o] = '\0';
		alice_log(ALICE_LOG_INFO,
			  "{\"event\":\"request\",\"id\":%llu,\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,"
			  "\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"prefill_ms\":%.1f,"
			  "\"decode_ms\":%.1f,\"total_ms\":%.1f}",
			  (unsigned long long)h->id, h->method, path, h->status, (long long)h->prompt_tokens,
			  (long long)h->completion_tokens, h->prefill_ms, h->decode_ms, ms);
	} else {
		alice_log(ALICE_LOG_INFO,
			  "req %llu %s %s %d prompt=%lld completion=%lld prefill_ms=%.1f decode_ms=%.1f total_ms=%.1f",
			  (unsigned long long)h->id, h->method, h->path, h->status, (long long)h->prompt_tokens,
			  (long long)h->completion_tokens, h->prefill_ms, h->decode_ms, ms);
	}
}

/* JSON-lines sink: {"ts","level","msg"}; a message that is itself a JSON
 * object starting with {"event" (the request line) is merged in. */
static void json_log_sink(enum alice_log_level level, const char *msg, void *user)
{
	char ts[32];
	struct timespec now;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	if (strncmp(msg, "{\"event\"", 8) == 0) {
		fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",%s\n", ts, now.tv_nsec / 1000000,
			alice_log_level_name(level), msg + 1);
		return;
	}
	struct json_object *m = json_object_new_string(msg);
	fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":%s}\n", ts, now.tv_nsec / 1000000,
		alice_log_level_name(level), srv_json_text(m, NULL));
	json_object_put(m);
	(void)user;
}

/* ---- simple routes ---- */

static void route_health(struct srv *s, struct srv_http *h)
{
	struct srv_api_error e;
	if (s->state == SRV_LOADING) {
		srv_api_error_set(&e, 503, "unavailable_error", "model_loading", NULL,
				  "the model is still loading; retry shortly");
		srv_reply_error(h, &e);
		return;
	}
	struct alice_engine_stats st;
	alice_engine_stats(s->engine, &st);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "status",
			       json_object_new_string(s->state == SRV_STOPPING ? "stopping" : "ok"));
	json_object_object_add(o, "model", json_object_new_string(s->model_id));
	json_object_object_add(o, "architecture", json_object_new_string(alice_model_arch(s->model)));
	json_object_object_add(o, "backend", json_object_new_string(alice_model_backend_name(s->model)));
	json_object_object_add(o, "device", json_object_new_string(alice_model_device_name(s->model)));
	json_object_object_add(o, "vocab_size", json_object_new_int(alice_model_n_vocab(s->model)));
	json_object_object_add(o, "n_ctx", json_object_new_int((int32_t)alice_engine_n_ctx(s->engine)));
	json_object_object_add(o, "chat_template",
			       json_object_new_string(alice_chat_format_name(s->chat_format)));
	json_object_object_add(o, "slots_total", json_object_new_int((int32_t)st.n_slots));
	json_object_object_add(o, "slots_busy", json_object_new_int((int32_t)st.slots_busy));
	json_object_object_add(o, "queued", json_object_new_int((int32_t)st.queued));
	json_object_object_add(o, "requests_done", json_object_new_int64((int64_t)st.requests_done));
	json_object_object_add(o, "tokens_generated", json_object_new_int64((int64_t)st.tokens_generated));
	srv_reply_json(h, s->state == SRV_STOPPING ? 503 : 200, o);
}

static struct json_object *model_entry(struct srv *s)
{
	struct json_object *m = json_object_new_object();
	json_object_object_add(m, "id", json_object_new_string(s->model_id));
	json_object_object_add(m, "object", json_object_new_string("model"));
	json_object_object_add(m, "created", json_object_new_int64(s->created));
	json_object_object_add(m, "owned_by", json_object_new_string("alice-llm"));
	struct json_object *meta = json_object_new_object();
	json_object_object_add(meta, "name", json_object_new_string(alice_model_name(s->model)));
	json_object_object_add(meta, "architecture", json_object_new_string(alice_model_arch(s->model)));
	json_object_object_add(meta, "backend", json_object_new_string(alice_model_backend_name(s->model)));
	json_object_object_add(meta, "device", json_object_new_string(alice_model_device_name(s->model)));
	json_object_object_add(meta, "n_ctx", json_object_new_int((int32_t)alice_engine_n_ctx(s->engine)));
	json_object_object_add(meta, "n_ctx_train", json_object_new_int(alice_model_n_ctx_train(s->model)));
	json_object_object_add(meta, "n_vocab", json_object_new_int(alice_model_n_vocab(s->model)));
	json_object_object_add(meta, "n_embd", json_object_new_int(alice_model_n_embd(s->model)));
	json_object_object_add(meta, "n_params", json_object_new_int64((int64_t)alice_model_n_params(s->model)));
	json_object_object_add(meta, "size", json_object_new_int64((int64_t)alice_model_weight_bytes(s->model)));
	json_object_object_add(meta, "n_slots", json_object_new_int(s->cfg.n_parallel));
	json_object_object_add(meta, "chat_template",
			       json_object_new_string(alice_chat_format_name(s->chat_format)));
	json_object_object_add(m, "meta", meta);
	return m;
}

static void route_models(struct srv *s, struct srv_http *h)
{
	struct json_object *data = json_object_new_array();
	json_object_array_add(data, model_entry(s));
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "object", json_object_new_string("list"));
	json_object_object_add(o, "data", data);
	srv_reply_json(h, 200, o);
}

static void route_tokenize(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	struct srv_api_error e;
	struct json_object *o = srv_json_parse_object(body, len, &e), *v;
	if (!o) {
		srv_reply_error(h, &e);
		return;
	}
	bool add_special = false, parse_special = true;
	if (!json_object_object_get_ex(o, "content", &v) || !json_object_is_type(v, json_type_string)) {
		srv_api_error_invalid(&e, "content", "'content' is required and must be a string");
		goto fail;
	}
	if (srv_json_get_bool(o, "add_special", &add_special, &e) < 0 ||
	    srv_json_get_bool(o, "parse_special", &parse_special, &e) < 0)
		goto fail;
	int32_t *toks = NULL;
	size_t n = 0;
	struct alice_error aerr = {{0}};
	const struct alice_tokenizer *tk = alice_model_tokenizer(s->model);
	enum alice_status st = alice_tokenizer_encode(tk, json_object_get_string(v),
						      (size_t)json_object_get_string_len(v), add_special,
						      parse_special, &toks, &n, &aerr);
	if (st != ALICE_OK) {
		srv_api_error_invalid(&e, "content", "cannot tokenize 'content': %s", aerr.msg);
		goto fail;
	}
	struct json_object *arr = json_object_new_array_ext((int)n);
	for (size_t i = 0; i < n; i++)
		json_object_array_add(arr, json_object_new_int(toks[i]));
	free(toks);
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, "tokens", arr);
	json_object_put(o);
	srv_reply_json(h, 200, r);
	return;
fail:
	json_object_put(o);
	srv_reply_error(h, &e);
}

static void route_detokenize(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	struct srv_api_error e;
	struct json_object *o = srv_json_parse_object(body, len, &e), *v;
	if (!o) {
		srv_reply_error(h, &e);
		return;
	}
	if (!json_object_object_get_ex(o, "tokens", &v) || !json_object_is_type(v, json_type_array)) {
		srv_api_error_invalid(&e, "tokens", "'tokens' is required and must be an array of token ids");
		json_object_put(o);
		srv_reply_error(h, &e);
		return;
	}
	size_t n = json_object_array_length(v);
	int32_t n_vocab = alice_model_n_vocab(s->model);
	int32_t *toks = malloc((n ? n : 1) * sizeof(*toks));
	if (!toks) {
		srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *t = json_object_array_get_idx(v, i);
		if (!t || !json_object_is_type(t, json_type_int) || json_object_get_int64(t) < 0 ||
		    json_object_get_int64(t) >= n_vocab) {
			srv_api_error_invalid(&e, "tokens", "tokens[%zu] must be a token id in [0, %d)", i,
					      n_vocab);
			goto fail;
		}
		toks[i] = (int32_t)json_object_get_int64(t);
	}
	char *text = NULL;
	size_t text_len = 0;
	struct alice_error aerr = {{0}};
	if (alice_tokenizer_decode(alice_model_tokenizer(s->model), toks, n, true, &text, &text_len, &aerr) !=
	    ALICE_OK) {
		srv_api_error_invalid(&e, "tokens", "cannot detokenize: %s", aerr.msg);
		goto fail;
	}
	size_t clean_len = 0;
	char *clean = srv_utf8_sanitize(text, text_len, &clean_len);
	free(text);
	if (!clean) {
		srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
		goto fail;
	}
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, "content", json_object_new_string_len(clean, (int)clean_len));
	free(clean);
	free(toks);
	json_object_put(o);
	srv_reply_json(h, 200, r);
	return;
fail:
	free(toks);
	json_object_put(o);
	srv_reply_error(h, &e);
}

/* ---- router ---- */

/* GET /v1/models/{id}: the loaded model under its id, else 404. */
static void route_model(struct srv *s, struct srv_http *h, const char *id)
{
	if (strcmp(id, s->model_id) != 0) {
		struct srv_api_error e;
		srv_api_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
				  "the model '%.100s' does not exist; this server serves '%s'", id, s->model_id);
		srv_reply_error(h, &e);
		return;
	}
	srv_reply_json(h, 200, model_entry(s));
}

enum route_id { R_HEALTH, R_MODELS, R_MODEL, R_CHAT, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE, R_METRICS };

static const struct route {
	const char *path;
	enum route_id id;
	enum evhttp_cmd_type method;
	const char *allow;
} routes[] = {
	{"/health", R_HEALTH, EVHTTP_REQ_GET, "GET, HEAD, OPTIONS"},
	{"/v1/models", R_MODELS, EVHTTP_REQ_GET, "GET, HEAD, OPTIONS"},
	{"/v1/models/", R_MODEL, EVHTTP_REQ_GET, "GET, HEAD, OPTIONS"}, /* prefix: /v1/models/{id} */
	{"/v1/chat/completions", R_CHAT, EVHTTP_REQ_POST, "POST, OPTIONS"},
	{"/v1/completions", R_COMPLETIONS, EVHTTP_REQ_POST, "POST, OPTIONS"},
	{"/tokenize", R_TOKENIZE, EVHTTP_REQ_POST, "POST, OPTIONS"},
	{"/detokenize", R_DETOKENIZE, EVHTTP_REQ_POST, "POST, OPTIONS"},
	{"/metrics", R_METRICS, EVHTTP_REQ_GET, "GET, HEAD, OPTIONS"},
};

/* Constant-time comparison so the key cannot be guessed byte by byte. */
static bool key_equal(const char *a, size_t na, const char *b, size_t nb)
{
	unsigned char d = na != nb;
	for (size_t i = 0; i < na; i++)
		d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
	return d == 0 && nb > 0;
}

static bool check_api_key(struct srv *s, struct evhttp_request *req, struct srv_api_error *e)
{
	const char *key = s->cfg.api_key;
	if (!key || !key[0])
		return true;
	const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	if (!auth) {
		srv_api_error_set(e, 401, "authentication_error", "invalid_api_key", NULL,
				  "missing API key: send the header 'Authorization: Bearer <key>'");
		return false;
	}
	if (strncasecmp(auth, "Bearer ", 7) != 0) {
		srv_api_error_set(e, 401, "authentication_error", "invalid_api_key", NULL,
				  "the Authorization header must be 'Bearer <key>'");
		return false;
	}
	const char *tok = auth + 7;
	while (*tok == ' ')
		tok++;
	if (!key_equal(tok, strlen(tok), key, strlen(key))) {
		srv_api_error_set(e, 401, "authentication_error", "invalid_api_key", NULL,
				  "incorrect API key provided");
		return false;
	}
	return true;
}

static void handle_request(struct evhttp_request *req, void *arg)
{
	struct srv *s = arg;
	struct srv_http hs = {0}, *h = &hs;
	struct srv_api_error e;
	h->srv = s;
	h->req = req;
	h->id = ++s->next_http_id;
	h->t_start = srv_now_ms();
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	h->method = method_name(cmd);

	const char *uri = evhttp_request_get_uri(req);
	struct evhttp_uri *u = uri ? evhttp_uri_parse_with_flags(uri, EVHTTP_URI_NONCONFORMANT) : NULL;
	const char *path = u ? evhttp_uri_get_path(u) : NULL;
	snprintf(h->path, sizeof(h->path), "%s", path && path[0] ? path : "/");
	if (u)
		evhttp_uri_free(u);

	const struct route *rt = NULL;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		size_t n = strlen(routes[i].path);
		bool prefix = routes[i].id == R_MODEL;
		if (prefix ? strncmp(h->path, routes[i].path, n) == 0 && h->path[n] && !strchr(h->path + n, '/')
			   : strcmp(h->path, routes[i].path) == 0)
			rt = &routes[i];
	}
	if (!rt) {
		srv_api_error_set(&e, 404, "invalid_request_error", "not_found", NULL,
				  "unknown route %s %.80s", h->method, h->path);
		srv_reply_error(h, &e);
		return;
	}
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	if (cmd == EVHTTP_REQ_OPTIONS) { /* CORS preflight (headers only with --cors-origin) */
		add_common_headers(s, req);
		evhttp_add_header(oh, "Allow", rt->allow);
		if (s->cfg.cors_origin && s->cfg.cors_origin[0]) {
			evhttp_add_header(oh, "Access-Control-Allow-Methods", rt->allow);
			evhttp_add_header(oh, "Access-Control-Allow-Headers", "Authorization, Content-Type");
			evhttp_add_header(oh, "Access-Control-Max-Age", "86400");
		}
		evhttp_send_reply(req, 204, "No Content", NULL);
		h->status = 204;
		srv_log_request(h);
		return;
	}
	bool method_ok = cmd == rt->method || (rt->method == EVHTTP_REQ_GET && cmd == EVHTTP_REQ_HEAD);
	if (!method_ok) {
		evhttp_add_header(oh, "Allow", rt->allow);
		srv_api_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
				  "%s is not allowed on %s; allowed: %s", h->method, rt->path, rt->allow);
		srv_reply_error(h, &e);
		return;
	}
	if (strncmp(rt->path, "/v1/", 4) == 0 && !check_api_key(s, req, &e)) {
		srv_reply_error(h, &e);
		return;
	}
	if (rt->id == R_HEALTH) {
		route_health(s, h);
		return;
	}
	if (rt->id == R_METRICS) { /* also while loading: engine gauges read 0 */
		srv_metrics_route(s, h);
		return;
	}
	if (s->state == SRV_LOADING || s->state == SRV_STOPPING || s->state == SRV_FAILED) {
		if (s->state == SRV_LOADING)
			srv_api_error_set(&e, 503, "unavailable_error", "model_loading", NULL,
					  "the model is still loading; retry shortly");
		else
			srv_api_error_set(&e, 503, "unavailable_error", "shutting_down", NULL,
					  "the server is shutting down");
		srv_reply_error(h, &e);
		return;
	}
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	if (len > s->cfg.max_body) {
		srv_api_error_set(&e, 413, "invalid_request_error", "body_too_large", NULL,
				  "the request body is %zu bytes; the limit is %zu (--max-body)", len,
				  s->cfg.max_body);
		srv_reply_error(h, &e);
		return;
	}
	const char *body = len ? (const char *)evbuffer_pullup(in, (ev_ssize_t)len) : "";
	switch (rt->id) {
	case R_MODELS: route_models(s, h); break;
	case R_MODEL: route_model(s, h, h->path + strlen("/v1/models/")); break;
	case R_TOKENIZE: route_tokenize(s, h, body, len); break;
	case R_DETOKENIZE: route_detokenize(s, h, body, len); break;
	case R_CHAT: srv_gen_handle(s, h, SRV_KIND_CHAT, body, len); break;
	case R_COMPLETIONS: srv_gen_handle(s, h, SRV_KIND_COMPLETION, body, len); break;
	case R_HEALTH:
	case R_METRICS: break;
	}
}

/* ---- loader thread ---- */

static void *loader_main(void *arg)
{
	struct srv *s = arg;
	struct srv_msg *m = calloc(1, sizeof(*m));
	struct alice_error err = {{0}};
	struct alice_model_params mp;
	alice_model_params_default(&mp);
	mp.path = s->cfg.model_path;
	mp.backend = s->cfg.backend;
	mp.backend_dir = s->cfg.backend_dir;
	mp.n_threads = s->cfg.n_threads;
	struct alice_model *model = NULL;
	struct alice_engine *engine = NULL;
	enum alice_status st = alice_model_load(&mp, &model, &err);
	if (st != ALICE_OK) {
		char buf[700];
		snprintf(buf, sizeof(buf), "cannot load model %s: %s (%s)", s->cfg.model_path, err.msg,
			 alice_status_str(st));
		if (m)
			m->error = strdup(buf);
		goto fail;
	}
	struct alice_engine_params ep;
	alice_engine_params_default(&ep);
	ep.n_slots = (uint32_t)s->cfg.n_parallel;
	ep.n_ctx = (uint32_t)s->cfg.n_ctx;
	ep.n_batch = (uint32_t)s->cfg.n_batch;
	ep.max_queue = (uint32_t)s->cfg.queue;
	ep.no_prefix_cache = s->cfg.no_prefix_cache;
	st = alice_engine_create(model, &ep, &engine, &err);
	if (st != ALICE_OK) {
		char buf[700];
		snprintf(buf, sizeof(buf), "cannot start the engine for %s: %s", s->cfg.model_path, err.msg);
		if (m)
			m->error = strdup(buf);
		goto fail;
	}
	struct alice_grammar_vocab *gv = NULL;
	struct alice_error gerr = {{0}};
	if (srv_grammar_vocab_build(alice_model_tokenizer(model), &gv, &gerr) != ALICE_OK)
		alice_log(ALICE_LOG_WARN, "grammar token trie: %s; grammar requests will fail", gerr.msg);
	s->model = model;   /* published to the event thread by srv_post's mutex */
	s->engine = engine;
	s->grammar_vocab = gv;
	if (!m)
		abort(); /* no memory for one small message: nothing sensible left */
	m->kind = SRV_MSG_LOADED;
	__atomic_store_n(&s->loader_done, 1, __ATOMIC_RELEASE);
	srv_post(s, m);
	return NULL;
fail:
	alice_engine_free(engine);
	alice_model_free(model);
	if (!m)
		abort();
	m->kind = SRV_MSG_LOAD_FAILED;
	__atomic_store_n(&s->loader_done, 1, __ATOMIC_RELEASE);
	srv_post(s, m);
	return NULL;
}

static void on_loaded(struct srv *s)
{
	const struct alice_gguf *g = alice_model_gguf(s->model);
	struct alice_error err = {{0}};
	if (s->cfg.chat_template) {
		/* validated in main(); cannot fail here */
		alice_chat_format_from_name(s->cfg.chat_template, &s->chat_format, &err);
	} else {
		struct alice_gguf_str str = {0};
		char *tmpl = NULL;
		if (alice_gguf_get_str(g, "tokenizer.chat_template", &str, NULL) == ALICE_OK &&
		    (tmpl = malloc(str.len + 1))) {
			memcpy(tmpl, str.ptr, str.len);
			tmpl[str.len] = '\0';
		}
		alice_chat_detect(tmpl, alice_model_arch(s->model), &s->chat_format);
		free(tmpl);
	}
	const char *base = strrchr(s->cfg.model_path, '/');
	base = base ? base + 1 : s->cfg.model_path;
	snprintf(s->model_id, sizeof(s->model_id), "%s", base);
	size_t n = strlen(s->model_id);
	if (n > 5 && strcmp(s->model_id + n - 5, ".gguf") == 0)
		s->model_id[n - 5] = '\0';
	s->created = (int64_t)time(NULL);
	if ((int64_t)alice_engine_n_ctx(s->engine) > (int64_t)alice_model_n_ctx_train(s->model))
		alice_log(ALICE_LOG_WARN, "--ctx-size %u is beyond the %d positions the model was trained on",
			  alice_engine_n_ctx(s->engine), alice_model_n_ctx_train(s->model));
	if (s->state == SRV_LOADING)
		s->state = SRV_READY;
	alice_log(ALICE_LOG_INFO, "model %s loaded: arch %s, backend %s (%s), %d slots x %u positions, chat template %s",
		  s->model_id, alice_model_arch(s->model), alice_model_backend_name(s->model),
		  alice_model_device_name(s->model), s->cfg.n_parallel, alice_engine_n_ctx(s->engine),
		  alice_chat_format_name(s->chat_format));
}

static void on_notify(evutil_socket_t fd, short what, void *arg)
{
	struct srv *s = arg;
	char buf[256];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&s->mu);
	struct srv_msg *m = s->msg_head;
	s->msg_head = s->msg_tail = NULL;
	pthread_mutex_unlock(&s->mu);
	while (m) {
		struct srv_msg *next = m->next;
		switch (m->kind) {
		case SRV_MSG_LOADED:
			on_loaded(s);
			srv_msg_free(m);
			break;
		case SRV_MSG_LOAD_FAILED:
			alice_log(ALICE_LOG_ERROR, "%s", m->error ? m->error : "cannot load the model");
			s->state = SRV_FAILED;
			s->exit_code = 1;
			event_base_loopbreak(s->base);
			srv_msg_free(m);
			break;
		case SRV_MSG_ENGINE:
			srv_gen_on_message(s, m); /* frees m */
			break;
		}
		m = next;
	}
	if (s->state == SRV_STOPPING && srv_gen_count(s) == 0) {
		struct timeval tv = {0, 100000}; /* let the last replies flush */
		event_base_loopexit(s->base, &tv);
	}
	(void)what;
}

/* ---- shutdown ---- */

static void shutdown_tick(evutil_socket_t fd, short what, void *arg)
{
	struct srv *s = arg;
	if (srv_gen_count(s) == 0) {
		struct timeval tv = {0, 100000};
		event_base_loopexit(s->base, &tv);
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
	alice_log(ALICE_LOG_INFO, "signal %d: no longer accepting; finishing %d request(s)", (int)sig,
		  srv_gen_count(s));
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

int srv_run(const struct srv_config *cfg)
{
	struct srv *s = calloc(1, sizeof(*s));
	int rc = 1;
	if (!s)
		return 1;
	s->cfg = *cfg;
	s->notify_rd = s->notify_wr = -1;
	pthread_mutex_init(&s->mu, NULL);
	g_log_srv = s;
	if (cfg->log_json)
		alice_log_set_sink(json_log_sink, NULL);
	signal(SIGPIPE, SIG_IGN);

	int p[2];
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
		alice_log(ALICE_LOG_ERROR, "pipe: %s", strerror(errno));
		goto out;
	}
	s->notify_rd = p[0];
	s->notify_wr = p[1];
	s->base = event_base_new();
	s->http = s->base ? evhttp_new(s->base) : NULL;
	if (!s->http) {
		alice_log(ALICE_LOG_ERROR, "cannot create the event loop");
		goto out;
	}
	/* Bodies a little over --max-body get a JSON 413 from handle_request;
	 * evhttp itself cuts off (plain 413) only far beyond, to bound memory. */
	size_t hard = cfg->max_body > (SIZE_MAX - (1u << 20)) / 4 ? SIZE_MAX / 2 : cfg->max_body * 4 + (1u << 20);
	evhttp_set_max_body_size(s->http, (ev_ssize_t)hard);
	evhttp_set_max_headers_size(s->http, 64 * 1024);
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
						   EVHTTP_REQ_PATCH);
	evhttp_set_timeout(s->http, cfg->timeout_s > 0 ? cfg->timeout_s : 600);
	evhttp_set_gencb(s->http, handle_request, s);
	s->listener = evhttp_bind_socket_with_handle(s->http, cfg->host, (ev_uint16_t)cfg->port);
	if (!s->listener) {
		alice_log(ALICE_LOG_ERROR, "cannot listen on %s:%d: %s", cfg->host, cfg->port, strerror(errno));
		goto out;
	}
	int port = cfg->port;
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		evutil_socket_t fd = evhttp_bound_socket_get_fd(s->listener);
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
			if (ss.ss_family == AF_INET)
				port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
			else if (ss.ss_family == AF_INET6)
				port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	s->ev_notify = event_new(s->base, s->notify_rd, EV_READ | EV_PERSIST, on_notify, s);
	s->ev_sigint = evsignal_new(s->base, SIGINT, on_signal, s);
	s->ev_sigterm = evsignal_new(s->base, SIGTERM, on_signal, s);
	s->ev_shutdown = evtimer_new(s->base, shutdown_tick, s);
	if (!s->ev_notify || !s->ev_sigint || !s->ev_sigterm || !s->ev_shutdown) {
		alice_log(ALICE_LOG_ERROR, "cannot create events");
		goto out;
	}
	event_add(s->ev_notify, NULL);
	event_add(s->ev_sigint, NULL);
	event_add(s->ev_sigterm, NULL);
	alice_log(ALICE_LOG_INFO, "alice-llm-server %s listening on http://%s:%d (loading %s)", ALICE_VERSION,
		  cfg->host, port, cfg->model_path);

	if (pthread_create(&s->loader, NULL, loader_main, s) != 0) {
		alice_log(ALICE_LOG_ERROR, "cannot start the loader thread");
		goto out;
	}
	s->loader_started = true;
	s->state = SRV_LOADING;
	event_base_dispatch(s->base);
	rc = s->exit_code;

out:
	if (s->loader_started && !__atomic_load_n(&s->loader_done, __ATOMIC_ACQUIRE)) {
		/* Stopped while the model is still loading (a load cannot be
		 * interrupted): leave the loader and its state to process exit. */
		alice_log(ALICE_LOG_INFO, "exiting while the model is still loading");
		if (s->listener)
			evhttp_del_accept_socket(s->http, s->listener);
		return rc;
	}
	if (s->loader_started) {
		pthread_join(s->loader, NULL);
		/* a load that finished after the loop ended: its message is still queued */
		pthread_mutex_lock(&s->mu);
		struct srv_msg *m = s->msg_head;
		s->msg_head = s->msg_tail = NULL;
		pthread_mutex_unlock(&s->mu);
		while (m) {
			struct srv_msg *next = m->next;
			srv_msg_free(m);
			m = next;
		}
	}
	srv_gen_cancel_all(s);
	if (s->http)
		evhttp_free(s->http); /* closes connections; close callbacks detach gens */
	/* the engine's terminal events for cancelled requests land in the queue */
	alice_engine_free(s->engine);
	pthread_mutex_lock(&s->mu);
	struct srv_msg *m = s->msg_head;
	s->msg_head = s->msg_tail = NULL;
	pthread_mutex_unlock(&s->mu);
	while (m) {
		struct srv_msg *next = m->next;
		if (m->kind == SRV_MSG_ENGINE)
			srv_gen_on_message(s, m);
		else
			srv_msg_free(m);
		m = next;
	}
	alice_grammar_vocab_free(s->grammar_vocab);
	alice_model_free(s->model);
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
	if (s->notify_rd >= 0)
		close(s->notify_rd);
	if (s->notify_wr >= 0)
		close(s->notify_wr);
	alice_log_set_sink(NULL, NULL);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return rc;
}
