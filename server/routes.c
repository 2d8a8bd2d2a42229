/* routes.c — the route table (see routes.h). */
#include "routes.h"

#include <string.h>

#define GET_ALLOW "GET, HEAD, OPTIONS"
#define POST_ALLOW "POST, OPTIONS"

const struct srv_route srv_routes[] = {
	{"/health", "/health", EVHTTP_REQ_GET, GET_ALLOW, SRV_ROUTE_ANYTIME, srv_route_health},
	{"/v1/models", "/v1/models", EVHTTP_REQ_GET, GET_ALLOW, SRV_ROUTE_AUTH, srv_route_models},
	{"/v1/models/", "/v1/models/{id}", EVHTTP_REQ_GET, GET_ALLOW, SRV_ROUTE_AUTH | SRV_ROUTE_PREFIX,
	 srv_route_model},
	{"/v1/chat/completions", "/v1/chat/completions", EVHTTP_REQ_POST, POST_ALLOW,
	 SRV_ROUTE_AUTH | SRV_ROUTE_GENERATE, srv_route_chat},
	{"/v1/completions", "/v1/completions", EVHTTP_REQ_POST, POST_ALLOW, SRV_ROUTE_AUTH | SRV_ROUTE_GENERATE,
	 srv_route_completions},
	{"/v1/embeddings", "/v1/embeddings", EVHTTP_REQ_POST, POST_ALLOW, SRV_ROUTE_AUTH, srv_route_embeddings},
	{"/embeddings", "/embeddings", EVHTTP_REQ_POST, POST_ALLOW, SRV_ROUTE_AUTH, srv_route_embeddings_native},
	{"/tokenize", "/tokenize", EVHTTP_REQ_POST, POST_ALLOW, SRV_ROUTE_AUTH, srv_route_tokenize},
	{"/detokenize", "/detokenize", EVHTTP_REQ_POST, POST_ALLOW, SRV_ROUTE_AUTH, srv_route_detokenize},
	{"/v1/responses", "/v1/responses", EVHTTP_REQ_POST, POST_ALLOW, SRV_ROUTE_AUTH | SRV_ROUTE_GENERATE,
	 srv_route_responses},
	{"/v1/responses/", "/v1/responses/{id}", EVHTTP_REQ_GET, GET_ALLOW, SRV_ROUTE_AUTH | SRV_ROUTE_PREFIX,
	 srv_route_response_get},
	{"/v1/messages", "/v1/messages", EVHTTP_REQ_POST, POST_ALLOW,
	 SRV_ROUTE_AUTH | SRV_ROUTE_ANTHROPIC | SRV_ROUTE_GENERATE, srv_route_messages},
	{"/v1/messages/count_tokens", "/v1/messages/count_tokens", EVHTTP_REQ_POST, POST_ALLOW,
	 SRV_ROUTE_AUTH | SRV_ROUTE_ANTHROPIC, srv_route_count_tokens},
	/* the chat page: no key (it asks for one when the API answers 401) */
	{"/", "/", EVHTTP_REQ_GET, GET_ALLOW, SRV_ROUTE_ANYTIME, srv_route_webui},
	{"/apply-template", "/apply-template", EVHTTP_REQ_POST, POST_ALLOW, SRV_ROUTE_AUTH, srv_route_apply_template},
	/* also while loading: the engine gauges read 0; --metrics-no-auth opens it */
	{"/metrics", "/metrics", EVHTTP_REQ_GET, GET_ALLOW, SRV_ROUTE_AUTH | SRV_ROUTE_ANYTIME | SRV_ROUTE_SCRAPE,
	 srv_route_metrics},
};
const size_t srv_n_routes = sizeof(srv_routes) / sizeof(srv_routes[0]);

const struct srv_route *srv_route_find(const char *path)
{
	for (size_t i = 0; i < srv_n_routes; i++) {
		const struct srv_route *r = &srv_routes[i];
		size_t n = strlen(r->path);
		if (r->flags & SRV_ROUTE_PREFIX ? strncmp(path, r->path, n) == 0 && path[n] && !strchr(path + n, '/')
						: strcmp(path, r->path) == 0)
			return r;
	}
	return NULL;
}
