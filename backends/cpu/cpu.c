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

#include "cpu_internal.h"

static const struct alice_backend_host *g_host;

static void cpu_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cpu_log(int level, const char *fmt, ...)
{
	if (!g_host || !g_host->log)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	g_host->log(level, msg);
}

enum alice_status cpu_fail(struct alice_backend_ctx *ctx, enum alice_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
	return st;
}

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
	snprintf(out->description, sizeof(out->description), "kernels: %s", cpu_k->isa);
	struct sysinfo si;
	if (sysinfo(&si) == 0) {
		out->mem_total = (uint64_t)si.totalram * si.mem_unit;
		out->mem_free = (uint64_t)(si.freeram + si.bufferram) * si.mem_unit;
	}
	out->flags = ALICE_DEVICE_UNIFIED_MEMORY | ALICE_DEVICE_HOST_IMPORT;
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

static const char *op_name(uint32_t op);

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
			i < CPU_OP_COUNT ? op_name((uint32_t)i) : "MUL_MAT",
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
	if (!buf)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "%s: NULL buffer", what);
	if (offset > buf->size || size > buf->size - offset)
		return cpu_fail(ctx, ALICE_ERR_RANGE, "%s: [%llu, +%llu) is outside the buffer of %llu bytes",
				what, (unsigned long long)offset, (unsigned long long)size,
				(unsigned long long)buf->size);
	return ALICE_OK;
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

static const char *const op_names[CPU_OP_COUNT] = {
	[ALICE_OP_NONE] = "NONE",	      [ALICE_OP_GET_ROWS] = "GET_ROWS",
	[ALICE_OP_MUL_MAT] = "MUL_MAT",	      [ALICE_OP_ADD] = "ADD",
	[ALICE_OP_MUL] = "MUL",		      [ALICE_OP_SCALE] = "SCALE",
	[ALICE_OP_RMS_NORM] = "RMS_NORM",     [ALICE_OP_L2_NORM] = "L2_NORM",
	[ALICE_OP_ROPE] = "ROPE",	      [ALICE_OP_ATTENTION] = "ATTENTION",
	[ALICE_OP_KV_WRITE] = "KV_WRITE",     [ALICE_OP_GLU] = "GLU",
	[ALICE_OP_UNARY] = "UNARY",	      [ALICE_OP_SOFTCAP] = "SOFTCAP",
	[ALICE_OP_COPY] = "COPY",
	[ALICE_OP_SSM_CONV] = "SSM_CONV",     [ALICE_OP_GATED_DELTA_NET] = "GATED_DELTA_NET",
};

static const cpu_op_fn op_fns[CPU_OP_COUNT] = {
	[ALICE_OP_GET_ROWS] = cpu_op_get_rows, [ALICE_OP_MUL_MAT] = cpu_op_mul_mat,
	[ALICE_OP_ADD] = cpu_op_binary,	       [ALICE_OP_MUL] = cpu_op_binary,
	[ALICE_OP_SCALE] = cpu_op_scale,       [ALICE_OP_RMS_NORM] = cpu_op_rms_norm,
	[ALICE_OP_L2_NORM] = cpu_op_l2_norm,   [ALICE_OP_ROPE] = cpu_op_rope,
	[ALICE_OP_ATTENTION] = cpu_op_attention, [ALICE_OP_KV_WRITE] = cpu_op_kv_write,
	[ALICE_OP_GLU] = cpu_op_glu,	       [ALICE_OP_UNARY] = cpu_op_unary,
	[ALICE_OP_SOFTCAP] = cpu_op_softcap,   [ALICE_OP_COPY] = cpu_op_copy,
	[ALICE_OP_SSM_CONV] = cpu_op_ssm_conv, [ALICE_OP_GATED_DELTA_NET] = cpu_op_gated_delta_net,
};

/* Inputs per op: minimum and maximum number of sources. */
static const int8_t op_nsrc[CPU_OP_COUNT][2] = {
	[ALICE_OP_GET_ROWS] = {2, 2}, [ALICE_OP_MUL_MAT] = {2, 3}, [ALICE_OP_ADD] = {2, 2},
	[ALICE_OP_MUL] = {2, 2},      [ALICE_OP_SCALE] = {1, 1},   [ALICE_OP_RMS_NORM] = {1, 2},
	[ALICE_OP_L2_NORM] = {1, 1},  [ALICE_OP_ROPE] = {2, 3},    [ALICE_OP_ATTENTION] = {4, 4},
	[ALICE_OP_KV_WRITE] = {2, 2}, [ALICE_OP_GLU] = {2, 2},	   [ALICE_OP_UNARY] = {1, 1},
	[ALICE_OP_SOFTCAP] = {1, 1},  [ALICE_OP_COPY] = {1, 1},
	[ALICE_OP_SSM_CONV] = {4, 4}, [ALICE_OP_GATED_DELTA_NET] = {6, 6},
};

static const char *op_name(uint32_t op)
{
	return op < CPU_OP_COUNT && op_names[op] ? op_names[op] : "unknown op";
}

