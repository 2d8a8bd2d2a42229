/* topk.cu — TOPK and SAMPLE_TEMP (backend.h): the best K entries of each logits row, so a
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
#define TOPK_CAND 2048 /* entries at or above the threshold sorted whole */

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

/* inclusive prefix sum of x over the warp's lanes */
__device__ static inline int warp_scan(int x, int lane)
{
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		int y = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o)
			x += y;
	}
	return x;
}

/* exclusive prefix sum of v over the block (TOPK_THREADS threads) */
__device__ static inline int topk_scan(int v, int *sh /* [32] */)
{
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int x = warp_scan(v, lane);
	if (lane == 31)
		sh[w] = x;
	__syncthreads();
	if (w == 0) {
		int t = sh[lane];
		sh[lane] = warp_scan(t, lane) - t;
	}
	__syncthreads();
	return sh[w] + x - v;
}

/* One warp: the digit d of the k-th best key, the highest with (entries
 * above d) + hist[d] >= want (else 0), as a walk down the bins from 255
 * would find it: lane l sums bins 255 - 8l .. 248 - 8l, a scan over the
 * lanes finds the lane holding d, that lane walks its 8 bins. */
__device__ static inline void topk_digit(const int *hist, int lane, int want, uint32_t prefix, int shift,
					 uint32_t *s_prefix, int *s_want)
{
	int s = 0;
#pragma unroll
	for (int b = 0; b < 8; b++)
		s += hist[255 - 8 * lane - b];
	const int cum = warp_scan(s, lane);
	const unsigned hit = __ballot_sync(0xffffffffu, cum >= want);
	const int L = hit ? __ffs(hit) - 1 : 31;
	if (lane != L)
		return;
	int above = cum - s, d = 255 - 8 * lane;
	for (int b = 0; b < 8; b++, d--) {
		if (d == 0 || above + hist[d] >= want)
			break;
		above += hist[d];
	}
	*s_prefix = prefix | ((uint32_t)d << shift);
	*s_want = want - above;
}

/* Radix select over the keys key_at(0 .. n): the k-th best key and how
 * many entries equal to it are wanted (the rest of the k are above it). */
template <typename KeyAt>
__device__ static void topk_select(KeyAt key_at, int64_t n, int k, uint32_t *kth, int *want_out)
{
	__shared__ int hist[256];
	__shared__ uint32_t s_prefix;
	__shared__ int s_want;
	const int tid = threadIdx.x;
	uint32_t prefix = 0, mask = 0;
	int want = k;
	for (int shift = 24; shift >= 0; shift -= 8) {
		for (int i = tid; i < 256; i += TOPK_THREADS)
			hist[i] = 0;
		__syncthreads();
		/* logits share their top bits: lanes of a warp that hit one bin
		 * add once (a plain atomic per lane serializes on that bin) */
		for (int64_t i0 = (int64_t)(tid & ~31); i0 < n; i0 += TOPK_THREADS) {
			int64_t i = i0 + (tid & 31);
			int bin = 256;
			if (i < n) {
				uint32_t key = key_at(i);
				if ((key & mask) == prefix)
					bin = (int)((key >> shift) & 255);
			}
			unsigned peers = __match_any_sync(0xffffffffu, bin);
			if (bin < 256 && (tid & 31) == __ffs(peers) - 1)
				atomicAdd(&hist[bin], __popc(peers));
		}
		__syncthreads();
		if (tid < 32)
			topk_digit(hist, tid, want, prefix, shift, &s_prefix, &s_want);
		__syncthreads();
		prefix = s_prefix;
		want = s_want;
		mask |= 255u << shift;
		__syncthreads();
	}
	*kth = prefix;
	*want_out = want;
}

/* The best k (<= TOPK_SORT) entries of x[0, n) (indices id0 + i) into
 * ent[0, k) as (key << 32 | ~index), unsorted; ent[k..] hold 0: a radix
 * select over all entries. */
__device__ static void topk_block_radix(const float *__restrict__ x, int64_t n, int64_t id0, int k,
					unsigned long long *ent /* [TOPK_SORT] shared */)
{
	__shared__ int scan_sh[32];
	__shared__ int s_above;
	const int tid = threadIdx.x;
	uint32_t kth;
	int want;
	topk_select([&](int64_t i) { return topk_key(x[i]); }, n, k, &kth, &want);
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
#pragma unroll 4
	for (int64_t i = i0; i < i1; i++)
		ties += topk_key(x[i]) == kth;
	int rank = topk_scan(ties, scan_sh);
	for (int64_t i = i0; i < i1; i++) {
		uint32_t key = topk_key(x[i]);
		unsigned long long e = ((unsigned long long)key << 32) | (0xffffffffu - (uint32_t)(id0 + i));
		if (key > kth) {
			ent[atomicAdd(&s_above, 1)] = e;
		} else if (key == kth) {
			if (rank < want)
				ent[above + rank] = e;
			rank++;
		}
	}
	__syncthreads();
}

/* bitonic sort of e[0, m) (m a power of two), descending */
__device__ static void topk_sort(unsigned long long *e, int m)
{
	const int tid = threadIdx.x;
	for (int sz = 2; sz <= m; sz <<= 1)
		for (int j = sz >> 1; j > 0; j >>= 1) {
			for (int i = tid; i < m; i += TOPK_THREADS) {
				int p = i ^ j;
				if (p > i) {
					unsigned long long a = e[i], b = e[p];
					bool desc = (i & sz) == 0;
					if (desc ? a < b : a > b) {
						e[i] = b;
						e[p] = a;
					}
				}
			}
			__syncthreads();
		}
}

/* The same as topk_block_radix, sorted (best first), in two coalesced reads: thread t's
 * largest key over entries t, t + T, ... (T threads); the k-th largest of
 * those maxima, th, has at least k entries at or above it (one per maximum),
 * so the best k are among the entries >= th, which are few unless many
 * values tie: those are sorted whole (key, then lower index first, as the
 * radix select's ties are taken). More than TOPK_CAND of them: the radix
 * select. */
