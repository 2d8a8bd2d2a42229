/* tool_grammar.c — the grammar of a forced tool call (see
 * alice/tool_call.h): each tool's argument schema goes through the JSON
 * schema converter (alice/json_schema.h), its rules renamed with a
 * per-schema prefix so that several conversions live in one grammar, and
 * the format's fixed text is wrapped around them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "alice/grammar.h"
#include "alice/json_schema.h"
#include "alice/tool_call.h"
#include "tool_call_internal.h"

#define MAX_PARALLEL 4

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Copy GBNF text with every rule name (definitions and references)
 * prefixed by pre; literals, classes, repetition bounds and comments are
 * copied as they are. */
static void add_prefixed(struct alice_sbuf *b, const char *g, const char *pre)
{
	for (size_t i = 0; g[i];) {
		char c = g[i];
		if (c == '"' || c == '[') {
			char close = c == '"' ? '"' : ']';
			size_t j = i + 1;
			while (g[j] && g[j] != close)
				j += g[j] == '\\' && g[j + 1] ? 2 : 1;
			if (g[j])
				j++;
			alice_sb_addn(b, g + i, j - i);
			i = j;
		} else if (c == '{' || c == '#') {
			const char *e = strchr(g + i, c == '{' ? '}' : '\n');
			size_t j = e ? (size_t)(e - g) + 1 : strlen(g);
			alice_sb_addn(b, g + i, j - i);
			i = j;
		} else if (ident_char(c)) {
			size_t j = i;
			while (ident_char(g[j]))
				j++;
			alice_sb_add(b, pre);
			alice_sb_addn(b, g + i, j - i);
			i = j;
		} else {
			alice_sb_addn(b, &c, 1);
			i++;
		}
	}
	alice_sb_add(b, "\n");
}

/* Rules of a schema's conversion, prefixed; its start rule is pre + "root". */
static enum alice_status add_schema(struct alice_sbuf *b, struct json_object *schema, const char *pre,
				    const char *tool, struct alice_error *err)
{
	char *g = NULL;
	struct alice_error e = {{0}};
	enum alice_status st = alice_json_schema_obj_to_gbnf(schema, &g, &e);
	if (st != ALICE_OK)
		return alice_fail(err, st, "tool '%s': invalid or unsupported parameters schema: %s", tool, e.msg);
	add_prefixed(b, g, pre);
	free(g);
	return ALICE_OK;
}

/* s as the body of a GBNF string literal (no quotes). */
static void add_lit(struct alice_sbuf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			alice_sb_addf(b, "\\%c", c);
		else if (c == '\n')
			alice_sb_add(b, "\\n");
		else if (c < 0x20 || c == 0x7f)
			alice_sb_addf(b, "\\x%02X", c);
		else
			alice_sb_addn(b, (const char *)&c, 1);
	}
}

/* A QWEN35 string parameter written raw: any text without '<' (so that
 * "</parameter>" ends it), within minLength/maxLength, or one of an enum. */
static enum alice_status add_raw_string(struct alice_sbuf *b, struct json_object *ps, const char *tool,
					const char *key, struct alice_error *err)
{
	static const char *const ok[] = {"type", "description", "title", "minLength", "maxLength", "enum",
					 "const", "default", "examples"};
	int64_t lo = 0, hi = -1;
	json_object_object_foreach(ps, k, v)
	{
		size_t i = 0;
		while (i < sizeof(ok) / sizeof(ok[0]) && strcmp(ok[i], k) != 0)
			i++;
		if (i == sizeof(ok) / sizeof(ok[0]))
			return alice_fail(err, ALICE_ERR_UNSUPPORTED,
					  "tool '%s': string parameter '%s' uses '%s', which a forced call in this "
					  "template's format (raw text values) cannot enforce",
					  tool, key, k);
		if (strcmp(k, "minLength") == 0)
			lo = json_object_get_int64(v);
		if (strcmp(k, "maxLength") == 0)
			hi = json_object_get_int64(v);
	}
	struct json_object *en = NULL;
	if (json_object_object_get_ex(ps, "const", &en) || json_object_object_get_ex(ps, "enum", &en)) {
		size_t n = json_object_is_type(en, json_type_array) ? json_object_array_length(en) : 1;
		alice_sb_add(b, "(");
		for (size_t i = 0; i < n; i++) {
			struct json_object *v = json_object_is_type(en, json_type_array) ? json_object_array_get_idx(en, i) : en;
			if (!json_object_is_type(v, json_type_string))
				return alice_fail(err, ALICE_ERR_UNSUPPORTED,
						  "tool '%s': string parameter '%s' has a non-string enum value", tool, key);
			alice_sb_add(b, i ? " | \"" : "\"");
			add_lit(b, json_object_get_string(v));
			alice_sb_add(b, "\"");
		}
		alice_sb_add(b, ")");
		return ALICE_OK;
	}
	if (lo < 0 || (hi >= 0 && hi < lo) || hi > 100000 || lo > 100000)
		return alice_fail(err, ALICE_ERR_INVALID, "tool '%s': parameter '%s' has invalid length bounds", tool, key);
	if (hi >= 0)
		alice_sb_addf(b, "[^<]{%lld,%lld}", (long long)lo, (long long)hi);
	else
		alice_sb_addf(b, "[^<]{%lld,}", (long long)lo);
	return ALICE_OK;
}

