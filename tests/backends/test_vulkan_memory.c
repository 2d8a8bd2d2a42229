/* test_vulkan_memory.c — the Vulkan backend holds the weights once.
 *
 * On a unified-memory device (lavapipe here: device memory is host memory)
 * the weights must not be held twice. Two ways in, both measured with the
 * process's resident set (/proc/self/status RssAnon / RssFile):
 *   - import: a 96 MiB weight file is mmap'd and handed to buffer_import;
 *     a MUL_MAT that reads every row makes the device touch every page.
 *     Anonymous memory must not grow by a copy (< 1/4 of the file), the
 *     file-backed resident set grows by ~the file (the one copy), and the
 *     product must be right (so the device really read the mapping);
 *   - alloc + write: the same bytes written into a WEIGHTS buffer and the
 *     mapping dropped: anonymous memory grows by one copy (0.9 .. 1.25 x),
 *     not two (no staging copy on unified memory).
 * A 96 MiB F16 matrix is also over half of lavapipe's 128 MiB
 * maxStorageBufferRange, so the product goes through the sliced path.
 * Skipped (with the reason) when the Vulkan backend is absent or its probe
 * fails; the figures are printed either way. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"
#include "support/paths.h"

#define K 4096
#define N 12288 /* F16 [K, N] = 96 MiB */

struct rss {
	long anon_kb, file_kb;
};

static struct rss rss_now(void)
{
	struct rss r = {-1, -1};
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "RssAnon:", 8) == 0)
			r.anon_kb = strtol(line + 8, NULL, 10);
		else if (strncmp(line, "RssFile:", 8) == 0)
			r.file_kb = strtol(line + 8, NULL, 10);
	}
	if (f)
		fclose(f);
	return r;
}

