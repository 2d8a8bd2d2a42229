/* route_messages.c — POST /v1/messages and /v1/messages/count_tokens
 * (Anthropic's Messages API), translated onto the chat pipeline
 * (gen_api.h): `system` becomes a system message, `messages` (content as a
 * string or text / tool_use / tool_result blocks) the chat messages with
 * assistant tool calls and tool results, `stop_sequences` the stop strings,
 * `tools` / `tool_choice` the chat's. The result becomes a message object
 * or Anthropic's event stream (message_start, content_block_start, ping,
 * content_block_delta, content_block_stop, message_delta, message_stop), and
 * every error has Anthropic's shape {"type":"error","error":{type,message}}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_chat.h"
#include "chat_tmpl.h"
#include "gen.h"
#include "reply.h"
#include "routes.h"
#include "sse.h"

struct msg_state {
	char id[64];
	bool text_open; /* stream: the text block was started */
	size_t sent;    /* stream: bytes of its text sent */
	struct json_object *stops; /* the request's stop_sequences (reference), NULL none */
};

static void msg_free_state(void *p)
{
	struct msg_state *st = p;
	json_object_put(st->stops);
	free(st);
}

/* ---- request ---- */

/* Text of a string or of an array of text blocks (system, tool_result content). */
static int blocks_text(struct json_object *c, const char *param, const char *what, struct alice_sbuf *b,
		       struct srv_api_error *e)
{
	if (json_object_is_type(c, json_type_string)) {
		alice_sb_addn(b, json_object_get_string(c), (size_t)json_object_get_string_len(c));
		return 0;
	}
	if (!json_object_is_type(c, json_type_array)) {
		srv_api_error_invalid(e, param, "%s must be a string or an array of text blocks, got %s", what,
				      srv_json_type_name(c));
		return -1;
	}
	for (size_t j = 0; j < json_object_array_length(c); j++) {
		struct json_object *blk = json_object_array_get_idx(c, j), *t = api_field(blk, "type"),
				   *tx = api_field(blk, "text");
		if (!t || !json_object_is_type(t, json_type_string) || strcmp(json_object_get_string(t), "text") ||
		    !tx || !json_object_is_type(tx, json_type_string)) {
			srv_api_error_invalid(e, param, "%s[%zu] must be a text block {\"type\":\"text\",\"text\":...}",
					      what, j);
			return -1;
		}
		alice_sb_addn(b, json_object_get_string(tx), (size_t)json_object_get_string_len(tx));
	}
	return 0;
}

static const char *block_str(struct json_object *blk, const char *key, const char *what, struct srv_api_error *e)
{
	struct json_object *v = api_field(blk, key);
	if (!v || !json_object_is_type(v, json_type_string)) {
		srv_api_error_invalid(e, "messages", "%s.%s must be a string", what, key);
		return NULL;
	}
	return json_object_get_string(v);
}

/* One content block of a message: text joins *text; a tool_use joins calls
 * (they follow the turn's text); a tool_result becomes a tool message. */
