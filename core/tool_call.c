/* tool_call.c — format detection and the parse of a chat model's output
 * into reasoning, content and tool calls (see alice/tool_call.h). */
#include "alice/tool_call.h"

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "tool_call_internal.h"

enum alice_tool_format alice_tool_format_detect(const char *t)
{
	if (!t)
		return ALICE_TOOL_FORMAT_NONE;
	if (strstr(t, "<function=") && strstr(t, "<parameter="))
		return ALICE_TOOL_FORMAT_QWEN35;
	if (strstr(t, "<tool_call>"))
		return ALICE_TOOL_FORMAT_HERMES;
	if (strstr(t, "[TOOL_CALLS]"))
		return strstr(t, "[ARGS]") ? ALICE_TOOL_FORMAT_MISTRAL_ARGS : ALICE_TOOL_FORMAT_MISTRAL;
	if (strstr(t, "<|start_header_id|>") && (strstr(t, "<|python_tag|>") || strstr(t, "ipython")))
		return ALICE_TOOL_FORMAT_LLAMA3;
	if (strstr(t, "tools"))
		return ALICE_TOOL_FORMAT_GENERIC;
	return ALICE_TOOL_FORMAT_NONE;
}

bool alice_tool_reasoning_detect(const char *t)
{
	return t && strstr(t, "<think>") != NULL;
}

const char *alice_tool_format_name(enum alice_tool_format f)
{
	switch (f) {
	case ALICE_TOOL_FORMAT_NONE: return "none";
	case ALICE_TOOL_FORMAT_HERMES: return "hermes";
	case ALICE_TOOL_FORMAT_QWEN35: return "qwen3.5";
	case ALICE_TOOL_FORMAT_LLAMA3: return "llama3";
	case ALICE_TOOL_FORMAT_MISTRAL: return "mistral";
	case ALICE_TOOL_FORMAT_MISTRAL_ARGS: return "mistral-args";
	case ALICE_TOOL_FORMAT_GENERIC: return "generic";
	}
	return "unknown";
}

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool alice_tool_think_open(const char *p, size_t n)
{
	while (n && is_ws(p[n - 1]))
		n--;
	return n >= 7 && memcmp(p + n - 7, "<think>", 7) == 0;
}

void alice_chat_parsed_clear(struct alice_chat_parsed *p)
{
	free(p->reasoning.p);
	free(p->content.p);
	for (size_t i = 0; i < p->n_calls; i++) {
		free(p->calls[i].name);
		free(p->calls[i].arguments);
	}
	free(p->calls);
	free(p->partial.name);
	free(p->partial.arguments);
	memset(p, 0, sizeof(*p));
}

bool alice_tool_schema_is_string(struct json_object *ps)
{
	struct json_object *ty = NULL;
	if (!json_object_is_type(ps, json_type_object) || !json_object_object_get_ex(ps, "type", &ty))
		return false;
	if (json_object_is_type(ty, json_type_string))
		return strcmp(json_object_get_string(ty), "string") == 0;
	for (size_t k = 0; json_object_is_type(ty, json_type_array) && k < json_object_array_length(ty); k++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(ty, k)), "string") == 0)
			return true;
	return false;
}

/* ---- scanning ---------------------------------------------------------- */

enum scan { SCAN_OK = 0, SCAN_MORE = -1, SCAN_BAD = -2 };

struct cur {
	const char *s;
	size_t n, i;
};

static void skip_ws(struct cur *c)
{
	while (c->i < c->n && is_ws(c->s[c->i]))
		c->i++;
}

/* Expect literal lit at c->i: OK (consumed), MORE (the text ends inside
 * it), BAD. */
static enum scan expect(struct cur *c, const char *lit)
{
	size_t l = strlen(lit), have = c->n - c->i;
	if (have < l)
		return memcmp(c->s + c->i, lit, have) == 0 ? SCAN_MORE : SCAN_BAD;
	if (memcmp(c->s + c->i, lit, l) != 0)
		return SCAN_BAD;
	c->i += l;
	return SCAN_OK;
}

/* The end of the JSON object or array at c->i (strings and nesting
 * tracked; the parse that follows checks the rest). */
