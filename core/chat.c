/* chat.c — native renderers of the common chat-template families and their
 * detection (see alice/chat.h). Each renderer mirrors the official Jinja
 * template for plain text messages; tests/core/test_chat.c holds them to
 * goldens rendered by jinja2 and to llama.cpp's fixture refs. */
#include "alice/chat.h"
#include "alice/gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alice/sbuf.h"

static const char *const format_names[ALICE_CHAT_FORMAT_COUNT] = {
	[ALICE_CHAT_FORMAT_CHATML] = "chatml",
	[ALICE_CHAT_FORMAT_QWEN2] = "qwen2",
	[ALICE_CHAT_FORMAT_QWEN3] = "qwen3",
	[ALICE_CHAT_FORMAT_QWEN35] = "qwen3.5",
	[ALICE_CHAT_FORMAT_LLAMA3] = "llama3",
	[ALICE_CHAT_FORMAT_LLAMA2] = "llama2",
	[ALICE_CHAT_FORMAT_MISTRAL] = "mistral",
	[ALICE_CHAT_FORMAT_GEMMA] = "gemma",
	[ALICE_CHAT_FORMAT_GENERIC] = "generic",
};

#define ALL_NAMES "chatml, qwen2, qwen3, qwen3.5, llama3, llama2, mistral, gemma, generic"

static const char QWEN2_DEFAULT_SYSTEM[] = "You are a helpful assistant";

const char *alice_chat_format_name(enum alice_chat_format f)
{
	if ((int)f < 0 || f >= ALICE_CHAT_FORMAT_COUNT)
		return "unknown";
	return format_names[f];
}

const char *alice_chat_format_names(void)
{
	return ALL_NAMES;
}

enum alice_status alice_chat_format_from_name(const char *name, enum alice_chat_format *out,
					      struct alice_error *err)
{
	if (!out)
		return alice_fail(err, ALICE_ERR_INVALID, "chat template: no output");
	if (!name)
		return alice_fail(err, ALICE_ERR_INVALID, "chat template: no name (valid: " ALL_NAMES ")");
	for (int i = 0; i < ALICE_CHAT_FORMAT_COUNT; i++) {
		if (strcmp(name, format_names[i]) == 0) {
			*out = (enum alice_chat_format)i;
			return ALICE_OK;
		}
	}
	/* common spellings of the same families */
	static const struct { const char *alias; enum alice_chat_format f; } aliases[] = {
		{"qwen35", ALICE_CHAT_FORMAT_QWEN35}, {"llama-3", ALICE_CHAT_FORMAT_LLAMA3},
		{"llama-2", ALICE_CHAT_FORMAT_LLAMA2}, {"gemma2", ALICE_CHAT_FORMAT_GEMMA},
	};
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		if (strcmp(name, aliases[i].alias) == 0) {
			*out = aliases[i].f;
			return ALICE_OK;
		}
	}
	return alice_fail(err, ALICE_ERR_NOT_FOUND, "unknown chat template '%.64s' (valid: " ALL_NAMES ")",
			  name);
}

