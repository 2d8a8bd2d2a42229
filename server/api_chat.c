/* api_chat.c — shared pieces of the API translators (see api_chat.h). */
#include "api_chat.h"

#include <stdio.h>
#include <string.h>

#include "gen.h"

struct json_object *api_field(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;
	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

void api_copy(struct json_object *out, struct json_object *in, const char *from, const char *to)
{
	struct json_object *v = api_field(in, from);
	if (v)
		json_object_object_add(out, to, json_object_get(v));
}

void api_add_message(struct json_object *messages, const char *role, const char *content, size_t len)
{
	struct json_object *m = json_object_new_object();
	json_object_object_add(m, "role", json_object_new_string(role));
	json_object_object_add(m, "content", json_object_new_string_len(content, (int)len));
	json_object_array_add(messages, m);
}

void api_add_tool_call(struct json_object *messages, const char *id, const char *name, const char *arguments)
{
	size_t n = json_object_array_length(messages);
	struct json_object *last = n ? json_object_array_get_idx(messages, n - 1) : NULL, *role, *calls;
	struct json_object *m = NULL;
	if (last && json_object_object_get_ex(last, "role", &role) &&
	    strcmp(json_object_get_string(role), "assistant") == 0)
		m = last;
	if (!m) {
		m = json_object_new_object();
		json_object_object_add(m, "role", json_object_new_string("assistant"));
		json_object_object_add(m, "content", NULL);
		json_object_array_add(messages, m);
	}
	if (!json_object_object_get_ex(m, "tool_calls", &calls) || !calls) {
		calls = json_object_new_array();
		json_object_object_add(m, "tool_calls", calls);
	}
	struct json_object *c = json_object_new_object(), *f = json_object_new_object();
	json_object_object_add(c, "id", json_object_new_string(id));
	json_object_object_add(c, "type", json_object_new_string("function"));
	json_object_object_add(f, "name", json_object_new_string(name));
	json_object_object_add(f, "arguments", json_object_new_string(arguments));
	json_object_object_add(c, "function", f);
	json_object_array_add(calls, c);
}

/* The function name of the earlier assistant call with this id, or NULL. */
static struct json_object *call_name(struct json_object *messages, const char *id)
{
	for (size_t i = json_object_array_length(messages); i-- > 0;) {
		struct json_object *calls = api_field(json_object_array_get_idx(messages, i), "tool_calls");
		for (size_t j = 0; calls && j < json_object_array_length(calls); j++) {
			struct json_object *c = json_object_array_get_idx(calls, j), *cid = api_field(c, "id");
			if (cid && strcmp(json_object_get_string(cid), id) == 0)
				return api_field(api_field(c, "function"), "name");
		}
	}
	return NULL;
}

void api_add_tool_result(struct json_object *messages, const char *id, const char *content, size_t len)
{
	struct json_object *m = json_object_new_object(), *name = call_name(messages, id);
	json_object_object_add(m, "role", json_object_new_string("tool"));
	json_object_object_add(m, "tool_call_id", json_object_new_string(id));
	if (name) /* templates may print the function's name with its result */
		json_object_object_add(m, "name", json_object_get(name));
	json_object_object_add(m, "content", json_object_new_string_len(content, (int)len));
	json_object_array_add(messages, m);
}

struct json_object *api_function_tool(struct json_object *name, struct json_object *description,
				      struct json_object *parameters)
{
	struct json_object *t = json_object_new_object(), *f = json_object_new_object();
	json_object_object_add(f, "name", json_object_get(name));
	if (description)
		json_object_object_add(f, "description", json_object_get(description));
	if (parameters)
		json_object_object_add(f, "parameters", json_object_get(parameters));
	json_object_object_add(t, "type", json_object_new_string("function"));
	json_object_object_add(t, "function", f);
	return t;
}

void api_new_id(char *out, size_t cap, const char *prefix)
{
	snprintf(out, cap, "%s%016llx%08x", prefix, (unsigned long long)gen_random64(),
		 (unsigned)(gen_random64() & 0xffffffffu));
}

void api_error_rename(struct srv_api_error *e, const char *from, const char *to)
{
	if (strcmp(e->param, from) != 0)
		return;
	snprintf(e->param, sizeof(e->param), "%s", to);
	char q[80], msg[sizeof(e->message)];
	snprintf(q, sizeof(q), "'%s'", from);
	char *at = strstr(e->message, q);
	if (at) {
		snprintf(msg, sizeof(msg), "%.*s'%s'%s", (int)(at - e->message), e->message, to, at + strlen(q));
		memcpy(e->message, msg, sizeof(msg));
	}
}

void api_parse(const struct srv_gen *g, const struct srv_choice *c, bool partial, struct alice_chat_parsed *out)
{
	memset(out, 0, sizeof(*out));
	if (g->parse) {
		struct alice_error err = {{0}};
		if (alice_chat_parse(&g->parse_opts, c->text.p ? c->text.p : "", c->text.n, partial, out, &err) == ALICE_OK)
			return;
		alice_chat_parsed_clear(out);
		memset(out, 0, sizeof(*out));
	}
	alice_sb_addn(&out->content, c->text.p ? c->text.p : "", c->text.n);
}

bool api_fresh(const struct alice_chat_parsed *p, size_t *sent, const char **s, size_t *n)
{
	if (p->content.n <= *sent)
		return false;
	*s = p->content.p + *sent;
	*n = p->content.n - *sent;
	*sent = p->content.n;
	return true;
}

struct json_object *api_arguments_object(const char *arguments)
{
	struct json_object *o = json_tokener_parse(arguments ? arguments : "");
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return json_object_new_object();
	}
	return o;
}