__device__ static void topk_block(const float *__restrict__ x, int64_t n, int64_t id0, int k,
				  unsigned long long *ent /* [TOPK_SORT] shared */)
{
	__shared__ unsigned long long cand[TOPK_CAND];
	__shared__ uint32_t smax[TOPK_THREADS];
	__shared__ int s_cnt;
	const int tid = threadIdx.x, lane = tid & 31;
	uint32_t mx = 0; /* below every real key */
	for (int64_t i = tid; i < n; i += TOPK_THREADS) {
		uint32_t key = topk_key(x[i]);
		mx = key > mx ? key : mx;
	}
	smax[tid] = mx;
	if (tid == 0)
		s_cnt = 0;
	__syncthreads();
	uint32_t th;
	int unused;
	topk_select([&](int64_t i) { return smax[i]; }, TOPK_THREADS, k, &th, &unused);
	for (int64_t i0 = (int64_t)(tid & ~31); i0 < n; i0 += TOPK_THREADS) {
		const int64_t i = i0 + lane;
		const uint32_t key = i < n ? topk_key(x[i]) : 0;
		const bool in = i < n && key >= th;
		const unsigned b = __ballot_sync(0xffffffffu, in);
		int base = 0;
		if (lane == 0 && b)
			base = atomicAdd(&s_cnt, __popc(b));
		base = __shfl_sync(0xffffffffu, base, 0);
		if (in) {
			const int at = base + __popc(b & ((1u << lane) - 1));
			if (at < TOPK_CAND)
				cand[at] = ((unsigned long long)key << 32) | (0xffffffffu - (uint32_t)(id0 + i));
		}
	}
	__syncthreads();
	const int cnt = s_cnt;
	if (cnt > TOPK_CAND) {
		topk_block_radix(x, n, id0, k, ent);
		topk_sort(ent, TOPK_SORT);
		return;
	}
	int m = TOPK_SORT;
	while (m < cnt)
		m <<= 1;
	for (int i = cnt + tid; i < m; i += TOPK_THREADS)
		cand[i] = 0;
	__syncthreads();
	topk_sort(cand, m);
	for (int i = tid; i < TOPK_SORT; i += TOPK_THREADS)
		ent[i] = i < k ? cand[i] : 0;
	__syncthreads();
}

/* (index, cleaned value bits) of the k best of e (sorted) to o */
__device__ static void topk_out(const unsigned long long *e, const float *__restrict__ x, int k, int32_t *o)
{
	for (int j = threadIdx.x; j < k; j += TOPK_THREADS) {
		uint32_t id = 0xffffffffu - (uint32_t)(e[j] & 0xffffffffu);
		o[2 * j] = (int32_t)id;
		o[2 * j + 1] = (int32_t)__float_as_uint(topk_clean(x[id]));
	}
}

/* one block per row: the whole row */
__global__ void __launch_bounds__(TOPK_THREADS) k_topk(const uint8_t *__restrict__ src, int64_t nb1, int64_t n,
							 int k, int32_t *__restrict__ dst)
{
	pdl_wait();
	__shared__ unsigned long long ent[TOPK_SORT];
	const float *x = (const float *)(src + (int64_t)blockIdx.x * nb1);
	topk_block(x, n, 0, k, ent);
	topk_out(ent, x, k, dst + (int64_t)blockIdx.x * 2 * k);
}

/* few rows: S blocks per row (blockIdx.y), each the best k of its slice of
 * len entries into part; k_topk_merge then takes the best k of the S k
 * (the row's best k are among its slices' best k, in the same order) */
__global__ void __launch_bounds__(TOPK_THREADS) k_topk_part(const uint8_t *__restrict__ src, int64_t nb1, int64_t n,
							      int64_t len, int k, unsigned long long *__restrict__ part)
{
	pdl_wait();
	__shared__ unsigned long long ent[TOPK_SORT];
	const float *x = (const float *)(src + (int64_t)blockIdx.x * nb1);
	const int64_t lo = (int64_t)blockIdx.y * len, hi = lo + len < n ? lo + len : n;
	const int kk = hi - lo < k ? (int)(hi - lo) : k;
	topk_block(x + lo, hi - lo, lo, kk, ent);
	unsigned long long *o = part + ((int64_t)blockIdx.x * gridDim.y + blockIdx.y) * TOPK_SORT;
	for (int j = threadIdx.x; j < TOPK_SORT; j += TOPK_THREADS)
		o[j] = ent[j]; /* best first; zeros past kk */
}

#define TOPK_MAX_SPLIT 32

/* The ns sorted lists of a row: an entry's rank is its place in its own
 * list plus, in each other list, how many entries beat it (a binary search;
 * entries are distinct, the zeros past a list's end beat nothing), and the
 * ranks below k are the output's places: no sort over all lists. */
__global__ void __launch_bounds__(TOPK_THREADS) k_topk_merge(const uint8_t *__restrict__ src, int64_t nb1, int ns,
							       int k, const unsigned long long *__restrict__ part,
							       int32_t *__restrict__ dst)
{
	pdl_wait();
	__shared__ unsigned long long ent[TOPK_MAX_SPLIT * TOPK_SORT];
	const int m = ns * TOPK_SORT;
	const unsigned long long *pr = part + (int64_t)blockIdx.x * m;
	for (int i = threadIdx.x; i < m; i += TOPK_THREADS)
		ent[i] = pr[i];
	__syncthreads();
	const float *x = (const float *)(src + (int64_t)blockIdx.x * nb1);
	int32_t *o = dst + (int64_t)blockIdx.x * 2 * k;
	for (int i = threadIdx.x; i < m; i += TOPK_THREADS) {
		const unsigned long long c = ent[i];
		const int l = i / TOPK_SORT;
		int r = i % TOPK_SORT;
		if (c == 0 || r >= k)
			continue;
		for (int l2 = 0; l2 < ns && r < k; l2++) {
			if (l2 == l)
				continue;
			const unsigned long long *e = ent + l2 * TOPK_SORT;
			int lo = 0, hi = TOPK_SORT; /* first place whose entry is below c */
			while (lo < hi) {
				int mid = (lo + hi) >> 1;
				if (e[mid] > c)
					lo = mid + 1;
				else
					hi = mid;
			}
			r += lo;
		}
		if (r < k) {
			uint32_t id = 0xffffffffu - (uint32_t)(c & 0xffffffffu);
			o[2 * r] = (int32_t)id;
			o[2 * r + 1] = (int32_t)__float_as_uint(topk_clean(x[id]));
		}
	}
}

