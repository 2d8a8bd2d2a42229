/* The paged KV cache's block pool (core/kv_pool.c): allocation and freeing,
 * shared blocks and their reference counts, reservations (a reserved
 * sequence always gets its blocks; others cannot take them), exhaustion,
 * and the dirty range of the table the context uploads. */
#include <criterion/criterion.h>

#include "kv_pool.h"

static uint32_t blk(const struct alice_kv_pool *p, uint32_t s, uint32_t i)
{
	return (uint32_t)p->tbl[s * p->max_blk + i];
}

Test(kv_pool, grow_shrink_and_free_list)
{
	struct alice_kv_pool *p = alice_kv_pool_create(8, 3, 4);
	cr_assert_not_null(p);
	cr_assert_eq(p->dirty_lo, 0);
	cr_assert_eq(p->dirty_hi, 12, "the whole table is dirty once");
	alice_kv_pool_clean(p);
	for (uint32_t i = 0; i < 12; i++)
		cr_assert_eq(p->tbl[i], -1);
	cr_assert(alice_kv_pool_seq_grow(p, 0, 3));
	cr_assert_eq(p->n_blk[0], 3);
	cr_assert_eq(alice_kv_pool_used(p), 3);
	cr_assert_eq(blk(p, 0, 0), 0, "a lone sequence gets blocks 0, 1, 2");
	cr_assert_eq(blk(p, 0, 2), 2);
	cr_assert_eq(p->dirty_lo, 0);
	cr_assert_eq(p->dirty_hi, 3);
	alice_kv_pool_clean(p);
	cr_assert(alice_kv_pool_seq_grow(p, 0, 2), "growing to fewer blocks is a no-op");
	cr_assert_eq(p->n_blk[0], 3);
	cr_assert_not(alice_kv_pool_seq_grow(p, 0, 5), "more than max_blk");
	cr_assert(alice_kv_pool_seq_grow(p, 2, 4));
	cr_assert_eq(p->dirty_lo, 8);
	cr_assert_eq(p->dirty_hi, 12);
	cr_assert_eq(alice_kv_pool_used(p), 7);
	alice_kv_pool_seq_shrink(p, 0, 1);
	cr_assert_eq(alice_kv_pool_used(p), 5);
	cr_assert_eq(p->tbl[1], -1);
	cr_assert_eq(p->tbl[2], -1);
	/* freed blocks are reused */
	cr_assert(alice_kv_pool_seq_grow(p, 1, 3));
	cr_assert_eq(alice_kv_pool_used(p), 8);
	bool seen[8] = {0};
	for (uint32_t s = 0; s < 3; s++)
		for (uint32_t i = 0; i < p->n_blk[s]; i++) {
			cr_assert_not(seen[blk(p, s, i)], "block %u given twice", blk(p, s, i));
			seen[blk(p, s, i)] = true;
		}
	alice_kv_pool_free(p);
}

Test(kv_pool, exhaustion)
{
	struct alice_kv_pool *p = alice_kv_pool_create(4, 2, 4);
	cr_assert(alice_kv_pool_seq_grow(p, 0, 3));
	cr_assert_not(alice_kv_pool_seq_grow(p, 1, 2), "only one block is left");
	cr_assert_eq(p->n_blk[1], 0, "a failed grow changes nothing");
	cr_assert_eq(alice_kv_pool_used(p), 3);
	cr_assert(alice_kv_pool_seq_grow(p, 1, 1));
	cr_assert_eq(alice_kv_pool_available(p), 0);
	cr_assert_not(alice_kv_pool_seq_grow(p, 0, 4));
	alice_kv_pool_seq_shrink(p, 0, 0);
	cr_assert_eq(alice_kv_pool_available(p), 3);
	cr_assert(alice_kv_pool_seq_grow(p, 1, 4));
	alice_kv_pool_free(p);
	cr_assert_null(alice_kv_pool_create(0, 1, 1));
	cr_assert_null(alice_kv_pool_create(4, 0, 1));
}

