/* chat_tmpl.c — the server's chat template (see chat_tmpl.h). */
#include "chat_tmpl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>

#include "alice/chat_template.h"
#include "alice/jinja.h"
#include "alice/log.h"
#include "alice/sbuf.h"
#include "alice/tokenizer.h"

/* A special token's text as a NUL-terminated copy ("" when there is none). */
static char *token_text(const struct alice_tokenizer *tok, int32_t id)
{
	size_t len = 0;
	const char *p = id >= 0 ? alice_tokenizer_token_text(tok, id, &len) : NULL;
	char *s = malloc(p ? len + 1 : 1);
	if (s) {
		if (p)
			memcpy(s, p, len);
		s[p ? len : 0] = '\0';
	}
	return s;
}

enum alice_status srv_chat_setup(struct srv *s, char *msg, size_t cap)
{
	const struct alice_tokenizer *tok = alice_model_tokenizer(s->model);
	char *bos = token_text(tok, alice_tokenizer_bos(tok)), *eos = token_text(tok, alice_tokenizer_eos(tok));
	struct alice_chat_template_params p = {.bos_text = bos, .eos_text = eos, .arch = alice_model_arch(s->model)};
	struct alice_error err = {{0}};
	enum alice_status st = ALICE_ERR_NOMEM;
	if (!bos || !eos) {
		snprintf(msg, cap, "chat template: out of memory");
		goto out;
	}
	if (s->cfg.chat_template) { /* validated in main(); cannot fail but for memory */
		enum alice_chat_format f = ALICE_CHAT_FORMAT_GENERIC;
		alice_chat_format_from_name(s->cfg.chat_template, &f, NULL);
		st = alice_chat_template_builtin(f, &p, &s->chat_tmpl, &err);
	} else if (s->cfg.chat_template_file) {
		st = alice_chat_template_jinja(s->cfg.chat_template_src, s->cfg.chat_template_len,
					       ALICE_CHAT_TEMPLATE_FILE, &p, &s->chat_tmpl, &err);
	} else {
		st = alice_chat_template_from_gguf(alice_model_gguf(s->model), &p, &s->chat_tmpl, &err);
		if (st == ALICE_OK && err.msg[0])
			alice_log(ALICE_LOG_WARN,
				  "the chat template stored in %s (tokenizer.chat_template) does not compile: %s; "
				  "using the built-in '%s' format",
				  s->cfg.model_path, err.msg, alice_chat_template_name(s->chat_tmpl));
	}
	if (st != ALICE_OK) {
		snprintf(msg, cap, "chat template%s%s: %s",
			 s->cfg.chat_template_file ? " " : "", s->cfg.chat_template_file ? s->cfg.chat_template_file : "",
			 err.msg);
		goto out;
	}
	s->chat_format = alice_chat_template_format(s->chat_tmpl);
out:
	free(bos);
	free(eos);
	return st;
}

/* A template of the GENERIC tool format shows the tools but teaches no call
 * format, so the system message tells the model the JSON that the parse
 * (alice/tool_call.h) reads, as llama.cpp's generic handler does. */
static const char GENERIC_NOTE[] =
	"To call tools, reply with only a JSON object: {\"tool_calls\": [{\"name\": \"<function name>\", "
	"\"arguments\": {<its arguments>}}]}";

struct note_msgs {
	struct alice_chat_message *msgs;
	struct json_object **parts, **extra; /* borrowed entries */
	char *sys;
};

static void note_free(struct note_msgs *m)
{
	free(m->msgs);
	free(m->parts);
	free(m->extra);
	free(m->sys);
}

/* in's messages with GENERIC_NOTE in the system message (added first when
 * there is none): 0, or -1 when out of memory. */
