/* webui.c — GET /: the chat page (server/webui/index.html, embedded at
 * build time by cmake/embed.cmake). One static page, no external
 * resources; under --no-webui the route answers 404 with a hint. The page
 * is served without the API key (it holds no data) and asks for the key
 * when the API answers 401. */
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include "reply.h"
#include "routes.h"

extern const unsigned char srv_webui_html[];
extern const size_t srv_webui_html_len;

void srv_route_webui(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	(void)body;
	(void)len;
	if (s->cfg.no_webui) {
		struct srv_api_error e;
		srv_api_error_set(&e, 404, "invalid_request_error", "not_found", NULL,
				  "the chat page is off (--no-webui); the API is served under /v1");
		srv_reply_error(h, &e);
		return;
	}
	struct evkeyvalq *hd = evhttp_request_get_output_headers(h->req);
	/* the page talks to this server only; no frames, no sniffing */
	evhttp_add_header(hd, "Content-Security-Policy",
			  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
			  "connect-src 'self'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
	evhttp_add_header(hd, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(hd, "Cache-Control", "no-cache");
	struct evbuffer *b = evbuffer_new();
	if (!b) {
		srv_reply_nomem(h);
		return;
	}
	evbuffer_add_reference(b, srv_webui_html, srv_webui_html_len, NULL, NULL);
	srv_reply_body(h, 200, "text/html; charset=utf-8", b);
	evbuffer_free(b);
}
