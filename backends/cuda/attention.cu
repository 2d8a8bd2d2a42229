/* attention.cu — fused ATTENTION over a KV cache (F16 or F32 K/V).
 *
 * A block of 4 warps owns one (query head, token, split); the token's cell
 * range [r0, r1) is read on the device (so a captured graph stays valid as
 * the range grows) and cut into n_split equal parts (flash-decoding: a
 * single decode token still fills the GPU on long contexts). Each warp
 * walks its cells with an online softmax (F32), lanes holding head dims
 * lane + 32j; warps then merge in shared memory. With several splits each
 * block writes (max, sum, unnormalized acc) to scratch and the last block of
 * a (head, token) to finish (an atomic counter) merges them. An empty range
 * gives zeros. With an F16 cache q is rounded to F16 (llama.cpp does).
 * Batch invariance: the split count depends only on the head count, the
 * cache size (the whole cache is every step's K/V) and the GPU, never on the
 * op's token count, and tokens that the flash kernel takes (fattn.cu: runs
 * of >= 16 tokens) are skipped here, so a token's result does not depend on
 * the other tokens of the op.
 * Paged cache (src4): ranges, splits and the order of the cells are those of
 * the virtual cell space (n_cells = its extent); only each cell's address
 * goes through the block table (cu_pcell), so results equal the contiguous
 * layout's bit for bit. */
#include "common.cuh"
#include "quantx.cuh"

#define ATT_WARPS 4
#define ATT_MAXJ 16 /* head dims up to 512 */

struct att_params {
	struct cu_view q, k, v, d;
	const uint8_t *rng;
	int64_t rnb0, rnb1;
	int64_t n_head, n_head_kv, n_tokens, n_cells; /* n_cells: virtual (the ranges' extent) */
	int dk, dv, n_split, chunk; /* chunk: cells per split of the GQA decode kernel */
	uint32_t kt, vt;
	float scale, softcap;
	struct cu_pages pg;
	/* k_attn_dec: the output (dense [dv, n_head, T]) also rounded for the
	 * mat-vec that reads it next, as k_quant_x rounds it (qk 256 or 32;
	 * 0: not) into xq [T][K] / xd [T][K / 32], K = dv * n_head */
	int8_t *xq;
	float *xd;
	int qk;
};

/* The last block of a (head, token) to finish merges its ns split
 * partials (max, sum, unnormalized acc at part) into dst, dims e0, e0 +
 * step, ... */
__device__ static inline void att_merge_splits(const float *__restrict__ part, int ns, const struct att_params &p,
					       int h, int t, uint8_t *__restrict__ dst, int e0, int step)
{
	const float *pp = part + ((int64_t)t * p.n_head + h) * p.n_split * (p.dv + 2);
	float GM = -INFINITY;
	for (int s2 = 0; s2 < ns; s2++)
		GM = fmaxf(GM, __ldcg(pp + s2 * (p.dv + 2)));
	float GL = 0.f;
	for (int s2 = 0; s2 < ns; s2++) {
		float ms = __ldcg(pp + s2 * (p.dv + 2));
		if (ms != -INFINITY)
			GL += __ldcg(pp + s2 * (p.dv + 2) + 1) * expf(ms - GM);
	}
	for (int e = e0; e < p.dv; e += step) {
		float a = 0.f;
		for (int s2 = 0; s2 < ns; s2++) {
			float ms = __ldcg(pp + s2 * (p.dv + 2));
			if (ms != -INFINITY)
				a += __ldcg(pp + s2 * (p.dv + 2) + 2 + e) * expf(ms - GM);
		}
		*(float *)(dst + e * p.d.nb[0] + h * p.d.nb[1] + t * p.d.nb[2]) = GL > 0.f ? a / GL : 0.f;
	}
}

/* att_merge_splits for one warp (ns <= 32): the same values in the same
 * order (so the same bits), with each split's weight computed once and
 * every split's partial loaded at once, not one L2 round trip after
 * another (the merge is on each decode attention's critical path, and its
 * split count grows with the context). */
