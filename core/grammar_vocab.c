/* grammar_vocab.c — the token trie and the per-step allowed-token mask.
 *
 * The trie is stored in preorder: each node has its byte, depth, the index
 * just past its subtree (skip) and the tokens ending there. A mask walks the
 * nodes in order, stepping the grammar's byte DFA once per node from its
 * parent's state; a rejected prefix jumps over its whole subtree. Tokens
 * sharing a prefix share its work, and DFA transitions are cached in the
 * state, so a warm step is a linear scan of table lookups. */
#include <stdlib.h>
#include <string.h>

#include "alice/log.h"
#include "grammar_internal.h"

#define MAX_TOKEN_BYTES 65535

/* Nodes as parallel arrays: the walk reads db[] and tstart[] in order and
 * skip[] only on a rejected prefix. */
struct alice_grammar_vocab {
	size_t n_tokens;
	uint32_t *db;      /* depth << 8 | byte */
	uint32_t *skip;    /* index just past the node's subtree */
	uint32_t *tstart;  /* node i's tokens: tok_ids[tstart[i] .. tstart[i+1]) */
	uint32_t n_nodes;
	uint32_t *tok_ids; /* tokens in trie order */
	uint32_t *pos_of;  /* token id -> trie order position; n_text for non-text tokens */
	uint32_t n_text;
	uint32_t *eog;     /* end-of-generation token ids */
	uint32_t n_eog;
	uint32_t max_depth;
};

struct tref {
	const uint8_t *p;
	uint32_t len;
	uint32_t id;
};

static int cmp_tref(const void *a, const void *b)
{
	const struct tref *x = a, *y = b;
	uint32_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->p, y->p, n);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

void alice_grammar_vocab_free(struct alice_grammar_vocab *v)
{
	if (!v)
		return;
	free(v->db);
	free(v->skip);
	free(v->tstart);
	free(v->tok_ids);
	free(v->pos_of);
	free(v->eog);
	free(v);
}

size_t alice_grammar_vocab_size(const struct alice_grammar_vocab *v)
{
	return v ? v->n_tokens : 0;
}

size_t alice_grammar_vocab_trie_nodes(const struct alice_grammar_vocab *v)
{
	return v ? v->n_nodes : 0;
}

enum alice_status alice_grammar_vocab_build(const char *const *pieces, const size_t *lens,
					    const uint8_t *kinds, size_t n,
					    struct alice_grammar_vocab **out,
					    struct alice_error *err)
{
	*out = NULL;
	if (n > UINT32_MAX / 2)
		return alice_fail(err, ALICE_ERR_INVALID, "grammar vocab: too many tokens (%zu)", n);
	struct alice_grammar_vocab *v = calloc(1, sizeof *v);
	struct tref *refs = malloc((n ? n : 1) * sizeof *refs);
	uint32_t *path = NULL;
	if (!v || !refs)
		goto oom;
	v->n_tokens = n;
	size_t n_text = 0, n_eog = 0, total = 0, skipped_long = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t k = kinds ? kinds[i] : ALICE_GRAMMAR_TOKEN_TEXT;
		if (k == ALICE_GRAMMAR_TOKEN_EOG) {
			n_eog++;
		} else if (k == ALICE_GRAMMAR_TOKEN_TEXT && lens[i] > 0) {
			if (lens[i] > MAX_TOKEN_BYTES) {
				skipped_long++;
				continue;
			}
			refs[n_text].p = (const uint8_t *)pieces[i];
			refs[n_text].len = (uint32_t)lens[i];
			refs[n_text].id = (uint32_t)i;
			n_text++;
			total += lens[i];
		}
	}
	if (skipped_long)
		alice_log(ALICE_LOG_WARN, "grammar vocab: %zu tokens longer than %d bytes are never allowed",
			  skipped_long, MAX_TOKEN_BYTES);
	v->eog = malloc((n_eog ? n_eog : 1) * sizeof *v->eog);
	v->tok_ids = malloc((n_text ? n_text : 1) * sizeof *v->tok_ids);
	v->pos_of = malloc((n ? n : 1) * sizeof *v->pos_of);
	/* node count <= total bytes; shrunk below */
	v->db = malloc((total ? total : 1) * sizeof *v->db);
	v->skip = malloc((total ? total : 1) * sizeof *v->skip);
	v->tstart = malloc((total + 1) * sizeof *v->tstart);
	path = malloc((MAX_TOKEN_BYTES + 1) * sizeof *path);
	if (!v->eog || !v->tok_ids || !v->pos_of || !v->db || !v->skip || !v->tstart || !path)
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (kinds && kinds[i] == ALICE_GRAMMAR_TOKEN_EOG)
			v->eog[v->n_eog++] = (uint32_t)i;
	qsort(refs, n_text, sizeof *refs, cmp_tref);
	v->n_text = (uint32_t)n_text;
	for (size_t i = 0; i < n; i++)
		v->pos_of[i] = (uint32_t)n_text;
	uint32_t depth = 0, nn = 0;
	const struct tref *prev = NULL;
	/* tokens arrive in preorder of their end nodes, so each node's tokens
	 * are the contiguous run added while it was the newest node */
	for (size_t t = 0; t < n_text; t++) {
		const struct tref *r = &refs[t];
		uint32_t lcp = 0;
		if (prev) {
			uint32_t m = prev->len < r->len ? prev->len : r->len;
			while (lcp < m && lcp < depth && prev->p[lcp] == r->p[lcp])
				lcp++;
		}
		while (depth > lcp) /* close nodes leaving the path */
			v->skip[path[--depth]] = nn;
		for (uint32_t i = lcp; i < r->len; i++) {
			v->db[nn] = ((i + 1) << 8) | r->p[i];
			v->tstart[nn] = (uint32_t)t;
			v->skip[nn] = 0;
			path[depth++] = nn++;
		}
		/* r ends at the newest node: identical pieces sort together, and a
		 * shorter token's node is created (and its tokens added) before its children */
		v->tok_ids[t] = r->id;
		v->pos_of[r->id] = (uint32_t)t;
		if (r->len > v->max_depth)
			v->max_depth = r->len;
		prev = r;
	}
	while (depth > 0)
		v->skip[path[--depth]] = nn;
	v->tstart[nn] = (uint32_t)n_text;
	v->n_nodes = nn;
	uint32_t *t1 = realloc(v->db, (nn ? nn : 1) * sizeof *t1);
	if (t1)
		v->db = t1;
	uint32_t *t2 = realloc(v->skip, (nn ? nn : 1) * sizeof *t2);
	if (t2)
		v->skip = t2;
	uint32_t *t3 = realloc(v->tstart, (nn + 1) * sizeof *t3);
	if (t3)
		v->tstart = t3;
	free(path);
	free(refs);
	*out = v;
	return ALICE_OK;
