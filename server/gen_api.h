/* gen_api.h — another API over the chat pipeline (middle layer). The
 * Responses API (route_responses.c) and the Anthropic Messages API
 * (route_messages.c) are translators: their request body becomes the body
 * of a chat completion request (validated, capped, rendered and tokenized
 * by the same gen_prepare), and the generation's text and finish become
 * their own response body or stream events. gen.c calls these hooks where
 * it would write a chat completion's JSON. */
#ifndef ALICE_SERVER_GEN_API_H
#define ALICE_SERVER_GEN_API_H

#include <json-c/json.h>

#include "openai.h"
#include "server.h"

struct srv_gen;

struct gen_api {
	/* Prep worker: the API's body (parsed, borrowed) -> a chat completion
	 * body (a new object), and this request's own state in *state (freed by
	 * free_state, also on failure). NULL with e filled when the body is bad. */
	struct json_object *(*translate)(struct srv *s, struct json_object *body, void **state,
					 struct srv_api_error *e);
	void (*free_state)(void *state);
	/* An error of the chat pipeline names chat fields: rename them to the
	 * API's own (max_tokens -> max_output_tokens, ...). */
	void (*rename_error)(struct srv_api_error *e);
	/* Event thread, streams only: the SSE headers are sent; the opening
	 * events. Text as it becomes final; the closing events (failed: the
	 * error that ended it, or NULL). */
	void (*stream_start)(struct srv_gen *g);
	void (*stream_text)(struct srv_gen *g, const char *text, size_t len);
	void (*stream_end)(struct srv_gen *g, const struct srv_api_error *failed);
	/* Event thread: the whole non-streamed body (a new object). */
	struct json_object *(*body)(struct srv_gen *g);
};

/* gen.c: a request of such an API (the route's handler calls it). */
void srv_gen_handle_api(struct srv *s, struct srv_http *h, const struct gen_api *api, const char *body, size_t len);

#endif
