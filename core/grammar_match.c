/* grammar_match.c — the incremental matcher: a pushdown automaton over
 * Unicode code points whose configurations (sets of interned stacks) are
 * turned lazily into a byte-level DFA (see grammar_internal.h). Expansion of
 * references uses an explicit work list and a visited set, so nesting in the
 * grammar or the text never recurses on the C stack, and a work budget and a
 * cap on live stacks turn hostile ambiguity into an error instead of a blow-up. */
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

#define EXPAND_BUDGET (1u << 20)    /* work items per code point */
#define COMPACT_DFA 10000u          /* DFA states (~1 KiB each) before the caches are rebuilt */
#define COMPACT_STACKS (1u << 20)
#define COMPACT_SET_ITEMS (1u << 22)

static inline uint32_t hash32(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return (uint32_t)x;
}

static int tab_init(struct gtable *t, uint32_t cap)
{
	t->slot = calloc(cap, sizeof *t->slot);
	t->cap = cap;
	t->n = 0;
	return t->slot ? 0 : -1;
}

/* ---- interning ------------------------------------------------------------ */

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elsize)
{
	if (need <= *cap)
		return 0;
	uint64_t nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	if (nc > UINT32_MAX / 2)
		return -1;
	void *np = realloc(*p, (size_t)nc * elsize);
	if (!np)
		return -1;
	*p = np;
	*cap = (uint32_t)nc;
	return 0;
}

static uint32_t stack_hash(uint32_t pos, uint32_t parent)
{
	return hash32(((uint64_t)pos << 32) | parent);
}

static uint32_t set_hash(const uint32_t *v, uint32_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ v[i]) * 0x100000001b3ULL + (h >> 29);
	return hash32(h);
}

static uint32_t dfa_hash(uint32_t set, uint32_t acc, uint32_t need, uint32_t len)
{
	return hash32(((uint64_t)set << 32) ^ ((uint64_t)acc << 8) ^ (need << 4) ^ len);
}

/* Rehash a table whose entries hash via fn(st, id). */
static int tab_grow(struct alice_grammar_state *st, struct gtable *t,
		    uint32_t (*fn)(const struct alice_grammar_state *, uint32_t))
{
	struct gtable nt;
	if (tab_init(&nt, t->cap * 2) < 0)
		return -1;
	for (uint32_t i = 0; i < t->cap; i++) {
		if (!t->slot[i])
			continue;
		uint32_t h = fn(st, t->slot[i] - 1) & (nt.cap - 1);
		while (nt.slot[h])
			h = (h + 1) & (nt.cap - 1);
		nt.slot[h] = t->slot[i];
	}
	nt.n = t->n;
	free(t->slot);
	*t = nt;
	return 0;
}

static uint32_t stack_id_hash(const struct alice_grammar_state *st, uint32_t id)
{
	return stack_hash(st->stacks[id].pos, st->stacks[id].parent);
}

static uint32_t set_id_hash(const struct alice_grammar_state *st, uint32_t id)
{
	return set_hash(st->set_items + st->sets[id].off, st->sets[id].n);
}

static uint32_t dfa_id_hash(const struct alice_grammar_state *st, uint32_t id)
{
	const struct gdfa *d = &st->dfa[id];
	return dfa_hash(d->set, d->acc, d->need, d->len);
}

/* Returns the stack id, or UINT32_MAX on OOM. Id 0 is reserved (empty). */
static uint32_t stack_intern(struct alice_grammar_state *st, uint32_t pos, uint32_t parent)
{
	struct gtable *t = &st->stack_tab;
	uint32_t h = stack_hash(pos, parent) & (t->cap - 1);
	while (t->slot[h]) {
		const struct gstack *s = &st->stacks[t->slot[h] - 1];
		if (s->pos == pos && s->parent == parent)
			return t->slot[h] - 1;
		h = (h + 1) & (t->cap - 1);
	}
	if (grow((void **)&st->stacks, &st->cap_stacks, st->n_stacks + 1, sizeof *st->stacks) < 0)
		return UINT32_MAX;
	uint32_t id = st->n_stacks++;
	st->stacks[id].pos = pos;
	st->stacks[id].parent = parent;
	t->slot[h] = id + 1;
	if (++t->n * 2 > t->cap && tab_grow(st, t, stack_id_hash) < 0)
		return UINT32_MAX;
	return id;
}

