/* route_responses.c — POST /v1/responses (OpenAI's Responses API) and
 * GET /v1/responses/{id}, translated onto the chat pipeline (gen_api.h):
 * `instructions` becomes a system message, `input` (a string, or message,
 * function_call and function_call_output items) the chat messages after the
 * conversation of `previous_response_id`, `max_output_tokens` max_tokens,
 * `text.format` the response_format (a JSON schema goes through the same
 * schema -> grammar path), `tools` / `tool_choice` the chat's. The result
 * becomes a response object, or the documented stream of named events
 * (response.created ... response.completed). A response is stored
 * (responses_store.h) unless `store` is false. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_chat.h"
#include "gen.h"
#include "reply.h"
#include "responses_store.h"
#include "routes.h"
#include "sse.h"

struct resp_state {
	char id[64], msg_id[64];
	int64_t created;
	bool store;
	int64_t seq;                 /* stream events' sequence_number */
	bool msg_open;               /* stream: the message item was announced */
	size_t sent;                 /* stream: bytes of its text sent */
	struct json_object *echo;    /* request fields every response object repeats */
	struct json_object *history; /* the conversation's chat messages (no instructions) */
};

static void resp_free_state(void *p)
{
	struct resp_state *st = p;
	json_object_put(st->echo);
	json_object_put(st->history);
	free(st);
}

/* ---- request ---- */

/* The text of a message's content: a string, or input_text / output_text
 * parts joined. */
static int content_text(struct json_object *c, const char *what, struct alice_sbuf *b, struct srv_api_error *e)
{
	if (json_object_is_type(c, json_type_string)) {
		alice_sb_addn(b, json_object_get_string(c), (size_t)json_object_get_string_len(c));
		return 0;
	}
	if (!json_object_is_type(c, json_type_array)) {
		srv_api_error_invalid(e, "input", "%s must be a string or an array of content parts, got %s", what,
				      srv_json_type_name(c));
		return -1;
	}
	for (size_t j = 0; j < json_object_array_length(c); j++) {
		struct json_object *p = json_object_array_get_idx(c, j);
		struct json_object *t = api_field(p, "type"), *tx = api_field(p, "text");
		const char *ts = t && json_object_is_type(t, json_type_string) ? json_object_get_string(t) : "";
		if (!strcmp(ts, "refusal"))
			tx = api_field(p, "refusal");
		else if (strcmp(ts, "input_text") && strcmp(ts, "output_text") && strcmp(ts, "text")) {
			srv_api_error_invalid(e, "input",
					      "%s[%zu]: content part type '%.40s' is not supported; use input_text", what,
					      j, ts);
			return -1;
		}
		if (!tx || !json_object_is_type(tx, json_type_string)) {
			srv_api_error_invalid(e, "input", "%s[%zu].text must be a string", what, j);
			return -1;
		}
		alice_sb_addn(b, json_object_get_string(tx), (size_t)json_object_get_string_len(tx));
	}
	return 0;
}

static const char *str_member(struct json_object *it, const char *key, size_t i, const char *type,
			      struct srv_api_error *e)
{
	struct json_object *v = api_field(it, key);
	if (!v || !json_object_is_type(v, json_type_string)) {
		srv_api_error_invalid(e, "input", "input[%zu] (%s): '%s' must be a string", i, type, key);
		return NULL;
	}
	return json_object_get_string(v);
}

