/* tokenizer_bpe.c — llama.cpp's BPE tokenizer (GPT-2 byte level, and the
 * raw-UTF-8 variant of Gemma 4).
 *
 * The text becomes code points (llama.cpp's lenient decoding: bad bytes are
 * U+FFFD), the pre-tokenizer cuts them into words, each word is written back
 * as UTF-8 and, for byte-level vocabularies, every byte replaced by its GPT-2
 * alphabet character. Inside a word the adjacent pair with the lowest merge
 * rank is merged until none is left (ties: leftmost). A final symbol that is
 * not a token is emitted byte by byte where a byte token exists. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "tokenizer_merge.h"

/* A pair merges when the merge table lists it; the best has the lowest rank. */
static bool bpe_pair(const struct alice_tokenizer *t, const char *w, const struct tok_sym *a,
		     const struct tok_sym *b, double *prio)
{
	int32_t rank = tok_merge_rank(t, w + a->off, a->n, w + b->off, b->n);
	if (rank < 0)
		return false;
	*prio = rank;
	return true;
}

static bool emit_symbol(const struct alice_tokenizer *t, const char *s, size_t n, struct tok_ivec *out)
{
	int32_t id = tok_lookup(t, s, n);
	if (id >= 0)
		return tok_ivec_push(out, id);
	static const char hex[] = "0123456789ABCDEF";
	for (size_t j = 0; j < n; j++) {
		unsigned char ch = (unsigned char)s[j];
		if (t->byte_encode) {
			id = tok_lookup(t, (const char *)&s[j], 1);
		} else {
			char buf[6] = {'<', '0', 'x', hex[ch >> 4], hex[ch & 15], '>'};
			id = tok_lookup(t, buf, 6);
		}
		if (id >= 0 && !tok_ivec_push(out, id))
			return false;
	}
	return true;
}

static bool encode_word(const struct alice_tokenizer *t, const char *w, size_t n, struct tok_merge_work *k,
			struct tok_ivec *out)
{
	if (t->ignore_merges && tok_lookup(t, w, n) >= 0)
		return emit_symbol(t, w, n, out);
	if (t->pre == TOK_PRE_GEMMA4) {
		size_t i = 0;
		while (i < n && w[i] == '\n')
			i++;
		if (i == n && tok_lookup(t, w, n) >= 0) /* newline runs are tokens as a whole */
			return emit_symbol(t, w, n, out);
	}
	if (!tok_merge_run(k, t, w, n, bpe_pair))
		return false;
	for (int32_t i = n ? 0 : -1; i != -1; i = k->sym[i].next)
		if (!emit_symbol(t, w + k->sym[i].off, k->sym[i].n, out))
			return false;
	return true;
}

enum alice_status tok_bpe_encode(const struct alice_tokenizer *t, const char *text, size_t len,
				 struct tok_ivec *out)
{
	enum alice_status st = ALICE_ERR_NOMEM;
	char *esc = NULL, *wbuf = NULL;
	uint32_t *cpts = NULL;
	struct tok_ivec lens = {0};
	struct tok_merge_work k = {0};
	if (t->escape_whitespace) {
		size_t n_sp = 0;
		for (size_t i = 0; i < len; i++)
			n_sp += text[i] == ' ';
		esc = malloc(len + 2 * n_sp + 1);
		if (!esc)
			goto out;
		size_t o = 0;
		for (size_t i = 0; i < len; i++) {
			if (text[i] == ' ') {
				memcpy(esc + o, "\xe2\x96\x81", 3);
				o += 3;
			} else {
				esc[o++] = text[i];
			}
		}
		text = esc;
		len = o;
	}
	cpts = malloc((len ? len : 1) * sizeof *cpts);
	if (!cpts)
		goto out;
	size_t ncp = 0;
	for (size_t off = 0; off < len;)
		cpts[ncp++] = alice_utf8_decode_lenient((const unsigned char *)text, len, &off);
	if (!tok_pretokenize(t->pre, cpts, ncp, &lens))
		goto out;
	/* a word's bytes: at most 4 UTF-8 bytes per code point, each at most
	 * 2 bytes in the GPT-2 alphabet */
	size_t max_word = 0;
	for (size_t i = 0; i < lens.n; i++)
		if ((size_t)lens.v[i] > max_word)
			max_word = (size_t)lens.v[i];
	wbuf = malloc(max_word * 8 + 1);
	if (!wbuf)
		goto out;
	size_t start = 0;
	for (size_t i = 0; i < lens.n; i++) {
		size_t wn = 0;
		for (size_t c = start; c < start + (size_t)lens.v[i]; c++) {
			char u[4];
			size_t un = alice_utf8_encode(cpts[c], u);
			for (size_t j = 0; j < un; j++) {
				unsigned char b = (unsigned char)u[j];
				if (t->byte_encode) {
					memcpy(wbuf + wn, t->gpt2_enc[b], t->gpt2_enc_len[b]);
					wn += t->gpt2_enc_len[b];
				} else {
					wbuf[wn++] = (char)b;
				}
			}
		}
		start += (size_t)lens.v[i];
		if (!encode_word(t, wbuf, wn, &k, out))
			goto out;
	}
	st = ALICE_OK;
out:
	free(esc);
	free(cpts);
	free(wbuf);
	free(lens.v);
	tok_merge_work_free(&k);
	return st;
}