static int64_t set_intern(struct alice_grammar_state *st, const uint32_t *v, uint32_t n)
{
	struct gtable *t = &st->set_tab;
	uint32_t h = set_hash(v, n) & (t->cap - 1);
	while (t->slot[h]) {
		const struct gset *s = &st->sets[t->slot[h] - 1];
		if (s->n == n && memcmp(st->set_items + s->off, v, n * sizeof *v) == 0)
			return t->slot[h] - 1;
		h = (h + 1) & (t->cap - 1);
	}
	if (grow((void **)&st->sets, &st->cap_sets, st->n_sets + 1, sizeof *st->sets) < 0 ||
	    grow((void **)&st->set_items, &st->cap_set_items, st->n_set_items + n,
		 sizeof *st->set_items) < 0)
		return -1;
	uint32_t id = st->n_sets++;
	st->sets[id].off = st->n_set_items;
	st->sets[id].n = n;
	memcpy(st->set_items + st->n_set_items, v, n * sizeof *v);
	st->n_set_items += n;
	t->slot[h] = id + 1;
	if (++t->n * 2 > t->cap && tab_grow(st, t, set_id_hash) < 0)
		return -1;
	return id;
}

static int32_t dfa_intern(struct alice_grammar_state *st, uint32_t set, uint32_t acc, uint32_t need,
			  uint32_t len)
{
	struct gtable *t = &st->dfa_tab;
	uint32_t h = dfa_hash(set, acc, need, len) & (t->cap - 1);
	while (t->slot[h]) {
		const struct gdfa *d = &st->dfa[t->slot[h] - 1];
		if (d->set == set && d->acc == acc && d->need == need && d->len == len)
			return (int32_t)(t->slot[h] - 1);
		h = (h + 1) & (t->cap - 1);
	}
	if (st->n_dfa >= INT32_MAX / 2 ||
	    grow((void **)&st->dfa, &st->cap_dfa, st->n_dfa + 1, sizeof *st->dfa) < 0)
		return GDFA_ERROR;
	uint32_t id = st->n_dfa++;
	struct gdfa *d = &st->dfa[id];
	d->set = set;
	d->acc = acc;
	d->need = (uint8_t)need;
	d->len = (uint8_t)len;
	const struct gset *s = &st->sets[set];
	d->can_end = need == 0 && s->n > 0 && st->set_items[s->off] == 0;
	/* the table exists from the start: the trie walk indexes it without a check */
	d->next = malloc(256 * sizeof *d->next);
	if (!d->next) {
		st->n_dfa--;
		return GDFA_ERROR;
	}
	for (int i = 0; i < 256; i++)
		d->next[i] = GDFA_UNKNOWN;
	t->slot[h] = id + 1;
	if (++t->n * 2 > t->cap && tab_grow(st, t, dfa_id_hash) < 0)
		return GDFA_ERROR;
	return (int32_t)id;
}

/* ---- expansion -------------------------------------------------------------- */

static int work_push(struct alice_grammar_state *st, uint32_t *n, uint32_t pos, uint32_t parent)
{
	if (grow((void **)&st->work, &st->cap_work, *n + 1, sizeof *st->work) < 0)
		return -1;
	st->work[(*n)++] = ((uint64_t)pos << 32) | parent;
	return 0;
}

