/* gen_prepare.c — a completion request from body to validated plan (see
 * gen.h): the wire format (openai.c), the operator caps (limits.c), then
 * every check that needs the model or the server, here: prompts
 * rendered and tokenized, token ids in range, prompt + max_tokens within the
 * context, the choices within the server's slots and queue, grammars usable. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "alice/chat_template.h"
#include "alice/tokenizer.h"
#include "chat_tmpl.h"
#include "gen.h"

uint64_t gen_random64(void)
{
	uint64_t x = 0;
	if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
	}
	return x;
}

/* The tools the grammar offers: all, or the named one. */
static struct json_object *forced_tools(const struct srv_gen_request *r)
{
	if (r->tool_choice != SRV_TOOL_CHOICE_NAMED)
		return json_object_get(r->tools);
	struct json_object *a = json_object_new_array();
	for (size_t i = 0; a && i < json_object_array_length(r->tools); i++) {
		struct json_object *t = json_object_array_get_idx(r->tools, i), *f, *nm;
		if (json_object_object_get_ex(t, "function", &f) && json_object_object_get_ex(f, "name", &nm) &&
		    strcmp(json_object_get_string(nm), r->tool_name) == 0)
			json_object_array_add(a, json_object_get(t));
	}
	return a;
}

/* tool_choice required / a named function: the grammar of a call in the
 * template's format (alice/tool_call.h). */
static int tool_grammar(struct srv *s, struct gen_plan *p, enum alice_tool_format f, struct srv_api_error *e)
{
	if (f == ALICE_TOOL_FORMAT_NONE) {
		srv_api_error_invalid(e, "tool_choice",
				      "this model's chat template has no tool-call format, so a tool call cannot be required");
		return -1;
	}
	struct json_object *tools = forced_tools(&p->r);
	struct alice_error aerr = {{0}};
	int64_t cap = s->cfg.limits.max_grammar_bytes;
	enum alice_status st = alice_tool_grammar(f, tools, p->r.parallel_tool_calls, p->think_open,
						  cap > 0 ? (size_t)cap : 0, &p->r.grammar, &aerr);
	json_object_put(tools);
	p->r.grammar_param = "tool_choice";
	if (st == ALICE_OK)
		return 0;
	if (st == ALICE_ERR_NOMEM)
		srv_api_error_nomem(e);
	else if (st == ALICE_ERR_RANGE)
		srv_api_error_set(e, 413, "invalid_request_error", "grammar_too_large", "tools",
				  "%s (--max-grammar-bytes)", aerr.msg);
	else
		srv_api_error_invalid(e, "tools", "%s", aerr.msg);
	return -1;
}

static int tokenize_chat(struct srv *s, struct gen_plan *p, struct srv_api_error *e)
{
	if (srv_chat_prompt(s, &p->r, &p->prompts[0].tokens, &p->prompts[0].n, &p->think_open, e) != 0)
		return -1;
	enum alice_tool_format f = alice_chat_template_tool_format(s->chat_tmpl);
	bool tools = p->r.tools && p->r.tool_choice != SRV_TOOL_CHOICE_NONE;
	p->parse_opts.format = tools ? f : ALICE_TOOL_FORMAT_NONE;
	p->parse_opts.reasoning = !s->cfg.reasoning_none && alice_chat_template_thinks(s->chat_tmpl);
	p->parse_opts.think_open = p->think_open;
	p->parse_opts.tools = p->r.tools;
	p->parse = p->parse_opts.format != ALICE_TOOL_FORMAT_NONE || p->parse_opts.reasoning;
	p->forced_call = p->r.tool_choice == SRV_TOOL_CHOICE_REQUIRED || p->r.tool_choice == SRV_TOOL_CHOICE_NAMED;
	if (p->forced_call)
		return tool_grammar(s, p, f, e);
	return 0;
}

static int tokenize_prompts(struct srv *s, struct gen_plan *p, struct srv_api_error *e)
{
	const struct alice_tokenizer *tok = alice_model_tokenizer(s->model);
	int32_t n_vocab = alice_model_n_vocab(s->model);
	struct alice_error aerr = {{0}};
	for (size_t i = 0; i < p->n_prompts; i++) {
		const struct srv_prompt *in = &p->r.prompts[i];
		struct gen_prompt *out = &p->prompts[i];
		if (in->text) {
			if (alice_tokenizer_encode(tok, in->text, strlen(in->text), true, true, &out->tokens, &out->n,
						   &aerr) != ALICE_OK) {
				srv_api_error_invalid(e, "prompt", "cannot tokenize the prompt: %s", aerr.msg);
				return -1;
			}
			continue;
		}
		for (size_t k = 0; k < in->n_tokens; k++)
			if (in->tokens[k] >= n_vocab) {
				srv_api_error_invalid(e, "prompt", "prompt token %d is not in the vocabulary (size %d)",
						      in->tokens[k], n_vocab);
				return -1;
			}
		if (!(out->tokens = malloc(in->n_tokens * sizeof(int32_t)))) {
			srv_api_error_nomem(e);
			return -1;
		}
		memcpy(out->tokens, in->tokens, in->n_tokens * sizeof(int32_t));
		out->n = in->n_tokens;
	}
	return 0;
}

