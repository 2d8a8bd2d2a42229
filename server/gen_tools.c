/* gen_tools.c — a chat choice's text as reasoning, content and tool calls
 * (alice/tool_call.h) in the OpenAI shapes: message.reasoning_content /
 * content / tool_calls, and the stream's deltas. A stream re-parses its
 * text so far after each token (partial) and sends what is new; the last
 * parse (final) is the same as the non-streamed one, so the assembled
 * stream equals the non-streamed message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

/* "call_" and 24 random hex digits. */
static struct json_object *call_id(void)
{
	char id[32];
	snprintf(id, sizeof(id), "call_%016llx%08x", (unsigned long long)gen_random64(), (unsigned)gen_random64());
	return json_object_new_string(id);
}

static struct json_object *call_json(const struct alice_tool_call *tc, int index, bool stream)
{
	struct json_object *o = json_object_new_object(), *f = json_object_new_object();
	if (stream)
		json_object_object_add(o, "index", json_object_new_int(index));
	json_object_object_add(o, "id", call_id());
	json_object_object_add(o, "type", json_object_new_string("function"));
	json_object_object_add(f, "name", json_object_new_string(tc->name));
	json_object_object_add(f, "arguments", json_object_new_string(stream ? "" : tc->arguments));
	json_object_object_add(o, "function", f);
	return o;
}

static struct json_object *str_n(const char *s, size_t n)
{
	return json_object_new_string_len(s ? s : "", (int)n);
}

static bool parse(const struct srv_gen *g, const char *text, size_t n, bool partial, struct alice_chat_parsed *out)
{
	memset(out, 0, sizeof(*out));
	struct alice_error err = {{0}};
	return alice_chat_parse(&g->parse_opts, text ? text : "", n, partial, out, &err) == ALICE_OK;
}

void gen_tools_message(const struct srv_gen *g, const struct srv_choice *c, struct json_object *m)
{
	struct alice_chat_parsed p;
	if (!parse(g, c->text.p, c->text.n, false, &p)) {
		/* out of memory: the text as it is */
		json_object_object_add(m, "content", str_n(c->text.p, c->text.n));
		alice_chat_parsed_clear(&p);
		return;
	}
	if (p.content.n || !p.n_calls)
		json_object_object_add(m, "content", str_n(p.content.p, p.content.n));
	else
		json_object_object_add(m, "content", NULL);
	if (p.reasoning.n)
		json_object_object_add(m, "reasoning_content", str_n(p.reasoning.p, p.reasoning.n));
	if (p.n_calls) {
		struct json_object *a = json_object_new_array();
		for (size_t i = 0; i < p.n_calls; i++)
			json_object_array_add(a, call_json(&p.calls[i], (int)i, false));
		json_object_object_add(m, "tool_calls", a);
	}
	alice_chat_parsed_clear(&p);
}

const char *gen_choice_finish(const struct srv_gen *g, const struct srv_choice *c)
{
	bool calls = false;
	if (g->parse && g->kind == SRV_KIND_CHAT && c->finish != ALICE_ENGINE_FINISH_ERROR) {
		if (g->stream) {
			calls = c->sent_calls > 0;
		} else {
			struct alice_chat_parsed p;
			calls = parse(g, c->text.p, c->text.n, false, &p) && p.n_calls > 0;
			alice_chat_parsed_clear(&p);
		}
	}
	return calls ? "tool_calls" : gen_finish_reason(c->finish);
}

/* The part of now[0..n) past what was sent (*sent bytes), if now still
 * extends it; *sent advances. */
static bool fresh(const struct alice_sbuf *now, size_t *sent, const char **p, size_t *len)
{
	if (now->n <= *sent)
		return false;
	*p = now->p + *sent;
	*len = now->n - *sent;
	*sent = now->n;
	return true;
}

struct json_object *gen_tools_deltas(const struct srv_gen *g, struct srv_choice *c, bool final,
				     struct json_object *lp, bool *lp_used)
{
	struct json_object *out = json_object_new_array();
	struct alice_chat_parsed p;
	*lp_used = false;
	if (!out)
		return NULL;
	if (!parse(g, c->raw.p, c->raw.n, !final, &p)) {
		alice_chat_parsed_clear(&p);
		return out;
	}
	const char *s;
	size_t n;
	struct json_object *d;
#define PUSH(delta)                                                                              \
	do {                                                                                     \
		json_object_array_add(out, gen_chunk_delta(g, c, (delta), NULL, *lp_used ? NULL : lp)); \
		*lp_used = lp != NULL;                                                           \
	} while (0)
	if (fresh(&p.reasoning, &c->sent_reasoning, &s, &n)) {
		d = json_object_new_object();
		json_object_object_add(d, "reasoning_content", str_n(s, n));
		PUSH(d);
	}
	if (fresh(&p.content, &c->sent_content, &s, &n)) {
		d = json_object_new_object();
		json_object_object_add(d, "content", str_n(s, n));
		PUSH(d);
	}
	/* each call: its id, type and name once, then its arguments as they
	 * grow. Only a forced call (grammar: well formed) is sent while being
	 * written; otherwise a call goes out once complete, since free text
	 * that starts like a call may still turn out to be text. */
	for (size_t i = c->sent_calls; i <= p.n_calls; i++) {
		const struct alice_tool_call *tc = i < p.n_calls ? &p.calls[i] : NULL;
		if (!tc && (final || !g->forced_call || !p.has_partial))
			break;
		if (!tc)
			tc = &p.partial;
		if (!c->call_open) {
			struct json_object *a = json_object_new_array();
			json_object_array_add(a, call_json(tc, (int)i, true));
			d = json_object_new_object();
			json_object_object_add(d, "tool_calls", a);
			PUSH(d);
			c->call_open = true;
			c->sent_args = 0;
		}
		size_t al = strlen(tc->arguments);
		if (al > c->sent_args) {
			struct json_object *f = json_object_new_object(), *o = json_object_new_object();
			json_object_object_add(f, "arguments", str_n(tc->arguments + c->sent_args, al - c->sent_args));
			json_object_object_add(o, "index", json_object_new_int((int)i));
			json_object_object_add(o, "function", f);
			struct json_object *a = json_object_new_array();
			json_object_array_add(a, o);
			d = json_object_new_object();
			json_object_object_add(d, "tool_calls", a);
			PUSH(d);
			c->sent_args = al;
		}
		if (i < p.n_calls) {
			c->sent_calls = i + 1;
			c->call_open = false;
			c->sent_args = 0;
		}
	}
#undef PUSH
	alice_chat_parsed_clear(&p);
	return out;
}
