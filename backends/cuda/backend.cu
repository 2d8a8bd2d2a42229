/* backend.cu — the CUDA backend's vtable: probe, device info, contexts,
 * device buffers, op support, and graph execution with CUDA-graph replay.
 *
 * graph_compute validates every node on the host, sizes the shared scratch
 * region for the whole graph, then launches the op kernels on the context's
 * stream. When a graph's signature (every node's op, sources and params,
 * every tensor's type, shape, strides and device address, and the scratch
 * region) equals the previous call's, the kernel sequence is captured once
 * into a CUDA graph and replayed from then on: a decode step only changes
 * input *data* (written by buffer_write before the call; the small writes
 * become one gather kernel at the graph's head, inputs.cu), and every kernel
 * reads its variable inputs (positions, cell ranges, ids) from device memory,
 * so the replay computes the new step. Any other graph runs as plain launches.
 * Launch fusion (ALICE_CUDA_FUSE=0 turns it off): consecutive mat-vecs of one
 * input (+ GLU), residual ADD + RMS_NORM, the q/k ROPE pair with both
 * KV_WRITEs (or either pair alone) each run as one launch, when no output
 * shares memory with the group's inputs (the core's placer keeps a node's
 * output off its predecessor's inputs, so neighbours usually qualify); an
 * ADD + RMS_NORM or a GLU before a prefill GEMM also writes that GEMM's
 * rounded F16 operand. A short prefill's Q/K/V products are one GEMM
 * (mm_group.cuh) with fusion on or off.
 * Bad input data (row ids, cells, cell ranges out of range, SSM sequence
 * ids outside the state) sets a device flag that fails the call after it
 * ran.
 * A CUDA error fails the call with last_error set; the process never aborts
 * (after a sticky error, a kernel fault, the message says that the CUDA
 * context is lost). ALICE_CUDA_INJECT_FAULT=N (tests/backends/
 * test_cuda_errors.c): the context's Nth graph_compute meets a real CUDA
 * launch error, to test the error path up to the server's 500. */
#include <stdarg.h>
#include <stdlib.h>

#include "alice/backend_log.h"
#include "common.cuh"
#include "rope.cuh"

static const struct alice_backend_host *g_host;

ALICE_BACKEND_DEFINE_LOG(, cu_log, g_host)
ALICE_BACKEND_DEFINE_FAIL(, cu_fail)

/* Errors after which the CUDA context is unusable (a kernel fault). */
static bool cu_sticky(cudaError_t e)
{
	return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorIllegalInstruction ||
	       e == cudaErrorMisalignedAddress || e == cudaErrorInvalidAddressSpace || e == cudaErrorInvalidPc ||
	       e == cudaErrorHardwareStackError || e == cudaErrorAssert || e == cudaErrorECCUncorrectable ||
	       e == cudaErrorLaunchTimeout;
}

/* ---- probe / device ---- */

#define CU_MIN_CC_MAJOR 9 /* the build targets sm_90 (+ PTX of compute_90) */

static int cu_probe(char *reason, size_t reason_len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(reason, reason_len, "no CUDA device: cudaGetDeviceCount returned %s (%s)", cudaGetErrorName(e),
			 cudaGetErrorString(e));
		cudaGetLastError();
		return 0;
	}
	if (n == 0) {
		snprintf(reason, reason_len, "no CUDA device: the driver reports 0 devices");
		return 0;
	}
	int usable = 0;
	for (int i = 0; i < n; i++) {
		int major = 0;
		if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) == cudaSuccess &&
		    major >= CU_MIN_CC_MAJOR)
			usable++;
	}
	if (!usable) {
		int major = 0, minor = 0;
		cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
		cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
		snprintf(reason, reason_len,
			 "no usable CUDA device: device 0 has compute capability %d.%d, this build needs %d.0 or newer "
			 "(ALICE_CUDA_ARCHS)", major, minor, CU_MIN_CC_MAJOR);
		return 0;
	}
	return usable;
}

static enum alice_status cu_device_info(int device, struct alice_device_info *out)
{
	if (!out)
		return ALICE_ERR_INVALID;
	memset(out, 0, sizeof(*out));
	if (device < 0)
		device = 0;
	cudaDeviceProp prop;
	if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
		cudaGetLastError();
		return ALICE_ERR_INVALID;
	}
	int drv = 0, rt = 0;
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	snprintf(out->name, sizeof(out->name), "%.127s", prop.name);
	snprintf(out->description, sizeof(out->description),
		 "compute capability %d.%d, %d SMs, %.0f MiB L2, driver %d.%d, runtime %d.%d", prop.major, prop.minor,
		 prop.multiProcessorCount, prop.l2CacheSize / 1048576.0, drv / 1000, (drv % 1000) / 10, rt / 1000,
		 (rt % 1000) / 10);
	int prev = 0;
	cudaGetDevice(&prev);
	size_t fr = 0, tot = 0;
	if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
		out->mem_free = fr;
		out->mem_total = tot;
	} else {
		out->mem_total = prop.totalGlobalMem;
		cudaGetLastError();
	}
	cudaSetDevice(prev);
	out->flags = 0;
	return ALICE_OK;
}

/* ---- contexts ---- */

static void cu_graph_entry_reset(struct cu_graph_entry *ge)
{
	if (ge->exec)
		cudaGraphExecDestroy(ge->exec);
	ge->exec = NULL;
	ge->repeats = 0;
	ge->sig_len = 0;
}

/* Drop every capture (buffers moved, or an error left them suspect). */
static void cu_graph_reset(struct cu_graph_cache *gc)
{
	for (int i = 0; i < CU_GRAPHS; i++)
		cu_graph_entry_reset(&gc->e[i]);
	gc->cur = -1;
}

static void cu_free(struct alice_backend_ctx *ctx)
{
	if (!ctx)
		return;
	cudaSetDevice(ctx->device);
	if (ctx->stream)
		cudaStreamSynchronize(ctx->stream);
	cu_graph_reset(&ctx->gc);
	for (int i = 0; i < CU_GRAPHS; i++)
		free(ctx->gc.e[i].sig);
	cu_wcache_free(ctx);
	if (ctx->cublas)
		cublasDestroy(ctx->cublas);
	cudaFree(ctx->cublas_ws);
	cudaFree(ctx->scratch);
	cudaFree(ctx->fa_reg);
	cudaFree(ctx->cnt);
	cudaFree(ctx->dflag);
	cudaFreeHost(ctx->hflag);
	for (int i = 0; i < 2; i++)
		if (ctx->lq[i].ev)
			cudaEventDestroy(ctx->lq[i].ev);
	cudaFreeHost(ctx->stage);
	if (ctx->stream)
		cudaStreamDestroy(ctx->stream);
	cu_prof_free(ctx->prof);
	cu_steps_free(ctx->steps);
	cudaGetLastError();
	free(ctx);
}

#define CU_CUBLAS_WS ((size_t)32 << 20)
#define CU_STAGE ((size_t)8 << 20)
#define CU_STAGE_WRITE_MAX ((size_t)256 << 10)

