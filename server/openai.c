/* openai.c — request parsing/validation and error bodies (see openai.h). */
#include "openai.h"

#include "alice/json_schema.h"
#include "alice/spec.h"
#include "alice/sbuf.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

struct json_object *srv_json_parse_object(const char *body, size_t len, struct srv_api_error *e)
{
	if (len == 0) {
		srv_api_error_invalid(e, NULL, "the request body is empty; expected a JSON object");
		return NULL;
	}
	if (len > (size_t)INT32_MAX) {
		srv_api_error_invalid(e, NULL, "the request body is too large");
		return NULL;
	}
	struct json_tokener *tok = json_tokener_new_ex(JSON_MAX_DEPTH);
	if (!tok) {
		srv_api_error_nomem(e);
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	struct json_object *obj = json_tokener_parse_ex(tok, body, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t used = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (jerr == json_tokener_continue) {
		srv_api_error_invalid(e, NULL, "invalid JSON in the request body: unexpected end of input");
		json_object_put(obj);
		return NULL;
	}
	if (jerr != json_tokener_success || !obj) {
		srv_api_error_invalid(e, NULL, "invalid JSON in the request body at byte %zu: %s", used,
				      json_tokener_error_desc(jerr));
		json_object_put(obj);
		return NULL;
	}
	for (size_t i = used; i < len; i++) {
		char c = body[i];
		if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
			srv_api_error_invalid(e, NULL,
					      "invalid JSON in the request body: trailing data at byte %zu", i);
			json_object_put(obj);
			return NULL;
		}
	}
	if (!json_object_is_type(obj, json_type_object)) {
		srv_api_error_invalid(e, NULL, "the request body must be a JSON object");
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

/* ---- typed field getters: 0 = absent or null (default kept), 1 = set, -1 = error ---- */

static struct json_object *field(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;
	if (!json_object_object_get_ex(o, key, &v))
		return NULL;
	return v; /* NULL for JSON null too */
}

const char *srv_json_type_name(struct json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null: return "null";
	case json_type_boolean: return "a boolean";
	case json_type_double:
	case json_type_int: return "a number";
	case json_type_object: return "an object";
	case json_type_array: return "an array";
	case json_type_string: return "a string";
	}
	return "?";
}

int srv_json_get_bool(struct json_object *o, const char *key, bool *out, struct srv_api_error *e)
{
	struct json_object *v = field(o, key);
	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_boolean)) {
		srv_api_error_invalid(e, key, "'%s' must be a boolean, got %s", key, srv_json_type_name(v));
		return -1;
	}
	*out = json_object_get_boolean(v);
	return 1;
}

static int as_int(struct json_object *v, int64_t *out)
{
	if (json_object_is_type(v, json_type_int)) {
		errno = 0;
		int64_t x = json_object_get_int64(v);
		/* json-c clamps out-of-range values to INT64_MIN/MAX */
		if (x == INT64_MAX || x == INT64_MIN)
			return -1;
		*out = x;
		return 0;
	}
	if (json_object_is_type(v, json_type_double)) {
		double d = json_object_get_double(v);
		if (!isfinite(d) || d != floor(d) || fabs(d) > 9.0e15)
			return -1;
		*out = (int64_t)d;
		return 0;
	}
	return -1;
}

static int get_int(struct json_object *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
		   struct srv_api_error *e)
{
	struct json_object *v = field(o, key);
	if (!v)
		return 0;
	int64_t x;
	if (as_int(v, &x) != 0) {
		srv_api_error_invalid(e, key, "'%s' must be an integer, got %s", key,
				      json_object_is_type(v, json_type_double) ? "a non-integral number"
									      : srv_json_type_name(v));
		return -1;
	}
	if (x < lo || x > hi) {
		srv_api_error_invalid(e, key, "'%s' must be between %lld and %lld, got %lld", key,
				      (long long)lo, (long long)hi, (long long)x);
		return -1;
	}
	*out = x;
	return 1;
}

static int get_num(struct json_object *o, const char *key, double lo, double hi, double *out,
		   struct srv_api_error *e)
{
	struct json_object *v = field(o, key);
	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double)) {
		srv_api_error_invalid(e, key, "'%s' must be a number, got %s", key, srv_json_type_name(v));
		return -1;
	}
	double d = json_object_get_double(v);
	if (!isfinite(d) || d < lo || d > hi) {
		srv_api_error_invalid(e, key, "'%s' must be between %g and %g, got %g", key, lo, hi, d);
		return -1;
	}
	*out = d;
	return 1;
}