static bool has(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

static enum alice_chat_format detect_template(const char *t)
{
	if (has(t, "<|im_start|>")) {
		/* Qwen3.5 opens a think block in its generation prompt: `'<think>\n' }}`
		 * (escaped or literal newline); Qwen3 only mentions <think>. */
		if (has(t, "'<think>\\n' }}") || has(t, "'<think>\n' }}") ||
		    (has(t, "<think>") && has(t, "render_content")))
			return ALICE_CHAT_FORMAT_QWEN35;
		if (has(t, "<think>"))
			return ALICE_CHAT_FORMAT_QWEN3;
		if (has(t, "You are a helpful assistant<|im_end|>"))
			return ALICE_CHAT_FORMAT_QWEN2;
		return ALICE_CHAT_FORMAT_CHATML;
	}
	if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>"))
		return ALICE_CHAT_FORMAT_LLAMA3;
	if (has(t, "<start_of_turn>"))
		return ALICE_CHAT_FORMAT_GEMMA;
	if (has(t, "[INST]"))
		return has(t, "<<SYS>>") ? ALICE_CHAT_FORMAT_LLAMA2 : ALICE_CHAT_FORMAT_MISTRAL;
	return ALICE_CHAT_FORMAT_COUNT; /* unrecognised */
}

static enum alice_chat_format detect_arch(const char *arch)
{
	static const struct { const char *arch; enum alice_chat_format f; } table[] = {
		{"qwen2", ALICE_CHAT_FORMAT_CHATML},   {"qwen2moe", ALICE_CHAT_FORMAT_CHATML},
		{"qwen3", ALICE_CHAT_FORMAT_QWEN3},    {"qwen3moe", ALICE_CHAT_FORMAT_QWEN3},
		{"qwen35", ALICE_CHAT_FORMAT_QWEN35},  {"qwen35moe", ALICE_CHAT_FORMAT_QWEN35},
		{"gemma", ALICE_CHAT_FORMAT_GEMMA},    {"gemma2", ALICE_CHAT_FORMAT_GEMMA},
		{"gemma3", ALICE_CHAT_FORMAT_GEMMA},
	};
	if (arch) {
		for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
			if (strcmp(arch, table[i].arch) == 0)
				return table[i].f;
	}
	/* "llama" alone does not say Llama 2, 3 or Mistral: the generic format. */
	return ALICE_CHAT_FORMAT_GENERIC;
}

enum alice_status alice_chat_detect(const char *template_text, const char *arch,
				    enum alice_chat_format *out)
{
	if (!out)
		return ALICE_ERR_INVALID;
	if (template_text && template_text[0]) {
		enum alice_chat_format f = detect_template(template_text);
		if (f != ALICE_CHAT_FORMAT_COUNT) {
			*out = f;
			return ALICE_OK;
		}
	}
	*out = detect_arch(arch);
	return ALICE_OK;
}

enum alice_status alice_chat_detect_gguf(const struct alice_gguf *g, const char *arch,
					 enum alice_chat_format *out)
{
	struct alice_gguf_str str = {0};
	char *tmpl = NULL;
	if (g && alice_gguf_get_str(g, "tokenizer.chat_template", &str, NULL) == ALICE_OK &&
	    (tmpl = malloc(str.len + 1))) {
		memcpy(tmpl, str.ptr, str.len);
		tmpl[str.len] = '\0';
	}
	enum alice_status st = alice_chat_detect(tmpl, arch, out);
	free(tmpl);
	return st;
}

const char *const *alice_chat_stop_strings(enum alice_chat_format f)
{
	static const char *const im_end[] = {"<|im_end|>", NULL};
	static const char *const eot[] = {"<|eot_id|>", NULL};
	static const char *const eos[] = {"</s>", NULL};
	static const char *const gemma[] = {"<end_of_turn>", NULL};
	static const char *const none[] = {NULL};
	switch (f) {
	case ALICE_CHAT_FORMAT_CHATML:
	case ALICE_CHAT_FORMAT_QWEN2:
	case ALICE_CHAT_FORMAT_QWEN3:
	case ALICE_CHAT_FORMAT_QWEN35:
	case ALICE_CHAT_FORMAT_GENERIC: return im_end;
	case ALICE_CHAT_FORMAT_LLAMA3: return eot;
	case ALICE_CHAT_FORMAT_LLAMA2:
	case ALICE_CHAT_FORMAT_MISTRAL: return eos;
	case ALICE_CHAT_FORMAT_GEMMA: return gemma;
	case ALICE_CHAT_FORMAT_COUNT: break;
	}
	return none;
}

/* ---- string building -------------------------------------------------- */

/* A borrowed slice of a message's content. */
struct span {
	const char *p;
	size_t n;
};

static void sb_span(struct alice_sbuf *b, struct span s)
{
	alice_sb_addn(b, s.p, s.n);
}

/* Python's str.isspace() code points (what Jinja's trim and str.strip() remove). */
static bool is_space_cp(uint32_t c)
{
	return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
	       c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
	       c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Decode the UTF-8 sequence at p[0..n) (n >= 1); returns its length, or 0
 * when malformed (malformed bytes are never whitespace). */
static size_t utf8_decode(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t len = p[0] < 0x80 ? 1 : (p[0] >> 5) == 0x6 ? 2 : (p[0] >> 4) == 0xe ? 3 : (p[0] >> 3) == 0x1e ? 4 : 0;
	if (len == 0 || len > n)
		return 0;
	uint32_t c = len == 1 ? p[0] : len == 2 ? p[0] & 0x1f : len == 3 ? p[0] & 0x0f : p[0] & 0x07;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3f);
	}
	*cp = c;
	return len;
}

