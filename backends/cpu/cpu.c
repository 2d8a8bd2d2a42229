/* cpu.c — the CPU backend's vtable: probe, contexts, buffers (alloc and
 * zero-copy import of the mmap'd weights), op support and graph execution.
 * The kernels live in ops_*.c (what an op means) and vec_*.c (SIMD). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>

#include "alice/backend_log.h"
#include "cpu_internal.h"

static const struct alice_backend_host *g_host;

static void cpu_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ALICE_BACKEND_DEFINE_LOG(static, cpu_log, g_host)
ALICE_BACKEND_DEFINE_FAIL(, cpu_fail)

static void *alloc64(size_t n)
{
	size_t sz = (n + 63) & ~(size_t)63;
	return aligned_alloc(64, sz ? sz : 64);
}

enum alice_status cpu_scratch(struct alice_backend_ctx *ctx, size_t bytes, size_t tbytes)
{
	if (bytes > ctx->wsize) {
		void *p = alloc64(bytes);
		if (!p)
			return cpu_fail(ctx, ALICE_ERR_NOMEM, "out of memory (%zu bytes of scratch)", bytes);
		free(ctx->wdata);
		ctx->wdata = p;
		ctx->wsize = bytes;
	}
	if (tbytes > ctx->tsize) {
		for (int i = 0; i < ctx->n_threads; i++) {
			void *p = alloc64(tbytes);
			if (!p)
				return cpu_fail(ctx, ALICE_ERR_NOMEM, "out of memory (%zu bytes of thread scratch)",
						tbytes);
			free(ctx->tdata[i]);
			ctx->tdata[i] = p;
		}
		ctx->tsize = tbytes;
	}
	return ALICE_OK;
}

/* ---- probe / device ---- */

static int cpu_probe(char *reason, size_t reason_len)
{
	(void)reason;
	(void)reason_len;
	return 1;
}

static void cpu_model_name(char *out, size_t len)
{
	snprintf(out, len, "CPU");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) == 0) {
			char *c = strchr(line, ':');
			if (c) {
				c++;
				while (*c == ' ' || *c == '\t')
					c++;
				c[strcspn(c, "\n")] = '\0';
				snprintf(out, len, "%s", c);
			}
			break;
		}
	}
	fclose(f);
}

static enum alice_status cpu_device_info(int device, struct alice_device_info *out)
{
	if (!out || device > 0)
		return ALICE_ERR_INVALID;
	memset(out, 0, sizeof(*out));
	char model[96];
	cpu_model_name(model, sizeof(model));
	cpu_kernels_select();
	snprintf(out->name, sizeof(out->name), "%s (%d cores)", model, cpu_physical_cores());
	char flags[160];
	cpu_flags_string(flags, sizeof(flags));
	snprintf(out->description, sizeof(out->description), "kernels: %s; cpu flags: %s", cpu_k->isa, flags);
	struct sysinfo si;
	if (sysinfo(&si) == 0) {
		out->mem_total = (uint64_t)si.totalram * si.mem_unit;
		out->mem_free = (uint64_t)(si.freeram + si.bufferram) * si.mem_unit;
	}
	/* what can be had without swapping, page cache included */
	FILE *mi = fopen("/proc/meminfo", "r");
	if (mi) {
		char line[128];
		unsigned long long kb;
		while (fgets(line, sizeof(line), mi))
			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
				out->mem_free = (uint64_t)kb * 1024;
				break;
			}
		fclose(mi);
	}
	out->flags = ALICE_DEVICE_UNIFIED_MEMORY | ALICE_DEVICE_HOST_IMPORT | ALICE_DEVICE_PREFER_COPY;
	return ALICE_OK;
}

/* ---- contexts ---- */

