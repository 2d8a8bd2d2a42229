/* tokenizer_wpm.c — WordPiece (tokenizer.ggml.model = "bert"): BERT's basic
 * tokenizer, then greedy longest-match pieces.
 *
 * As llama.cpp's converter writes a WordPiece vocabulary, a word-initial
 * piece is stored with a leading U+2581 ("▁hello") and a continuation piece
 * bare ("fe", BERT's "##fe"). Normalisation (tokenizer.ggml.normalizer.*):
 * lowercase, and strip accents (a precomposed letter becomes its base
 * letter, nonspacing marks are dropped). Then whitespace separates words,
 * control characters and U+0000/U+FFFD vanish, and each punctuation mark,
 * ASCII symbol and CJK ideograph is a word of its own. A word is cut into
 * the longest vocabulary pieces from the left; a word with any part that
 * matches nothing becomes one [UNK]. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* BERT's CJK ideograph blocks (its _is_chinese_char) */
static bool is_cjk(uint32_t c)
{
	return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
	       (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
	       (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Pieces of one word (w[0..n) starts with U+2581), appended to out. */
static bool encode_word(const struct alice_tokenizer *t, const char *w, size_t n, struct tok_ivec *out)
{
	size_t start = out->n;
	for (size_t i = 0; i < n;) {
		size_t j = n - i > t->max_token_len ? i + t->max_token_len : n;
		int32_t id = -1;
		for (; j > i; j--)
			if ((id = tok_lookup(t, w + i, j - i)) >= 0)
				break;
		if (id < 0) { /* an unmatched part: the whole word is unknown */
			out->n = start;
			break;
		}
		if (!tok_ivec_push(out, id))
			return false;
		i = j;
	}
	if (out->n == start && !tok_ivec_push(out, t->unk))
		return false;
	return true;
}

enum alice_status tok_wpm_encode(const struct alice_tokenizer *t, const char *text, size_t len,
				 struct tok_ivec *out)
{
	/* a word: U+2581 + up to 4 bytes per input byte's code point (lowercase
	 * can lengthen a character's UTF-8, never beyond 4 bytes a code point) */
	char *w = malloc(3 + 4 * len + 4);
	if (!w)
		return ALICE_ERR_NOMEM;
	size_t wn = 0;
	enum alice_status st = ALICE_OK;
#define FLUSH()                                                            \
	do {                                                               \
		if (wn > 0 && !encode_word(t, w, 3 + wn, out)) {           \
			st = ALICE_ERR_NOMEM;                              \
			goto out;                                          \
		}                                                          \
		wn = 0;                                                    \
	} while (0)
	memcpy(w, "\xe2\x96\x81", 3);
	for (size_t off = 0; off < len;) {
		uint32_t c = alice_utf8_decode_lenient((const unsigned char *)text, len, &off);
		if (t->strip_accents)
			c = alice_ucp_base(c);
		uint16_t f = alice_ucp_flags(c);
		if (f & ALICE_UCP_WHITESPACE) {
			FLUSH();
			continue;
		}
		if (c == 0 || c == 0xFFFD || (f & ALICE_UCP_CONTROL))
			continue;
		if (t->strip_accents && alice_ucp_is_nonspacing_mark(c))
			continue;
		if (t->lowercase)
			c = alice_ucp_lower(c);
		char u[4];
		size_t un = alice_utf8_encode(c, u);
		if ((f & ALICE_UCP_PUNCT) || (c < 0x7F && (f & ALICE_UCP_SYMBOL)) || is_cjk(c)) {
			FLUSH();
			memcpy(w + 3, u, un);
			wn = un;
			FLUSH();
			continue;
		}
		memcpy(w + 3 + wn, u, un);
		wn += un;
	}
	FLUSH();
#undef FLUSH
out:
	free(w);
	return st;
}