static enum alice_status cu_init(const struct alice_backend_options *opts, struct alice_backend_ctx **out, char *err,
				 size_t err_len)
{
	*out = NULL;
	int dev = -1;
	if (opts && opts->size >= offsetof(struct alice_backend_options, device) + sizeof(int32_t))
		dev = opts->device;
	char why[256];
	int n = cu_probe(why, sizeof(why));
	if (n <= 0) {
		snprintf(err, err_len, "%s", why);
		return ALICE_ERR_UNSUPPORTED;
	}
	int count = 0;
	cudaGetDeviceCount(&count);
	if (dev < 0)
		dev = 0;
	if (dev >= count) {
		snprintf(err, err_len, "CUDA device %d does not exist (%d present)", dev, count);
		return ALICE_ERR_INVALID;
	}
	struct alice_backend_ctx *ctx = (struct alice_backend_ctx *)calloc(1, sizeof(*ctx));
	if (!ctx) {
		snprintf(err, err_len, "out of memory");
		return ALICE_ERR_NOMEM;
	}
	ctx->device = dev;
	const char *g = getenv("ALICE_CUDA_GRAPHS");
	ctx->use_graphs = !(g && g[0] == '0');
	const char *fz = getenv("ALICE_CUDA_FUSE");
	ctx->fuse = !(fz && fz[0] == '0');
	/* ROPE_MV on by default (H100: tg128 +2.5-3.9 %); ATT_XQ opt-in (=1):
	 * 3 % slower there, the rounding a serial tail after the split merge */
	const char *rm = getenv("ALICE_CUDA_ROPE_MV");
	ctx->rope_mv = !(rm && rm[0] == '0');
	const char *ax = getenv("ALICE_CUDA_ATT_XQ");
	ctx->att_xq = ax && ax[0] == '1';
	const char *gg = getenv("ALICE_CUDA_GEMM_GROUP");
	ctx->gemm_group = !(gg && gg[0] == '0');
	const char *fi = getenv("ALICE_CUDA_INJECT_FAULT");
	ctx->fault_at = fi ? strtoull(fi, NULL, 10) : 0;
	const char *pf = getenv("ALICE_CUDA_PROFILE");
	if (pf && pf[0] == '1' && (ctx->prof = cu_prof_new()) != NULL)
		ctx->use_graphs = false; /* per-launch events */
	if (pf && pf[0] == '2')
		ctx->steps = cu_steps_new();
	cudaError_t e;
	cudaDeviceProp prop;
	cublasStatus_t cs;
	if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaMalloc(&ctx->cublas_ws, CU_CUBLAS_WS)) != cudaSuccess ||
	    (e = cudaHostAlloc((void **)&ctx->stage, CU_STAGE, cudaHostAllocMapped | cudaHostAllocPortable)) !=
		    cudaSuccess ||
	    (e = cudaMallocHost((void **)&ctx->hflag, 3 * sizeof(int))) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&ctx->lq[0].ev, cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&ctx->lq[1].ev, cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaMalloc((void **)&ctx->dflag, sizeof(int))) != cudaSuccess ||
	    (e = cudaMemset(ctx->dflag, 0, sizeof(int))) != cudaSuccess) {
		snprintf(err, err_len, "CUDA device %d: %s", dev, cudaGetErrorString(e));
		cudaGetLastError();
		cu_free(ctx);
		return ALICE_ERR_BACKEND;
	}
	ctx->n_sm = prop.multiProcessorCount;
	ctx->stage_size = CU_STAGE / 2; /* a half: see alice_backend_ctx.lq */
	void *sd = NULL;
	if (cudaHostGetDevicePointer(&sd, ctx->stage, 0) == cudaSuccess)
		ctx->stage_dev = (const uint8_t *)sd;
	else /* small writes then go one cudaMemcpyAsync each */
		cudaGetLastError();
	if ((cs = cublasCreate(&ctx->cublas)) != CUBLAS_STATUS_SUCCESS ||
	    (cs = cublasSetStream(ctx->cublas, ctx->stream)) != CUBLAS_STATUS_SUCCESS ||
	    (cs = cublasSetWorkspace(ctx->cublas, ctx->cublas_ws, CU_CUBLAS_WS)) != CUBLAS_STATUS_SUCCESS) {
		snprintf(err, err_len, "cuBLAS: %s", cublasGetStatusString(cs));
		cu_free(ctx);
		return ALICE_ERR_BACKEND;
	}
	cu_log(1, "cuda backend: device %d %s (cc %d.%d, %d SMs), graphs %s", dev, prop.name, prop.major, prop.minor,
	       prop.multiProcessorCount, ctx->use_graphs ? "on" : "off");
	*out = ctx;
	return ALICE_OK;
}

static const char *cu_last_error(struct alice_backend_ctx *ctx)
{
	return ctx ? ctx->err : "no context";
}

/* ---- buffers ---- */

static enum alice_status cu_buffer_alloc(struct alice_backend_ctx *ctx, uint64_t size, uint32_t usage,
					 struct alice_buffer **out)
{
	*out = NULL;
	CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
	struct alice_buffer *b = (struct alice_buffer *)calloc(1, sizeof(*b));
	if (!b)
		return cu_fail(ctx, ALICE_ERR_NOMEM, "out of host memory");
	cudaError_t e = cudaMalloc((void **)&b->dev, size ? (size_t)size : 256);
	if (e != cudaSuccess && cu_wcache_release(ctx)) {
		cudaGetLastError();
		e = cudaMalloc((void **)&b->dev, size ? (size_t)size : 256);
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		size_t fr = 0, tot = 0;
		cudaMemGetInfo(&fr, &tot);
		free(b);
		return cu_fail(ctx, ALICE_ERR_NOMEM,
			       "out of device memory: buffer of %.1f MiB needed, %.1f MiB free of %.1f MiB (%s)",
			       size / 1048576.0, fr / 1048576.0, tot / 1048576.0, cudaGetErrorString(e));
	}
	b->size = size;
	b->usage = usage;
	*out = b;
	return ALICE_OK;
}

static void cu_buffer_free(struct alice_backend_ctx *ctx, struct alice_buffer *buf)
{
	if (!buf)
		return;
	if (ctx) {
		cudaSetDevice(ctx->device);
		cu_inputs_flush(ctx);
		cudaStreamSynchronize(ctx->stream);
		ctx->stage_used = 0;
		/* a captured graph may point into this buffer */
		cu_graph_reset(&ctx->gc);
		if (buf->usage == ALICE_BUFFER_WEIGHTS)
			cu_wcache_drop(ctx, buf->dev, buf->size);
	}
	cudaFree(buf->dev);
	cudaGetLastError();
	free(buf);
}

static enum alice_status check_range(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
				     uint64_t size, const char *what)
{
	return alice_bc_check_range(buf != NULL, buf ? buf->size : 0, offset, size, what, ctx->err, sizeof(ctx->err));
}

/* Wait for the stream; the staging ring is free again afterwards. */
static enum alice_status cu_sync(struct alice_backend_ctx *ctx)
{
	enum alice_status st = cu_inputs_flush(ctx);
	if (st != ALICE_OK)
		return st;
	CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->stream));
	ctx->stage_used = 0;
	return ALICE_OK;
}

