/* op_case.h — one op test case for the backends' op tests
 * (tests/backends/test_ops.c): its tensors in host memory, the node, a
 * dense double reference over dst, the error bound; element access by
 * flat index over any strides, a seeded xorshift generator. */
#ifndef ALICE_TEST_OP_CASE_H
#define ALICE_TEST_OP_CASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/backend.h"

struct rng {
	uint64_t s;
};
uint64_t rng_u64(struct rng *r);
double rng_unif(struct rng *r); /* [0, 1) */
double rng_gauss(struct rng *r);

#define MAXT 6

struct tcase {
	char name[200];
	int nt;
	struct alice_tensor t[MAXT]; /* t[0] is dst; buf/offset set when run */
	uint8_t *host[MAXT];
	size_t size[MAXT];
	bool import[MAXT]; /* weights: try buffer_import */
	bool pack[MAXT];   /* weights: tensor_pack after the write, where the backend has it */
	struct alice_node node;
	double *ref; /* dense over dst's logical shape */
	double bound;
	bool core;
	bool bits; /* F32 dst compared bit for bit (infinities allowed) */
};

/* Append a zeroed case named by fmt to *arr (dst = tensor 0, no sources,
 * core). */
struct tcase *new_case(struct tcase **arr, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void tc_free(struct tcase *c);
/* A tensor with rows padded by pad elements and planes by pad rows (pad = 0:
 * contiguous), host memory zeroed. Returns its index. */
int tc_tensor(struct tcase *c, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, int pad);
int64_t nelem(const struct alice_tensor *t);
/* element `flat` of tensor i (F32, F16, BF16 or I32) */
double get_el(struct tcase *c, int i, int64_t flat);
void set_el(struct tcase *c, int i, int64_t flat, double v);
void fill_gauss(struct tcase *c, int i, struct rng *r, double sigma);
double *alloc_ref(struct tcase *c); /* zeroed, over dst */

#endif