/* One input item onto the chat messages. */
static int add_item(struct json_object *hist, struct json_object *it, size_t i, struct srv_api_error *e)
{
	char what[48];
	snprintf(what, sizeof(what), "input[%zu].content", i);
	if (!json_object_is_type(it, json_type_object)) {
		srv_api_error_invalid(e, "input", "input[%zu] must be an object, got %s", i, srv_json_type_name(it));
		return -1;
	}
	struct json_object *t = api_field(it, "type");
	const char *type = t && json_object_is_type(t, json_type_string) ? json_object_get_string(t) : NULL;
	if (t && !type) {
		srv_api_error_invalid(e, "input", "input[%zu].type must be a string", i);
		return -1;
	}
	if (!type || !strcmp(type, "message")) {
		const char *role = str_member(it, "role", i, "message", e);
		if (!role)
			return -1;
		if (!strcmp(role, "developer"))
			role = "system";
		if (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system")) {
			srv_api_error_invalid(e, "input", "input[%zu].role '%.40s' is not supported; use user, assistant, system or developer",
					      i, role);
			return -1;
		}
		struct json_object *c = api_field(it, "content");
		struct alice_sbuf b = {0};
		if (!c) {
			srv_api_error_invalid(e, "input", "%s is required", what);
			return -1;
		}
		if (content_text(c, what, &b, e) != 0) {
			free(b.p);
			return -1;
		}
		api_add_message(hist, role, b.p ? b.p : "", b.n);
		free(b.p);
		return b.oom ? (srv_api_error_nomem(e), -1) : 0;
	}
	if (!strcmp(type, "function_call")) {
		const char *id = str_member(it, "call_id", i, type, e), *name, *args;
		if (!id || !(name = str_member(it, "name", i, type, e)) || !(args = str_member(it, "arguments", i, type, e)))
			return -1;
		api_add_tool_call(hist, id, name, args);
		return 0;
	}
	if (!strcmp(type, "function_call_output")) {
		const char *id = str_member(it, "call_id", i, type, e);
		struct json_object *out = api_field(it, "output");
		struct alice_sbuf b = {0};
		if (!id)
			return -1;
		snprintf(what, sizeof(what), "input[%zu].output", i);
		if (!out || content_text(out, what, &b, e) != 0) {
			if (!out)
				srv_api_error_invalid(e, "input", "%s is required", what);
			free(b.p);
			return -1;
		}
		api_add_tool_result(hist, id, b.p ? b.p : "", b.n);
		free(b.p);
		return 0;
	}
	if (!strcmp(type, "reasoning")) /* another model's reasoning: nothing to render */
		return 0;
	srv_api_error_invalid(e, "input", "input[%zu]: item type '%.40s' is not supported; use message, function_call or function_call_output",
			      i, type);
	return -1;
}

static int parse_input(struct json_object *in, struct resp_state *st, struct srv_api_error *e)
{
	struct json_object *v = api_field(in, "input");
	if (!v) {
		srv_api_error_invalid(e, "input", "'input' is required");
		return -1;
	}
	if (json_object_is_type(v, json_type_string)) {
		api_add_message(st->history, "user", json_object_get_string(v), (size_t)json_object_get_string_len(v));
		return 0;
	}
	if (!json_object_is_type(v, json_type_array)) {
		srv_api_error_invalid(e, "input", "'input' must be a string or an array of items, got %s",
				      srv_json_type_name(v));
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(v); i++)
		if (add_item(st->history, json_object_array_get_idx(v, i), i, e) != 0)
			return -1;
	return 0;
}