static enum alice_status cu_buffer_write(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
					 const void *src, uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_write");
	if (st != ALICE_OK || !size)
		return st;
	CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
	if (buf->usage == ALICE_BUFFER_WEIGHTS)
		cu_wcache_drop(ctx, buf->dev + offset, size);
	/* a persistent buffer's write (the KV block table: written on the steps
	 * where a sequence gets or drops blocks) stays out of the gathered
	 * inputs, whose records are part of a captured graph's signature: the
	 * decode graph replays whether or not this step changed the table */
	if (buf->usage != ALICE_BUFFER_CACHE && cu_inputs_take(ctx, buf->dev + offset, src, size))
		return ALICE_OK;
	if ((st = cu_inputs_flush(ctx)) != ALICE_OK)
		return st;
	if (size <= CU_STAGE_WRITE_MAX) {
		/* small inputs (tokens, positions, ranges): copy into pinned
		 * staging and enqueue, no round trip per write */
		size_t al = ((size_t)size + 255) & ~(size_t)255;
		if (ctx->stage_used + al > ctx->stage_size && (st = cu_sync(ctx)) != ALICE_OK)
			return st;
		cu_stage_claim(ctx);
		uint8_t *p = ctx->stage + ctx->stage_off + ctx->stage_used;
		memcpy(p, src, (size_t)size);
		ctx->stage_used += al;
		CUDA_CHECK(ctx, cudaMemcpyAsync(buf->dev + offset, p, (size_t)size, cudaMemcpyHostToDevice, ctx->stream));
		return ALICE_OK;
	}
	CUDA_CHECK(ctx, cudaMemcpyAsync(buf->dev + offset, src, (size_t)size, cudaMemcpyHostToDevice, ctx->stream));
	return cu_sync(ctx);
}

static enum alice_status cu_buffer_read(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
					void *dst, uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_read");
	if (st != ALICE_OK || !size)
		return st;
	CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
	if ((st = cu_inputs_flush(ctx)) != ALICE_OK)
		return st;
	cudaPointerAttributes pa;
	bool pinned = cudaPointerGetAttributes(&pa, dst) == cudaSuccess && pa.type == cudaMemoryTypeHost;
	cudaGetLastError();
	if (size <= ctx->stage_size && !pinned) {
		if ((st = cu_sync(ctx)) != ALICE_OK)
			return st;
		CUDA_CHECK(ctx, cudaMemcpyAsync(ctx->stage, buf->dev + offset, (size_t)size, cudaMemcpyDeviceToHost,
						ctx->stream));
		if ((st = cu_sync(ctx)) != ALICE_OK)
			return st;
		memcpy(dst, ctx->stage, (size_t)size);
		return ALICE_OK;
	}
	CUDA_CHECK(ctx, cudaMemcpyAsync(dst, buf->dev + offset, (size_t)size, cudaMemcpyDeviceToHost, ctx->stream));
	return cu_sync(ctx);
}

/* page-locked: a device-to-host copy into it runs at the link's speed,
 * with no staging through a driver buffer */
static void *cu_host_alloc(struct alice_backend_ctx *ctx, uint64_t size)
{
	void *p = NULL;
	if (cudaSetDevice(ctx->device) != cudaSuccess || cudaHostAlloc(&p, (size_t)size, cudaHostAllocDefault) != cudaSuccess) {
		cudaGetLastError();
		return NULL;
	}
	return p;
}

static void cu_host_free(struct alice_backend_ctx *ctx, void *p)
{
	(void)ctx;
	if (p)
		cudaFreeHost(p);
}

static enum alice_status cu_buffer_clear(struct alice_backend_ctx *ctx, struct alice_buffer *buf, uint64_t offset,
					 uint64_t size)
{
	enum alice_status st = check_range(ctx, buf, offset, size, "buffer_clear");
	if (st != ALICE_OK || !size)
		return st;
	CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
	if ((st = cu_inputs_flush(ctx)) != ALICE_OK)
		return st;
	if (buf->usage == ALICE_BUFFER_WEIGHTS)
		cu_wcache_drop(ctx, buf->dev + offset, size);
	CUDA_CHECK(ctx, cudaMemsetAsync(buf->dev + offset, 0, (size_t)size, ctx->stream));
	return cu_sync(ctx);
}

/* ---- ops ---- */

typedef enum alice_status (*cu_op_fn)(const struct alice_op_args *a);

static const cu_op_fn op_fns[ALICE_OP_COUNT_V1_6] = {
	NULL,		cu_op_get_rows, cu_op_mul_mat,	 cu_op_binary,	  cu_op_binary,
	cu_op_scale,	cu_op_rms_norm, cu_op_l2_norm,	 cu_op_rope,	  cu_op_attention,
	cu_op_kv_write, cu_op_glu,	cu_op_unary,	 cu_op_softcap,	  cu_op_copy,
	cu_op_ssm_conv, cu_op_gated_delta_net,
	NULL /* NORM */, cu_op_topk,	cu_op_sample_temp, cu_op_logit_adjust, cu_op_feed,
	cu_op_logsumexp, cu_op_token_mask,
};

/* The largest ne / nb per dim this backend takes. */
static const struct alice_bc_limits cu_limits = {ALICE_BC_NE_MAX, ALICE_BC_NB_MAX};

static enum alice_status node_args(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				   const struct alice_node *n, struct alice_op_args *a)
{
	return alice_bc_node_args(ctx, g, n, "cuda", n->op < ALICE_OP_COUNT_V1_6 && op_fns[n->op] != NULL, a, ctx->err,
				  sizeof(ctx->err));
}

/* Bounds, shape and alignment of one tensor against its buffer. */
static enum alice_status check_tensor(struct alice_backend_ctx *ctx, const struct alice_tensor *t, int idx)
{
	enum alice_status st =
		alice_bc_check_tensor(t, idx, &cu_limits, t->buf ? t->buf->size : 0, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	/* natural alignment of every element access (fp16 block fields too;
	 * MXFP4 blocks are read bytewise) */
	const struct alice_type_info *ti = alice_type_info(t->type);
	uint64_t al = t->type == ALICE_TYPE_MXFP4 ? 1 : (ti->block_size > 1 ? 2 : ti->type_size);
	if (al > 1) {
		bool ok = t->offset % al == 0;
		for (int d = 0; d < ALICE_MAX_DIMS; d++)
			ok = ok && (t->ne[d] == 1 || t->nb[d] % (int64_t)al == 0);
		if (!ok)
			return cu_fail(ctx, ALICE_ERR_UNSUPPORTED,
				       "tensor %d: offset/strides are not %llu-byte aligned (%s)", idx,
				       (unsigned long long)al, ti->name);
	}
	return ALICE_OK;
}

/* Shape limits of the kernels (the launchers check the rest). */
static bool shapes_ok(const struct alice_op_args *a)
{
	const struct alice_tensor *d = a->dst, *const *s = a->src;
	switch (a->node->op) {
	case ALICE_OP_MUL_MAT:
		return (s[0]->ne[0] % 32 == 0 || (alice_bc_is_float_type(s[0]->type) && s[1]->ne[1] <= 65535)) &&
		       s[1]->ne[0] == s[0]->ne[0] && s[1]->ne[2] % s[0]->ne[2] == 0 &&
		       s[1]->ne[3] % s[0]->ne[3] == 0 && (s[1]->ne[1] <= 8 || d->nb[0] == 4) &&
		       s[0]->ne[1] < ((int64_t)1 << 31) && s[1]->ne[1] < ((int64_t)1 << 31);
	case ALICE_OP_GET_ROWS:
		return s[1]->ne[1] * s[1]->ne[2] * s[1]->ne[3] == 1 && d->ne[2] * d->ne[3] == 1 &&
		       s[0]->ne[2] * s[0]->ne[3] == 1;
	case ALICE_OP_ATTENTION:
		return s[0]->ne[0] <= 512 && s[2]->ne[0] <= 512 && s[1]->ne[1] > 0 && s[0]->ne[1] % s[1]->ne[1] == 0 &&
		       s[0]->ne[1] <= 65535 && s[0]->ne[2] <= 65535;
	case ALICE_OP_KV_WRITE:
		return d->ne[3] == 1;
	case ALICE_OP_GATED_DELTA_NET: /* registers hold 32 rows x S columns per block */
		return s[1]->ne[0] <= 256;
	default:
		return true;
	}
}

static bool cu_supports_op(struct alice_backend_ctx *ctx, const struct alice_graph *g, const struct alice_node *node)
{
	struct alice_backend_ctx dummy;
	struct alice_op_args a;
	if (!ctx) {
		memset(&dummy, 0, sizeof(dummy));
		ctx = &dummy;
	}
	if (!g || !node || node_args(ctx, g, node, &a) != ALICE_OK)
		return false;
	return alice_bc_types_ok(node, a.dst, a.src) && shapes_ok(&a);
}

/* Host-side checks of a node; the scratch it needs goes to *scratch. */
static enum alice_status prepare_node(struct alice_backend_ctx *ctx, const struct alice_graph *g,
				      const struct alice_node *n, struct alice_op_args *a, size_t *scratch)
{
	enum alice_status st = node_args(ctx, g, n, a);
	if (st != ALICE_OK)
		return st;
	st = alice_bc_check_node(ctx, check_tensor, n, a->dst, a->src, ctx->err, sizeof(ctx->err));
	if (st != ALICE_OK)
		return st;
	if (!shapes_ok(a))
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "shapes outside what the cuda kernels handle");
	*scratch = 0;
	if (n->op == ALICE_OP_MUL_MAT)
		*scratch = cu_mul_mat_scratch(a);
	else if (n->op == ALICE_OP_ATTENTION)
		*scratch = cu_attention_scratch(a);
	else if (n->op == ALICE_OP_TOPK)
		*scratch = cu_topk_scratch(a);
	else if (n->op == ALICE_OP_SAMPLE_TEMP)
		*scratch = cu_sample_temp_scratch(a);
	else if (n->op == ALICE_OP_LOGSUMEXP)
		*scratch = cu_logsumexp_scratch(a);
	return ALICE_OK;
}

