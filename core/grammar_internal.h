/* grammar_internal.h — the compiled grammar shared by grammar_parse.c (which
 * builds it), grammar_match.c (the pushdown matcher) and grammar_vocab.c
 * (the token trie and masks). Not a public header. */
#ifndef ALICE_GRAMMAR_INTERNAL_H
#define ALICE_GRAMMAR_INTERNAL_H

#include <stdint.h>

#include "alice/grammar.h"

enum gelem_type {
	GELEM_END = 0,   /* end of an alternative */
	GELEM_REF = 1,   /* arg: rule index */
	GELEM_CHAR = 2,  /* arg: one code point */
	GELEM_CLASS = 3, /* arg: class index (ranges, maybe negated; `.` = negated empty) */
};

struct gelem {
	uint32_t type;
	uint32_t arg;
};

struct gclass {
	uint32_t off; /* into alice_grammar.ranges, pairs lo,hi */
	uint32_t n;   /* number of ranges */
	uint32_t neg;
};

/* Rule r's alternatives start at elems[alts[alt_off[r] .. alt_off[r+1])];
 * each alternative ends with GELEM_END. */
struct alice_grammar {
	struct gelem *elems;
	uint32_t n_elems;
	uint32_t n_rules;
	uint32_t root;
	uint32_t *alt_off; /* n_rules + 1 */
	uint32_t *alts;
	struct gclass *classes;
	uint32_t n_classes;
	uint32_t *ranges;
	char **names; /* per rule; generated rules are named "<origin>_<n>" */
	size_t source_bytes; /* length of the GBNF text it was compiled from */
	int refs;            /* atomic; alice_grammar_free drops one */
};

/* Index of class c's first range whose end is >= cp (c->n: none). Ranges
 * are sorted and disjoint (grammar_parse.c normalizes classes). */
static inline uint32_t gclass_first_end_ge(const struct alice_grammar *g, const struct gclass *c, uint32_t cp)
{
	const uint32_t *r = g->ranges + c->off;
	uint32_t lo = 0, hi = c->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (r[2 * mid + 1] < cp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Does code point cp match the terminal element e? */
static inline int gelem_match(const struct alice_grammar *g, const struct gelem *e, uint32_t cp)
{
	if (e->type == GELEM_CHAR)
		return e->arg == cp;
	const struct gclass *c = &g->classes[e->arg];
	uint32_t lo = gclass_first_end_ge(g, c, cp);
	int in = lo < c->n && cp >= g->ranges[c->off + 2 * lo];
	return in != (int)c->neg;
}

/* ---- matcher state (grammar_match.c), used by the trie walk in grammar_vocab.c ----
 *
 * A stack is an interned (pos, parent) pair: pos is an element index (the top
 * is always a terminal; deeper frames are continuations after a reference),
 * parent another stack id. Stack id 0 is the empty stack (the grammar may end).
 * A set is a sorted list of stack ids, interned. A DFA state is (set, pending
 * UTF-8 prefix), interned, with a lazily filled 256-entry byte transition table,
 * so repeated walks over the token trie are table lookups. */
/* Work budget of one mask (and of an accept/check per 64 bytes): stacks
 * scanned plus work items expanded. A JSON grammar on a 128k vocabulary
 * needs at most ~15k in a step (alice-grammar-bench), a 3,000-property
 * schema ~110k; past the budget the call fails with ALICE_ERR_RANGE. At
 * ~20 ns a unit this bounds one mask's matcher work near 10 ms. */
#define GRAMMAR_OP_BUDGET (1ull << 19)
#define GDFA_UNKNOWN (-1)
#define GDFA_DEAD (-2)
#define GDFA_ERROR (-3)

struct gstack {
	uint32_t pos;
	uint32_t parent;
};

struct gset {
	uint32_t off, n;
};

struct gdfa {
	uint32_t set;
	uint32_t acc;  /* bits of the pending character so far */
	uint8_t need;  /* continuation bytes still needed (0: none pending) */
	uint8_t len;   /* total length of the pending character */
	uint8_t can_end;
	int32_t *next; /* 256 entries, allocated with the state */
};

struct gtable {
	uint32_t *slot; /* id + 1; 0 = empty */
	uint32_t cap;   /* power of two */
	uint32_t n;
};

#define GMASK_CACHE 4

struct gmask_cache {
	const void *vocab;
	int32_t dfa;
	uint32_t stamp;
	uint8_t *mask;
};

struct alice_grammar_state {
	const struct alice_grammar *g;
	int32_t cur; /* current DFA state */
	struct gstack *stacks;
	uint32_t n_stacks, cap_stacks;
	struct gtable stack_tab;
	uint32_t *set_items;
	uint32_t n_set_items, cap_set_items;
	struct gset *sets;
	uint32_t n_sets, cap_sets;
	struct gtable set_tab;
	struct gdfa *dfa;
	uint32_t n_dfa, cap_dfa;
	struct gtable dfa_tab;
	/* advance cache: (set, which of its first 64 stacks match the code point)
	 * -> next set; the expansion depends on nothing else */
	uint32_t *adv_set;   /* set id + 1; 0 = empty slot */
	uint64_t *adv_match;
	int64_t *adv_next;
	uint32_t cap_adv, n_adv;
	uint64_t op_work;  /* matcher work in the current public call: stacks scanned + expanded */
	uint64_t op_limit; /* its budget: GRAMMAR_OP_BUDGET (more for a long accept/check) */
	/* scratch for expansion */
	uint64_t *work;
	uint32_t cap_work;
	uint64_t *seen; /* generation-stamped open addressing of (pos,parent) */
	uint32_t *seen_gen;
	uint32_t cap_seen, gen;
	uint32_t *out;
	uint32_t cap_out;
	/* masks */
	struct gmask_cache mcache[GMASK_CACHE];
	uint32_t mstamp;
	int32_t *walk; /* per-depth DFA states for the trie walk */
	const int32_t **walk_tab; /* and their transition tables */
	uint32_t cap_walk;
	uint8_t *tok_ok; /* allowed flags in trie order */
	uint32_t cap_tok_ok;
};

/* Slow path of the transition: compute, cache and return next state,
 * GDFA_DEAD, or GDFA_ERROR (too many stacks / expansion budget). */
int32_t gstate_step_slow(struct alice_grammar_state *st, int32_t d, uint8_t byte);

static inline int32_t gstate_step(struct alice_grammar_state *st, int32_t d, uint8_t byte)
{
	const int32_t *nx = st->dfa[d].next;
	if (nx && nx[byte] != GDFA_UNKNOWN)
		return nx[byte];
	return gstate_step_slow(st, d, byte);
}

/* Shrink the caches when they have grown past their limits (forgets masks). */
enum alice_status gstate_maybe_compact(struct alice_grammar_state *st, struct alice_error *err);

#endif
