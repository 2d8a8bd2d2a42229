/* conn.c — the connections (top layer, beside http.c): every connection
 * evhttp accepts is tracked from the bufferevent we hand it (evhttp_set_bevcb)
 * until evhttp frees that bufferevent. That gives:
 *
 *   - a cap (--max-connections): at the cap the listener pauses, and the
 *     kernel's backlog holds new clients until a connection closes;
 *   - back-off on accept() errors (EMFILE, ENFILE, ENOBUFS...): the listener
 *     pauses for ACCEPT_BACKOFF_MS instead of spinning, and the warning is
 *     written at most once per WARN_EVERY_MS with a count of the repeats;
 *   - a deadline for receiving a request (--request-deadline), head and
 *     body, counted from the connection's start or the previous reply, so a
 *     slowloris client trickling a header line a second is dropped;
 *   - the early head check: our callback on the input buffer sees the
 *     bytes before evhttp parses them, so once a request head is complete
 *     (and before evhttp reads the body or sends "100 Continue") it answers
 *     a NUL byte in the head, a duplicate Content-Length, or Content-Length
 *     together with Transfer-Encoding; and for a request with a body, an
 *     unknown route (404), a wrong method (405), a missing or wrong API key
 *     (401) and a Content-Length over --max-body (413), all itself (JSON
 *     error, Connection: close), discarding whatever else the client sends.
 *     Pipelined requests (sent before the previous reply ended) are not
 *     seen whole here; the router checks their key and Content-Length.
 *
 * evhttp (libevent 2.1) has no connection hooks of its own; what we rely
 * on is public: the bufferevent is ours (we hold a reference, so it stays
 * valid after evhttp frees it), and bufferevent_free clears its callbacks,
 * which is how the sweep timer learns a connection is gone. Event thread only. */
#define _GNU_SOURCE
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "alice/log.h"
#include "auth.h"
#include "reply.h"
#include "routes.h"
#include "sse.h"

#define SWEEP_MS 200
#define ACCEPT_BACKOFF_MS 500
#define WARN_EVERY_MS 10000.0
#define HEAD_MAX (64 * 1024)  /* = evhttp_set_max_headers_size in http.c */
#define DISCARD_LINGER_MS 2000.0

enum { PAUSE_CAP = 1, PAUSE_ACCEPT_ERROR = 2 };

struct conn {
	struct conn *next, *prev;
	struct srv *srv;
	struct bufferevent *bev; /* our reference */
	struct evbuffer_cb_entry *in_cb;
	double t_read;    /* ms: when receiving the current request began; 0 while it is being answered */
	double t_discard; /* ms: when the early check answered; 0 = not answered */
	bool busy;        /* dispatched to the router, reply not complete */
	bool no_inspect;  /* pipelined bytes: heads no longer seen whole; the router checks */
	bool head_seen;   /* this request's head was checked */
	char *head;       /* this request's head so far */
	size_t head_n, head_cap;
};

struct srv_conns {
	struct srv *srv;
	struct conn *list;
	int n;
	unsigned paused; /* PAUSE_* */
	struct event *sweep, *resume;
	double last_warn;
	unsigned long long warn_repeats, deadline_drops;
	double last_deadline_log;
};

/* evhttp hands the listener's error callback its own pointer, not ours:
 * one server per process, so the listener finds its state here. */
static struct srv_conns *g_conns;

static void update_listener(struct srv_conns *cs)
{
	struct srv *s = cs->srv;
	if (!s->listener)
		return;
	struct evconnlistener *lev = evhttp_bound_socket_get_listener(s->listener);
	if (!lev)
		return;
	if (cs->paused)
		evconnlistener_disable(lev);
	else
		evconnlistener_enable(lev);
}