static struct span span_of(const char *s)
{
	return (struct span){s ? s : "", s ? strlen(s) : 0};
}

/* Strip leading and trailing whitespace as Python's str.strip() does. */
static struct span trim(struct span s)
{
	uint32_t cp;
	size_t len;
	while (s.n && (len = utf8_decode((const unsigned char *)s.p, s.n, &cp)) && is_space_cp(cp))
		s.p += len, s.n -= len;
	while (s.n) {
		size_t start = s.n - 1; /* back to the lead byte of the last character */
		while (start > 0 && s.n - start < 4 && ((unsigned char)s.p[start] & 0xc0) == 0x80)
			start--;
		len = utf8_decode((const unsigned char *)s.p + start, s.n - start, &cp);
		if (len != s.n - start || !is_space_cp(cp))
			break;
		s.n = start;
	}
	return s;
}

static struct span lstrip_nl(struct span s)
{
	while (s.n && s.p[0] == '\n')
		s.p++, s.n--;
	return s;
}

static struct span rstrip_nl(struct span s)
{
	while (s.n && s.p[s.n - 1] == '\n')
		s.n--;
	return s;
}

/* First / last occurrence of needle inside s, or NULL. */
static const char *span_find(struct span s, const char *needle, bool last)
{
	size_t m = strlen(needle);
	const char *found = NULL;
	for (size_t i = 0; m <= s.n && i + m <= s.n; i++) {
		if (memcmp(s.p + i, needle, m) == 0) {
			found = s.p + i;
			if (!last)
				break;
		}
	}
	return found;
}

static bool span_starts(struct span s, const char *pfx)
{
	size_t m = strlen(pfx);
	return s.n >= m && memcmp(s.p, pfx, m) == 0;
}

static bool span_ends(struct span s, const char *sfx)
{
	size_t m = strlen(sfx);
	return s.n >= m && memcmp(s.p + s.n - m, sfx, m) == 0;
}

/* Qwen's split of an assistant message "<think>R</think>C": content is what
 * follows the last "</think>" (leading newlines dropped), reasoning what
 * precedes the first "</think>" and follows the last "<think>" before it. */
static bool split_think(struct span in, struct span *content, struct span *reasoning)
{
	const char *close_last = span_find(in, "</think>", true);
	if (!close_last)
		return false;
	const char *close_first = span_find(in, "</think>", false);
	*content = lstrip_nl((struct span){close_last + 8, (size_t)(in.p + in.n - (close_last + 8))});
	struct span r = rstrip_nl((struct span){in.p, (size_t)(close_first - in.p)});
	const char *open = span_find(r, "<think>", true);
	if (open)
		r = (struct span){open + 7, (size_t)(r.p + r.n - (open + 7))};
	*reasoning = lstrip_nl(r);
	return true;
}

/* ---- roles ------------------------------------------------------------ */

enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

