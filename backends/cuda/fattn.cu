/* fattn.cu — ATTENTION for prefill batches (>= FA_MIN_TOKENS query tokens)
 * over an F16 K/V cache with head dims 64 or 128, on the tensor cores
 * (mma.sync m16n8k16, F16 inputs, F32 accumulation).
 *
 * A block of 4 warps owns one query head and 64 consecutive tokens (16 per
 * warp). It walks the union of its tokens' cell ranges in tiles of 64 cells:
 * K and V tiles are copied to shared memory (16-byte loads), each warp forms
 * its 16x64 score tile S = q K^T in registers, masks cells outside each
 * token's own range [r0, r1), updates an online softmax (F32 max and sum per
 * row), rounds the probabilities to F16 and accumulates P V into F32
 * registers. q is rounded to F16 as the other paths do for an F16 cache.
 * Numerics: same function as the scalar kernel; P in F16 (relative 2^-11)
 * and fp32 sums in another order. Softcap, other head dims, F32 caches and
 * decode batches stay on attention.cu's kernel.
 * Batch invariance: the regime is chosen per token, by the length of its
 * sequence's run of tokens in the op (k_fa_regime; the run as the cpu
 * backend takes it), not by the op's token count: tokens of short runs
 * (decode) are left to attention.cu's kernel. Cell tiles are aligned to
 * multiples of 64, so a token's tiles, and its sums, do not depend on the
 * other tokens of its block (tiles outside its range are exact no-ops).
 * Paged cache (src4): tiles are of virtual cells (the same tiles and sums
 * as the contiguous layout); each row is fetched through the block table,
 * a cell of a block no table maps (outside every range of the block's
 * tokens: masked) is loaded as zeros. */
#include "common.cuh"

#define FA_WARPS 4
#define FA_TOK (16 * FA_WARPS)
#define FA_CELLS 64
#define FA_MIN_TOKENS 16

struct fa_params {
	struct cu_view q, k, v, d;
	const uint8_t *rng;
	int64_t rnb0, rnb1;
	int64_t n_head, n_head_kv, n_tokens, n_cells; /* n_cells: virtual (the ranges' extent) */
	float scale;
	struct cu_pages pg;
};

