/* kv_pool.c — the paged KV cache's block pool (see kv_pool.h). */
#include "kv_pool.h"

#include <stdlib.h>

struct alice_kv_pool *alice_kv_pool_create(uint32_t n_blocks, uint32_t n_seq, uint32_t max_blk)
{
	if (!n_blocks || !n_seq || !max_blk || n_blocks > INT32_MAX || (uint64_t)n_seq * max_blk > INT32_MAX)
		return NULL;
	struct alice_kv_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->n_blocks = n_blocks;
	p->n_seq = n_seq;
	p->max_blk = max_blk;
	p->ref = calloc(n_blocks, sizeof(*p->ref));
	p->free_list = malloc(n_blocks * sizeof(*p->free_list));
	p->tbl = malloc((size_t)n_seq * max_blk * sizeof(*p->tbl));
	p->n_blk = calloc(n_seq, sizeof(*p->n_blk));
	p->reserve = calloc(n_seq, sizeof(*p->reserve));
	p->seq_dirty = malloc(n_seq * sizeof(*p->seq_dirty));
	if (!p->ref || !p->free_list || !p->tbl || !p->n_blk || !p->reserve || !p->seq_dirty) {
		alice_kv_pool_free(p);
		return NULL;
	}
	/* the stack pops block 0 first: a lone sequence gets blocks 0, 1, ... */
	for (uint32_t i = 0; i < n_blocks; i++)
		p->free_list[i] = (int32_t)(n_blocks - 1 - i);
	p->n_free = n_blocks;
	for (size_t i = 0; i < (size_t)n_seq * max_blk; i++)
		p->tbl[i] = -1;
	p->dirty_lo = 0;
	p->dirty_hi = n_seq * max_blk; /* the caller uploads the whole table once */
	for (uint32_t i = 0; i < n_seq; i++)
		p->seq_dirty[i] = true;
	return p;
}

void alice_kv_pool_free(struct alice_kv_pool *p)
{
	if (!p)
		return;
	free(p->ref);
	free(p->free_list);
	free(p->tbl);
	free(p->n_blk);
	free(p->reserve);
	free(p->seq_dirty);
	free(p);
}

uint32_t alice_kv_pool_available(const struct alice_kv_pool *p)
{
	return p->n_free > p->outstanding ? (uint32_t)(p->n_free - p->outstanding) : 0;
}

static uint32_t owed(const struct alice_kv_pool *p, uint32_t seq)
{
	return p->reserve[seq] > p->n_blk[seq] ? p->reserve[seq] - p->n_blk[seq] : 0;
}

static void mark(struct alice_kv_pool *p, uint32_t at)
{
	if (p->dirty_lo >= p->dirty_hi) {
		p->dirty_lo = at;
		p->dirty_hi = at + 1;
		return;
	}
	if (at < p->dirty_lo)
		p->dirty_lo = at;
	if (at + 1 > p->dirty_hi)
		p->dirty_hi = at + 1;
}

static void set_entry(struct alice_kv_pool *p, uint32_t seq, uint32_t i, int32_t b)
{
	uint32_t at = seq * p->max_blk + i;
	p->tbl[at] = b;
	p->seq_dirty[seq] = true;
	mark(p, at);
}

static void block_ref(struct alice_kv_pool *p, int32_t b)
{
	if (++p->ref[b] == 2)
		p->n_shared++;
}

static void block_unref(struct alice_kv_pool *p, int32_t b)
{
	if (p->ref[b] == 2)
		p->n_shared--;
	if (--p->ref[b] == 0)
		p->free_list[p->n_free++] = b;
}

bool alice_kv_pool_seq_grow(struct alice_kv_pool *p, uint32_t seq, uint32_t n)
{
	if (seq >= p->n_seq || n > p->max_blk)
		return false;
	if (n <= p->n_blk[seq])
		return true;
	uint32_t k = n - p->n_blk[seq], mine = owed(p, seq);
	/* the part beyond seq's own reservation must come from unreserved blocks */
	uint32_t extra = k > mine ? k - mine : 0;
	if (k > p->n_free || extra > alice_kv_pool_available(p))
		return false;
	uint32_t before = mine;
	for (uint32_t i = p->n_blk[seq]; i < n; i++) {
		int32_t b = p->free_list[--p->n_free];
		p->ref[b] = 1;
		set_entry(p, seq, i, b);
	}
	p->n_blk[seq] = n;
	p->outstanding -= before - owed(p, seq);
	return true;
}

void alice_kv_pool_seq_shrink(struct alice_kv_pool *p, uint32_t seq, uint32_t n)
{
	if (seq >= p->n_seq || n >= p->n_blk[seq])
		return;
	uint32_t before = owed(p, seq);
	for (uint32_t i = n; i < p->n_blk[seq]; i++) {
		block_unref(p, p->tbl[seq * p->max_blk + i]);
		set_entry(p, seq, i, -1);
	}
	p->n_blk[seq] = n;
	p->outstanding += owed(p, seq) - before;
}

bool alice_kv_pool_seq_share(struct alice_kv_pool *p, uint32_t dst, uint32_t src, uint32_t n)
{
	if (dst >= p->n_seq || src >= p->n_seq || dst == src || p->n_blk[dst] != 0 || n > p->n_blk[src])
		return false;
	uint32_t before = owed(p, dst);
	for (uint32_t i = 0; i < n; i++) {
		int32_t b = p->tbl[src * p->max_blk + i];
		block_ref(p, b);
		set_entry(p, dst, i, b);
	}
	p->n_blk[dst] = n;
	p->outstanding -= before - owed(p, dst);
	return true;
}

bool alice_kv_pool_seq_reserve(struct alice_kv_pool *p, uint32_t seq, uint32_t n)
{
	if (seq >= p->n_seq || n > p->max_blk)
		return false;
	uint32_t before = owed(p, seq);
	uint32_t want = n > p->n_blk[seq] ? n - p->n_blk[seq] : 0;
	if (want > before && want - before > alice_kv_pool_available(p))
		return false;
	p->reserve[seq] = n;
	p->outstanding = p->outstanding - before + want;
	return true;
}

bool alice_kv_pool_seq_block_shared(const struct alice_kv_pool *p, uint32_t seq, uint32_t i)
{
	if (seq >= p->n_seq || i >= p->n_blk[seq])
		return false;
	return p->ref[p->tbl[seq * p->max_blk + i]] > 1;
}

void alice_kv_pool_clean(struct alice_kv_pool *p)
{
	if (p->dirty_lo < p->dirty_hi)
		for (uint32_t s = p->dirty_lo / p->max_blk; s < p->n_seq && s * p->max_blk < p->dirty_hi; s++)
			p->seq_dirty[s] = false;
	p->dirty_lo = p->dirty_hi = 0;
}