static int get_float(struct json_object *o, const char *key, double lo, double hi, float *out,
		     struct srv_api_error *e)
{
	double d = 0;
	int st = get_num(o, key, lo, hi, &d, e);
	if (st > 0)
		*out = (float)d;
	return st;
}

/* Copy a JSON string; strings with NUL bytes are refused (prompts are C strings). */
static char *dup_string(struct json_object *v, const char *param, const char *what,
			struct srv_api_error *e)
{
	const char *s = json_object_get_string(v);
	size_t n = (size_t)json_object_get_string_len(v);
	if (memchr(s, '\0', n)) {
		srv_api_error_invalid(e, param, "%s contains a NUL character", what);
		return NULL;
	}
	char *c = malloc(n + 1);
	if (!c) {
		srv_api_error_nomem(e);
		return NULL;
	}
	memcpy(c, s, n + 1);
	return c;
}

/* ---- messages ---- */

static int parse_content(struct json_object *c, size_t i, const char **out, struct json_object **parts,
			 struct srv_api_error *e)
{
	char what[64];
	struct alice_sbuf b = {0};
	snprintf(what, sizeof(what), "messages[%zu].content", i);
	if (c && json_object_is_type(c, json_type_string)) {
		*out = dup_string(c, "messages", what, e);
		return *out ? 0 : -1;
	}
	if (c && !json_object_is_type(c, json_type_array)) {
		srv_api_error_invalid(e, "messages", "%s must be a string or an array of content parts, got %s",
				      what, srv_json_type_name(c));
		return -1;
	}
	size_t np = c ? json_object_array_length(c) : 0;
	for (size_t j = 0; j < np; j++) {
		struct json_object *p = json_object_array_get_idx(c, j), *t, *tx;
		if (!p || !json_object_is_type(p, json_type_object)) {
			srv_api_error_invalid(e, "messages", "%s[%zu] must be an object {\"type\":\"text\",\"text\":...}",
					      what, j);
			goto fail;
		}
		t = field(p, "type");
		if (!t || !json_object_is_type(t, json_type_string)) {
			srv_api_error_invalid(e, "messages", "%s[%zu].type must be a string", what, j);
			goto fail;
		}
		if (strcmp(json_object_get_string(t), "text") != 0) {
			srv_api_error_invalid(e, "messages",
					      "%s[%zu]: content part type '%.40s' is not supported; only 'text' parts are",
					      what, j, json_object_get_string(t));
			goto fail;
		}
		tx = field(p, "text");
		if (!tx || !json_object_is_type(tx, json_type_string)) {
			srv_api_error_invalid(e, "messages", "%s[%zu].text must be a string", what, j);
			goto fail;
		}
		size_t n = (size_t)json_object_get_string_len(tx);
		if (memchr(json_object_get_string(tx), '\0', n)) {
			srv_api_error_invalid(e, "messages", "%s[%zu].text contains a NUL character", what, j);
			goto fail;
		}
		alice_sb_addn(&b, json_object_get_string(tx), n);
	}
	if (!(*out = alice_sb_take(&b))) {
		srv_api_error_nomem(e);
		return -1;
	}
	if (c)
		*parts = json_object_get(c);
	return 0;
fail:
	free(b.p);
	return -1;
}