__device__ static inline void mma16816(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
				       uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
		     "{%0,%1,%2,%3};"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ static inline uint32_t pack_h2(float lo, float hi)
{
	__half2 h = __floats2half2_rn(lo, hi);
	return *(uint32_t *)&h;
}

template <int D>
__global__ void __launch_bounds__(FA_WARPS * 32)
k_fattn(const uint8_t *__restrict__ q, const uint8_t *__restrict__ kc, const uint8_t *__restrict__ vc,
	uint8_t *__restrict__ dst, int *__restrict__ flag, const uint8_t *__restrict__ tiled, struct fa_params p)
{
	pdl_wait();
	pdl_trigger();
	constexpr int ST = D + 8; /* smem row stride in halves (16-byte pad: no bank conflicts) */
	__shared__ __align__(16) __half ks[FA_CELLS * ST];
	__shared__ __align__(16) __half vs[FA_CELLS * ST];
	__shared__ int sr0[FA_TOK], sr1[FA_TOK];
	__shared__ int span[2];
	const int h = blockIdx.x;
	const int64_t tb = (int64_t)blockIdx.y * FA_TOK;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
	const int64_t hk = h / (p.n_head / p.n_head_kv);

	if (threadIdx.x < FA_TOK) {
		int64_t t = tb + threadIdx.x;
		int r0 = 0, r1 = 0;
		if (t < p.n_tokens && tiled[t]) {
			r0 = *(const int32_t *)(p.rng + t * p.rnb1);
			r1 = *(const int32_t *)(p.rng + p.rnb0 + t * p.rnb1);
			if (r0 < 0 || r1 > p.n_cells || r0 > r1) {
				if (h == 0)
					atomicOr(flag, CU_FLAG_RANGE);
				r0 = r0 < 0 ? 0 : r0;
				r1 = r1 > p.n_cells ? (int)p.n_cells : r1;
				if (r1 < r0)
					r1 = r0;
			}
		}
		sr0[threadIdx.x] = r0;
		sr1[threadIdx.x] = r1;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		int lo = 0x7fffffff, hi = 0;
		for (int i = 0; i < FA_TOK; i++)
			if (sr1[i] > sr0[i]) {
				lo = min(lo, sr0[i]);
				hi = max(hi, sr1[i]);
			}
		span[0] = lo == 0x7fffffff ? 0 : lo / FA_CELLS * FA_CELLS;
		span[1] = hi;
	}

	/* q fragments (A operand, 16 rows x D): rows g and g+8 of this warp */
	const int row0 = warp * 16 + g, row1 = row0 + 8;
	uint32_t qa[D / 16][4];
	{
		const int64_t t0 = tb + row0, t1 = tb + row1;
		const uint8_t *q0 = q + h * p.q.nb[1] + t0 * p.q.nb[2], *q1 = q + h * p.q.nb[1] + t1 * p.q.nb[2];
#pragma unroll
		for (int kc = 0; kc < D / 16; kc++) {
			float v[8];
#pragma unroll
			for (int j = 0; j < 2; j++) {
				int e = kc * 16 + 8 * j + 2 * t4;
				v[4 * j + 0] = t0 < p.n_tokens ? *(const float *)(q0 + e * p.q.nb[0]) : 0.f;
				v[4 * j + 1] = t0 < p.n_tokens ? *(const float *)(q0 + (e + 1) * p.q.nb[0]) : 0.f;
				v[4 * j + 2] = t1 < p.n_tokens ? *(const float *)(q1 + e * p.q.nb[0]) : 0.f;
				v[4 * j + 3] = t1 < p.n_tokens ? *(const float *)(q1 + (e + 1) * p.q.nb[0]) : 0.f;
			}
			qa[kc][0] = pack_h2(v[0], v[1]); /* row g, cols 2t, 2t+1 */
			qa[kc][1] = pack_h2(v[2], v[3]); /* row g+8 */
			qa[kc][2] = pack_h2(v[4], v[5]); /* row g, cols 8+2t, 8+2t+1 */
			qa[kc][3] = pack_h2(v[6], v[7]); /* row g+8 */
		}
	}
	__syncthreads();
	const int lo = span[0], hi = span[1];
	const int a0r = sr0[row0], a1r = sr1[row0], b0r = sr0[row1], b1r = sr1[row1];

	float o[D / 8][4];
#pragma unroll
	for (int i = 0; i < D / 8; i++)
		o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
	float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;

	const uint8_t *kbase = kc + hk * p.k.nb[1], *vbase = vc + hk * p.v.nb[1];
	for (int c0 = lo; c0 < hi; c0 += FA_CELLS) {
		/* K and V tiles: FA_CELLS rows of D halves, 16 bytes per thread step */
		constexpr int PER_ROW = D / 8;
		for (int i = threadIdx.x; i < FA_CELLS * PER_ROW; i += FA_WARPS * 32) {
			int r = i / PER_ROW, cpart = i % PER_ROW;
			int64_t cell = c0 + r;
			uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
			const int64_t pc = cell < hi ? cu_pcell_or_none(p.pg, cell) : -1;
			if (pc >= 0) {
				kv = *(const uint4 *)(kbase + pc * p.k.nb[2] + cpart * 16);
				vv = *(const uint4 *)(vbase + pc * p.v.nb[2] + cpart * 16);
			}
			*(uint4 *)(ks + r * ST + cpart * 8) = kv;
			*(uint4 *)(vs + r * ST + cpart * 8) = vv;
		}
		__syncthreads();
		/* S = q K^T: 8 n-tiles of 8 cells */
		float s[FA_CELLS / 8][4];
#pragma unroll
		for (int nt = 0; nt < FA_CELLS / 8; nt++) {
			s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
			const __half *kr = ks + (nt * 8 + g) * ST + 2 * t4;
#pragma unroll
			for (int kc2 = 0; kc2 < D / 16; kc2++) {
				uint32_t b0 = *(const uint32_t *)(kr + kc2 * 16);
				uint32_t b1 = *(const uint32_t *)(kr + kc2 * 16 + 8);
				mma16816(s[nt], qa[kc2][0], qa[kc2][1], qa[kc2][2], qa[kc2][3], b0, b1);
			}
		}
		/* mask, scale, online softmax (rows g: elements 0,1; g+8: 2,3) */
		float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
		for (int nt = 0; nt < FA_CELLS / 8; nt++)
#pragma unroll
			for (int e = 0; e < 2; e++) {
				int cell = c0 + nt * 8 + 2 * t4 + e;
				float v0 = (cell >= a0r && cell < a1r) ? s[nt][e] * p.scale : -INFINITY;
				float v1 = (cell >= b0r && cell < b1r) ? s[nt][2 + e] * p.scale : -INFINITY;
				s[nt][e] = v0;
				s[nt][2 + e] = v1;
				mx0 = fmaxf(mx0, v0);
				mx1 = fmaxf(mx1, v1);
			}
#pragma unroll
		for (int off = 1; off < 4; off <<= 1) {
			mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
			mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
		}
		float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
		float cr0 = mn0 == -INFINITY ? 1.f : expf(m0 - mn0);
		float cr1 = mn1 == -INFINITY ? 1.f : expf(m1 - mn1);
		float ps0 = 0.f, ps1 = 0.f;
		uint32_t pa[FA_CELLS / 16][4];
#pragma unroll
		for (int nt = 0; nt < FA_CELLS / 8; nt++) {
			float p00 = mn0 == -INFINITY ? 0.f : expf(s[nt][0] - mn0);
			float p01 = mn0 == -INFINITY ? 0.f : expf(s[nt][1] - mn0);
			float p10 = mn1 == -INFINITY ? 0.f : expf(s[nt][2] - mn1);
			float p11 = mn1 == -INFINITY ? 0.f : expf(s[nt][3] - mn1);
			ps0 += p00 + p01;
			ps1 += p10 + p11;
			/* C layout of tiles 2k, 2k+1 == A layout of the 16-cell chunk k */
			pa[nt >> 1][(nt & 1) * 2 + 0] = pack_h2(p00, p01);
			pa[nt >> 1][(nt & 1) * 2 + 1] = pack_h2(p10, p11);
		}
#pragma unroll
		for (int off = 1; off < 4; off <<= 1) {
			ps0 += __shfl_xor_sync(0xffffffffu, ps0, off);
			ps1 += __shfl_xor_sync(0xffffffffu, ps1, off);
		}
		l0 = l0 * cr0 + ps0;
		l1 = l1 * cr1 + ps1;
		m0 = mn0;
		m1 = mn1;
#pragma unroll
		for (int nd = 0; nd < D / 8; nd++) {
			o[nd][0] *= cr0;
			o[nd][1] *= cr0;
			o[nd][2] *= cr1;
			o[nd][3] *= cr1;
		}
		/* O += P V: B = V chunk (16 cells x 8 dims), cells 2t, 2t+1 (+8) of column g */
#pragma unroll
		for (int kc2 = 0; kc2 < FA_CELLS / 16; kc2++) {
			const __half *vr = vs + (kc2 * 16 + 2 * t4) * ST + g;
#pragma unroll
			for (int nd = 0; nd < D / 8; nd++) {
				const __half *vp = vr + nd * 8;
				__half2 b0h = __halves2half2(vp[0], vp[ST]);
				__half2 b1h = __halves2half2(vp[8 * ST], vp[9 * ST]);
				uint32_t b0 = *(uint32_t *)&b0h, b1 = *(uint32_t *)&b1h;
				/* A regs: (row g, cells 2t..), (row g+8, ...), (row g, cells 8+2t..), (row g+8, ...) */
				mma16816(o[nd], pa[kc2][0], pa[kc2][1], pa[kc2][2], pa[kc2][3], b0, b1);
			}
		}
		__syncthreads();
	}
	/* out: rows g (tokens tb+row0) and g+8, dims nd*8 + 2t, +1 */
	const int64_t t0 = tb + row0, t1 = tb + row1;
	const float il0 = l0 > 0.f ? 1.f / l0 : 0.f, il1 = l1 > 0.f ? 1.f / l1 : 0.f;
#pragma unroll
	for (int nd = 0; nd < D / 8; nd++) {
		int e = nd * 8 + 2 * t4;
		if (t0 < p.n_tokens && tiled[t0]) {
			uint8_t *dp = dst + h * p.d.nb[1] + t0 * p.d.nb[2];
			*(float *)(dp + e * p.d.nb[0]) = o[nd][0] * il0;
			*(float *)(dp + (e + 1) * p.d.nb[0]) = o[nd][1] * il0;
		}
		if (t1 < p.n_tokens && tiled[t1]) {
			uint8_t *dp = dst + h * p.d.nb[1] + t1 * p.d.nb[2];
			*(float *)(dp + e * p.d.nb[0]) = o[nd][2] * il1;
			*(float *)(dp + (e + 1) * p.d.nb[0]) = o[nd][3] * il1;
		}
	}
}

static bool fa_off(void)
{
	static int off = -1;
	return cu_env_is("ALICE_CUDA_FATTN", '0', &off);
}

static bool al16(const struct alice_tensor *t)
{
	return t->nb[0] == 2 && t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 && ((uintptr_t)tdata(t) & 15) == 0;
}

bool cu_fattn_ok(const struct alice_op_args *a)
{
	const struct alice_tensor *q = a->src[0], *k = a->src[1], *v = a->src[2];
	int64_t D = q->ne[0];
	/* ip[1]: no sequence has FA_MIN_TOKENS tokens here (a decode step) */
	const int32_t seq_max = a->node->ip[1];
	return !fa_off() && q->ne[2] >= FA_MIN_TOKENS && !(seq_max > 0 && seq_max < FA_MIN_TOKENS) && k->type == ALICE_TYPE_F16 && v->type == ALICE_TYPE_F16 &&
	       (D == 64 || D == 128) && k->ne[0] == D && v->ne[0] == D && a->node->fp[1] == 0.f && al16(k) && al16(v) &&
	       (q->ne[2] + FA_TOK - 1) / FA_TOK <= 65535;
}

/* Per token: 1 when its sequence's run of consecutive tokens in the op
 * (each token's range ends one cell after the previous one's and starts at
 * the same cell or one later) has at least FA_MIN_TOKENS tokens. */
__global__ void k_fa_regime(const uint8_t *__restrict__ rng, int64_t rnb0, int64_t rnb1, int64_t n,
			    uint8_t *__restrict__ out)
{
	pdl_wait();
	pdl_trigger();
	int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= n)
		return;
	auto r0 = [&](int64_t i) { return *(const int32_t *)(rng + i * rnb1); };
	auto r1 = [&](int64_t i) { return *(const int32_t *)(rng + rnb0 + i * rnb1); };
	auto cont = [&](int64_t i) { return r1(i) == r1(i - 1) + 1 && (r0(i) == r0(i - 1) || r0(i) == r0(i - 1) + 1); };
	int len = 1;
	for (int64_t i = t; i > 0 && len < FA_MIN_TOKENS && cont(i); i--)
		len++;
	for (int64_t i = t + 1; i < n && len < FA_MIN_TOKENS && cont(i); i++)
		len++;
	out[t] = len >= FA_MIN_TOKENS;
}