/* ---- accept errors ---- */

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct srv_conns *cs = arg;
	cs->paused &= ~(unsigned)PAUSE_ACCEPT_ERROR;
	update_listener(cs);
	(void)fd;
	(void)what;
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct srv_conns *cs = g_conns;
	int err = EVUTIL_SOCKET_ERROR();
	(void)arg;
	if (!cs) {
		evconnlistener_disable(lev);
		return;
	}
	double now = srv_now_ms();
	cs->srv->metrics.accept_errors++;
	if (now - cs->last_warn >= WARN_EVERY_MS) {
		alice_log(ALICE_LOG_WARN,
			  "accept: %s (%d connections open); pausing new connections for %d ms each time "
			  "(%llu more such errors since the last warning)",
			  strerror(err), cs->n, ACCEPT_BACKOFF_MS, cs->warn_repeats);
		cs->last_warn = now;
		cs->warn_repeats = 0;
	} else {
		cs->warn_repeats++;
	}
	cs->paused |= PAUSE_ACCEPT_ERROR;
	evconnlistener_disable(lev);
	struct timeval tv = {0, ACCEPT_BACKOFF_MS * 1000};
	evtimer_add(cs->resume, &tv);
}

/* ---- the early head check ---- */

static void conn_discard(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t n = evbuffer_get_length(in);
	if (n)
		evbuffer_drain(in, n);
}

static const char *reason(int status)
{
	switch (status) {
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 413: return "Payload Too Large";
	default: return "Bad Request";
	}
}

/* The method's command, for the ones evhttp lets through (else 0). */
static enum evhttp_cmd_type method_cmd(const char *m)
{
	static const struct {
		const char *name;
		enum evhttp_cmd_type cmd;
	} t[] = {{"GET", EVHTTP_REQ_GET},       {"POST", EVHTTP_REQ_POST},         {"HEAD", EVHTTP_REQ_HEAD},
		 {"PUT", EVHTTP_REQ_PUT},       {"DELETE", EVHTTP_REQ_DELETE},     {"PATCH", EVHTTP_REQ_PATCH},
		 {"OPTIONS", EVHTTP_REQ_OPTIONS}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(m, t[i].name) == 0)
			return t[i].cmd;
	return 0;
}

/* Answer the request from here (evhttp never sees the rest of it). */
static void early_reply(struct conn *c, const char *method, const char *path, const struct srv_route *rt,
			const char *allow, const struct srv_api_error *e)
{
	struct srv *s = c->srv;
	struct json_object *o = srv_route_error_json(rt, e);
	size_t blen = 0;
	const char *body = o ? srv_json_text(o, &blen) : "";
	char head[512];
	const char *origin = s->cfg.cors_origin;
	int hn = snprintf(head, sizeof(head),
			  "HTTP/1.1 %d %s\r\nServer: alice-llm/" ALICE_VERSION "\r\nContent-Type: application/json\r\n"
			  "Content-Length: %zu\r\nConnection: close\r\n%s%s%s%s%s%s%s\r\n",
			  e->status, reason(e->status), blen + 1, e->status == 401 ? "WWW-Authenticate: Bearer\r\n" : "",
			  allow ? "Allow: " : "", allow ? allow : "", allow ? "\r\n" : "",
			  origin && origin[0] ? "Access-Control-Allow-Origin: " : "", origin && origin[0] ? origin : "",
			  origin && origin[0] ? (strcmp(origin, "*") ? "\r\nVary: Origin\r\n" : "\r\n") : "");
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	if (fd >= 0 && hn > 0 && (size_t)hn < sizeof(head)) {
		struct iovec iov[3] = {{head, (size_t)hn}, {(void *)body, blen}, {"\n", 1}};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 3};
		if (sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			(void)0; /* the client is gone; the connection closes either way */
		shutdown(fd, SHUT_WR);
	}
	json_object_put(o);
	c->t_discard = srv_now_ms();
	/* one log line and count, like any request */
	struct srv_http h;
	memset(&h, 0, sizeof(h));
	h.srv = s;
	h.route = rt;
	h.id = ++s->next_http_id;
	h.t_start = srv_now_ms();
	h.method = method;
	snprintf(h.path, sizeof(h.path), "%s", path);
	srv_request_done(&h, e->status);
}

static bool name_is(const char *p, size_t n, const char *name)
{
	return n == strlen(name) && strncasecmp(p, name, n) == 0;
}

