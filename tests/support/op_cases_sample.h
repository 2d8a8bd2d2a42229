/* op_cases_sample.h — builders of the sampling ops' cases for the op test
 * (tests/backends/test_ops.c); each appends its cases to (*cs, *n). */
#ifndef ALICE_TEST_OP_CASES_SAMPLE_H
#define ALICE_TEST_OP_CASES_SAMPLE_H

#include "support/op_case.h"

void build_topk(struct tcase **cs, int *n, struct rng *r);
void build_sample_temp(struct tcase **cs, int *n, struct rng *r);
void build_logit_adjust(struct tcase **cs, int *n, struct rng *r);
void build_feed(struct tcase **cs, int *n, struct rng *r);
void build_logsumexp(struct tcase **cs, int *n, struct rng *r);
void build_token_mask(struct tcase **cs, int *n, struct rng *r);

#endif