/* Shape, stride and bounds checks of one tensor against its buffer. */
static enum alice_status check_tensor(struct alice_backend_ctx *ctx, const struct alice_tensor *t, int idx)
{
	const struct alice_type_info *ti = alice_type_info(t->type);
	if (!ti || !ti->supported)
		return cpu_fail(ctx, ALICE_ERR_UNSUPPORTED, "tensor %d: type %s (%u) is not supported", idx,
				alice_type_name(t->type), t->type);
	if (!t->buf)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "tensor %d has no buffer", idx);
	uint64_t extent = 0;
	for (int d = 0; d < ALICE_MAX_DIMS; d++) {
		if (t->ne[d] < 1 || t->ne[d] > ((int64_t)1 << 40) || t->nb[d] < 0 ||
		    t->nb[d] > ((int64_t)1 << 44))
			return cpu_fail(ctx, ALICE_ERR_INVALID, "tensor %d: bad ne/nb in dim %d (%lld, %lld)", idx,
					d, (long long)t->ne[d], (long long)t->nb[d]);
		uint64_t span;
		if (d > 0 && (__builtin_mul_overflow((uint64_t)(t->ne[d] - 1), (uint64_t)t->nb[d], &span) ||
			      __builtin_add_overflow(extent, span, &extent)))
			return cpu_fail(ctx, ALICE_ERR_INVALID, "tensor %d: extent overflows", idx);
	}
	int64_t n01, n23, nel;
	if (__builtin_mul_overflow(t->ne[0], t->ne[1], &n01) || __builtin_mul_overflow(t->ne[2], t->ne[3], &n23) ||
	    __builtin_mul_overflow(n01, n23, &nel) || nel > ((int64_t)1 << 48))
		return cpu_fail(ctx, ALICE_ERR_INVALID, "tensor %d: too many elements", idx);
	if (ti->block_size > 1) {
		if (t->ne[0] % ti->block_size != 0 || t->nb[0] != (int64_t)ti->type_size)
			return cpu_fail(ctx, ALICE_ERR_INVALID,
					"tensor %d: %s rows need ne[0] %% %u == 0 and nb[0] == %u (got %lld, %lld)",
					idx, ti->name, ti->block_size, ti->type_size, (long long)t->ne[0],
					(long long)t->nb[0]);
		extent += alice_row_size(t->type, t->ne[0]);
	} else {
		uint64_t span;
		if (__builtin_mul_overflow((uint64_t)(t->ne[0] - 1), (uint64_t)t->nb[0], &span) ||
		    __builtin_add_overflow(extent, span + ti->type_size, &extent))
			return cpu_fail(ctx, ALICE_ERR_INVALID, "tensor %d: extent overflows", idx);
	}
	if (t->offset > t->buf->size || extent > t->buf->size - t->offset)
		return cpu_fail(ctx, ALICE_ERR_RANGE,
				"tensor %d: [%llu, +%llu) is outside its buffer of %llu bytes", idx,
				(unsigned long long)t->offset, (unsigned long long)extent,
				(unsigned long long)t->buf->size);
	return ALICE_OK;
}

static bool is_f32(const struct alice_tensor *t)
{
	return t && t->type == ALICE_TYPE_F32;
}

static bool is_i32(const struct alice_tensor *t)
{
	return t && t->type == ALICE_TYPE_I32;
}

static bool is_float_type(uint32_t type)
{
	return type == ALICE_TYPE_F32 || type == ALICE_TYPE_F16 || type == ALICE_TYPE_BF16;
}

/* Type combinations each op handles (shapes are checked when it runs). */
static bool types_ok(const struct alice_node *n, const struct alice_tensor *dst,
		     const struct alice_tensor *const *s)
{
	switch (n->op) {
	case ALICE_OP_GET_ROWS:
		return cpu_weight_type_ok(s[0]->type) && is_i32(s[1]) && is_f32(dst);
	case ALICE_OP_MUL_MAT:
		return cpu_weight_type_ok(s[0]->type) && is_f32(s[1]) && is_f32(dst);
	case ALICE_OP_ADD:
	case ALICE_OP_MUL:
	case ALICE_OP_GLU:
		return is_f32(s[0]) && is_f32(s[1]) && is_f32(dst) &&
		       (n->op != ALICE_OP_GLU || cpu_act_ok(n->ip[0]));
	case ALICE_OP_UNARY:
		return is_f32(s[0]) && is_f32(dst) && cpu_act_ok(n->ip[0]);
	case ALICE_OP_SCALE:
	case ALICE_OP_L2_NORM:
	case ALICE_OP_SOFTCAP:
		return is_f32(s[0]) && is_f32(dst);
	case ALICE_OP_RMS_NORM:
		return is_f32(s[0]) && is_f32(dst) && (!s[1] || is_f32(s[1]));
	case ALICE_OP_ROPE:
		return is_f32(s[0]) && is_i32(s[1]) && is_f32(dst) && (!s[2] || is_f32(s[2])) &&
		       (n->ip[1] == ALICE_ROPE_NORMAL || n->ip[1] == ALICE_ROPE_NEOX ||
			n->ip[1] == ALICE_ROPE_IMROPE);
	case ALICE_OP_ATTENTION:
		return is_f32(s[0]) && (s[1]->type == ALICE_TYPE_F16 || s[1]->type == ALICE_TYPE_F32) &&
		       (s[2]->type == ALICE_TYPE_F16 || s[2]->type == ALICE_TYPE_F32) && is_i32(s[3]) &&
		       is_f32(dst);
	case ALICE_OP_KV_WRITE:
		return is_f32(s[0]) && is_i32(s[1]) &&
		       (dst->type == ALICE_TYPE_F16 || dst->type == ALICE_TYPE_F32);
	case ALICE_OP_COPY:
		return is_float_type(s[0]->type) && is_float_type(dst->type);
	case ALICE_OP_SSM_CONV:
		return is_f32(s[0]) && is_f32(s[1]) && is_f32(s[2]) && is_i32(s[3]) && is_f32(dst);
	case ALICE_OP_GATED_DELTA_NET:
		return is_f32(s[0]) && is_f32(s[1]) && is_f32(s[2]) && is_f32(s[3]) && is_f32(s[4]) && is_i32(s[5]) &&
		       is_f32(dst);
	default:
		return false;
	}
}

