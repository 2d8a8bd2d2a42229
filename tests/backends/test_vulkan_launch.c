/* test_vulkan_launch.c — the Vulkan backend's graph_launch / graph_wait: a
 * step's small input writes are gathered into its submission and its reads
 * copied back behind it, with up to two steps in flight. Each case runs on
 * the unified-memory path and, with ALICE_VK_FORCE_STAGING=1, the
 * discrete-GPU one (device-only buffers; host_alloc memory filled by the GPU):
 *   - two launches in flight, the second's input written while the first
 *     runs: each reads its own input and its results land in its own dst;
 *   - a third launch while two are in flight, a wait with none: refused;
 *   - overlapping writes before one step: the last one wins;
 *   - a read of what was just written, before any step: the written bytes;
 *   - reads too large for the read-back area (ALICE_VK_READBACK_MAX): still
 *     right, also with a second launch submitted behind them;
 *   - reads outside their buffer or without a destination: refused;
 *   - steps waited for on fences (ALICE_VK_TIMELINE=0) as on the timeline
 *     semaphore, blocking and polled (ALICE_VK_SPIN), and the log says which.
 * Skipped (with the reason) where the Vulkan backend cannot run. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/log.h"
#include "alice/quant.h"

#define K 64
#define N 40

struct fx {
	struct alice_backend *be;
	const struct alice_backend_vtable *vt;
	struct alice_backend_ctx *ctx;
	struct alice_buffer *w, *io;
	float wf[N * K];
};

static uint64_t rs = 0x243f6a8885a308d3ull;
static float frand(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (float)((double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static bool setup(struct fx *f, bool staging)
{
	memset(f, 0, sizeof(*f));
	setenv("ALICE_VK_FORCE_STAGING", staging ? "1" : "0", 1);
	struct alice_error err = {{0}};
	if (alice_backend_open("vulkan", NULL, &f->be, &err) != ALICE_OK) {
		cr_log_info("vulkan backend not usable here: %s", err.msg);
		return false;
	}
	f->vt = f->be->vt;
	cr_assert_eq(alice_backend_init(f->be, NULL, &f->ctx, &err), ALICE_OK, "%s", err.msg);
	cr_assert(ALICE_VT_HAS(f->vt, graph_launch) && ALICE_VT_HAS(f->vt, graph_wait));
	for (int i = 0; i < N * K; i++)
		f->wf[i] = frand();
	cr_assert_eq(f->vt->buffer_alloc(f->ctx, sizeof(f->wf), ALICE_BUFFER_WEIGHTS, &f->w), ALICE_OK);
	cr_assert_eq(f->vt->buffer_write(f->ctx, f->w, 0, f->wf, sizeof(f->wf)), ALICE_OK);
	cr_assert_eq(f->vt->buffer_alloc(f->ctx, 1 << 16, ALICE_BUFFER_COMPUTE, &f->io), ALICE_OK);
	return true;
}

static void teardown(struct fx *f)
{
	f->vt->buffer_free(f->ctx, f->io);
	f->vt->buffer_free(f->ctx, f->w);
	f->vt->free(f->ctx);
	alice_backend_close(f->be);
}

/* out (N floats at byte 4096) = W x, x at byte 0 */
static struct alice_graph graph(struct fx *f, struct alice_tensor t[3], struct alice_node *n)
{
	t[0] = (struct alice_tensor){.type = ALICE_TYPE_F32, .ne = {N, 1, 1, 1}, .nb = {4, 4 * N, 4 * N, 4 * N},
				     .buf = f->io, .offset = 4096};
	t[1] = (struct alice_tensor){.type = ALICE_TYPE_F32, .ne = {K, N, 1, 1}, .nb = {4, 4 * K, 4 * K * N, 4 * K * N},
				     .buf = f->w};
	t[2] = (struct alice_tensor){.type = ALICE_TYPE_F32, .ne = {K, 1, 1, 1}, .nb = {4, 4 * K, 4 * K, 4 * K},
				     .buf = f->io, .offset = 0};
	*n = (struct alice_node){.op = ALICE_OP_MUL_MAT, .dst = 0, .src = {1, 2, -1, -1, -1, -1}};
	return (struct alice_graph){.n_tensors = 3, .n_nodes = 1, .tensors = t, .nodes = n};
}

