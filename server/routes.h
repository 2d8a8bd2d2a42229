/* routes.h — the middle layer: the route table (routes.c) and one handler
 * per route, each in its own file. Handlers answer through reply.h and
 * call nothing above them. Adding a route: one entry in routes.c and one
 * route_<name>.c. */
#ifndef ALICE_SERVER_ROUTES_H
#define ALICE_SERVER_ROUTES_H

#include "server.h"

/* The table, in match order. */
extern const struct srv_route srv_routes[];
extern const size_t srv_n_routes;
/* The route for a path, or NULL. */
const struct srv_route *srv_route_find(const char *path);

/* route_info.c */
void srv_route_health(struct srv *s, struct srv_http *h, const char *body, size_t len);
void srv_route_models(struct srv *s, struct srv_http *h, const char *body, size_t len);
void srv_route_model(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* route_template.c: POST /apply-template (a chat request's prompt text) */
void srv_route_apply_template(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* route_tokenize.c */
void srv_route_tokenize(struct srv *s, struct srv_http *h, const char *body, size_t len);
void srv_route_detokenize(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* route_embeddings.c: POST /v1/embeddings (OpenAI) and /embeddings (also pooling none) */
void srv_route_embeddings(struct srv *s, struct srv_http *h, const char *body, size_t len);
void srv_route_embeddings_native(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* route_metrics.c */
void srv_route_metrics(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* gen.c: /v1/chat/completions and /v1/completions */
void srv_route_chat(struct srv *s, struct srv_http *h, const char *body, size_t len);
void srv_route_completions(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* route_responses.c: POST /v1/responses, GET /v1/responses/{id} */
void srv_route_responses(struct srv *s, struct srv_http *h, const char *body, size_t len);
void srv_route_response_get(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* route_messages.c: POST /v1/messages, /v1/messages/count_tokens (Anthropic) */
void srv_route_messages(struct srv *s, struct srv_http *h, const char *body, size_t len);
void srv_route_count_tokens(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* webui.c: GET / (the chat page; 404 under --no-webui) */
void srv_route_webui(struct srv *s, struct srv_http *h, const char *body, size_t len);
/* gen.c, for the top layer: cancel every live generation (shutdown). */
void srv_gen_cancel_all(struct srv *s);

#endif
