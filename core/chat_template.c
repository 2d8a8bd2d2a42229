/* chat_template.c — a model's chat template: Jinja (jinja.h) or a built-in
 * format (chat.h), and one conversation's render (see alice/chat_template.h). */
#include "alice/chat_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "alice/gguf.h"
#include "alice/jinja.h"

struct alice_chat_template {
	enum alice_chat_template_kind kind;
	enum alice_chat_format format;
	struct alice_jinja *jinja; /* NULL for a built-in */
	bool typed_content;
	enum alice_tool_format tool_format;
	bool thinks;
	char *bos, *eos;
};

static const char PROBE[] = "alice-probe-7c1f";

static struct alice_chat_template *tmpl_new(enum alice_chat_template_kind kind,
					    const struct alice_chat_template_params *p)
{
	struct alice_chat_template *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->kind = kind;
	t->bos = strdup(p && p->bos_text ? p->bos_text : "");
	t->eos = strdup(p && p->eos_text ? p->eos_text : "");
	if (!t->bos || !t->eos) {
		alice_chat_template_free(t);
		return NULL;
	}
	return t;
}

void alice_chat_template_free(struct alice_chat_template *t)
{
	if (!t)
		return;
	alice_jinja_free(t->jinja);
	free(t->bos);
	free(t->eos);
	free(t);
}

enum alice_chat_template_kind alice_chat_template_kind(const struct alice_chat_template *t)
{
	return t->kind;
}

enum alice_chat_format alice_chat_template_format(const struct alice_chat_template *t)
{
	return t->format;
}

const char *alice_chat_template_name(const struct alice_chat_template *t)
{
	switch (t->kind) {
	case ALICE_CHAT_TEMPLATE_GGUF: return "gguf";
	case ALICE_CHAT_TEMPLATE_FILE: return "file";
	case ALICE_CHAT_TEMPLATE_BUILTIN: break;
	}
	return alice_chat_format_name(t->format);
}

bool alice_chat_template_typed_content(const struct alice_chat_template *t)
{
	return t->typed_content;
}

enum alice_tool_format alice_chat_template_tool_format(const struct alice_chat_template *t)
{
	return t->tool_format;
}

bool alice_chat_template_thinks(const struct alice_chat_template *t)
{
	return t->thinks;
}

/* Whether the template prints a one-user-message conversation's content
 * given as a string (typed false) or as one typed text part (typed true). */
static bool probe_content(const struct alice_chat_template *t, bool typed)
{
	struct json_object *ctx = json_object_new_object(), *msgs = json_object_new_array();
	struct json_object *m = json_object_new_object(), *content;
	if (typed) {
		struct json_object *part = json_object_new_object();
		json_object_object_add(part, "type", json_object_new_string("text"));
		json_object_object_add(part, "text", json_object_new_string(PROBE));
		content = json_object_new_array();
		json_object_array_add(content, part);
	} else {
		content = json_object_new_string(PROBE);
	}
	json_object_object_add(m, "role", json_object_new_string("user"));
	json_object_object_add(m, "content", content);
	json_object_array_add(msgs, m);
	json_object_object_add(ctx, "messages", msgs);
	json_object_object_add(ctx, "add_generation_prompt", json_object_new_boolean(1));
	json_object_object_add(ctx, "bos_token", json_object_new_string(t->bos));
	json_object_object_add(ctx, "eos_token", json_object_new_string(t->eos));
	char *out = NULL;
	bool ok = alice_jinja_render(t->jinja, ctx, NULL, &out, NULL, NULL) == ALICE_OK && strstr(out, PROBE);
	free(out);
	json_object_put(ctx);
	return ok;
}

enum alice_status alice_chat_template_jinja(const char *src, size_t len, enum alice_chat_template_kind kind,
					    const struct alice_chat_template_params *p,
					    struct alice_chat_template **out, struct alice_error *err)
{
	if (!out || (!src && len))
		return alice_fail(err, ALICE_ERR_INVALID, "chat template: no source or no output");
	*out = NULL;
	struct alice_chat_template *t = tmpl_new(kind == ALICE_CHAT_TEMPLATE_FILE ? kind : ALICE_CHAT_TEMPLATE_GGUF, p);
	if (!t)
		return alice_fail(err, ALICE_ERR_NOMEM, "chat template: out of memory");
	enum alice_status st = alice_jinja_compile(src ? src : "", len, &t->jinja, err);
	if (st != ALICE_OK) {
		alice_chat_template_free(t);
		return st;
	}
	char *text = malloc(len + 1);
	if (!text) {
		alice_chat_template_free(t);
		return alice_fail(err, ALICE_ERR_NOMEM, "chat template: out of memory");
	}
	if (len)
		memcpy(text, src, len);
	text[len] = '\0';
	alice_chat_detect(text, p ? p->arch : NULL, &t->format);
	t->tool_format = alice_tool_format_detect(text);
	t->thinks = alice_tool_reasoning_detect(text);
	free(text);
	/* Strings unless only typed parts print (as llama.cpp's template caps). */
	t->typed_content = !probe_content(t, false) && probe_content(t, true);
	*out = t;
	return ALICE_OK;
}