static enum scan scan_json(struct cur *c, size_t *end)
{
	char stack[64];
	int depth = 0;
	bool in_str = false, esc = false;
	if (c->i >= c->n)
		return SCAN_MORE;
	if (c->s[c->i] != '{' && c->s[c->i] != '[')
		return SCAN_BAD;
	for (size_t i = c->i; i < c->n; i++) {
		char ch = c->s[i];
		if (in_str) {
			if (esc)
				esc = false;
			else if (ch == '\\')
				esc = true;
			else if (ch == '"')
				in_str = false;
			continue;
		}
		if (ch == '"') {
			in_str = true;
		} else if (ch == '{' || ch == '[') {
			if (depth == (int)sizeof(stack))
				return SCAN_BAD;
			stack[depth++] = ch == '{' ? '}' : ']';
		} else if (ch == '}' || ch == ']') {
			if (depth == 0 || stack[depth - 1] != ch)
				return SCAN_BAD;
			if (--depth == 0) {
				*end = i + 1;
				return SCAN_OK;
			}
		}
	}
	return SCAN_MORE;
}

/* Exactly one JSON value in s[0..n) (a bare number needs the end of input
 * to finish: the copy's NUL gives it). */
static struct json_object *parse_json(const char *s, size_t n)
{
	char *buf = malloc(n + 1);
	struct json_tokener *tok = json_tokener_new_ex(64);
	struct json_object *o = NULL;
	if (buf && tok) {
		memcpy(buf, s, n);
		buf[n] = '\0';
		json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
		o = json_tokener_parse_ex(tok, buf, (int)n + 1);
		size_t end = json_tokener_get_parse_end(tok);
		if (json_tokener_get_error(tok) != json_tokener_success || end < n) {
			json_object_put(o);
			o = NULL;
		}
	}
	json_tokener_free(tok);
	free(buf);
	return o;
}

/* The JSON value at c->i (an object or array), parsed. */
static enum scan take_json(struct cur *c, struct json_object **out)
{
	size_t end = 0;
	enum scan st = scan_json(c, &end);
	if (st != SCAN_OK)
		return st;
	if (!(*out = parse_json(c->s + c->i, end - c->i)))
		return SCAN_BAD;
	c->i = end;
	return SCAN_OK;
}

/* ---- calls ------------------------------------------------------------- */

/* Calls of one block, and (partial parse) the call it is still writing. */
struct pending {
	struct alice_tool_call calls[16];
	size_t n;
	struct alice_tool_call part; /* name known; arguments: a prefix of the final text */
	bool has_part;
	bool oom;
};

static void pending_free(struct pending *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->calls[i].name);
		free(p->calls[i].arguments);
	}
	p->n = 0;
	free(p->part.name);
	free(p->part.arguments);
	memset(&p->part, 0, sizeof(p->part));
	p->has_part = false;
}

static char *dupn(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* Add a call with arguments text a[0..n) (a JSON object's text). */
static bool pending_add_raw(struct pending *p, const char *name, const char *a, size_t n)
{
	if (!name || !name[0] || p->n == sizeof(p->calls) / sizeof(p->calls[0]))
		return false;
	struct alice_tool_call *tc = &p->calls[p->n];
	tc->name = strdup(name);
	tc->arguments = dupn(a, n);
	if (!tc->name || !tc->arguments) {
		free(tc->name);
		free(tc->arguments);
		p->oom = true;
		return false;
	}
	p->n++;
	return true;
}

/* The call being written: name and the arguments text so far. */
static void pending_part(struct pending *p, const char *name, const char *a, size_t n)
{
	free(p->part.name);
	free(p->part.arguments);
	p->part.name = strdup(name);
	p->part.arguments = dupn(a, n);
	p->has_part = p->part.name && p->part.arguments;
	if (!p->has_part)
		p->oom = true;
}

/* The last call added becomes the one being written (its closing tag has
 * not arrived yet). */
static void pending_last_to_part(struct pending *p)
{
	if (p->n == 0)
		return;
	struct alice_tool_call *tc = &p->calls[--p->n];
	free(p->part.name);
	free(p->part.arguments);
	p->part = *tc;
	p->has_part = true;
}

/* Add a call: args an object (serialized) or a string holding one. */
static bool pending_add(struct pending *p, const char *name, struct json_object *args)
{
	if (!name || !name[0] || p->n == sizeof(p->calls) / sizeof(p->calls[0]))
		return false;
	const char *a = "{}";
	struct json_object *parsed = NULL;
	if (args && json_object_is_type(args, json_type_string)) {
		parsed = parse_json(json_object_get_string(args), (size_t)json_object_get_string_len(args));
		if (!parsed || !json_object_is_type(parsed, json_type_object)) {
			json_object_put(parsed);
			return false;
		}
		args = parsed;
	}
	if (args && !json_object_is_type(args, json_type_object)) {
		json_object_put(parsed);
		return false;
	}
	if (args)
		a = json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	struct alice_tool_call *tc = &p->calls[p->n];
	tc->name = strdup(name);
	tc->arguments = strdup(a);
	json_object_put(parsed);
	if (!tc->name || !tc->arguments) {
		free(tc->name);
		free(tc->arguments);
		p->oom = true;
		return false;
	}
	p->n++;
	return true;
}

/* {"name": N, <args_key>: {...}} (args_key2 accepted too). */
static bool call_from_object(struct pending *p, struct json_object *o, const char *k1, const char *k2)
{
	struct json_object *name = NULL, *args = NULL;
	if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "name", &name) ||
	    !json_object_is_type(name, json_type_string))
		return false;
	if (!json_object_object_get_ex(o, k1, &args) && !(k2 && json_object_object_get_ex(o, k2, &args)))
		args = NULL;
	return pending_add(p, json_object_get_string(name), args);
}

