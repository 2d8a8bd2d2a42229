/* test_wcache_cuda.c — the CUDA backend keeps F16 copies of quantized
 * weights for prefill products (backends/cuda/wcache.cu). A product through
 * a kept copy gives the bits of the per-product dequantization
 * (ALICE_CUDA_WCACHE_MB=0); a copy is made once (device memory drops by its
 * size on the first product, not again), never outlives its weights (new
 * bytes written at the same place, or a new buffer after a free, give the new
 * weights' results) and is given back with them; past the budget the product
 * still runs. Skipped where no CUDA device is present. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"
#include "support/mm_run.h"

#define K 2048
#define N 2048
#define M 40
#define F16_BYTES ((uint64_t)K * N * 2)

struct wc_run {
	struct mm_run r;
	struct alice_buffer *wbuf, *cbuf; /* weights (WEIGHTS usage), activations + dst */
	uint64_t wbytes;
	uint32_t type;
	bool packed;
};

static void wc_open(struct wc_run *w, const char *env_mb)
{
	if (env_mb)
		setenv("ALICE_CUDA_WCACHE_MB", env_mb, 1);
	else
		unsetenv("ALICE_CUDA_WCACHE_MB");
	memset(w, 0, sizeof(*w));
	mm_run_open(&w->r, "cuda");
	size_t cb = (size_t)K * M * 4 + (size_t)N * M * 4 + 256;
	cr_assert_eq(w->r.vt->buffer_alloc(w->r.ctx, cb, ALICE_BUFFER_COMPUTE, &w->cbuf), ALICE_OK);
}

/* the weights' bytes into a (new unless keep) WEIGHTS buffer, packed where
 * the backend packs the type */
static void wc_weights(struct wc_run *w, uint32_t type, const uint8_t *q, bool keep)
{
	const struct alice_backend_vtable *vt = w->r.vt;
	w->type = type;
	w->wbytes = alice_row_size(type, K) * (uint64_t)N;
	if (!keep) {
		if (w->wbuf)
			vt->buffer_free(w->r.ctx, w->wbuf);
		cr_assert_eq(vt->buffer_alloc(w->r.ctx, w->wbytes, ALICE_BUFFER_WEIGHTS, &w->wbuf), ALICE_OK);
	}
	cr_assert_eq(vt->buffer_write(w->r.ctx, w->wbuf, 0, q, w->wbytes), ALICE_OK);
	struct alice_tensor t;
	mm_set_tensor(&t, type, K, N, w->wbuf, 0);
	if (ALICE_VT_HAS(vt, tensor_pack))
		cr_assert_eq(vt->tensor_pack(w->r.ctx, &t), ALICE_OK, "%s", vt->last_error(w->r.ctx));
	w->packed = t.flags & ALICE_TENSOR_PACKED;
}

static void wc_mul(struct wc_run *w, const float *x, float *d)
{
	const struct alice_backend_vtable *vt = w->r.vt;
	const uint64_t o_d = ((uint64_t)K * M * 4 + 255) & ~(uint64_t)255;
	cr_assert_eq(vt->buffer_write(w->r.ctx, w->cbuf, 0, x, (uint64_t)K * M * 4), ALICE_OK);
	struct alice_tensor t[3];
	mm_set_tensor(&t[0], ALICE_TYPE_F32, N, M, w->cbuf, o_d);
	mm_set_tensor(&t[1], w->type, K, N, w->wbuf, 0);
	t[1].flags = w->packed ? ALICE_TENSOR_PACKED : 0;
	mm_set_tensor(&t[2], ALICE_TYPE_F32, K, M, w->cbuf, 0);
	struct alice_node nd;
	mm_node_mul_mat(&nd);
	struct alice_graph g = {.n_tensors = 3, .n_nodes = 1, .tensors = t, .nodes = &nd};
	cr_assert_eq(vt->graph_compute(w->r.ctx, &g), ALICE_OK, "%s", vt->last_error(w->r.ctx));
	cr_assert_eq(vt->buffer_read(w->r.ctx, w->cbuf, o_d, d, (uint64_t)N * M * 4), ALICE_OK);
}

static void wc_close(struct wc_run *w)
{
	if (w->wbuf)
		w->r.vt->buffer_free(w->r.ctx, w->wbuf);
	w->r.vt->buffer_free(w->r.ctx, w->cbuf);
	mm_run_close(&w->r);
}

static uint64_t mem_free(struct wc_run *w)
{
	struct alice_device_info di;
	cr_assert_eq(w->r.vt->device_info(0, &di), ALICE_OK);
	return di.mem_free;
}