enum alice_status alice_chat_template_builtin(enum alice_chat_format f, const struct alice_chat_template_params *p,
					      struct alice_chat_template **out, struct alice_error *err)
{
	if (!out || (int)f < 0 || f >= ALICE_CHAT_FORMAT_COUNT)
		return alice_fail(err, ALICE_ERR_INVALID, "chat template: bad format or no output");
	if (!(*out = tmpl_new(ALICE_CHAT_TEMPLATE_BUILTIN, p)))
		return alice_fail(err, ALICE_ERR_NOMEM, "chat template: out of memory");
	(*out)->format = f;
	(*out)->thinks = f == ALICE_CHAT_FORMAT_QWEN3 || f == ALICE_CHAT_FORMAT_QWEN35;
	return ALICE_OK;
}

enum alice_status alice_chat_template_from_gguf(const struct alice_gguf *g,
						const struct alice_chat_template_params *p,
						struct alice_chat_template **out, struct alice_error *warn)
{
	if (warn)
		warn->msg[0] = '\0';
	struct alice_gguf_str str = {0};
	if (g && alice_gguf_get_str(g, "tokenizer.chat_template", &str, NULL) == ALICE_OK && str.len > 0 &&
	    str.len < SIZE_MAX) {
		struct alice_error cerr = {{0}};
		enum alice_status st =
			alice_chat_template_jinja(str.ptr, (size_t)str.len, ALICE_CHAT_TEMPLATE_GGUF, p, out, &cerr);
		if (st == ALICE_OK || st == ALICE_ERR_NOMEM) {
			if (st != ALICE_OK && warn)
				alice_error_set(warn, "%s", cerr.msg);
			return st;
		}
		if (warn)
			alice_error_set(warn, "%s", cerr.msg);
	}
	enum alice_chat_format f;
	alice_chat_detect_gguf(g, p ? p->arch : NULL, &f);
	struct alice_error berr = {{0}};
	enum alice_status st = alice_chat_template_builtin(f, p, out, &berr);
	if (st != ALICE_OK && warn)
		alice_error_set(warn, "%s", berr.msg);
	return st;
}

/* ---- render ----------------------------------------------------------- */

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The text a prefill continues: the last text part, or the content string. */
static const char *final_text(const struct alice_chat_template_input *in, size_t i)
{
	struct json_object *parts = in->parts ? in->parts[i] : NULL;
	if (parts && json_object_is_type(parts, json_type_array)) {
		for (size_t k = json_object_array_length(parts); k-- > 0;) {
			struct json_object *tx;
			if (json_object_object_get_ex(json_object_array_get_idx(parts, k), "text", &tx) &&
			    json_object_is_type(tx, json_type_string))
				return json_object_get_string(tx);
		}
	}
	return in->msgs[i].content ? in->msgs[i].content : "";
}

/* transformers' continue_final_message: cut *text (len *n) right after the
 * last occurrence of the final message fin (compared stripped; its leading
 * white space is kept when the template kept it). */
static enum alice_status cut_after(char *text, size_t *n, const char *fin, struct alice_error *err)
{
	size_t fl = strlen(fin), a = 0, b = fl;
	while (a < b && is_ws(fin[a]))
		a++;
	while (b > a && is_ws(fin[b - 1]))
		b--;
	size_t sl = b - a; /* stripped length, > 0 (empty finals are no prefill) */
	const char *loc = NULL;
	for (size_t i = 0; sl <= *n && i + sl <= *n; i++)
		if (memcmp(text + i, fin + a, sl) == 0)
			loc = text + i;
	if (!loc)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "the final assistant message (a prefill to continue) does not appear in the "
				  "rendered chat template: the template changes it");
	size_t at = (size_t)(loc - text), ll = fl - a; /* lstripped length */
	size_t end = at + ll <= *n && memcmp(loc, fin + a, ll) == 0 ? at + ll : at + sl;
	text[end] = '\0';
	*n = end;
	return ALICE_OK;
}