/* First visit of key in this generation? -1 on OOM. */
static int seen_first(struct alice_grammar_state *st, uint64_t key, uint32_t *n_seen)
{
	if ((*n_seen + 1) * 2 > st->cap_seen) {
		uint32_t nc = st->cap_seen ? st->cap_seen * 2 : 1024;
		uint64_t *ns = malloc((size_t)nc * sizeof *ns);
		uint32_t *ng = calloc(nc, sizeof *ng);
		if (!ns || !ng) {
			free(ns);
			free(ng);
			return -1;
		}
		for (uint32_t i = 0; i < st->cap_seen; i++) {
			if (st->seen_gen[i] != st->gen)
				continue;
			uint32_t h = hash32(st->seen[i]) & (nc - 1);
			while (ng[h] == st->gen)
				h = (h + 1) & (nc - 1);
			ng[h] = st->gen;
			ns[h] = st->seen[i];
		}
		free(st->seen);
		free(st->seen_gen);
		st->seen = ns;
		st->seen_gen = ng;
		st->cap_seen = nc;
	}
	uint32_t h = hash32(key) & (st->cap_seen - 1);
	while (st->seen_gen[h] == st->gen) {
		if (st->seen[h] == key)
			return 0;
		h = (h + 1) & (st->cap_seen - 1);
	}
	st->seen_gen[h] = st->gen;
	st->seen[h] = key;
	(*n_seen)++;
	return 1;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Expand the work list into terminal-topped stacks; intern the set.
 * Returns set id, or -1 (dead: no stacks), -2 (OOM), -3 (too many stacks). */
static int64_t expand(struct alice_grammar_state *st, uint32_t n_work)
{
	const struct alice_grammar *g = st->g;
	uint32_t n_out = 0, n_seen = 0, budget = 0;
	int has_empty = 0;
	if (++st->gen == 0) { /* wrapped: clear stamps */
		if (st->seen_gen)
			memset(st->seen_gen, 0, st->cap_seen * sizeof *st->seen_gen);
		st->gen = 1;
	}
	while (n_work) {
		uint64_t item = st->work[--n_work];
		if (++budget > EXPAND_BUDGET || ++st->op_work > st->op_limit)
			return -3;
		int f = seen_first(st, item, &n_seen);
		if (f < 0)
			return -2;
		if (!f)
			continue;
		uint32_t pos = (uint32_t)(item >> 32), parent = (uint32_t)item;
		const struct gelem *e = &g->elems[pos];
		uint32_t id;
		switch (e->type) {
		case GELEM_END:
			if (parent == 0) {
				if (has_empty)
					continue;
				has_empty = 1;
				id = 0;
				goto add;
			}
			if (work_push(st, &n_work, st->stacks[parent].pos, st->stacks[parent].parent) < 0)
				return -2;
			continue;
		case GELEM_REF: {
			uint32_t cont = parent;
			if (e[1].type != GELEM_END) {
				cont = stack_intern(st, pos + 1, parent);
				if (cont == UINT32_MAX)
					return -2;
			}
			for (uint32_t a = g->alt_off[e->arg]; a < g->alt_off[e->arg + 1]; a++)
				if (work_push(st, &n_work, g->alts[a], cont) < 0)
					return -2;
			continue;
		}
		default:
			id = stack_intern(st, pos, parent);
			if (id == UINT32_MAX)
				return -2;
			goto add;
		}
add:
		if (n_out >= ALICE_GRAMMAR_MAX_STACKS)
			return -3;
		if (grow((void **)&st->out, &st->cap_out, n_out + 1, sizeof *st->out) < 0)
			return -2;
		st->out[n_out++] = id;
	}
	if (!n_out)
		return -1;
	qsort(st->out, n_out, sizeof *st->out, cmp_u32); /* ids are unique: seen-set dedupes */
	int64_t s = set_intern(st, st->out, n_out);
	return s < 0 ? -2 : s;
}

static int64_t advance_uncached(struct alice_grammar_state *st, uint32_t set, uint32_t cp)
{
	const struct alice_grammar *g = st->g;
	uint32_t n_work = 0;
	const struct gset *s = &st->sets[set];
	if ((st->op_work += s->n) > st->op_limit)
		return -3;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t id = st->set_items[s->off + i];
		if (id == 0)
			continue;
		const struct gstack *k = &st->stacks[id];
		if (gelem_match(g, &g->elems[k->pos], cp) &&
		    work_push(st, &n_work, k->pos + 1, k->parent) < 0)
			return -2;
	}
	if (!n_work)
		return -1;
	return expand(st, n_work);
}