static int add_generic_note(const struct srv_gen_request *r, struct alice_chat_template_input *in,
			    struct note_msgs *m)
{
	bool has_sys = r->n_messages && strcmp(r->messages[0].role, "system") == 0;
	size_t off = has_sys ? 0 : 1, n = r->n_messages + off;
	m->msgs = calloc(n, sizeof(*m->msgs));
	m->parts = calloc(n, sizeof(*m->parts));
	m->extra = calloc(n, sizeof(*m->extra));
	struct alice_sbuf b = {0};
	if (has_sys && r->messages[0].content && r->messages[0].content[0]) {
		alice_sb_add(&b, r->messages[0].content);
		alice_sb_add(&b, "\n\n");
	}
	alice_sb_add(&b, GENERIC_NOTE);
	m->sys = alice_sb_take(&b);
	if (!m->msgs || !m->parts || !m->extra || !m->sys)
		return -1;
	for (size_t i = 0; i < r->n_messages; i++) {
		m->msgs[i + off] = r->messages[i];
		m->parts[i + off] = r->parts ? r->parts[i] : NULL;
		m->extra[i + off] = r->extra ? r->extra[i] : NULL;
	}
	m->msgs[0].role = "system";
	m->msgs[0].content = m->sys;
	m->parts[0] = NULL;
	in->msgs = m->msgs;
	in->n = n;
	in->parts = m->parts;
	in->extra = m->extra;
	return 0;
}

int srv_chat_render(struct srv *s, const struct srv_gen_request *r, char **text, size_t *len,
		    struct srv_api_error *e)
{
	const struct alice_tokenizer *tok = alice_model_tokenizer(s->model);
	struct alice_chat_template_input in = {
		.msgs = r->messages,
		.n = r->n_messages,
		.parts = r->parts,
		.kwargs = r->chat_template_kwargs,
		.extra = r->extra,
		.tools = r->tool_choice == SRV_TOOL_CHOICE_NONE ? NULL : r->tools,
		.strip_leading_bos = alice_tokenizer_add_bos(tok),
	};
	struct note_msgs note = {0};
	if (in.tools && alice_chat_template_tool_format(s->chat_tmpl) == ALICE_TOOL_FORMAT_GENERIC &&
	    add_generic_note(r, &in, &note) != 0) {
		note_free(&note);
		srv_api_error_nomem(e);
		return -1;
	}
	struct alice_error aerr = {{0}};
	enum alice_status st = alice_chat_template_render(s->chat_tmpl, &in, text, len, &aerr);
	note_free(&note);
	if (st != ALICE_OK) {
		if (st == ALICE_ERR_NOMEM)
			srv_api_error_nomem(e);
		else if (st == ALICE_ERR_UNSUPPORTED)
			srv_api_error_invalid(e, strncmp(aerr.msg, "tools", 5) == 0 ? "tools" : "chat_template_kwargs",
					      "%s", aerr.msg);
		else
			srv_api_error_invalid(e, "messages", "chat template: %s", aerr.msg);
		return -1;
	}
	return 0;
}

int srv_chat_prompt(struct srv *s, const struct srv_gen_request *r, int32_t **tokens, size_t *n_tokens,
		    bool *think_open, struct srv_api_error *e)
{
	char *text = NULL;
	size_t len = 0;
	if (srv_chat_render(s, r, &text, &len, e) != 0)
		return -1;
	*think_open = alice_tool_think_open(text, len);
	struct alice_error aerr = {{0}};
	enum alice_status st = alice_tokenizer_encode(alice_model_tokenizer(s->model), text, len, true, true, tokens,
						      n_tokens, &aerr);
	free(text);
	if (st != ALICE_OK) {
		srv_api_error_invalid(e, "messages", "cannot tokenize the messages: %s", aerr.msg);
		return -1;
	}
	return 0;
}

int srv_chat_read_file(struct srv_config *cfg, char *msg, size_t cap)
{
	const char *path = cfg->chat_template_file;
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(msg, cap, "--chat-template-file %s: %s", path, strerror(errno));
		return -1;
	}
	struct alice_sbuf b = {0};
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		alice_sb_addn(&b, buf, n);
	int rd_err = ferror(f);
	fclose(f);
	size_t len = b.n;
	char *src = alice_sb_take(&b);
	if (rd_err || !src) {
		snprintf(msg, cap, "--chat-template-file %s: %s", path, rd_err ? "read error" : "out of memory");
		free(src);
		return -1;
	}
	struct alice_jinja *tpl = NULL;
	struct alice_error err = {{0}};
	if (alice_jinja_compile(src, len, &tpl, &err) != ALICE_OK) {
		snprintf(msg, cap, "--chat-template-file %s: the template does not compile: %s", path, err.msg);
		free(src);
		return -1;
	}
	alice_jinja_free(tpl);
	cfg->chat_template_src = src;
	cfg->chat_template_len = len;
	return 0;
}