Test(kv_pool, shared_blocks_refcounts)
{
	struct alice_kv_pool *p = alice_kv_pool_create(8, 3, 4);
	cr_assert(alice_kv_pool_seq_grow(p, 0, 3));
	cr_assert(alice_kv_pool_seq_share(p, 1, 0, 2));
	cr_assert_eq(p->n_blk[1], 2);
	cr_assert_eq(blk(p, 1, 0), blk(p, 0, 0));
	cr_assert_eq(blk(p, 1, 1), blk(p, 0, 1));
	cr_assert_eq(p->n_shared, 2);
	cr_assert_eq(alice_kv_pool_used(p), 3, "sharing takes no block");
	cr_assert(alice_kv_pool_seq_block_shared(p, 0, 1));
	cr_assert_not(alice_kv_pool_seq_block_shared(p, 0, 2));
	cr_assert_not(alice_kv_pool_seq_share(p, 1, 0, 1), "the destination must be empty");
	cr_assert_not(alice_kv_pool_seq_share(p, 2, 0, 4), "more than the source holds");
	cr_assert(alice_kv_pool_seq_share(p, 2, 0, 1));
	cr_assert_eq(p->ref[blk(p, 0, 0)], 3);
	/* the second sequence grows past the shared part with fresh blocks */
	cr_assert(alice_kv_pool_seq_grow(p, 1, 4));
	cr_assert_neq(blk(p, 1, 2), blk(p, 0, 2));
	cr_assert_eq(alice_kv_pool_used(p), 5);
	/* the owner leaves: shared blocks stay for the others */
	alice_kv_pool_seq_shrink(p, 0, 0);
	cr_assert_eq(alice_kv_pool_used(p), 4, "only the owner's unshared third block is freed");
	cr_assert_eq(p->n_shared, 1, "block 0 is still in tables 1 and 2");
	alice_kv_pool_seq_shrink(p, 2, 0);
	cr_assert_eq(p->n_shared, 0);
	alice_kv_pool_seq_shrink(p, 1, 0);
	cr_assert_eq(alice_kv_pool_used(p), 0);
	cr_assert_eq(p->n_free, 8);
	alice_kv_pool_free(p);
}

Test(kv_pool, reservations)
{
	struct alice_kv_pool *p = alice_kv_pool_create(10, 4, 8);
	cr_assert(alice_kv_pool_seq_reserve(p, 0, 6));
	cr_assert_eq(alice_kv_pool_available(p), 4);
	cr_assert_not(alice_kv_pool_seq_reserve(p, 1, 5), "5 > the 4 not promised");
	cr_assert_eq(p->reserve[1], 0, "a refused reservation changes nothing");
	cr_assert(alice_kv_pool_seq_reserve(p, 1, 4));
	cr_assert_eq(alice_kv_pool_available(p), 0);
	/* unreserved growth cannot take promised blocks */
	cr_assert_not(alice_kv_pool_seq_grow(p, 2, 1));
	/* reserved sequences grow within their reservation */
	cr_assert(alice_kv_pool_seq_grow(p, 0, 2));
	cr_assert_eq(p->outstanding, 8);
	cr_assert(alice_kv_pool_seq_grow(p, 1, 4));
	cr_assert(alice_kv_pool_seq_grow(p, 0, 6));
	cr_assert_eq(p->outstanding, 0);
	cr_assert_eq(p->n_free, 0);
	/* a reservation below what a sequence holds promises nothing more */
	cr_assert(alice_kv_pool_seq_reserve(p, 0, 3));
	cr_assert_eq(p->outstanding, 0);
	/* dropping blocks of a reserved sequence owes them back to it */
	cr_assert(alice_kv_pool_seq_reserve(p, 1, 4));
	alice_kv_pool_seq_shrink(p, 1, 1);
	cr_assert_eq(p->outstanding, 3);
	cr_assert_eq(alice_kv_pool_available(p), 0, "the 3 freed blocks are still promised to sequence 1");
	cr_assert(alice_kv_pool_seq_reserve(p, 1, 0));
	cr_assert_eq(alice_kv_pool_available(p), 3);
	/* sharing counts toward a reservation: the shared blocks are not owed */
	cr_assert(alice_kv_pool_seq_reserve(p, 0, 0));
	alice_kv_pool_seq_shrink(p, 0, 0);
	cr_assert_eq(alice_kv_pool_available(p), 9);
	cr_assert(alice_kv_pool_seq_reserve(p, 3, 5));
	cr_assert_eq(alice_kv_pool_available(p), 4);
	cr_assert(alice_kv_pool_seq_share(p, 3, 1, 1));
	cr_assert_eq(p->outstanding, 4);
	cr_assert_eq(alice_kv_pool_available(p), 5);
	cr_assert(alice_kv_pool_seq_grow(p, 3, 5));
	cr_assert_eq(p->outstanding, 0);
	alice_kv_pool_free(p);
}