__device__ static inline void att_merge_warp(const float *__restrict__ part, int ns, const struct att_params &p, int h,
					     int t, uint8_t *__restrict__ dst, int lane)
{
	const int st = p.dv + 2;
	const float *pp = part + ((int64_t)t * p.n_head + h) * p.n_split * st;
	const float ms = lane < ns ? __ldcg(pp + lane * st) : -INFINITY;
	const float ls = lane < ns ? __ldcg(pp + lane * st + 1) : 0.f;
	const float GM = warp_max(ms);
	const bool on = lane < ns && ms != -INFINITY;
	const float f = on ? expf(ms - GM) : 0.f;
	const unsigned onm = __ballot_sync(0xffffffffu, on);
	float GL = 0.f;
	for (int s2 = 0; s2 < ns; s2++) {
		const float fs = __shfl_sync(0xffffffffu, f, s2), lv = __shfl_sync(0xffffffffu, ls, s2);
		if (onm >> s2 & 1u)
			GL += lv * fs;
	}
	for (int e = lane; e < p.dv; e += 32) {
		float a = 0.f;
		/* 4 splits' loads at a time: the kernel keeps its 46 registers
		 * (all 32 at once took it to 104: B = 64 steps -6 % on an H100) */
		for (int s0 = 0; s0 < ns; s0 += 4) {
			float v[4];
#pragma unroll
			for (int k = 0; k < 4; k++) {
				const int s2 = s0 + k;
				v[k] = s2 < ns && (onm >> s2 & 1u) ? __ldcg(pp + s2 * st + 2 + e) : 0.f;
			}
#pragma unroll
			for (int k = 0; k < 4; k++) {
				const int s2 = s0 + k;
				const float fs = __shfl_sync(0xffffffffu, f, s2 & 31);
				if (s2 < ns && (onm >> s2 & 1u))
					a += v[k] * fs;
			}
		}
		*(float *)(dst + e * p.d.nb[0] + h * p.d.nb[1] + t * p.d.nb[2]) = GL > 0.f ? a / GL : 0.f;
	}
}