static enum alice_status cpu_init(const struct alice_backend_options *opts,
				  struct alice_backend_ctx **out, char *err, size_t err_len)
{
	*out = NULL;
	int n_threads = 0;
	if (opts && opts->size >= offsetof(struct alice_backend_options, n_threads) + sizeof(int32_t))
		n_threads = opts->n_threads;
	if (n_threads < 0 || n_threads > CPU_MAX_THREADS) {
		snprintf(err, err_len, "n_threads %d out of range (0..%d)", n_threads, CPU_MAX_THREADS);
		return ALICE_ERR_INVALID;
	}
	const char *env_threads = getenv("ALICE_CPU_THREADS"); /* default when opts say 0 */
	if (n_threads == 0 && env_threads && atoi(env_threads) > 0 && atoi(env_threads) <= CPU_MAX_THREADS)
		n_threads = atoi(env_threads);
	if (n_threads == 0)
		n_threads = cpu_physical_cores();
	cpu_kernels_select();
	struct alice_backend_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		snprintf(err, err_len, "out of memory");
		return ALICE_ERR_NOMEM;
	}
	ctx->n_threads = n_threads;
	ctx->pool = cpu_pool_create(n_threads);
	if (!ctx->pool) {
		free(ctx);
		snprintf(err, err_len, "cannot start %d threads", n_threads);
		return ALICE_ERR_BACKEND;
	}
	const char *prof = getenv("ALICE_CPU_PROFILE");
	ctx->profile = prof && *prof && strcmp(prof, "0") != 0;
	cpu_log(1, "cpu backend: %d threads, %s kernels", n_threads, cpu_k->isa);
	*out = ctx;
	return ALICE_OK;
}

static void profile_report(struct alice_backend_ctx *ctx)
{
	double total = 0.0;
	for (int i = 0; i < CPU_OP_COUNT; i++)
		total += ctx->prof_s[i];
	cpu_log(1, "cpu profile: %.3f s of calling-thread CPU in graph_compute", total);
	for (int i = 0; i < CPU_OP_COUNT + ALICE_TYPE_COUNT; i++) {
		if (!ctx->prof_n[i])
			continue;
		cpu_log(1, "cpu profile: %-10s %-6s %8ld calls %9.3f s (%5.1f%%)",
			i < CPU_OP_COUNT ? alice_bc_op_name((uint32_t)i) : "MUL_MAT",
			i < CPU_OP_COUNT ? "" : alice_type_name((uint32_t)(i - CPU_OP_COUNT)),
			ctx->prof_n[i], ctx->prof_s[i], total > 0 ? 100.0 * ctx->prof_s[i] / total : 0.0);
	}
}

static void cpu_free(struct alice_backend_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->profile)
		profile_report(ctx);
	cpu_pool_free(ctx->pool);
	free(ctx->wdata);
	for (int i = 0; i < CPU_MAX_THREADS; i++)
		free(ctx->tdata[i]);
	free(ctx);
}

static const char *cpu_last_error(struct alice_backend_ctx *ctx)
{
	return ctx ? ctx->err : "no context";
}

/* ---- buffers ---- */

static enum alice_status cpu_buffer_alloc(struct alice_backend_ctx *ctx, uint64_t size, uint32_t usage,
					  struct alice_buffer **out)
{
	*out = NULL;
	if (size > (uint64_t)SIZE_MAX - 64)
		return cpu_fail(ctx, ALICE_ERR_NOMEM, "buffer of %llu bytes is too large",
				(unsigned long long)size);
	struct alice_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return cpu_fail(ctx, ALICE_ERR_NOMEM, "out of memory");
	b->data = alloc64((size_t)size);
	if (!b->data) {
		free(b);
		return cpu_fail(ctx, ALICE_ERR_NOMEM, "out of memory allocating %llu bytes",
				(unsigned long long)size);
	}
	b->size = size;
	b->owned = true;
	*out = b;
	return ALICE_OK;
}

static enum alice_status cpu_buffer_import(struct alice_backend_ctx *ctx, const void *host, uint64_t size,
					   struct alice_buffer **out)
{
	*out = NULL;
	if (!host && size)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "buffer_import of NULL");
	struct alice_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return cpu_fail(ctx, ALICE_ERR_NOMEM, "out of memory");
	b->data = (uint8_t *)(uintptr_t)host; /* never written: weights are read-only */
	b->size = size;
	b->owned = false;
	*out = b;
	return ALICE_OK;
}

