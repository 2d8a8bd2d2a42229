/* gen_response.c — the OpenAI response JSON of the completion routes (see
 * gen.h): whole bodies, stream chunks, usage, and logprobs in the chat and
 * the legacy completions shapes. Token texts go through the core's one
 * UTF-8 repair policy (alice_utf8_repair). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/tokenizer.h"
#include "gen.h"

static struct json_object *json_str_n(const char *s, size_t n)
{
	return json_object_new_string_len(s ? s : "", s ? (int)n : 0);
}

/* The token's piece (raw bytes, at most cap) and its repaired text. */
struct piece {
	char raw[256];
	size_t n;
	char *text; /* NULL when out of memory */
	size_t text_len;
};

static void piece_get(const struct srv_gen *g, int32_t id, struct piece *p)
{
	size_t n = alice_tokenizer_piece(alice_model_tokenizer(g->srv->model), id, false, p->raw, sizeof(p->raw));
	p->n = n < sizeof(p->raw) ? n : sizeof(p->raw);
	p->text = alice_utf8_repair(p->raw, p->n, &p->text_len);
}

static struct json_object *token_bytes_json(const struct piece *p)
{
	struct json_object *a = json_object_new_array_ext((int)p->n);
	for (size_t i = 0; i < p->n; i++)
		json_object_array_add(a, json_object_new_int((unsigned char)p->raw[i]));
	return a;
}

/* {token, logprob, bytes}: the chat shape of one token. */
static struct json_object *chat_token_json(const struct srv_gen *g, const struct alice_token_logprob *t)
{
	struct piece p;
	piece_get(g, t->token, &p);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "token", json_str_n(p.text, p.text_len));
	json_object_object_add(o, "logprob", json_object_new_double(t->logprob));
	json_object_object_add(o, "bytes", token_bytes_json(&p));
	free(p.text);
	return o;
}

struct json_object *gen_logprobs_new(const struct srv_gen *g)
{
	if (g->kind == SRV_KIND_CHAT)
		return json_object_new_array();
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "tokens", json_object_new_array());
	json_object_object_add(o, "token_logprobs", json_object_new_array());
	json_object_object_add(o, "top_logprobs", json_object_new_array());
	json_object_object_add(o, "text_offset", json_object_new_array());
	return o;
}

static void legacy_add(const struct srv_gen *g, struct srv_choice *c, const struct alice_engine_event *ev)
{
	struct piece p;
	piece_get(g, ev->token.token, &p);
	struct json_object *a;
	json_object_object_get_ex(c->lp, "tokens", &a);
	json_object_array_add(a, json_str_n(p.text, p.text_len));
	free(p.text);
	json_object_object_get_ex(c->lp, "token_logprobs", &a);
	json_object_array_add(a, json_object_new_double(ev->token.logprob));
	json_object_object_get_ex(c->lp, "top_logprobs", &a);
	struct json_object *t = g->top_logprobs > 0 ? json_object_new_object() : NULL;
	for (int32_t i = 0; t && i < ev->n_top; i++) { /* {token: logprob} */
		struct piece q;
		piece_get(g, ev->top[i].token, &q);
		if (q.text && !json_object_object_get_ex(t, q.text, NULL))
			json_object_object_add(t, q.text, json_object_new_double(ev->top[i].logprob));
		free(q.text);
	}
	json_object_array_add(a, t);
	json_object_object_get_ex(c->lp, "text_offset", &a);
	json_object_array_add(a, json_object_new_int64((int64_t)c->text_offset));
	c->text_offset += p.n;
}

void gen_logprobs_add(struct srv_gen *g, struct srv_choice *c, const struct alice_engine_event *ev)
{
	if (g->kind != SRV_KIND_CHAT) {
		legacy_add(g, c, ev);
		return;
	}
	struct json_object *o = chat_token_json(g, &ev->token);
	struct json_object *top = json_object_new_array();
	for (int32_t i = 0; i < ev->n_top; i++)
		json_object_array_add(top, chat_token_json(g, &ev->top[i]));
	json_object_object_add(o, "top_logprobs", top);
	json_object_array_add(c->lp, o);
}

const char *gen_finish_reason(enum alice_engine_finish f)
{
	return f == ALICE_ENGINE_FINISH_STOP ? "stop" : "length";
}

void gen_counts(const struct srv_gen *g, struct srv_request_counts *out)
{
	memset(out, 0, sizeof(*out));
	out->prompt_tokens = g->prompt_tokens;
	for (size_t i = 0; i < g->n_choices; i++) {
		const struct srv_choice *c = &g->choices[i];
		out->completion_tokens += c->n_completion;
		if (c->prefill_ms > out->prefill_ms)
			out->prefill_ms = c->prefill_ms;
		if (c->decode_ms > out->decode_ms)
			out->decode_ms = c->decode_ms;
		/* cached prompt tokens, counted once per prompt like prompt_tokens */
		if (i == 0 || c->prompt_index != g->choices[i - 1].prompt_index)
			out->cached_tokens += c->n_cached;
	}
}

/* A measurement rounded for reading (3 decimals), still a JSON number. */
static struct json_object *json_measure(double d)
{
	char b[64];
	snprintf(b, sizeof(b), "%.3f", d);
	return json_object_new_double_s(d, b);
}

