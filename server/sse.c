/* sse.c — Server-Sent Events framing (see sse.h). */
#include "sse.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

const char *srv_json_text(struct json_object *obj, size_t *len)
{
	return json_object_to_json_string_length(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE,
						  len);
}

void srv_sse_start(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "X-Accel-Buffering", "no");
	evhttp_send_reply_start(req, 200, "OK");
}

void srv_sse_send_json(struct evhttp_request *req, struct json_object *obj)
{
	struct evbuffer *b = evbuffer_new();
	if (!b)
		return;
	size_t len = 0;
	const char *s = srv_json_text(obj, &len);
	evbuffer_add(b, "data: ", 6);
	evbuffer_add(b, s, len);
	evbuffer_add(b, "\n\n", 2);
	evhttp_send_reply_chunk(req, b);
	evbuffer_free(b);
}

void srv_sse_keepalive(struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();
	if (!b)
		return;
	evbuffer_add(b, ": keep-alive\n\n", 14);
	evhttp_send_reply_chunk(req, b);
	evbuffer_free(b);
}

void srv_sse_finish(struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();
	if (b) {
		evbuffer_add(b, "data: [DONE]\n\n", 14);
		evhttp_send_reply_chunk(req, b);
		evbuffer_free(b);
	}
	evhttp_send_reply_end(req);
}

void srv_sse_send_event(struct evhttp_request *req, const char *name, struct json_object *obj)
{
	struct evbuffer *b = evbuffer_new();
	if (!b)
		return;
	size_t len = 0;
	const char *s = srv_json_text(obj, &len);
	evbuffer_add_printf(b, "event: %s\ndata: ", name);
	evbuffer_add(b, s, len);
	evbuffer_add(b, "\n\n", 2);
	evhttp_send_reply_chunk(req, b);
	evbuffer_free(b);
}

void srv_sse_end(struct evhttp_request *req)
{
	evhttp_send_reply_end(req);
}