static void cpu_buffer_free(struct alice_backend_ctx *ctx, struct alice_buffer *buf)
{
	if (!buf)
		return;
	if (buf->owned)
		free(buf->data);
	free(buf);
}

static enum alice_status check_range(struct alice_backend_ctx *ctx, struct alice_buffer *buf,
				     uint64_t offset, uint64_t size, const char *what)
{
	return alice_bc_check_range(buf != NULL, buf ? buf->size : 0, offset, size, what, ctx->err, sizeof(ctx->err));
}

static enum alice_status cpu_buffer_write(struct alice_backend_ctx *ctx, struct alice_buffer *buf,
					  uint64_t offset, const void *src, uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_write");
	if (st != ALICE_OK)
		return st;
	if (!buf->owned)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "buffer_write into an imported (read-only) buffer");
	if (size)
		memcpy(buf->data + offset, src, (size_t)size);
	return ALICE_OK;
}

static enum alice_status cpu_buffer_read(struct alice_backend_ctx *ctx, struct alice_buffer *buf,
					 uint64_t offset, void *dst, uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_read");
	if (st != ALICE_OK)
		return st;
	if (size)
		memcpy(dst, buf->data + offset, (size_t)size);
	return ALICE_OK;
}

static enum alice_status cpu_buffer_clear(struct alice_backend_ctx *ctx, struct alice_buffer *buf,
					  uint64_t offset, uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_clear");
	if (st != ALICE_OK)
		return st;
	if (!buf->owned)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "buffer_clear of an imported (read-only) buffer");
	if (size)
		memset(buf->data + offset, 0, (size_t)size);
	return ALICE_OK;
}

/* ---- graph ---- */

static const cpu_op_fn op_fns[CPU_OP_COUNT] = {
	[ALICE_OP_GET_ROWS] = cpu_op_get_rows, [ALICE_OP_MUL_MAT] = cpu_op_mul_mat,
	[ALICE_OP_ADD] = cpu_op_binary,	       [ALICE_OP_MUL] = cpu_op_binary,
	[ALICE_OP_SCALE] = cpu_op_scale,       [ALICE_OP_RMS_NORM] = cpu_op_rms_norm,
	[ALICE_OP_L2_NORM] = cpu_op_l2_norm,   [ALICE_OP_ROPE] = cpu_op_rope,
	[ALICE_OP_ATTENTION] = cpu_op_attention, [ALICE_OP_KV_WRITE] = cpu_op_kv_write,
	[ALICE_OP_GLU] = cpu_op_glu,	       [ALICE_OP_UNARY] = cpu_op_unary,
	[ALICE_OP_SOFTCAP] = cpu_op_softcap,   [ALICE_OP_COPY] = cpu_op_copy,
	[ALICE_OP_SSM_CONV] = cpu_op_ssm_conv, [ALICE_OP_GATED_DELTA_NET] = cpu_op_gated_delta_net,
	[ALICE_OP_NORM] = cpu_op_layer_norm,   [ALICE_OP_TOPK] = cpu_op_topk,
	[ALICE_OP_SAMPLE_TEMP] = cpu_op_sample_temp, [ALICE_OP_LOGIT_ADJUST] = cpu_op_logit_adjust,
	[ALICE_OP_FEED] = cpu_op_feed, [ALICE_OP_LOGSUMEXP] = cpu_op_logsumexp,
	[ALICE_OP_TOKEN_MASK] = cpu_op_token_mask,
};

/* The largest ne / nb per dim this backend takes. */
static const struct alice_bc_limits cpu_limits = {ALICE_BC_NE_MAX, ALICE_BC_NB_MAX};