/* tools: function tools {type, name, description, parameters, strict}. */
static int parse_tools(struct json_object *in, struct json_object *chat, struct srv_api_error *e)
{
	struct json_object *v = api_field(in, "tools");
	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_array)) {
		srv_api_error_invalid(e, "tools", "'tools' must be an array, got %s", srv_json_type_name(v));
		return -1;
	}
	struct json_object *tools = json_object_new_array();
	json_object_object_add(chat, "tools", tools);
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		struct json_object *t = json_object_array_get_idx(v, i), *ty = api_field(t, "type"),
				   *name = api_field(t, "name");
		if (!ty || !json_object_is_type(ty, json_type_string) || strcmp(json_object_get_string(ty), "function")) {
			srv_api_error_invalid(e, "tools", "tools[%zu]: only tools of type 'function' are supported", i);
			return -1;
		}
		if (!name || !json_object_is_type(name, json_type_string)) {
			srv_api_error_invalid(e, "tools", "tools[%zu].name must be a string", i);
			return -1;
		}
		json_object_array_add(tools, api_function_tool(name, api_field(t, "description"), api_field(t, "parameters")));
	}
	struct json_object *tc = api_field(in, "tool_choice");
	if (!tc)
		return 0;
	if (json_object_is_type(tc, json_type_string)) {
		const char *c = json_object_get_string(tc);
		if (strcmp(c, "auto") && strcmp(c, "none") && strcmp(c, "required")) {
			srv_api_error_invalid(e, "tool_choice", "'tool_choice' must be auto, none, required or a function");
			return -1;
		}
		json_object_object_add(chat, "tool_choice", json_object_get(tc));
		return 0;
	}
	struct json_object *name = api_field(tc, "name");
	if (!name || !json_object_is_type(name, json_type_string)) {
		srv_api_error_invalid(e, "tool_choice", "'tool_choice' must be auto, none, required or {\"type\":\"function\",\"name\":...}");
		return -1;
	}
	struct json_object *c = json_object_new_object(), *f = json_object_new_object();
	json_object_object_add(f, "name", json_object_get(name));
	json_object_object_add(c, "type", json_object_new_string("function"));
	json_object_object_add(c, "function", f);
	json_object_object_add(chat, "tool_choice", c);
	return 0;
}

/* text.format: {type: text | json_object | json_schema (name, schema)}. */
static int parse_text_format(struct json_object *in, struct json_object *chat, struct srv_api_error *e)
{
	struct json_object *f = api_field(api_field(in, "text"), "format"), *t;
	if (!f)
		return 0;
	t = api_field(f, "type");
	if (!t || !json_object_is_type(t, json_type_string)) {
		srv_api_error_invalid(e, "text.format", "'text.format.type' must be text, json_object or json_schema");
		return -1;
	}
	const char *type = json_object_get_string(t);
	struct json_object *rf = json_object_new_object();
	json_object_object_add(chat, "response_format", rf);
	json_object_object_add(rf, "type", json_object_get(t));
	if (!strcmp(type, "json_schema")) {
		struct json_object *js = json_object_new_object();
		api_copy(js, f, "name", "name");
		api_copy(js, f, "schema", "schema");
		json_object_object_add(rf, "json_schema", js);
	}
	return 0;
}

static int get_string_or_null(struct json_object *in, const char *key, struct srv_api_error *e)
{
	struct json_object *v = api_field(in, key);
	if (v && !json_object_is_type(v, json_type_string)) {
		srv_api_error_invalid(e, key, "'%s' must be a string, got %s", key, srv_json_type_name(v));
		return -1;
	}
	return 0;
}

