/* openai.h — the OpenAI wire format (bottom layer; openai.c, limits.c,
 * api_error.c): parse and validate
 * request bodies of /v1/chat/completions and /v1/completions into struct
 * srv_gen_request, which carries the core's own types (sampling parameters
 * with the core's defaults, chat messages, logit bias, a compiled grammar),
 * and build OpenAI-shaped error bodies.
 *
 * Parsing knows no model: checks that need one (token ids in logit_bias,
 * context length) are done by gen_prepare.c once the prompt is tokenized.
 * Every check that fails fills struct srv_api_error with the HTTP status,
 * a message, and the offending field in `param`. */
#ifndef ALICE_SERVER_OPENAI_H
#define ALICE_SERVER_OPENAI_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/chat.h"
#include "alice/grammar.h"
#include "alice/sampling.h"

#define SRV_MAX_STOP 4
#define SRV_MAX_N 16            /* choices per prompt */
#define SRV_MAX_PROMPTS 64      /* prompts in one completions request */
#define SRV_MAX_TOP_LOGPROBS ALICE_SAMPLING_MAX_TOP
#define SRV_MAX_LOGIT_BIAS 1024 /* entries */

struct srv_api_error {
	int status;        /* HTTP status */
	const char *type;  /* "invalid_request_error", "authentication_error", ... */
	const char *code;  /* NULL or a short code ("model_loading", ...) */
	char param[64];    /* offending field, "" for none */
	char message[512];
};