static int add_block(struct json_object *chat_msgs, struct json_object *calls, bool assistant, struct json_object *blk,
		     const char *what, struct alice_sbuf *text, struct srv_api_error *e)
{
	struct json_object *t = api_field(blk, "type");
	const char *type = t && json_object_is_type(t, json_type_string) ? json_object_get_string(t) : NULL;
	if (!type) {
		srv_api_error_invalid(e, "messages", "%s.type must be a string", what);
		return -1;
	}
	if (!strcmp(type, "text")) {
		const char *s = block_str(blk, "text", what, e);
		if (!s)
			return -1;
		alice_sb_add(text, s);
		return 0;
	}
	if (!strcmp(type, "tool_use") && assistant) {
		const char *id = block_str(blk, "id", what, e), *name = id ? block_str(blk, "name", what, e) : NULL;
		struct json_object *input = api_field(blk, "input");
		if (!name)
			return -1;
		if (!input || !json_object_is_type(input, json_type_object)) {
			srv_api_error_invalid(e, "messages", "%s.input must be an object", what);
			return -1;
		}
		struct json_object *call = json_object_new_object();
		json_object_object_add(call, "id", json_object_new_string(id));
		json_object_object_add(call, "name", json_object_new_string(name));
		json_object_object_add(call, "arguments",
				       json_object_new_string(json_object_to_json_string_ext(input, JSON_C_TO_STRING_PLAIN)));
		json_object_array_add(calls, call);
		return 0;
	}
	if (!strcmp(type, "tool_result") && !assistant) {
		const char *id = block_str(blk, "tool_use_id", what, e);
		struct json_object *c = api_field(blk, "content");
		struct alice_sbuf b = {0};
		char w[80];
		snprintf(w, sizeof(w), "%s.content", what);
		if (!id || (c && blocks_text(c, "messages", w, &b, e) != 0)) {
			free(b.p);
			return -1;
		}
		api_add_tool_result(chat_msgs, id, b.p ? b.p : "", b.n);
		free(b.p);
		return 0;
	}
	if (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking"))
		return 0; /* another model's reasoning: nothing to render */
	srv_api_error_invalid(e, "messages", "%s: content block type '%.40s' is not supported in a%s message", what, type,
			      assistant ? "n assistant" : " user");
	return -1;
}

static int parse_messages(struct json_object *in, struct json_object *chat_msgs, struct srv_api_error *e)
{
	struct json_object *m = api_field(in, "messages");
	if (!m || !json_object_is_type(m, json_type_array) || json_object_array_length(m) == 0) {
		srv_api_error_invalid(e, "messages", "'messages' must be a non-empty array of messages");
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(m); i++) {
		struct json_object *msg = json_object_array_get_idx(m, i), *role = api_field(msg, "role"),
				   *c = api_field(msg, "content");
		const char *r = role && json_object_is_type(role, json_type_string) ? json_object_get_string(role) : "";
		if (strcmp(r, "user") && strcmp(r, "assistant")) {
			srv_api_error_invalid(e, "messages", "messages[%zu].role must be \"user\" or \"assistant\"", i);
			return -1;
		}
		bool assistant = r[0] == 'a';
		struct alice_sbuf text = {0};
		struct json_object *calls = json_object_new_array();
		if (c && json_object_is_type(c, json_type_string)) {
			alice_sb_addn(&text, json_object_get_string(c), (size_t)json_object_get_string_len(c));
		} else if (c && json_object_is_type(c, json_type_array)) {
			for (size_t j = 0; j < json_object_array_length(c); j++) {
				char what[64];
				snprintf(what, sizeof(what), "messages[%zu].content[%zu]", i, j);
				if (add_block(chat_msgs, calls, assistant, json_object_array_get_idx(c, j), what, &text, e) != 0) {
					free(text.p);
					json_object_put(calls);
					return -1;
				}
			}
		} else {
			srv_api_error_invalid(e, "messages", "messages[%zu].content must be a string or an array of blocks", i);
			json_object_put(calls);
			return -1;
		}
		/* a user turn of tool results alone adds no empty user message */
		bool only_results = !assistant && json_object_is_type(c, json_type_array) && text.n == 0 &&
				    json_object_array_length(c) > 0;
		if (!only_results)
			api_add_message(chat_msgs, r, text.p ? text.p : "", text.n);
		for (size_t k = 0; k < json_object_array_length(calls); k++) {
			struct json_object *call = json_object_array_get_idx(calls, k);
			api_add_tool_call(chat_msgs, json_object_get_string(api_field(call, "id")),
					  json_object_get_string(api_field(call, "name")),
					  json_object_get_string(api_field(call, "arguments")));
		}
		json_object_put(calls);
		bool oom = text.oom;
		free(text.p);
		if (oom) {
			srv_api_error_nomem(e);
			return -1;
		}
	}
	return 0;
}

static int parse_tools(struct json_object *in, struct json_object *chat, struct srv_api_error *e)
{
	struct json_object *v = api_field(in, "tools"), *tc = api_field(in, "tool_choice");
	if (v) {
		if (!json_object_is_type(v, json_type_array)) {
			srv_api_error_invalid(e, "tools", "'tools' must be an array, got %s", srv_json_type_name(v));
			return -1;
		}
		struct json_object *tools = json_object_new_array();
		json_object_object_add(chat, "tools", tools);
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			struct json_object *t = json_object_array_get_idx(v, i), *name = api_field(t, "name"),
					   *ty = api_field(t, "type"), *schema = api_field(t, "input_schema");
			if (ty && (!json_object_is_type(ty, json_type_string) || strcmp(json_object_get_string(ty), "custom"))) {
				srv_api_error_invalid(e, "tools", "tools[%zu]: only client tools (name, input_schema) are supported", i);
				return -1;
			}
			if (!name || !json_object_is_type(name, json_type_string) || !schema ||
			    !json_object_is_type(schema, json_type_object)) {
				srv_api_error_invalid(e, "tools", "tools[%zu] needs a string 'name' and an object 'input_schema'", i);
				return -1;
			}
			json_object_array_add(tools, api_function_tool(name, api_field(t, "description"), schema));
		}
	}
	if (!tc)
		return 0;
	struct json_object *ty = api_field(tc, "type");
	const char *type = ty && json_object_is_type(ty, json_type_string) ? json_object_get_string(ty) : "";
	if (!strcmp(type, "auto") || !strcmp(type, "none")) {
		json_object_object_add(chat, "tool_choice", json_object_new_string(type));
	} else if (!strcmp(type, "any")) {
		json_object_object_add(chat, "tool_choice", json_object_new_string("required"));
	} else if (!strcmp(type, "tool") && api_field(tc, "name") &&
		   json_object_is_type(api_field(tc, "name"), json_type_string)) {
		struct json_object *c = json_object_new_object(), *f = json_object_new_object();
		json_object_object_add(f, "name", json_object_get(api_field(tc, "name")));
		json_object_object_add(c, "type", json_object_new_string("function"));
		json_object_object_add(c, "function", f);
		json_object_object_add(chat, "tool_choice", c);
	} else {
		srv_api_error_invalid(e, "tool_choice",
				      "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\":\"tool\",\"name\":...}");
		return -1;
	}
	return 0;
}