static bool in_required(struct json_object *params, const char *key)
{
	struct json_object *req = NULL;
	if (!json_object_object_get_ex(params, "required", &req) || !json_object_is_type(req, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(req); i++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(req, i)), key) == 0)
			return true;
	return false;
}

/* QWEN35: tK-params ::= one "<parameter=KEY>\nVALUE\n</parameter>\n" per
 * property, in the schema's order, optional unless required. */
static enum alice_status add_xml_params(struct alice_sbuf *rules, struct json_object *params, int k,
					const char *tool, struct alice_error *err)
{
	struct json_object *props = NULL;
	struct alice_sbuf body = {0};
	enum alice_status st = ALICE_OK;
	if (params && (!json_object_object_get_ex(params, "properties", &props) ||
		       !json_object_is_type(props, json_type_object)))
		props = NULL;
	int j = 0;
	if (props) {
		json_object_object_foreach(props, key, ps)
		{
			for (const char *q = key; *q; q++)
				if (*q == '>' || *q == '<' || *q == '\n')
					return alice_fail(err, ALICE_ERR_INVALID, "tool '%s': parameter name '%s' cannot be written in this template's format", tool, key);
			alice_sb_addf(rules, "t%d-p%d ::= \"<parameter=", k, j);
			add_lit(rules, key);
			alice_sb_add(rules, ">\\n\" ");
			if (alice_tool_schema_is_string(ps)) {
				st = add_raw_string(rules, ps, tool, key, err);
			} else {
				char pre[32];
				snprintf(pre, sizeof(pre), "t%dp%d-", k, j);
				alice_sb_addf(rules, "%sroot", pre);
				alice_sb_add(rules, " \"\\n</parameter>\\n\"\n");
				st = add_schema(rules, ps, pre, tool, err);
				if (st != ALICE_OK)
					goto out;
				alice_sb_addf(&body, " t%d-p%d%s", k, j, in_required(params, key) ? "" : "?");
				j++;
				continue;
			}
			if (st != ALICE_OK)
				goto out;
			alice_sb_add(rules, " \"\\n</parameter>\\n\"\n");
			alice_sb_addf(&body, " t%d-p%d%s", k, j, in_required(params, key) ? "" : "?");
			j++;
		}
	}
	alice_sb_addf(rules, "t%d-params ::= %s\n", k, body.n ? body.p : "\"\"");
out:
	free(body.p);
	return st;
}

/* Name and parameters of tools[i]; the name must be writable as is. */
static enum alice_status tool_at(struct json_object *tools, size_t i, const char **name, struct json_object **params,
				 struct alice_error *err)
{
	struct json_object *t = json_object_array_get_idx(tools, i), *f = NULL, *nm = NULL;
	if (!json_object_object_get_ex(t, "function", &f) || !json_object_object_get_ex(f, "name", &nm) ||
	    !json_object_is_type(nm, json_type_string))
		return alice_fail(err, ALICE_ERR_INVALID, "tools[%zu] has no function name", i);
	*name = json_object_get_string(nm);
	for (const char *q = *name; *q; q++)
		if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_' ||
		      *q == '-' || *q == '.'))
			return alice_fail(err, ALICE_ERR_INVALID, "tools[%zu]: function name '%.64s' has characters other than "
						 "letters, digits, '_', '-' and '.'", i, *name);
	if (!json_object_object_get_ex(f, "parameters", params) || !*params)
		*params = NULL;
	return ALICE_OK;
}