/* The end of the string at c->i (a '"'). */
static enum scan scan_string(const struct cur *c, size_t i, size_t *end)
{
	for (i++; i < c->n; i++) {
		if (c->s[i] == '\\')
			i++;
		else if (c->s[i] == '"') {
			*end = i + 1;
			return SCAN_OK;
		}
	}
	return SCAN_MORE;
}

/* The end of any JSON value at position i (checked by the parse after). */
static enum scan scan_value(const struct cur *c, size_t i, size_t *end)
{
	if (i >= c->n)
		return SCAN_MORE;
	char ch = c->s[i];
	if (ch == '"')
		return scan_string(c, i, end);
	if (ch == '{' || ch == '[') {
		struct cur k = {c->s, c->n, i};
		return scan_json(&k, end);
	}
	size_t j = i;
	while (j < c->n && ((c->s[j] >= 'a' && c->s[j] <= 'z') || (c->s[j] >= '0' && c->s[j] <= '9') ||
			    c->s[j] == '-' || c->s[j] == '+' || c->s[j] == '.' || c->s[j] == 'E'))
		j++;
	if (j == i)
		return SCAN_BAD;
	if (j == c->n)
		return SCAN_MORE; /* a number may go on */
	*end = j;
	return SCAN_OK;
}

static bool span_is(const char *s, size_t a, size_t b, const char *key)
{
	return key && b - a == strlen(key) + 2 && memcmp(s + a + 1, key, b - a - 2) == 0;
}

/* A call object {"name": N, k1|k2: {...}} at c->i: the call is added with
 * its arguments' text as written (a string holding an object: that string).
 * Partial: the text ends in the arguments object after the name, which
 * makes the call being written. */