static int parse_messages(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e)
{
	struct json_object *m = field(o, "messages");
	if (!m) {
		srv_api_error_invalid(e, "messages", "'messages' is required");
		return -1;
	}
	if (!json_object_is_type(m, json_type_array)) {
		srv_api_error_invalid(e, "messages", "'messages' must be an array, got %s", srv_json_type_name(m));
		return -1;
	}
	size_t n = json_object_array_length(m);
	if (n == 0) {
		srv_api_error_invalid(e, "messages", "'messages' must contain at least one message");
		return -1;
	}
	r->messages = calloc(n, sizeof(*r->messages));
	r->parts = calloc(n, sizeof(*r->parts));
	r->extra = calloc(n, sizeof(*r->extra));
	if (!r->messages || !r->parts || !r->extra) {
		srv_api_error_nomem(e);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *msg = json_object_array_get_idx(m, i), *role;
		if (!msg || !json_object_is_type(msg, json_type_object)) {
			srv_api_error_invalid(e, "messages", "messages[%zu] must be an object", i);
			return -1;
		}
		role = field(msg, "role");
		if (!role || !json_object_is_type(role, json_type_string)) {
			srv_api_error_invalid(e, "messages", "messages[%zu].role must be a string", i);
			return -1;
		}
		const char *rs = json_object_get_string(role);
		if (strlen(rs) != (size_t)json_object_get_string_len(role)) {
			/* "user\u0000..." must not pass as "user" */
			srv_api_error_invalid(e, "messages", "messages[%zu].role contains a NUL character", i);
			return -1;
		}
		/* OpenAI's newer name for the system role */
		if (strcmp(rs, "developer") == 0)
			rs = "system";
		if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool")) {
			srv_api_error_invalid(e, "messages",
					      "messages[%zu].role '%.40s' is not supported; use system, user, assistant or tool",
					      i, rs);
			return -1;
		}
		r->messages[i].role = strdup(rs);
		r->n_messages = i + 1;
		if (!r->messages[i].role) {
			srv_api_error_nomem(e);
			return -1;
		}
		if (parse_content(field(msg, "content"), i, &r->messages[i].content, &r->parts[i], e) != 0 ||
		    srv_openai_message_extra(msg, i, rs, &r->extra[i], e) != 0)
			return -1;
	}
	return 0;
}

/* ---- prompt (completions) ---- */

static int parse_token_array(struct json_object *a, struct srv_prompt *p, const char *what,
			     struct srv_api_error *e)
{
	size_t n = json_object_array_length(a);
	if (n == 0) {
		srv_api_error_invalid(e, "prompt", "%s is an empty token array", what);
		return -1;
	}
	p->tokens = malloc(n * sizeof(*p->tokens));
	if (!p->tokens) {
		srv_api_error_nomem(e);
		return -1;
	}
	p->n_tokens = n;
	for (size_t i = 0; i < n; i++) {
		int64_t t;
		struct json_object *v = json_object_array_get_idx(a, i);
		if (!v || as_int(v, &t) != 0 || t < 0 || t > INT32_MAX) {
			srv_api_error_invalid(e, "prompt", "%s[%zu] must be a non-negative token id", what, i);
			return -1;
		}
		p->tokens[i] = (int32_t)t;
	}
	return 0;
}

static int parse_prompt(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e)
{
	struct json_object *p = field(o, "prompt");
	if (!p) {
		srv_api_error_invalid(e, "prompt", "'prompt' is required");
		return -1;
	}
	if (json_object_is_type(p, json_type_string)) {
		r->prompts = calloc(1, sizeof(*r->prompts));
		if (!r->prompts)
			goto nomem;
		r->n_prompts = 1;
		r->prompts[0].text = dup_string(p, "prompt", "'prompt'", e);
		return r->prompts[0].text ? 0 : -1;
	}
	if (!json_object_is_type(p, json_type_array)) {
		srv_api_error_invalid(e, "prompt",
				      "'prompt' must be a string, an array of strings, or token ids; got %s",
				      srv_json_type_name(p));
		return -1;
	}
	size_t n = json_object_array_length(p);
	if (n == 0) {
		srv_api_error_invalid(e, "prompt", "'prompt' must not be an empty array");
		return -1;
	}
	struct json_object *first = json_object_array_get_idx(p, 0);
	if (first && (json_object_is_type(first, json_type_int) ||
		      json_object_is_type(first, json_type_double))) {
		/* one prompt given as token ids */
		r->prompts = calloc(1, sizeof(*r->prompts));
		if (!r->prompts)
			goto nomem;
		r->n_prompts = 1;
		return parse_token_array(p, &r->prompts[0], "'prompt'", e);
	}
	if (n > SRV_MAX_PROMPTS) {
		srv_api_error_invalid(e, "prompt", "'prompt' has %zu entries; at most %d are allowed", n,
				      SRV_MAX_PROMPTS);
		return -1;
	}
	r->prompts = calloc(n, sizeof(*r->prompts));
	if (!r->prompts)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(p, i);
		char what[32];
		snprintf(what, sizeof(what), "prompt[%zu]", i);
		r->n_prompts = i + 1;
		if (v && json_object_is_type(v, json_type_string)) {
			r->prompts[i].text = dup_string(v, "prompt", what, e);
			if (!r->prompts[i].text)
				return -1;
		} else if (v && json_object_is_type(v, json_type_array)) {
			if (parse_token_array(v, &r->prompts[i], what, e) != 0)
				return -1;
		} else {
			srv_api_error_invalid(e, "prompt", "%s must be a string or an array of token ids, got %s",
					      what, v ? srv_json_type_name(v) : "null");
			return -1;
		}
	}
	return 0;