static enum alice_status parse_roles(const struct alice_chat_message *msgs, size_t n, enum role *roles,
				     struct alice_error *err)
{
	for (size_t i = 0; i < n; i++) {
		const char *r = msgs[i].role;
		if (!r)
			return alice_fail(err, ALICE_ERR_INVALID, "messages[%zu]: missing role", i);
		if (strcmp(r, "system") == 0)
			roles[i] = ROLE_SYSTEM;
		else if (strcmp(r, "user") == 0)
			roles[i] = ROLE_USER;
		else if (strcmp(r, "assistant") == 0)
			roles[i] = ROLE_ASSISTANT;
		else
			return alice_fail(err, ALICE_ERR_INVALID,
					  "messages[%zu]: role '%.32s' is not supported by the chat "
					  "template (use system, user or assistant)",
					  i, r);
	}
	return ALICE_OK;
}

static const char *role_name(enum role r)
{
	return r == ROLE_SYSTEM ? "system" : r == ROLE_USER ? "user" : "assistant";
}

/* ---- renderers -------------------------------------------------------- */

struct ctx {
	const struct alice_chat_message *msgs;
	const enum role *roles;
	size_t n;
	bool gen;
	bool lead_bos;
	const char *bos, *eos;
	struct alice_sbuf *b;
	struct alice_error *err;
};

static void chatml_turn(struct alice_sbuf *b, const char *role, struct span content)
{
	alice_sb_add(b, "<|im_start|>");
	alice_sb_add(b, role);
	alice_sb_add(b, "\n");
	sb_span(b, content);
	alice_sb_add(b, "<|im_end|>\n");
}

static enum alice_status render_chatml(struct ctx *c, bool qwen2_default_system)
{
	if (qwen2_default_system && c->n > 0 && c->roles[0] != ROLE_SYSTEM)
		chatml_turn(c->b, "system", span_of(QWEN2_DEFAULT_SYSTEM));
	for (size_t i = 0; i < c->n; i++)
		chatml_turn(c->b, role_name(c->roles[i]), span_of(c->msgs[i].content));
	if (c->gen)
		alice_sb_add(c->b, "<|im_start|>assistant\n");
	return ALICE_OK;
}

/* Index of the last user message that is not a wrapped tool response; n when none. */
static size_t last_user_query(struct ctx *c, bool trimmed)
{
	for (size_t i = c->n; i-- > 0;) {
		if (c->roles[i] != ROLE_USER)
			continue;
		struct span s = span_of(c->msgs[i].content);
		if (trimmed)
			s = trim(s);
		if (!(span_starts(s, "<tool_response>") && span_ends(s, "</tool_response>")))
			return i;
	}
	return c->n;
}

static enum alice_status render_qwen3(struct ctx *c)
{
	size_t lq = last_user_query(c, false);
	if (lq == c->n)
		lq = c->n ? c->n - 1 : 0; /* the template's default: the last index */
	for (size_t i = 0; i < c->n; i++) {
		struct span content = span_of(c->msgs[i].content);
		if (c->roles[i] != ROLE_ASSISTANT) {
			chatml_turn(c->b, role_name(c->roles[i]), content);
			continue;
		}
		struct span reasoning = {"", 0};
		split_think(content, &content, &reasoning);
		alice_sb_add(c->b, "<|im_start|>assistant\n");
		if (i > lq && (i + 1 == c->n || reasoning.n)) {
			alice_sb_add(c->b, "<think>\n");
			sb_span(c->b, lstrip_nl(rstrip_nl(reasoning)));
			alice_sb_add(c->b, "\n</think>\n\n");
			sb_span(c->b, lstrip_nl(content));
		} else {
			sb_span(c->b, content);
		}
		alice_sb_add(c->b, "<|im_end|>\n");
	}
	if (c->gen)
		alice_sb_add(c->b, "<|im_start|>assistant\n");
	return ALICE_OK;
}

