/* grammar_constraint.c — the grammar as a generation loop uses it: the token
 * trie built from a tokenizer, and the per-sequence constraint (a matcher
 * state plus the trie and the tokenizer) whose mask/accept speak token ids.
 * See grammar.h. */
#include <stdlib.h>

#include "alice/grammar.h"
#include "alice/tokenizer.h"

enum alice_status alice_grammar_vocab_from_tokenizer(const struct alice_tokenizer *tok,
						     struct alice_grammar_vocab **out,
						     struct alice_error *err)
{
	enum alice_status st = ALICE_ERR_NOMEM;
	int32_t n = alice_tokenizer_n_vocab(tok);
	const char **pieces = calloc((size_t)n + 1, sizeof(*pieces));
	size_t *lens = calloc((size_t)n + 1, sizeof(*lens));
	uint8_t *kinds = calloc((size_t)n + 1, 1);
	*out = NULL;
	if (!pieces || !lens || !kinds) {
		alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory building the token trie");
		goto out;
	}
	for (int32_t i = 0; i < n; i++) {
		bool special = false;
		pieces[i] = alice_tokenizer_token_bytes(tok, i, &lens[i], &special);
		if (!pieces[i]) {
			pieces[i] = "";
			lens[i] = 0;
		}
		kinds[i] = alice_tokenizer_is_eog(tok, i) ? ALICE_GRAMMAR_TOKEN_EOG
			   : special			  ? ALICE_GRAMMAR_TOKEN_CONTROL
							  : ALICE_GRAMMAR_TOKEN_TEXT;
	}
	st = alice_grammar_vocab_build(pieces, lens, kinds, (size_t)n, out, err);
out:
	free(pieces);
	free(lens);
	free(kinds);
	return st;
}

struct alice_grammar_constraint {
	struct alice_grammar *grammar; /* our reference */
	struct alice_grammar_state *st;
	const struct alice_grammar_vocab *vocab;
	const struct alice_tokenizer *tok;
};

enum alice_status alice_grammar_constraint_create(struct alice_grammar *g, const struct alice_grammar_vocab *v,
						  const struct alice_tokenizer *tok,
						  struct alice_grammar_constraint **out,
						  struct alice_error *err)
{
	*out = NULL;
	if (!g || !v || !tok)
		return alice_fail(err, ALICE_ERR_INVALID, "grammar constraint: grammar, vocab and tokenizer are required");
	if (alice_grammar_vocab_size(v) != (size_t)alice_tokenizer_n_vocab(tok))
		return alice_fail(err, ALICE_ERR_INVALID,
				  "grammar constraint: the token trie has %zu tokens, the tokenizer %d",
				  alice_grammar_vocab_size(v), alice_tokenizer_n_vocab(tok));
	struct alice_grammar_constraint *c = calloc(1, sizeof(*c));
	if (!c)
		return alice_fail(err, ALICE_ERR_NOMEM, "grammar constraint: out of memory");
	enum alice_status st = alice_grammar_state_create(g, &c->st, err);
	if (st != ALICE_OK) {
		free(c);
		return st;
	}
	c->grammar = alice_grammar_retain(g);
	c->vocab = v;
	c->tok = tok;
	*out = c;
	return ALICE_OK;
}

void alice_grammar_constraint_free(struct alice_grammar_constraint *c)
{
	if (!c)
		return;
	alice_grammar_state_free(c->st); /* before the grammar it points into */
	alice_grammar_free(c->grammar);
	free(c);
}

enum alice_status alice_grammar_constraint_mask(struct alice_grammar_constraint *c, uint8_t *mask,
						int32_t n_vocab, struct alice_error *err)
{
	if (n_vocab < 0 || (size_t)n_vocab != alice_grammar_vocab_size(c->vocab))
		return alice_fail(err, ALICE_ERR_INVALID, "grammar constraint: mask of %d tokens for a vocab of %zu",
				  n_vocab, alice_grammar_vocab_size(c->vocab));
	return alice_grammar_state_mask(c->st, c->vocab, mask, err);
}

enum alice_status alice_grammar_constraint_accept(struct alice_grammar_constraint *c, int32_t token,
						  bool *must_end, struct alice_error *err)
{
	size_t n = 0;
	bool special = false;
	const char *b = alice_tokenizer_token_bytes(c->tok, token, &n, &special);
	*must_end = false;
	if (!b)
		return alice_fail(err, ALICE_ERR_RANGE, "grammar constraint: token %d has no bytes", token);
	enum alice_status st = alice_grammar_state_accept_bytes(c->st, b, n, err);
	if (st != ALICE_OK)
		return st;
	*must_end = alice_grammar_state_must_end(c->st);
	return ALICE_OK;
}