static int adv_grow(struct alice_grammar_state *st)
{
	uint32_t nc = st->cap_adv ? st->cap_adv * 2 : 256;
	uint32_t *ks = calloc(nc, sizeof *ks);
	uint64_t *km = malloc((size_t)nc * sizeof *km);
	int64_t *kv = malloc((size_t)nc * sizeof *kv);
	if (!ks || !km || !kv) {
		free(ks);
		free(km);
		free(kv);
		return -1;
	}
	for (uint32_t i = 0; i < st->cap_adv; i++) {
		if (!st->adv_set[i])
			continue;
		uint32_t h = hash32(((uint64_t)st->adv_set[i] << 40) ^ st->adv_match[i]) & (nc - 1);
		while (ks[h])
			h = (h + 1) & (nc - 1);
		ks[h] = st->adv_set[i];
		km[h] = st->adv_match[i];
		kv[h] = st->adv_next[i];
	}
	free(st->adv_set);
	free(st->adv_match);
	free(st->adv_next);
	st->adv_set = ks;
	st->adv_match = km;
	st->adv_next = kv;
	st->cap_adv = nc;
	return 0;
}

/* Set after taking code point cp from set `set` (-1 dead, -2 OOM, -3 too many).
 * For sets of up to 64 stacks the result is cached by which stacks match, so
 * the many code points a string class accepts share one expansion. */
static int64_t advance_set(struct alice_grammar_state *st, uint32_t set, uint32_t cp)
{
	const struct alice_grammar *g = st->g;
	const struct gset *s = &st->sets[set];
	if (s->n > 64)
		return advance_uncached(st, set, cp);
	if ((st->op_work += s->n) > st->op_limit)
		return -3;
	uint64_t m = 0;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t id = st->set_items[s->off + i];
		if (id != 0 && gelem_match(g, &g->elems[st->stacks[id].pos], cp))
			m |= 1ull << i;
	}
	if (!m)
		return -1;
	if ((st->n_adv + 1) * 2 > st->cap_adv && adv_grow(st) < 0)
		return -2;
	uint32_t h = hash32(((uint64_t)(set + 1) << 40) ^ m) & (st->cap_adv - 1);
	while (st->adv_set[h]) {
		if (st->adv_set[h] == set + 1 && st->adv_match[h] == m)
			return st->adv_next[h];
		h = (h + 1) & (st->cap_adv - 1);
	}
	int64_t r = advance_uncached(st, set, cp);
	if (r < -1)
		return r; /* errors are not cached */
	/* the slot may have moved if expand() grew nothing here: recompute */
	h = hash32(((uint64_t)(set + 1) << 40) ^ m) & (st->cap_adv - 1);
	while (st->adv_set[h])
		h = (h + 1) & (st->cap_adv - 1);
	st->adv_set[h] = set + 1;
	st->adv_match[h] = m;
	st->adv_next[h] = r;
	st->n_adv++;
	return r;
}

/* Does element e accept some code point of [lo,hi]? Class ranges are sorted,
 * disjoint and never adjacent (grammar_parse.c), so this is one binary search. */