/* Resolve a node's tensors; an error (with ctx->err) if indices or arity are bad. */
static enum alice_status node_args(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				   const struct alice_node *n, struct alice_op_args *a)
{
	return alice_bc_node_args(ctx, g, n, "cpu", n->op < CPU_OP_COUNT && op_fns[n->op], a, ctx->err, sizeof(ctx->err));
}

static enum alice_status check_tensor(struct alice_backend_ctx *ctx, const struct alice_tensor *t, int idx)
{
	return alice_bc_check_tensor(t, idx, &cpu_limits, t->buf ? t->buf->size : 0, ctx->err, sizeof(ctx->err));
}

static bool cpu_supports_op(struct alice_backend_ctx *ctx, const struct alice_graph *g,
			    const struct alice_node *node)
{
	struct alice_backend_ctx dummy;
	struct alice_op_args a;
	if (!ctx)
		ctx = &dummy;
	if (node_args(ctx, g, node, &a) != ALICE_OK)
		return false;
	return alice_bc_types_ok(node, a.dst, a.src);
}

static enum alice_status run_node(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				  const struct alice_node *n)
{
	struct alice_op_args a;
	enum alice_status st = node_args(ctx, g, n, &a);
	if (st != ALICE_OK)
		return st;
	st = alice_bc_check_node(ctx, check_tensor, n, a.dst, a.src, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	return op_fns[n->op](&a);
}

static enum alice_status cpu_graph_compute(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	if (!g || (g->n_nodes && !g->nodes) || (g->n_tensors && !g->tensors))
		return cpu_fail(ctx, ALICE_ERR_INVALID, "graph_compute: malformed graph");
	ctx->err[0] = '\0';
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		struct timespec t0, t1;
		if (ctx->profile)
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
		enum alice_status st = run_node(ctx, g, &g->nodes[i]);
		if (ctx->profile) {
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
			double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
			uint32_t op = g->nodes[i].op < CPU_OP_COUNT ? g->nodes[i].op : 0;
			ctx->prof_s[op] += dt;
			ctx->prof_n[op]++;
			int32_t w = g->nodes[i].src[0];
			if (op == ALICE_OP_MUL_MAT && w >= 0 && (uint32_t)w < g->n_tensors &&
			    g->tensors[w].type < ALICE_TYPE_COUNT) {
				ctx->prof_s[CPU_OP_COUNT + g->tensors[w].type] += dt;
				ctx->prof_n[CPU_OP_COUNT + g->tensors[w].type]++;
			}
		}
		if (st != ALICE_OK) {
			alice_bc_prefix_node(ctx->err, sizeof(ctx->err), i, g->nodes[i].op);
			cpu_pool_idle(ctx->pool);
			return st;
		}
	}
	cpu_pool_idle(ctx->pool);
	return ALICE_OK;
}

static const struct alice_backend_vtable cpu_vtable = {
	.abi_major = ALICE_BACKEND_ABI_MAJOR,
	.abi_minor = ALICE_BACKEND_ABI_MINOR,
	.size = sizeof(struct alice_backend_vtable),
	.name = "cpu",
	.probe = cpu_probe,
	.device_info = cpu_device_info,
	.init = cpu_init,
	.free = cpu_free,
	.last_error = cpu_last_error,
	.buffer_alloc = cpu_buffer_alloc,
	.buffer_import = cpu_buffer_import,
	.buffer_free = cpu_buffer_free,
	.buffer_write = cpu_buffer_write,
	.buffer_read = cpu_buffer_read,
	.buffer_clear = cpu_buffer_clear,
	.supports_op = cpu_supports_op,
	.graph_compute = cpu_graph_compute,
};

ALICE_BACKEND_EXPORT const struct alice_backend_vtable *alice_backend_entry(const struct alice_backend_host *host)
{
	g_host = alice_backend_host_accept(host);
	return &cpu_vtable;
}

ALICE_BACKEND_EXPORT int alice_backend_score(void)
{
	cpu_kernels_select();
	return 1 + (strcmp(cpu_k->isa, "scalar") != 0);
}