/* The chat body; count: for count_tokens (max_tokens not required). */
static struct json_object *translate(struct json_object *in, bool count, struct msg_state *st,
				     struct srv_api_error *e)
{
	struct json_object *chat = json_object_new_object(), *msgs = json_object_new_array(), *v;
	json_object_object_add(chat, "messages", msgs);
	if ((v = api_field(in, "system"))) {
		struct alice_sbuf b = {0};
		int rc = blocks_text(v, "system", "'system'", &b, e);
		if (rc == 0)
			api_add_message(msgs, "system", b.p ? b.p : "", b.n);
		free(b.p);
		if (rc != 0)
			goto fail;
	}
	if (parse_messages(in, msgs, e) != 0 || parse_tools(in, chat, e) != 0)
		goto fail;
	if (!count && !api_field(in, "max_tokens")) {
		srv_api_error_invalid(e, "max_tokens", "'max_tokens' is required");
		goto fail;
	}
	if ((v = api_field(in, "stop_sequences"))) {
		if (!json_object_is_type(v, json_type_array)) {
			srv_api_error_invalid(e, "stop_sequences", "'stop_sequences' must be an array of strings");
			goto fail;
		}
		json_object_object_add(chat, "stop", json_object_get(v));
		if (st)
			st->stops = json_object_get(v);
	}
	if (!count) {
		api_copy(chat, in, "max_tokens", "max_tokens");
		api_copy(chat, in, "stream", "stream");
		api_copy(chat, in, "temperature", "temperature");
		api_copy(chat, in, "top_p", "top_p");
		api_copy(chat, in, "top_k", "top_k");
	}
	api_copy(chat, in, "model", "model");
	return chat;
fail:
	json_object_put(chat);
	return NULL;
}

static struct json_object *msg_translate(struct srv *s, struct json_object *in, void **state, struct srv_api_error *e)
{
	struct msg_state *st = calloc(1, sizeof(*st));
	(void)s;
	if (!st) {
		srv_api_error_nomem(e);
		return NULL;
	}
	*state = st;
	api_new_id(st->id, sizeof(st->id), "msg_");
	return translate(in, false, st, e);
}

static void msg_rename_error(struct srv_api_error *e)
{
	api_error_rename(e, "stop", "stop_sequences");
}

/* ---- response ---- */

/* stop_reason and stop_sequence (NULL when none). */
static const char *stop_reason(const struct srv_gen *g, const struct alice_chat_parsed *p, struct json_object **seq)
{
	const struct msg_state *st = g->api_state;
	const struct srv_choice *c = &g->choices[0];
	*seq = NULL;
	if (p->n_calls > 0)
		return "tool_use";
	if (c->finish == ALICE_ENGINE_FINISH_LENGTH)
		return "max_tokens";
	/* the plan's stops begin with the request's stop_sequences */
	if (st->stops && c->stop_index >= 0 && (size_t)c->stop_index < json_object_array_length(st->stops)) {
		*seq = json_object_get(json_object_array_get_idx(st->stops, (size_t)c->stop_index));
		return "stop_sequence";
	}
	return "end_turn";
}