/* The head c->head[0, end) is complete: check it; true when answered here. */
static bool check_head(struct conn *c, size_t end)
{
	struct srv *s = c->srv;
	const char *p = c->head, *lim = c->head + end;
	struct srv_api_error e;
	while (p < lim && (*p == '\r' || *p == '\n'))
		p++;
	/* request line: METHOD SP TARGET SP VERSION */
	const char *eol = memchr(p, '\n', (size_t)(lim - p));
	if (!eol)
		return false;
	char method[16] = "?", path[96] = "/";
	const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
	if (!sp1)
		return false; /* evhttp answers a malformed line */
	if ((size_t)(sp1 - p) < sizeof(method))
		snprintf(method, sizeof(method), "%.*s", (int)(sp1 - p), p);
	const char *t = sp1 + 1, *te = t;
	while (te < eol && *te != ' ' && *te != '?' && *te != '#' && *te != '\r')
		te++;
	snprintf(path, sizeof(path), "%.*s", (int)(te - t), t);
	for (char *q = path; *q; q++) /* the log line escapes; a route never matches these */
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			*q = '?';
	const struct srv_route *rt = t[0] == '/' ? srv_route_find(path) : NULL;
	if (memchr(c->head, '\0', end)) {
		srv_api_error_set(&e, 400, "invalid_request_error", "bad_header", NULL,
				  "the request head contains a NUL byte");
		early_reply(c, method, path, rt, NULL, &e);
		return true;
	}
	int n_cl = 0, n_te = 0, n_expect = 0;
	const char *auth = NULL, *cl = NULL, *xkey = NULL;
	size_t auth_n = 0, cl_n = 0, xkey_n = 0;
	for (const char *l = eol + 1; l < lim;) {
		const char *le = memchr(l, '\n', (size_t)(lim - l));
		if (!le)
			break;
		const char *ve = le;
		if (ve > l && ve[-1] == '\r')
			ve--;
		const char *colon = memchr(l, ':', (size_t)(ve - l));
		if (colon) {
			const char *v = colon + 1;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			const char *vend = ve;
			while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
				vend--;
			size_t nl = (size_t)(colon - l);
			if (name_is(l, nl, "Content-Length"))
				n_cl++, cl = v, cl_n = (size_t)(vend - v);
			else if (name_is(l, nl, "Transfer-Encoding"))
				n_te++;
			else if (name_is(l, nl, "Expect"))
				n_expect++;
			else if (name_is(l, nl, "Authorization") && !auth)
				auth = v, auth_n = (size_t)(vend - v);
			else if (name_is(l, nl, "x-api-key") && !xkey)
				xkey = v, xkey_n = (size_t)(vend - v);
		}
		l = le + 1;
	}
	if (n_cl > 1 || (n_cl && n_te)) {
		srv_api_error_set(&e, 400, "invalid_request_error", "bad_header", NULL,
				  n_cl > 1 ? "more than one Content-Length header"
					   : "both Content-Length and Transfer-Encoding");
		early_reply(c, method, path, rt, NULL, &e);
		return true;
	}
	/* The rest only for a request with a body (a body-less one costs the
	 * router nothing, and keeps its connection): route, method, key, size,
	 * in the router's order. */
	bool body = n_te || (cl && !(cl_n == 1 && cl[0] == '0')) || n_expect;
	enum evhttp_cmd_type cmd = method_cmd(method);
	if (!body || !cmd || cmd == EVHTTP_REQ_OPTIONS || t[0] != '/')
		return false;
	if (!rt) {
		srv_api_error_set(&e, 404, "invalid_request_error", "not_found", NULL, "unknown route %s %.80s", method,
				  path);
		early_reply(c, method, path, rt, NULL, &e);
		return true;
	}
	if (cmd != rt->method && !(rt->method == EVHTTP_REQ_GET && cmd == EVHTTP_REQ_HEAD)) {
		srv_api_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL,
				  "%s is not allowed on %s; allowed: %s", method, rt->path, rt->allow);
		early_reply(c, method, path, rt, rt->allow, &e);
		return true;
	}
	if (srv_auth_required(s, rt) && !srv_auth_check(s, auth, auth_n, xkey, xkey_n, &e)) {
		early_reply(c, method, path, rt, NULL, &e);
		return true;
	}
	if (cl && cl_n < 20) {
		char num[24];
		snprintf(num, sizeof(num), "%.*s", (int)cl_n, cl);
		char *endp;
		unsigned long long v = strtoull(num, &endp, 10);
		if (*endp == '\0' && num[0] >= '0' && num[0] <= '9' && v > s->cfg.max_body) {
			srv_api_error_set(&e, 413, "invalid_request_error", "body_too_large", NULL,
					  "the request body is %llu bytes; the limit is %zu (--max-body)", v,
					  s->cfg.max_body);
			early_reply(c, method, path, rt, NULL, &e);
			return true;
		}
	}
	return false;
}