nomem:
	srv_api_error_nomem(e);
	return -1;
}

/* ---- sampling and output options ---- */

static int parse_stop(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e)
{
	struct json_object *s = field(o, "stop");
	if (!s)
		return 0;
	if (json_object_is_type(s, json_type_string)) {
		if (json_object_get_string_len(s) == 0)
			return 0;
		r->stop[0] = dup_string(s, "stop", "'stop'", e);
		if (!r->stop[0])
			return -1;
		r->n_stop = 1;
		return 0;
	}
	if (!json_object_is_type(s, json_type_array)) {
		srv_api_error_invalid(e, "stop", "'stop' must be a string or an array of strings, got %s",
				      srv_json_type_name(s));
		return -1;
	}
	size_t n = json_object_array_length(s);
	if (n > SRV_MAX_STOP) {
		srv_api_error_invalid(e, "stop", "'stop' has %zu entries; at most %d are allowed", n,
				      SRV_MAX_STOP);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(s, i);
		if (!v || !json_object_is_type(v, json_type_string)) {
			srv_api_error_invalid(e, "stop", "stop[%zu] must be a string", i);
			return -1;
		}
		if (json_object_get_string_len(v) == 0) {
			srv_api_error_invalid(e, "stop", "stop[%zu] must not be empty", i);
			return -1;
		}
		r->stop[r->n_stop] = dup_string(v, "stop", "a stop string", e);
		if (!r->stop[r->n_stop])
			return -1;
		r->n_stop++;
	}
	return 0;
}

static int parse_logit_bias(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e)
{
	struct json_object *b = field(o, "logit_bias");
	if (!b)
		return 0;
	if (!json_object_is_type(b, json_type_object)) {
		srv_api_error_invalid(e, "logit_bias",
				      "'logit_bias' must be an object mapping token ids to numbers, got %s",
				      srv_json_type_name(b));
		return -1;
	}
	size_t n = (size_t)json_object_object_length(b);
	if (n > SRV_MAX_LOGIT_BIAS) {
		srv_api_error_invalid(e, "logit_bias", "'logit_bias' has %zu entries; at most %d are allowed",
				      n, SRV_MAX_LOGIT_BIAS);
		return -1;
	}
	if (n == 0)
		return 0;
	r->logit_bias = calloc(n, sizeof(*r->logit_bias));
	if (!r->logit_bias) {
		srv_api_error_nomem(e);
		return -1;
	}
	json_object_object_foreach(b, key, val)
	{
		char *end = NULL;
		errno = 0;
		long long t = strtoll(key, &end, 10);
		if (!key[0] || *end || errno || t < 0 || t > INT32_MAX) {
			srv_api_error_invalid(e, "logit_bias", "logit_bias key '%.32s' is not a token id", key);
			return -1;
		}
		if (!val || (!json_object_is_type(val, json_type_int) &&
			     !json_object_is_type(val, json_type_double))) {
			srv_api_error_invalid(e, "logit_bias", "logit_bias[\"%s\"] must be a number", key);
			return -1;
		}
		double d = json_object_get_double(val);
		if (!isfinite(d) || d < -100.0 || d > 100.0) {
			srv_api_error_invalid(e, "logit_bias",
					      "logit_bias[\"%s\"] must be between -100 and 100, got %g", key, d);
			return -1;
		}
		r->logit_bias[r->n_logit_bias].token = (int32_t)t;
		r->logit_bias[r->n_logit_bias].bias = (float)d;
		r->n_logit_bias++;
	}
	r->sampling.logit_bias = r->logit_bias;
	r->sampling.n_logit_bias = r->n_logit_bias;
	return 0;
}