template <int J>
__global__ void __launch_bounds__(ATT_WARPS * 32)
k_attn(const uint8_t *__restrict__ q, const uint8_t *__restrict__ kc, const uint8_t *__restrict__ vc,
       uint8_t *__restrict__ dst, float *__restrict__ part, unsigned *__restrict__ cnt, int *__restrict__ flag,
       const uint8_t *__restrict__ tiled, struct att_params p)
{
	pdl_wait();
	pdl_trigger();
	const int h = blockIdx.x, t = blockIdx.y, sp = blockIdx.z;
	if (tiled && tiled[t])
		return; /* the flash kernel's token */
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int64_t hk = h / (p.n_head / p.n_head_kv);
	int32_t r0 = *(const int32_t *)(p.rng + t * p.rnb1);
	int32_t r1 = *(const int32_t *)(p.rng + p.rnb0 + t * p.rnb1);
	if (r0 < 0 || r1 > p.n_cells || r0 > r1) {
		if (threadIdx.x == 0 && sp == 0)
			atomicOr(flag, CU_FLAG_RANGE);
		r0 = r0 < 0 ? 0 : r0;
		r1 = r1 > p.n_cells ? (int32_t)p.n_cells : r1;
	}
	int32_t len = r1 > r0 ? r1 - r0 : 0;
	const int ns = p.n_split;
	int32_t chunk = (len + ns - 1) / ns;
	int32_t c0 = r0 + sp * chunk, c1 = c0 + chunk < r1 ? c0 + chunk : r1;

	float qr[J], acc[J];
	const uint8_t *qh = q + h * p.q.nb[1] + t * p.q.nb[2];
#pragma unroll
	for (int j = 0; j < J; j++) {
		int e = lane + 32 * j;
		float qv = e < p.dk ? *(const float *)(qh + e * p.q.nb[0]) : 0.f;
		/* with an F16 cache q is rounded to F16 first, as llama.cpp's
		 * flash attention (and our CPU backend) do */
		if (p.kt == ALICE_TYPE_F16)
			qv = __half2float(__float2half_rn(qv));
		qr[j] = qv * p.scale;
		acc[j] = 0.f;
	}
	float m = -INFINITY, l = 0.f;
	for (int32_t c = c0 + warp; c < c1; c += ATT_WARPS) {
		const int64_t pc = cu_pcell(p.pg, c, flag);
		const uint8_t *kr = kc + hk * p.k.nb[1] + pc * p.k.nb[2];
		float s = 0.f;
#pragma unroll
		for (int j = 0; j < J; j++) {
			int e = lane + 32 * j;
			if (e < p.dk)
				s += qr[j] * ld_float(kr + e * p.k.nb[0], p.kt);
		}
		s = warp_sum(s);
		if (p.softcap != 0.f)
			s = p.softcap * tanhf(s / p.softcap);
		float mn = fmaxf(m, s);
		float corr = expf(m - mn), w = expf(s - mn);
		l = l * corr + w;
		const uint8_t *vr = vc + hk * p.v.nb[1] + pc * p.v.nb[2];
#pragma unroll
		for (int j = 0; j < J; j++) {
			int e = lane + 32 * j;
			float vv = e < p.dv ? ld_float(vr + e * p.v.nb[0], p.vt) : 0.f;
			acc[j] = acc[j] * corr + w * vv;
		}
		m = mn;
	}
	/* merge the warps */
	__shared__ float sm[ATT_WARPS], sl[ATT_WARPS];
	__shared__ float sacc[ATT_WARPS][J * 32];
	if (lane == 0) {
		sm[warp] = m;
		sl[warp] = l;
	}
#pragma unroll
	for (int j = 0; j < J; j++)
		sacc[warp][lane + 32 * j] = acc[j];
	__syncthreads();
	float M = -INFINITY;
	for (int w = 0; w < ATT_WARPS; w++)
		M = fmaxf(M, sm[w]);
	float L = 0.f, f[ATT_WARPS];
	for (int w = 0; w < ATT_WARPS; w++) {
		f[w] = sm[w] == -INFINITY ? 0.f : expf(sm[w] - M);
		L += sl[w] * f[w];
	}
	for (int e = threadIdx.x; e < p.dv; e += ATT_WARPS * 32) {
		float a = 0.f;
		for (int w = 0; w < ATT_WARPS; w++)
			a += sacc[w][e] * f[w];
		if (ns == 1) {
			*(float *)(dst + e * p.d.nb[0] + h * p.d.nb[1] + t * p.d.nb[2]) = L > 0.f ? a / L : 0.f;
		} else {
			float *pp = part + (((int64_t)t * p.n_head + h) * p.n_split + sp) * (p.dv + 2);
			pp[2 + e] = a;
			if (e == 0) {
				pp[0] = M;
				pp[1] = L;
			}
		}
	}
	if (ns == 1)
		return;
	/* the last split of this (head, token) to finish merges them all:
	 * no second launch; it leaves the counter at 0 for the next step */
	__shared__ bool last;
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned prev = atomicAdd(&cnt[(int64_t)t * p.n_head + h], 1u);
		last = prev == (unsigned)ns - 1;
	}
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	att_merge_splits(part, ns, p, h, t, dst, threadIdx.x, ATT_WARPS * 32);
	if (threadIdx.x == 0)
		cnt[(int64_t)t * p.n_head + h] = 0;
}

/* Decode tokens over an F16 cache, head dim D (64 or 128), G query heads
 * per KV head (GQA): a block of G warps owns one (KV head, token, split) and
 * reads each K/V row once for its G heads. Lane c of a warp scores cell
 * c of a 32-cell tile (q from shared memory, K row read whole), the tile's
 * max / sum are one warp reduction each, then lanes switch to head dims
 * for P V. Splits: at most att_splits, and one per p.chunk cells of the
 * token's own range, so a token's sums depend only on its range. */
