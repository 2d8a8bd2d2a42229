/* tokenizer_spm.c — llama.cpp's SentencePiece-style tokenizer.
 *
 * The text (already with spaces as U+2581 and the space prefix added) is cut
 * into UTF-8 characters; then, repeatedly, the adjacent pair whose
 * concatenation is the vocabulary token with the highest score is merged
 * (ties: the leftmost pair). Final symbols that are not tokens (only single
 * characters can be) fall back to <0xNN> byte tokens. */
#include <stdlib.h>

#include "tokenizer_internal.h"
#include "tokenizer_merge.h"

/* A pair merges when the concatenation is a token; the best has the highest score. */
static bool spm_pair(const struct alice_tokenizer *t, const char *text, const struct tok_sym *a,
		     const struct tok_sym *b, double *prio)
{
	int32_t id = tok_lookup(t, text + a->off, a->n + b->n);
	if (id < 0)
		return false;
	*prio = -(double)t->tok[id].score;
	return true;
}

/* Tokenize text[0..len) using the caller's buffers. */
static bool spm_segment(const struct alice_tokenizer *t, const char *text, size_t len,
			struct tok_merge_work *w, struct tok_ivec *out)
{
	if (!tok_merge_run(w, t, text, len, spm_pair))
		return false;
	const struct tok_sym *sym = w->sym;
	for (int32_t i = len ? 0 : -1; i != -1; i = sym[i].next) {
		int32_t id = tok_lookup(t, text + sym[i].off, sym[i].n);
		if (id >= 0) {
			if (!tok_ivec_push(out, id))
				return false;
			continue;
		}
		/* Only merges that form tokens happen, so this is a single
		 * character missing from the vocabulary: its bytes. */
		for (uint32_t j = 0; j < sym[i].n; j++) {
			int32_t b = t->byte_tok[(unsigned char)text[sym[i].off + j]];
			if (b >= 0 && !tok_ivec_push(out, b))
				return false;
		}
	}
	return true;
}

enum alice_status tok_spm_encode(const struct alice_tokenizer *t, const char *text, size_t len,
				 struct tok_ivec *out)
{
	struct tok_merge_work w = {0};
	bool ok = true;
	/* An ASCII byte that no multi-character token contains can never be
	 * merged with a neighbour, so the text on either side of it is merged
	 * independently: same result, much smaller heaps (e.g. split at '\n'). */
	size_t a = 0;
	for (size_t i = 0; ok && i < len; i++) {
		if (!t->spm_barrier[(unsigned char)text[i]])
			continue;
		ok = spm_segment(t, text + a, i - a, &w, out) && spm_segment(t, text + i, 1, &w, out);
		a = i + 1;
	}
	ok = ok && spm_segment(t, text + a, len - a, &w, out);
	tok_merge_work_free(&w);
	return ok ? ALICE_OK : ALICE_ERR_NOMEM;
}