/* The input buffer grew (before evhttp reads it): collect the head of the
 * request being received and check it once it is complete. */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct conn *c = arg;
	if (info->n_added == 0)
		return;
	if (c->t_discard) {
		conn_discard(c);
		return;
	}
	if (c->busy) {
		c->no_inspect = true; /* pipelined: this request's head may be read before we see it whole */
		return;
	}
	if (c->no_inspect || c->head_seen)
		return;
	size_t add = info->n_added, total = evbuffer_get_length(buf);
	if (add > total)
		add = total;
	if (c->head_n + add > HEAD_MAX + 4)
		add = HEAD_MAX + 4 - c->head_n;
	if (add == 0) {
		c->head_seen = true; /* too long: evhttp refuses it */
		return;
	}
	if (c->head_n + add > c->head_cap) {
		size_t cap = c->head_cap ? c->head_cap : 1024;
		while (cap < c->head_n + add)
			cap *= 2;
		char *h = realloc(c->head, cap);
		if (!h) {
			c->no_inspect = true;
			return;
		}
		c->head = h;
		c->head_cap = cap;
	}
	struct evbuffer_ptr pos;
	if (evbuffer_ptr_set(buf, &pos, total - add, EVBUFFER_PTR_SET) != 0 ||
	    evbuffer_copyout_from(buf, &pos, c->head + c->head_n, add) != (ev_ssize_t)add) {
		c->no_inspect = true;
		return;
	}
	size_t from = c->head_n > 3 ? c->head_n - 3 : 0;
	c->head_n += add;
	for (size_t i = from; i + 1 < c->head_n; i++) {
		size_t end = 0;
		if (c->head[i] == '\n' && c->head[i + 1] == '\n')
			end = i + 2;
		else if (i + 3 < c->head_n && !memcmp(c->head + i, "\r\n\r\n", 4))
			end = i + 4;
		if (!end)
			continue;
		/* leading blank lines before a request line are not its end */
		size_t k = 0;
		while (k < i && (c->head[k] == '\r' || c->head[k] == '\n'))
			k++;
		if (k >= i)
			continue;
		c->head_seen = true;
		if (check_head(c, end))
			conn_discard(c);
		free(c->head);
		c->head = NULL;
		c->head_n = c->head_cap = 0;
		return;
	}
}

/* ---- tracking ---- */

static struct bufferevent *on_new_bev(struct event_base *base, void *arg)
{
	struct srv_conns *cs = arg;
	struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	struct conn *c = bev ? calloc(1, sizeof(*c)) : NULL;
	if (!c)
		return bev; /* untracked (out of memory): evhttp still serves it */
	c->srv = cs->srv;
	c->bev = bev;
	c->t_read = srv_now_ms();
	c->in_cb = evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
	bufferevent_incref(bev);
	c->next = cs->list;
	if (cs->list)
		cs->list->prev = c;
	cs->list = c;
	cs->srv->metrics.conns_open = cs->n + 1;
	if (++cs->n >= cs->srv->cfg.max_connections && !(cs->paused & PAUSE_CAP)) {
		cs->paused |= PAUSE_CAP;
		update_listener(cs);
	}
	return bev;
}

static void conn_free(struct srv_conns *cs, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		cs->list = c->next;
	if (c->next)
		c->next->prev = c->prev;
	cs->srv->metrics.conns_open = --cs->n;
	if (c->in_cb)
		evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->in_cb);
	bufferevent_decref(c->bev);
	free(c->head);
	free(c);
}