/* Blocks per row: enough to fill the GPU when rows are few, slices of at
 * least 8192 entries (the merge's cost grows with the number of slices). */
static int topk_splits(const struct alice_op_args *a)
{
	const struct alice_tensor *s = a->src[0];
	int64_t rows = s->ne[1], want = (2 * (int64_t)a->ctx->n_sm + rows - 1) / rows, cap = s->ne[0] / 8192;
	if (want > cap)
		want = cap;
	if (want > TOPK_MAX_SPLIT)
		want = TOPK_MAX_SPLIT;
	return want < 1 ? 1 : (int)want;
}

/* ---- k = 1: the argmax alone (a greedy step), as a max over packed
 * (key << 32 | ~index): the larger value, then the lower index, as the
 * sort above orders them. S blocks per row write their best to part
 * (or, with S = 1, the output); k_argmax_merge takes one warp per row. */

#define AMAX_THREADS 256

__device__ static inline unsigned long long amax_pack(const float *__restrict__ x, int64_t i)
{
	return ((unsigned long long)topk_key(x[i]) << 32) | (0xffffffffu - (uint32_t)i);
}

__device__ static inline unsigned long long warp_max_u64(unsigned long long v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) {
		unsigned long long w = __shfl_xor_sync(0xffffffffu, v, o);
		v = w > v ? w : v;
	}
	return v;
}

__device__ static inline void amax_out(unsigned long long e, const float *__restrict__ x, int32_t *o)
{
	const uint32_t id = 0xffffffffu - (uint32_t)(e & 0xffffffffu);
	o[0] = (int32_t)id;
	o[1] = (int32_t)__float_as_uint(topk_clean(x[id]));
}

__global__ void __launch_bounds__(AMAX_THREADS) k_argmax_part(const uint8_t *__restrict__ src, int64_t nb1, int64_t n,
								int64_t len, unsigned long long *__restrict__ part,
								int32_t *__restrict__ dst)
{
	pdl_wait();
	pdl_trigger();
	__shared__ unsigned long long sh[AMAX_THREADS / 32];
	const float *x = (const float *)(src + (int64_t)blockIdx.x * nb1);
	const int64_t lo = (int64_t)blockIdx.y * len, hi = lo + len < n ? lo + len : n;
	unsigned long long best = 0; /* below every real entry */
#pragma unroll 4
	for (int64_t i = lo + threadIdx.x; i < hi; i += AMAX_THREADS) {
		const unsigned long long e = amax_pack(x, i);
		best = e > best ? e : best;
	}
	best = warp_max_u64(best);
	if ((threadIdx.x & 31) == 0)
		sh[threadIdx.x >> 5] = best;
	__syncthreads();
	if (threadIdx.x >= 32)
		return;
	best = threadIdx.x < AMAX_THREADS / 32 ? sh[threadIdx.x] : 0;
	best = warp_max_u64(best);
	if (threadIdx.x != 0)
		return;
	if (part)
		part[(int64_t)blockIdx.x * gridDim.y + blockIdx.y] = best;
	else
		amax_out(best, x, dst + (int64_t)blockIdx.x * 2);
}

__global__ void k_argmax_merge(const uint8_t *__restrict__ src, int64_t nb1, int64_t rows, int ns,
			       const unsigned long long *__restrict__ part, int32_t *__restrict__ dst)
{
	pdl_wait();
	const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (row >= rows)
		return;
	unsigned long long best = lane < ns ? part[row * ns + lane] : 0;
	best = warp_max_u64(best);
	if (lane == 0)
		amax_out(best, (const float *)(src + row * nb1), dst + row * 2);
}

size_t cu_topk_scratch(const struct alice_op_args *a)
{
	int ns = topk_splits(a);
	if (a->node->ip[0] == 1)
		return ns > 1 ? (size_t)a->src[0]->ne[1] * ns * sizeof(unsigned long long) : 0;
	return ns > 1 ? (size_t)a->src[0]->ne[1] * ns * TOPK_SORT * sizeof(unsigned long long) : 0;
}

enum alice_status cu_op_topk(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *s = a->src[0], *d = a->dst;
	int k = a->node->ip[0];
	if (s->ne[1] > 0x7fffffff || s->ne[0] > 0x7fffffff)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "TOPK: %lld rows of %lld", (long long)s->ne[1],
			       (long long)s->ne[0]);
	const int ns = topk_splits(a);
	if (k == 1) {
		unsigned long long *part = ns > 1 ? (unsigned long long *)ctx->scratch : NULL;
		const int64_t len = (s->ne[0] + ns - 1) / ns;
		cu_launch(k_argmax_part, dim3((unsigned)s->ne[1], (unsigned)ns), AMAX_THREADS, ctx->stream, tdata(s),
			  s->nb[1], s->ne[0], len, part, (int32_t *)tdata(d));
		if (ns > 1)
			cu_launch(k_argmax_merge, (unsigned)((s->ne[1] + 7) / 8), 256, ctx->stream, tdata(s), s->nb[1],
				  s->ne[1], ns, (const unsigned long long *)part, (int32_t *)tdata(d));
	} else if (ns == 1) {
		k_topk<<<(unsigned)s->ne[1], TOPK_THREADS, 0, ctx->stream>>>(tdata(s), s->nb[1], s->ne[0], k,
									      (int32_t *)tdata(d));
	} else {
		unsigned long long *part = (unsigned long long *)ctx->scratch;
		const int64_t len = (s->ne[0] + ns - 1) / ns;
		k_topk_part<<<dim3((unsigned)s->ne[1], (unsigned)ns), TOPK_THREADS, 0, ctx->stream>>>(
			tdata(s), s->nb[1], s->ne[0], len, k, part);
		k_topk_merge<<<(unsigned)s->ne[1], TOPK_THREADS, 0, ctx->stream>>>(tdata(s), s->nb[1], ns, k, part,
										    (int32_t *)tdata(d));
	}
	CUDA_LAUNCH_CHECK(ctx, "topk");
	return ALICE_OK;
}