static uint8_t *quantized(uint32_t type, uint64_t *seed)
{
	size_t rs = alice_row_size(type, K);
	uint8_t *q = malloc(rs * N);
	float *row = malloc(sizeof(float) * K);
	cr_assert(q && row);
	for (int64_t n = 0; n < N; n++) {
		for (int64_t k = 0; k < K; k++)
			row[k] = mm_rng_gauss(seed);
		cr_assert(alice_quantize(type, row, q + n * rs, K));
	}
	free(row);
	return q;
}

static void same_bits(const float *a, const float *b, const char *what, uint32_t type)
{
	int64_t d = 0;
	for (int64_t i = 0; i < (int64_t)N * M; i++)
		d += memcmp(&a[i], &b[i], 4) != 0;
	cr_expect_eq(d, 0, "%s %s: %lld of %d outputs differ from the per-product dequantization", alice_type_name(type),
		     what, (long long)d, N * M);
}

Test(wcache_cuda, copies_match_and_follow_their_weights, .timeout = 300)
{
	static const uint32_t types[] = {ALICE_TYPE_Q4_K, ALICE_TYPE_Q6_K, ALICE_TYPE_Q8_0, ALICE_TYPE_Q5_0};
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	float *x = malloc(sizeof(float) * K * M);
	cr_assert_not_null(x);
	for (int64_t i = 0; i < (int64_t)K * M; i++)
		x[i] = mm_rng_gauss(&seed);
	for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
		const uint32_t type = types[ti];
		uint8_t *q1 = quantized(type, &seed), *q2 = quantized(type, &seed);
		float *ref1 = malloc(sizeof(float) * N * M), *ref2 = malloc(sizeof(float) * N * M);
		float *out = malloc(sizeof(float) * N * M);
		cr_assert(ref1 && ref2 && out);
		struct wc_run off, on, small;
		wc_open(&off, "0"); /* warm-up: the process loads the kernels once */
		wc_weights(&off, type, q1, false);
		wc_mul(&off, x, ref1);
		wc_close(&off);
		wc_open(&off, "0"); /* references: dequantized per product */
		wc_weights(&off, type, q1, false);
		uint64_t g0 = mem_free(&off);
		wc_mul(&off, x, ref1);
		const uint64_t drop_off = g0 - mem_free(&off); /* the context's scratch */
		wc_weights(&off, type, q2, false);
		wc_mul(&off, x, ref2);
		wc_close(&off);

		wc_open(&on, NULL);
		wc_weights(&on, type, q1, false);
		uint64_t f0 = mem_free(&on);
		wc_mul(&on, x, out);
		same_bits(ref1, out, "first product (copy made)", type);
		uint64_t f1 = mem_free(&on);
		cr_expect_geq(f0 - f1, drop_off + F16_BYTES,
			      "%s: device memory fell by %llu bytes on the first product, %llu without copies: not by the copy's %llu more",
			      alice_type_name(type), (unsigned long long)(f0 - f1), (unsigned long long)drop_off,
			      (unsigned long long)F16_BYTES);
		wc_mul(&on, x, out);
		same_bits(ref1, out, "second product (copy kept)", type);
		cr_expect_eq(mem_free(&on), f1, "%s: a second copy was made", alice_type_name(type));
		/* new bytes at the same place: the old copy must not be used */
		wc_weights(&on, type, q2, true);
		wc_mul(&on, x, out);
		same_bits(ref2, out, "after the weights were rewritten in place", type);
		/* a new buffer (often at the freed one's address) */
		wc_weights(&on, type, q1, false);
		wc_mul(&on, x, out);
		same_bits(ref1, out, "in a new buffer after a free", type);
		uint64_t f2 = mem_free(&on);
		on.r.vt->buffer_free(on.r.ctx, on.wbuf);
		on.wbuf = NULL;
		cr_expect_geq(mem_free(&on) - f2, F16_BYTES, "%s: the copy was not given back with its weights",
			      alice_type_name(type));
		wc_close(&on);

		wc_open(&small, "1"); /* 1 MiB: the copy does not fit, the product still runs */
		wc_weights(&small, type, q2, false);
		wc_mul(&small, x, out);
		same_bits(ref2, out, "past the budget", type);
		wc_close(&small);
		free(q1);
		free(q2);
		free(ref1);
		free(ref2);
		free(out);
	}
	unsetenv("ALICE_CUDA_WCACHE_MB");
	free(x);
}