/* Each prompt is non-empty and fits the slot's context with max_tokens. */
static int check_context(struct srv *s, const struct gen_plan *p, struct srv_api_error *e)
{
	uint32_t n_ctx = alice_engine_n_ctx(s->engine);
	const char *param = p->r.kind == SRV_KIND_CHAT ? "messages" : "prompt";
	int64_t max_tokens = p->r.max_tokens;
	for (size_t i = 0; i < p->n_prompts; i++) {
		size_t n = p->prompts[i].n;
		if (n == 0) {
			srv_api_error_invalid(e, param, "the prompt is empty (0 tokens)");
			return -1;
		}
		if (n > n_ctx) {
			srv_api_error_invalid(e, param, "the prompt has %zu tokens, more than the context size of %u tokens",
					      n, n_ctx);
			return -1;
		}
		if (max_tokens > 0 && n + (uint64_t)max_tokens > n_ctx) {
			srv_api_error_invalid(e, "max_tokens",
					      "the prompt has %zu tokens and max_tokens is %lld: %llu > the context size of %u tokens",
					      n, (long long)max_tokens, (unsigned long long)(n + (uint64_t)max_tokens), n_ctx);
			return -1;
		}
	}
	return 0;
}

/* The grammar can start: its initial state is within the matcher's limits
 * (live stacks, work budget). A grammar too ambiguous to start is the
 * request's fault, a 400, never a 503 a client would retry. Bounded: one
 * state creation is one budgeted matcher operation (grammar.h). */
static int check_grammar_starts(const struct gen_plan *p, struct srv_api_error *e)
{
	struct alice_grammar_state *gs = NULL;
	struct alice_error aerr = {{0}};
	enum alice_status st = alice_grammar_state_create(p->r.grammar, &gs, &aerr);
	alice_grammar_state_free(gs);
	if (st == ALICE_OK)
		return 0;
	if (st == ALICE_ERR_NOMEM)
		srv_api_error_nomem(e);
	else
		srv_api_error_invalid(e, p->r.grammar_param ? p->r.grammar_param : "grammar",
				      "the grammar cannot be used: %s", aerr.msg);
	return -1;
}

/* Token ids of logit_bias, the choices against the server's capacity, and
 * whether a grammar can be used at all. */
static int check_server(struct srv *s, const struct gen_plan *p, struct srv_api_error *e)
{
	int32_t n_vocab = alice_model_n_vocab(s->model);
	for (size_t i = 0; i < p->r.n_logit_bias; i++)
		if (p->r.logit_bias[i].token >= n_vocab) {
			srv_api_error_invalid(e, "logit_bias", "logit_bias token %lld is not in the vocabulary (size %d)",
					      (long long)p->r.logit_bias[i].token, n_vocab);
			return -1;
		}
	if (p->r.grammar && !s->grammar_vocab) {
		srv_api_error_set(e, 500, "server_error", NULL, NULL,
				  "grammars are unavailable: the token trie could not be built at load");
		return -1;
	}
	if (p->r.grammar && check_grammar_starts(p, e) != 0)
		return -1;
	size_t n_seq = p->n_prompts * (size_t)p->r.n;
	if (n_seq > (size_t)s->cfg.queue + (size_t)s->cfg.n_parallel) {
		srv_api_error_invalid(e, "n",
				      "this request needs %zu sequences (prompts x n); the server runs %d at once and queues %d",
				      n_seq, s->cfg.n_parallel, s->cfg.queue);
		return -1;
	}
	return 0;
}

/* The request's stop strings, then (chat) the template's end-of-turn texts. */
static int collect_stops(struct srv *s, struct gen_plan *p, struct srv_api_error *e)
{
	const char *const *tmpl = p->r.kind == SRV_KIND_CHAT ? alice_chat_stop_strings(s->chat_format) : NULL;
	size_t n_tmpl = 0;
	while (tmpl && tmpl[n_tmpl])
		n_tmpl++;
	p->stops = calloc(p->r.n_stop + n_tmpl + 1, sizeof(*p->stops));
	if (!p->stops) {
		srv_api_error_nomem(e);
		return -1;
	}
	for (size_t i = 0; i < p->r.n_stop; i++)
		p->stops[p->n_stops++] = p->r.stop[i];
	for (size_t i = 0; i < n_tmpl; i++)
		p->stops[p->n_stops++] = tmpl[i];
	return 0;
}

int gen_prepare(struct srv *s, enum srv_kind kind, const char *body, size_t len, struct gen_plan *p,
		struct srv_api_error *e)
{
	memset(p, 0, sizeof(*p));
	if (srv_openai_parse(kind, body, len, &s->cfg.limits, &p->r, e) != 0)
		return -1;
	p->n_prompts = kind == SRV_KIND_CHAT ? 1 : p->r.n_prompts;
	if (!(p->prompts = calloc(p->n_prompts, sizeof(*p->prompts)))) {
		srv_api_error_nomem(e);
		return -1;
	}
	if ((kind == SRV_KIND_CHAT ? tokenize_chat(s, p, e) : tokenize_prompts(s, p, e)) != 0 ||
	    check_context(s, p, e) != 0 || check_server(s, p, e) != 0 || collect_stops(s, p, e) != 0)
		return -1;
	p->seed = p->r.has_seed ? p->r.sampling.seed : gen_random64();
	return 0;
}

void gen_plan_free(struct gen_plan *p)
{
	for (size_t i = 0; p->prompts && i < p->n_prompts; i++)
		free(p->prompts[i].tokens);
	free(p->prompts);
	free(p->stops);
	srv_gen_request_clear(&p->r);
	memset(p, 0, sizeof(*p));
}
