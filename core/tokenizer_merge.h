/* tokenizer_merge.h — the pair-merge loop SPM and BPE share (private to the
 * core): text is cut into UTF-8 characters, then the adjacent pair with the
 * best priority is merged, over and over, until no pair merges. The pair
 * queue is a binary heap; a merge leaves stale entries behind, skipped when
 * popped. What "best" means is the caller's: SPM, the highest score of the
 * merged token; BPE, the lowest merge rank. */
#ifndef ALICE_TOKENIZER_MERGE_H
#define ALICE_TOKENIZER_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer_internal.h"

/* One symbol: the bytes text[off..off+n) (n = 0: merged into its left
 * neighbour), linked to its live neighbours (-1 at the ends). */
struct tok_sym {
	int32_t prev, next;
	uint32_t off, n;
};

/* A candidate merge of symbols left and right, whose lengths summed to size. */
struct tok_bigram {
	double prio; /* lower merges first, ties leftmost; exact for an int32 rank or a -float score */
	int32_t left, right;
	uint32_t size;
};

/* Buffers reused from one text to the next; zero-initialise, free with
 * tok_merge_work_free. */
struct tok_merge_work {
	struct tok_sym *sym;
	size_t sym_cap;
	struct tok_bigram *heap;
	size_t n_heap, heap_cap;
};

/* Does a . b merge (a directly before b in text)? If so, set *prio. */
typedef bool (*tok_pair_fn)(const struct alice_tokenizer *t, const char *text, const struct tok_sym *a,
			    const struct tok_sym *b, double *prio);

/* Slow paths (tokenizer_merge.c): room for one more heap entry / len symbols. */
bool tok_merge_grow_heap(struct tok_merge_work *w);
bool tok_merge_grow_sym(struct tok_merge_work *w, size_t len);
void tok_merge_work_free(struct tok_merge_work *w);

/* ---- the hot path: inline, so each tokenizer's pair function is inlined into
 * it (a call per pair cost SPM and gemma4 encoding 6-7%) ---- */

static inline bool tok_bigram_before(const struct tok_bigram *a, const struct tok_bigram *b)
{
	return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

static inline bool tok_heap_push(struct tok_merge_work *w, struct tok_bigram x)
{
	if (w->n_heap == w->heap_cap && !tok_merge_grow_heap(w))
		return false;
	struct tok_bigram *h = w->heap;
	size_t i = w->n_heap++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!tok_bigram_before(&x, &h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = x;
	return true;
}

static inline struct tok_bigram tok_heap_pop(struct tok_merge_work *w)
{
	struct tok_bigram *h = w->heap;
	struct tok_bigram top = h[0], x = h[--w->n_heap];
	size_t n = w->n_heap, i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && tok_bigram_before(&h[c + 1], &h[c]))
			c++;
		if (!tok_bigram_before(&h[c], &x))
			break;
		h[i] = h[c];
		i = c;
	}
	if (n)
		h[i] = x;
	return top;
}

static inline bool tok_merge_try_pair(struct tok_merge_work *w, const struct alice_tokenizer *t,
				      const char *text, tok_pair_fn pair, int32_t l, int32_t r)
{
	if (l < 0 || r < 0)
		return true;
	const struct tok_sym *a = &w->sym[l], *b = &w->sym[r];
	double prio;
	if (!pair(t, text, a, b, &prio))
		return true;
	return tok_heap_push(w, (struct tok_bigram){prio, l, r, a->n + b->n});
}

/* Merge text[0..len). The result is w->sym from index 0 along `next` (no
 * symbols when len is 0). false on allocation failure. */
static inline bool tok_merge_run(struct tok_merge_work *w, const struct alice_tokenizer *t, const char *text,
				 size_t len, tok_pair_fn pair)
{
	if (len > w->sym_cap && !tok_merge_grow_sym(w, len))
		return false;
	struct tok_sym *sym = w->sym;
	int32_t ns = 0;
	for (size_t off = 0; off < len;) {
		size_t n = alice_utf8_seq_len((unsigned char)text[off]);
		if (n > len - off)
			n = len - off;
		sym[ns] = (struct tok_sym){ns - 1, off + n == len ? -1 : ns + 1, (uint32_t)off, (uint32_t)n};
		off += n;
		ns++;
	}
	w->n_heap = 0;
	for (int32_t i = 1; i < ns; i++)
		if (!tok_merge_try_pair(w, t, text, pair, i - 1, i))
			return false;
	while (w->n_heap) {
		struct tok_bigram b = tok_heap_pop(w);
		struct tok_sym *l = &sym[b.left], *r = &sym[b.right];
		if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
			continue; /* stale: one side was merged since */
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			sym[r->next].prev = b.left;
		if (!tok_merge_try_pair(w, t, text, pair, l->prev, b.left) ||
		    !tok_merge_try_pair(w, t, text, pair, b.left, l->next))
			return false;
	}
	return true;
}

#endif
