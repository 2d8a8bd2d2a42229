/* kv_pool.h — the block pool of the paged KV cache (see context.c): a fixed
 * number of blocks of cells shared by all sequences, a free list,
 * per-block reference counts (a block may sit in several sequences' tables:
 * a shared prompt prefix) and per-sequence block tables.
 *
 * Reservations make admission safe: a sequence may reserve the number of
 * blocks its table may grow to; the blocks it has not allocated yet are
 * "outstanding" and no other sequence can take them, so a reserved sequence
 * never finds the pool empty while it grows (seq_grow within its
 * reservation always succeeds). Unreserved growth only takes blocks nobody
 * reserved.
 *
 * Private to the core; not thread-safe (the context's owner serializes).
 * The pool owns its arrays; alice_kv_pool_free releases them. */
#ifndef ALICE_CORE_KV_POOL_H
#define ALICE_CORE_KV_POOL_H

#include <stdbool.h>
#include <stdint.h>

struct alice_kv_pool {
	uint32_t n_blocks; /* physical blocks */
	uint32_t n_seq;
	uint32_t max_blk;  /* table entries per sequence */
	int32_t *ref;      /* [n_blocks] sequences whose table holds the block */
	int32_t *free_list;/* [n_blocks] a stack of free block ids */
	uint32_t n_free;
	int32_t *tbl;      /* [n_seq * max_blk] block of (seq, i); -1 = none */
	uint32_t *n_blk;   /* [n_seq] entries in use (a prefix of the table) */
	uint32_t *reserve; /* [n_seq] reserved table length (0 = none) */
	uint64_t outstanding; /* sum over sequences of max(0, reserve - n_blk) */
	uint32_t n_shared; /* blocks with ref > 1 */
	/* table entries changed since the last alice_kv_pool_clean: [lo, hi),
	 * and which sequences' rows they are in */
	uint32_t dirty_lo, dirty_hi;
	bool *seq_dirty; /* [n_seq] */
};

/* NULL when out of memory or a size is 0 / too large. */
struct alice_kv_pool *alice_kv_pool_create(uint32_t n_blocks, uint32_t n_seq, uint32_t max_blk);
void alice_kv_pool_free(struct alice_kv_pool *p);

/* Blocks that a new reservation or unreserved growth can still take. */
uint32_t alice_kv_pool_available(const struct alice_kv_pool *p);
/* Blocks in use (ref > 0). */
static inline uint32_t alice_kv_pool_used(const struct alice_kv_pool *p) { return p->n_blocks - p->n_free; }

/* Grow seq's table to at least n blocks with fresh blocks (ref 1). False
 * (nothing changed) when n > max_blk or the pool cannot give them without
 * taking blocks reserved by other sequences. */
bool alice_kv_pool_seq_grow(struct alice_kv_pool *p, uint32_t seq, uint32_t n);
/* Drop seq's table entries from n on (each block's ref--, freed at 0). */
void alice_kv_pool_seq_shrink(struct alice_kv_pool *p, uint32_t seq, uint32_t n);
/* Map src's first n blocks into dst, whose table must be empty (ref++
 * each). False when n exceeds src's table or dst is not empty. */
bool alice_kv_pool_seq_share(struct alice_kv_pool *p, uint32_t dst, uint32_t src, uint32_t n);
/* Reserve a table length of n blocks for seq (0: drop its reservation).
 * False (nothing changed) when the blocks it would still need are more
 * than the pool has available besides seq's current reservation. */
bool alice_kv_pool_seq_reserve(struct alice_kv_pool *p, uint32_t seq, uint32_t n);
/* Does entry i of seq's table hold a block that another table holds too? */
bool alice_kv_pool_seq_block_shared(const struct alice_kv_pool *p, uint32_t seq, uint32_t i);
/* Clear the dirty range (after the caller copied the table out). */
void alice_kv_pool_clean(struct alice_kv_pool *p);

#endif