static int class_meets(const struct alice_grammar *g, const struct gelem *e, uint32_t lo, uint32_t hi)
{
	if (lo > hi)
		return 0;
	if (e->type == GELEM_CHAR)
		return e->arg >= lo && e->arg <= hi;
	const struct gclass *c = &g->classes[e->arg];
	const uint32_t *r = g->ranges + c->off;
	uint32_t a = gclass_first_end_ge(g, c, lo);
	if (!c->neg)
		return a < c->n && r[2 * a] <= hi;
	/* negated: some point of [lo,hi] lies outside every range unless one
	 * range covers all of it (ranges are separated by gaps) */
	return !(a < c->n && r[2 * a] <= lo && r[2 * a + 1] >= hi);
}

/* Can some stack of `set` take a code point in [lo,hi] (surrogates excluded)?
 * -1: the work budget is spent. */
static int set_meets(struct alice_grammar_state *st, uint32_t set, uint32_t lo, uint32_t hi)
{
	const struct alice_grammar *g = st->g;
	if (hi > 0x10FFFF)
		hi = 0x10FFFF;
	const struct gset *s = &st->sets[set];
	if ((st->op_work += s->n) > st->op_limit)
		return -1;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t id = st->set_items[s->off + i];
		if (id == 0)
			continue;
		const struct gelem *e = &g->elems[st->stacks[id].pos];
		if (class_meets(g, e, lo, hi < 0xD800 ? hi : 0xD7FF) ||
		    class_meets(g, e, lo > 0xDFFF ? lo : 0xE000, hi))
			return 1;
	}
	return 0;
}

static const uint32_t utf8_min[5] = {0, 0, 0x80, 0x800, 0x10000};

int32_t gstate_step_slow(struct alice_grammar_state *st, int32_t d, uint8_t b)
{
	if (!st->dfa[d].next) {
		int32_t *nx = malloc(256 * sizeof *nx);
		if (!nx)
			return GDFA_ERROR;
		for (int i = 0; i < 256; i++)
			nx[i] = GDFA_UNKNOWN;
		st->dfa[d].next = nx;
	}
	const struct gdfa cur = st->dfa[d]; /* copy: st->dfa may move */
	int32_t res = GDFA_DEAD;
	int64_t ns;
	uint32_t acc, need, len;
	if (cur.need == 0) {
		if (b < 0x80) {
			ns = advance_set(st, cur.set, b);
			goto complete;
		}
		if (b >= 0xC2 && b <= 0xDF)
			acc = b & 0x1F, len = 2;
		else if (b >= 0xE0 && b <= 0xEF)
			acc = b & 0x0F, len = 3;
		else if (b >= 0xF0 && b <= 0xF4)
			acc = b & 0x07, len = 4;
		else
			goto done;
		need = len - 1;
	} else {
		if ((b & 0xC0) != 0x80)
			goto done;
		acc = (cur.acc << 6) | (b & 0x3F);
		need = cur.need - 1u;
		len = cur.len;
		if (need == 0) {
			if (acc < utf8_min[len] || acc > 0x10FFFF || (acc >= 0xD800 && acc <= 0xDFFF))
				goto done;
			ns = advance_set(st, cur.set, acc);
			goto complete;
		}
	}
	{
		uint32_t lo = acc << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
		if (lo < utf8_min[len])
			lo = utf8_min[len];
		int meets = lo <= hi ? set_meets(st, cur.set, lo, hi) : 0;
		if (meets < 0)
			return GDFA_ERROR; /* not cached: the caller reports it */
		if (meets)
			res = dfa_intern(st, cur.set, acc, need, len);
		goto done;
	}
complete:
	if (ns == -1)
		res = GDFA_DEAD;
	else if (ns < 0)
		return GDFA_ERROR; /* not cached: the caller reports it */
	else
		res = dfa_intern(st, (uint32_t)ns, 0, 0, 0);
done:
	if (res == GDFA_ERROR)
		return res;
	st->dfa[d].next[b] = res;
	return res;
}

/* ---- lifecycle -------------------------------------------------------------- */