template <int D, bool XQ = false>
__global__ void __launch_bounds__(8 * 32)
k_attn_dec(const uint8_t *__restrict__ q, const uint8_t *__restrict__ kc, const uint8_t *__restrict__ vc,
	   uint8_t *__restrict__ dst, float *__restrict__ part, unsigned *__restrict__ cnt, int *__restrict__ flag,
	   const uint8_t *__restrict__ tiled, struct att_params p)
{
	pdl_wait();
	pdl_trigger();
	constexpr int J = D / 32;
	const int hk = blockIdx.x, t = blockIdx.y, sp = blockIdx.z;
	if (tiled && tiled[t])
		return;
	const int G = (int)(p.n_head / p.n_head_kv);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int h = hk * G + warp;
	int32_t r0 = *(const int32_t *)(p.rng + t * p.rnb1);
	int32_t r1 = *(const int32_t *)(p.rng + p.rnb0 + t * p.rnb1);
	if (r0 < 0 || r1 > p.n_cells || r0 > r1) {
		if (threadIdx.x == 0 && sp == 0)
			atomicOr(flag, CU_FLAG_RANGE);
		r0 = r0 < 0 ? 0 : r0;
		r1 = r1 > p.n_cells ? (int32_t)p.n_cells : r1;
	}
	const int32_t len = r1 > r0 ? r1 - r0 : 0;
	int ns = (len + p.chunk - 1) / p.chunk;
	ns = ns < 1 ? 1 : (ns > p.n_split ? p.n_split : ns);
	if (sp >= ns)
		return;
	const int32_t chunk = (len + ns - 1) / ns;
	const int32_t c0 = r0 + sp * chunk, c1 = c0 + chunk < r1 ? c0 + chunk : r1;

	__shared__ float qs[8][D];
	const uint8_t *qh = q + h * p.q.nb[1] + t * p.q.nb[2];
#pragma unroll
	for (int j = 0; j < J; j++) {
		const int e = lane + 32 * j;
		const float qv = __half2float(__float2half_rn(*(const float *)(qh + e * p.q.nb[0])));
		qs[warp][e] = qv * p.scale;
	}
	__syncwarp();
	float acc[J];
#pragma unroll
	for (int j = 0; j < J; j++)
		acc[j] = 0.f;
	float m = -INFINITY, l = 0.f;
	const uint8_t *kb = kc + hk * p.k.nb[1], *vb = vc + hk * p.v.nb[1];
	for (int32_t cb = c0; cb < c1; cb += 32) {
		const int32_t c = cb + lane;
		float s = -INFINITY;
		const int64_t pc = c < c1 ? cu_pcell(p.pg, c, flag) : 0; /* this lane's cell, then lane i's for P V */
		if (c < c1) {
			const uint4 *kr = (const uint4 *)(kb + pc * p.k.nb[2]);
			float a = 0.f;
#pragma unroll
			for (int i = 0; i < D / 8; i++) {
				const uint4 u = kr[i];
				const __half2 *hh = (const __half2 *)&u;
#pragma unroll
				for (int k = 0; k < 4; k++) {
					const float2 f = __half22float2(hh[k]);
					a = fmaf(qs[warp][8 * i + 2 * k], f.x, a);
					a = fmaf(qs[warp][8 * i + 2 * k + 1], f.y, a);
				}
			}
			s = a;
		}
		const float mn = fmaxf(m, warp_max(s));
		const float corr = expf(m - mn), w = c < c1 ? expf(s - mn) : 0.f;
		l = l * corr + warp_sum(w);
#pragma unroll
		for (int j = 0; j < J; j++)
			acc[j] *= corr;
		const int nc = c1 - cb < 32 ? c1 - cb : 32;
		/* V rows of U cells loaded before their FMAs (one memory wait per
		 * U cells, not per cell); the FMAs stay in cell order */
		constexpr int U = 32 / J;
		for (int i0 = 0; i0 < nc; i0 += U) {
			float wu[U];
			__half vu[U][J];
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int i = i0 + u; /* < 32: nc <= 32 and U divides 32 */
				wu[u] = __shfl_sync(0xffffffffu, w, i);
				const long long pci = __shfl_sync(0xffffffffu, (long long)pc, i);
				const __half *vr = (const __half *)(vb + (int64_t)pci * p.v.nb[2]);
#pragma unroll
				for (int j = 0; j < J; j++)
					vu[u][j] = i < nc ? vr[lane + 32 * j] : __float2half(0.f);
			}
#pragma unroll
			for (int u = 0; u < U; u++)
				if (i0 + u < nc)
#pragma unroll
					for (int j = 0; j < J; j++)
						acc[j] = fmaf(wu[u], __half2float(vu[u][j]), acc[j]);
		}
		m = mn;
	}
	if (ns == 1) {
#pragma unroll
		for (int j = 0; j < J; j++)
			*(float *)(dst + (lane + 32 * j) * p.d.nb[0] + h * p.d.nb[1] + t * p.d.nb[2]) = l > 0.f ? acc[j] / l : 0.f;
		if constexpr (!XQ)
			return;
	} else {
		float *pp = part + (((int64_t)t * p.n_head + h) * p.n_split + sp) * (p.dv + 2);
#pragma unroll
		for (int j = 0; j < J; j++)
			pp[2 + lane + 32 * j] = acc[j];
		if (lane == 0) {
			pp[0] = m;
			pp[1] = l;
		}
		/* the last split of this (KV head, token) to finish merges them */
		__shared__ bool last;
		__threadfence();
		__syncthreads();
		if (threadIdx.x == 0) {
			unsigned prev = atomicAdd(&cnt[(int64_t)t * p.n_head + hk * G], 1u);
			last = prev == (unsigned)ns - 1;
		}
		__syncthreads();
		if (!last)
			return;
		__threadfence();
		att_merge_warp(part, ns, p, h, t, dst, lane);
		if (threadIdx.x == 0)
			cnt[(int64_t)t * p.n_head + hk * G] = 0;
		if constexpr (!XQ)
			return;
	}
	/* the block's G heads are G * D consecutive elements of the token's
	 * row, whole 256-blocks (host): k_quant_x's rounding of them, one warp
	 * a 256-block, from the values just written */
	if constexpr (XQ) {
		__syncthreads();
		const int64_t K = (int64_t)p.dv * p.n_head;
		if (warp < G * D / 256) {
			const int64_t k = (int64_t)hk * G * D + warp * 256 + lane * 8;
			const float *row = (const float *)(dst + t * p.d.nb[2]);
			float v[8];
#pragma unroll
			for (int i = 0; i < 8; i++)
				v[i] = row[k + i];
			if (p.qk == 256)
				quant_regs<256>(v, lane, k, p.xq + t * K, p.xd + t * (K / 32), true);
			else
				quant_regs<32>(v, lane, k, p.xq + t * K, p.xd + t * (K / 32), true);
		}
	}
}