static enum alice_status ensure_counters(struct alice_backend_ctx *ctx, size_t n)
{
	if (n <= ctx->cnt_n)
		return ALICE_OK;
	n = (n + 4095) & ~(size_t)4095;
	cudaFree(ctx->cnt);
	ctx->cnt = NULL;
	ctx->cnt_n = 0;
	ctx->scratch_gen++; /* a captured graph holds the old address */
	cu_graph_reset(&ctx->gc);
	cudaError_t e = cudaMalloc((void **)&ctx->cnt, n * sizeof(unsigned));
	if (e != cudaSuccess) {
		cudaGetLastError();
		ctx->cnt = NULL;
		size_t fr = 0, tot = 0;
		cudaMemGetInfo(&fr, &tot);
		return cu_fail(ctx, ALICE_ERR_NOMEM, "out of device memory: %.1f MiB of counters needed, %.1f MiB free (%s)",
			       n * sizeof(unsigned) / 1048576.0, fr / 1048576.0, cudaGetErrorString(e));
	}
	CUDA_CHECK(ctx, cudaMemsetAsync(ctx->cnt, 0, n * sizeof(unsigned), ctx->stream));
	ctx->cnt_n = n;
	return ALICE_OK;
}

/* ctx->fa_reg for n tokens (allocated before any launch of the graph) */
static enum alice_status ensure_fa_reg(struct alice_backend_ctx *ctx, size_t n)
{
	if (n <= ctx->fa_reg_n)
		return ALICE_OK;
	n = (n + 4095) & ~(size_t)4095;
	cudaFree(ctx->fa_reg);
	ctx->fa_reg = NULL;
	ctx->fa_reg_n = 0;
	ctx->fa_key.rng = NULL;
	ctx->scratch_gen++; /* a captured graph holds the old address */
	cu_graph_reset(&ctx->gc);
	cudaError_t e = cudaMalloc((void **)&ctx->fa_reg, n);
	if (e != cudaSuccess) {
		cudaGetLastError();
		ctx->fa_reg = NULL;
		return cu_fail(ctx, ALICE_ERR_NOMEM, "out of device memory: %zu bytes of attention regime (%s)", n,
			       cudaGetErrorString(e));
	}
	ctx->fa_reg_n = n;
	return ALICE_OK;
}

static enum alice_status ensure_scratch(struct alice_backend_ctx *ctx, size_t need)
{
	if (need <= ctx->scratch_size)
		return ALICE_OK;
	need = (need + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
	cudaFree(ctx->scratch);
	ctx->scratch = NULL;
	ctx->scratch_size = 0;
	ctx->scratch_gen++;
	cu_graph_reset(&ctx->gc);
	cudaError_t e = cudaMalloc((void **)&ctx->scratch, need);
	if (e != cudaSuccess && cu_wcache_release(ctx)) {
		cudaGetLastError();
		e = cudaMalloc((void **)&ctx->scratch, need);
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		size_t fr = 0, tot = 0;
		cudaMemGetInfo(&fr, &tot);
		return cu_fail(ctx, ALICE_ERR_NOMEM, "out of device memory: %.1f MiB of scratch needed, %.1f MiB free",
			       need / 1048576.0, fr / 1048576.0);
	}
	ctx->scratch_size = need;
	return ALICE_OK;
}

static bool overlaps(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->buf == b->buf && a->offset < b->offset + alice_bc_extent(b) && b->offset < a->offset + alice_bc_extent(a);
}

/* Nodes run as one launch execute concurrently: no member's dst may share
 * memory with another member's dst or with any member's source, except a
 * source that is itself a member's dst (the fused kernel orders that edge
 * itself). The graph's placer reuses dead tensors' memory, so e.g. a norm's
 * output can sit where the preceding add read its inputs. */
static bool group_safe(const struct alice_op_args *a, int n, bool staged_x)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			if (i != j && overlaps(a[i].dst, a[j].dst))
				return false;
			for (int s = 0; s < ALICE_MAX_SRC; s++) {
				/* staged_x: the launch copies the mat-vecs' activations to
				 * scratch before it writes any output */
				if (!a[j].src[s] || (staged_x && s == 1 && a[j].node->op == ALICE_OP_MUL_MAT))
					continue;
				bool internal = false;
				for (int k = 0; k < n; k++)
					internal = internal || a[j].node->src[s] == a[k].node->dst;
				if (!internal && overlaps(a[i].dst, a[j].src[s]))
					return false;
			}
		}
	return true;
}

/* The one-token ROPE q, ROPE k, KV_WRITE k, KV_WRITE v at node i, after
 * the Q/K/V products mm[0..3), in the products' launch (rope.cuh): it
 * writes the products, the rotated q / k and both cache cells, and reads
 * the staged quants of x, the positions, factors and cell ids. None of
 * what it writes may overlap another of those or what it reads. Returns
 * the nodes it would take (4), else 0. */