static int state_init(struct alice_grammar_state *st, const struct alice_grammar *g)
{
	memset(st, 0, sizeof *st);
	st->g = g;
	st->op_limit = GRAMMAR_OP_BUDGET;
	if (tab_init(&st->stack_tab, 1024) < 0 || tab_init(&st->set_tab, 256) < 0 ||
	    tab_init(&st->dfa_tab, 256) < 0)
		return -1;
	/* stack 0: the empty stack */
	if (grow((void **)&st->stacks, &st->cap_stacks, 1, sizeof *st->stacks) < 0)
		return -1;
	st->stacks[0].pos = UINT32_MAX;
	st->stacks[0].parent = UINT32_MAX;
	st->n_stacks = 1;
	return 0;
}

static void state_release(struct alice_grammar_state *st)
{
	for (uint32_t i = 0; i < st->n_dfa; i++)
		free(st->dfa[i].next);
	free(st->dfa);
	free(st->dfa_tab.slot);
	free(st->stacks);
	free(st->stack_tab.slot);
	free(st->sets);
	free(st->set_items);
	free(st->set_tab.slot);
	free(st->work);
	free(st->seen);
	free(st->seen_gen);
	free(st->out);
	for (int i = 0; i < GMASK_CACHE; i++)
		free(st->mcache[i].mask);
	free(st->walk);
	free(st->walk_tab);
	free(st->tok_ok);
	free(st->adv_set);
	free(st->adv_match);
	free(st->adv_next);
}

void alice_grammar_state_free(struct alice_grammar_state *st)
{
	if (!st)
		return;
	state_release(st);
	free(st);
}

static enum alice_status expand_fail(int64_t rc, struct alice_error *err)
{
	if (rc == -3)
		return alice_fail(err, ALICE_ERR_RANGE,
				  "grammar: too ambiguous (more than %d live stacks or expansion budget exceeded)",
				  ALICE_GRAMMAR_MAX_STACKS);
	return alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory");
}

enum alice_status alice_grammar_state_create(const struct alice_grammar *g,
					     struct alice_grammar_state **out,
					     struct alice_error *err)
{
	*out = NULL;
	if (!g)
		return alice_fail(err, ALICE_ERR_INVALID, "grammar: NULL grammar");
	struct alice_grammar_state *st = malloc(sizeof *st);
	if (!st || state_init(st, g) < 0) {
		if (st)
			state_release(st);
		free(st);
		return alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory");
	}
	uint32_t n_work = 0;
	for (uint32_t a = g->alt_off[g->root]; a < g->alt_off[g->root + 1]; a++) {
		if (work_push(st, &n_work, g->alts[a], 0) < 0) {
			alice_grammar_state_free(st);
			return alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory");
		}
	}
	int64_t s = expand(st, n_work);
	if (s < 0) {
		alice_grammar_state_free(st);
		/* root always has an alternative, and productive grammars cannot be dead */
		return s == -1 ? alice_fail(err, ALICE_ERR_INVALID, "grammar: root matches nothing")
			       : expand_fail(s, err);
	}
	st->cur = dfa_intern(st, (uint32_t)s, 0, 0, 0);
	if (st->cur < 0) {
		alice_grammar_state_free(st);
		return alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory");
	}
	*out = st;
	return ALICE_OK;
}

/* Copy `src`'s current position into the fresh state `dst` (re-interning
 * every stack chain bottom-up). */