static struct json_object *usage_json(const struct srv_gen *g, bool with_input)
{
	struct srv_request_counts c;
	gen_counts(g, &c);
	struct json_object *u = json_object_new_object();
	if (with_input) {
		json_object_object_add(u, "input_tokens", json_object_new_int64(c.prompt_tokens));
		json_object_object_add(u, "cache_creation_input_tokens", json_object_new_int64(0));
		json_object_object_add(u, "cache_read_input_tokens", json_object_new_int64(c.cached_tokens));
	}
	json_object_object_add(u, "output_tokens", json_object_new_int64(c.completion_tokens));
	return u;
}

static struct json_object *text_block(const char *text, size_t len)
{
	struct json_object *b = json_object_new_object();
	json_object_object_add(b, "type", json_object_new_string("text"));
	json_object_object_add(b, "text", json_object_new_string_len(text ? text : "", text ? (int)len : 0));
	return b;
}

/* Call i as a tool_use block; input: the arguments, or {} (stream start). */
static struct json_object *tool_use_block(const struct msg_state *st, size_t i, const struct alice_tool_call *tc,
					  bool with_input)
{
	char id[96];
	snprintf(id, sizeof(id), "toolu_%s_%zu", st->id + 4, i);
	struct json_object *b = json_object_new_object();
	json_object_object_add(b, "type", json_object_new_string("tool_use"));
	json_object_object_add(b, "id", json_object_new_string(id));
	json_object_object_add(b, "name", json_object_new_string(tc->name));
	json_object_object_add(b, "input", with_input ? api_arguments_object(tc->arguments) : json_object_new_object());
	return b;
}

/* The message object; p NULL: at the stream's start (no content, no stop reason). */
static struct json_object *message_json(const struct srv_gen *g, const struct alice_chat_parsed *p)
{
	const struct msg_state *st = g->api_state;
	struct json_object *o = json_object_new_object(), *content = json_object_new_array(), *seq = NULL;
	json_object_object_add(o, "id", json_object_new_string(st->id));
	json_object_object_add(o, "type", json_object_new_string("message"));
	json_object_object_add(o, "role", json_object_new_string("assistant"));
	json_object_object_add(o, "model", json_object_new_string(g->srv->model_id));
	if (p && (p->content.n > 0 || p->n_calls == 0))
		json_object_array_add(content, text_block(p->content.p, p->content.n));
	for (size_t i = 0; p && i < p->n_calls; i++)
		json_object_array_add(content, tool_use_block(st, i, &p->calls[i], true));
	json_object_object_add(o, "content", content);
	json_object_object_add(o, "stop_reason", p ? json_object_new_string(stop_reason(g, p, &seq)) : NULL);
	json_object_object_add(o, "stop_sequence", seq);
	if (p) {
		json_object_object_add(o, "usage", usage_json(g, true));
	} else {
		struct json_object *u = json_object_new_object();
		json_object_object_add(u, "input_tokens", json_object_new_int64(g->prompt_tokens));
		json_object_object_add(u, "output_tokens", json_object_new_int64(0));
		json_object_object_add(o, "usage", u);
	}
	return o;
}

static struct json_object *msg_body(struct srv_gen *g)
{
	struct alice_chat_parsed p;
	api_parse(g, &g->choices[0], false, &p);
	struct json_object *o = message_json(g, &p);
	alice_chat_parsed_clear(&p);
	return o;
}

static void emit(struct srv_gen *g, const char *type, struct json_object *o)
{
	if (g->http.req)
		srv_sse_send_event(g->http.req, type, o);
	json_object_put(o);
}

static struct json_object *ev_new(const char *type)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(type));
	return o;
}

static struct json_object *block_event(const char *type, int index)
{
	struct json_object *o = ev_new(type);
	json_object_object_add(o, "index", json_object_new_int(index));
	return o;
}

/* The text block (index 0) is opened once, before its first text. */
static void open_text(struct srv_gen *g)
{
	struct msg_state *st = g->api_state;
	if (st->text_open)
		return;
	st->text_open = true;
	struct json_object *o = block_event("content_block_start", 0);
	json_object_object_add(o, "content_block", text_block("", 0));
	emit(g, "content_block_start", o);
}

static void send_delta(struct srv_gen *g, const char *text, size_t len)
{
	open_text(g);
	struct json_object *o = block_event("content_block_delta", 0), *d = json_object_new_object();
	json_object_object_add(d, "type", json_object_new_string("text_delta"));
	json_object_object_add(d, "text", json_object_new_string_len(text, (int)len));
	json_object_object_add(o, "delta", d);
	emit(g, "content_block_delta", o);
}