/* Resolve a node's tensors; false (with ctx->err) if indices are bad. */
static enum alice_status node_args(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				   const struct alice_node *n, struct cpu_op_args *a)
{
	memset(a, 0, sizeof(*a));
	a->ctx = ctx;
	a->node = n;
	if (n->op == ALICE_OP_NONE || n->op >= CPU_OP_COUNT || !op_fns[n->op])
		return cpu_fail(ctx, ALICE_ERR_UNSUPPORTED, "op %u is not supported by the cpu backend", n->op);
	if (n->dst < 0 || (uint32_t)n->dst >= g->n_tensors)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "dst tensor index %d out of range", n->dst);
	a->dst = &g->tensors[n->dst];
	int nsrc = 0;
	for (int i = 0; i < ALICE_MAX_SRC; i++) {
		if (n->src[i] < 0)
			continue;
		if ((uint32_t)n->src[i] >= g->n_tensors)
			return cpu_fail(ctx, ALICE_ERR_INVALID, "src[%d] tensor index %d out of range", i,
					n->src[i]);
		a->src[i] = &g->tensors[n->src[i]];
		nsrc = i + 1;
	}
	for (int i = 0; i < op_nsrc[n->op][0]; i++)
		if (!a->src[i])
			return cpu_fail(ctx, ALICE_ERR_INVALID, "src[%d] is required", i);
	if (nsrc > op_nsrc[n->op][1])
		return cpu_fail(ctx, ALICE_ERR_INVALID, "too many sources (%d, at most %d)", nsrc,
				op_nsrc[n->op][1]);
	return ALICE_OK;
}

static bool cpu_supports_op(struct alice_backend_ctx *ctx, const struct alice_graph *g,
			    const struct alice_node *node)
{
	struct alice_backend_ctx dummy;
	struct cpu_op_args a;
	if (!ctx)
		ctx = &dummy;
	if (node_args(ctx, g, node, &a) != ALICE_OK)
		return false;
	return types_ok(node, a.dst, a.src);
}

static enum alice_status run_node(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				  const struct alice_node *n)
{
	struct cpu_op_args a;
	enum alice_status st = node_args(ctx, g, n, &a);
	if (st != ALICE_OK)
		return st;
	st = check_tensor(ctx, a.dst, n->dst);
	for (int i = 0; i < ALICE_MAX_SRC && st == ALICE_OK; i++)
		if (a.src[i])
			st = check_tensor(ctx, a.src[i], n->src[i]);
	if (st != ALICE_OK)
		return st;
	if (!types_ok(n, a.dst, a.src)) {
		char types[160];
		int w = snprintf(types, sizeof(types), "dst %s", alice_type_name(a.dst->type));
		for (int i = 0; i < ALICE_MAX_SRC && w > 0 && (size_t)w < sizeof(types); i++)
			if (a.src[i])
				w += snprintf(types + w, sizeof(types) - (size_t)w, ", src%d %s", i,
					      alice_type_name(a.src[i]->type));
		return cpu_fail(ctx, ALICE_ERR_UNSUPPORTED, "unsupported types or params (%s; ip[0]=%d ip[1]=%d)",
				types, n->ip[0], n->ip[1]);
	}
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
			char msg[sizeof(ctx->err)];
			snprintf(msg, sizeof(msg), "%s", ctx->err);
			snprintf(ctx->err, sizeof(ctx->err), "node %u (%s): %.470s", i, op_name(g->nodes[i].op),
				 msg);
			return st;
		}
	}
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
	if (host && host->abi_major == ALICE_BACKEND_ABI_MAJOR)
		g_host = host;
	return &cpu_vtable;
}

ALICE_BACKEND_EXPORT int alice_backend_score(void)
{
	cpu_kernels_select();
	return 1 + (strcmp(cpu_k->isa, "scalar") != 0);
}