static int import_position(struct alice_grammar_state *dst, const struct alice_grammar_state *src)
{
	const struct gdfa *d = &src->dfa[src->cur];
	const struct gset *s = &src->sets[d->set];
	uint32_t *chain = NULL, cap_chain = 0;
	uint32_t *ids = malloc((s->n + 1) * sizeof *ids);
	int rc = -1;
	if (!ids)
		return -1;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t id = src->set_items[s->off + i], n = 0;
		while (id != 0) {
			if (grow((void **)&chain, &cap_chain, n + 1, sizeof *chain) < 0)
				goto out;
			chain[n++] = id;
			id = src->stacks[id].parent;
		}
		uint32_t nid = 0;
		while (n--) {
			nid = stack_intern(dst, src->stacks[chain[n]].pos, nid);
			if (nid == UINT32_MAX)
				goto out;
		}
		ids[i] = nid;
	}
	qsort(ids, s->n, sizeof *ids, cmp_u32);
	int64_t ns = set_intern(dst, ids, s->n);
	if (ns < 0)
		goto out;
	dst->cur = dfa_intern(dst, (uint32_t)ns, d->acc, d->need, d->len);
	rc = dst->cur < 0 ? -1 : 0;
out:
	free(chain);
	free(ids);
	return rc;
}

enum alice_status alice_grammar_state_clone(const struct alice_grammar_state *src,
					    struct alice_grammar_state **out,
					    struct alice_error *err)
{
	*out = NULL;
	struct alice_grammar_state *st = malloc(sizeof *st);
	if (!st || state_init(st, src->g) < 0 || import_position(st, src) < 0) {
		if (st)
			state_release(st);
		free(st);
		return alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory");
	}
	*out = st;
	return ALICE_OK;
}

enum alice_status gstate_maybe_compact(struct alice_grammar_state *st, struct alice_error *err)
{
	if (st->n_dfa < COMPACT_DFA && st->n_stacks < COMPACT_STACKS &&
	    st->n_set_items < COMPACT_SET_ITEMS)
		return ALICE_OK;
	struct alice_grammar_state fresh;
	if (state_init(&fresh, st->g) < 0 || import_position(&fresh, st) < 0) {
		state_release(&fresh);
		return alice_fail(err, ALICE_ERR_NOMEM, "grammar: out of memory");
	}
	state_release(st);
	*st = fresh;
	return ALICE_OK;
}

/* The budget of an accept/check of n bytes: one op's budget per started 64
 * bytes (a token is short; a long text fed at once may do more work). The
 * transitions along a sampled token were mostly computed by the mask already. */
static void gstate_budget_bytes(struct alice_grammar_state *st, size_t n)
{
	st->op_work = 0;
	uint64_t k = 1 + n / 64;
	st->op_limit = k > UINT64_MAX / GRAMMAR_OP_BUDGET ? UINT64_MAX : k * GRAMMAR_OP_BUDGET;
}

/* Walk bytes from the current state: final DFA state, GDFA_DEAD or GDFA_ERROR. */
static int32_t walk(struct alice_grammar_state *st, const uint8_t *b, size_t n)
{
	int32_t d = st->cur;
	for (size_t i = 0; i < n && d >= 0; i++)
		d = gstate_step(st, d, b[i]);
	return d;
}

enum alice_status alice_grammar_state_accept_bytes(struct alice_grammar_state *st,
						   const void *bytes, size_t n,
						   struct alice_error *err)
{
	enum alice_status rc = gstate_maybe_compact(st, err);
	if (rc != ALICE_OK)
		return rc;
	gstate_budget_bytes(st, n);
	int32_t d = walk(st, bytes, n);
	if (d == GDFA_ERROR)
		return expand_fail(-3, err);
	if (d == GDFA_DEAD)
		return alice_fail(err, ALICE_ERR_INVALID, "grammar: text rejected by the grammar");
	st->cur = d;
	return ALICE_OK;
}

bool alice_grammar_state_check_bytes(struct alice_grammar_state *st, const void *bytes, size_t n)
{
	gstate_budget_bytes(st, n);
	return walk(st, bytes, n) >= 0;
}

bool alice_grammar_state_can_end(const struct alice_grammar_state *st)
{
	return st->dfa[st->cur].can_end;
}

bool alice_grammar_state_must_end(const struct alice_grammar_state *st)
{
	const struct gdfa *d = &st->dfa[st->cur];
	return d->can_end && st->sets[d->set].n == 1;
}