/* tK ::= the text of one call of tool k in format f. */
static enum alice_status add_call(struct alice_sbuf *b, enum alice_tool_format f, int k, const char *name,
				  struct json_object *params, struct alice_error *err)
{
	enum alice_status st;
	char pre[32];
	snprintf(pre, sizeof(pre), "t%d-", k);
	if (f == ALICE_TOOL_FORMAT_QWEN35) {
		if ((st = add_xml_params(b, params, k, name, err)) != ALICE_OK)
			return st;
		alice_sb_addf(b, "t%d ::= \"<tool_call>\\n<function=%s>\\n\" t%d-params \"</function>\\n</tool_call>\"\n", k,
			      name, k);
		return ALICE_OK;
	}
	struct json_object *any = NULL;
	if (!params)
		params = any = json_object_new_object();
	st = add_schema(b, params, pre, name, err);
	json_object_put(any);
	if (st != ALICE_OK)
		return st;
	switch (f) {
	case ALICE_TOOL_FORMAT_HERMES:
		alice_sb_addf(b, "t%d ::= \"<tool_call>\\n{\\\"name\\\": \\\"%s\\\", \\\"arguments\\\": \" t%d-root \"}\\n</tool_call>\"\n",
			      k, name, k);
		break;
	case ALICE_TOOL_FORMAT_LLAMA3:
		alice_sb_addf(b, "t%d ::= \"{\\\"name\\\": \\\"%s\\\", \\\"parameters\\\": \" t%d-root \"}\"\n", k, name, k);
		break;
	case ALICE_TOOL_FORMAT_MISTRAL_ARGS:
		alice_sb_addf(b, "t%d ::= \"[TOOL_CALLS]%s[ARGS]\" t%d-root\n", k, name, k);
		break;
	default: /* MISTRAL, GENERIC: an element of their array */
		alice_sb_addf(b, "t%d ::= \"{\\\"name\\\": \\\"%s\\\", \\\"arguments\\\": \" t%d-root \"}\"\n", k, name, k);
		break;
	}
	return ALICE_OK;
}

enum alice_status alice_tool_grammar(enum alice_tool_format f, struct json_object *tools, bool parallel,
				     bool think_open, size_t max_bytes, struct alice_grammar **out,
				     struct alice_error *err)
{
	*out = NULL;
	size_t n = tools && json_object_is_type(tools, json_type_array) ? json_object_array_length(tools) : 0;
	if (n == 0 || f == ALICE_TOOL_FORMAT_NONE)
		return alice_fail(err, ALICE_ERR_INVALID, "no tools to call, or a template without a tool-call format");
	struct alice_sbuf b = {0};
	enum alice_status st = ALICE_OK;
	alice_sb_add(&b, "call ::=");
	for (size_t i = 0; i < n; i++)
		alice_sb_addf(&b, "%s t%zu", i ? " |" : "", i);
	alice_sb_add(&b, "\n");
	for (size_t i = 0; i < n && st == ALICE_OK; i++) {
		const char *name = NULL;
		struct json_object *params = NULL;
		if ((st = tool_at(tools, i, &name, &params, err)) == ALICE_OK)
			st = add_call(&b, f, (int)i, name, params, err);
		if (max_bytes && b.n > max_bytes)
			st = alice_fail(err, ALICE_ERR_RANGE, "the tool-call grammar is larger than %zu bytes", max_bytes);
	}
	if (st != ALICE_OK) {
		free(b.p);
		return st;
	}
	const char *sep = "\"\\n\"", *open = "", *close = "";
	if (f == ALICE_TOOL_FORMAT_MISTRAL) {
		sep = "\", \"";
		open = "\"[TOOL_CALLS][\" ";
		close = " \"]\"";
	} else if (f == ALICE_TOOL_FORMAT_GENERIC) {
		sep = "\", \"";
		open = "\"{\\\"tool_calls\\\": [\" ";
		close = " \"]}\"";
	} else if (f == ALICE_TOOL_FORMAT_MISTRAL_ARGS) {
		sep = "";
	}
	if (f == ALICE_TOOL_FORMAT_LLAMA3)
		parallel = false; /* one call per answer in this format */
	alice_sb_addf(&b, "root ::= %s%scall", think_open ? "\"</think>\\n\\n\" " : "", open);
	if (parallel)
		alice_sb_addf(&b, " (%s call){0,%d}", sep, MAX_PARALLEL - 1);
	alice_sb_addf(&b, "%s\n", close);
	if (b.oom)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	if (max_bytes && b.n > max_bytes) {
		free(b.p);
		return alice_fail(err, ALICE_ERR_RANGE, "the tool-call grammar is larger than %zu bytes", max_bytes);
	}
	struct alice_error ge = {{0}};
	st = alice_grammar_parse(b.p, b.n, out, &ge, NULL);
	free(b.p);
	if (st != ALICE_OK)
		return alice_fail(err, st, "the tool-call grammar does not compile: %s", ge.msg);
	return ALICE_OK;
}
