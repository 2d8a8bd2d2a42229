/* mm_run.h — one MUL_MAT node run on a backend, for the tests that compare
 * its columns (test_mm_invariance.c, test_mm_prefill.c): seeded inputs,
 * the backends to run on, the node itself. */
#ifndef ALICE_TEST_MM_RUN_H
#define ALICE_TEST_MM_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"

uint64_t mm_rng_next(uint64_t *s);
/* sum of 4 uniforms, scaled: close enough to N(0,1) for weights/activations */
float mm_rng_gauss(uint64_t *s);

/* the names of the backends found (not shadowed), at most cap */
size_t mm_backend_names(char (*names)[ALICE_BACKEND_NAME_MAX], size_t cap);

/* An open backend and its context. mm_run_open skips the test (with the
 * probe's reason) where the backend cannot run here. */
struct mm_run {
	struct alice_backend *be;
	const struct alice_backend_vtable *vt;
	struct alice_backend_ctx *ctx;
	bool pack; /* weights through the backend's tensor_pack, where it has one */
};
void mm_run_open(struct mm_run *r, const char *backend);
void mm_run_close(struct mm_run *r);

/* a dense 2-D tensor [ne0, ne1] of type at buf + off */
void mm_set_tensor(struct alice_tensor *t, uint32_t type, int64_t ne0, int64_t ne1, struct alice_buffer *buf,
		   uint64_t off);

/* a MUL_MAT node: dst tensor 0, weights 1, activations 2, no src2 */
void mm_node_mul_mat(struct alice_node *nd);

/* dst [N, M] = w [K, N] . x [K, M]. each_own_seq: every column is its own
 * sequence's one row (src2, ip[0] = 1: a batched decode step); otherwise
 * the M columns are one sequence's prefill. */
void mm_run_mul_mat(struct mm_run *r, uint32_t type, const uint8_t *w, int64_t K, int64_t N, const float *x,
		    int64_t M, float *dst, bool each_own_seq);

#endif
