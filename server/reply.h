/* reply.h — the bottom of the server: answering a request (event thread).
 * Every reply ends in srv_request_done, which writes the request's one log
 * line and counts it in the metrics; nothing else does either. */
#ifndef ALICE_SERVER_REPLY_H
#define ALICE_SERVER_REPLY_H

#include <json-c/json.h>

#include "server.h"

double srv_now_ms(void);
/* Start the bookkeeping of a request that just arrived. */
void srv_http_begin(struct srv_http *h, struct srv *s, struct evhttp_request *req);

/* Server and CORS headers (Access-Control-Allow-Origin with --cors-origin). */
void srv_add_common_headers(struct srv *s, struct evhttp_request *req);
/* A JSON body (takes obj), an OpenAI error body, or any body (b may be NULL;
 * borrowed); each completes the request. */
void srv_reply_json(struct srv_http *h, int status, struct json_object *obj);
void srv_reply_error(struct srv_http *h, const struct srv_api_error *e);
void srv_reply_body(struct srv_http *h, int status, const char *content_type, struct evbuffer *b);
/* An error body in route rt's API shape (OpenAI's, or Anthropic's for a
 * SRV_ROUTE_ANTHROPIC route; rt NULL: OpenAI's). */
struct json_object *srv_route_error_json(const struct srv_route *rt, const struct srv_api_error *e);
/* 500 "out of memory". */
void srv_reply_nomem(struct srv_http *h);
/* Headers and status line of an SSE stream (sse.h writes the events). */
void srv_reply_stream_start(struct srv_http *h);

/* The request is complete (reply sent, or the client is gone): its status,
 * log line and counters. Exactly once per request. */
void srv_request_done(struct srv_http *h, int status);

/* --log-format json: one JSON object per line on stderr; text: the core's
 * format with control characters escaped. */
void srv_log_use_json(bool json);

#endif