static struct json_object *usage_json(const struct srv_gen *g)
{
	struct srv_request_counts c;
	gen_counts(g, &c);
	/* generation speed after each choice's first token */
	double tps = c.decode_ms > 0 ? (double)(c.completion_tokens - (int64_t)g->n_choices) * 1000.0 / c.decode_ms
				     : 0.0;
	if (tps < 0)
		tps = 0;
	struct json_object *u = json_object_new_object();
	json_object_object_add(u, "prompt_tokens", json_object_new_int64(c.prompt_tokens));
	json_object_object_add(u, "completion_tokens", json_object_new_int64(c.completion_tokens));
	json_object_object_add(u, "total_tokens", json_object_new_int64(c.prompt_tokens + c.completion_tokens));
	struct json_object *details = json_object_new_object();
	json_object_object_add(details, "cached_tokens", json_object_new_int64(c.cached_tokens));
	json_object_object_add(u, "prompt_tokens_details", details);
	/* speculative decoding: drafted tokens, and how many the model accepted */
	int64_t drafted = 0, accepted = 0;
	for (size_t i = 0; i < g->n_choices; i++) {
		drafted += g->choices[i].n_drafted;
		accepted += g->choices[i].n_accepted;
	}
	json_object_object_add(u, "draft_tokens", json_object_new_int64(drafted));
	json_object_object_add(u, "draft_accepted_tokens", json_object_new_int64(accepted));
	json_object_object_add(u, "tokens_per_second", json_measure(tps));
	json_object_object_add(u, "prefill_ms", json_measure(c.prefill_ms));
	json_object_object_add(u, "decode_ms", json_measure(c.decode_ms));
	return u;
}

static struct json_object *body_base(const struct srv_gen *g, const char *object)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(g->id));
	json_object_object_add(o, "object", json_object_new_string(object));
	json_object_object_add(o, "created", json_object_new_int64(g->created));
	json_object_object_add(o, "model", json_object_new_string(g->srv->model_id));
	json_object_object_add(o, "system_fingerprint", json_object_new_string("alice-llm-" ALICE_VERSION));
	return o;
}

static struct json_object *chunk_base(const struct srv_gen *g)
{
	return body_base(g, g->kind == SRV_KIND_CHAT ? "chat.completion.chunk" : "text_completion");
}

/* Chat: {"content": lp} or null; completions: the legacy object or null. */
static struct json_object *logprobs_field(const struct srv_gen *g, struct json_object *lp)
{
	if (!lp)
		return NULL;
	if (g->kind != SRV_KIND_CHAT)
		return json_object_get(lp);
	struct json_object *l = json_object_new_object();
	json_object_object_add(l, "content", json_object_get(lp));
	return l;
}

static struct json_object *chunk_with(const struct srv_gen *g, const struct srv_choice *c, const char *key,
				      struct json_object *val, const char *finish, struct json_object *lp)
{
	struct json_object *o = chunk_base(g);
	struct json_object *ch = json_object_new_object();
	json_object_object_add(ch, "index", json_object_new_int(c->index));
	json_object_object_add(ch, key, val);
	json_object_object_add(ch, "logprobs", logprobs_field(g, lp));
	json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
	struct json_object *arr = json_object_new_array();
	json_object_array_add(arr, ch);
	json_object_object_add(o, "choices", arr);
	if (g->include_usage)
		json_object_object_add(o, "usage", NULL);
	return o;
}

struct json_object *gen_chunk_delta(const struct srv_gen *g, const struct srv_choice *c, struct json_object *delta,
				    const char *finish, struct json_object *lp)
{
	return chunk_with(g, c, "delta", delta, finish, lp);
}

struct json_object *gen_chunk(const struct srv_gen *g, const struct srv_choice *c, const char *text,
			      size_t len, bool role, const char *finish, struct json_object *lp)
{
	if (g->kind != SRV_KIND_CHAT)
		return chunk_with(g, c, "text", json_str_n(text, len), finish, lp);
	struct json_object *d = json_object_new_object();
	if (role)
		json_object_object_add(d, "role", json_object_new_string("assistant"));
	if (text)
		json_object_object_add(d, "content", json_str_n(text, len));
	return chunk_with(g, c, "delta", d, finish, lp);
}

struct json_object *gen_usage_chunk(const struct srv_gen *g)
{
	struct json_object *o = chunk_base(g);
	json_object_object_add(o, "choices", json_object_new_array());
	json_object_object_add(o, "usage", usage_json(g));
	return o;
}

struct json_object *gen_body(const struct srv_gen *g)
{
	struct json_object *o = body_base(g, g->kind == SRV_KIND_CHAT ? "chat.completion" : "text_completion");
	struct json_object *arr = json_object_new_array();
	for (size_t i = 0; i < g->n_choices; i++) {
		const struct srv_choice *c = &g->choices[i];
		struct json_object *ch = json_object_new_object();
		json_object_object_add(ch, "index", json_object_new_int(c->index));
		if (g->kind == SRV_KIND_CHAT) {
			struct json_object *m = json_object_new_object();
			json_object_object_add(m, "role", json_object_new_string("assistant"));
			if (g->parse)
				gen_tools_message(g, c, m);
			else
				json_object_object_add(m, "content", json_str_n(c->text.p ? c->text.p : "", c->text.n));
			json_object_object_add(ch, "message", m);
		} else {
			json_object_object_add(ch, "text", json_str_n(c->text.p ? c->text.p : "", c->text.n));
		}
		json_object_object_add(ch, "logprobs", logprobs_field(g, g->logprobs ? c->lp : NULL));
		json_object_object_add(ch, "finish_reason", json_object_new_string(gen_choice_finish(g, c)));
		json_object_array_add(arr, ch);
	}
	json_object_object_add(o, "choices", arr);
	json_object_object_add(o, "usage", usage_json(g));
	return o;
}