static uint32_t rope_mv_nodes(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint32_t i,
			      const struct alice_op_args *mm, struct mmv_rope *rope)
{
	static const enum alice_op want[4] = { ALICE_OP_ROPE, ALICE_OP_ROPE, ALICE_OP_KV_WRITE, ALICE_OP_KV_WRITE };
	struct alice_op_args r[4];
	size_t scr;
	if (!ctx->fuse || !ctx->rope_mv || i + 4 > g->n_nodes)
		return 0;
	for (int k = 0; k < 4; k++)
		if (g->nodes[i + k].op != want[k] || prepare_node(ctx, g, &g->nodes[i + k], &r[k], &scr) != ALICE_OK)
			return 0;
	if (!cu_rope_mv_fusable(mm, r, rope))
		return 0;
	const struct alice_tensor *w[7] = { mm[0].dst, mm[1].dst, mm[2].dst, r[0].dst, r[1].dst, r[2].dst, r[3].dst };
	/* (k's positions / factors are q's, v's cell ids k's: cu_rope_kv_fusable) */
	const struct alice_tensor *rd[3] = { r[0].src[1], r[0].src[2], r[2].src[1] };
	for (int a = 0; a < 7; a++) {
		for (int b = a + 1; b < 7; b++)
			if (overlaps(w[a], w[b]))
				return 0;
		for (int b = 0; b < 3; b++)
			if (rd[b] && overlaps(w[a], rd[b]))
				return 0;
		for (int b = 0; b < 3; b++)
			if (overlaps(w[a], mm[b].src[0]))
				return 0;
	}
	return 4;
}

/* ALICE_CUDA_INJECT_FAULT=N (for tests of the error path): the context's
 * Nth graph_compute launches this with too many threads instead of its
 * nodes (plain, captured or replayed alike): a real, non-sticky CUDA error.
 * The call must fail with the message; the process and context live on. */
__global__ void k_inject_fault(void)
{
}

static enum alice_status launch_all(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	ctx->xq.x = NULL;
	enum alice_status gst = cu_inputs_launch(ctx);
	if (gst != ALICE_OK)
		return gst;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		struct alice_op_args a[4];
		size_t scr;
		int qk_o = 0;
		if (ctx->prof)
			cu_prof_mark(ctx, g, i);
		/* staged activation quants serve only mat-vecs of their own tensor */
		ctx->xq_cur = g->nodes[i].op == ALICE_OP_MUL_MAT ? g->nodes[i].src[1] : -1;
		if (ctx->xq_cur < 0 || ctx->xq_cur != ctx->xq.tid)
			ctx->xq.x = NULL;
		enum alice_status st = prepare_node(ctx, g, &g->nodes[i], &a[0], &scr);
		if (st == ALICE_OK && g->nodes[i].op == ALICE_OP_MUL_MAT) {
			/* Q/K/V or gate/up: consecutive products of one input */
			int n = 1;
			while (n < 3 && i + n < g->n_nodes && g->nodes[i + n].op == ALICE_OP_MUL_MAT &&
			       prepare_node(ctx, g, &g->nodes[i + n], &a[n], &scr) == ALICE_OK)
				n++;
			n = cu_mul_mat_group(a, n, ctx->fuse);
			/* a prefill group's parts write outputs before later parts
			 * read their activations: nothing may overlap them */
			const bool staged = cu_mm_decode(a[0].node, a[0].src[1]->ne[1]) && cu_mul_mat_stages_x(a, n);
			while (n > 1 && !group_safe(a, n, staged))
				n--;
			/* gate/up followed by their GLU: one launch for all three */
			struct alice_op_args ga;
			bool glu = ctx->fuse && n == 2 && i + 2 < g->n_nodes && g->nodes[i + 2].op == ALICE_OP_GLU &&
				   prepare_node(ctx, g, &g->nodes[i + 2], &ga, &scr) == ALICE_OK &&
				   cu_mul_mat_glu_fusable(a, &ga);
			if (glu) {
				struct alice_op_args all[3] = { a[0], a[1], ga };
				glu = group_safe(all, 3, staged);
			}
			bool glu_done = false;
			struct mmv_rope rope;
			uint32_t rope_n = !glu && n == 3 ? rope_mv_nodes(ctx, g, i + 3, a, &rope) : 0;
			ctx->rope_req = rope_n ? &rope : NULL;
			ctx->rope_taken = false;
			st = cu_mul_mat_multi(a, n, glu ? &ga : NULL, &glu_done);
			ctx->rope_req = NULL;
			if (st == ALICE_OK) {
				i += (uint32_t)(n - 1 + (glu_done ? 1 : 0));
				if (rope_n && ctx->rope_taken) {
					if (!ctx->rope_logged) {
						ctx->rope_logged = true;
						cu_log(0, "cuda backend: q / k rotated and the KV cache written by the Q/K/V mat-vec");
					}
					i += rope_n;
				}
				continue;
			}
		} else if (st == ALICE_OK && g->nodes[i].op == ALICE_OP_ADD && ctx->fuse && i + 1 < g->n_nodes &&
			   g->nodes[i + 1].op == ALICE_OP_RMS_NORM &&
			   prepare_node(ctx, g, &g->nodes[i + 1], &a[1], &scr) == ALICE_OK &&
			   cu_add_rms_fusable(&a[0], &a[1]) &&
			   (group_safe(a, 2, false) || cu_add_rms_alias_ok(&a[0], &a[1]))) {
			/* residual add, then the next sublayer's norm; quantized for
			 * the mat-vec that reads it next */
			int qk = 0;
			if (i + 2 < g->n_nodes && g->nodes[i + 2].op == ALICE_OP_MUL_MAT &&
			    g->nodes[i + 2].src[1] == g->nodes[i + 1].dst &&
			    prepare_node(ctx, g, &g->nodes[i + 2], &a[2], &scr) == ALICE_OK) {
				qk = cu_mul_mat_xq(&a[2]); /* a mat-vec's quants, else a GEMM's F16 operand */
				if (!qk)
					qk = -cu_mul_mat_xh(&a[2]);
			}
			st = cu_add_rms_norm(&a[0], &a[1], qk);
			if (st == ALICE_OK) {
				i++;
				continue;
			}
		} else if (st == ALICE_OK && g->nodes[i].op == ALICE_OP_ROPE && ctx->fuse && i + 3 < g->n_nodes &&
			   g->nodes[i + 1].op == ALICE_OP_ROPE && g->nodes[i + 2].op == ALICE_OP_KV_WRITE &&
			   g->nodes[i + 3].op == ALICE_OP_KV_WRITE &&
			   prepare_node(ctx, g, &g->nodes[i + 1], &a[1], &scr) == ALICE_OK &&
			   prepare_node(ctx, g, &g->nodes[i + 2], &a[2], &scr) == ALICE_OK &&
			   prepare_node(ctx, g, &g->nodes[i + 3], &a[3], &scr) == ALICE_OK && cu_rope_kv_fusable(a) &&
			   group_safe(a, 4, false)) {
			/* q and k rotations and both cache writes */
			st = cu_rope_kv(a);
			if (st == ALICE_OK) {
				i += 3;
				continue;
			}
		} else if (st == ALICE_OK && (g->nodes[i].op == ALICE_OP_ROPE || g->nodes[i].op == ALICE_OP_KV_WRITE) &&
			   ctx->fuse && i + 1 < g->n_nodes && g->nodes[i + 1].op == g->nodes[i].op &&
			   prepare_node(ctx, g, &g->nodes[i + 1], &a[1], &scr) == ALICE_OK &&
			   (g->nodes[i].op == ALICE_OP_ROPE ? cu_rope_pairable(&a[0], &a[1])
							    : cu_kv_pairable(&a[0], &a[1])) &&
			   group_safe(a, 2, false)) {
			/* q and k rotations, or the K and V cache writes */
			st = g->nodes[i].op == ALICE_OP_ROPE ? cu_rope_multi(a, 2) : cu_kv_write_multi(a, 2);
			if (st == ALICE_OK) {
				i++;
				continue;
			}
		} else if (st == ALICE_OK && g->nodes[i].op == ALICE_OP_ATTENTION && ctx->fuse && ctx->att_xq &&
			   i + 1 < g->n_nodes && g->nodes[i + 1].op == ALICE_OP_MUL_MAT &&
			   prepare_node(ctx, g, &g->nodes[i + 1], &a[1], &scr) == ALICE_OK && (qk_o = cu_mul_mat_xq(&a[1]))) {
			/* the attention output rounded for the o-proj mat-vec by the
			 * attention kernel; the MUL_MAT then finds it staged */
			bool rounded;
			st = cu_attention_xq(&a[0], &a[1], qk_o, &rounded);
			if (rounded && !ctx->xq_logged) {
				ctx->xq_logged = true;
				cu_log(0, "cuda backend: the attention output rounded for the mat-vec by the attention kernel");
			}
		} else if (st == ALICE_OK && g->nodes[i].op == ALICE_OP_GLU && ctx->fuse && i + 1 < g->n_nodes &&
			   g->nodes[i + 1].op == ALICE_OP_MUL_MAT && g->nodes[i + 1].src[1] == g->nodes[i].dst &&
			   cu_glu_round_ok(&a[0]) && group_safe(a, 1, false) &&
			   prepare_node(ctx, g, &g->nodes[i + 1], &a[1], &scr) == ALICE_OK && cu_mul_mat_xh(&a[1])) {
			/* the GLU, and its result rounded for the GEMM after it */
			st = cu_glu_round(&a[0], cu_mul_mat_xh(&a[1]));
		} else if (st == ALICE_OK) {
			st = op_fns[g->nodes[i].op](&a[0]);
		}
		if (st != ALICE_OK) {
			alice_bc_prefix_node(ctx->err, sizeof(ctx->err), i, g->nodes[i].op);
			cu_inputs_flush(ctx); /* the writes still land */
			return st;
		}
	}
	if (ctx->prof)
		cu_prof_mark(ctx, g, -1);
	return ALICE_OK;
}

