/* limits.c — operator caps on parsed requests (see openai.h): the number of
 * choices, max_tokens, chat messages and grammar size, each set by a server
 * flag so one client cannot tie up the engine or the grammar compiler. */
#include "openai.h"

int srv_limits_check(const struct srv_limits *l, struct srv_gen_request *r, struct srv_api_error *e)
{
	if (l->max_n > 0 && r->n > l->max_n) {
		srv_api_error_invalid(e, "n", "'n' is %lld; this server allows at most %lld choices (--max-n)",
				      (long long)r->n, (long long)l->max_n);
		return -1;
	}
	if (l->max_tokens > 0) {
		if (r->max_tokens > l->max_tokens) {
			srv_api_error_invalid(e, "max_tokens",
					      "'max_tokens' is %lld; this server allows at most %lld (--max-tokens-limit)",
					      (long long)r->max_tokens, (long long)l->max_tokens);
			return -1;
		}
		if (r->max_tokens < 0)
			r->max_tokens = l->max_tokens;
	}
	if (l->max_messages > 0 && r->kind == SRV_KIND_CHAT && (int64_t)r->n_messages > l->max_messages) {
		srv_api_error_set(e, 413, "invalid_request_error", "too_many_messages", "messages",
				  "the request has %zu messages; this server allows at most %lld (--max-messages)",
				  r->n_messages, (long long)l->max_messages);
		return -1;
	}
	/* the GBNF, given or made from a schema */
	if (r->grammar && srv_limits_check_grammar(l, alice_grammar_source_bytes(r->grammar), e) != 0)
		return -1;
	return 0;
}

int srv_limits_check_grammar(const struct srv_limits *l, size_t bytes, struct srv_api_error *e)
{
	if (l->max_grammar_bytes > 0 && (int64_t)bytes > l->max_grammar_bytes) {
		srv_api_error_set(e, 413, "invalid_request_error", "grammar_too_large", "grammar",
				  "the grammar is %zu bytes; this server allows at most %lld (--max-grammar-bytes)",
				  bytes, (long long)l->max_grammar_bytes);
		return -1;
	}
	return 0;
}
