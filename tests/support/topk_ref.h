/* topk_ref.h — the reference for backend.h's TOPK: a row's best k entries
 * by a full sort (higher value first, ties to the lower index, values
 * cleaned as the sampler cleans them). */
#ifndef ALICE_TEST_TOPK_REF_H
#define ALICE_TEST_TOPK_REF_H

#include <stdint.h>

/* pairs[2j] = index, pairs[2j+1] = value bits, j < k <= n. Returns 0, or -1
 * out of memory. */
int topk_ref(const float *x, int32_t n, int32_t k, int32_t *pairs);

#endif