static void send_fresh(struct srv_gen *g, const struct alice_chat_parsed *p)
{
	struct msg_state *st = g->api_state;
	const char *s;
	size_t n;
	if (api_fresh(p, &st->sent, &s, &n))
		send_delta(g, s, n);
}

static void msg_stream_start(struct srv_gen *g)
{
	struct json_object *o = ev_new("message_start");
	json_object_object_add(o, "message", message_json(g, NULL));
	emit(g, "message_start", o);
	if (!g->parse) /* plain text: its block opens at once (with tools: at its first text) */
		open_text(g);
	emit(g, "ping", ev_new("ping"));
}

static void msg_stream_text(struct srv_gen *g, const char *text, size_t len)
{
	struct msg_state *st = g->api_state;
	struct alice_chat_parsed p;
	if (!g->parse) {
		send_delta(g, text, len);
		st->sent += len;
		return;
	}
	api_parse(g, &g->choices[0], true, &p);
	send_fresh(g, &p);
	alice_chat_parsed_clear(&p);
}

static void msg_stream_end(struct srv_gen *g, const struct srv_api_error *failed)
{
	struct msg_state *st = g->api_state;
	if (failed) {
		emit(g, "error", srv_anthropic_error_json(failed));
		return;
	}
	struct alice_chat_parsed p;
	api_parse(g, &g->choices[0], false, &p);
	send_fresh(g, &p);
	int index = 0;
	if (st->text_open || p.n_calls == 0) {
		open_text(g);
		emit(g, "content_block_stop", block_event("content_block_stop", 0));
		index = 1;
	}
	for (size_t i = 0; i < p.n_calls; i++, index++) {
		struct json_object *o = block_event("content_block_start", index), *d = json_object_new_object();
		json_object_object_add(o, "content_block", tool_use_block(st, i, &p.calls[i], false));
		emit(g, "content_block_start", o);
		o = block_event("content_block_delta", index);
		json_object_object_add(d, "type", json_object_new_string("input_json_delta"));
		json_object_object_add(d, "partial_json", json_object_new_string(p.calls[i].arguments));
		json_object_object_add(o, "delta", d);
		emit(g, "content_block_delta", o);
		emit(g, "content_block_stop", block_event("content_block_stop", index));
	}
	struct json_object *o = ev_new("message_delta"), *d = json_object_new_object(), *seq = NULL;
	json_object_object_add(d, "stop_reason", json_object_new_string(stop_reason(g, &p, &seq)));
	json_object_object_add(d, "stop_sequence", seq);
	json_object_object_add(o, "delta", d);
	json_object_object_add(o, "usage", usage_json(g, false));
	emit(g, "message_delta", o);
	emit(g, "message_stop", ev_new("message_stop"));
	alice_chat_parsed_clear(&p);
}

static const struct gen_api messages_api = {
	.translate = msg_translate,
	.free_state = msg_free_state,
	.rename_error = msg_rename_error,
	.stream_start = msg_stream_start,
	.stream_text = msg_stream_text,
	.stream_end = msg_stream_end,
	.body = msg_body,
};

void srv_route_messages(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	srv_gen_handle_api(s, h, &messages_api, body, len);
}

/* count_tokens: the prompt the same request would be tokenized to. */
void srv_route_count_tokens(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	struct srv_api_error e;
	struct srv_gen_request r;
	struct json_object *in = srv_json_parse_object(body, len, &e), *chat = in ? translate(in, true, NULL, &e) : NULL;
	json_object_put(in);
	if (!chat) {
		srv_reply_error(h, &e);
		return;
	}
	size_t n = 0;
	const char *text = json_object_to_json_string_length(chat, JSON_C_TO_STRING_PLAIN, &n);
	int rc = srv_openai_parse(SRV_KIND_CHAT, text, n, &s->cfg.limits, &r, &e);
	json_object_put(chat);
	if (rc != 0) {
		msg_rename_error(&e);
		srv_reply_error(h, &e);
		return;
	}
	int32_t *tokens = NULL;
	size_t n_tokens = 0;
	bool think_open = false;
	rc = srv_chat_prompt(s, &r, &tokens, &n_tokens, &think_open, &e);
	srv_gen_request_clear(&r);
	free(tokens);
	if (rc != 0) {
		srv_reply_error(h, &e);
		return;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "input_tokens", json_object_new_int64((int64_t)n_tokens));
	srv_reply_json(h, 200, o);
}
