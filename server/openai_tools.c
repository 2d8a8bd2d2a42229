/* openai_tools.c — the function-calling fields of a chat request (see
 * openai.h): tools, tool_choice, parallel_tool_calls, and what a message
 * carries beside role and content (an assistant's tool_calls, a tool
 * result's tool_call_id and name, reasoning_content). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openai.h"

static struct json_object *member(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;
	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static bool is_str(struct json_object *v)
{
	return v && json_object_is_type(v, json_type_string);
}

/* OpenAI's rule for function names: ^[a-zA-Z0-9_-]{1,64}$ ('.' allowed too,
 * as llama-server does). */
static bool valid_name(const char *s, size_t n)
{
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
		      c == '.'))
			return false;
	}
	return true;
}

static bool has_tool(struct json_object *tools, const char *name)
{
	for (size_t i = 0; tools && i < json_object_array_length(tools); i++) {
		struct json_object *f = member(json_object_array_get_idx(tools, i), "function");
		if (strcmp(json_object_get_string(member(f, "name")), name) == 0)
			return true;
	}
	return false;
}

static int parse_tool_list(struct json_object *v, struct srv_gen_request *r, struct srv_api_error *e)
{
	if (!json_object_is_type(v, json_type_array)) {
		srv_api_error_invalid(e, "tools", "'tools' must be an array of function tools");
		return -1;
	}
	size_t n = json_object_array_length(v);
	if (n > 128) {
		srv_api_error_invalid(e, "tools", "'tools' has %zu entries; at most 128 are allowed", n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *t = json_object_array_get_idx(v, i), *ty, *f, *nm, *d, *pa;
		if (!t || !json_object_is_type(t, json_type_object)) {
			srv_api_error_invalid(e, "tools", "tools[%zu] must be an object", i);
			return -1;
		}
		ty = member(t, "type");
		if (!is_str(ty) || strcmp(json_object_get_string(ty), "function") != 0) {
			srv_api_error_invalid(e, "tools", "tools[%zu].type must be \"function\"", i);
			return -1;
		}
		f = member(t, "function");
		if (!f || !json_object_is_type(f, json_type_object)) {
			srv_api_error_invalid(e, "tools", "tools[%zu].function must be an object with a 'name'", i);
			return -1;
		}
		nm = member(f, "name");
		if (!is_str(nm) || !valid_name(json_object_get_string(nm), (size_t)json_object_get_string_len(nm))) {
			srv_api_error_invalid(e, "tools",
					      "tools[%zu].function.name must be 1 to 64 letters, digits, '_', '-' or '.'", i);
			return -1;
		}
		if ((d = member(f, "description")) && !is_str(d)) {
			srv_api_error_invalid(e, "tools", "tools[%zu].function.description must be a string", i);
			return -1;
		}
		if ((pa = member(f, "parameters")) && !json_object_is_type(pa, json_type_object)) {
			srv_api_error_invalid(e, "tools", "tools[%zu].function.parameters must be a JSON Schema object", i);
			return -1;
		}
		for (size_t k = 0; k < i; k++)
			if (strcmp(json_object_get_string(member(member(json_object_array_get_idx(v, k), "function"), "name")),
				   json_object_get_string(nm)) == 0) {
				srv_api_error_invalid(e, "tools", "tools[%zu]: the function name '%s' is used twice", i,
						      json_object_get_string(nm));
				return -1;
			}
	}
	if (n)
		r->tools = json_object_get(v);
	return 0;
}

static int parse_choice(struct json_object *c, struct srv_gen_request *r, struct srv_api_error *e)
{
	static const char P[] = "tool_choice";
	if (is_str(c)) {
		const char *s = json_object_get_string(c);
		if (strcmp(s, "auto") == 0)
			r->tool_choice = SRV_TOOL_CHOICE_AUTO;
		else if (strcmp(s, "none") == 0)
			r->tool_choice = SRV_TOOL_CHOICE_NONE;
		else if (strcmp(s, "required") == 0)
			r->tool_choice = SRV_TOOL_CHOICE_REQUIRED;
		else {
			srv_api_error_invalid(e, P, "'tool_choice' must be \"auto\", \"none\", \"required\" or "
						    "{\"type\":\"function\",\"function\":{\"name\":...}}, got \"%.40s\"",
					      s);
			return -1;
		}
		return 0;
	}
	struct json_object *ty = json_object_is_type(c, json_type_object) ? member(c, "type") : NULL;
	struct json_object *nm = member(member(c, "function"), "name");
	if (!is_str(ty) || strcmp(json_object_get_string(ty), "function") != 0 || !is_str(nm)) {
		srv_api_error_invalid(e, P, "'tool_choice' must be \"auto\", \"none\", \"required\" or "
					    "{\"type\":\"function\",\"function\":{\"name\":...}}");
		return -1;
	}
	const char *name = json_object_get_string(nm);
	if (!has_tool(r->tools, name)) {
		srv_api_error_invalid(e, P, "'tool_choice' names the function '%.64s', which is not in 'tools'", name);
		return -1;
	}
	if (!(r->tool_name = strdup(name))) {
		srv_api_error_nomem(e);
		return -1;
	}
	r->tool_choice = SRV_TOOL_CHOICE_NAMED;
	return 0;
}

int srv_openai_parse_tools(struct json_object *o, struct srv_gen_request *r, struct srv_api_error *e)
{
	struct json_object *v;
	if ((v = member(o, "tools")) && parse_tool_list(v, r, e) != 0)
		return -1;
	if ((v = member(o, "tool_choice")) && parse_choice(v, r, e) != 0)
		return -1;
	if ((v = member(o, "parallel_tool_calls"))) {
		if (!json_object_is_type(v, json_type_boolean)) {
			srv_api_error_invalid(e, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
			return -1;
		}
		r->parallel_tool_calls = json_object_get_boolean(v);
	}
	bool forced = r->tool_choice == SRV_TOOL_CHOICE_REQUIRED || r->tool_choice == SRV_TOOL_CHOICE_NAMED;
	if (forced && !r->tools) {
		srv_api_error_invalid(e, "tool_choice", "'tool_choice' \"required\" needs a non-empty 'tools'");
		return -1;
	}
	if (forced && r->grammar) {
		srv_api_error_invalid(e, "tool_choice", "a required tool call cannot be combined with '%s'",
				      r->grammar_param ? r->grammar_param : "grammar");
		return -1;
	}
	return 0;
}

/* tool_calls[j] of message i, its arguments parsed: a new object, or NULL
 * with e filled. */
static struct json_object *history_call(struct json_object *tc, size_t i, size_t j, struct srv_api_error *e)
{
	struct json_object *f = json_object_is_type(tc, json_type_object) ? member(tc, "function") : NULL;
	struct json_object *nm = member(f, "name"), *args = member(f, "arguments"), *id = member(tc, "id");
	if (!f || !is_str(nm)) {
		srv_api_error_invalid(e, "messages", "messages[%zu].tool_calls[%zu] must be {\"id\",\"type\":\"function\","
						     "\"function\":{\"name\",\"arguments\"}}", i, j);
		return NULL;
	}
	if (id && !is_str(id)) {
		srv_api_error_invalid(e, "messages", "messages[%zu].tool_calls[%zu].id must be a string", i, j);
		return NULL;
	}
	struct json_object *a = NULL;
	if (is_str(args)) {
		a = json_tokener_parse(json_object_get_string(args));
		if (!a || !json_object_is_type(a, json_type_object)) {
			json_object_put(a);
			srv_api_error_invalid(e, "messages",
					      "messages[%zu].tool_calls[%zu].function.arguments must be a JSON object in a string",
					      i, j);
			return NULL;
		}
	} else if (args && json_object_is_type(args, json_type_object)) {
		a = json_object_get(args);
	} else if (!args) {
		a = json_object_new_object();
	} else {
		srv_api_error_invalid(e, "messages", "messages[%zu].tool_calls[%zu].function.arguments must be a string",
				      i, j);
		return NULL;
	}
	struct json_object *out = json_object_new_object(), *fo = json_object_new_object();
	if (id)
		json_object_object_add(out, "id", json_object_get(id));
	json_object_object_add(out, "type", json_object_new_string("function"));
	json_object_object_add(fo, "name", json_object_get(nm));
	json_object_object_add(fo, "arguments", a);
	json_object_object_add(out, "function", fo);
	return out;
}

int srv_openai_message_extra(struct json_object *msg, size_t i, const char *role, struct json_object **extra,
			     struct srv_api_error *e)
{
	struct json_object *x = NULL, *v;
	*extra = NULL;
	if (strcmp(role, "assistant") == 0 && (v = member(msg, "tool_calls"))) {
		if (!json_object_is_type(v, json_type_array)) {
			srv_api_error_invalid(e, "messages", "messages[%zu].tool_calls must be an array", i);
			return -1;
		}
		struct json_object *calls = json_object_new_array();
		x = json_object_new_object();
		json_object_object_add(x, "tool_calls", calls);
		for (size_t j = 0; j < json_object_array_length(v); j++) {
			struct json_object *c = history_call(json_object_array_get_idx(v, j), i, j, e);
			if (!c)
				goto fail;
			json_object_array_add(calls, c);
		}
	}
	if (strcmp(role, "assistant") == 0 && (v = member(msg, "reasoning_content"))) {
		if (!is_str(v)) {
			srv_api_error_invalid(e, "messages", "messages[%zu].reasoning_content must be a string", i);
			goto fail;
		}
		if (!x)
			x = json_object_new_object();
		json_object_object_add(x, "reasoning_content", json_object_get(v));
	}
	if (strcmp(role, "tool") == 0) {
		static const char *const keys[] = {"tool_call_id", "name"};
		for (size_t k = 0; k < 2; k++) {
			if (!(v = member(msg, keys[k])))
				continue;
			if (!is_str(v)) {
				srv_api_error_invalid(e, "messages", "messages[%zu].%s must be a string", i, keys[k]);
				goto fail;
			}
			if (!x)
				x = json_object_new_object();
			json_object_object_add(x, keys[k], json_object_get(v));
		}
	}
	*extra = x;
	return 0;
fail:
	json_object_put(x);
	return -1;
}