/* the GQA decode kernel's cases: F16 K and V, dk = dv = 64 or 128, no
 * softcap, at most 8 query heads per KV head, 16-byte aligned K rows */
static bool att_dec_ok(const struct att_params &p, const struct alice_tensor *k, const struct alice_tensor *v)
{
	static int off = -1;
	if (cu_env_is("ALICE_CUDA_ATT_DEC", '0', &off))
		return false;
	const int64_t G = p.n_head / p.n_head_kv;
	return p.kt == ALICE_TYPE_F16 && p.vt == ALICE_TYPE_F16 && p.dk == p.dv && (p.dk == 64 || p.dk == 128) &&
	       p.softcap == 0.f && G >= 1 && G <= 8 && k->nb[0] == 2 && v->nb[0] == 2 && k->nb[2] % 16 == 0 &&
	       k->nb[1] % 16 == 0 && ((uintptr_t)tdata(k) & 15) == 0;
}

/* The decode kernel may round its output for the mat-vec mm (o-proj)
 * that reads it: mm's x is that output, dense, seen as [K, T]; each
 * block's G heads are whole 256-blocks of it; the staged region holds it
 * (ALICE_CUDA_ATT_XQ=1; else the mat-vec rounds it itself). */
static bool att_xq_ok(const struct alice_op_args *a, const struct alice_op_args *mm, const struct att_params &p)
{
	const struct alice_tensor *d = a->dst, *x = mm->src[1];
	const int64_t K = (int64_t)p.dv * p.n_head, GD = (int64_t)p.dv * (p.n_head / p.n_head_kv);
	return a->ctx->att_xq && d->type == ALICE_TYPE_F32 && d->nb[0] == 4 &&
	       d->nb[1] == 4 * (int64_t)p.dv && d->nb[2] == 4 * K && x->type == ALICE_TYPE_F32 && x->buf == d->buf &&
	       x->offset == d->offset && x->ne[0] == K && x->ne[1] == p.n_tokens && x->ne[2] * x->ne[3] == 1 &&
	       x->nb[0] == 4 && x->nb[1] == 4 * K && GD % 256 == 0 && K % 256 == 0 &&
	       a->ctx->scratch_size >= a->ctx->xq_off + cu_mmvq_scratch(ALICE_TYPE_Q8_0, K, p.n_tokens);
}

/* The cells ATTENTION's ranges index: the virtual extent with a block
 * table (src4), else K's cells. */
static int64_t att_vcells(const struct alice_op_args *a)
{
	const struct alice_tensor *k = a->src[1], *t = a->src[4];
	return t ? t->ne[0] * (int64_t)a->node->ip[0] : k->ne[2];
}