static uint64_t rng_s = 0x243f6a8885a308d3ull;
static float frand(void)
{
	rng_s ^= rng_s << 13;
	rng_s ^= rng_s >> 7;
	rng_s ^= rng_s << 17;
	return (float)((double)(rng_s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

struct fixture {
	struct alice_backend *be;
	const struct alice_backend_vtable *vt;
	struct alice_backend_ctx *ctx;
	char path[4096];
	size_t size;
	float x[K];
};

/* Writes the weight file (random F16) and opens the backend, or skips. */
static void setup(struct fixture *fx)
{
	memset(fx, 0, sizeof(*fx));
	struct alice_error err = {{0}};
	enum alice_status st = alice_backend_open("vulkan", NULL, &fx->be, &err);
	if (st != ALICE_OK)
		cr_skip_test("vulkan backend not usable here: %s", err.msg);
	fx->vt = fx->be->vt;
	cr_assert_eq(alice_backend_init(fx->be, NULL, &fx->ctx, &err), ALICE_OK, "%s", err.msg);
	struct alice_device_info info;
	cr_assert_eq(fx->vt->device_info(-1, &info), ALICE_OK);
	if (!(info.flags & ALICE_DEVICE_UNIFIED_MEMORY))
		cr_skip_test("%s is not a unified-memory device", info.name);
	fx->size = (size_t)K * N * 2;
	snprintf(fx->path, sizeof(fx->path), "%s/vk_memtest_%d.bin", alice_test_build_dir(), (int)getpid());
	int fd = open(fx->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	cr_assert(fd >= 0, "cannot create %s", fx->path);
	uint16_t *row = malloc((size_t)K * 2);
	for (int n = 0; n < N; n++) {
		for (int k = 0; k < K; k++)
			row[k] = alice_fp32_to_fp16(frand());
		cr_assert_eq(write(fd, row, (size_t)K * 2), (ssize_t)K * 2);
	}
	free(row);
	close(fd);
	for (int k = 0; k < K; k++)
		fx->x[k] = frand();
}

static void teardown(struct fixture *fx)
{
	if (fx->path[0])
		unlink(fx->path);
	if (fx->ctx)
		fx->vt->free(fx->ctx);
	alice_backend_close(fx->be);
}

/* dst[N] = W[K, N]^T x on the device; W in wbuf at offset 0. */
static void matvec(struct fixture *fx, struct alice_buffer *wbuf, int n_rows, float *out)
{
	struct alice_buffer *io = NULL;
	cr_assert_eq(fx->vt->buffer_alloc(fx->ctx, (K + (uint64_t)n_rows) * 4, ALICE_BUFFER_COMPUTE, &io), ALICE_OK,
		     "%s", fx->vt->last_error(fx->ctx));
	cr_assert_eq(fx->vt->buffer_write(fx->ctx, io, 0, fx->x, K * 4), ALICE_OK);
	struct alice_tensor t[3] = {
		{.type = ALICE_TYPE_F32, .ne = {n_rows, 1, 1, 1}, .nb = {4, 4LL * n_rows, 4LL * n_rows, 4LL * n_rows},
		 .buf = io, .offset = K * 4},
		{.type = ALICE_TYPE_F16, .ne = {K, n_rows, 1, 1}, .nb = {2, 2 * K, 2LL * K * n_rows, 2LL * K * n_rows},
		 .buf = wbuf},
		{.type = ALICE_TYPE_F32, .ne = {K, 1, 1, 1}, .nb = {4, 4 * K, 4 * K, 4 * K}, .buf = io},
	};
	struct alice_node node = {.op = ALICE_OP_MUL_MAT, .dst = 0, .src = {1, 2, -1, -1, -1, -1}};
	struct alice_graph g = {.n_tensors = 3, .n_nodes = 1, .tensors = t, .nodes = &node};
	cr_assert_eq(fx->vt->graph_compute(fx->ctx, &g), ALICE_OK, "%s", fx->vt->last_error(fx->ctx));
	cr_assert_eq(fx->vt->buffer_read(fx->ctx, io, K * 4, out, (uint64_t)n_rows * 4), ALICE_OK);
	fx->vt->buffer_free(fx->ctx, io);
}

/* Rows 0, 97, 194 ... against a double-precision reference (x rounded to
 * F16 as the F16 dot does). */
static void check_rows(const uint16_t *w, const float *x, const float *out)
{
	double num = 0, den = 0;
	for (int n = 0; n < N; n += 97) {
		double ref = 0;
		for (int k = 0; k < K; k++)
			ref += (double)alice_fp16_to_fp32(w[(size_t)n * K + k]) *
			       (double)alice_fp16_to_fp32(alice_fp32_to_fp16(x[k]));
		num += (out[n] - ref) * (out[n] - ref);
		den += ref * ref;
	}
	cr_assert(num / den < 1e-9, "product NMSE %.3g", num / den);
}

Test(vulkan_memory, import_holds_weights_once, .timeout = 600)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	setup(fx);
	float *out = malloc((size_t)N * 4);
	/* warm up: pipelines compiled and scratch made before the baseline */
	{
		struct alice_buffer *w0 = NULL;
		cr_assert_eq(fx->vt->buffer_alloc(fx->ctx, (uint64_t)K * 2 * 64, ALICE_BUFFER_WEIGHTS, &w0), ALICE_OK);
		cr_assert_eq(fx->vt->buffer_clear(fx->ctx, w0, 0, (uint64_t)K * 2 * 64), ALICE_OK);
		matvec(fx, w0, 64, out);
		fx->vt->buffer_free(fx->ctx, w0);
	}
	int fd = open(fx->path, O_RDONLY);
	cr_assert(fd >= 0);
	void *map = mmap(NULL, fx->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	cr_assert(map != MAP_FAILED);
	struct rss r0 = rss_now();
	struct alice_buffer *wbuf = NULL;
	cr_assert_eq(fx->vt->buffer_import(fx->ctx, map, fx->size, &wbuf), ALICE_OK, "import: %s",
		     fx->vt->last_error(fx->ctx));
	matvec(fx, wbuf, N, out);
	struct rss r1 = rss_now();
	long d_anon = r1.anon_kb - r0.anon_kb, d_file = r1.file_kb - r0.file_kb, mb = (long)(fx->size / 1024);
	fprintf(stderr, "vulkan import: weights %ld KiB; RssAnon %+ld KiB, RssFile %+ld KiB after the device read them all\n",
		mb, d_anon, d_file);
	check_rows(map, fx->x, out);
	cr_expect(d_anon < mb / 4, "anonymous memory grew by %ld KiB for %ld KiB of imported weights (a copy?)", d_anon, mb);
	cr_expect(d_file > mb * 9 / 10 && d_file < mb * 11 / 10,
		  "file-backed resident memory grew by %ld KiB, expected ~%ld (the one copy)", d_file, mb);
	fx->vt->buffer_free(fx->ctx, wbuf);
	munmap(map, fx->size);
	free(out);
	teardown(fx);
	free(fx);
}

Test(vulkan_memory, alloc_write_holds_weights_once, .timeout = 600)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	setup(fx);
	float *out = malloc((size_t)N * 4);
	{
		struct alice_buffer *w0 = NULL;
		cr_assert_eq(fx->vt->buffer_alloc(fx->ctx, (uint64_t)K * 2 * 64, ALICE_BUFFER_WEIGHTS, &w0), ALICE_OK);
		cr_assert_eq(fx->vt->buffer_clear(fx->ctx, w0, 0, (uint64_t)K * 2 * 64), ALICE_OK);
		matvec(fx, w0, 64, out);
		fx->vt->buffer_free(fx->ctx, w0);
	}
	int fd = open(fx->path, O_RDONLY);
	cr_assert(fd >= 0);
	void *map = mmap(NULL, fx->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	cr_assert(map != MAP_FAILED);
	uint16_t *copy = malloc(fx->size); /* reference, not counted: taken before the baseline */
	memcpy(copy, map, fx->size);
	struct rss r0 = rss_now();
	struct alice_buffer *wbuf = NULL;
	cr_assert_eq(fx->vt->buffer_alloc(fx->ctx, fx->size, ALICE_BUFFER_WEIGHTS, &wbuf), ALICE_OK, "%s",
		     fx->vt->last_error(fx->ctx));
	for (size_t off = 0; off < fx->size; off += 8u << 20) {
		size_t n = fx->size - off < (8u << 20) ? fx->size - off : (8u << 20);
		cr_assert_eq(fx->vt->buffer_write(fx->ctx, wbuf, off, (const uint8_t *)map + off, n), ALICE_OK);
	}
	munmap(map, fx->size);
	matvec(fx, wbuf, N, out);
	struct rss r1 = rss_now();
	long d_anon = r1.anon_kb - r0.anon_kb, mb = (long)(fx->size / 1024);
	fprintf(stderr, "vulkan alloc+write: weights %ld KiB; RssAnon %+ld KiB (file mapping dropped)\n", mb, d_anon);
	check_rows(copy, fx->x, out);
	cr_expect(d_anon > mb * 9 / 10 && d_anon < mb * 5 / 4,
		  "anonymous memory grew by %ld KiB for %ld KiB of weights: expected one copy", d_anon, mb);
	fx->vt->buffer_free(fx->ctx, wbuf);
	free(copy);
	free(out);
	teardown(fx);
	free(fx);
}
