/* inputs.cu — a step's small input writes (tokens, positions, cell ranges:
 * a dozen buffer_write calls of a few bytes each) gathered into one kernel.
 * Each write is copied into the pinned staging ring and recorded; one
 * launch at the head of the step's graph copies them all (the GPU reads the
 * mapped staging memory; the records are the kernel's parameter). A decode
 * step writes the same records at the same ring offsets every time, so the
 * copy is part of the replayed CUDA graph: one launch per step instead of a
 * cudaMemcpyAsync per input. Anything else that touches the stream first
 * launches what is pending (cu_inputs_flush), so the order of writes and
 * other work is kept. */
#include "common.cuh"

__global__ void k_gather(const struct cu_gather g)
{
	pdl_wait();
	pdl_trigger();
	const struct cu_copy e = g.c[blockIdx.x];
	if ((((uintptr_t)e.dst | (uintptr_t)e.src | e.size) & 3) == 0) {
		for (uint64_t i = threadIdx.x; i < e.size / 4; i += blockDim.x)
			((uint32_t *)e.dst)[i] = ((const uint32_t *)e.src)[i];
	} else {
		for (uint64_t i = threadIdx.x; i < e.size; i += blockDim.x)
			e.dst[i] = e.src[i];
	}
}

bool cu_inputs_take(struct alice_backend_ctx *ctx, uint8_t *dst, const void *src, uint64_t size)
{
	size_t al = ((size_t)size + 255) & ~(size_t)255;
	if (!ctx->stage_dev || size > CU_GATHER_MAX || ctx->n_pend == CU_PEND_MAX ||
	    ctx->stage_used + al > ctx->stage_size)
		return false;
	/* the gather's blocks run in any order: a write over bytes a pending one
	 * writes is refused, and the caller flushes before writing it */
	for (int i = 0; i < ctx->n_pend; i++)
		if (dst < ctx->pend[i].dst + ctx->pend[i].size && ctx->pend[i].dst < dst + size)
			return false;
	cu_stage_claim(ctx);
	uint8_t *p = ctx->stage + ctx->stage_off + ctx->stage_used;
	ctx->stage_used += al;
	memcpy(p, src, (size_t)size);
	struct cu_copy c = { dst, ctx->stage_dev + (p - ctx->stage), size };
	ctx->pend[ctx->n_pend++] = c;
	return true;
}

void cu_inputs_prepare(struct alice_backend_ctx *ctx)
{
	if (!ctx->n_pend)
		return;
	/* zeroed past gather_n: the graph signature compares the whole struct */
	memset(&ctx->gather, 0, sizeof(ctx->gather));
	memcpy(ctx->gather.c, ctx->pend, ctx->n_pend * sizeof(struct cu_copy));
	ctx->gather_n = ctx->n_pend;
	ctx->n_pend = 0;
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
	cu_inputs_prepare(ctx);
	enum alice_status st = cu_inputs_launch(ctx);
	ctx->gather_n = 0;
	return st;
}
