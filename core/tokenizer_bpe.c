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

struct bpe_bigram {
	int32_t left, right;
	int32_t rank;
	uint32_t size;
};

static inline bool bpe_before(const struct bpe_bigram *a, const struct bpe_bigram *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

struct bpe_heap {
	struct bpe_bigram *v;
	size_t n, cap;
};

static bool heap_push(struct bpe_heap *h, struct bpe_bigram x)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct bpe_bigram *v = realloc(h->v, cap * sizeof *v);
		if (!v)
			return false;
		h->v = v;
		h->cap = cap;
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!bpe_before(&x, &h->v[p]))
			break;
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = x;
	return true;
}

static struct bpe_bigram heap_pop(struct bpe_heap *h)
{
	struct bpe_bigram top = h->v[0], x = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && bpe_before(&h->v[c + 1], &h->v[c]))
			c++;
		if (!bpe_before(&h->v[c], &x))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = x;
	return top;
}

struct bpe_sym {
	int32_t prev, next;
	uint32_t off, n;
};

struct bpe_work {
	struct bpe_heap heap;
	struct bpe_sym *sym;
	size_t sym_cap;
};

static bool add_bigram(const struct alice_tokenizer *t, const char *w, struct bpe_work *k, int32_t l, int32_t r)
{
	if (l < 0 || r < 0)
		return true;
	const struct bpe_sym *a = &k->sym[l], *b = &k->sym[r];
	int32_t rank = tok_merge_rank(t, w + a->off, a->n, w + b->off, b->n);
	if (rank < 0)
		return true;
	struct bpe_bigram bg = {l, r, rank, a->n + b->n};
	return heap_push(&k->heap, bg);
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

static bool encode_word(const struct alice_tokenizer *t, const char *w, size_t n, struct bpe_work *k,
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
	if (n > k->sym_cap) {
		struct bpe_sym *s = realloc(k->sym, n * sizeof *s);
		if (!s)
			return false;
		k->sym = s;
		k->sym_cap = n;
	}
	int32_t ns = 0;
	for (size_t off = 0; off < n;) {
		size_t l = alice_utf8_seq_len((unsigned char)w[off]);
		if (l > n - off)
			l = n - off;
		k->sym[ns] = (struct bpe_sym){ns - 1, off + l == n ? -1 : ns + 1, (uint32_t)off, (uint32_t)l};
		off += l;
		ns++;
	}
	k->heap.n = 0;
	for (int32_t i = 1; i < ns; i++)
		if (!add_bigram(t, w, k, i - 1, i))
			return false;
	while (k->heap.n) {
		struct bpe_bigram b = heap_pop(&k->heap);
		struct bpe_sym *l = &k->sym[b.left], *r = &k->sym[b.right];
		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue; /* outdated */
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			k->sym[r->next].prev = b.left;
		if (!add_bigram(t, w, k, l->prev, b.left) || !add_bigram(t, w, k, b.left, l->next))
			return false;
	}
	for (int32_t i = ns ? 0 : -1; i != -1; i = k->sym[i].next)
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
	struct bpe_work k = {0};
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
	free(k.heap.v);
	free(k.sym);
	return st;
}
