/* grammar_fixture_vocab.h — a vocabulary's token pieces (decoded bytes) and
 * grammar token kinds from a GGUF file through core/tokenizer.c, the same
 * way the server builds its grammar vocab. For the grammar tests and
 * alice-grammar-bench. */
#ifndef ALICE_GRAMMAR_FIXTURE_VOCAB_H
#define ALICE_GRAMMAR_FIXTURE_VOCAB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/gguf.h"
#include "alice/grammar.h"
#include "alice/tokenizer.h"

struct gfx_vocab {
	size_t n;
	const char **piece; /* borrowed from the tokenizer */
	size_t *len;
	uint8_t *kind; /* enum alice_grammar_token_kind */
	struct alice_gguf *gguf;
	struct alice_tokenizer *tok;
};

static void gfx_vocab_free(struct gfx_vocab *v)
{
	free(v->piece);
	free(v->len);
	free(v->kind);
	alice_tokenizer_free(v->tok);
	alice_gguf_close(v->gguf);
	memset(v, 0, sizeof *v);
}

/* Load `path`. Returns 0 or -1 (message on stderr). */
static int gfx_vocab_load(const char *path, struct gfx_vocab *v)
{
	struct alice_error err;
	memset(v, 0, sizeof *v);
	if (alice_gguf_open(path, &v->gguf, &err) != ALICE_OK ||
	    alice_tokenizer_load(v->gguf, &v->tok, &err) != ALICE_OK) {
		fprintf(stderr, "%s\n", err.msg);
		gfx_vocab_free(v);
		return -1;
	}
	int32_t n = alice_tokenizer_n_vocab(v->tok);
	v->n = (size_t)n;
	v->piece = calloc(v->n + 1, sizeof *v->piece);
	v->len = calloc(v->n + 1, sizeof *v->len);
	v->kind = calloc(v->n + 1, 1);
	if (!v->piece || !v->len || !v->kind) {
		gfx_vocab_free(v);
		return -1;
	}
	for (int32_t i = 0; i < n; i++) {
		bool special = false;
		v->piece[i] = alice_tokenizer_token_bytes(v->tok, i, &v->len[i], &special);
		if (!v->piece[i]) {
			v->piece[i] = "";
			v->len[i] = 0;
		}
		v->kind[i] = alice_tokenizer_is_eog(v->tok, i) ? ALICE_GRAMMAR_TOKEN_EOG
			     : special			   ? ALICE_GRAMMAR_TOKEN_CONTROL
							   : ALICE_GRAMMAR_TOKEN_TEXT;
	}
	return 0;
}

#endif