/* The graph's signature: nodes verbatim, tensors by type/shape/strides,
 * device address and buffer size, and the scratch region. */
static bool build_sig(struct alice_backend_ctx *ctx, const struct alice_graph *g, uint8_t **out, size_t *len)
{
	size_t per_t = 4 + 8 * 8 + 8 + 8;
	size_t ng = ctx->gather_n ? sizeof(ctx->gather) : 0;
	size_t n = 32 + ng + (size_t)g->n_nodes * sizeof(struct alice_node) + (size_t)g->n_tensors * per_t;
	uint8_t *s = (uint8_t *)malloc(n);
	if (!s)
		return false;
	uint8_t *p = s;
	/* the input copy at the graph's head: its records are a kernel parameter */
	uint64_t hdr[4] = { (uint64_t)(uintptr_t)ctx->scratch, ctx->scratch_gen, (uint64_t)ng, (uint64_t)ctx->gather_n };
	memcpy(p, hdr, 32);
	p += 32;
	if (ng) {
		memcpy(p, &ctx->gather, ng);
		p += ng;
	}
	if (g->n_nodes) {
		memcpy(p, g->nodes, (size_t)g->n_nodes * sizeof(struct alice_node));
		p += (size_t)g->n_nodes * sizeof(struct alice_node);
	}
	for (uint32_t i = 0; i < g->n_tensors; i++) {
		const struct alice_tensor *t = &g->tensors[i];
		memcpy(p, &t->type, 4);
		memcpy(p + 4, t->ne, 32);
		memcpy(p + 36, t->nb, 32);
		uint64_t addr = t->buf ? (uint64_t)(uintptr_t)t->buf->dev + t->offset : 0;
		uint64_t bsz = t->buf ? t->buf->size : 0; /* bounds were checked against it */
		memcpy(p + 68, &addr, 8);
		memcpy(p + 76, &bsz, 8);
		p += per_t;
	}
	*out = s;
	*len = n;
	return true;
}

/* ---- graph_compute, step by step ---- */

/* A GEMM graph (a MUL_MAT that is not all mat-vec columns): not worth a capture (shapes
 * rarely repeat, instantiation is slow). */
static bool is_prefill(const struct alice_graph *g)
{
	bool prefill = false;
	for (uint32_t i = 0; i < g->n_nodes; i++)
		prefill = prefill || (g->nodes[i].op == ALICE_OP_MUL_MAT && g->nodes[i].dst >= 0 &&
				      (uint32_t)g->nodes[i].dst < g->n_tensors &&
				      !cu_mm_decode(&g->nodes[i], g->tensors[g->nodes[i].dst].ne[1]));
	return prefill;
}

/* The cache entry whose capture was made from g (nodes, tensors, buffer
 * sizes, scratch), or -1. It was validated then, so it replays without pass 1. */
static int find_captured(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	struct cu_graph_cache *gc = &ctx->gc;
	uint8_t *sig = NULL;
	size_t sig_len = 0;
	bool any = false;
	for (int i = 0; i < CU_GRAPHS && !any; i++)
		any = gc->e[i].exec && gc->e[i].scratch_gen == ctx->scratch_gen;
	if (!any || !build_sig(ctx, g, &sig, &sig_len))
		return -1;
	int hit = -1;
	for (int i = 0; i < CU_GRAPHS && hit < 0; i++) {
		const struct cu_graph_entry *ge = &gc->e[i];
		if (ge->exec && ge->scratch_gen == ctx->scratch_gen && ge->sig_len == sig_len &&
		    memcmp(ge->sig, sig, sig_len) == 0)
			hit = i;
	}
	free(sig);
	return hit;
}

/* Pass 1: validate every node, then size the scratch (and the attention
 * counters) for the whole graph, so it stays put while a graph is captured. */
static enum alice_status validate_and_size(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	size_t need = 0, need_cnt = 0, need_xq = 0, need_fa = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		struct alice_op_args a;
		size_t scr = 0;
		enum alice_status st = prepare_node(ctx, g, &g->nodes[i], &a, &scr);
		if (st != ALICE_OK) {
			alice_bc_prefix_node(ctx->err, sizeof(ctx->err), i, g->nodes[i].op);
			cu_inputs_flush(ctx); /* the writes still land */
			return st;
		}
		if (scr > need)
			need = scr;
		if (g->nodes[i].op == ALICE_OP_MUL_MAT) {
			size_t xq = cu_mul_mat_staged(&a);
			need_xq = xq > need_xq ? xq : need_xq;
			/* a group of products of one input from here (launch_all):
			 * their rows together in scratch */
			int64_t rows = 0;
			for (uint32_t j = i; j < i + 3 && j < g->n_nodes && g->nodes[j].op == ALICE_OP_MUL_MAT &&
					     g->nodes[j].src[1] == g->nodes[i].src[1] && g->nodes[j].src[0] >= 0 &&
					     (uint32_t)g->nodes[j].src[0] < g->n_tensors; j++)
				rows += g->tensors[g->nodes[j].src[0]].ne[1];
			size_t gs = cu_mul_mat_group_scratch(&a, rows);
			need = gs > need ? gs : need;
		}
		if (g->nodes[i].op == ALICE_OP_ATTENTION) {
			size_t c = cu_attention_counters(&a), f = cu_attention_regime(&a);
			need_cnt = c > need_cnt ? c : need_cnt;
			need_fa = f > need_fa ? f : need_fa;
		}
	}
	/* the mat-vecs' quantized activations go past every op's own scratch */
	ctx->xq_off = (need + 255) & ~(size_t)255;
	enum alice_status st = ensure_scratch(ctx, ctx->xq_off + need_xq);
	if (st == ALICE_OK)
		st = ensure_counters(ctx, need_cnt);
	if (st == ALICE_OK)
		st = ensure_fa_reg(ctx, need_fa);
	if (st != ALICE_OK)
		cu_inputs_flush(ctx);
	return st;
}