/* ---- SAMPLE_TEMP: alice/temp_sample.h's draw, the same float and double
 * operations in the same order (explicit _rn intrinsics: nothing is
 * contracted into an FMA), so the token equals the host sampler's: thread
 * pairs (block, lane) hold the 8 interleaved partial sums of a 1024-token
 * block; thread 0 walks the block sums, the entered block's weights are
 * recomputed into shared memory and walked in order. */

#define TS_BLOCK 1024
static_assert(TS_BLOCK == TOPK_THREADS, "k_ts_pick: a token of a block per thread");
static_assert(ALICE_SAMPLE_TEMP_MAX / TS_BLOCK <= TOPK_THREADS, "k_ts_pick: a block per thread");

__device__ static inline float ts_exp_neg(float x)
{
	const float lo = -87.0f;
	float xc = x < lo ? lo : x;
	xc = xc > 0.0f ? 0.0f : xc;
	float n = __fsub_rn(__fadd_rn(__fmul_rn(xc, 1.44269504f), 12582912.0f), 12582912.0f);
	float r = __fsub_rn(xc, __fmul_rn(n, 0.693145752f));
	r = __fsub_rn(r, __fmul_rn(n, 1.42860677e-6f));
	float p = 1.3888889e-3f;
	p = __fadd_rn(__fmul_rn(p, r), 8.3333333e-3f);
	p = __fadd_rn(__fmul_rn(p, r), 4.1666667e-2f);
	p = __fadd_rn(__fmul_rn(p, r), 1.6666667e-1f);
	p = __fadd_rn(__fmul_rn(p, r), 0.5f);
	p = __fadd_rn(__fmul_rn(p, r), 1.0f);
	p = __fadd_rn(__fmul_rn(p, r), 1.0f);
	float sc = __int_as_float(((int32_t)n + 127) * (1 << 23));
	return x < lo ? 0.0f : __fmul_rn(p, sc);
}

/* the weight of cleaned value x (0 below floor) */
__device__ static inline float ts_weight(float x, float mx, float floor, float inv_t)
{
	return x >= floor ? ts_exp_neg(__fmul_rn(__fsub_rn(x, mx), inv_t)) : 0.0f;
}

/* The op in three launches, so a row's 1024-token blocks spread over many
 * SMs (one CTA per row kept a one-row step on one SM for ~15 us):
 * k_ts_max, each CTA the max of TS_PER blocks of a row; k_ts_sums, one
 * CTA per block: its 8 lanes' interleaved float sums, each in token order,
 * added in double; k_ts_pick, per row,
 * z over the blocks in order and the walk. The sums and the walk are those
 * of temp_sample.h, bit for bit. */

#define TS_PER 1 /* 1024-token blocks per CTA of k_ts_max: one, so each
		  * thread's loads are one round trip (8 took 8: ~5 us) */

struct ts_scr {
	float *mx;  /* [rows * S] */
	double *bs; /* [rows * nblk] */
	int *live;  /* [rows * nblk] */
};

__device__ static inline struct ts_scr ts_scr_of(uint8_t *scr, int64_t rows, int S, int nblk)
{
	struct ts_scr r;
	(void)S;
	r.bs = (double *)scr;
	r.live = (int *)(scr + rows * nblk * sizeof(double));
	r.mx = (float *)(scr + rows * nblk * (sizeof(double) + sizeof(int)));
	return r;
}

__global__ void __launch_bounds__(256) k_ts_max(const uint8_t *__restrict__ src, int64_t nb1, int n,
						const int32_t *__restrict__ prm, uint8_t *scr, int S, int nblk)
{
	pdl_wait();
	pdl_trigger();
	__shared__ float red[8];
	const int row = blockIdx.x, tid = threadIdx.x;
	if (prm && !(__int_as_float(prm[4 * (int64_t)row]) > 0)) /* not drawn (LOGSUMEXP: every row) */
		return;
	const float *x = (const float *)(src + (int64_t)row * nb1);
	const struct ts_scr sc = ts_scr_of(scr, gridDim.x, S, nblk);
	const int i0 = blockIdx.y * TS_PER * TS_BLOCK, i1 = min(i0 + TS_PER * TS_BLOCK, n);
	float m = -INFINITY;
#pragma unroll 4
	for (int i = i0 + tid; i < i1; i += 256)
		m = fmaxf(m, topk_clean(x[i]));
#pragma unroll
	for (int off = 16; off > 0; off >>= 1)
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
	if ((tid & 31) == 0)
		red[tid >> 5] = m;
	__syncthreads();
	if (tid == 0) {
		for (int w = 1; w < 8; w++)
			m = fmaxf(m, red[w]);
		sc.mx[(int64_t)row * S + blockIdx.y] = m;
	}
}

/* The row's max from its CTAs' maxima (a max is exact in any order), by
 * the whole CTA (every thread calls it): the maxima are loaded at once, not
 * one after another. */
__device__ static inline float ts_row_max_blk(const struct ts_scr &sc, int64_t row, int S)
{
	__shared__ float red[32];
	float m = -INFINITY;
	for (int k = threadIdx.x; k < S; k += blockDim.x)
		m = fmaxf(m, sc.mx[row * S + k]);
#pragma unroll
	for (int off = 16; off > 0; off >>= 1)
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = m;
	__syncthreads();
	for (int w = 0; w < (int)(blockDim.x >> 5); w++)
		m = fmaxf(m, red[w]);
	return m;
}

