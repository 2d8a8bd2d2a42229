/* pack.cu — tensor_pack: weights rewritten in place, after upload, into
 * layouts the decode kernels read with 16-byte loads (issue: repacked
 * decode). Same bytes per row, so no second copy and no size change; the
 * tensor gets ALICE_TENSOR_PACKED and cu_ktype gives kernels its packed type.
 *
 * T_Q8_0P: each run of 8 Q8_0 blocks (256 values, 272 bytes) becomes their
 * 256 quants (block j's at 32 j: 16-byte aligned) followed by their 8 fp16
 * scales. Rows of K % 256 == 0 hold whole runs, so a view of whole rows (or
 * of a row prefix of whole runs) stays valid. Values are unchanged: every
 * dequantizer of the packed type gives the original's bits.
 *
 * T_Q6_KP: each run of 8 Q6_K super-blocks (2048 values, 1680 bytes)
 * becomes their 8 x 192 quant bytes (ql then qh, each 16-byte aligned),
 * their 8 x 16 scales, then their 8 fp16 d's. The kernels keep their
 * arithmetic: packed and unpacked give the same bits. Offsets and byte
 * maps: pack_layout.cuh. */
#include "common.cuh"
#include "pack_layout.cuh"

/* One block per run of RUN bytes, through shared memory, in place: the
 * run is read whole, then each output word gathered by SRC (pack_layout.cuh). */
template <int RUN, int (*SRC)(int)>
__global__ void k_pack_runs(uint8_t *__restrict__ p)
{
	__shared__ uint4 sm[RUN / 16];
	uint8_t *r = p + (int64_t)blockIdx.x * RUN;
	for (int i = threadIdx.x; i < RUN / 16; i += blockDim.x)
		sm[i] = ((const uint4 *)r)[i];
	__syncthreads();
	const uint8_t *sb = (const uint8_t *)sm;
	for (int w = threadIdx.x; w < RUN / 4; w += blockDim.x) {
		uint32_t v = 0;
		for (int k = 0; k < 4; k++)
			v |= (uint32_t)sb[SRC(4 * w + k)] << (8 * k);
		((uint32_t *)r)[w] = v;
	}
}

__device__ static int q80_src(int o) { return pl_q80_src(o); }
__device__ static int q6k_src(int o) { return pl_q6k_src(o); }

/* Whole, dense rows of whole runs (QK values per block, BY bytes; runs of
 * 8 blocks), 16-byte aligned. */
static bool packable(const struct alice_tensor *t, int64_t qk, int64_t by)
{
	return alice_bc_rows_of_runs(t, qk, by) && ((uintptr_t)tdata(t) & 15) == 0;
}

enum alice_status cu_tensor_pack(struct alice_backend_ctx *ctx, struct alice_tensor *t)
{
	if (t->flags & ALICE_TENSOR_PACKED)
		return ALICE_OK;
	const bool q80 = t->type == ALICE_TYPE_Q8_0 && packable(t, 32, 34);
	const bool q6k = t->type == ALICE_TYPE_Q6_K && packable(t, 256, 210);
	if (!q80 && !q6k)
		return ALICE_OK;
	CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
	enum alice_status st = cu_inputs_flush(ctx); /* a small write may still be gathered */
	if (st != ALICE_OK)
		return st;
	cu_wcache_drop(ctx, tdata(t), (uint64_t)(tnelem(t) / (q80 ? 32 : 256)) * (q80 ? 34 : 210));
	const int64_t runs = tnelem(t) / (q80 ? 256 : 2048);
	if (runs > 0x7fffffff)
		return ALICE_OK;
	if (q80)
		k_pack_runs<PL_Q80_RUN, q80_src><<<(unsigned)runs, 128, 0, ctx->stream>>>(tdata(t));
	else
		k_pack_runs<PL_Q6K_RUN, q6k_src><<<(unsigned)runs, 128, 0, ctx->stream>>>(tdata(t));
	CUDA_LAUNCH_CHECK(ctx, "pack");
	CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->stream));
	t->flags |= ALICE_TENSOR_PACKED;
	return ALICE_OK;
}