static void check(const struct fx *f, const float *x, const float *out, const char *what)
{
	for (int n = 0; n < N; n++) {
		double ref = 0;
		for (int k = 0; k < K; k++)
			ref += (double)f->wf[n * K + k] * x[k];
		cr_assert(fabs(out[n] - ref) < 1e-4 * (1.0 + fabs(ref)), "%s: row %d: %g, host %g", what, n, out[n], ref);
	}
}

/* dst of a read: host_alloc memory where asked and given, else malloc */
static float *dst_mem(struct fx *f, bool host, bool *from_host)
{
	float *p = host && ALICE_VT_HAS(f->vt, host_alloc) ? f->vt->host_alloc(f->ctx, 4 * N) : NULL;
	*from_host = p != NULL;
	if (!p)
		p = malloc(4 * N);
	cr_assert_not_null(p);
	return p;
}

static void dst_free(struct fx *f, float *p, bool from_host)
{
	if (from_host)
		f->vt->host_free(f->ctx, p);
	else
		free(p);
}

static void two_in_flight(bool staging, bool host)
{
	struct fx f;
	if (!setup(&f, staging))
		cr_skip_test("vulkan backend not usable here");
	struct alice_tensor t[3];
	struct alice_node nd;
	struct alice_graph g = graph(&f, t, &nd);
	float x[3][K];
	float *out[3];
	bool hm[3];
	for (int s = 0; s < 3; s++) {
		for (int k = 0; k < K; k++)
			x[s][k] = frand();
		out[s] = dst_mem(&f, host, &hm[s]);
	}
	/* the discrete path hands out host_alloc memory (the GPU copies into it) */
	if (host && staging)
		cr_assert(hm[0] && hm[1] && hm[2], "host_alloc gave no memory on the staged path");
	for (int round = 0; round < 3; round++) {
		cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 0, x[0], sizeof(x[0])), ALICE_OK);
		struct alice_read r0 = {f.io, 4096, 4 * N, out[0]};
		cr_assert_eq(f.vt->graph_launch(f.ctx, &g, &r0, 1), ALICE_OK, "%s", f.vt->last_error(f.ctx));
		/* the next step's input, written while the first may still run */
		cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 0, x[1], sizeof(x[1])), ALICE_OK);
		struct alice_read r1 = {f.io, 4096, 4 * N, out[1]};
		cr_assert_eq(f.vt->graph_launch(f.ctx, &g, &r1, 1), ALICE_OK, "%s", f.vt->last_error(f.ctx));
		cr_assert_eq(f.vt->graph_launch(f.ctx, &g, NULL, 0), ALICE_ERR_INVALID, "a third launch in flight");
		cr_assert_eq(f.vt->graph_wait(f.ctx), ALICE_OK, "%s", f.vt->last_error(f.ctx));
		check(&f, x[0], out[0], "first launch");
		/* one in flight: a write for the third step, then its launch */
		cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 0, x[2], sizeof(x[2])), ALICE_OK);
		struct alice_read r2 = {f.io, 4096, 4 * N, out[2]};
		cr_assert_eq(f.vt->graph_launch(f.ctx, &g, &r2, 1), ALICE_OK, "%s", f.vt->last_error(f.ctx));
		cr_assert_eq(f.vt->graph_wait(f.ctx), ALICE_OK, "%s", f.vt->last_error(f.ctx));
		check(&f, x[1], out[1], "second launch");
		cr_assert_eq(f.vt->graph_wait(f.ctx), ALICE_OK, "%s", f.vt->last_error(f.ctx));
		check(&f, x[2], out[2], "third launch");
	}
	cr_assert_eq(f.vt->graph_wait(f.ctx), ALICE_ERR_INVALID, "a wait with nothing launched");
	for (int s = 0; s < 3; s++)
		dst_free(&f, out[s], hm[s]);
	teardown(&f);
}

