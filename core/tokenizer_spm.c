/* tokenizer_spm.c — llama.cpp's SentencePiece-style tokenizer.
 *
 * The text (already with spaces as U+2581 and the space prefix added) is cut
 * into UTF-8 characters; then, repeatedly, the adjacent pair whose
 * concatenation is the vocabulary token with the highest score is merged
 * (ties: the leftmost pair). Final symbols that are not tokens (only single
 * characters can be) fall back to <0xNN> byte tokens. */
#include <stdlib.h>

#include "tokenizer_internal.h"

struct spm_bigram {
	int32_t left, right;
	float score;
	uint32_t size;
};

static inline bool spm_before(const struct spm_bigram *a, const struct spm_bigram *b)
{
	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

struct spm_heap {
	struct spm_bigram *v;
	size_t n, cap;
};

static bool heap_push(struct spm_heap *h, struct spm_bigram x)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct spm_bigram *v = realloc(h->v, cap * sizeof *v);
		if (!v)
			return false;
		h->v = v;
		h->cap = cap;
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!spm_before(&x, &h->v[p]))
			break;
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = x;
	return true;
}

static struct spm_bigram heap_pop(struct spm_heap *h)
{
	struct spm_bigram top = h->v[0], x = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && spm_before(&h->v[c + 1], &h->v[c]))
			c++;
		if (!spm_before(&h->v[c], &x))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = x;
	return top;
}

struct spm_sym {
	int32_t prev, next;
	uint32_t off, n;
};

static bool try_bigram(const struct alice_tokenizer *t, const char *text, const struct spm_sym *sym,
		       struct spm_heap *h, int32_t l, int32_t r)
{
	if (l < 0 || r < 0)
		return true;
	uint32_t size = sym[l].n + sym[r].n;
	int32_t id = tok_lookup(t, text + sym[l].off, size);
	if (id < 0)
		return true;
	struct spm_bigram b = {l, r, t->tok[id].score, size};
	return heap_push(h, b);
}

/* Tokenize text[0..len) using the caller's buffers. */
static bool spm_segment(const struct alice_tokenizer *t, const char *text, size_t len, struct spm_sym *sym,
			struct spm_heap *h, struct tok_ivec *out)
{
	int32_t ns = 0;
	h->n = 0;
	for (size_t off = 0; off < len;) {
		size_t n = alice_utf8_seq_len((unsigned char)text[off]);
		if (n > len - off)
			n = len - off;
		sym[ns] = (struct spm_sym){ns - 1, off + n == len ? -1 : ns + 1, (uint32_t)off, (uint32_t)n};
		off += n;
		ns++;
	}
	for (int32_t i = 1; i < ns; i++)
		if (!try_bigram(t, text, sym, h, i - 1, i))
			return false;
	while (h->n) {
		struct spm_bigram b = heap_pop(h);
		struct spm_sym *l = &sym[b.left], *r = &sym[b.right];
		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue; /* stale: one side was merged since */
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			sym[r->next].prev = b.left;
		if (!try_bigram(t, text, sym, h, l->prev, b.left) || !try_bigram(t, text, sym, h, b.left, l->next))
			return false;
	}
	for (int32_t i = ns ? 0 : -1; i != -1; i = sym[i].next) {
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
	struct spm_heap h = {0};
	struct spm_sym *sym = malloc((len ? len : 1) * sizeof *sym);
	bool ok = sym != NULL;
	/* An ASCII byte that no multi-character token contains can never be
	 * merged with a neighbour, so the text on either side of it is merged
	 * independently: same result, much smaller heaps (e.g. split at '\n'). */
	size_t a = 0;
	for (size_t i = 0; ok && i < len; i++) {
		if (!t->spm_barrier[(unsigned char)text[i]])
			continue;
		ok = spm_segment(t, text + a, i - a, sym, &h, out) && spm_segment(t, text + i, 1, sym, &h, out);
		a = i + 1;
	}
	ok = ok && spm_segment(t, text + a, len - a, sym, &h, out);
	free(sym);
	free(h.v);
	return ok ? ALICE_OK : ALICE_ERR_NOMEM;
}