/* The request fields a response object repeats, with the API's defaults. */
static struct json_object *echo_fields(struct json_object *in)
{
	struct json_object *o = json_object_new_object(), *v;
	static const char *const keys[] = {"instructions", "max_output_tokens", "previous_response_id"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		json_object_object_add(o, keys[i], json_object_get(api_field(in, keys[i])));
	v = api_field(in, "parallel_tool_calls"); /* the chat route's default: false */
	json_object_object_add(o, "parallel_tool_calls", v ? json_object_get(v) : json_object_new_boolean(0));
	v = api_field(in, "temperature");
	json_object_object_add(o, "temperature", v ? json_object_get(v) : json_object_new_double(1.0));
	v = api_field(in, "top_p");
	json_object_object_add(o, "top_p", v ? json_object_get(v) : json_object_new_double(1.0));
	v = api_field(in, "text");
	if (v && api_field(v, "format"))
		json_object_object_add(o, "text", json_object_get(v));
	else
		json_object_object_add(o, "text", json_tokener_parse("{\"format\":{\"type\":\"text\"}}"));
	v = api_field(in, "tool_choice");
	json_object_object_add(o, "tool_choice", v ? json_object_get(v) : json_object_new_string("auto"));
	v = api_field(in, "tools");
	json_object_object_add(o, "tools", v ? json_object_get(v) : json_object_new_array());
	v = api_field(in, "metadata");
	json_object_object_add(o, "metadata", v ? json_object_get(v) : json_object_new_object());
	return o;
}

static struct json_object *resp_translate(struct srv *s, struct json_object *in, void **state,
					  struct srv_api_error *e)
{
	struct resp_state *st = calloc(1, sizeof(*st));
	if (!st) {
		srv_api_error_nomem(e);
		return NULL;
	}
	*state = st;
	api_new_id(st->id, sizeof(st->id), "resp_");
	api_new_id(st->msg_id, sizeof(st->msg_id), "msg_");
	st->created = (int64_t)time(NULL);
	st->store = true;
	if (srv_json_get_bool(in, "store", &st->store, e) < 0 || get_string_or_null(in, "instructions", e) < 0 ||
	    get_string_or_null(in, "previous_response_id", e) < 0)
		return NULL;
	struct json_object *chat = json_object_new_object(), *messages = json_object_new_array(), *v;
	json_object_object_add(chat, "messages", messages);
	if ((v = api_field(in, "previous_response_id"))) {
		const char *id = json_object_get_string(v);
		if (!srv_responses_store_get(s->responses, id, NULL, &st->history)) {
			srv_api_error_set(e, 400, "invalid_request_error", "previous_response_not_found",
					  "previous_response_id", "Previous response with id '%.80s' not found.", id);
			goto fail;
		}
		if (!st->history) {
			srv_api_error_nomem(e);
			goto fail;
		}
	} else {
		st->history = json_object_new_array();
	}
	if (parse_input(in, st, e) != 0 || parse_tools(in, chat, e) != 0 || parse_text_format(in, chat, e) != 0)
		goto fail;
	if ((v = api_field(in, "instructions")))
		api_add_message(messages, "system", json_object_get_string(v), (size_t)json_object_get_string_len(v));
	for (size_t i = 0; i < json_object_array_length(st->history); i++)
		json_object_array_add(messages, json_object_get(json_object_array_get_idx(st->history, i)));
	api_copy(chat, in, "model", "model");
	api_copy(chat, in, "stream", "stream");
	api_copy(chat, in, "max_output_tokens", "max_tokens");
	api_copy(chat, in, "temperature", "temperature");
	api_copy(chat, in, "top_p", "top_p");
	api_copy(chat, in, "top_k", "top_k");
	api_copy(chat, in, "seed", "seed");
	api_copy(chat, in, "parallel_tool_calls", "parallel_tool_calls");
	st->echo = echo_fields(in);
	return chat;
fail:
	json_object_put(chat);
	return NULL;
}

static void resp_rename_error(struct srv_api_error *e)
{
	api_error_rename(e, "max_tokens", "max_output_tokens");
	api_error_rename(e, "messages", "input");
	api_error_rename(e, "response_format", "text.format");
}

/* ---- response ---- */

static bool incomplete(const struct srv_gen *g)
{
	return g->choices[0].finish == ALICE_ENGINE_FINISH_LENGTH;
}

static struct json_object *usage_json(const struct srv_gen *g)
{
	struct srv_request_counts c;
	gen_counts(g, &c);
	struct json_object *u = json_object_new_object(), *d = json_object_new_object(), *od = json_object_new_object();
	json_object_object_add(u, "input_tokens", json_object_new_int64(c.prompt_tokens));
	json_object_object_add(d, "cached_tokens", json_object_new_int64(c.cached_tokens));
	json_object_object_add(u, "input_tokens_details", d);
	json_object_object_add(u, "output_tokens", json_object_new_int64(c.completion_tokens));
	json_object_object_add(od, "reasoning_tokens", json_object_new_int64(0));
	json_object_object_add(u, "output_tokens_details", od);
	json_object_object_add(u, "total_tokens", json_object_new_int64(c.prompt_tokens + c.completion_tokens));
	return u;
}

static struct json_object *text_part(const char *text, size_t len)
{
	struct json_object *p = json_object_new_object();
	json_object_object_add(p, "type", json_object_new_string("output_text"));
	json_object_object_add(p, "text", json_object_new_string_len(text ? text : "", text ? (int)len : 0));
	json_object_object_add(p, "annotations", json_object_new_array());
	return p;
}

/* The assistant's message item; with_part false: still empty (in progress). */
static struct json_object *message_item(const struct resp_state *st, const char *status, const char *text,
					size_t len, bool with_part)
{
	struct json_object *m = json_object_new_object(), *content = json_object_new_array();
	json_object_object_add(m, "id", json_object_new_string(st->msg_id));
	json_object_object_add(m, "type", json_object_new_string("message"));
	json_object_object_add(m, "status", json_object_new_string(status));
	json_object_object_add(m, "role", json_object_new_string("assistant"));
	if (with_part)
		json_object_array_add(content, text_part(text, len));
	json_object_object_add(m, "content", content);
	return m;
}

/* Call i's ids: "call_" / "fc_" and the response's own hex, so the stream
 * and the stored response name them alike. */
static void call_ids(const struct resp_state *st, size_t i, char *call_id, char *item_id, size_t cap)
{
	snprintf(call_id, cap, "call_%s_%zu", st->id + 5, i);
	snprintf(item_id, cap, "fc_%s_%zu", st->id + 5, i);
}

static struct json_object *call_item(const struct resp_state *st, size_t i, const struct alice_tool_call *tc,
				     const char *status, bool with_arguments)
{
	char call_id[96], item_id[96];
	call_ids(st, i, call_id, item_id, sizeof(call_id));
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(item_id));
	json_object_object_add(o, "type", json_object_new_string("function_call"));
	json_object_object_add(o, "status", json_object_new_string(status));
	json_object_object_add(o, "call_id", json_object_new_string(call_id));
	json_object_object_add(o, "name", json_object_new_string(tc->name));
	json_object_object_add(o, "arguments", json_object_new_string(with_arguments ? tc->arguments : ""));
	return o;
}