static int parse_logprobs(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e)
{
	int64_t k = 0;
	struct alice_sampling_params *sp = &r->sampling;
	if (r->kind == SRV_KIND_CHAT) {
		if (srv_json_get_bool(o, "logprobs", &sp->logprobs, e) < 0)
			return -1;
		int st = get_int(o, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &k, e);
		if (st < 0)
			return -1;
		if (st > 0 && !sp->logprobs) {
			srv_api_error_invalid(e, "top_logprobs", "'top_logprobs' requires 'logprobs': true");
			return -1;
		}
		sp->n_probs = (int32_t)k;
		return 0;
	}
	/* completions: legacy integer logprobs (null/absent = none) */
	int st = get_int(o, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &k, e);
	if (st < 0)
		return -1;
	sp->logprobs = st > 0;
	sp->n_probs = (int32_t)k;
	return 0;
}

/* "grammar": GBNF text, compiled here (errors quote line:column) once it
 * is within the size cap, so an oversized grammar never reaches the compiler. */
static int parse_grammar(struct json_object *o, struct srv_gen_request *r, const struct srv_limits *lim,
			 struct srv_api_error *e)
{
	struct json_object *v = field(o, "grammar");
	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_string)) {
		srv_api_error_invalid(e, "grammar", "'grammar' must be a string (GBNF), got %s", srv_json_type_name(v));
		return -1;
	}
	if (json_object_get_string_len(v) == 0)
		return 0;
	if (lim && srv_limits_check_grammar(lim, (size_t)json_object_get_string_len(v), e) != 0)
		return -1;
	struct alice_error aerr = {{0}};
	enum alice_status st = alice_grammar_parse(json_object_get_string(v), (size_t)json_object_get_string_len(v),
						   &r->grammar, &aerr, NULL);
	r->grammar_param = "grammar";
	if (st == ALICE_ERR_NOMEM) {
		srv_api_error_nomem(e);
		return -1;
	}
	if (st != ALICE_OK) {
		srv_api_error_invalid(e, "grammar", "invalid grammar: %s", aerr.msg);
		return -1;
	}
	return 0;
}

/* response_format: "text", "json_object" (any JSON object) or "json_schema"
 * (json_schema.schema). Both JSON modes become a compiled grammar. The
 * grammar-size cap is enforced while converting (a schema whose grammar
 * passes it stops there: 413), so conversion and compile are bounded by it. */
static int parse_response_format(struct json_object *o, struct srv_gen_request *r, const struct srv_limits *lim,
				 struct srv_api_error *e)
{
	const char *P = "response_format";
	struct json_object *v = field(o, P), *t, *js, *schema;
	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_object)) {
		srv_api_error_invalid(e, P, "'response_format' must be an object, got %s", srv_json_type_name(v));
		return -1;
	}
	t = field(v, "type");
	if (!t || !json_object_is_type(t, json_type_string)) {
		srv_api_error_invalid(e, P, "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
		return -1;
	}
	const char *type = json_object_get_string(t);
	if (strcmp(type, "text") == 0)
		return 0;
	struct alice_grammar *g = NULL;
	struct alice_error aerr = {{0}};
	enum alice_status st;
	if (strcmp(type, "json_object") == 0) {
		static const char any_object[] = "{\"type\":\"object\"}";
		st = alice_json_schema_text_to_grammar(any_object, sizeof(any_object) - 1, &g, &aerr);
	} else if (strcmp(type, "json_schema") == 0) {
		js = field(v, "json_schema");
		if (!js || !json_object_is_type(js, json_type_object)) {
			srv_api_error_invalid(e, P, "'response_format.json_schema' must be an object with a 'schema'");
			return -1;
		}
		schema = field(js, "schema");
		if (!schema || (!json_object_is_type(schema, json_type_object) &&
				!json_object_is_type(schema, json_type_boolean))) {
			srv_api_error_invalid(e, P, "'response_format.json_schema.schema' must be a JSON Schema object");
			return -1;
		}
		st = alice_json_schema_to_grammar_capped(
			schema, lim && lim->max_grammar_bytes > 0 ? (size_t)lim->max_grammar_bytes : 0, &g, &aerr);
	} else {
		srv_api_error_invalid(e, P, "response_format type '%.40s' is not supported; use text, json_object or json_schema",
				      type);
		return -1;
	}
	if (st != ALICE_OK) {
		if (st == ALICE_ERR_NOMEM)
			srv_api_error_nomem(e);
		else if (st == ALICE_ERR_RANGE)
			srv_api_error_set(e, 413, "invalid_request_error", "grammar_too_large", P,
					  "the grammar made from this JSON schema is larger than this server allows: "
					  "%lld bytes (--max-grammar-bytes)",
					  lim ? (long long)lim->max_grammar_bytes : 0LL);
		else
			srv_api_error_invalid(e, P, "unsupported or invalid JSON schema: %s", aerr.msg);
		return -1;
	}
	if (r->grammar) {
		alice_grammar_free(g);
		srv_api_error_invalid(e, P, "'grammar' and a JSON 'response_format' cannot be combined");
		return -1;
	}
	r->grammar = g;
	r->grammar_param = P;
	return 0;
}