Test(vulkan_launch, two_in_flight) { two_in_flight(false, false); }

static int g_tl, g_fences;
static void sink(enum alice_log_level level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	g_tl += strstr(msg, "steps waited for on a timeline semaphore") != NULL;
	g_fences += strstr(msg, "steps waited for on fences") != NULL;
}

/* each way of waiting, with each way of reading (two_in_flight) */
static void waits(const char *timeline, const char *spin)
{
	setenv("ALICE_VK_TIMELINE", timeline, 1);
	setenv("ALICE_VK_SPIN", spin, 1);
	g_tl = g_fences = 0;
	alice_log_set_sink(sink, NULL);
	alice_log_set_level(ALICE_LOG_INFO);
	two_in_flight(false, false);
	two_in_flight(true, true);
	alice_log_set_sink(NULL, NULL);
	unsetenv("ALICE_VK_TIMELINE");
	unsetenv("ALICE_VK_SPIN");
	cr_log_info("timeline %s, spin %s: %d contexts on the timeline, %d on fences", timeline, spin, g_tl, g_fences);
	if (timeline[0] == '0') {
		cr_assert(g_fences == 2 && g_tl == 0, "ALICE_VK_TIMELINE=0: %d on fences, %d on the timeline", g_fences, g_tl);
	} else { /* the timeline wherever device_info says the device has it (lavapipe and NVIDIA do) */
		struct alice_backend *be;
		struct alice_error err = {{0}};
		cr_assert_eq(alice_backend_open("vulkan", NULL, &be, &err), ALICE_OK, "%s", err.msg);
		struct alice_device_info info;
		memset(&info, 0, sizeof(info));
		cr_assert_eq(be->vt->device_info(0, &info), ALICE_OK);
		bool has = strstr(info.description, "timeline semaphores") != NULL;
		alice_backend_close(be);
		cr_log_info("device 0: %s", info.description);
		cr_assert(has ? g_tl == 2 && g_fences == 0 : g_fences == 2 && g_tl == 0,
			  "device %s timeline semaphores: %d contexts on the timeline, %d on fences", has ? "with" : "without",
			  g_tl, g_fences);
	}
}
Test(vulkan_launch, waits_fences_blocking) { waits("0", "0"); }
Test(vulkan_launch, waits_fences_polled) { waits("0", "100000"); }
Test(vulkan_launch, waits_timeline_blocking) { waits("1", "0"); }
Test(vulkan_launch, waits_timeline_polled) { waits("1", "100000"); }
Test(vulkan_launch, two_in_flight_staging) { two_in_flight(true, false); }
Test(vulkan_launch, two_in_flight_staging_host_alloc) { two_in_flight(true, true); }

static void overlapping_writes(bool staging)
{
	struct fx f;
	if (!setup(&f, staging))
		cr_skip_test("vulkan backend not usable here");
	struct alice_tensor t[3];
	struct alice_node nd;
	struct alice_graph g = graph(&f, t, &nd);
	float a[K], b[K / 2], want[K], back[K], out[N];
	for (int k = 0; k < K; k++)
		a[k] = frand();
	for (int k = 0; k < K / 2; k++)
		b[k] = frand();
	cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 0, a, sizeof(a)), ALICE_OK);
	/* the middle half again */
	cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 4 * (K / 4), b, sizeof(b)), ALICE_OK);
	memcpy(want, a, sizeof(a));
	memcpy(want + K / 4, b, sizeof(b));
	/* read back before any step: what was written */
	cr_assert_eq(f.vt->buffer_read(f.ctx, f.io, 4 * (K / 4), back, sizeof(b)), ALICE_OK);
	cr_assert_eq(memcmp(back, b, sizeof(b)), 0, "a read of the pending write");
	cr_assert_eq(f.vt->buffer_read(f.ctx, f.io, 0, back, sizeof(back)), ALICE_OK);
	cr_assert_eq(memcmp(back, want, sizeof(want)), 0, "a read across two writes");
	cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 0, a, sizeof(a)), ALICE_OK);
	cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 4 * (K / 4), b, sizeof(b)), ALICE_OK);
	struct alice_read r = {f.io, 4096, sizeof(out), out};
	cr_assert_eq(f.vt->graph_launch(f.ctx, &g, &r, 1), ALICE_OK, "%s", f.vt->last_error(f.ctx));
	cr_assert_eq(f.vt->graph_wait(f.ctx), ALICE_OK, "%s", f.vt->last_error(f.ctx));
	check(&f, want, out, "overlapping writes");
	teardown(&f);
}