/* Whether the output has a message item: text, or no call (an empty answer). */
static bool has_message(const struct alice_chat_parsed *p)
{
	return p->content.n > 0 || p->n_calls == 0;
}

/* A response object: status "in_progress" (p NULL: no output, no usage yet),
 * "completed" / "incomplete" (p: the parsed output), or "failed" (err). */
static struct json_object *response_json(const struct srv_gen *g, const char *status, const struct srv_api_error *err,
					 const struct alice_chat_parsed *p)
{
	const struct resp_state *st = g->api_state;
	struct json_object *o = json_object_new_object(), *out = json_object_new_array();
	json_object_object_add(o, "id", json_object_new_string(st->id));
	json_object_object_add(o, "object", json_object_new_string("response"));
	json_object_object_add(o, "created_at", json_object_new_int64(st->created));
	json_object_object_add(o, "status", json_object_new_string(status));
	struct json_object *eo = NULL, *inc = NULL;
	if (err) {
		eo = json_object_new_object();
		json_object_object_add(eo, "code", json_object_new_string(err->status >= 500 ? "server_error" : "invalid_prompt"));
		json_object_object_add(eo, "message", json_object_new_string(err->message));
	}
	json_object_object_add(o, "error", eo);
	if (!strcmp(status, "incomplete")) {
		inc = json_object_new_object();
		json_object_object_add(inc, "reason", json_object_new_string("max_output_tokens"));
	}
	json_object_object_add(o, "incomplete_details", inc);
	json_object_object_add(o, "model", json_object_new_string(g->srv->model_id));
	if (p && has_message(p))
		json_object_array_add(out, message_item(st, status, p->content.p, p->content.n, true));
	for (size_t i = 0; p && i < p->n_calls; i++)
		json_object_array_add(out, call_item(st, i, &p->calls[i], "completed", true));
	json_object_object_add(o, "output", out);
	json_object_object_foreach(st->echo, k, v) json_object_object_add(o, k, json_object_get(v));
	json_object_object_add(o, "store", json_object_new_boolean(st->store));
	json_object_object_add(o, "usage", p ? usage_json(g) : NULL);
	return o;
}