/* shapes were checked by cu_op_attention; tiled: ctx->fa_reg, each
 * token's regime (filled here by a graph's first ATTENTION) */
enum alice_status cu_fattn(const struct alice_op_args *a, uint8_t *tiled)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *q = a->src[0], *k = a->src[1], *v = a->src[2], *r = a->src[3], *d = a->dst;
	struct fa_params p;
	p.q = cu_view_of(q);
	p.k = cu_view_of(k);
	p.v = cu_view_of(v);
	p.d = cu_view_of(d);
	p.rng = tdata(r);
	p.rnb0 = r->nb[0];
	p.rnb1 = r->nb[1];
	p.n_head = q->ne[1];
	p.n_head_kv = k->ne[1];
	p.n_tokens = q->ne[2];
	enum alice_status st = cu_attention_pages(a, &p.pg, &p.n_cells);
	if (st != ALICE_OK)
		return st;
	p.scale = a->node->fp[0];
	/* the layers of a step share their ranges: one regime for all */
	if (!tiled || ctx->fa_reg_n < (size_t)p.n_tokens)
		return cu_fail(ctx, ALICE_ERR_BACKEND, "ATTENTION: regime bytes not sized for %lld tokens", (long long)p.n_tokens);
	if (ctx->fa_key.rng != p.rng || ctx->fa_key.n != p.n_tokens || ctx->fa_key.nb0 != p.rnb0 ||
	    ctx->fa_key.nb1 != p.rnb1 || ctx->fa_key.compute != ctx->n_compute) {
		cu_launch(k_fa_regime, cu_blocks(p.n_tokens, 256), 256, ctx->stream, p.rng, p.rnb0, p.rnb1, p.n_tokens, tiled);
		CUDA_LAUNCH_CHECK(ctx, "attention regime");
		ctx->fa_key.rng = p.rng;
		ctx->fa_key.n = p.n_tokens;
		ctx->fa_key.nb0 = p.rnb0;
		ctx->fa_key.nb1 = p.rnb1;
		ctx->fa_key.compute = ctx->n_compute;
	}
	dim3 grid((unsigned)p.n_head, (unsigned)((p.n_tokens + FA_TOK - 1) / FA_TOK));
	if (q->ne[0] == 64)
		cu_launch(k_fattn<64>, grid, FA_WARPS * 32, ctx->stream, (const uint8_t *)tdata(q), (const uint8_t *)tdata(k),
			  (const uint8_t *)tdata(v), tdata(d), ctx->dflag, (const uint8_t *)tiled, p);
	else
		cu_launch(k_fattn<128>, grid, FA_WARPS * 32, ctx->stream, (const uint8_t *)tdata(q), (const uint8_t *)tdata(k),
			  (const uint8_t *)tdata(v), tdata(d), ctx->dflag, (const uint8_t *)tiled, p);
	CUDA_LAUNCH_CHECK(ctx, "flash attention");
	return ALICE_OK;
}