Test(vulkan_launch, overlapping_writes) { overlapping_writes(false); }
Test(vulkan_launch, overlapping_writes_staging) { overlapping_writes(true); }

/* reads of N floats each, the read-back area holding less than one */
static void large_reads(bool staging)
{
	setenv("ALICE_VK_READBACK_MAX", "64", 1);
	struct fx f;
	if (!setup(&f, staging))
		cr_skip_test("vulkan backend not usable here");
	struct alice_tensor t[3];
	struct alice_node nd;
	struct alice_graph g = graph(&f, t, &nd);
	float x[2][K], out[2][N], in_back[K];
	for (int s = 0; s < 2; s++)
		for (int k = 0; k < K; k++)
			x[s][k] = frand();
	cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 0, x[0], sizeof(x[0])), ALICE_OK);
	struct alice_read r0[2] = {{f.io, 4096, sizeof(out[0]), out[0]}, {f.io, 0, sizeof(in_back), in_back}};
	cr_assert_eq(f.vt->graph_launch(f.ctx, &g, r0, 2), ALICE_OK, "%s", f.vt->last_error(f.ctx));
	/* the second step overwrites both sources */
	cr_assert_eq(f.vt->buffer_write(f.ctx, f.io, 0, x[1], sizeof(x[1])), ALICE_OK);
	struct alice_read r1 = {f.io, 4096, sizeof(out[1]), out[1]};
	cr_assert_eq(f.vt->graph_launch(f.ctx, &g, &r1, 1), ALICE_OK, "%s", f.vt->last_error(f.ctx));
	cr_assert_eq(f.vt->graph_wait(f.ctx), ALICE_OK, "%s", f.vt->last_error(f.ctx));
	cr_assert_eq(f.vt->graph_wait(f.ctx), ALICE_OK, "%s", f.vt->last_error(f.ctx));
	check(&f, x[0], out[0], "first launch");
	cr_assert_eq(memcmp(in_back, x[0], sizeof(in_back)), 0, "the first step's input, read back");
	check(&f, x[1], out[1], "second launch");
	teardown(&f);
	unsetenv("ALICE_VK_READBACK_MAX");
}

Test(vulkan_launch, large_reads) { large_reads(false); }
Test(vulkan_launch, large_reads_staging) { large_reads(true); }

/* reads outside their buffer, or with nowhere to go: refused with a message, nothing launched */
Test(vulkan_launch, bad_reads_refused)
{
	struct fx f;
	if (!setup(&f, false))
		cr_skip_test("vulkan backend not usable here");
	struct alice_tensor t[3];
	struct alice_node nd;
	struct alice_graph g = graph(&f, t, &nd);
	float out[N];
	struct alice_read past = {f.io, (1 << 16) - 8, 16, out}, nodst = {f.io, 0, 16, NULL};
	cr_assert_eq(f.vt->graph_launch(f.ctx, &g, &past, 1), ALICE_ERR_RANGE);
	cr_assert(strstr(f.vt->last_error(f.ctx), "outside the buffer"), "%s", f.vt->last_error(f.ctx));
	cr_assert_eq(f.vt->graph_launch(f.ctx, &g, &nodst, 1), ALICE_ERR_INVALID);
	cr_assert_eq(f.vt->graph_wait(f.ctx), ALICE_ERR_INVALID, "nothing was launched");
	teardown(&f);
}