static struct json_object *build_ctx(const struct alice_chat_template *t, const struct alice_chat_template_input *in,
				     size_t n, bool gen)
{
	struct json_object *ctx = json_object_new_object(), *msgs = json_object_new_array();
	if (!ctx || !msgs) {
		json_object_put(ctx);
		json_object_put(msgs);
		return NULL;
	}
	json_object_object_add(ctx, "messages", msgs);
	for (size_t i = 0; i < n; i++) {
		struct json_object *m = json_object_new_object(), *content;
		struct json_object *parts = in->parts ? in->parts[i] : NULL;
		const char *s = in->msgs[i].content ? in->msgs[i].content : "";
		if (t->typed_content && parts) {
			content = json_object_get(parts);
		} else if (t->typed_content) {
			struct json_object *part = json_object_new_object();
			json_object_object_add(part, "type", json_object_new_string("text"));
			json_object_object_add(part, "text", json_object_new_string(s));
			content = json_object_new_array();
			json_object_array_add(content, part);
		} else {
			content = json_object_new_string(s);
		}
		json_object_object_add(m, "role", json_object_new_string(in->msgs[i].role ? in->msgs[i].role : ""));
		json_object_object_add(m, "content", content);
		if (in->extra && in->extra[i]) {
			json_object_object_foreach(in->extra[i], k, v)
				json_object_object_add(m, k, json_object_get(v));
		}
		json_object_array_add(msgs, m);
	}
	if (in->tools)
		json_object_object_add(ctx, "tools", json_object_get(in->tools));
	json_object_object_add(ctx, "add_generation_prompt", json_object_new_boolean(gen));
	json_object_object_add(ctx, "bos_token", json_object_new_string(t->bos));
	json_object_object_add(ctx, "eos_token", json_object_new_string(t->eos));
	if (in->kwargs) {
		json_object_object_foreach((struct json_object *)in->kwargs, k, v)
			json_object_object_add(ctx, k, json_object_get(v));
	}
	return ctx;
}

enum alice_status alice_chat_template_render(const struct alice_chat_template *t,
					     const struct alice_chat_template_input *in, char **out,
					     size_t *out_len, struct alice_error *err)
{
	if (!t || !in || !out || (in->n && !in->msgs))
		return alice_fail(err, ALICE_ERR_INVALID, "chat render: bad arguments");
	*out = NULL;
	if (out_len)
		*out_len = 0;
	if (t->kind == ALICE_CHAT_TEMPLATE_BUILTIN && in->kwargs && json_object_is_type(in->kwargs, json_type_object) &&
	    json_object_object_length(in->kwargs) > 0)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED,
				  "chat_template_kwargs need a Jinja chat template; this server renders the built-in "
				  "'%s' format",
				  alice_chat_format_name(t->format));
	if (t->kind == ALICE_CHAT_TEMPLATE_BUILTIN && in->tools)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED,
				  "tools need a Jinja chat template; this server renders the built-in '%s' format",
				  alice_chat_format_name(t->format));
	size_t n = in->n;
	bool prefill = false;
	const char *fin = NULL;
	if (n && in->msgs[n - 1].role && strcmp(in->msgs[n - 1].role, "assistant") == 0) {
		fin = final_text(in, n - 1);
		const char *c = fin;
		while (*c && is_ws(*c))
			c++;
		if (*c)
			prefill = true;
		else
			n--; /* an empty assistant turn: just the generation prompt */
	}
	char *text = NULL;
	size_t len = 0;
	enum alice_status st;
	if (t->jinja) {
		struct json_object *ctx = build_ctx(t, in, n, !prefill);
		if (!ctx)
			return alice_fail(err, ALICE_ERR_NOMEM, "chat render: out of memory");
		st = alice_jinja_render(t->jinja, ctx, NULL, &text, &len, err);
		json_object_put(ctx);
	} else {
		st = alice_chat_render(t->format, in->msgs, n, !prefill, NULL, &text, &len, err);
	}
	if (st != ALICE_OK)
		return st;
	if (prefill && (st = cut_after(text, &len, fin, err)) != ALICE_OK) {
		free(text);
		return st;
	}
	size_t bl = strlen(t->bos);
	if (in->strip_leading_bos && bl && len >= bl && memcmp(text, t->bos, bl) == 0) {
		memmove(text, text + bl, len - bl + 1);
		len -= bl;
	}
	*out = text;
	if (out_len)
		*out_len = len;
	return ALICE_OK;
}