void srv_api_error_set(struct srv_api_error *e, int status, const char *type, const char *code,
		       const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* 400 invalid_request_error naming param. */
void srv_api_error_invalid(struct srv_api_error *e, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* 500 server_error "out of memory". */
void srv_api_error_nomem(struct srv_api_error *e);
/* {"error":{"message","type","param","code"}}; the caller puts the object. */
struct json_object *srv_api_error_json(const struct srv_api_error *e);
/* Anthropic's shape, {"type":"error","error":{"type","message"}}, the type
 * from the status (invalid_request_error, authentication_error, ...). */
struct json_object *srv_anthropic_error_json(const struct srv_api_error *e);

enum srv_kind {
	SRV_KIND_CHAT = 0,
	SRV_KIND_COMPLETION = 1,
};

enum srv_tool_choice {
	SRV_TOOL_CHOICE_AUTO = 0, /* the model decides; calls parsed from its text */
	SRV_TOOL_CHOICE_NONE,     /* no calls: tools not shown, nothing parsed */
	SRV_TOOL_CHOICE_REQUIRED, /* a grammar makes the model call one */
	SRV_TOOL_CHOICE_NAMED,    /* ... the function tool_name */
};

/* One prompt of a completions request: text, or token ids given directly. */
struct srv_prompt {
	char *text;      /* NULL when tokens are given */
	int32_t *tokens; /* NULL when text is given */
	size_t n_tokens;
};

struct srv_gen_request {
	enum srv_kind kind;
	char *model; /* as sent; NULL when absent */

	struct alice_chat_message *messages; /* chat: role and content (text parts joined) owned here */
	size_t n_messages;
	/* chat: per message, the content as given when it was an array of text
	 * parts (a reference held here), else NULL; for Jinja templates that
	 * read typed content */
	struct json_object **parts;
	struct json_object *chat_template_kwargs; /* chat: an object (reference held), NULL when absent */
	/* chat: per message, an object of the members a template reads beside
	 * role and content (tool_calls with arguments as objects, tool_call_id,
	 * name, reasoning_content; openai_tools.c), NULL for none */
	struct json_object **extra;
	/* chat: the function tools (an array, reference held; NULL = none),
	 * what to do with them, and the forced function's name (NAMED) */
	struct json_object *tools;
	enum srv_tool_choice tool_choice;
	char *tool_name;
	bool parallel_tool_calls;
	struct srv_prompt *prompts; /* completions: one or more */
	size_t n_prompts;

	bool stream;
	bool include_usage; /* stream_options.include_usage */
	int64_t max_tokens; /* -1: until the context is full or the model stops */
	/* alice_sampling_params_default() plus the request's fields. seed is
	 * the request's when has_seed; logprobs (chat: logprobs; completions:
	 * logprobs != null) and n_probs (top_logprobs) are set here too;
	 * logit_bias points at the array below. */
	struct alice_sampling_params sampling;
	bool has_seed;
	struct alice_logit_bias *logit_bias;
	size_t n_logit_bias;
	char *stop[SRV_MAX_STOP];
	size_t n_stop;
	int64_t n;
	struct alice_grammar *grammar; /* compiled GBNF or JSON response_format; NULL = none */
	const char *grammar_param;     /* where it came from: "grammar" or "response_format" (static) */
	bool echo;         /* completions: prepend the prompt to the text */
	bool ignore_eos;   /* llama-server's extension: generate past end-of-generation tokens */
	/* speculative decoding: "speculative": false turns it off; llama-server's
	 * "speculative.n_max" / ".n_min" / ".p_min" (0 = the server's) */
	bool no_spec;
	int64_t spec_n_max, spec_n_min;
	float spec_p_min;
};

/* Parse and validate `len` bytes of JSON, then apply the operator caps lim
 * (NULL: none; see srv_limits_check). Returns 0, or -1 with e filled (400,
 * 413 for a cap, 500 when out of memory). On failure r is cleared. A grammar
 * (GBNF in "grammar", or a JSON response_format) is compiled here; GBNF over
 * lim's size cap is refused before it is compiled. */
struct srv_limits;
int srv_openai_parse(enum srv_kind kind, const char *body, size_t len, const struct srv_limits *lim,
		     struct srv_gen_request *r, struct srv_api_error *e);
void srv_gen_request_clear(struct srv_gen_request *r);

/* Operator caps on parsed requests (server flags; 0 = no cap). */
struct srv_limits {
	int64_t max_n;             /* choices per prompt (--max-n) */
	int64_t max_tokens;        /* max_tokens cap, also the default (--max-tokens-limit) */
	int64_t max_messages;      /* chat messages (--max-messages) */
	int64_t max_grammar_bytes; /* GBNF, given or made from a JSON response_format (--max-grammar-bytes) */
};
/* Check a parsed request against the caps (limits.c): 0, or -1 with e
 * filled (400 for n / max_tokens, 413 for message count / grammar size).
 * An absent max_tokens becomes the cap. */
int srv_limits_check(const struct srv_limits *l, struct srv_gen_request *r, struct srv_api_error *e);
/* The grammar-size cap alone, for `bytes` of GBNF: 0, or -1 with e filled (413). */
int srv_limits_check_grammar(const struct srv_limits *l, size_t bytes, struct srv_api_error *e);

/* ---- openai_tools.c ---- */
/* tools, tool_choice, parallel_tool_calls of chat request body o into r:
 * 0, or -1 with e filled (400 naming the field). */
int srv_openai_parse_tools(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e);
/* messages[i]'s members beside role and content (msg: the message object,
 * role: its validated role) into *extra (NULL when none): 0, or -1 with e
 * filled. An assistant's tool_calls[].function.arguments (a JSON string)
 * becomes an object; content may then be null. */
int srv_openai_message_extra(struct json_object *msg, size_t i, const char *role, struct json_object **extra,
			     struct srv_api_error *e);

/* A JSON value's type in words ("a string", "an array", ...), for messages. */
const char *srv_json_type_name(struct json_object *v);
/* Parse a JSON object body with a depth limit; NULL + e on error. */
struct json_object *srv_json_parse_object(const char *body, size_t len, struct srv_api_error *e);
/* Optional boolean member key of o: 0 = absent or null (*out kept), 1 = set,
 * -1 = not a boolean (e filled, naming key and the type given). */
int srv_json_get_bool(struct json_object *o, const char *key, bool *out, struct srv_api_error *e);

#endif