static enum scan scan_call_obj(struct cur *c, const char *k1, const char *k2, struct pending *p)
{
	size_t i = c->i + 1, na = 0, nb = 0, aa = 0, ab = 0, end = 0;
	char *name = NULL;
	enum scan st = SCAN_BAD;
	if (c->i >= c->n || c->s[c->i] != '{')
		return c->i >= c->n ? SCAN_MORE : SCAN_BAD;
	for (;;) {
		struct cur k = {c->s, c->n, i};
		skip_ws(&k);
		i = k.i;
		if (i == c->n) {
			st = SCAN_MORE;
			goto out;
		}
		if (c->s[i] == '}' && na == 0 && ab == 0 && nb == 0) {
			i++;
			break;
		}
		if (c->s[i] != '"')
			goto out;
		size_t ka = i, kb = 0;
		if ((st = scan_string(c, i, &kb)) != SCAN_OK)
			goto out;
		k.i = kb;
		skip_ws(&k);
		if ((st = expect(&k, ":")) != SCAN_OK)
			goto out;
		skip_ws(&k);
		size_t v = k.i;
		bool is_args = span_is(c->s, ka, kb, k1) || span_is(c->s, ka, kb, k2);
		st = scan_value(c, v, &end);
		if (st == SCAN_MORE && is_args && name && v < c->n && c->s[v] == '{')
			pending_part(p, name, c->s + v, c->n - v);
		if (st != SCAN_OK)
			goto out;
		if (span_is(c->s, ka, kb, "name") && !name) {
			struct json_object *j = parse_json(c->s + v, end - v);
			if (j && json_object_is_type(j, json_type_string))
				name = strdup(json_object_get_string(j));
			json_object_put(j);
			if (!name) {
				st = SCAN_BAD;
				goto out;
			}
			na = v;
			nb = end;
		} else if (is_args && !ab) {
			aa = v;
			ab = end;
		}
		k.i = end;
		skip_ws(&k);
		i = k.i;
		st = SCAN_MORE;
		if (i == c->n)
			goto out;
		st = SCAN_BAD;
		if (c->s[i] == '}') {
			i++;
			break;
		}
		if (c->s[i] != ',')
			goto out;
		i++;
	}
	st = SCAN_BAD;
	struct json_object *whole = parse_json(c->s + c->i, i - c->i), *args = NULL;
	if (!whole || !name)
		goto whole_out;
	if (!ab) {
		st = pending_add_raw(p, name, "{}", 2) ? SCAN_OK : SCAN_BAD;
	} else if (c->s[aa] == '{') {
		st = pending_add_raw(p, name, c->s + aa, ab - aa) ? SCAN_OK : SCAN_BAD;
	} else if (c->s[aa] == '"' && (args = parse_json(c->s + aa, ab - aa))) {
		struct json_object *in = parse_json(json_object_get_string(args), (size_t)json_object_get_string_len(args));
		if (in && json_object_is_type(in, json_type_object))
			st = pending_add_raw(p, name, json_object_get_string(args), (size_t)json_object_get_string_len(args))
				     ? SCAN_OK
				     : SCAN_BAD;
		json_object_put(in);
	}
	if (st == SCAN_OK)
		c->i = i;
whole_out:
	json_object_put(whole);
	json_object_put(args);
out:
	free(name);
	(void)na;
	(void)nb;
	return st;
}

/* An optional closing tag after a call: consumed, missing (the call still
 * counts), or MORE when the text ends inside it. */
static enum scan close_tag(struct cur *c, const char *tag, bool partial)
{
	struct cur k = *c;
	skip_ws(&k);
	enum scan st = expect(&k, tag);
	if (st == SCAN_OK) {
		*c = k;
		return SCAN_OK;
	}
	if (partial && (st == SCAN_MORE || k.i == k.n))
		return SCAN_MORE;
	return SCAN_OK;
}

static enum scan block_hermes(struct cur *c, struct pending *p, bool partial)
{
	skip_ws(c);
	enum scan st = scan_call_obj(c, "arguments", "parameters", p);
	if (st != SCAN_OK)
		return st;
	if ((st = close_tag(c, "</tool_call>", partial)) == SCAN_MORE)
		pending_last_to_part(p);
	return st;
}

/* The schema type of tool `fn`'s parameter `key` is (or allows) string. */
static bool param_is_string(struct json_object *tools, const char *fn, const char *key)
{
	size_t n = tools && json_object_is_type(tools, json_type_array) ? json_object_array_length(tools) : 0;
	for (size_t i = 0; i < n; i++) {
		struct json_object *t = json_object_array_get_idx(tools, i), *f, *nm, *pr, *props, *ps;
		if (!json_object_object_get_ex(t, "function", &f) || !json_object_object_get_ex(f, "name", &nm) ||
		    strcmp(json_object_get_string(nm), fn) != 0)
			continue;
		if (!json_object_object_get_ex(f, "parameters", &pr) || !json_object_object_get_ex(pr, "properties", &props) ||
		    !json_object_object_get_ex(props, key, &ps))
			return false;
		return alice_tool_schema_is_string(ps);
	}
	return false;
}

/* A QWEN35 parameter value: raw text for strings, else JSON (Python's
 * True/False as the template prints them), else the text. */
static struct json_object *xml_value(const char *v, size_t n, bool string)
{
	if (!string) {
		size_t a = 0, b = n;
		while (a < b && is_ws(v[a]))
			a++;
		while (b > a && is_ws(v[b - 1]))
			b--;
		if (b - a == 4 && memcmp(v + a, "True", 4) == 0)
			return json_object_new_boolean(1);
		if (b - a == 5 && memcmp(v + a, "False", 5) == 0)
			return json_object_new_boolean(0);
		struct json_object *j = b > a ? parse_json(v + a, b - a) : NULL;
		if (j || (b - a == 4 && memcmp(v + a, "null", 4) == 0))
			return j;
	}
	return json_object_new_string_len(v, (int)n);
}