oom:
	free(path);
	free(refs);
	alice_grammar_vocab_free(v);
	return alice_fail(err, ALICE_ERR_NOMEM, "grammar vocab: out of memory");
}

enum alice_status alice_grammar_state_mask(struct alice_grammar_state *st,
					   const struct alice_grammar_vocab *v, uint8_t *mask,
					   struct alice_error *err)
{
	enum alice_status rc = gstate_maybe_compact(st, err);
	if (rc != ALICE_OK)
		return rc;
	st->mstamp++;
	st->op_work = 0;
	st->op_limit = GRAMMAR_OP_BUDGET;
	struct gmask_cache *slot = &st->mcache[0];
	for (int i = 0; i < GMASK_CACHE; i++) {
		struct gmask_cache *c = &st->mcache[i];
		if (c->mask && c->vocab == v && c->dfa == st->cur) {
			memcpy(mask, c->mask, v->n_tokens);
			c->stamp = st->mstamp;
			return ALICE_OK;
		}
		if (c->stamp < slot->stamp)
			slot = c;
	}
	if (st->cap_walk < v->max_depth + 1) {
		int32_t *w = realloc(st->walk, (v->max_depth + 1) * sizeof *w);
		if (w)
			st->walk = w;
		const int32_t **wt = realloc(st->walk_tab, (v->max_depth + 1) * sizeof *wt);
		if (wt)
			st->walk_tab = wt;
		if (!w || !wt)
			return alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory");
		st->cap_walk = v->max_depth + 1;
	}
	if (st->cap_tok_ok < v->n_text + 1) {
		uint8_t *t = realloc(st->tok_ok, v->n_text + 1);
		if (!t)
			return alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory");
		st->tok_ok = t;
		st->cap_tok_ok = v->n_text + 1;
	}
	/* Mark in trie order: everything allowed, minus the token ranges of the
	 * rejected subtrees (each subtree's tokens are contiguous). */
	uint8_t *ok = st->tok_ok;
	memset(ok, 1, v->n_text);
	ok[v->n_text] = 0;
	int32_t *w = st->walk;
	const int32_t **wt = st->walk_tab;
	w[0] = st->cur;
	wt[0] = st->dfa[st->cur].next;
	const uint32_t *db = v->db, *tstart = v->tstart;
	for (uint32_t i = 0; i < v->n_nodes;) {
		uint32_t x = db[i], dep = x >> 8;
		int32_t d = wt[dep - 1][x & 0xFF];
		if (d < 0) {
			if (d == GDFA_UNKNOWN)
				d = gstate_step_slow(st, w[dep - 1], (uint8_t)x);
			if (d == GDFA_ERROR)
				return alice_fail(err, ALICE_ERR_RANGE,
						  "grammar: too ambiguous (more than %d live stacks or expansion budget exceeded)",
						  ALICE_GRAMMAR_MAX_STACKS);
			if (d < 0) {
				uint32_t j = v->skip[i];
				memset(ok + tstart[i], 0, tstart[j] - tstart[i]);
				i = j;
				continue;
			}
		}
		w[dep] = d;
		wt[dep] = st->dfa[d].next;
		i++;
	}
	const uint32_t *pos_of = v->pos_of;
	for (size_t t = 0; t < v->n_tokens; t++)
		mask[t] = ok[pos_of[t]];
	uint8_t end = st->dfa[st->cur].can_end;
	for (uint32_t k = 0; k < v->n_eog; k++)
		mask[v->eog[k]] = end;
	/* remember it: a request often comes back to the same state (inside a string) */
	if (!slot->mask || slot->vocab != v) {
		uint8_t *m = realloc(slot->mask, v->n_tokens ? v->n_tokens : 1);
		if (!m)
			return ALICE_OK; /* the mask is right; only the cache is skipped */
		slot->mask = m;
	}
	memcpy(slot->mask, mask, v->n_tokens);
	slot->vocab = v;
	slot->dfa = st->cur;
	slot->stamp = st->mstamp;
	return ALICE_OK;
}