/* chat_template_kwargs: an object merged into the chat template's context;
 * the keys the server sets itself are refused. */
static int parse_template_kwargs(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e)
{
	static const char P[] = "chat_template_kwargs";
	static const char *const reserved[] = {"messages", "add_generation_prompt", "bos_token", "eos_token"};
	struct json_object *v = field(o, P);
	if (!v)
		return 0;
	if (r->kind != SRV_KIND_CHAT) {
		srv_api_error_invalid(e, P, "'chat_template_kwargs' applies to /v1/chat/completions only");
		return -1;
	}
	if (!json_object_is_type(v, json_type_object)) {
		srv_api_error_invalid(e, P, "'chat_template_kwargs' must be an object, got %s", srv_json_type_name(v));
		return -1;
	}
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (json_object_object_get_ex(v, reserved[i], NULL)) {
			srv_api_error_invalid(e, P, "'chat_template_kwargs.%s' is set by the server and cannot be given",
					      reserved[i]);
			return -1;
		}
	r->chat_template_kwargs = json_object_get(v);
	return 0;
}

/* "speculative": true/false, and llama-server's flat "speculative.n_max",
 * "speculative.n_min", "speculative.p_min" (0 = the server's setting). */
static int parse_speculative(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e)
{
	bool on = true;
	if (srv_json_get_bool(o, "speculative", &on, e) < 0)
		return -1;
	r->no_spec = !on;
	if (get_int(o, "speculative.n_max", 0, ALICE_SPEC_MAX_DRAFT, &r->spec_n_max, e) < 0 ||
	    get_int(o, "speculative.n_min", 0, ALICE_SPEC_MAX_DRAFT, &r->spec_n_min, e) < 0 ||
	    get_float(o, "speculative.p_min", 0.0, 1.0, &r->spec_p_min, e) < 0)
		return -1;
	return 0;
}