/* Make evhttp see end-of-file on the connection: it frees it. */
static void conn_drop(struct conn *c)
{
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	struct srv_conns *cs = arg;
	struct srv *s = cs->srv;
	double now = srv_now_ms(), deadline = (double)s->cfg.request_deadline_s * 1000.0;
	unsigned long long dropped = 0;
	for (struct conn *c = cs->list, *next; c; c = next) {
		next = c->next;
		bufferevent_data_cb rd = NULL;
		bufferevent_getcb(c->bev, &rd, NULL, NULL, NULL);
		if (!rd) { /* evhttp freed it */
			conn_free(cs, c);
			continue;
		}
		if (c->t_discard && now - c->t_discard > DISCARD_LINGER_MS) {
			conn_drop(c);
		} else if (!c->busy && c->t_read && deadline > 0 && now - c->t_read > deadline) {
			c->t_read = 0;
			dropped++;
			conn_drop(c);
		}
	}
	if (dropped) {
		s->metrics.conns_deadline_closed += dropped;
		cs->deadline_drops += dropped;
		if (now - cs->last_deadline_log >= WARN_EVERY_MS) {
			alice_log(ALICE_LOG_INFO,
				  "closed %llu connection(s) that did not send a whole request within %d s "
				  "(--request-deadline)",
				  cs->deadline_drops, s->cfg.request_deadline_s);
			cs->deadline_drops = 0;
			cs->last_deadline_log = now;
		}
	}
	if ((cs->paused & PAUSE_CAP) && cs->n < s->cfg.max_connections) {
		cs->paused &= ~(unsigned)PAUSE_CAP;
		update_listener(cs);
	}
	(void)fd;
	(void)what;
}

static struct conn *conn_of(struct srv_conns *cs, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = req ? evhttp_request_get_connection(req) : NULL;
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	if (!bev)
		return NULL;
	for (struct conn *c = cs->list; c; c = c->next)
		if (c->bev == bev)
			return c;
	return NULL;
}

/* --timeout is the client's inactivity: while the server works on a
 * request only the write timeout runs (a client that stops reading). */
static void set_timeouts(struct conn *c, bool read)
{
	struct timeval tv = {c->srv->cfg.timeout_s > 0 ? c->srv->cfg.timeout_s : 600, 0};
	bufferevent_set_timeouts(c->bev, read ? &tv : NULL, &tv);
}

static void on_complete(struct evhttp_request *req, void *arg)
{
	struct conn *c = conn_of(arg, req);
	if (!c)
		return;
	set_timeouts(c, true);
	c->busy = false;
	c->head_seen = false;
	c->t_read = srv_now_ms();
}

/* ---- the interface (conn.h) ---- */

bool srv_conn_dispatched(struct srv *s, struct evhttp_request *req)
{
	struct srv_conns *cs = s->conns;
	struct conn *c = cs ? conn_of(cs, req) : NULL;
	if (!c)
		return true;
	if (c->t_discard)
		return false; /* answered already by the early check */
	c->busy = true;
	c->t_read = 0;
	set_timeouts(c, false);
	evhttp_request_set_on_complete_cb(req, on_complete, cs);
	return true;
}

int srv_conn_setup(struct srv *s)
{
	struct srv_conns *cs = calloc(1, sizeof(*cs));
	if (!cs)
		return -1;
	cs->srv = s;
	cs->last_warn = cs->last_deadline_log = -1e18;
	cs->sweep = event_new(s->base, -1, EV_PERSIST, on_sweep, cs);
	cs->resume = evtimer_new(s->base, on_resume, cs);
	if (!cs->sweep || !cs->resume) {
		if (cs->sweep)
			event_free(cs->sweep);
		if (cs->resume)
			event_free(cs->resume);
		free(cs);
		return -1;
	}
	struct timeval tv = {0, SWEEP_MS * 1000};
	event_add(cs->sweep, &tv);
	s->conns = cs;
	g_conns = cs;
	evhttp_set_bevcb(s->http, on_new_bev, cs);
	return 0;
}

void srv_conn_listening(struct srv *s)
{
	struct evconnlistener *lev = s->listener ? evhttp_bound_socket_get_listener(s->listener) : NULL;
	if (lev)
		evconnlistener_set_error_cb(lev, on_accept_error);
}

void srv_conn_teardown(struct srv *s)
{
	struct srv_conns *cs = s->conns;
	if (!cs)
		return;
	while (cs->list)
		conn_free(cs, cs->list);
	event_free(cs->sweep);
	event_free(cs->resume);
	free(cs);
	s->conns = NULL;
	if (g_conns == cs)
		g_conns = NULL;
}