/* One 1024-token block per CTA: all threads lay its weights out in shared
 * memory, then thread k < 8 adds w[k + 8 j] in order (the same chain, bit
 * for bit, as one thread walking the row in global memory, which kept a
 * load's latency in every link: 64 threads per 8 blocks took ~20 us of a
 * one-row step). */
#define TS_SUM_THREADS 256

__global__ void __launch_bounds__(TS_SUM_THREADS) k_ts_sums(const uint8_t *__restrict__ src, int64_t nb1, int n,
							  const int32_t *__restrict__ prm, uint8_t *scr, int S, int nblk)
{
	pdl_wait();
	pdl_trigger();
	__shared__ float w[TS_BLOCK];
	__shared__ float part[8];
	__shared__ int livec[TS_SUM_THREADS / 32];
	const int row = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
	const float t = __int_as_float(prm[4 * (int64_t)row]);
	if (!(t > 0))
		return;
	const struct ts_scr sc = ts_scr_of(scr, gridDim.x, S, nblk);
	const float mx = ts_row_max_blk(sc, row, S);
	if (!(mx > -INFINITY))
		return;
	const float floor = __fsub_rn(mx, __fmul_rn(30.0f, t > 1.0f ? t : 1.0f));
	const float inv_t = __fdiv_rn(1.0f, t);
	const float *x = (const float *)(src + (int64_t)row * nb1);
	const int i0 = b * TS_BLOCK, cnt = min(TS_BLOCK, n - i0);
	int live = 0;
	for (int j = tid; j < TS_BLOCK; j += TS_SUM_THREADS) {
		float wv = 0.0f; /* past the row's end: + 0 leaves a chain as it is */
		if (j < cnt) {
			const float xv = topk_clean(x[i0 + j]);
			live += xv >= floor;
			wv = ts_weight(xv, mx, floor, inv_t);
		}
		w[j] = wv;
	}
#pragma unroll
	for (int off = 16; off > 0; off >>= 1)
		live += __shfl_xor_sync(0xffffffffu, live, off);
	if ((tid & 31) == 0)
		livec[tid >> 5] = live;
	__syncthreads();
	if (tid < 8) {
		float acc = 0.0f;
#pragma unroll 16
		for (int j = 0; j < TS_BLOCK / 8; j++)
			acc = __fadd_rn(acc, w[tid + 8 * j]);
		part[tid] = acc;
	}
	__syncthreads();
	if (tid == 0) {
		double sum = 0.0;
		int lv = 0;
#pragma unroll
		for (int j = 0; j < 8; j++)
			sum = __dadd_rn(sum, (double)part[j]);
		for (int j = 0; j < TS_SUM_THREADS / 32; j++)
			lv += livec[j];
		sc.bs[(int64_t)row * nblk + b] = sum;
		sc.live[(int64_t)row * nblk + b] = lv;
	}
}

/* The block's weights w (one per thread, 0 past the row) as an inclusive
 * double prefix sum over the block (warp scans, then the warp totals):
 * not the walk's order, so within a known error of its sums. */
__device__ static inline double ts_block_scan(float w, double *wsum /* [32] */)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	double v = (double)w;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		const double y = __shfl_up_sync(0xffffffffu, v, o);
		if (lane >= o)
			v += y;
	}
	if (lane == 31)
		wsum[warp] = v;
	__syncthreads();
	if (warp == 0) {
		double t = wsum[lane];
#pragma unroll
		for (int o = 1; o < 32; o <<= 1) {
			const double y = __shfl_up_sync(0xffffffffu, t, o);
			if (lane >= o)
				t += y;
		}
		wsum[lane] = t;
	}
	__syncthreads();
	return warp ? v + wsum[warp - 1] : v;
}

/* The draw of temp_sample.h's alice_ts_draw. Serial there (the walk's cum
 * is a chain of double adds); here the chain's links are found in
 * parallel where that gives the same token:
 * - the block sums' prefixes pre[b] come from the z chain (thread 0, the
 *   same adds), so the block entered first is the first b with u <
 *   pre[b + 1] or b == last, found by all threads at once;
 * - in that block, an inclusive prefix sum A_j of its weights (another
 *   order) is within E = (pre + block sum) * 2^-38 of the walk's cum_j
 *   (each of <= 1024 links rounds by <= 2^-53 of its value, the scan's
 *   <= 16 adds likewise: 2^-42 would do). When no A_j lies within E of
 *   u, the walk's token is the first j with A_j > u + E (every earlier
 *   cum is <= u, this one > u, so its weight is > 0), or with none and b
 *   the last live block, its last live token;
 * - otherwise (u within E of a link, or past the block's walk sum into
 *   the next block) thread 0 walks in the original order from there. */