static enum alice_status render_qwen35(struct ctx *c)
{
	if (c->n == 0)
		return alice_fail(c->err, ALICE_ERR_INVALID, "messages: none given");
	size_t lq = last_user_query(c, true);
	if (lq == c->n)
		return alice_fail(c->err, ALICE_ERR_INVALID,
				  "messages: the qwen3.5 template needs a user message");
	for (size_t i = 0; i < c->n; i++) {
		struct span content = trim(span_of(c->msgs[i].content));
		switch (c->roles[i]) {
		case ROLE_SYSTEM:
			if (i != 0)
				return alice_fail(c->err, ALICE_ERR_INVALID,
						  "messages[%zu]: the qwen3.5 template accepts a "
						  "system message only first",
						  i);
			/* fall through */
		case ROLE_USER:
			chatml_turn(c->b, role_name(c->roles[i]), content);
			break;
		case ROLE_ASSISTANT: {
			struct span reasoning = {"", 0};
			split_think(content, &content, &reasoning);
			alice_sb_add(c->b, "<|im_start|>assistant\n");
			if (i > lq) {
				alice_sb_add(c->b, "<think>\n");
				sb_span(c->b, trim(reasoning));
				alice_sb_add(c->b, "\n</think>\n\n");
			}
			sb_span(c->b, content);
			alice_sb_add(c->b, "<|im_end|>\n");
			break;
		}
		}
	}
	/* The Jinja template appends "<think>\n" here; llama.cpp's built-in
	 * formatter (the refs' "chat" text) does not, and we follow the refs. */
	if (c->gen)
		alice_sb_add(c->b, "<|im_start|>assistant\n");
	return ALICE_OK;
}