static enum scan block_qwen35(struct cur *c, struct pending *p, bool partial, struct json_object *tools)
{
	enum scan st;
	skip_ws(c);
	if ((st = expect(c, "<function=")) != SCAN_OK)
		return st;
	const char *name = c->s + c->i, *gt = memchr(name, '>', c->n - c->i);
	if (!gt)
		return SCAN_MORE;
	size_t nl = (size_t)(gt - name);
	if (nl == 0 || nl > 128 || memchr(name, '\n', nl) || memchr(name, '<', nl))
		return SCAN_BAD;
	char fn[129];
	memcpy(fn, name, nl);
	fn[nl] = '\0';
	c->i += nl + 1;
	/* the arguments' text, one member per complete parameter, so that a
	 * partial parse's text is a prefix of the final one */
	struct alice_sbuf args = {0};
	alice_sb_add(&args, "{");
	for (;;) {
		skip_ws(c);
		struct cur k = *c;
		if ((st = expect(&k, "</function>")) == SCAN_OK) {
			*c = k;
			break;
		}
		if (st == SCAN_MORE || c->i == c->n) {
			st = SCAN_MORE;
			goto more;
		}
		if ((st = expect(c, "<parameter=")) != SCAN_OK)
			goto fail;
		const char *key = c->s + c->i, *kgt = memchr(key, '>', c->n - c->i);
		if (!kgt) {
			st = SCAN_MORE;
			goto more;
		}
		size_t kl = (size_t)(kgt - key);
		if (kl == 0 || kl > 128 || memchr(key, '\n', kl) || memchr(key, '<', kl)) {
			st = SCAN_BAD;
			goto out;
		}
		char kname[129];
		memcpy(kname, key, kl);
		kname[kl] = '\0';
		c->i += kl + 1;
		if (c->i < c->n && c->s[c->i] == '\n')
			c->i++;
		const char *v = c->s + c->i, *endp = NULL;
		for (const char *q = v; q + 12 <= c->s + c->n; q++)
			if (memcmp(q, "</parameter>", 12) == 0) {
				endp = q;
				break;
			}
		if (!endp) {
			st = SCAN_MORE;
			goto more;
		}
		size_t vl = (size_t)(endp - v);
		if (vl && v[vl - 1] == '\n')
			vl--;
		struct json_object *jk = json_object_new_string(kname), *jv = xml_value(v, vl, param_is_string(tools, fn, kname));
		const int fl = JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;
		alice_sb_addf(&args, "%s%s:%s", args.n > 1 ? "," : "", json_object_to_json_string_ext(jk, fl),
			      jv ? json_object_to_json_string_ext(jv, fl) : "null");
		json_object_put(jk);
		json_object_put(jv);
		c->i = (size_t)(endp - c->s) + 12;
	}
	alice_sb_add(&args, "}");
	if (args.oom || !pending_add_raw(p, fn, args.p, args.n)) {
		p->oom |= args.oom;
		st = SCAN_BAD;
		goto out;
	}
	if ((st = close_tag(c, "</tool_call>", partial)) == SCAN_MORE)
		pending_last_to_part(p);
	goto out;
fail:
	if (st != SCAN_MORE)
		goto out;
more:
	if (!args.oom)
		pending_part(p, fn, args.p, args.n);
out:
	free(args.p);
	return st;
}

static enum scan block_mistral(struct cur *c, struct pending *p)
{
	skip_ws(c);
	if (c->i < c->n && c->s[c->i] == '[') {
		struct json_object *a = NULL;
		enum scan st = take_json(c, &a);
		if (st != SCAN_OK)
			return st;
		size_t n = json_object_array_length(a);
		bool ok = n > 0;
		for (size_t i = 0; ok && i < n; i++)
			ok = call_from_object(p, json_object_array_get_idx(a, i), "arguments", "parameters");
		json_object_put(a);
		return ok ? SCAN_OK : SCAN_BAD;
	}
	/* N[ARGS]{...} */
	const char *name = c->s + c->i;
	size_t nl = 0;
	while (c->i + nl < c->n && name[nl] != '[' && nl <= 128)
		nl++;
	if (c->i + nl == c->n)
		return SCAN_MORE;
	if (nl == 0 || nl > 128)
		return SCAN_BAD;
	char fn[129];
	memcpy(fn, name, nl);
	fn[nl] = '\0';
	c->i += nl;
	enum scan st = expect(c, "[ARGS]");
	size_t end = 0;
	if (st != SCAN_OK)
		return st;
	if ((st = scan_json(c, &end)) == SCAN_MORE && c->i < c->n && c->s[c->i] == '{')
		pending_part(p, fn, c->s + c->i, c->n - c->i);
	if (st != SCAN_OK)
		return st;
	struct json_object *o = parse_json(c->s + c->i, end - c->i);
	bool ok = o && json_object_is_type(o, json_type_object) && pending_add_raw(p, fn, c->s + c->i, end - c->i);
	json_object_put(o);
	c->i = end;
	return ok ? SCAN_OK : SCAN_BAD;
}