__global__ void __launch_bounds__(TOPK_THREADS) k_ts_pick(const uint8_t *__restrict__ src, int64_t nb1, int n,
							  const int32_t *__restrict__ prm, uint8_t *scr, int S, int nblk,
							  int32_t *__restrict__ dst)
{
	pdl_wait();
	__shared__ float wblk[TS_BLOCK];
	__shared__ double bs[ALICE_SAMPLE_TEMP_MAX / TS_BLOCK];
	__shared__ double pre[ALICE_SAMPLE_TEMP_MAX / TS_BLOCK + 1];
	__shared__ int lvb[ALICE_SAMPLE_TEMP_MAX / TS_BLOCK];
	__shared__ double wsum[32];
	__shared__ double s_z, s_cum;
	__shared__ int s_live, s_last, s_b, s_tok, s_state, s_first, s_hit;
	const int tid = threadIdx.x, row = blockIdx.x;
	const int32_t *p = prm + 4 * (int64_t)row;
	int32_t *o = dst + 2 * (int64_t)row;
	const float t = __int_as_float(p[0]);
	const struct ts_scr sc = ts_scr_of(scr, gridDim.x, S, nblk);
	const float mx = t > 0 ? ts_row_max_blk(sc, row, S) : -INFINITY; /* t: the same in the whole CTA */
	if (!(t > 0) || !(mx > -INFINITY)) {
		if (tid == 0) {
			o[0] = -1;
			o[1] = 0;
		}
		return;
	}
	const float *x = (const float *)(src + (int64_t)row * nb1);
	const float floor = __fsub_rn(mx, __fmul_rn(30.0f, t > 1.0f ? t : 1.0f));
	const float inv_t = __fdiv_rn(1.0f, t);
	/* the block sums into shared memory first: thread 0's chain below
	 * waits on its adds only */
	for (int b = tid; b < nblk; b += TOPK_THREADS) {
		bs[b] = sc.bs[(int64_t)row * nblk + b];
		lvb[b] = sc.live[(int64_t)row * nblk + b];
	}
	__syncthreads();
	if (tid == 0) {
		double z = 0.0;
		int live = 0, last = -1;
		pre[0] = 0.0;
#pragma unroll 8
		for (int b = 0; b < nblk; b++) {
			z = __dadd_rn(z, bs[b]);
			pre[b + 1] = z;
			live += lvb[b];
			if (lvb[b])
				last = b;
		}
		s_z = z;
		s_live = live;
		s_last = last;
		s_tok = 0x7fffffff;
		s_b = nblk;
		s_first = TOPK_THREADS;
		s_hit = -1;
	}
	__syncthreads();
	if (s_live == 1) { /* the one live token, no draw */
		for (int i = tid; i < n; i += TOPK_THREADS)
			if (topk_clean(x[i]) >= floor)
				atomicMin(&s_tok, i);
		__syncthreads();
		if (tid == 0) {
			o[0] = s_tok;
			o[1] = 0;
		}
		return;
	}
	const uint64_t rb = (uint64_t)(uint32_t)p[1] | ((uint64_t)(uint32_t)p[2] << 32);
	const double u = __dmul_rn(__longlong_as_double((long long)rb), s_z);
	const int last = s_last;
	/* the block the walk enters first (nblk <= 256: a block per thread);
	 * each warp's candidates reduced first, one shared atomic a warp */
	const int bc = __reduce_min_sync(0xffffffffu, tid < nblk && (u < pre[tid + 1] || tid == last) ? tid : nblk);
	if ((tid & 31) == 0 && bc < nblk)
		atomicMin(&s_b, bc);
	__syncthreads();
	const int b0 = s_b;
	if (b0 >= nblk) {
		if (tid == 0) {
			o[0] = -1;
			o[1] = 1;
		}
		return;
	}
	const int i0 = b0 * TS_BLOCK, i1 = min(i0 + TS_BLOCK, n);
	const int i = i0 + tid; /* TOPK_THREADS == TS_BLOCK: a token per thread */
	const float wv = i < i1 ? ts_weight(topk_clean(x[i]), mx, floor, inv_t) : 0.0f;
	wblk[tid] = wv;
	const double base = pre[b0];
	const double A = __dadd_rn(base, ts_block_scan(wv, wsum));
	const double E = __dmul_rn(__dadd_rn(base, wsum[31]), 0x1p-38);
	const bool above = i < i1 && A > __dadd_rn(u, E);
	const bool near = i < i1 && !above && A >= __dsub_rn(u, E);
	const int fw = __reduce_min_sync(0xffffffffu, above ? tid : TOPK_THREADS);
	const int hw = __reduce_max_sync(0xffffffffu, wv > 0 ? i : -1);
	if ((tid & 31) == 0) {
		if (fw < TOPK_THREADS)
			atomicMin(&s_first, fw);
		if (hw >= 0)
			atomicMax(&s_hit, hw);
	}
	const bool amb = __syncthreads_or(near);
	if (tid == 0) {
		s_state = 0; /* 0 walking, 1 done */
		if (!amb && s_first < TOPK_THREADS) {
			s_tok = i0 + s_first;
			s_state = 1;
		} else if (!amb && b0 == last) {
			s_tok = s_hit; /* u landed in the rounding slack */
			s_state = 1;
		}
		s_cum = base;
		s_b = b0;
	}
	__syncthreads();
	/* the walk in the original order, from block b0 at cum pre[b0] (where
	 * it would enter b0: u < pre[b0 + 1] or b0 == last) */
	for (bool done = s_state; !done;) {
		if (tid == 0) { /* skip whole blocks */
			int b = s_b;
			double cum = s_cum;
			while (b < nblk && !(u < __dadd_rn(cum, bs[b])) && b != last) {
				cum = __dadd_rn(cum, bs[b]);
				b++;
			}
			s_b = b;
			s_cum = cum;
			if (b >= nblk) {
				s_tok = -1;
				s_state = 1;
			}
		}
		__syncthreads();
		if (s_state)
			break;
		const int b = s_b, j0 = b * TS_BLOCK, j1 = min(j0 + TS_BLOCK, n);
		for (int j = j0 + tid; j < j1; j += TOPK_THREADS)
			wblk[j - j0] = ts_weight(topk_clean(x[j]), mx, floor, inv_t);
		__syncthreads();
		if (tid == 0) {
			double cum = s_cum;
			int hit = -1, tok = -1;
			/* 8 weights loaded ahead of their adds: the chain waits on
			 * the adds only */
			for (int k0 = j0; k0 < j1 && tok < 0; k0 += 8) {
				float wk[8];
#pragma unroll
				for (int k = 0; k < 8; k++)
					wk[k] = k0 + k < j1 ? wblk[k0 + k - j0] : 0.0f;
#pragma unroll
				for (int k = 0; k < 8; k++) {
					const float w = wk[k];
					if (tok >= 0 || k0 + k >= j1)
						break;
					if (w > 0)
						hit = k0 + k;
					cum = __dadd_rn(cum, (double)w);
					if (w > 0 && u < cum)
						tok = k0 + k;
				}
			}
			s_cum = cum;
			if (tok >= 0 || b == last) {
				s_tok = tok >= 0 ? tok : hit; /* past the end: u landed in the rounding slack */
				s_state = 1;
			} else {
				s_b = b + 1;
			}
		}
		__syncthreads();
		done = s_state;
		__syncthreads(); /* read by all before thread 0's next skip may write it */
	}
	if (tid == 0) {
		o[0] = s_tok;
		o[1] = 1;
	}
}