/* The finished response: stored (unless store: false) with its conversation
 * (the answer as an assistant message with its tool calls). */
static struct json_object *finish_response(struct srv_gen *g, const struct alice_chat_parsed *p)
{
	struct resp_state *st = g->api_state;
	struct json_object *o = response_json(g, incomplete(g) ? "incomplete" : "completed", NULL, p);
	if (st->store) {
		api_add_message(st->history, "assistant", p->content.p ? p->content.p : "", p->content.n);
		for (size_t i = 0; i < p->n_calls; i++) {
			char call_id[96], item_id[96];
			call_ids(st, i, call_id, item_id, sizeof(call_id));
			api_add_tool_call(st->history, call_id, p->calls[i].name, p->calls[i].arguments);
		}
		srv_responses_store_put(g->srv->responses, st->id, o, st->history);
	}
	return o;
}

static struct json_object *resp_body(struct srv_gen *g)
{
	struct alice_chat_parsed p;
	api_parse(g, &g->choices[0], false, &p);
	struct json_object *o = finish_response(g, &p);
	alice_chat_parsed_clear(&p);
	return o;
}

/* ---- stream ---- */

static struct json_object *ev_new(const char *type)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(type));
	return o;
}

static void emit(struct srv_gen *g, struct json_object *o)
{
	struct resp_state *st = g->api_state;
	struct json_object *t = api_field(o, "type");
	json_object_object_add(o, "sequence_number", json_object_new_int64(st->seq++));
	if (g->http.req)
		srv_sse_send_event(g->http.req, json_object_get_string(t), o);
	json_object_put(o);
}

static void emit_response(struct srv_gen *g, const char *type, struct json_object *response)
{
	struct json_object *o = ev_new(type);
	json_object_object_add(o, "response", response);
	emit(g, o);
}

/* Fields of the events about one output item (content_index: of its text part). */
static struct json_object *item_event(const char *type, const char *item_id, int output_index, bool content_index)
{
	struct json_object *o = ev_new(type);
	json_object_object_add(o, "item_id", json_object_new_string(item_id));
	json_object_object_add(o, "output_index", json_object_new_int(output_index));
	if (content_index)
		json_object_object_add(o, "content_index", json_object_new_int(0));
	return o;
}

/* The message item and its text part are announced (once, before its first text). */
static void open_message(struct srv_gen *g)
{
	struct resp_state *st = g->api_state;
	if (st->msg_open)
		return;
	st->msg_open = true;
	struct json_object *o = ev_new("response.output_item.added");
	json_object_object_add(o, "output_index", json_object_new_int(0));
	json_object_object_add(o, "item", message_item(st, "in_progress", NULL, 0, false));
	emit(g, o);
	o = item_event("response.content_part.added", st->msg_id, 0, true);
	json_object_object_add(o, "part", text_part("", 0));
	emit(g, o);
}

static void send_delta(struct srv_gen *g, const char *s, size_t n)
{
	struct resp_state *st = g->api_state;
	open_message(g);
	struct json_object *o = item_event("response.output_text.delta", st->msg_id, 0, true);
	json_object_object_add(o, "delta", json_object_new_string_len(s, (int)n));
	json_object_object_add(o, "logprobs", json_object_new_array());
	emit(g, o);
}

/* Send the text of p past what was sent. */
static void send_fresh(struct srv_gen *g, const struct alice_chat_parsed *p)
{
	struct resp_state *st = g->api_state;
	const char *s;
	size_t n;
	if (api_fresh(p, &st->sent, &s, &n))
		send_delta(g, s, n);
}

static void resp_stream_start(struct srv_gen *g)
{
	emit_response(g, "response.created", response_json(g, "in_progress", NULL, NULL));
	emit_response(g, "response.in_progress", response_json(g, "in_progress", NULL, NULL));
	if (!g->parse) /* plain text: the message opens at once */
		open_message(g);
}

