/* fuzz_openai_request.c — libFuzzer target for the server's request parser
 * (server/openai.c) and the operator caps (server/limits.c): any bytes sent as a /v1/chat/completions or
 * /v1/completions body must parse into a consistent request or be refused
 * with a 4xx/5xx error naming the problem, never crash or leak. The first
 * input byte picks the route so both parsers see every body shape. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alice/tokenizer.h"
#include "openai.h"

static void check_request(const struct srv_gen_request *r)
{
	if (r->kind == SRV_KIND_CHAT) {
		if (r->n_messages == 0 || !r->messages)
			abort();
		for (size_t i = 0; i < r->n_messages; i++)
			if (!r->messages[i].role || !r->messages[i].content)
				abort();
	} else {
		if (r->n_prompts == 0 || r->n_prompts > SRV_MAX_PROMPTS || !r->prompts)
			abort();
		for (size_t i = 0; i < r->n_prompts; i++)
			if (r->prompts[i].text ? r->prompts[i].tokens != NULL
					       : !r->prompts[i].tokens || r->prompts[i].n_tokens == 0)
				abort(); /* exactly one of text / non-empty token ids */
	}
	if (r->n < 1 || r->n > SRV_MAX_N || r->n_stop > SRV_MAX_STOP)
		abort();
	if (r->sampling.n_probs < 0 || r->sampling.n_probs > SRV_MAX_TOP_LOGPROBS)
		abort();
	if (r->max_tokens == 0 || r->max_tokens < -1)
		abort();
	if (!(r->sampling.temperature >= 0.0f && r->sampling.temperature <= 2.0f) ||
	    !(r->sampling.top_p >= 0.0f && r->sampling.top_p <= 1.0f))
		abort();
	if (r->n_logit_bias > SRV_MAX_LOGIT_BIAS || (r->n_logit_bias && !r->logit_bias) ||
	    r->sampling.logit_bias != r->logit_bias || r->sampling.n_logit_bias != r->n_logit_bias)
		abort();
	for (size_t i = 0; i < r->n_stop; i++)
		if (!r->stop[i])
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	enum srv_kind kind = (data[0] & 1) ? SRV_KIND_COMPLETION : SRV_KIND_CHAT;
	const char *body = (const char *)data + 1;
	size_t len = size - 1;

	struct srv_gen_request r;
	struct srv_api_error e;
	memset(&e, 0, sizeof(e));
	if (srv_openai_parse(kind, body, len, NULL, &r, &e) == 0) {
		check_request(&r);
		/* the operator caps (limits.c) on top: refused with 400/413, or
		 * the request honours them */
		static const struct srv_limits lim = {2, 8, 3, 64};
		if (srv_limits_check(&lim, &r, &e) == 0) {
			if (r.n > 2 || r.max_tokens < 1 || r.max_tokens > 8 ||
			    (r.kind == SRV_KIND_CHAT && r.n_messages > 3) || (r.grammar && alice_grammar_source_bytes(r.grammar) > 64))
				abort();
		} else if ((e.status != 400 && e.status != 413) || !e.message[0]) {
			abort();
		}
		srv_gen_request_clear(&r);
	} else {
		if (e.status < 400 || e.status > 599 || !e.message[0] || !e.type)
			abort();
		/* cleared on failure */
		if (r.messages || r.prompts || r.grammar || r.model || r.logit_bias)
			abort();
		json_object_put(srv_api_error_json(&e));
	}
	/* the caps applied by the parser itself (GBNF over the size cap is
	 * refused before it is compiled): a request it accepts honours them */
	static const struct srv_limits caps = {2, 8, 3, 64};
	if (srv_openai_parse(kind, body, len, &caps, &r, &e) == 0) {
		check_request(&r);
		if (r.n > 2 || r.max_tokens < 1 || r.max_tokens > 8 || (r.kind == SRV_KIND_CHAT && r.n_messages > 3) ||
		    (r.grammar && alice_grammar_source_bytes(r.grammar) > 64))
			abort();
		srv_gen_request_clear(&r);
	} else if (e.status < 400 || e.status > 599 || !e.message[0]) {
		abort();
	}
	/* The UTF-8 repair used on token pieces (core): output must be valid
	 * UTF-8 of bounded size, and valid input must come back unchanged. */
	size_t out_len = 0;
	char *clean = alice_utf8_repair(body, len, &out_len);
	if (!clean)
		return 0;
	if (out_len > len * 3 || clean[out_len] != '\0')
		abort();
	size_t again_len = 0;
	char *again = alice_utf8_repair(clean, out_len, &again_len);
	if (again && (again_len != out_len || memcmp(again, clean, out_len) != 0))
		abort(); /* sanitized text is valid, so it must be a fixed point */
	free(again);
	free(clean);
	return 0;
}
