/* openai.h — the OpenAI wire format: parse and validate request bodies of
 * /v1/chat/completions and /v1/completions into struct srv_gen_request, and
 * build OpenAI-shaped error bodies.
 *
 * Parsing knows no model: checks that need one (token ids in logit_bias,
 * context length) are done by the caller once the prompt is tokenized.
 * Every check that fails fills struct srv_api_error with the HTTP status,
 * a message, and the offending field in `param`. */
#ifndef ALICE_SERVER_OPENAI_H
#define ALICE_SERVER_OPENAI_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_MAX_STOP 4
#define SRV_MAX_N 16            /* choices per prompt */
#define SRV_MAX_PROMPTS 64      /* prompts in one completions request */
#define SRV_MAX_TOP_LOGPROBS 20
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
/* {"error":{"message","type","param","code"}}; the caller puts the object. */
struct json_object *srv_api_error_json(const struct srv_api_error *e);

enum srv_kind {
	SRV_KIND_CHAT = 0,
	SRV_KIND_COMPLETION = 1,
};

struct srv_message {
	char *role;
	char *content; /* text parts joined */
};

/* One prompt of a completions request: text, or token ids given directly. */
struct srv_prompt {
	char *text;      /* NULL when tokens are given */
	int32_t *tokens; /* NULL when text is given */
	size_t n_tokens;
};

struct srv_logit_bias {
	int64_t token;
	float bias;
};

struct srv_gen_request {
	enum srv_kind kind;
	char *model; /* as sent; NULL when absent */

	struct srv_message *messages; /* chat */
	size_t n_messages;
	struct srv_prompt *prompts; /* completions: one or more */
	size_t n_prompts;

	bool stream;
	bool include_usage; /* stream_options.include_usage */
	int64_t max_tokens; /* -1: until the context is full or the model stops */
	double temperature, top_p, min_p;
	int64_t top_k;
	bool has_seed;
	uint64_t seed;
	char *stop[SRV_MAX_STOP];
	size_t n_stop;
	double presence_penalty, frequency_penalty, repeat_penalty;
	struct srv_logit_bias *logit_bias;
	size_t n_logit_bias;
	int64_t n;
	bool logprobs;     /* chat: logprobs; completions: logprobs != null */
	int top_logprobs;  /* alternatives per position, 0..SRV_MAX_TOP_LOGPROBS */
	char *grammar;     /* raw GBNF, or the grammar of a JSON response_format; NULL = none */
	bool echo;         /* completions: prepend the prompt to the text */
};

/* Parse and validate `len` bytes of JSON. Returns 0, or -1 with e filled
 * (status 400). On failure r is cleared. */
int srv_openai_parse(enum srv_kind kind, const char *body, size_t len, struct srv_gen_request *r,
		     struct srv_api_error *e);
void srv_gen_request_clear(struct srv_gen_request *r);

/* Operator caps on parsed requests (server flags; 0 = no cap). */
struct srv_limits {
	int64_t max_n;             /* choices per prompt (--max-n) */
	int64_t max_tokens;        /* max_tokens cap, also the default (--max-tokens-limit) */
	int64_t max_messages;      /* chat messages (--max-messages) */
	int64_t max_grammar_bytes; /* GBNF, given or from a JSON response_format (--max-grammar-bytes) */
};
/* Check a parsed request against the caps (limits.c): 0, or -1 with e
 * filled (400 for n / max_tokens, 413 for message count / grammar size).
 * An absent max_tokens becomes the cap. */
int srv_limits_check(const struct srv_limits *l, struct srv_gen_request *r, struct srv_api_error *e);

/* Parse a JSON object body with a depth limit; NULL + e on error. */
struct json_object *srv_json_parse_object(const char *body, size_t len, struct srv_api_error *e);
/* Optional boolean member key of o: 0 = absent or null (*out kept), 1 = set,
 * -1 = not a boolean (e filled, naming key and the type given). */
int srv_json_get_bool(struct json_object *o, const char *key, bool *out, struct srv_api_error *e);

/* Valid UTF-8 copy of n bytes with each invalid sequence replaced by U+FFFD
 * (for token pieces that end inside a character). The caller frees. */
char *srv_utf8_sanitize(const char *s, size_t n, size_t *out_len);

#endif
