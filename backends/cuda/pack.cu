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
 * their 8 x 16 scales, then their 8 fp16 d's (kquant.cuh q6_at). The
 * kernels keep their arithmetic: packed and unpacked give the same bits. */
#include "common.cuh"

/* One thread per 272-byte run, in place (read whole, then written). */
__global__ void k_pack_q80(uint8_t *__restrict__ p, int64_t nruns)
{
	const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (g >= nruns)
		return;
	uint4 *b = (uint4 *)(p + g * 272);
	uint32_t s[69], o[68];
#pragma unroll
	for (int i = 0; i < 17; i++) {
		const uint4 u = b[i];
		s[4 * i] = u.x;
		s[4 * i + 1] = u.y;
		s[4 * i + 2] = u.z;
		s[4 * i + 3] = u.w;
	}
	s[68] = 0;
#pragma unroll
	for (int j = 0; j < 8; j++) {
#pragma unroll
		for (int k = 0; k < 8; k++) {
			const int sb = 34 * j + 2 + 4 * k; /* block j's quants 4k .. 4k+3 */
			o[8 * j + k] = __funnelshift_r(s[sb >> 2], s[(sb >> 2) + 1], 8 * (sb & 3));
		}
	}
#pragma unroll
	for (int j = 0; j < 8; j += 2) {
		const int a = 34 * j, c = 34 * (j + 1); /* the scales of blocks j, j+1 */
		o[64 + j / 2] = ((s[a >> 2] >> (8 * (a & 3))) & 0xffffu) | (((s[c >> 2] >> (8 * (c & 3))) & 0xffffu) << 16);
	}
#pragma unroll
	for (int i = 0; i < 17; i++)
		b[i] = make_uint4(o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]);
}

/* Q6_K run: output byte o's source byte */
__device__ static inline int q6p_src(int o)
{
	if (o < 1536)
		return 210 * (o / 192) + o % 192;
	if (o < 1664)
		return 210 * ((o - 1536) / 16) + 192 + (o - 1536) % 16;
	return 210 * ((o - 1664) / 2) + 208 + (o - 1664) % 2;
}

/* One block per 1680-byte run, through shared memory, in place. */
__global__ void k_pack_q6k(uint8_t *__restrict__ p)
{
	__shared__ uint4 sm[105];
	uint8_t *r = p + (int64_t)blockIdx.x * 1680;
	for (int i = threadIdx.x; i < 105; i += blockDim.x)
		sm[i] = ((const uint4 *)r)[i];
	__syncthreads();
	const uint8_t *sb = (const uint8_t *)sm;
	for (int w = threadIdx.x; w < 420; w += blockDim.x) {
		uint32_t v = 0;
		for (int k = 0; k < 4; k++)
			v |= (uint32_t)sb[q6p_src(4 * w + k)] << (8 * k);
		((uint32_t *)r)[w] = v;
	}
}

static bool pack_off(void)
{
	static int off = -1;
	return cu_env_is("ALICE_CUDA_PACK", '0', &off);
}

/* Whole, dense rows of whole runs (QK values per block, BY bytes; runs of
 * 8 blocks), 16-byte aligned. */
static bool packable(const struct alice_tensor *t, int64_t qk, int64_t by)
{
	const int64_t K = t->ne[0];
	if (K % (8 * qk) != 0 || t->nb[0] != by || t->nb[1] != K / qk * by)
		return false;
	for (int d = 2; d < 4; d++)
		if (t->nb[d] != t->nb[d - 1] * t->ne[d - 1])
			return false;
	return ((uintptr_t)tdata(t) & 15) == 0;
}

enum alice_status cu_tensor_pack(struct alice_backend_ctx *ctx, struct alice_tensor *t)
{
	if (pack_off() || (t->flags & ALICE_TENSOR_PACKED))
		return ALICE_OK;
	const bool q80 = t->type == ALICE_TYPE_Q8_0 && packable(t, 32, 34);
	const bool q6k = t->type == ALICE_TYPE_Q6_K && packable(t, 256, 210);
	if (!q80 && !q6k)
		return ALICE_OK;
	CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
	enum alice_status st = cu_inputs_flush(ctx); /* a small write may still be gathered */
	if (st != ALICE_OK)
		return st;
	if (q80) {
		const int64_t runs = tnelem(t) / 256;
		k_pack_q80<<<cu_blocks(runs, 128), 128, 0, ctx->stream>>>(tdata(t), runs);
	} else {
		const int64_t runs = tnelem(t) / 2048;
		if (runs > 0x7fffffff)
			return ALICE_OK;
		k_pack_q6k<<<(unsigned)runs, 128, 0, ctx->stream>>>(tdata(t));
	}
	CUDA_LAUNCH_CHECK(ctx, "pack");
	CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->stream));
	t->flags |= ALICE_TENSOR_PACKED;
	return ALICE_OK;
}