static void ts_dims(const struct alice_tensor *s, int *nblk, int *S)
{
	*nblk = (int)((s->ne[0] + TS_BLOCK - 1) / TS_BLOCK);
	*S = (*nblk + TS_PER - 1) / TS_PER;
}

size_t cu_sample_temp_scratch(const struct alice_op_args *a)
{
	int nblk, S;
	ts_dims(a->src[0], &nblk, &S);
	const size_t rows = (size_t)a->src[0]->ne[1];
	return rows * (size_t)nblk * (sizeof(double) + sizeof(int)) + rows * (size_t)S * sizeof(float);
}

enum alice_status cu_op_sample_temp(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *s = a->src[0], *pr = a->src[1], *d = a->dst;
	if (s->ne[1] > 65535)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "SAMPLE_TEMP: %lld rows", (long long)s->ne[1]);
	int nblk, S;
	ts_dims(s, &nblk, &S);
	const unsigned rows = (unsigned)s->ne[1];
	const int32_t *p = (const int32_t *)tdata(pr);
	cu_launch(k_ts_max, dim3(rows, (unsigned)S), 256, ctx->stream, tdata(s), s->nb[1], (int)s->ne[0], p,
		  ctx->scratch, S, nblk);
	cu_launch(k_ts_sums, dim3(rows, (unsigned)nblk), TS_SUM_THREADS, ctx->stream, tdata(s), s->nb[1], (int)s->ne[0],
		  p, ctx->scratch, S, nblk);
	cu_launch(k_ts_pick, rows, TOPK_THREADS, ctx->stream, tdata(s), s->nb[1], (int)s->ne[0], p, ctx->scratch, S,
		  nblk, (int32_t *)tdata(d));
	CUDA_LAUNCH_CHECK(ctx, "sample_temp");
	return ALICE_OK;
}

/* ---- LOGIT_ADJUST (1.5): alice_ts_adjust per record, explicit _rn
 * operations (nothing contracted), so a row equals the sampler's ---- */

__global__ void k_logit_adjust(uint8_t *__restrict__ x, int64_t nb1, int64_t n, int64_t rows,
			       const int32_t *__restrict__ rec, int64_t cap)
{
	pdl_wait();
	int64_t cnt = rec[0];
	cnt = cnt < cap ? cnt : cap;
	for (int64_t i = 1 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i <= cnt; i += (int64_t)gridDim.x * blockDim.x) {
		const int32_t *e = rec + 6 * i;
		if (e[0] < 0 || e[0] >= rows || e[1] < 0 || e[1] >= n)
			continue;
		const uint32_t fl = (uint32_t)e[2];
		const float bias = __int_as_float(e[3]), rp = __int_as_float(e[4]), pen = __int_as_float(e[5]);
		float *v = (float *)(x + (int64_t)e[0] * nb1) + e[1];
		float t = topk_clean(*v);
		if (fl & 1u)
			t = topk_clean(__fadd_rn(t, bias));
		if (fl & 2u)
			t = -INFINITY;
		if (fl & 4u)
			t = topk_clean(t > 0 ? __fdiv_rn(t, rp) : __fmul_rn(t, rp));
		if (fl & 8u)
			t = topk_clean(__fsub_rn(t, pen));
		*v = t;
	}
}

enum alice_status cu_op_logit_adjust(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->dst, *r = a->src[0];
	k_logit_adjust<<<32, 256, 0, ctx->stream>>>(tdata(x), x->nb[1], x->ne[0], x->ne[1],
						   (const int32_t *)tdata(r), r->ne[1] - 1);
	CUDA_LAUNCH_CHECK(ctx, "logit_adjust");
	return ALICE_OK;
}

/* ---- FEED (1.6): a step's tokens, some from the previous step's picks ---- */

__global__ void k_feed(const int32_t *__restrict__ host, const int32_t *__restrict__ idx,
		       const int32_t *__restrict__ picks, int64_t m, int64_t n, int32_t *__restrict__ dst, int *flag)
{
	pdl_wait();
	pdl_trigger();
	const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const int32_t j = idx[i];
	if (j >= m) {
		atomicOr(flag, CU_FLAG_ROW_ID);
		dst[i] = 0;
		return;
	}
	dst[i] = j < 0 ? host[i] : picks[j];
}

enum alice_status cu_op_feed(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const int64_t n = a->dst->ne[0];
	cu_launch(k_feed, (unsigned)((n + 255) / 256), 256, ctx->stream, (const int32_t *)tdata(a->src[0]),
		  (const int32_t *)tdata(a->src[1]), (const int32_t *)tdata(a->src[2]), a->src[2]->ne[0], n,
		  (int32_t *)tdata(a->dst), ctx->dflag);
	CUDA_LAUNCH_CHECK(ctx, "feed");
	return ALICE_OK;
}

/* ---- LOGSUMEXP (1.6): logprobs' normaliser, alice_ts_lse_sum bit for bit:
 * the row max over CTAs (SAMPLE_TEMP's k_ts_max), each CTA its blocks' 8 interleaved
 * double partial sums (k_lse_sums), per row the blocks in order (k_lse_out) */