enum alice_status cu_attention_pages(const struct alice_op_args *a, struct cu_pages *pg, int64_t *n_vcells)
{
	struct alice_bc_attn_pages bp;
	enum alice_status st = alice_bc_attention_pages(a->node, a->src[1], a->src[4], &bp, a->ctx->err,
							sizeof(a->ctx->err));
	if (st != ALICE_OK)
		return st;
	if (bp.n_blocks > INT32_MAX)
		return cu_fail(a->ctx, ALICE_ERR_UNSUPPORTED, "ATTENTION: more than 2^31 cache blocks");
	pg->tbl = a->src[4] ? (const int32_t *)tdata(a->src[4]) : NULL;
	pg->sh = bp.bs_log2;
	pg->n_blk = (int32_t)bp.n_blocks;
	*n_vcells = bp.n_vcells;
	return ALICE_OK;
}

/* Cells per split of a decode token (k_attn_dec): ALICE_CUDA_ATT_CHUNK
 * (16..1024), else 32 (H200, 1B: tg +5 %, one-row batched steps +11 %
 * over 64; 16 gives one-row steps +6 % but B = 16 and 64 -1 to -4 % on an
 * H100, and the B = 64 bar has less margin than the one-row ones). */
static int att_chunk(void)
{
	static int v = 0;
	if (!v) {
		const char *e = getenv("ALICE_CUDA_ATT_CHUNK");
		int x = e ? atoi(e) : 0;
		v = x >= 16 && x <= 1024 ? x : 32;
	}
	return v;
}

/* Splits per token: enough blocks for a single decode token to fill the
 * GPU, at most one per 2 chunks of the (virtual) cache. Must not depend on
 * the op's token count (batch invariance). */
static int att_splits(const struct alice_op_args *a)
{
	const struct alice_tensor *q = a->src[0];
	int64_t want = (2 * (int64_t)a->ctx->n_sm + q->ne[1] - 1) / q->ne[1];
	int64_t cap = att_vcells(a) / (2 * att_chunk());
	if (want > cap)
		want = cap;
	if (want > 32)
		want = 32;
	return want < 1 ? 1 : (int)want;
}

static size_t att_part_bytes(const struct alice_op_args *a)
{
	int ns = att_splits(a);
	if (ns == 1)
		return 0;
	const struct alice_tensor *q = a->src[0], *v = a->src[2];
	size_t b = (size_t)(q->ne[1] * q->ne[2]) * (size_t)ns * (size_t)(v->ne[0] + 2) * sizeof(float);
	return (b + 255) & ~(size_t)255;
}

size_t cu_attention_counters(const struct alice_op_args *a)
{
	return att_splits(a) > 1 ? (size_t)(a->src[0]->ne[1] * a->src[0]->ne[2]) : 0;
}

/* split partials */
size_t cu_attention_scratch(const struct alice_op_args *a)
{
	return att_part_bytes(a);
}

size_t cu_attention_regime(const struct alice_op_args *a)
{
	return cu_fattn_ok(a) ? (size_t)a->src[0]->ne[2] : 0;
}

/* qk != 0: the GQA decode kernel also rounds the output for the mat-vec
 * mm that reads it next (cu_attention_xq); *rounded says it did */