static int parse_options(struct json_object *o, struct srv_gen_request *r, const struct srv_limits *lim,
			 struct srv_api_error *e)
{
	struct json_object *v;
	if ((v = field(o, "model"))) {
		if (!json_object_is_type(v, json_type_string)) {
			srv_api_error_invalid(e, "model", "'model' must be a string, got %s", srv_json_type_name(v));
			return -1;
		}
		if (!(r->model = dup_string(v, "model", "'model'", e)))
			return -1;
	}
	if (srv_json_get_bool(o, "stream", &r->stream, e) < 0)
		return -1;
	if ((v = field(o, "stream_options"))) {
		if (!json_object_is_type(v, json_type_object)) {
			srv_api_error_invalid(e, "stream_options", "'stream_options' must be an object, got %s",
					      srv_json_type_name(v));
			return -1;
		}
		if (!r->stream) {
			srv_api_error_invalid(e, "stream_options",
					      "'stream_options' is only allowed when 'stream' is true");
			return -1;
		}
		struct srv_api_error sub;
		if (srv_json_get_bool(v, "include_usage", &r->include_usage, &sub) < 0) {
			srv_api_error_invalid(e, "stream_options.include_usage",
					      "'stream_options.include_usage' must be a boolean");
			return -1;
		}
	}
	int st = get_int(o, "max_completion_tokens", 1, INT32_MAX, &r->max_tokens, e);
	if (st < 0 || (st == 0 && get_int(o, "max_tokens", 1, INT32_MAX, &r->max_tokens, e) < 0))
		return -1;
	struct alice_sampling_params *sp = &r->sampling;
	int64_t top_k = sp->top_k;
	if (get_float(o, "temperature", 0.0, 2.0, &sp->temperature, e) < 0 ||
	    get_float(o, "top_p", 0.0, 1.0, &sp->top_p, e) < 0 ||
	    get_float(o, "min_p", 0.0, 1.0, &sp->min_p, e) < 0 ||
	    get_int(o, "top_k", 0, INT32_MAX, &top_k, e) < 0 ||
	    get_float(o, "presence_penalty", -2.0, 2.0, &sp->presence_penalty, e) < 0 ||
	    get_float(o, "frequency_penalty", -2.0, 2.0, &sp->frequency_penalty, e) < 0 ||
	    get_float(o, "repeat_penalty", 0.0, 10.0, &sp->repeat_penalty, e) < 0 ||
	    get_int(o, "n", 1, SRV_MAX_N, &r->n, e) < 0)
		return -1;
	sp->top_k = (int32_t)top_k;
	if (sp->repeat_penalty == 0.0f) {
		srv_api_error_invalid(e, "repeat_penalty", "'repeat_penalty' must be greater than 0 (1 disables it)");
		return -1;
	}
	int64_t seed;
	st = get_int(o, "seed", INT64_MIN + 1, INT64_MAX - 1, &seed, e);
	if (st < 0)
		return -1;
	if (st > 0) {
		r->has_seed = true;
		sp->seed = (uint64_t)seed;
	}
	if (parse_stop(o, r, e) < 0 || parse_logit_bias(o, r, e) < 0 || parse_logprobs(o, r, e) < 0)
		return -1;
	if (r->kind == SRV_KIND_COMPLETION && srv_json_get_bool(o, "echo", &r->echo, e) < 0)
		return -1;
	if (srv_json_get_bool(o, "ignore_eos", &r->ignore_eos, e) < 0 || parse_speculative(o, r, e) < 0)
		return -1;
	if (parse_grammar(o, r, lim, e) < 0 || parse_template_kwargs(o, r, e) < 0)
		return -1;
	if (parse_response_format(o, r, lim, e) < 0)
		return -1;
	return r->kind == SRV_KIND_CHAT ? srv_openai_parse_tools(o, r, e) : 0;
}

int srv_openai_parse(enum srv_kind kind, const char *body, size_t len, const struct srv_limits *lim,
		     struct srv_gen_request *r, struct srv_api_error *e)
{
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->max_tokens = -1;
	alice_sampling_params_default(&r->sampling);
	r->n = 1;

	struct json_object *o = srv_json_parse_object(body, len, e);
	if (!o)
		return -1;
	int rc = kind == SRV_KIND_CHAT ? parse_messages(o, r, e) : parse_prompt(o, r, e);
	if (rc == 0)
		rc = parse_options(o, r, lim, e);
	if (rc == 0 && lim)
		rc = srv_limits_check(lim, r, e);
	json_object_put(o);
	if (rc != 0)
		srv_gen_request_clear(r);
	return rc;
}

void srv_gen_request_clear(struct srv_gen_request *r)
{
	if (!r)
		return;
	free(r->model);
	for (size_t i = 0; i < r->n_messages; i++) {
		free((char *)r->messages[i].role);
		free((char *)r->messages[i].content);
	}
	free(r->messages);
	for (size_t i = 0; r->parts && i < r->n_messages; i++)
		json_object_put(r->parts[i]);
	free(r->parts);
	for (size_t i = 0; r->extra && i < r->n_messages; i++)
		json_object_put(r->extra[i]);
	free(r->extra);
	json_object_put(r->tools);
	free(r->tool_name);
	json_object_put(r->chat_template_kwargs);
	for (size_t i = 0; i < r->n_prompts; i++) {
		free(r->prompts[i].text);
		free(r->prompts[i].tokens);
	}
	free(r->prompts);
	for (size_t i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r->logit_bias);
	alice_grammar_free(r->grammar);
	memset(r, 0, sizeof(*r));
}