static enum scan block_llama3(struct cur *c, struct pending *p)
{
	skip_ws(c);
	return scan_call_obj(c, "parameters", "arguments", p);
}

static enum scan block_generic(struct cur *c, struct pending *p)
{
	struct json_object *o = NULL, *a = NULL;
	enum scan st = take_json(c, &o);
	if (st != SCAN_OK)
		return st;
	bool ok = false;
	if (json_object_object_get_ex(o, "tool_calls", &a) && json_object_is_type(a, json_type_array)) {
		size_t n = json_object_array_length(a);
		ok = n > 0;
		for (size_t i = 0; ok && i < n; i++)
			ok = call_from_object(p, json_object_array_get_idx(a, i), "arguments", "parameters");
	} else if (json_object_object_get_ex(o, "tool_call", &a)) {
		ok = call_from_object(p, a, "arguments", "parameters");
	}
	json_object_put(o);
	return ok ? SCAN_OK : SCAN_BAD;
}

/* ---- the text ---------------------------------------------------------- */

/* Where a call can start: a tag anywhere, or (start_only) a JSON object
 * that opens the content. */
struct marker {
	const char *tag;  /* NULL: none anywhere */
	bool start_only;  /* "{" as the first content character */
};

static struct marker marker_of(enum alice_tool_format f)
{
	switch (f) {
	case ALICE_TOOL_FORMAT_HERMES:
	case ALICE_TOOL_FORMAT_QWEN35: return (struct marker){"<tool_call>", false};
	case ALICE_TOOL_FORMAT_MISTRAL:
	case ALICE_TOOL_FORMAT_MISTRAL_ARGS: return (struct marker){"[TOOL_CALLS]", false};
	case ALICE_TOOL_FORMAT_LLAMA3: return (struct marker){"<|python_tag|>", true};
	case ALICE_TOOL_FORMAT_GENERIC: return (struct marker){NULL, true};
	case ALICE_TOOL_FORMAT_NONE: break;
	}
	return (struct marker){NULL, false};
}