__global__ void __launch_bounds__(TS_SUM_THREADS) k_lse_sums(const uint8_t *__restrict__ src, int64_t nb1, int n,
							   uint8_t *scr, int S, int nblk)
{
	pdl_wait();
	pdl_trigger();
	__shared__ float w[TS_BLOCK];
	__shared__ double part[8];
	const int row = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
	const struct ts_scr sc = ts_scr_of(scr, gridDim.x, S, nblk);
	const float mx = ts_row_max_blk(sc, row, S);
	if (!(mx > -INFINITY)) {
		if (tid == 0)
			sc.bs[(int64_t)row * nblk + b] = 0.0;
		return;
	}
	const float floor = __fsub_rn(mx, 30.0f);
	const float *x = (const float *)(src + (int64_t)row * nb1);
	const int i0 = b * TS_BLOCK, cnt = min(TS_BLOCK, n - i0);
	for (int j = tid; j < TS_BLOCK; j += TS_SUM_THREADS) {
		float wv = 0.0f; /* below the floor or past the end: nothing added (+ 0) */
		if (j < cnt) {
			const float v = topk_clean(x[i0 + j]);
			if (v >= floor)
				wv = ts_exp_neg(__fsub_rn(v, mx));
		}
		w[j] = wv;
	}
	__syncthreads();
	if (tid < 8) {
		double acc = 0.0;
#pragma unroll 16
		for (int j = 0; j < TS_BLOCK / 8; j++)
			acc = __dadd_rn(acc, (double)w[tid + 8 * j]);
		part[tid] = acc;
	}
	__syncthreads();
	if (tid == 0) {
		double sum = 0.0;
#pragma unroll
		for (int j = 0; j < 8; j++)
			sum = __dadd_rn(sum, part[j]);
		sc.bs[(int64_t)row * nblk + b] = sum;
	}
}

__global__ void k_lse_out(const uint8_t *__restrict__ src, int64_t nb1, int n, const int32_t *__restrict__ tk,
			  uint8_t *scr, int S, int nblk, int64_t rows, int32_t *__restrict__ dst)
{
	pdl_wait();
	const int64_t row = blockIdx.x; /* a warp per row */
	const struct ts_scr sc = ts_scr_of(scr, rows, S, nblk);
	const float mx = ts_row_max_blk(sc, row, S);
	if (threadIdx.x != 0)
		return;
	double z = 0.0;
	if (mx > -INFINITY)
#pragma unroll 8
		for (int b = 0; b < nblk; b++)
			z = __dadd_rn(z, sc.bs[row * nblk + b]);
	const float *x = (const float *)(src + row * nb1);
	const int32_t tok = tk ? tk[2 * row] : -1;
	const float val = tok >= 0 && tok < n ? topk_clean(x[tok]) : 0.0f;
	const unsigned long long zb = (unsigned long long)__double_as_longlong(z);
	int32_t *o = dst + 4 * row;
	o[0] = __float_as_int(mx);
	o[1] = (int32_t)(uint32_t)zb;
	o[2] = (int32_t)(uint32_t)(zb >> 32);
	o[3] = __float_as_int(val);
}

size_t cu_logsumexp_scratch(const struct alice_op_args *a)
{
	return cu_sample_temp_scratch(a);
}

enum alice_status cu_op_logsumexp(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *s = a->src[0], *tk = a->src[1], *d = a->dst;
	if (s->ne[1] > 65535)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "LOGSUMEXP: %lld rows", (long long)s->ne[1]);
	int nblk, S;
	ts_dims(s, &nblk, &S);
	const unsigned rows = (unsigned)s->ne[1];
	cu_launch(k_ts_max, dim3(rows, (unsigned)S), 256, ctx->stream, tdata(s), s->nb[1], (int)s->ne[0],
		  (const int32_t *)NULL, ctx->scratch, S, nblk);
	cu_launch(k_lse_sums, dim3(rows, (unsigned)nblk), TS_SUM_THREADS, ctx->stream, tdata(s), s->nb[1],
		  (int)s->ne[0], ctx->scratch, S, nblk);
	cu_launch(k_lse_out, rows, 32, ctx->stream, tdata(s), s->nb[1], (int)s->ne[0],
		  tk ? (const int32_t *)tdata(tk) : (const int32_t *)NULL, ctx->scratch, S, nblk, (int64_t)rows,
		  (int32_t *)tdata(d));
	CUDA_LAUNCH_CHECK(ctx, "logsumexp");
	return ALICE_OK;
}

/* ---- TOKEN_MASK (1.6): a grammar's allowed tokens, the rest -inf: one
 * thread per 32-token word of a record ---- */

__global__ void k_token_mask(uint8_t *__restrict__ x, int64_t nb1, int64_t n, int64_t rows,
			     const int32_t *__restrict__ rec, int64_t W, int64_t cap)
{
	pdl_wait();
	pdl_trigger();
	const int64_t k = 1 + blockIdx.y, w = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	int64_t cnt = rec[0];
	cnt = cnt < cap ? cnt : cap;
	if (k > cnt || w >= W - 1)
		return;
	const int32_t *e = rec + W * k;
	if (e[0] < 0 || e[0] >= rows)
		return;
	const uint32_t bits = (uint32_t)e[1 + w];
	if (bits == 0xffffffffu)
		return;
	float *v = (float *)(x + (int64_t)e[0] * nb1);
	for (int b = 0; b < 32; b++) {
		const int64_t t = 32 * w + b;
		if (t < n && !((bits >> b) & 1u))
			v[t] = -INFINITY;
	}
}

enum alice_status cu_op_token_mask(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->dst, *r = a->src[0];
	const int64_t W = r->ne[0], cap = r->ne[1] - 1;
	if (cap < 1)
		return ALICE_OK;
	if (cap > 65535)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "TOKEN_MASK: %lld records", (long long)cap);
	cu_launch(k_token_mask, dim3((unsigned)((W - 1 + 255) / 256), (unsigned)cap), 256, ctx->stream, tdata(x),
		  x->nb[1], x->ne[0], x->ne[1], (const int32_t *)tdata(r), W, cap);
	CUDA_LAUNCH_CHECK(ctx, "token_mask");
	return ALICE_OK;
}
