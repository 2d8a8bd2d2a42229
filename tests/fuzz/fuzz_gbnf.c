/* fuzz_gbnf.c — libFuzzer target for the GBNF parser and matcher. The input
 * is "<grammar>\0<text>": any grammar must parse or be refused with an error
 * (never crash, overflow the C stack or run away); a grammar that parses is
 * driven over the text byte by byte, with masks over a small vocabulary of
 * every single byte plus a few multi-byte pieces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alice/grammar.h"

static struct alice_grammar_vocab *vocab;
static size_t n_vocab;

static void build_vocab(void)
{
	static const char *extra[] = {"\xc3\xa9", "\xe4\xb8", "\xad", "ab", "\"a", "{\"", "\": ", "  ",
				      "\n", "true", "\xf0\x9f\x98\x80", ""};
	static char bytes[256];
	const char *pieces[256 + 16];
	size_t lens[256 + 16];
	uint8_t kinds[256 + 16];
	size_t n = 0;
	for (int i = 0; i < 256; i++) {
		bytes[i] = (char)i;
		pieces[n] = &bytes[i];
		lens[n] = 1;
		kinds[n++] = ALICE_GRAMMAR_TOKEN_TEXT;
	}
	for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
		pieces[n] = extra[i];
		lens[n] = strlen(extra[i]);
		kinds[n++] = ALICE_GRAMMAR_TOKEN_TEXT;
	}
	pieces[n] = "";
	lens[n] = 0;
	kinds[n++] = ALICE_GRAMMAR_TOKEN_EOG;
	struct alice_error err;
	if (alice_grammar_vocab_build(pieces, lens, kinds, n, &vocab, &err) != ALICE_OK)
		abort();
	n_vocab = n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!vocab)
		build_vocab();
	if (size > 8192)
		return 0;
	const uint8_t *nul = memchr(data, 0, size);
	size_t glen = nul ? (size_t)(nul - data) : size;
	const uint8_t *text = nul ? nul + 1 : NULL;
	size_t tlen = nul ? size - glen - 1 : 0;
	if (tlen > 64)
		tlen = 64;
	struct alice_grammar *g = NULL;
	struct alice_error err;
	struct alice_grammar_errpos pos;
	if (alice_grammar_parse((const char *)data, glen, &g, &err, &pos) != ALICE_OK) {
		if (g || !err.msg[0])
			abort(); /* a failure must leave no grammar and say why */
		return 0;
	}
	struct alice_grammar_state *st = NULL;
	if (alice_grammar_state_create(g, &st, &err) != ALICE_OK) {
		alice_grammar_free(g);
		return 0;
	}
	uint8_t mask[512];
	for (size_t i = 0; i <= tlen; i++) {
		if (alice_grammar_state_mask(st, vocab, mask, &err) != ALICE_OK)
			break;
		(void)alice_grammar_state_can_end(st);
		(void)alice_grammar_state_must_end(st);
		if (i == tlen)
			break;
		/* a byte the mask allows must be accepted, and one it refuses rejected */
		int allowed = mask[text[i]];
		enum alice_status rc = alice_grammar_state_accept_bytes(st, &text[i], 1, &err);
		if (rc == ALICE_ERR_RANGE)
			break;
		if ((rc == ALICE_OK) != allowed)
			abort();
		if (i == tlen / 2) { /* clones must carry the position */
			struct alice_grammar_state *cl;
			if (alice_grammar_state_clone(st, &cl, &err) == ALICE_OK) {
				if (alice_grammar_state_can_end(cl) != alice_grammar_state_can_end(st))
					abort();
				alice_grammar_state_free(st);
				st = cl;
			}
		}
	}
	alice_grammar_state_free(st);
	alice_grammar_free(g);
	return 0;
}
