/* sse.h — Server-Sent Events framing over an evhttp chunked reply.
 * Every event is one chunk "data: <payload>\n\n"; the stream ends with
 * "data: [DONE]\n\n". Event thread only. */
#ifndef ALICE_SERVER_SSE_H
#define ALICE_SERVER_SSE_H

#include <event2/http.h>
#include <json-c/json.h>

/* Headers (text/event-stream, no caching) and the 200 status line. */
void srv_sse_start(struct evhttp_request *req);
/* One event carrying `obj` serialized on one line (obj is borrowed). */
void srv_sse_send_json(struct evhttp_request *req, struct json_object *obj);
/* "data: [DONE]" and the end of the chunked reply (req is done after this). */
/* ": keep-alive" comment: clients ignore it; proxies see traffic. */
void srv_sse_keepalive(struct evhttp_request *req);
void srv_sse_finish(struct evhttp_request *req);
/* An event with a name, "event: NAME\ndata: JSON\n\n" (the Responses and
 * Messages APIs; obj borrowed), and the end of such a stream (no [DONE]). */
void srv_sse_send_event(struct evhttp_request *req, const char *name, struct json_object *obj);
void srv_sse_end(struct evhttp_request *req);
/* JSON text as sent by every route: plain, no slash escaping. Borrowed from obj. */
const char *srv_json_text(struct json_object *obj, size_t *len);

#endif