/* ALICE_CUDA_INJECT_FAULT: a real launch error in place of the graph
 * (before choosing replay or launches, so a captured step faults too). */
static enum alice_status inject_fault(struct alice_backend_ctx *ctx)
{
	cu_inputs_flush(ctx);
	k_inject_fault<<<1, 4096, 0, ctx->stream>>>();
	cudaError_t e = cudaGetLastError();
	return cu_fail(ctx, ALICE_ERR_BACKEND, "%s (injected by ALICE_CUDA_INJECT_FAULT)",
		       cudaGetErrorString(e != cudaSuccess ? e : cudaErrorInvalidConfiguration));
}

/* Count how often g's signature came (gc->cur is its entry afterwards, a
 * new one taking the least recently used entry): true when seen before. */
static bool track_signature(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	struct cu_graph_cache *gc = &ctx->gc;
	uint8_t *sig = NULL;
	size_t sig_len = 0;
	gc->cur = -1;
	if (!build_sig(ctx, g, &sig, &sig_len))
		return false;
	int victim = 0;
	for (int i = 0; i < CU_GRAPHS; i++) {
		struct cu_graph_entry *ge = &gc->e[i];
		if (ge->sig_len == sig_len && sig_len && memcmp(ge->sig, sig, sig_len) == 0) {
			free(sig);
			ge->repeats++;
			ge->used = ++gc->tick;
			gc->cur = i;
			return true;
		}
		if (gc->e[victim].sig_len && (!ge->sig_len || ge->used < gc->e[victim].used))
			victim = i;
	}
	struct cu_graph_entry *ge = &gc->e[victim];
	cu_graph_entry_reset(ge);
	free(ge->sig);
	ge->sig = sig;
	ge->sig_len = ge->sig_cap = sig_len;
	ge->repeats = 1;
	ge->used = ++gc->tick;
	gc->cur = victim;
	return false;
}

/* Capture g's launches into its cache entry (ctx->gc.cur). A graph that cannot be captured
 * is launched plainly, and not tried again while its signature repeats. */
static void capture(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	struct cu_graph_entry *gc = &ctx->gc.e[ctx->gc.cur];
	cudaGraph_t graph = NULL;
	cudaError_t e = cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal);
	if (e == cudaSuccess) {
		enum alice_status lst = launch_all(ctx, g);
		e = cudaStreamEndCapture(ctx->stream, &graph);
		if (lst == ALICE_OK && e == cudaSuccess && graph)
			e = cudaGraphInstantiate(&gc->exec, graph, 0);
		else if (e == cudaSuccess)
			e = cudaErrorUnknown;
		if (graph)
			cudaGraphDestroy(graph);
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		gc->exec = NULL;
		cu_log(2, "cuda backend: graph capture failed (%s); using plain launches", cudaGetErrorString(e));
		ctx->err[0] = '\0';
	} else {
		gc->scratch_gen = ctx->scratch_gen;
	}
}

/* Replay the captured graph; on failure drop it (the next call launches plainly). */
static enum alice_status replay(struct alice_backend_ctx *ctx)
{
	if (ctx->steps)
		cu_steps_launch(ctx->steps, ctx->stream, true, false);
	cudaError_t le = cudaGraphLaunch(ctx->gc.e[ctx->gc.cur].exec, ctx->stream);
	ctx->gather_n = 0;
	if (ctx->steps)
		cu_steps_launch(ctx->steps, ctx->stream, false, false);
	if (le != cudaSuccess) {
		cudaGetLastError();
		cu_graph_reset(&ctx->gc);
		return cu_fail(ctx, ALICE_ERR_BACKEND, "graph_compute: cudaGraphLaunch: %s%s", cudaGetErrorString(le),
			       cu_sticky(le) ? " (a sticky error: this process's CUDA context is lost)" : "");
	}
	return ALICE_OK;
}

/* Enqueue g's kernels one launch group at a time. */
static enum alice_status launch_plain(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	if (ctx->steps)
		cu_steps_launch(ctx->steps, ctx->stream, true, true);
	enum alice_status st = launch_all(ctx, g);
	if (ctx->steps)
		cu_steps_launch(ctx->steps, ctx->stream, false, true);
	ctx->gather_n = 0;
	if (st != ALICE_OK) {
		cudaStreamSynchronize(ctx->stream);
		cudaGetLastError();
	}
	return st;
}

/* Wait for the oldest launch (its event), then fail the call on a CUDA
 * error or on the bad input data the kernels flagged. */
static enum alice_status wait_and_check(struct alice_backend_ctx *ctx)
{
	const int slot = ctx->lq_old;
	struct cu_launch *l = &ctx->lq[slot];
	ctx->lq_old ^= 1;
	ctx->lq_n--;
	cudaError_t e = cudaEventSynchronize(l->ev);
	if (e != cudaSuccess) {
		cudaGetLastError();
		cu_graph_reset(&ctx->gc);
		return cu_fail(ctx, ALICE_ERR_BACKEND, "graph_compute: %s%s", cudaGetErrorString(e),
			       cu_sticky(e) ? " (a sticky error: this process's CUDA context is lost, every later call "
					      "fails; restart the server)"
					    : "");
	}
	/* nothing in flight and nothing written since: back to the first
	 * staging half (a step's records, part of its graph's signature, then
	 * stay put from step to step) */
	if (ctx->lq_n == 0 && ctx->stage_used == 0 && ctx->n_pend == 0)
		ctx->stage_off = 0;
	if (ctx->steps)
		cu_steps_done(ctx->steps);
	int fl = ctx->hflag[1 + slot];
	if (fl) {
		CUDA_CHECK(ctx, cudaMemsetAsync(ctx->dflag, 0, sizeof(int), ctx->stream));
		CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->stream));
		return cu_fail(ctx, ALICE_ERR_RANGE, "graph_compute: input data out of range:%s%s%s%s",
			       fl & CU_FLAG_ROW_ID ? " a GET_ROWS or FEED index outside its matrix" : "",
			       fl & CU_FLAG_RANGE ? " an ATTENTION cell range outside the cache" : "",
			       fl & CU_FLAG_CELL ? " a KV_WRITE cell outside the cache" : "",
			       fl & CU_FLAG_SEQ ? " an SSM_CONV / GATED_DELTA_NET sequence id outside the state" : "");
	}
	return ALICE_OK;
}

/* The reads of a launch: into page-locked dst straight behind the graph;
 * any other dst is read after the wait (ctx->reads_late). */