/* Content text, its leading white space dropped. */
static void content_add(struct alice_chat_parsed *out, const char *s, size_t n)
{
	if (out->content.n == 0)
		while (n && is_ws(*s))
			s++, n--;
	alice_sb_addn(&out->content, s, n);
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t tag_prefix_tail(const char *s, size_t n, const char *tag)
{
	size_t tl = strlen(tag);
	for (size_t k = tl - 1; k > 0; k--)
		if (k <= n && memcmp(s + n - k, tag, k) == 0)
			return k;
	return 0;
}

static const char *find(const char *s, size_t n, const char *tag)
{
	size_t tl = strlen(tag);
	for (size_t i = 0; i + tl <= n; i++)
		if (s[i] == tag[0] && memcmp(s + i, tag, tl) == 0)
			return s + i;
	return NULL;
}

static bool calls_commit(struct alice_chat_parsed *out, struct pending *p)
{
	for (size_t i = 0; i < p->n; i++) {
		if (!alice_grow((void **)&out->calls, &out->cap_calls, out->n_calls + 1, sizeof(*out->calls)))
			return false;
		out->calls[out->n_calls++] = p->calls[i];
	}
	p->n = 0;
	return true;
}

/* A partial parse's call being written (calls of the same block that are
 * complete come first). */
static void keep_part(struct alice_chat_parsed *out, struct pending *p)
{
	calls_commit(out, p);
	if (p->has_part) {
		out->partial = p->part;
		out->has_partial = true;
		memset(&p->part, 0, sizeof(p->part));
		p->has_part = false;
	}
}

static enum scan run_block(const struct alice_chat_parse_opts *o, struct cur *c, struct pending *p, bool partial)
{
	switch (o->format) {
	case ALICE_TOOL_FORMAT_HERMES: return block_hermes(c, p, partial);
	case ALICE_TOOL_FORMAT_QWEN35: return block_qwen35(c, p, partial, o->tools);
	case ALICE_TOOL_FORMAT_MISTRAL:
	case ALICE_TOOL_FORMAT_MISTRAL_ARGS: return block_mistral(c, p);
	case ALICE_TOOL_FORMAT_LLAMA3: return block_llama3(c, p);
	case ALICE_TOOL_FORMAT_GENERIC: return block_generic(c, p);
	case ALICE_TOOL_FORMAT_NONE: break;
	}
	return SCAN_BAD;
}

/* Content and calls of s[0..n). */
static bool parse_body(const struct alice_chat_parse_opts *o, const char *s, size_t n, bool partial,
		       struct alice_chat_parsed *out)
{
	struct marker mk = marker_of(o->format);
	size_t i = 0;
	struct pending p = {0};
	/* a call that opens the content (LLAMA3's bare JSON, GENERIC) */
	if (mk.start_only) {
		size_t j = 0;
		while (j < n && is_ws(s[j]))
			j++;
		if (j < n && s[j] == '{') {
			struct cur c = {s, n, j};
			enum scan st = run_block(o, &c, &p, partial);
			if (st == SCAN_MORE && partial) {
				keep_part(out, &p);
				pending_free(&p);
				return !p.oom;
			}
			if (st == SCAN_OK) {
				if (!calls_commit(out, &p))
					goto nomem;
				i = c.i;
			}
			pending_free(&p);
		}
	}
	while (i < n) {
		const char *m = mk.tag ? find(s + i, n - i, mk.tag) : NULL;
		if (!m) {
			size_t keep = n - i;
			if (partial && mk.tag)
				keep -= tag_prefix_tail(s + i, n - i, mk.tag);
			content_add(out, s + i, keep);
			break;
		}
		size_t at = (size_t)(m - s);
		content_add(out, s + i, at - i);
		struct cur c = {s, n, at + strlen(mk.tag)};
		enum scan st = run_block(o, &c, &p, partial);
		if (st == SCAN_MORE && partial) {
			keep_part(out, &p);
			pending_free(&p);
			break;
		}
		if (st == SCAN_OK) {
			if (!calls_commit(out, &p))
				goto nomem;
			i = c.i;
		} else {
			/* malformed (or cut off at the end): the tag stays text */
			pending_free(&p);
			if (p.oom)
				goto nomem;
			content_add(out, m, strlen(mk.tag));
			i = at + strlen(mk.tag);
		}
	}
	return !p.oom && !out->content.oom;
nomem:
	pending_free(&p);
	return false;
}

enum alice_status alice_chat_parse(const struct alice_chat_parse_opts *o, const char *s, size_t n, bool partial,
				   struct alice_chat_parsed *out, struct alice_error *err)
{
	size_t i = 0;
	if (o->reasoning) {
		size_t r0 = 0;
		bool in_think = o->think_open;
		if (!in_think) {
			size_t j = 0;
			while (j < n && is_ws(s[j]))
				j++;
			size_t have = n - j;
			if (have >= 7 && memcmp(s + j, "<think>", 7) == 0) {
				in_think = true;
				r0 = j + 7;
			} else if (partial && have < 7 && memcmp(s + j, "<think>", have) == 0) {
				return ALICE_OK; /* may still open a block */
			}
		}
		if (in_think) {
			const char *e = find(s + r0, n - r0, "</think>");
			if (!e) {
				size_t keep = n - r0;
				if (partial)
					keep -= tag_prefix_tail(s + r0, n - r0, "</think>");
				alice_sb_addn(&out->reasoning, s + r0, keep);
				return out->reasoning.oom ? alice_fail(err, ALICE_ERR_NOMEM, "out of memory") : ALICE_OK;
			}
			alice_sb_addn(&out->reasoning, s + r0, (size_t)(e - (s + r0)));
			i = (size_t)(e - s) + 8;
		}
	}
	if (!parse_body(o, s + i, n - i, partial, out) || out->reasoning.oom)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	return ALICE_OK;
}
