/* reply.c — replies, CORS, and the one place a request is logged and
 * counted (see reply.h). */
#define _GNU_SOURCE
#include "reply.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include "alice/log.h"
#include "sse.h"

double srv_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
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

void srv_http_begin(struct srv_http *h, struct srv *s, struct evhttp_request *req)
{
	memset(h, 0, sizeof(*h));
	h->srv = s;
	h->req = req;
	h->id = ++s->next_http_id;
	h->t_start = srv_now_ms();
	h->method = method_name(evhttp_request_get_command(req));
	const char *uri = evhttp_request_get_uri(req);
	struct evhttp_uri *u = uri ? evhttp_uri_parse_with_flags(uri, EVHTTP_URI_NONCONFORMANT) : NULL;
	const char *path = u ? evhttp_uri_get_path(u) : NULL;
	snprintf(h->path, sizeof(h->path), "%s", path && path[0] ? path : "/");
	if (u)
		evhttp_uri_free(u);
}

/* CORS is off unless --cors-origin names the allowed origin (or "*"). */
void srv_add_common_headers(struct srv *s, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	const char *origin = s->cfg.cors_origin;
	if (origin && origin[0]) {
		evhttp_add_header(h, "Access-Control-Allow-Origin", origin);
		if (strcmp(origin, "*") != 0)
			evhttp_add_header(h, "Vary", "Origin");
	}
	evhttp_add_header(h, "Server", "alice-llm/" ALICE_VERSION);
}

void srv_reply_body(struct srv_http *h, int status, const char *content_type, struct evbuffer *b)
{
	srv_add_common_headers(h->srv, h->req);
	if (content_type)
		evhttp_add_header(evhttp_request_get_output_headers(h->req), "Content-Type", content_type);
	const char *reason = status == 200 ? "OK" : status == 204 ? "No Content" : NULL;
	evhttp_send_reply(h->req, status, reason, b);
	srv_request_done(h, status);
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
	srv_reply_body(h, status, "application/json", b);
	if (b)
		evbuffer_free(b);
	json_object_put(obj);
}

void srv_reply_error(struct srv_http *h, const struct srv_api_error *e)
{
	struct evkeyvalq *hd = evhttp_request_get_output_headers(h->req);
	if (e->status == 503)
		evhttp_add_header(hd, "Retry-After", "1");
	if (e->status == 401)
		evhttp_add_header(hd, "WWW-Authenticate", "Bearer");
	srv_reply_json(h, e->status, srv_route_error_json(h->route, e));
}

struct json_object *srv_route_error_json(const struct srv_route *rt, const struct srv_api_error *e)
{
	return rt && (rt->flags & SRV_ROUTE_ANTHROPIC) ? srv_anthropic_error_json(e) : srv_api_error_json(e);
}

void srv_reply_nomem(struct srv_http *h)
{
	struct srv_api_error e;
	srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
	srv_reply_error(h, &e);
}

void srv_reply_stream_start(struct srv_http *h)
{
	srv_add_common_headers(h->srv, h->req);
	srv_sse_start(h->req);
}

/* The path is URL-decoded text from the client: escape it for JSON. */
static void json_escape_path(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = in; *p && o + 7 < cap; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
}

/* The text log: control characters, backslash and bytes >= 0x7f as \xNN,
 * so a client cannot forge or split log lines. */
static void text_escape_path(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = in; *p && o + 5 < cap; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c >= 0x7f || c == '\\')
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
}

void srv_request_done(struct srv_http *h, int status)
{
	const struct srv_request_counts *c = &h->counts;
	double ms = srv_now_ms() - h->t_start;
	h->status = status;
	srv_metrics_observe(&h->srv->metrics, h->route ? h->route->label : "other", status, c);
	if (h->srv->cfg.log_json) {
		char path[200];
		json_escape_path(h->path, path, sizeof(path));
		alice_log(ALICE_LOG_INFO,
			  "{\"event\":\"request\",\"id\":%llu,\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,"
			  "\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"prefill_ms\":%.1f,"
			  "\"decode_ms\":%.1f,\"total_ms\":%.1f}",
			  (unsigned long long)h->id, h->method, path, status, (long long)c->prompt_tokens,
			  (long long)c->completion_tokens, c->prefill_ms, c->decode_ms, ms);
	} else {
		char path[400];
		text_escape_path(h->path, path, sizeof(path));
		alice_log(ALICE_LOG_INFO,
			  "req %llu %s %s %d prompt=%lld completion=%lld prefill_ms=%.1f decode_ms=%.1f total_ms=%.1f",
			  (unsigned long long)h->id, h->method, path, status, (long long)c->prompt_tokens,
			  (long long)c->completion_tokens, c->prefill_ms, c->decode_ms, ms);
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

/* Text sink: the core's format, with control characters as \xNN so no
 * client text (a path, an error quoting a prompt) can split or forge lines
 * or drive a terminal. */
static void text_log_sink(enum alice_log_level level, const char *msg, void *user)
{
	char ts[32], out[2048 * 4 + 1];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	size_t o = 0;
	for (const char *p = msg; *p && o + 5 < sizeof(out); p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(out + o, sizeof(out) - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
	fprintf(stderr, "%s %-5s %s\n", ts, alice_log_level_name(level), out);
	(void)user;
}

void srv_log_use_json(bool json)
{
	alice_log_set_sink(json ? json_log_sink : text_log_sink, NULL);
}