static enum alice_status enqueue_reads(struct alice_backend_ctx *ctx, struct cu_launch *l,
				       const struct alice_read *reads, uint32_t n)
{
	l->late = NULL;
	l->n_late = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct alice_read *r = &reads[i];
		enum alice_status st = check_range(ctx, r->buf, r->offset, r->size, "graph_launch read");
		if (st != ALICE_OK)
			return st;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct alice_read *r = &reads[i];
		cudaPointerAttributes pa;
		bool pinned = cudaPointerGetAttributes(&pa, r->dst) == cudaSuccess && pa.type == cudaMemoryTypeHost;
		cudaGetLastError();
		if (!pinned) { /* the rest after the wait, in order */
			l->late = r;
			l->n_late = n - i;
			return ALICE_OK;
		}
		if (r->size)
			CUDA_CHECK(ctx, cudaMemcpyAsync(r->dst, r->buf->dev + r->offset, (size_t)r->size,
							cudaMemcpyDeviceToHost, ctx->stream));
	}
	return ALICE_OK;
}

static enum alice_status cu_graph_launch(struct alice_backend_ctx *ctx, const struct alice_graph *g,
					 const struct alice_read *reads, uint32_t n_reads)
{
	if (ctx->lq_n >= 2)
		return cu_fail(ctx, ALICE_ERR_INVALID, "graph_launch: two launches are in flight: wait for one first");
	/* reads of a launch in flight into memory that is not page-locked are
	 * made now, before this graph can overwrite their sources */
	for (int i = 0; i < ctx->lq_n; i++) {
		struct cu_launch *l = &ctx->lq[(ctx->lq_old + i) & 1];
		if (!l->n_late)
			continue;
		CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
		CUDA_CHECK(ctx, cudaEventSynchronize(l->ev));
		for (uint32_t j = 0; j < l->n_late; j++)
			if (l->late[j].size)
				CUDA_CHECK(ctx, cudaMemcpy(l->late[j].dst, l->late[j].buf->dev + l->late[j].offset,
							   (size_t)l->late[j].size, cudaMemcpyDeviceToHost));
		l->late = NULL;
		l->n_late = 0;
	}
	if (!g || (g->n_nodes && !g->nodes) || (g->n_tensors && !g->tensors) || (n_reads && !reads))
		return cu_fail(ctx, ALICE_ERR_INVALID, "graph_launch: malformed graph");
	ctx->err[0] = '\0';
	ctx->n_compute++;
	if (ctx->steps)
		cu_steps_entry(ctx->steps);
	CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
	/* the step's pending input writes become one copy at the graph's head */
	cu_inputs_prepare(ctx);
	bool fault = ctx->fault_at && ctx->n_compute == ctx->fault_at;
	bool capturable = ctx->use_graphs && g->n_nodes > 0 && !is_prefill(g);
	int hit = capturable && !fault ? find_captured(ctx, g) : -1;
	bool known = hit >= 0;
	enum alice_status st;
	if (!known && (st = validate_and_size(ctx, g)) != ALICE_OK)
		return st;
	if (fault)
		return inject_fault(ctx);
	/* pass 2: replay, capture or launch */
	if (ctx->prof)
		cu_prof_graph(ctx, g);
	struct cu_graph_cache *gc = &ctx->gc;
	bool same = known;
	gc->cur = hit;
	if (known) {
		gc->e[hit].repeats++;
		gc->e[hit].used = ++gc->tick;
	} else if (capturable) {
		same = track_signature(ctx, g);
	}
	struct cu_graph_entry *ge = gc->cur >= 0 ? &gc->e[gc->cur] : NULL;
	if (same && !ge->exec && ge->repeats == 2)
		capture(ctx, g); /* seen twice */
	if (same && ge->exec && ge->scratch_gen == ctx->scratch_gen)
		st = replay(ctx);
	else
		st = launch_plain(ctx, g);
	const int slot = (ctx->lq_old + ctx->lq_n) & 1;
	struct cu_launch *l = &ctx->lq[slot];
	if (st == ALICE_OK && (st = enqueue_reads(ctx, l, reads, n_reads)) == ALICE_OK) {
		ctx->hflag[1 + slot] = 0;
		cudaError_t e = cudaMemcpyAsync(&ctx->hflag[1 + slot], ctx->dflag, sizeof(int), cudaMemcpyDeviceToHost,
						ctx->stream);
		if (e == cudaSuccess)
			e = cudaEventRecord(l->ev, ctx->stream);
		if (e != cudaSuccess) {
			cudaGetLastError();
			st = cu_fail(ctx, ALICE_ERR_BACKEND, "graph_launch: %s", cudaGetErrorString(e));
		}
	}
	if (st != ALICE_OK) {
		cudaStreamSynchronize(ctx->stream); /* nothing of it left in flight */
		cudaGetLastError();
		return st;
	}
	l->half = ctx->stage_off;
	ctx->lq_n++;
	/* the next step's small writes go to the other staging half */
	ctx->stage_off = ctx->stage_off ? 0 : ctx->stage_size;
	ctx->stage_used = 0;
	if (ctx->prof) { /* per-op profile: one graph at a time */
		CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->stream));
		cu_prof_collect(ctx);
	}
	return ALICE_OK;
}

static enum alice_status cu_graph_wait(struct alice_backend_ctx *ctx)
{
	if (ctx->lq_n <= 0)
		return cu_fail(ctx, ALICE_ERR_INVALID, "graph_wait: no graph was launched");
	CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
	struct cu_launch *l = &ctx->lq[ctx->lq_old];
	enum alice_status st = wait_and_check(ctx);
	for (uint32_t i = 0; st == ALICE_OK && i < l->n_late; i++) {
		const struct alice_read *r = &l->late[i];
		st = cu_buffer_read(ctx, r->buf, r->offset, r->dst, r->size);
	}
	l->late = NULL;
	l->n_late = 0;
	return st;
}

/* Before a small write into the current staging half: a launch in flight
 * that still reads this half (only when more than one step was written
 * ahead) is waited for first. */
void cu_stage_claim(struct alice_backend_ctx *ctx)
{
	for (int i = 0; i < ctx->lq_n; i++) {
		const struct cu_launch *l = &ctx->lq[(ctx->lq_old + i) & 1];
		if (l->half == ctx->stage_off)
			cudaEventSynchronize(l->ev);
	}
}

static enum alice_status cu_graph_compute(struct alice_backend_ctx *ctx, const struct alice_graph *g)
{
	enum alice_status st = cu_graph_launch(ctx, g, NULL, 0);
	return st != ALICE_OK ? st : cu_graph_wait(ctx);
}

static const struct alice_backend_vtable cu_vtable = {
	ALICE_BACKEND_ABI_MAJOR,
	ALICE_BACKEND_ABI_MINOR,
	sizeof(struct alice_backend_vtable),
	"cuda",
	cu_probe,
	cu_device_info,
	cu_init,
	cu_free,
	cu_last_error,
	cu_buffer_alloc,
	NULL, /* buffer_import: discrete GPU, weights are uploaded once */
	cu_buffer_free,
	cu_buffer_write,
	cu_buffer_read,
	cu_buffer_clear,
	cu_supports_op,
	cu_graph_compute,
	cu_host_alloc,
	cu_host_free,
	cu_graph_launch,
	cu_graph_wait,
	cu_tensor_pack,
};

extern "C" ALICE_BACKEND_EXPORT const struct alice_backend_vtable *alice_backend_entry(const struct alice_backend_host *host)
{
	g_host = alice_backend_host_accept(host);
	return &cu_vtable;
}

extern "C" ALICE_BACKEND_EXPORT int alice_backend_score(void)
{
	char why[256];
	return cu_probe(why, sizeof(why)) > 0 ? 10 : 0;
}