static void resp_stream_text(struct srv_gen *g, const char *text, size_t len)
{
	struct resp_state *st = g->api_state;
	struct alice_chat_parsed p;
	if (!g->parse) { /* the text as it comes */
		send_delta(g, text, len);
		st->sent += len;
		return;
	}
	api_parse(g, &g->choices[0], true, &p); /* the text so far, in c->text */
	send_fresh(g, &p);
	alice_chat_parsed_clear(&p);
}

static void resp_stream_end(struct srv_gen *g, const struct srv_api_error *failed)
{
	struct resp_state *st = g->api_state;
	if (failed) {
		emit_response(g, "response.failed", response_json(g, "failed", failed, NULL));
		return;
	}
	const char *status = incomplete(g) ? "incomplete" : "completed";
	struct alice_chat_parsed p;
	api_parse(g, &g->choices[0], false, &p);
	send_fresh(g, &p);
	int index = 0;
	if (st->msg_open || has_message(&p)) {
		open_message(g);
		struct json_object *o = item_event("response.output_text.done", st->msg_id, 0, true);
		json_object_object_add(o, "text", json_object_new_string_len(p.content.p ? p.content.p : "", (int)p.content.n));
		json_object_object_add(o, "logprobs", json_object_new_array());
		emit(g, o);
		o = item_event("response.content_part.done", st->msg_id, 0, true);
		json_object_object_add(o, "part", text_part(p.content.p, p.content.n));
		emit(g, o);
		o = ev_new("response.output_item.done");
		json_object_object_add(o, "output_index", json_object_new_int(0));
		json_object_object_add(o, "item", message_item(st, status, p.content.p, p.content.n, true));
		emit(g, o);
		index = 1;
	}
	for (size_t i = 0; i < p.n_calls; i++, index++) {
		char call_id[96], item_id[96];
		call_ids(st, i, call_id, item_id, sizeof(call_id));
		struct json_object *o = ev_new("response.output_item.added");
		json_object_object_add(o, "output_index", json_object_new_int(index));
		json_object_object_add(o, "item", call_item(st, i, &p.calls[i], "in_progress", false));
		emit(g, o);
		o = item_event("response.function_call_arguments.delta", item_id, index, false);
		json_object_object_add(o, "delta", json_object_new_string(p.calls[i].arguments));
		emit(g, o);
		o = item_event("response.function_call_arguments.done", item_id, index, false);
		json_object_object_add(o, "arguments", json_object_new_string(p.calls[i].arguments));
		emit(g, o);
		o = ev_new("response.output_item.done");
		json_object_object_add(o, "output_index", json_object_new_int(index));
		json_object_object_add(o, "item", call_item(st, i, &p.calls[i], "completed", true));
		emit(g, o);
	}
	emit_response(g, incomplete(g) ? "response.incomplete" : "response.completed", finish_response(g, &p));
	alice_chat_parsed_clear(&p);
}

static const struct gen_api responses_api = {
	.translate = resp_translate,
	.free_state = resp_free_state,
	.rename_error = resp_rename_error,
	.stream_start = resp_stream_start,
	.stream_text = resp_stream_text,
	.stream_end = resp_stream_end,
	.body = resp_body,
};

void srv_route_responses(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	srv_gen_handle_api(s, h, &responses_api, body, len);
}

void srv_route_response_get(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	const char *id = h->path + strlen("/v1/responses/");
	struct json_object *o = NULL;
	(void)body;
	(void)len;
	if (!srv_responses_store_get(s->responses, id, &o, NULL)) {
		struct srv_api_error e;
		srv_api_error_set(&e, 404, "invalid_request_error", "not_found", NULL,
				  "Response with id '%.80s' not found.", id);
		srv_reply_error(h, &e);
		return;
	}
	if (!o) {
		srv_reply_nomem(h);
		return;
	}
	srv_reply_json(h, 200, o);
}