static enum alice_status attention(const struct alice_op_args *a, const struct alice_op_args *mm, int qk,
				   bool *rounded)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *q = a->src[0], *k = a->src[1], *v = a->src[2], *r = a->src[3], *d = a->dst;
	struct att_params p;
	p.dk = (int)q->ne[0];
	p.dv = (int)v->ne[0];
	p.n_head = q->ne[1];
	p.n_tokens = q->ne[2];
	p.n_head_kv = k->ne[1];
	enum alice_status pst = cu_attention_pages(a, &p.pg, &p.n_cells);
	if (pst != ALICE_OK)
		return pst;
	if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || p.n_head_kv < 1 ||
	    p.n_head % p.n_head_kv != 0 || d->ne[0] != v->ne[0] || d->ne[1] != p.n_head || d->ne[2] != p.n_tokens ||
	    q->ne[3] != 1 || k->ne[3] != 1 || v->ne[3] != 1 || d->ne[3] != 1)
		return cu_fail(ctx, ALICE_ERR_INVALID, "ATTENTION: q/k/v/dst shapes do not match");
	if (r->ne[0] < 2 || r->ne[1] < p.n_tokens)
		return cu_fail(ctx, ALICE_ERR_INVALID, "ATTENTION: ranges must be I32 [2, n_tokens]");
	if (p.dk > 32 * ATT_MAXJ || p.dv > 32 * ATT_MAXJ)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "ATTENTION: head dims above %d", 32 * ATT_MAXJ);
	if (p.n_head > 65535 || p.n_tokens > 65535)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "ATTENTION: more than 65535 heads or tokens");
	uint8_t *tiled = NULL;
	if (cu_fattn_ok(a)) {
		tiled = ctx->fa_reg;
		enum alice_status st = cu_fattn(a, tiled);
		if (st != ALICE_OK)
			return st;
	}
	p.q = cu_view_of(q);
	p.k = cu_view_of(k);
	p.v = cu_view_of(v);
	p.d = cu_view_of(d);
	p.rng = tdata(r);
	p.rnb0 = r->nb[0];
	p.rnb1 = r->nb[1];
	p.kt = k->type;
	p.vt = v->type;
	p.scale = a->node->fp[0];
	p.softcap = a->node->fp[1];
	p.n_split = att_splits(a);
	p.chunk = att_chunk();
	float *part = (float *)ctx->scratch;
	p.xq = NULL;
	p.xd = NULL;
	p.qk = 0;
	if (qk && !tiled && att_dec_ok(p, k, v) && att_xq_ok(a, mm, p)) {
		p.xq = cu_xq_q(ctx);
		p.xd = cu_xq_d(ctx, (int64_t)p.dv * p.n_head, p.n_tokens);
		p.qk = qk;
	}
	if (att_dec_ok(p, k, v)) {
		dim3 gd((unsigned)p.n_head_kv, (unsigned)p.n_tokens, (unsigned)p.n_split);
		unsigned thr = (unsigned)(32 * (p.n_head / p.n_head_kv));
		auto dec = p.dk == 64 ? (p.qk ? k_attn_dec<64, true> : k_attn_dec<64>)
				      : (p.qk ? k_attn_dec<128, true> : k_attn_dec<128>);
		cu_launch(dec, gd, thr, ctx->stream, tdata(q), tdata(k), tdata(v), tdata(d), part, ctx->cnt, ctx->dflag, tiled, p);
		CUDA_LAUNCH_CHECK(ctx, "attention");
		if (p.qk) {
			const struct alice_tensor *x = mm->src[1];
			cu_xq_set(ctx, tdata(x), x->nb[0], x->nb[1], x->ne[0], x->ne[1], p.qk, mm->node->src[1]);
			*rounded = true;
		}
		return ALICE_OK;
	}
	dim3 grid((unsigned)p.n_head, (unsigned)p.n_tokens, (unsigned)p.n_split);
	int J = ((p.dk > p.dv ? p.dk : p.dv) + 31) / 32;
	cudaStream_t s = ctx->stream;
	if (J <= 2)
		cu_launch(k_attn<2>, grid, ATT_WARPS * 32, s, tdata(q), tdata(k), tdata(v), tdata(d), part, ctx->cnt, ctx->dflag, tiled, p);
	else if (J <= 4)
		cu_launch(k_attn<4>, grid, ATT_WARPS * 32, s, tdata(q), tdata(k), tdata(v), tdata(d), part, ctx->cnt, ctx->dflag, tiled, p);
	else if (J <= 8)
		cu_launch(k_attn<8>, grid, ATT_WARPS * 32, s, tdata(q), tdata(k), tdata(v), tdata(d), part, ctx->cnt, ctx->dflag, tiled, p);
	else
		cu_launch(k_attn<16>, grid, ATT_WARPS * 32, s, tdata(q), tdata(k), tdata(v), tdata(d), part, ctx->cnt, ctx->dflag, tiled, p);
	CUDA_LAUNCH_CHECK(ctx, "attention");
	return ALICE_OK;
}

enum alice_status cu_op_attention(const struct alice_op_args *a)
{
	bool r = false;
	return attention(a, NULL, 0, &r);
}

enum alice_status cu_attention_xq(const struct alice_op_args *a, const struct alice_op_args *mm, int qk,
				  bool *rounded)
{
	*rounded = false;
	return attention(a, mm, qk, rounded);
}
