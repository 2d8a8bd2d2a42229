/* test_vulkan_replay.c — the Vulkan backend submits a recorded step again
 * when a graph equals the last one (decode steps); what it must never do is
 * replay stale work. Each case computes a small graph (MUL_MAT of Q8_0
 * weights, then ADD) and checks every result against the host:
 *   - the same graph twice with new inputs: the second run reads them;
 *   - the activations' buffer freed and a new one allocated (the allocator
 *     may hand back the same struct address, so the graph is byte-equal):
 *     the new buffer is read, not the freed one;
 *   - a graph that differs (another offset) between two equal ones.
 * Skipped (with the reason) where the Vulkan backend cannot run. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"

#define K 256
#define N 48

struct fx {
	struct alice_backend *be;
	const struct alice_backend_vtable *vt;
	struct alice_backend_ctx *ctx;
	struct alice_buffer *w;
	float wf[N * K]; /* the weights as the device sees them (dequantized) */
	float bias[N];
};

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (float)((double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void setup(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	struct alice_error err = {{0}};
	if (alice_backend_open("vulkan", NULL, &f->be, &err) != ALICE_OK)
		cr_skip_test("vulkan backend not usable here: %s", err.msg);
	f->vt = f->be->vt;
	cr_assert_eq(alice_backend_init(f->be, NULL, &f->ctx, &err), ALICE_OK, "%s", err.msg);
	size_t rb = alice_row_size(ALICE_TYPE_Q8_0, K);
	uint8_t *q = malloc(rb * N);
	float row[K];
	for (int n = 0; n < N; n++) {
		for (int k = 0; k < K; k++)
			row[k] = frand();
		cr_assert(alice_quantize(ALICE_TYPE_Q8_0, row, q + rb * n, K));
		alice_dequantize(ALICE_TYPE_Q8_0, q + rb * n, f->wf + (size_t)n * K, K);
		f->bias[n] = frand();
	}
	cr_assert_eq(f->vt->buffer_alloc(f->ctx, rb * N + 4 * N, ALICE_BUFFER_WEIGHTS, &f->w), ALICE_OK);
	cr_assert_eq(f->vt->buffer_write(f->ctx, f->w, 0, q, rb * N), ALICE_OK);
	cr_assert_eq(f->vt->buffer_write(f->ctx, f->w, rb * N, f->bias, 4 * N), ALICE_OK);
	free(q);
}

static void teardown(struct fx *f)
{
	if (f->w)
		f->vt->buffer_free(f->ctx, f->w);
	if (f->ctx)
		f->vt->free(f->ctx);
	alice_backend_close(f->be);
}

/* out = W x + bias, x at byte xoff of io, out after it; checked against the
 * host in double (the device rounds x to Q8_0 blocks, so a loose bound: a
 * stale or missing input is off by O(1)) */
static void step(struct fx *f, struct alice_buffer *io, uint64_t xoff, const float *x)
{
	size_t rb = alice_row_size(ALICE_TYPE_Q8_0, K);
	cr_assert_eq(f->vt->buffer_write(f->ctx, io, xoff, x, K * 4), ALICE_OK);
	uint64_t ooff = xoff + K * 4, hoff = ooff + N * 4;
	struct alice_tensor t[5] = {
		{.type = ALICE_TYPE_F32, .ne = {N, 1, 1, 1}, .nb = {4, 4 * N, 4 * N, 4 * N}, .buf = io, .offset = ooff},
		{.type = ALICE_TYPE_Q8_0, .ne = {K, N, 1, 1}, .nb = {34, (int64_t)rb, (int64_t)rb * N, (int64_t)rb * N}, .buf = f->w},
		{.type = ALICE_TYPE_F32, .ne = {K, 1, 1, 1}, .nb = {4, 4 * K, 4 * K, 4 * K}, .buf = io, .offset = xoff},
		{.type = ALICE_TYPE_F32, .ne = {N, 1, 1, 1}, .nb = {4, 4 * N, 4 * N, 4 * N}, .buf = f->w, .offset = rb * N},
		{.type = ALICE_TYPE_F32, .ne = {N, 1, 1, 1}, .nb = {4, 4 * N, 4 * N, 4 * N}, .buf = io, .offset = hoff},
	};
	struct alice_node nodes[2] = {
		{.op = ALICE_OP_MUL_MAT, .dst = 0, .src = {1, 2, -1, -1, -1, -1}},
		{.op = ALICE_OP_ADD, .dst = 4, .src = {0, 3, -1, -1, -1, -1}},
	};
	struct alice_graph g = {.n_tensors = 5, .n_nodes = 2, .tensors = t, .nodes = nodes};
	cr_assert_eq(f->vt->graph_compute(f->ctx, &g), ALICE_OK, "%s", f->vt->last_error(f->ctx));
	float out[N];
	cr_assert_eq(f->vt->buffer_read(f->ctx, io, hoff, out, N * 4), ALICE_OK);
	for (int n = 0; n < N; n++) {
		double ref = f->bias[n];
		for (int k = 0; k < K; k++)
			ref += (double)f->wf[(size_t)n * K + k] * x[k];
		cr_assert(fabs(out[n] - ref) < 0.05 * (1.0 + fabs(ref)), "row %d: %g, host %g", n, out[n], ref);
	}
}

static void fill(float *x)
{
	for (int k = 0; k < K; k++)
		x[k] = frand();
}

Test(vulkan_replay, same_graph_reads_new_inputs)
{
	struct fx *f = malloc(sizeof(*f));
	setup(f);
	struct alice_buffer *io = NULL;
	cr_assert_eq(f->vt->buffer_alloc(f->ctx, 8192, ALICE_BUFFER_COMPUTE, &io), ALICE_OK);
	float x[K];
	for (int i = 0; i < 4; i++) {
		fill(x);
		step(f, io, 0, x);
	}
	f->vt->buffer_free(f->ctx, io);
	teardown(f);
	free(f);
}

Test(vulkan_replay, freed_buffer_is_not_replayed)
{
	struct fx *f = malloc(sizeof(*f));
	setup(f);
	float x[K];
	for (int i = 0; i < 4; i++) {
		struct alice_buffer *io = NULL;
		cr_assert_eq(f->vt->buffer_alloc(f->ctx, 8192, ALICE_BUFFER_COMPUTE, &io), ALICE_OK);
		fill(x);
		step(f, io, 0, x);
		f->vt->buffer_free(f->ctx, io);
	}
	teardown(f);
	free(f);
}

Test(vulkan_replay, changed_graph_between_equal_ones)
{
	struct fx *f = malloc(sizeof(*f));
	setup(f);
	struct alice_buffer *io = NULL;
	cr_assert_eq(f->vt->buffer_alloc(f->ctx, 8192, ALICE_BUFFER_COMPUTE, &io), ALICE_OK);
	float x[K];
	const uint64_t offs[5] = {0, 0, 2048, 0, 2048};
	for (int i = 0; i < 5; i++) {
		fill(x);
		step(f, io, offs[i], x);
	}
	f->vt->buffer_free(f->ctx, io);
	teardown(f);
	free(f);
}
