/* inputs.cu — a step's small input writes (tokens, positions, cell ranges:
 * a dozen buffer_write calls of a few bytes each) gathered into one kernel.
 * Each write is copied into the pinned staging ring and recorded; the
 * records go to the ring too, and one launch at the head of the step's
 * graph copies them all (the GPU reads the mapped staging memory). A decode
 * step writes the same records at the same ring offsets every time, so the
 * copy is part of the replayed CUDA graph: one launch per step instead of a
 * cudaMemcpyAsync per input. Anything else that touches the stream first
 * launches what is pending (cu_inputs_flush), so the order of writes and
 * other work is kept. */
#include "common.cuh"

__global__ void k_gather(const struct cu_copy *__restrict__ c)
{
	pdl_wait();
	pdl_trigger();
	const struct cu_copy e = c[blockIdx.x];
	if ((((uintptr_t)e.dst | (uintptr_t)e.src | e.size) & 3) == 0) {
		for (uint64_t i = threadIdx.x; i < e.size / 4; i += blockDim.x)
			((uint32_t *)e.dst)[i] = ((const uint32_t *)e.src)[i];
	} else {
		for (uint64_t i = threadIdx.x; i < e.size; i += blockDim.x)
			e.dst[i] = e.src[i];
	}
}

/* bytes of the ring, 256-aligned; NULL when it is full */
static uint8_t *ring_take(struct alice_backend_ctx *ctx, size_t size)
{
	size_t al = (size + 255) & ~(size_t)255;
	if (ctx->stage_used + al > ctx->stage_size)
		return NULL;
	uint8_t *p = ctx->stage + ctx->stage_used;
	ctx->stage_used += al;
	return p;
}

static const uint8_t *dev_ptr(const struct alice_backend_ctx *ctx, const uint8_t *host)
{
	return ctx->stage_dev + (host - ctx->stage);
}

bool cu_inputs_take(struct alice_backend_ctx *ctx, uint8_t *dst, const void *src, uint64_t size)
{
	if (!ctx->stage_dev || size > CU_GATHER_MAX || ctx->n_pend == CU_PEND_MAX ||
	    /* room for the records too */
	    ctx->stage_used + ((size + 255) & ~(uint64_t)255) + 256 + CU_PEND_MAX * sizeof(struct cu_copy) >
		    ctx->stage_size)
		return false;
	uint8_t *p = ring_take(ctx, (size_t)size);
	memcpy(p, src, (size_t)size);
	struct cu_copy c = { dst, dev_ptr(ctx, p), size };
	ctx->pend[ctx->n_pend++] = c;
	return true;
}

bool cu_inputs_prepare(struct alice_backend_ctx *ctx)
{
	if (!ctx->n_pend)
		return true;
	struct cu_copy *rec = (struct cu_copy *)ring_take(ctx, ctx->n_pend * sizeof(struct cu_copy));
	if (!rec)
		return false;
	memcpy(rec, ctx->pend, ctx->n_pend * sizeof(struct cu_copy));
	ctx->gather = (const struct cu_copy *)dev_ptr(ctx, (const uint8_t *)rec);
	ctx->gather_host = rec;
	ctx->gather_n = ctx->n_pend;
	ctx->n_pend = 0;
	return true;
}

enum alice_status cu_inputs_launch(struct alice_backend_ctx *ctx)
{
	if (!ctx->gather_n)
		return ALICE_OK;
	cu_launch(k_gather, (unsigned)ctx->gather_n, 256, ctx->stream, ctx->gather);
	CUDA_LAUNCH_CHECK(ctx, "gather inputs");
	return ALICE_OK;
}

enum alice_status cu_inputs_flush(struct alice_backend_ctx *ctx)
{
	if (!ctx->n_pend && !ctx->gather_n)
		return ALICE_OK;
	if (ctx->n_pend && !cu_inputs_prepare(ctx)) {
		/* no room for the records: copy them one by one */
		for (int i = 0; i < ctx->n_pend; i++)
			CUDA_CHECK(ctx, cudaMemcpyAsync(ctx->pend[i].dst, ctx->pend[i].src, ctx->pend[i].size,
							cudaMemcpyDefault, ctx->stream));
		ctx->n_pend = 0;
		return ALICE_OK;
	}
	enum alice_status st = cu_inputs_launch(ctx);
	ctx->gather_n = 0;
	return st;
}
