/* tokenizer_merge.c — the merge loop's allocations (see tokenizer_merge.h). */
#include "tokenizer_merge.h"

#include <stdlib.h>

bool tok_merge_grow_heap(struct tok_merge_work *w)
{
	size_t cap = w->heap_cap ? w->heap_cap * 2 : 64;
	struct tok_bigram *v = realloc(w->heap, cap * sizeof *v);
	if (!v)
		return false;
	w->heap = v;
	w->heap_cap = cap;
	return true;
}

bool tok_merge_grow_sym(struct tok_merge_work *w, size_t len)
{
	struct tok_sym *s = realloc(w->sym, len * sizeof *s);
	if (!s)
		return false;
	w->sym = s;
	w->sym_cap = len;
	return true;
}

void tok_merge_work_free(struct tok_merge_work *w)
{
	free(w->sym);
	free(w->heap);
	w->sym = NULL;
	w->heap = NULL;
	w->sym_cap = w->n_heap = w->heap_cap = 0;
}