static enum alice_status render_llama3(struct ctx *c)
{
	if (c->lead_bos)
		alice_sb_add(c->b, c->bos);
	for (size_t i = 0; i < c->n; i++) {
		alice_sb_add(c->b, "<|start_header_id|>");
		alice_sb_add(c->b, role_name(c->roles[i]));
		alice_sb_add(c->b, "<|end_header_id|>\n\n");
		sb_span(c->b, trim(span_of(c->msgs[i].content)));
		alice_sb_add(c->b, "<|eot_id|>");
	}
	if (c->gen)
		alice_sb_add(c->b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
	return ALICE_OK;
}

/* Llama 2 chat: the official template, not llama.cpp's variant (which drops
 * the spaces around assistant replies and the per-turn <s> in multi-turn
 * chats; both agree on single-turn prompts such as the fixture ref). The
 * system text becomes a <<SYS>> block at the start of the next message. */
static enum alice_status render_llama2(struct ctx *c)
{
	struct alice_sbuf tmp = {0};
	size_t pending_from = c->n; /* first unflushed system message */
	enum alice_status st = ALICE_OK;
	for (size_t i = 0; i <= c->n; i++) {
		if (i < c->n && c->roles[i] == ROLE_SYSTEM) {
			if (pending_from == c->n)
				pending_from = i;
			continue;
		}
		if (i == c->n && pending_from == c->n)
			break;
		/* several system texts are joined by "\n" into one <<SYS>> block */
		struct span content = i < c->n ? span_of(c->msgs[i].content) : (struct span){"", 0};
		if (pending_from < c->n) {
			tmp.n = 0;
			alice_sb_add(&tmp, "<<SYS>>\n");
			bool first = true;
			for (size_t j = pending_from; j < i; j++) {
				if (c->roles[j] != ROLE_SYSTEM)
					continue;
				if (!first)
					alice_sb_add(&tmp, "\n");
				sb_span(&tmp, span_of(c->msgs[j].content));
				first = false;
			}
			alice_sb_add(&tmp, "\n<</SYS>>\n\n");
			sb_span(&tmp, content);
			if (tmp.oom) {
				st = ALICE_ERR_NOMEM;
				goto out_tmp;
			}
			content = (struct span){tmp.p, tmp.n};
			pending_from = c->n;
		}
		if (i == c->n || c->roles[i] == ROLE_USER) { /* a trailing system text: its own turn */
			if (c->b->n > 0 || c->lead_bos)
				alice_sb_add(c->b, c->bos);
			alice_sb_add(c->b, "[INST] ");
			sb_span(c->b, trim(content));
			alice_sb_add(c->b, " [/INST]");
		} else {
			alice_sb_add(c->b, " ");
			sb_span(c->b, trim(content));
			alice_sb_add(c->b, " ");
			alice_sb_add(c->b, c->eos);
		}
	}
out_tmp:
	free(tmp.p);
	return st;
}

/* Mistral v0.2 has no system role; like llama.cpp, system texts go in front
 * of the next user message, each followed by "\n". */
static enum alice_status render_mistral(struct ctx *c)
{
	if (c->lead_bos)
		alice_sb_add(c->b, c->bos);
	size_t pending_from = c->n; /* first unflushed system message */
	for (size_t i = 0; i < c->n; i++) {
		struct span content = span_of(c->msgs[i].content);
		if (c->roles[i] == ROLE_SYSTEM) {
			if (pending_from == c->n)
				pending_from = i;
			continue;
		}
		if (c->roles[i] == ROLE_ASSISTANT) {
			sb_span(c->b, content);
			alice_sb_add(c->b, c->eos);
			continue;
		}
		alice_sb_add(c->b, "[INST] ");
		for (size_t j = pending_from; j < i; j++) {
			if (c->roles[j] == ROLE_SYSTEM) {
				sb_span(c->b, span_of(c->msgs[j].content));
				alice_sb_add(c->b, "\n");
			}
		}
		pending_from = c->n;
		sb_span(c->b, content);
		alice_sb_add(c->b, " [/INST]");
	}
	if (pending_from < c->n) { /* trailing system text: an instruction of its own */
		alice_sb_add(c->b, "[INST] ");
		bool first = true;
		for (size_t j = pending_from; j < c->n; j++) {
			if (c->roles[j] != ROLE_SYSTEM)
				continue;
			if (!first)
				alice_sb_add(c->b, "\n");
			sb_span(c->b, span_of(c->msgs[j].content));
			first = false;
		}
		alice_sb_add(c->b, " [/INST]");
	}
	return ALICE_OK;
}

/* Gemma has no system role; like llama.cpp, trimmed system texts go in front
 * of the next user turn followed by "\n\n" (several joined by "\n\n"). */
static enum alice_status render_gemma(struct ctx *c)
{
	if (c->lead_bos)
		alice_sb_add(c->b, c->bos);
	size_t pending_from = c->n;
	for (size_t i = 0; i < c->n; i++) {
		if (c->roles[i] == ROLE_SYSTEM) {
			if (pending_from == c->n)
				pending_from = i;
			continue;
		}
		bool user = c->roles[i] == ROLE_USER;
		alice_sb_add(c->b, user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
		if (user) {
			for (size_t j = pending_from; j < i; j++) {
				if (c->roles[j] == ROLE_SYSTEM) {
					sb_span(c->b, trim(span_of(c->msgs[j].content)));
					alice_sb_add(c->b, "\n\n");
				}
			}
			pending_from = c->n;
		}
		sb_span(c->b, trim(span_of(c->msgs[i].content)));
		alice_sb_add(c->b, "<end_of_turn>\n");
	}
	if (pending_from < c->n) {
		alice_sb_add(c->b, "<start_of_turn>user\n");
		bool first = true;
		for (size_t j = pending_from; j < c->n; j++) {
			if (c->roles[j] != ROLE_SYSTEM)
				continue;
			if (!first)
				alice_sb_add(c->b, "\n\n");
			sb_span(c->b, trim(span_of(c->msgs[j].content)));
			first = false;
		}
		alice_sb_add(c->b, "<end_of_turn>\n");
	}
	if (c->gen)
		alice_sb_add(c->b, "<start_of_turn>model\n");
	return ALICE_OK;
}

static const char *default_bos(enum alice_chat_format f)
{
	switch (f) {
	case ALICE_CHAT_FORMAT_LLAMA3: return "<|begin_of_text|>";
	case ALICE_CHAT_FORMAT_GEMMA: return "<bos>";
	case ALICE_CHAT_FORMAT_LLAMA2:
	case ALICE_CHAT_FORMAT_MISTRAL: return "<s>";
	default: return "";
	}
}

enum alice_status alice_chat_render(enum alice_chat_format f, const struct alice_chat_message *msgs,
				    size_t n, bool add_generation_prompt,
				    const struct alice_chat_render_opts *opts, char **out,
				    size_t *out_len, struct alice_error *err)
{
	if (!out)
		return alice_fail(err, ALICE_ERR_INVALID, "chat render: no output");
	*out = NULL;
	if (out_len)
		*out_len = 0;
	if ((int)f < 0 || f >= ALICE_CHAT_FORMAT_COUNT)
		return alice_fail(err, ALICE_ERR_INVALID, "chat render: unknown format %d", (int)f);
	if (n > 0 && !msgs)
		return alice_fail(err, ALICE_ERR_INVALID, "chat render: no messages array");

	enum role *roles = NULL;
	if (n > 0) {
		if (n > SIZE_MAX / sizeof(*roles))
			return alice_fail(err, ALICE_ERR_NOMEM, "chat render: too many messages");
		roles = malloc(n * sizeof(*roles));
		if (!roles)
			return alice_fail(err, ALICE_ERR_NOMEM, "chat render: out of memory");
	}
	enum alice_status st = parse_roles(msgs, n, roles, err);
	if (st != ALICE_OK)
		goto out_roles;

	struct alice_sbuf b = {0};
	alice_sb_add(&b, ""); /* a valid empty string even for an empty render */
	struct ctx c = {
		.msgs = msgs,
		.roles = roles,
		.n = n,
		.gen = add_generation_prompt,
		.lead_bos = opts && opts->add_leading_bos,
		.bos = opts && opts->bos_text ? opts->bos_text : default_bos(f),
		.eos = opts && opts->eos_text ? opts->eos_text : "</s>",
		.b = &b,
		.err = err,
	};
	switch (f) {
	case ALICE_CHAT_FORMAT_CHATML:
	case ALICE_CHAT_FORMAT_GENERIC: st = render_chatml(&c, false); break;
	case ALICE_CHAT_FORMAT_QWEN2: st = render_chatml(&c, true); break;
	case ALICE_CHAT_FORMAT_QWEN3: st = render_qwen3(&c); break;
	case ALICE_CHAT_FORMAT_QWEN35: st = render_qwen35(&c); break;
	case ALICE_CHAT_FORMAT_LLAMA3: st = render_llama3(&c); break;
	case ALICE_CHAT_FORMAT_LLAMA2: st = render_llama2(&c); break;
	case ALICE_CHAT_FORMAT_MISTRAL: st = render_mistral(&c); break;
	case ALICE_CHAT_FORMAT_GEMMA: st = render_gemma(&c); break;
	case ALICE_CHAT_FORMAT_COUNT: st = ALICE_ERR_INVALID; break;
	}
	if (st == ALICE_OK && b.oom)
		st = alice_fail(err, ALICE_ERR_NOMEM, "chat render: out of memory");
	if (st == ALICE_ERR_NOMEM && err && !err->msg[0])
		alice_error_set(err, "chat render: out of memory");
	if (st != ALICE_OK) {
		free(b.p);
		goto out_roles;
	}
	*out = b.p;
	if (out_len)
		*out_len = b.n;
out_roles:
	free(roles);
	return st;
}
