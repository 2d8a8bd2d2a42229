/* gen.h — the completion routes' own pieces, shared by gen.c (the request
 * lifecycle: submit, engine events, disconnects, the end), gen_prepare.c
 * (body -> validated plan: prompts rendered and tokenized, every check that
 * needs the model or the server), gen_response.c (the OpenAI response
 * JSON: bodies, chunks, usage, logprobs) and gen_tools.c (a chat text as
 * reasoning, content and tool calls, whole or as stream deltas). gen.c
 * calls the others; they call nothing in gen.c. */
#ifndef ALICE_SERVER_GEN_H
#define ALICE_SERVER_GEN_H

#include <json-c/json.h>

#include "alice/sbuf.h"
#include "gen_api.h"
#include "alice/tool_call.h"
#include "queue.h"
#include "server.h"

struct srv_choice {
	struct srv_gen *gen;
	int index;
	int prompt_index;
	uint64_t engine_id;
	bool live; /* submitted, terminal event not yet seen */
	struct alice_sbuf text;     /* non-streamed: the whole text; streamed: the echo */
	size_t text_offset;         /* completions logprobs: bytes of token pieces so far */
	struct json_object *lp;     /* chat: content array; completions: legacy object */
	struct gen_msg *done_msg;   /* the DONE event's message, allocated before submit */
	int lost;                   /* atomic: a token event could not be copied (out of memory) */
	enum alice_engine_finish finish;
	int32_t stop_index; /* FINISH_STOP: the plan's stops[] entry that ended it, -1 none */
	int32_t n_prompt, n_completion;
	int32_t n_cached; /* prompt tokens reused from the prefix cache */
	int32_t n_drafted, n_accepted; /* speculative decoding */
	double prefill_ms, decode_ms;
	/* chat output parsed (srv_gen.parse): a stream's text so far, and what
	 * of its parse has been sent (bytes of reasoning and content, calls) */
	struct alice_sbuf raw;
	size_t sent_reasoning, sent_content, sent_calls;
	bool call_open;   /* call sent_calls's id and name went out ... */
	size_t sent_args; /* ... and this many bytes of its arguments */
	char *error;
	enum alice_status error_status;
};

struct srv_gen {
	struct srv_gen *next, *prev;
	struct srv *srv;
	struct srv_http http;
	struct evhttp_connection *evcon;
	struct event *watch;
	struct event *heartbeat; /* stream: SSE comments until the first token */
	enum srv_kind kind;
	bool stream, include_usage, logprobs, echo;
	int top_logprobs;
	char id[48];
	int64_t created;
	struct srv_choice *choices;
	size_t n_choices, n_live;
	int64_t prompt_tokens; /* counted once per prompt */
	bool client_gone, replied;
	const struct gen_api *api; /* NULL: the chat/completions wire format */
	void *api_state;           /* the api's own, freed by api->free_state */
	/* chat: split reasoning and tool calls off the text (gen_tools.c);
	 * parse.tools holds a reference */
	bool parse;
	struct alice_chat_parse_opts parse_opts;
	bool forced_call; /* a grammar makes the calls well formed: stream arguments as written */
};

struct gen_msg; /* an engine event copied for the event thread (gen.c) */

/* ---- gen_prepare.c ---- */
struct gen_prompt {
	int32_t *tokens;
	size_t n;
};
struct gen_plan {
	struct srv_gen_request r;
	struct gen_prompt *prompts; /* one per prompt (chat: one) */
	size_t n_prompts;
	const char **stops; /* the request's and the chat template's; borrowed strings */
	size_t n_stops;
	uint64_t seed;      /* the first choice's (the request's, or random) */
	const struct gen_api *api; /* see gen_api.h; NULL for the OpenAI chat/completions routes */
	void *api_state;
	bool think_open;    /* chat: the prompt leaves a <think> block open */
	bool parse;         /* chat: the output is parsed (reasoning, tool calls) */
	bool forced_call;   /* chat: tool_choice required or named (a grammar) */
	struct alice_chat_parse_opts parse_opts; /* tools borrowed from r */
};
/* Parse, cap and validate a body against the model and server, render and
 * tokenize its prompts: 0, or -1 with e filled. The plan is freed with
 * gen_plan_free either way. */
int gen_prepare(struct srv *s, enum srv_kind kind, const char *body, size_t len, struct gen_plan *p,
		struct srv_api_error *e);
/* The same for a request of another API (gen_api.h): its body translated
 * into a chat request first; p->api and p->api_state set. */
int gen_prepare_api(struct srv *s, const struct gen_api *api, const char *body, size_t len, struct gen_plan *p,
		    struct srv_api_error *e);
void gen_plan_free(struct gen_plan *p);
/* 64 random bits (ids, seeds). */
uint64_t gen_random64(void);

/* ---- gen_tools.c ---- */
/* The chunks (a new array, possibly empty) that bring a streamed chat
 * choice's client up to the parse of c->raw: reasoning_content, content
 * and tool_calls deltas. final: the text is complete. lp (borrowed, may
 * be NULL) rides with the first chunk; *lp_used says whether it did. */
struct json_object *gen_tools_deltas(const struct srv_gen *g, struct srv_choice *c, bool final,
				     struct json_object *lp, bool *lp_used);
/* The non-streamed message of a parsed chat choice: content (null when
 * empty and there are calls), reasoning_content, tool_calls. */
void gen_tools_message(const struct srv_gen *g, const struct srv_choice *c, struct json_object *m);
/* "tool_calls" when the choice made calls, else the engine's reason. */
const char *gen_choice_finish(const struct srv_gen *g, const struct srv_choice *c);

/* ---- gen_response.c ---- */
/* One streamed chat chunk for one choice with this delta (taken). */
struct json_object *gen_chunk_delta(const struct srv_gen *g, const struct srv_choice *c, struct json_object *delta,
				    const char *finish, struct json_object *lp);
struct json_object *gen_logprobs_new(const struct srv_gen *g);
/* Add a token's logprob entry to c->lp (c->text_offset advances). */
void gen_logprobs_add(struct srv_gen *g, struct srv_choice *c, const struct alice_engine_event *ev);
/* One streamed chunk for one choice: text NULL = no content key in a chat
 * delta; finish NULL = still running; lp borrowed or NULL. */
struct json_object *gen_chunk(const struct srv_gen *g, const struct srv_choice *c, const char *text,
			      size_t len, bool role, const char *finish, struct json_object *lp);
/* The last chunk of a stream with include_usage: no choices, the usage. */
struct json_object *gen_usage_chunk(const struct srv_gen *g);
/* The whole non-streamed body. */
struct json_object *gen_body(const struct srv_gen *g);
/* Totals over the choices, for the usage object and the log line. */
void gen_counts(const struct srv_gen *g, struct srv_request_counts *out);
const char *gen_finish_reason(enum alice_engine_finish f);

#endif
