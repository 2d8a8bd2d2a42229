/* topk.cu — TOPK (backend.h): the best K entries of each logits row, so a
 * step's sampling reads K pairs per row instead of the row. One block per
 * row: a 4-pass radix select (8 bits a pass, over order-preserving keys)
 * finds the K-th key; the entries above it and the lowest-index ties at it
 * are gathered (ties in index order through a block scan) and sorted by
 * (value desc, index asc) with a bitonic network. Equal floats tie (-0 and
 * +0 too), as in the cpu backend and the sampler. */
#include <float.h>

#include "common.cuh"

#define TOPK_THREADS 1024
#define TOPK_SORT 128 /* ALICE_TOPK_MAX, a power of two */

static_assert(TOPK_SORT == ALICE_TOPK_MAX, "the sort network holds ALICE_TOPK_MAX entries");

__device__ static inline float topk_clean(float x)
{
	x = x == x ? x : -INFINITY;
	return x < FLT_MAX ? x : FLT_MAX;
}

/* a larger float gives a larger key; -0 and +0 give the same */
__device__ static inline uint32_t topk_key(float x)
{
	float c = topk_clean(x);
	uint32_t u = __float_as_uint(c == 0.0f ? 0.0f : c);
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* exclusive prefix sum of v over the block (TOPK_THREADS threads) */
__device__ static inline int topk_scan(int v, int *sh /* [32] */)
{
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int x = v;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		int y = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o)
			x += y;
	}
	if (lane == 31)
		sh[w] = x;
	__syncthreads();
	if (w == 0) {
		int t = sh[lane], s = t;
#pragma unroll
		for (int o = 1; o < 32; o <<= 1) {
			int y = __shfl_up_sync(0xffffffffu, s, o);
			if (lane >= o)
				s += y;
		}
		sh[lane] = s - t;
	}
	__syncthreads();
	return sh[w] + x - v;
}

__global__ void __launch_bounds__(TOPK_THREADS) k_topk(const uint8_t *__restrict__ src, int64_t nb1, int64_t n,
							 int k, int32_t *__restrict__ dst)
{
	pdl_wait();
	__shared__ int hist[256];
	__shared__ int scan_sh[32];
	__shared__ unsigned long long ent[TOPK_SORT];
	__shared__ uint32_t s_prefix;
	__shared__ int s_want, s_above;
	const float *x = (const float *)(src + (int64_t)blockIdx.x * nb1);
	const int tid = threadIdx.x;

	/* radix select: the key of the k-th best entry, and how many entries
	 * equal to it are wanted (the rest of the k are above it) */
	uint32_t prefix = 0, mask = 0;
	int want = k;
	for (int shift = 24; shift >= 0; shift -= 8) {
		for (int i = tid; i < 256; i += TOPK_THREADS)
			hist[i] = 0;
		__syncthreads();
		for (int64_t i = tid; i < n; i += TOPK_THREADS) {
			uint32_t key = topk_key(x[i]);
			if ((key & mask) == prefix)
				atomicAdd(&hist[(key >> shift) & 255], 1);
		}
		__syncthreads();
		if (tid == 0) {
			int above = 0, d = 255;
			for (; d > 0 && above + hist[d] < want; d--)
				above += hist[d];
			s_prefix = prefix | ((uint32_t)d << shift);
			s_want = want - above;
		}
		__syncthreads();
		prefix = s_prefix;
		want = s_want;
		mask |= 255u << shift;
		__syncthreads();
	}
	const uint32_t kth = prefix;
	const int above = k - want;

	/* gather: entries above kth anywhere in [0, above); ties at kth in
	 * index order after them (each thread scans a contiguous range) */
	for (int i = tid; i < TOPK_SORT; i += TOPK_THREADS)
		ent[i] = 0; /* below every real entry */
	if (tid == 0)
		s_above = 0;
	__syncthreads();
	const int64_t per = (n + TOPK_THREADS - 1) / TOPK_THREADS;
	const int64_t i0 = tid * per, i1 = i0 + per < n ? i0 + per : n;
	int ties = 0;
	for (int64_t i = i0; i < i1; i++)
		ties += topk_key(x[i]) == kth;
	int rank = topk_scan(ties, scan_sh);
	for (int64_t i = i0; i < i1; i++) {
		uint32_t key = topk_key(x[i]);
		unsigned long long e = ((unsigned long long)key << 32) | (0xffffffffu - (uint32_t)i);
		if (key > kth) {
			ent[atomicAdd(&s_above, 1)] = e;
		} else if (key == kth) {
			if (rank < want)
				ent[above + rank] = e;
			rank++;
		}
	}
	__syncthreads();

	/* bitonic sort, descending: key desc, then index asc */
	for (int sz = 2; sz <= TOPK_SORT; sz <<= 1)
		for (int j = sz >> 1; j > 0; j >>= 1) {
			if (tid < TOPK_SORT) {
				int p = tid ^ j;
				if (p > tid) {
					unsigned long long a = ent[tid], b = ent[p];
					bool desc = (tid & sz) == 0;
					if (desc ? a < b : a > b) {
						ent[tid] = b;
						ent[p] = a;
					}
				}
			}
			__syncthreads();
		}
	int32_t *o = dst + (int64_t)blockIdx.x * 2 * k;
	if (tid < k) {
		uint32_t id = 0xffffffffu - (uint32_t)(ent[tid] & 0xffffffffu);
		o[2 * tid] = (int32_t)id;
		o[2 * tid + 1] = (int32_t)__float_as_uint(topk_clean(x[id]));
	}
}

enum alice_status cu_op_topk(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *s = a->src[0], *d = a->dst;
	int k = a->node->ip[0];
	if (s->ne[1] > 0x7fffffff || s->ne[0] > 0x7fffffff)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "TOPK: %lld rows of %lld", (long long)s->ne[1],
			       (long long)s->ne[0]);
	k_topk<<<(unsigned)s->ne[1], TOPK_THREADS, 0, ctx->stream>>>(tdata(s), s->nb[1], s->ne[0], k,
								      (int32_t *)tdata(d));
	CUDA_LAUNCH_CHECK(ctx, "topk");
	return ALICE_OK;
}
