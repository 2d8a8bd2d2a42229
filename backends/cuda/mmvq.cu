/* mmvq.cu — decode mat-vec (M <= 8 columns) for the types that dominate
 * real models: Q4_K, Q6_K (Q4_K_M files), Q8_0 and F16.
 *
 * Quantized weights: the activations of a launch are first quantized once
 * (k_quant_x) to int8 with one F32 scale per 32 values, rounded exactly as
 * llama.cpp's CPU path rounds them for the weight type (Q8_K blocks of 256
 * for the K-quants: the value of largest magnitude maps to -127, d = 1/iscale;
 * Q8_0 blocks of 32 for Q8_0: d = fp16(amax/127)); the same scale is stored
 * for each 32 of a Q8_K block. The mat-vec then takes integer dot products
 * (__dp4a) of weight and activation quants per sub-block and scales them in
 * F32 — the same function as rounding the activations and multiplying in
 * F32, up to summation order.
 *
 * K-quants: one fixed arithmetic per (row, column), whatever kernel runs it
 * (the one-row mat-vec, the rows-per-warp one, the tensor-core one of
 * mmvq_tc.cu): each super-block's scaled integer sums are exact, then one
 * float term per super-block (kq_acc, kquant.cuh), accumulated by group
 * g = sb % (4 S) in order, the groups combined as (g0 + g2) + (g1 + g3)
 * within a part and parts in order. So a column's result never depends on
 * the launch that computed it (batch invariance).
 *
 * F16 weights: activations rounded to F16 in registers, products in F32.
 *
 * One to four warps per weight row (mmvq_split; the same row of gate and up
 * for gate/up + GLU), 4 warps per block; Q4_K / Q6_K: 8 lanes per 256-weight super-block, 16-byte weight
 * loads for Q4_K, F16 and packed Q8_0 (T_Q8_0P, pack.cu; Q6_K / Q8_0 blocks
 * are only 2-byte aligned). */
#include "common.cuh"
#include "quantx.cuh"
#include "kquant.cuh"
#include "rope.cuh"

#define MMVQ_WARPS 4
/* F16 weights with activations staged as F16 in scratch (fused launches) */
#define T_F16H 1000

/* ---- activation quantization ---- */

/* x: F32 [K, M] view (byte strides nb0, nb1; vec: dense and 16-byte
 * aligned) -> q int8 [M][K], d F32 [M][K/32]. One warp per 256 values of a
 * column (quantx.cuh layout); QK: 256 (Q8_K) or 32 (Q8_0). */
template <int QK>
__global__ void k_quant_x(const uint8_t *__restrict__ x, int64_t nb0, int64_t nb1, int64_t K, int64_t M, bool vec,
			  int8_t *__restrict__ q, float *__restrict__ d, float *__restrict__ s)
{
	pdl_wait();
	pdl_trigger();
	const int lane = threadIdx.x & 31;
	const int64_t blk = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
	const int64_t nb = (K + 255) / 256;
	if (blk >= nb * M)
		return;
	const int64_t m = blk / nb, k = (blk % nb) * 256 + lane * 8;
	float v[8];
	load8(x + m * nb1, nb0, k, K, vec, v);
	quant_regs<QK>(v, lane, k, q + m * K, d + m * (K / 32), k < K, s ? s + m * (K / 32) : nullptr);
}

/* x: F32 [K, M] view -> dense F16 [M][K] (round to nearest even) */
__global__ void k_half_x(const uint8_t *__restrict__ x, int64_t nb0, int64_t nb1, int64_t K, int64_t M,
			 __half *__restrict__ o)
{
	pdl_wait();
	pdl_trigger();
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= K * M)
		return;
	int64_t k = i % K, m = i / K;
	o[i] = __float2half_rn(*(const float *)(x + k * nb0 + m * nb1));
}

/* ---- per-type dot products of one warp's row ---- */

/* a 16-byte weight load; na: not allocated in L1 (weights are read once,
 * the activations beside them are re-read by every warp) */
__device__ static inline uint4 ldw16(const uint8_t *p, bool na)
{
	if (na) {
		uint4 r;
		asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
		    : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
		    : "l"(p));
		return r;
	}
	return *(const uint4 *)p;
}

/* The 8 lanes of a super-block group (lanes 8 g .. 8 g + 7) add an integer
 * (exact, so in any order). */
__device__ static inline int grp8_isum(int v, int lane)
{
	const unsigned mask = 0xffu << (lane & 24);
	v += __shfl_xor_sync(mask, v, 1);
	v += __shfl_xor_sync(mask, v, 2);
	v += __shfl_xor_sync(mask, v, 4);
	return v;
}

/* A part's four super-block groups (lanes 0, 8, 16, 24 hold them; every
 * lane of a group holds the same value): (g0 + g2) + (g1 + g3). */
__device__ static inline float grp_sum(float v)
{
	v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 16));
	return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 8));
}

/* Q4_K: lane l of the warp takes super-blocks sb = l/8 (+4 each step) and
 * bytes 16*(l%8) .. +16 of their 128 quant bytes: 16 low nibbles of
 * sub-block 2c and 16 high nibbles of sub-block 2c+1 (c = (l%8)/2). */
template <int NC>
__device__ static inline void dot_q4k(const uint8_t *__restrict__ row, int64_t nsb, const int8_t *__restrict__ xq,
				      const float *__restrict__ xd, int64_t K, int lane, int part, int S, bool na,
				      float *acc)
{
	const int i = lane & 7, c = i >> 1, half = i & 1;
	const int j0 = 2 * c;
	const bool hi = j0 >= 4;
	const int sh8 = 8 * (j0 & 3);
#pragma unroll 4
	for (int64_t sb = (lane >> 3) + 4 * part; sb < nsb; sb += 4 * S) {
		const uint8_t *b = row + sb * 144;
		uint4 h = ldw16(b, na);
		uint4 qv = ldw16(b + 16 + i * 16, na);
		float d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xffff)));
		float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
		/* 6-bit scales / mins of sub-blocks j0, j0+1 without a divergent
		 * branch: lanes with j0 < 4 and j0 >= 4 take different bit fields */
		const uint32_t A = h.y >> sh8, B = h.z >> sh8, C = h.w >> sh8;
		const int sc0 = (int)(hi ? ((C & 0xf) | (((A >> 6) & 3) << 4)) : (A & 63));
		const int sc1 = (int)(hi ? (((C >> 8) & 0xf) | (((A >> 14) & 3) << 4)) : ((A >> 8) & 63));
		const int m0 = (int)(hi ? (((C >> 4) & 0xf) | (((B >> 6) & 3) << 4)) : (B & 63));
		const int m1 = (int)(hi ? (((C >> 12) & 0xf) | (((B >> 14) & 3) << 4)) : ((B >> 8) & 63));
		const uint32_t qw[4] = { qv.x, qv.y, qv.z, qv.w };
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			const int8_t *xb = xq + cc * K + sb * 256 + c * 64 + half * 16;
			int4 xl = *(const int4 *)xb, xh = *(const int4 *)(xb + 32);
			const int xlw[4] = { xl.x, xl.y, xl.z, xl.w }, xhw[4] = { xh.x, xh.y, xh.z, xh.w };
			int dl = 0, dh = 0, sl = 0, shh = 0;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				dl = __dp4a((int)(qw[k] & 0x0f0f0f0fu), xlw[k], dl);
				dh = __dp4a((int)((qw[k] >> 4) & 0x0f0f0f0fu), xhw[k], dh);
				sl = __dp4a(0x01010101, xlw[k], sl);
				shh = __dp4a(0x01010101, xhw[k], shh);
			}
			const int si = grp8_isum(sc0 * dl + sc1 * dh, lane), sm = grp8_isum(m0 * sl + m1 * shh, lane);
			acc[cc] = kq_acc(acc[cc], d, dmin, xd[cc * (K / 32) + sb * 8], si, sm);
		}
	}
}

/* Q6_K: lane l takes super-blocks l/8 (+4 each step); within one, half
 * n = (l%8)/4 and positions p0 .. p0+8 (p0 = 8*(l%4)) of the four 32-runs
 * that half's ql/qh bytes encode. */
/* one lane's share of a Q6_K super-block: quant words a, c, hh (2 each),
 * scales s[4] and d; packed (P): 8-byte loads */
template <bool P>
__device__ static inline void q6_lane(const uint8_t *__restrict__ row, int64_t sb, int n, int p0, uint32_t *a,
				      uint32_t *c, uint32_t *hh, int *sc, float *d)
{
	const q6blk b = q6_at<P>(row, sb);
	if constexpr (P) {
		const uint2 va = *(const uint2 *)(b.q + n * 64 + p0), vc = *(const uint2 *)(b.q + n * 64 + 32 + p0);
		const uint2 vh = *(const uint2 *)(b.q + 128 + n * 32 + p0), vs = *(const uint2 *)(b.sc + n * 8);
		a[0] = va.x; a[1] = va.y;
		c[0] = vc.x; c[1] = vc.y;
		hh[0] = vh.x; hh[1] = vh.y;
		/* bytes p0/16 + 0, 2, 4, 6 of the 8 */
		const int sh = 8 * (p0 / 16);
		sc[0] = (int8_t)((vs.x >> sh) & 0xff);
		sc[1] = (int8_t)((vs.x >> (16 + sh)) & 0xff);
		sc[2] = (int8_t)((vs.y >> sh) & 0xff);
		sc[3] = (int8_t)((vs.y >> (16 + sh)) & 0xff);
	} else {
#pragma unroll
		for (int k = 0; k < 2; k++) {
			a[k] = ld_b2(b.q + n * 64 + p0 + 4 * k);
			c[k] = ld_b2(b.q + n * 64 + 32 + p0 + 4 * k);
			hh[k] = ld_b2(b.q + 128 + n * 32 + p0 + 4 * k);
		}
		const int8_t *s = (const int8_t *)b.sc + n * 8 + p0 / 16;
		sc[0] = s[0];
		sc[1] = s[2];
		sc[2] = s[4];
		sc[3] = s[6];
	}
	*d = __half2float(*(const __half *)b.d);
}

template <int NC, bool P>
__device__ static inline void dot_q6k(const uint8_t *__restrict__ row, int64_t nsb, const int8_t *__restrict__ xq,
				      const float *__restrict__ xd, int64_t K, int lane, int part, int S, float *acc)
{
	const int i = lane & 7, n = i >> 2, p0 = (i & 3) * 8;
#pragma unroll 4
	for (int64_t sb = (lane >> 3) + 4 * part; sb < nsb; sb += 4 * S) {
		uint32_t a[2], c[2], hh[2];
		int scl[4];
		float d;
		q6_lane<P>(row, sb, n, p0, a, c, hh, scl, &d);
		const int s0 = scl[0], s1 = scl[1], s2 = scl[2], s3 = scl[3];
		int q[4][2];
#pragma unroll
		for (int k = 0; k < 2; k++) {
			q[0][k] = __vsubss4((int)((a[k] & 0x0f0f0f0fu) | ((hh[k] & 0x03030303u) << 4)), 0x20202020);
			q[1][k] = __vsubss4((int)((c[k] & 0x0f0f0f0fu) | (((hh[k] >> 2) & 0x03030303u) << 4)), 0x20202020);
			q[2][k] = __vsubss4((int)(((a[k] >> 4) & 0x0f0f0f0fu) | (((hh[k] >> 4) & 0x03030303u) << 4)),
					    0x20202020);
			q[3][k] = __vsubss4((int)(((c[k] >> 4) & 0x0f0f0f0fu) | (((hh[k] >> 6) & 0x03030303u) << 4)),
					    0x20202020);
		}
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			const int8_t *xb = xq + cc * K + sb * 256 + n * 128 + p0;
			int is[4];
#pragma unroll
			for (int r = 0; r < 4; r++) {
				int2 xv = *(const int2 *)(xb + 32 * r);
				is[r] = __dp4a(q[r][1], xv.y, __dp4a(q[r][0], xv.x, 0));
			}
			const int si = grp8_isum(s0 * is[0] + s1 * is[1] + s2 * is[2] + s3 * is[3], lane);
			acc[cc] = kq_acc(acc[cc], d, 0.f, xd[cc * (K / 32) + sb * 8], si, 0);
		}
	}
}

/* Q8_0: 4 lanes per 34-byte block, 8 quants each; a warp covers 8 blocks. */
template <int NC>
__device__ static inline void dot_q80(const uint8_t *__restrict__ row, int64_t nblk, const int8_t *__restrict__ xq,
				      const float *__restrict__ xd, int64_t K, int lane, int part, int S, float *acc)
{
	const int q4 = lane & 3;
#pragma unroll 4
	for (int64_t bi = (lane >> 2) + 8 * part; bi < nblk; bi += 8 * S) {
		const uint8_t *b = row + bi * 34;
		float d = __half2float(*(const __half *)b);
		uint32_t w0 = ld_b2(b + 2 + q4 * 8), w1 = ld_b2(b + 6 + q4 * 8);
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			int2 xv = *(const int2 *)(xq + cc * K + bi * 32 + q4 * 8);
			int s = __dp4a((int)w1, xv.y, __dp4a((int)w0, xv.x, 0));
			acc[cc] += d * xd[cc * (K / 32) + bi] * (float)s;
		}
	}
}

/* Packed Q8_0 (T_Q8_0P, pack.cu): a half-warp per 272-byte run of 8
 * blocks, lane pair 2j, 2j+1 on block j, 16 quants (one 16-byte load) each;
 * the pair's integer sums give the block's exact sum, and one float term
 * per block, d_w d_x sum (the CPU's per-block arithmetic), is taken by the
 * even lane. A warp covers 2 runs a round. */
template <int NC>
__device__ static inline void dot_q80p(const uint8_t *__restrict__ row, int64_t nrun, const int8_t *__restrict__ xq,
				       const float *__restrict__ xd, int64_t K, int lane, int part, int S, bool na,
				       float *acc)
{
	const int j = (lane & 15) >> 1, h = lane & 1;
	const unsigned mask = 0xffffu << (lane & 16);
#pragma unroll 4
	for (int64_t g = (lane >> 4) + 2 * part; g < nrun; g += 2 * S) {
		const uint8_t *r = row + g * PL_Q80_RUN;
		const uint4 qv = ldw16(r + pl_q80_q(j) + h * 16, na);
		const float d = __half2float(*(const __half *)(r + pl_q80_d(j)));
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			const int4 xv = *(const int4 *)(xq + cc * K + g * 256 + j * 32 + h * 16);
			int si = __dp4a((int)qv.x, xv.x, 0);
			si = __dp4a((int)qv.y, xv.y, si);
			si = __dp4a((int)qv.z, xv.z, si);
			si = __dp4a((int)qv.w, xv.w, si);
			si += __shfl_xor_sync(mask, si, 1);
			if (!h)
				acc[cc] = __fmaf_rn(__fmul_rn(d, xd[cc * (K / 32) + g * 8 + j]), (float)si, acc[cc]);
		}
	}
}

/* F16: 8 weights (16 bytes) per lane per step; x F32 rounded to F16. */
template <int NC>
__device__ static inline void dot_f16(const uint8_t *__restrict__ row, int64_t K, const float *__restrict__ x,
				      int64_t xcs, int lane, int part, int S, bool na, float *acc)
{
	const int64_t n8 = K / 8;
#pragma unroll 4
	for (int64_t it = lane + 32 * part; it < n8; it += 32 * S) {
		uint4 u = ldw16(row + it * 16, na);
		const __half2 *h = (const __half2 *)&u;
		float2 w[4];
#pragma unroll
		for (int k = 0; k < 4; k++)
			w[k] = __half22float2(h[k]);
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			const float4 *xp = (const float4 *)(x + cc * xcs + it * 8);
			float4 x0 = xp[0], x1 = xp[1];
			float2 r0 = __half22float2(__floats2half2_rn(x0.x, x0.y));
			float2 r1 = __half22float2(__floats2half2_rn(x0.z, x0.w));
			float2 r2 = __half22float2(__floats2half2_rn(x1.x, x1.y));
			float2 r3 = __half22float2(__floats2half2_rn(x1.z, x1.w));
			float s = acc[cc];
			s = fmaf(w[0].x, r0.x, s);
			s = fmaf(w[0].y, r0.y, s);
			s = fmaf(w[1].x, r1.x, s);
			s = fmaf(w[1].y, r1.y, s);
			s = fmaf(w[2].x, r2.x, s);
			s = fmaf(w[2].y, r2.y, s);
			s = fmaf(w[3].x, r3.x, s);
			s = fmaf(w[3].y, r3.y, s);
			acc[cc] = s;
		}
	}
}

/* F16 weights, F16 activations (staged): products in F32 */
template <int NC>
__device__ static inline void dot_f16h(const uint8_t *__restrict__ row, int64_t K, const __half *__restrict__ x,
				       int64_t xcs, int lane, int part, int S, bool na, float *acc)
{
	const int64_t n8 = K / 8;
#pragma unroll 4
	for (int64_t it = lane + 32 * part; it < n8; it += 32 * S) {
		uint4 u = ldw16(row + it * 16, na);
		const __half2 *h = (const __half2 *)&u;
		float2 w[4];
#pragma unroll
		for (int k = 0; k < 4; k++)
			w[k] = __half22float2(h[k]);
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			uint4 xu = *(const uint4 *)(x + cc * xcs + it * 8);
			const __half2 *xh = (const __half2 *)&xu;
			float s = acc[cc];
#pragma unroll
			for (int k = 0; k < 4; k++) {
				float2 r = __half22float2(xh[k]);
				s = fmaf(w[k].x, r.x, s);
				s = fmaf(w[k].y, r.y, s);
			}
			acc[cc] = s;
		}
	}
}

/* a warp's share of a row: K-quants by super-block group (grp_sum), the
 * other types over all lanes */
template <int T>
__device__ static inline float row_sum(float v)
{
	if constexpr (T == ALICE_TYPE_Q4_K || T == ALICE_TYPE_Q6_K || T == T_Q6_KP)
		return grp_sum(v);
	else
		return warp_sum(v);
}

/* part p of S (S warps share a row): the warp takes every S-th round of
 * the row's elements, starting at round p */
template <int T, int NC>
__device__ static inline void row_dot(const uint8_t *__restrict__ row, const void *__restrict__ xv,
				      const float *__restrict__ xd, int64_t xcs, int64_t K, int lane, int part, int S,
				      bool na, float *acc)
{
	if constexpr (T == ALICE_TYPE_Q4_K)
		dot_q4k<NC>(row, K / 256, (const int8_t *)xv, xd, K, lane, part, S, na, acc);
	else if constexpr (T == ALICE_TYPE_Q6_K || T == T_Q6_KP)
		dot_q6k<NC, T == T_Q6_KP>(row, K / 256, (const int8_t *)xv, xd, K, lane, part, S, acc);
	else if constexpr (T == ALICE_TYPE_Q8_0)
		dot_q80<NC>(row, K / 32, (const int8_t *)xv, xd, K, lane, part, S, acc);
	else if constexpr (T == T_Q8_0P)
		dot_q80p<NC>(row, K / 256, (const int8_t *)xv, xd, K, lane, part, S, na, acc);
	else if constexpr (T == T_F16H)
		dot_f16h<NC>(row, K, (const __half *)xv, xcs, lane, part, S, na, acc);
	else
		dot_f16<NC>(row, K, (const float *)xv, xcs, lane, part, S, na, acc);
}

/* Weights do not depend on the kernel before: a warp starts fetching its
 * part of a row into L2 while that one finishes. */
template <int T>
__device__ static inline void row_prefetch(const uint8_t *rp, int64_t K, int lane, int part, int S)
{
	const int64_t bytes = T == ALICE_TYPE_Q4_K ? K / 256 * 144
			      : T == ALICE_TYPE_Q6_K || T == T_Q6_KP ? K / 256 * 210
			      : T == ALICE_TYPE_Q8_0 || T == T_Q8_0P ? K / 32 * 34 : K * 2;
	for (int64_t off = (int64_t)(part * 32 + lane) * 128; off < bytes; off += (int64_t)128 * 32 * S)
		asm volatile("prefetch.global.L2 [%0];" ::"l"(rp + off));
}

/* S warps per row (set.split[m]: 1, 2 or 4; GLU: the same row of gate
 * and up), their sums added in part order; x is the int8 quants + scales
 * (quantized types) or F32 (F16). ncols (a multiple of NC) columns are
 * taken NC at a time by every warp, so a row's weights come from DRAM once
 * per launch for all of a batched step's columns (the later passes find
 * them in L1/L2); each column's arithmetic is the one it gets alone. */
template <int T, int NC, bool GLU>
__global__ void __launch_bounds__(MMVQ_WARPS * 32)
k_mmvq(const struct mmv_set set, const void *__restrict__ x, const float *__restrict__ xd, int64_t xcs, int64_t dcs,
       int64_t K, int ncols, int cpg)
{
	const int m = GLU ? 0 : (blockIdx.x >= set.bstart[1]) + (blockIdx.x >= set.bstart[2]);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int S = set.split[m], part = warp % S;
	const int64_t row = (int64_t)(blockIdx.x - set.bstart[m]) * (MMVQ_WARPS / S) + warp / S;
	const bool valid = row < set.N[m];
	if (valid && set.prefetch && blockIdx.y == 0) {
		for (int g = 0; g < (GLU ? 2 : 1); g++)
			row_prefetch<T>(set.w[g ? 1 : m] + row * set.wnb1[g ? 1 : m], K, lane, part, S);
	}
	pdl_wait();
	pdl_trigger();
	if (S == 1 && !valid)
		return;
	/* quantized x: column c at q + c*K, scales at xd + c*K/32; staged
	 * halves at x + c*xcs (xcs = K); F32 at x + c*xcs */
	constexpr bool qx = T != ALICE_TYPE_F16 && T != T_F16H;
	/* blockIdx.y: this block's group of cpg columns */
	const int cb = (int)blockIdx.y * cpg, ce = cb + cpg < ncols ? cb + cpg : ncols;
	for (int c0 = cb; c0 < ce; c0 += NC) {
		const void *xc = qx ? (const void *)((const int8_t *)x + c0 * K)
				    : T == T_F16H ? (const void *)((const __half *)x + c0 * xcs)
						  : (const void *)((const float *)x + c0 * xcs);
		const float *xdc = qx ? xd + c0 * (K / 32) : NULL;
		float acc[NC], acc2[NC];
#pragma unroll
		for (int c = 0; c < NC; c++)
			acc[c] = acc2[c] = 0.f;
		(void)acc2;
		if (valid) {
			row_dot<T, NC>(set.w[m] + row * set.wnb1[m], xc, xdc, xcs, K, lane, part, S, set.ldna, acc);
			if constexpr (GLU)
				row_dot<T, NC>(set.w[1] + row * set.wnb1[1], xc, xdc, xcs, K, lane, part, S, set.ldna, acc2);
		}
#pragma unroll
		for (int c = 0; c < NC; c++) {
			acc[c] = row_sum<T>(acc[c]);
			if constexpr (GLU)
				acc2[c] = row_sum<T>(acc2[c]);
		}
		bool writer = valid;
		if (S > 1) {
			__shared__ float red[MMVQ_WARPS][2 * NC];
			if (lane == 0) {
#pragma unroll
				for (int c = 0; c < NC; c++) {
					red[warp][c] = acc[c];
					red[warp][NC + c] = acc2[c];
				}
			}
			__syncthreads();
			writer = part == 0 && valid;
			if (writer) {
#pragma unroll
				for (int c = 0; c < NC; c++) {
					for (int p = 1; p < S; p++) {
						acc[c] = __fadd_rn(acc[c], red[warp + p][c]);
						if constexpr (GLU)
							acc2[c] = __fadd_rn(acc2[c], red[warp + p][NC + c]);
					}
				}
			}
			__syncthreads(); /* red is refilled by the next columns */
		}
		if (writer && lane < NC) {
			/* lane c writes column c (indices are compile-time after unrolling) */
#pragma unroll
			for (int c = 0; c < NC; c++)
				if (c == lane) {
					const int64_t cc = c0 + c;
					set.d[m][row * set.drs[m] + cc * dcs] = acc[c];
					if constexpr (GLU) {
						set.d[1][row * set.drs[1] + cc * dcs] = acc2[c];
						set.h[row * set.hrs + cc * set.hcs] = act_apply(set.act, acc[c]) * acc2[c];
					}
				}
		}
	}
}

/* ---- batched decode: R rows per warp ----
 * The same per-lane terms, in the same order, as dot_q4k / dot_q6k for each
 * (row, column): a row's result is bit for bit what the one-row kernel
 * gives. A warp holds R rows' weights in registers and loads each column's
 * quants (and, for Q4_K, computes their sums) once for all R rows. */
template <int NC, int R>
__device__ static inline void dot_q4k_rows(const uint8_t *__restrict__ row0, int64_t wnb1, int nr, int64_t nsb,
					   const int8_t *__restrict__ xq, const float *__restrict__ xd, int64_t K,
					   int lane, int part, int S, float (*acc)[NC])
{
	const int i = lane & 7, c = i >> 1, half = i & 1;
	const int j0 = 2 * c;
	const bool hi = j0 >= 4;
	const int sh8 = 8 * (j0 & 3);
	for (int64_t sb = (lane >> 3) + 4 * part; sb < nsb; sb += 4 * S) {
		float d[R], dmin[R];
		int sc0[R], sc1[R], m0[R], m1[R];
		uint32_t qw[R][4], qh4[R][4];
#pragma unroll
		for (int r = 0; r < R; r++) {
			const uint8_t *b = row0 + (int64_t)(r < nr ? r : 0) * wnb1 + sb * 144;
			uint4 h = ldw16(b, false);
			uint4 qv = ldw16(b + 16 + i * 16, false);
			d[r] = __half2float(__ushort_as_half((unsigned short)(h.x & 0xffff)));
			dmin[r] = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
			const uint32_t A = h.y >> sh8, B = h.z >> sh8, C = h.w >> sh8;
			sc0[r] = (int)(hi ? ((C & 0xf) | (((A >> 6) & 3) << 4)) : (A & 63));
			sc1[r] = (int)(hi ? (((C >> 8) & 0xf) | (((A >> 14) & 3) << 4)) : ((A >> 8) & 63));
			m0[r] = (int)(hi ? (((C >> 4) & 0xf) | (((B >> 6) & 3) << 4)) : (B & 63));
			m1[r] = (int)(hi ? (((C >> 12) & 0xf) | (((B >> 14) & 3) << 4)) : ((B >> 8) & 63));
			const uint32_t q4[4] = { qv.x, qv.y, qv.z, qv.w };
#pragma unroll
			for (int k = 0; k < 4; k++) {
				qw[r][k] = q4[k] & 0x0f0f0f0fu;        /* low nibbles: sub-block j0 */
				qh4[r][k] = (q4[k] >> 4) & 0x0f0f0f0fu; /* high: j0 + 1 */
			}
		}
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			const int8_t *xb = xq + cc * K + sb * 256 + c * 64 + half * 16;
			int4 xl = *(const int4 *)xb, xh = *(const int4 *)(xb + 32);
			const int xlw[4] = { xl.x, xl.y, xl.z, xl.w }, xhw[4] = { xh.x, xh.y, xh.z, xh.w };
			int sl = 0, shh = 0;
#pragma unroll
			for (int k = 0; k < 4; k++) {
				sl = __dp4a(0x01010101, xlw[k], sl);
				shh = __dp4a(0x01010101, xhw[k], shh);
			}
			const float d8 = xd[cc * (K / 32) + sb * 8];
#pragma unroll
			for (int r = 0; r < R; r++) {
				int dl = 0, dh = 0;
#pragma unroll
				for (int k = 0; k < 4; k++) {
					dl = __dp4a((int)qw[r][k], xlw[k], dl);
					dh = __dp4a((int)qh4[r][k], xhw[k], dh);
				}
				const int si = grp8_isum(sc0[r] * dl + sc1[r] * dh, lane);
				const int sm = grp8_isum(m0[r] * sl + m1[r] * shh, lane);
				acc[r][cc] = kq_acc(acc[r][cc], d[r], dmin[r], d8, si, sm);
			}
		}
	}
}

template <int NC, int R, bool P>
__device__ static inline void dot_q6k_rows(const uint8_t *__restrict__ row0, int64_t wnb1, int nr, int64_t nsb,
					   const int8_t *__restrict__ xq, const float *__restrict__ xd, int64_t K,
					   int lane, int part, int S, float (*acc)[NC])
{
	const int i = lane & 7, n = i >> 2, p0 = (i & 3) * 8;
	for (int64_t sb = (lane >> 3) + 4 * part; sb < nsb; sb += 4 * S) {
		int q[R][4][2];
		int sc[R][4];
		float d[R];
#pragma unroll
		for (int r = 0; r < R; r++) {
			uint32_t a[2], c2[2], hh[2];
			q6_lane<P>(row0 + (int64_t)(r < nr ? r : 0) * wnb1, sb, n, p0, a, c2, hh, sc[r], &d[r]);
#pragma unroll
			for (int k = 0; k < 2; k++) {
				q[r][0][k] = __vsubss4((int)((a[k] & 0x0f0f0f0fu) | ((hh[k] & 0x03030303u) << 4)), 0x20202020);
				q[r][1][k] = __vsubss4((int)((c2[k] & 0x0f0f0f0fu) | (((hh[k] >> 2) & 0x03030303u) << 4)),
						       0x20202020);
				q[r][2][k] = __vsubss4((int)(((a[k] >> 4) & 0x0f0f0f0fu) | (((hh[k] >> 4) & 0x03030303u) << 4)),
						       0x20202020);
				q[r][3][k] = __vsubss4((int)(((c2[k] >> 4) & 0x0f0f0f0fu) | (((hh[k] >> 6) & 0x03030303u) << 4)),
						       0x20202020);
			}
		}
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			const int8_t *xb = xq + cc * K + sb * 256 + n * 128 + p0;
			int2 xv[4];
#pragma unroll
			for (int t = 0; t < 4; t++)
				xv[t] = *(const int2 *)(xb + 32 * t);
			const float d8 = xd[cc * (K / 32) + sb * 8];
#pragma unroll
			for (int r = 0; r < R; r++) {
				int is[4];
#pragma unroll
				for (int t = 0; t < 4; t++)
					is[t] = __dp4a(q[r][t][1], xv[t].y, __dp4a(q[r][t][0], xv[t].x, 0));
				const int si = grp8_isum(sc[r][0] * is[0] + sc[r][1] * is[1] + sc[r][2] * is[2] +
							 sc[r][3] * is[3], lane);
				acc[r][cc] = kq_acc(acc[r][cc], d[r], 0.f, d8, si, 0);
			}
		}
	}
}

/* Packed Q8_0, R rows: dot_q80p's lanes and terms for each row, a column's
 * 16 quants loaded once for all R rows. */
template <int NC, int R>
__device__ static inline void dot_q80p_rows(const uint8_t *__restrict__ row0, int64_t wnb1, int nr, int64_t nrun,
					    const int8_t *__restrict__ xq, const float *__restrict__ xd, int64_t K,
					    int lane, int part, int S, bool na, float (*acc)[NC])
{
	const int j = (lane & 15) >> 1, h = lane & 1;
	const unsigned mask = 0xffffu << (lane & 16);
	for (int64_t g = (lane >> 4) + 2 * part; g < nrun; g += 2 * S) {
		uint4 qv[R];
		float d[R];
#pragma unroll
		for (int r = 0; r < R; r++) {
			const uint8_t *rr = row0 + (int64_t)(r < nr ? r : 0) * wnb1 + g * PL_Q80_RUN;
			qv[r] = ldw16(rr + pl_q80_q(j) + h * 16, na);
			d[r] = __half2float(*(const __half *)(rr + pl_q80_d(j)));
		}
#pragma unroll
		for (int cc = 0; cc < NC; cc++) {
			const int4 xv = *(const int4 *)(xq + cc * K + g * 256 + j * 32 + h * 16);
			const float dx = xd[cc * (K / 32) + g * 8 + j];
#pragma unroll
			for (int r = 0; r < R; r++) {
				int si = __dp4a((int)qv[r].x, xv.x, 0);
				si = __dp4a((int)qv[r].y, xv.y, si);
				si = __dp4a((int)qv[r].z, xv.z, si);
				si = __dp4a((int)qv[r].w, xv.w, si);
				si += __shfl_xor_sync(mask, si, 1);
				if (!h)
					acc[r][cc] = __fmaf_rn(__fmul_rn(d[r], dx), (float)si, acc[r][cc]);
			}
		}
	}
}

template <int T, int NC, int R>
__device__ static inline void rows_dot(const uint8_t *w, int64_t wnb1, int nr, const int8_t *xc, const float *xdc,
				       int64_t K, int lane, int part, int S, bool ldna, float (*acc)[NC])
{
	if constexpr (T == ALICE_TYPE_Q4_K)
		dot_q4k_rows<NC, R>(w, wnb1, nr, K / 256, xc, xdc, K, lane, part, S, acc);
	else if constexpr (T == T_Q8_0P)
		dot_q80p_rows<NC, R>(w, wnb1, nr, K / 256, xc, xdc, K, lane, part, S, ldna, acc);
	else
		dot_q6k_rows<NC, R, T == T_Q6_KP>(w, wnb1, nr, K / 256, xc, xdc, K, lane, part, S, acc);
}

/* Like k_mmvq (same split S per matrix, same part order), R rows per warp
 * group. GLU: matrix 0 is gate, 1 up, the same R rows of each per warp
 * (each one's columns loaded once per R rows), and h = act(gate) * up.
 * T2 != T (one column, not GLU): members [set.mix, n) are of type T2 (a
 * Q4_K_M layer's Q6_K V beside its Q4_K Q and K); each row's arithmetic is
 * its own type's, as in a launch of its own. ROPE (one token's Q/K/V):
 * the writer lanes also rotate q / k and fill the cache cells (set.rope). */
template <int T, int NC, int R, bool GLU, int T2 = T, bool ROPE = false>
__global__ void __launch_bounds__(MMVQ_WARPS * 32)
k_mmvq_rows(const struct mmv_set set, const int8_t *__restrict__ x, const float *__restrict__ xd, int64_t dcs,
	    int64_t K, int ncols, int cpg)
{
	static_assert(T2 == T || (T == ALICE_TYPE_Q4_K && !GLU && (T2 == ALICE_TYPE_Q6_K || T2 == T_Q6_KP)),
		      "mixed launches: Q4_K then Q6_K (one row_sum)");
	static_assert(!ROPE || (NC == 1 && !GLU && R % 2 == 0), "rope: one column, whole pairs in a warp");
	const int m = GLU ? 0 : (blockIdx.x >= set.bstart[1]) + (blockIdx.x >= set.bstart[2]);
	const bool second = T2 != T && m >= set.mix;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int S = set.split[m], part = warp % S;
	const int64_t row0 = ((int64_t)(blockIdx.x - set.bstart[m]) * (MMVQ_WARPS / S) + warp / S) * R;
	const int nr = row0 >= set.N[m] ? 0 : (int)(set.N[m] - row0 < R ? set.N[m] - row0 : R);
	if (nr > 0 && set.prefetch && blockIdx.y == 0) {
		for (int g = 0; g < (GLU ? 2 : 1); g++)
			for (int r = 0; r < nr; r++) {
				const uint8_t *rp = set.w[g ? 1 : m] + (row0 + r) * set.wnb1[g ? 1 : m];
				if (second)
					row_prefetch<T2>(rp, K, lane, part, S);
				else
					row_prefetch<T>(rp, K, lane, part, S);
			}
	}
	pdl_wait();
	pdl_trigger();
	if (S == 1 && nr == 0)
		return;
	const uint8_t *w0 = set.w[m] + (nr ? row0 : 0) * set.wnb1[m];
	const uint8_t *w1 = GLU ? set.w[1] + (nr ? row0 : 0) * set.wnb1[1] : nullptr;
	const int cb = (int)blockIdx.y * cpg, ce = cb + cpg < ncols ? cb + cpg : ncols;
	for (int c0 = cb; c0 < ce; c0 += NC) {
		float acc[R][NC], acc2[GLU ? R : 1][NC];
#pragma unroll
		for (int r = 0; r < R; r++)
#pragma unroll
			for (int c = 0; c < NC; c++) {
				acc[r][c] = 0.f;
				if constexpr (GLU)
					acc2[r][c] = 0.f;
			}
		if (nr > 0) {
			const int8_t *xc = x + (int64_t)c0 * K;
			const float *xdc = xd + c0 * (K / 32);
			if (second)
				rows_dot<T2, NC, R>(w0, set.wnb1[m], nr, xc, xdc, K, lane, part, S, set.ldna, acc);
			else
				rows_dot<T, NC, R>(w0, set.wnb1[m], nr, xc, xdc, K, lane, part, S, set.ldna, acc);
			if constexpr (GLU)
				rows_dot<T, NC, R>(w1, set.wnb1[1], nr, xc, xdc, K, lane, part, S, set.ldna, acc2);
		}
#pragma unroll
		for (int r = 0; r < R; r++)
#pragma unroll
			for (int c = 0; c < NC; c++) {
				acc[r][c] = row_sum<T>(acc[r][c]);
				if constexpr (GLU)
					acc2[r][c] = row_sum<T>(acc2[r][c]);
			}
		bool writer = nr > 0;
		if (S > 1) {
			__shared__ float red[MMVQ_WARPS][(GLU ? 2 : 1) * R * NC];
			if (lane == 0) {
#pragma unroll
				for (int r = 0; r < R; r++)
#pragma unroll
					for (int c = 0; c < NC; c++) {
						red[warp][r * NC + c] = acc[r][c];
						if constexpr (GLU)
							red[warp][R * NC + r * NC + c] = acc2[r][c];
					}
			}
			__syncthreads();
			writer = part == 0 && nr > 0;
			if (writer) {
#pragma unroll
				for (int r = 0; r < R; r++)
#pragma unroll
					for (int c = 0; c < NC; c++)
						for (int p = 1; p < S; p++) {
							acc[r][c] = __fadd_rn(acc[r][c], red[warp + p][r * NC + c]);
							if constexpr (GLU)
								acc2[r][c] = __fadd_rn(acc2[r][c], red[warp + p][R * NC + r * NC + c]);
						}
			}
			__syncthreads();
		}
		if (writer) {
			/* lane r*NC + c writes (row0 + r, column c0 + c) */
#pragma unroll
			for (int r = 0; r < R; r++)
#pragma unroll
				for (int c = 0; c < NC; c++)
					if (lane == r * NC + c && r < nr) {
						const int64_t row = row0 + r, col = c0 + c;
						set.d[m][row * set.drs[m] + col * dcs] = acc[r][c];
						if constexpr (GLU) {
							set.d[1][row * set.drs[1] + col * dcs] = acc2[r][c];
							set.h[row * set.hrs + col * set.hcs] = act_apply(set.act, acc[r][c]) * acc2[r][c];
						}
						/* row0 and R are even: the pair's other row is this warp's */
						if constexpr (ROPE)
							rope_mv_out(set.rope, m, row, acc[r][0], acc[r ^ 1][0]);
					}
		}
	}
}

/* ---- host side ---- */

static bool mmvq_type(uint32_t type)
{
	return type == ALICE_TYPE_Q4_K || type == ALICE_TYPE_Q6_K || type == ALICE_TYPE_Q8_0 || type == ALICE_TYPE_F16 ||
	       type == T_Q8_0P || type == T_Q6_KP;
}

static int mmvq_off(void)
{
	static int off = -1;
	return cu_env_is("ALICE_CUDA_MMVQ", '0', &off);
}

bool cu_mmvq_ok(uint32_t type, int64_t K, const struct mmv_set *set, int n)
{
	if (!mmvq_type(type) || mmvq_off())
		return false;
	int64_t kq = (type == ALICE_TYPE_Q4_K || type == ALICE_TYPE_Q6_K || type == T_Q8_0P) ? 256
		     : type == T_Q6_KP ? 2048 : (type == ALICE_TYPE_Q8_0 ? 32 : 8);
	if (K % kq != 0)
		return false;
	/* 16-byte loads (Q4_K, F16, packed Q8_0 / Q6_K) need 16-byte aligned rows;
	 * Q6_K / Q8_0 read 2-byte words */
	uintptr_t al = (type == ALICE_TYPE_Q4_K || type == ALICE_TYPE_F16 || type == T_Q8_0P || type == T_Q6_KP) ? 15 : 1;
	for (int i = 0; i < n; i++)
		if (((uintptr_t)set->w[i] & al) || ((uintptr_t)set->wnb1[i] & al))
			return false;
	return true;
}

static bool mmvq_quantized(uint32_t type)
{
	return type != ALICE_TYPE_F16;
}

size_t cu_mmvq_scratch(uint32_t type, int64_t K, int64_t M)
{
	if (!mmvq_quantized(type)) /* staged halves of fused launches */
		return (size_t)(K * M) * 2;
	const int64_t Mp = cu_xq_cols(M);
	size_t q = ((size_t)(K * Mp) + 255) & ~(size_t)255;
	return q + (size_t)(K / 32 * Mp) * 4 * 2; /* d, then Q8_1's s */
}

/* Warps per row: small matrices get more than one, so that about
 * MMVQ_TARGET_WARPS warps keep loads in flight, while every warp still has a
 * whole round of the row (K-quants: 4 super-blocks; Q8_0 / F16: 256
 * values). A function of the matrix's own N and K only: a row's summation
 * order never depends on what shares the launch or on the column count. */
#define MMVQ_TARGET_WARPS 8192
static int mmvq_split(int T, int64_t N, int64_t K)
{
	static int off = -1;
	static long target = -1; /* ALICE_CUDA_MMV_TARGET: for comparisons */
	if (cu_env_is("ALICE_CUDA_MMV_SPLIT", '0', &off))
		return 1;
	if (target < 0) {
		const char *e = getenv("ALICE_CUDA_MMV_TARGET");
		target = e && atol(e) > 0 ? atol(e) : 0;
	}
	/* More warps for F16 rows of 8 KB and more (target 32768) gave 8B F16
	 * 174 -> 180 t/s at -p 0 on the H200 but 210.3 -> 208.4 in -p 512 -n 128
	 * (the table's measure): not taken */
	const int64_t tw = target > 0 ? target : MMVQ_TARGET_WARPS;
	int64_t round = (T == ALICE_TYPE_Q4_K || T == ALICE_TYPE_Q6_K || T == T_Q6_KP) ? 1024 : T == T_Q8_0P ? 512 : 256;
	int S = 1;
	while (S < MMVQ_WARPS && N * S < tw && K >= round * 2 * S)
		S *= 2;
	return S;
}

static int mmvq_prefetch(void)
{
	static int off = -1;
	return !cu_env_is("ALICE_CUDA_PREFETCH", '0', &off);
}

/* ALICE_CUDA_LDNA, for comparisons: 0 weights through L1, 1 every type's
 * 16-byte weight loads bypass L1; unset: F16 and packed Q8_0 (H100, tg128
 * -p 0: 1B Q8_0 930-932 -> 936-938, 8B 223.8 -> 226.6-227.0 t/s; 8B Q4_K_M
 * 285.6-285.8 -> 282.1-282.5 with every type) */
static int mmvq_ldna(uint32_t type)
{
	static int v = -1;
	if (v < 0) {
		const char *e = getenv("ALICE_CUDA_LDNA");
		v = e ? (e[0] == '1' ? 1 : 0) : 2;
	}
	return v == 1 || (v == 2 && (type == ALICE_TYPE_F16 || type == T_Q8_0P));
}

/* Column groups of a batched launch (grid.y): enough warps in flight to
 * hide latency (a group re-reads its rows from L2, not DRAM); each group
 * takes a multiple of nc columns. Work split only: no column's arithmetic
 * depends on it. */
#define MMVQ_TARGET_BATCH_WARPS 32768 /* H200, 1B Q4_K_M B=64: 8192 13.4 ms/step, 32768 12.1, 65536 11.9 */
static int64_t batch_warps(void)
{
	static long t = -1; /* ALICE_CUDA_MMVQ_GWARPS: for comparisons */
	if (t < 0) {
		const char *e = getenv("ALICE_CUDA_MMVQ_GWARPS");
		t = e && atol(e) > 0 ? atol(e) : MMVQ_TARGET_BATCH_WARPS;
	}
	return t;
}

static dim3 col_groups(unsigned blocks, int ncols, int nc, int *cpg)
{
	int units = ncols / nc;
	const int64_t tw = batch_warps();
	int64_t g = (tw + (int64_t)blocks * MMVQ_WARPS - 1) / ((int64_t)blocks * MMVQ_WARPS);
	if (g > units)
		g = units;
	if (g < 1)
		g = 1;
	int per = (units + (int)g - 1) / (int)g;
	*cpg = per * nc;
	return dim3(blocks, (unsigned)((units + per - 1) / per));
}

template <int T, int NC>
static void launch_mmvq_nc(cudaStream_t s, const struct mmv_set &set, unsigned blocks, const void *x,
			   const float *xd, int64_t xcs, int64_t dcs, int64_t K, bool glu, int ncols)
{
	int cpg = ncols;
	dim3 grid = ncols > NC ? col_groups(blocks, ncols, NC, &cpg) : dim3(blocks);
	if (glu)
		cu_launch(k_mmvq<T, NC, true>, grid, MMVQ_WARPS * 32, s, set, x, xd, xcs, dcs, K, ncols, cpg);
	else
		cu_launch(k_mmvq<T, NC, false>, grid, MMVQ_WARPS * 32, s, set, x, xd, xcs, dcs, K, ncols, cpg);
}

/* columns per pass of the batched launch (M >= MMVQ_WIDE) */
#define MMVQ_WIDE 8

/* Rows per warp of the batched Q4_K / Q6_K kernel: 4 by default;
 * ALICE_CUDA_MMVQ_ROWS=0 off, 2 or 4 (comparisons) */
static int mmvq_rows(void)
{
	static int r = -1;
	if (r < 0) {
		const char *e = getenv("ALICE_CUDA_MMVQ_ROWS");
		r = e && (e[0] == '0' || e[0] == '2') ? e[0] - '0' : 4;
	}
	return r;
}

template <int T, int R>
static int64_t launch_rows_r(cudaStream_t s, struct mmv_set set, int n, const int8_t *x, const float *xd, int64_t dcs,
			     int64_t K, int64_t M)
{
	unsigned b = 0;
	for (int i = 0; i < MMV_MAX_SET; i++) {
		set.bstart[i] = b;
		set.split[i] = (uint8_t)mmvq_split(T, i < n ? set.N[i] : 1, K);
		int64_t rpb = (int64_t)(MMVQ_WARPS / set.split[i]) * R;
		if (i < n)
			b += (unsigned)((set.N[i] + rpb - 1) / rpb);
	}
	set.bstart[MMV_MAX_SET] = b;
	int ncols = (int)(M / MMVQ_WIDE * MMVQ_WIDE);
	int cpg;
	dim3 grid = col_groups(b, ncols, MMVQ_WIDE, &cpg);
	cu_launch(k_mmvq_rows<T, MMVQ_WIDE, R, false>, grid, MMVQ_WARPS * 32, s, set, x, xd, dcs, K, ncols, cpg);
	return ncols;
}

/* Decode columns, R rows per warp: a column's quants are loaded once per R
 * rows (the one-row kernel loads them for every row). GLU: gate and up rows
 * in the same warp. */
template <int T, int R, int T2 = T>
static void launch_rows_dec(cudaStream_t s, struct mmv_set set, int n, const int8_t *x, const float *xd, int64_t dcs,
			    int64_t K, int64_t M, bool glu)
{
	unsigned b = 0;
	for (int i = 0; i < MMV_MAX_SET; i++) {
		set.bstart[i] = b;
		set.split[i] = (uint8_t)mmvq_split(T2 != T && set.mix && i >= set.mix ? T2 : T, i < n ? set.N[i] : 1, K);
		int64_t rpb = (int64_t)(MMVQ_WARPS / set.split[i]) * R;
		if (i < (glu ? 1 : n))
			b += (unsigned)((set.N[i] + rpb - 1) / rpb);
	}
	set.bstart[MMV_MAX_SET] = b;
	for (int i = n; i < MMV_MAX_SET; i++)
		set.bstart[i] = b;
	if (set.rope.on && !glu && n == 3 && M == 1) {
		*set.rope_taken = true;
		cu_launch(k_mmvq_rows<T, 1, R, false, T2, true>, dim3(b), MMVQ_WARPS * 32, s, set, x, xd, dcs, K, 1, 1);
	} else if constexpr (T2 != T)
		cu_launch(k_mmvq_rows<T, 1, R, false, T2>, dim3(b), MMVQ_WARPS * 32, s, set, x, xd, dcs, K, 1, 1);
	else if (glu)
		cu_launch(k_mmvq_rows<T, 1, R, true>, dim3(b), MMVQ_WARPS * 32, s, set, x, xd, dcs, K, (int)M, (int)M);
	else
		cu_launch(k_mmvq_rows<T, 1, R, false>, dim3(b), MMVQ_WARPS * 32, s, set, x, xd, dcs, K, (int)M, (int)M);
}

/* Rows per warp of the decode mat-vec: the one-row kernel reloads the
 * activation quants for every row (about 11% of 8B Q4_K_M decode, session
 * 19). H100, tg128 -p 0, one-row kernel / R = 2 / R = 4 (session 20):
 * 8B Q4_K_M 289 / 305 / 294, 1B 1,055 / 1,153 / 1,132; packed Q8_0: 8B
 * 228.6 / 226.1 / 243.1, 1B 943 / 1,005 / 1,006. Hence K-quants 2, packed
 * Q8_0 4; ALICE_CUDA_ROWS1=0 (the one-row kernel), 2 or 4 for comparisons.
 * F16 rows lost (one row / 2 / 4: 1B 805 / 796 / 711, 8B 169.8 / 158.0 /
 * 145.6; they stream past L1 and need every warp in flight): not taken. */
static int mmvq_rows1(uint32_t type)
{
	static int r = -2; /* -1: per type */
	if (r == -2) {
		const char *e = getenv("ALICE_CUDA_ROWS1");
		r = e && (e[0] == '0' || e[0] == '2' || e[0] == '4') ? e[0] - '0' : -1;
	}
	return r >= 0 ? r : type == T_Q8_0P ? 4 : 2;
}

/* Batched Q4_K / Q6_K columns, not GLU: R rows per warp group. Returns the
 * columns it took (a multiple of MMVQ_WIDE), 0 when it does not apply. */
template <int T>
static int64_t launch_mmvq_rows(cudaStream_t s, struct mmv_set set, int n, const void *x, const float *xd,
				int64_t dcs, int64_t K, int64_t M, bool glu)
{
	if constexpr (T != ALICE_TYPE_Q4_K && T != ALICE_TYPE_Q6_K && T != T_Q6_KP) {
		return 0;
	} else {
		int r = mmvq_rows();
		if (glu || M < MMVQ_WIDE || r == 0)
			return 0;
		if (r == 2)
			return launch_rows_r<T, 2>(s, set, n, (const int8_t *)x, xd, dcs, K, M);
		return launch_rows_r<T, 4>(s, set, n, (const int8_t *)x, xd, dcs, K, M);
	}
}

/* Batched Q4_K / Q6_K columns in groups of 16 on tensor cores (the same
 * per-column arithmetic); returns the columns taken. */
template <int T>
static int64_t launch_mmvq_tc(cudaStream_t s, struct mmv_set set, int n, const void *x, const float *xd,
			      int64_t dcs, int64_t K, int64_t M, bool glu)
{
	if constexpr (T != ALICE_TYPE_Q4_K && T != ALICE_TYPE_Q6_K && T != T_Q6_KP) {
		return 0;
	} else {
		for (int i = 0; i < n; i++)
			set.split[i] = (uint8_t)mmvq_split(T, set.N[i], K);
		return cu_mmvq_tc(s, set, n, T, (const int8_t *)x, xd, dcs, K, M, glu);
	}
}

template <int T>
static void launch_mmvq_t(cudaStream_t s, struct mmv_set set, int n, const void *x, const float *xd, int64_t xcs,
			  int64_t dcs, int64_t K, int64_t M, bool glu)
{
	int64_t tc = launch_mmvq_tc<T>(s, set, n, x, xd, dcs, K, M, glu);
	if (tc) {
		for (int i = 0; i < n; i++)
			set.d[i] += tc * dcs;
		if (set.h)
			set.h += tc * set.hcs;
		x = (const void *)((const int8_t *)x + tc * K);
		xd += tc * (K / 32);
		M -= tc;
		if (M == 0)
			return;
	}
	int64_t done = launch_mmvq_rows<T>(s, set, n, x, xd, dcs, K, M, glu);
	if (done) {
		for (int i = 0; i < n; i++)
			set.d[i] += done * dcs;
		x = (const void *)((const int8_t *)x + done * K);
		xd += done * (K / 32);
		M -= done;
		if (M == 0)
			return;
	}
	if constexpr (T == ALICE_TYPE_Q4_K || T == ALICE_TYPE_Q6_K || T == T_Q6_KP || T == T_Q8_0P) {
		const int r1 = mmvq_rows1((uint32_t)T);
		if (r1 && M == 1) { /* more columns: the one-row kernel reads each row once for all */
			set.prefetch = (uint8_t)mmvq_prefetch();
			set.ldna = (uint8_t)mmvq_ldna((uint32_t)T);
			if (r1 == 2)
				launch_rows_dec<T, 2>(s, set, n, (const int8_t *)x, xd, dcs, K, M, glu);
			else
				launch_rows_dec<T, 4>(s, set, n, (const int8_t *)x, xd, dcs, K, M, glu);
			return;
		}
	}
	unsigned b = 0;
	/* quantized rows only: on the H200 it gave 1B Q4_K_M decode 1030 -> 974
	 * us/step, but F16 rows (4-28 KB) lost (8B F16 5.7 -> 6.8 ms/step; only
	 * the first 2 KB of each warp's part: 1B F16 1401 -> 1447 us) */
	const bool f16 = T == ALICE_TYPE_F16 || T == T_F16H;
	set.prefetch = (uint8_t)(mmvq_prefetch() && !f16);
	/* F16 rows streamed past L1: 1B F16 decode 1401 -> 1183 us of GPU time
	 * per step on the H200; Q4_K saw no gain (1207 -> 1215 us). Not when
	 * the row is read again for more columns. */
	set.ldna = (uint8_t)(mmvq_ldna(f16 ? (uint32_t)ALICE_TYPE_F16 : (uint32_t)T) && M < MMVQ_WIDE);
	for (int i = 0; i < MMV_MAX_SET; i++) {
		set.bstart[i] = b;
		set.split[i] = (uint8_t)mmvq_split(T, i < n ? set.N[i] : 1, K);
		int rpb = MMVQ_WARPS / set.split[i];
		if (i < (glu ? 1 : n))
			b += (unsigned)((set.N[i] + rpb - 1) / rpb);
	}
	set.bstart[MMV_MAX_SET] = b;
	for (int i = n; i < MMV_MAX_SET; i++)
		set.bstart[i] = b;
	const bool qx = T != ALICE_TYPE_F16 && T != T_F16H;
	int64_t c = 0;
	while (c < M) {
		int64_t left = M - c;
		int nc = left >= MMVQ_WIDE ? MMVQ_WIDE : left >= 4 ? 4 : (left >= 2 ? 2 : 1);
		int ncols = nc == MMVQ_WIDE ? (int)(left / MMVQ_WIDE * MMVQ_WIDE) : nc;
		struct mmv_set sc = set;
		for (int i = 0; i < n; i++)
			sc.d[i] = set.d[i] + c * dcs;
		sc.h = set.h ? set.h + c * set.hcs : NULL;
		const void *xc = qx ? (const void *)((const int8_t *)x + c * K)
				    : T == T_F16H ? (const void *)((const __half *)x + c * xcs)
						  : (const void *)((const float *)x + c * xcs);
		const float *xdc = qx ? xd + c * (K / 32) : NULL;
		if (nc == MMVQ_WIDE)
			launch_mmvq_nc<T, MMVQ_WIDE>(s, sc, b, xc, xdc, xcs, dcs, K, glu, ncols);
		else if (nc == 4)
			launch_mmvq_nc<T, 4>(s, sc, b, xc, xdc, xcs, dcs, K, glu, 4);
		else if (nc == 2)
			launch_mmvq_nc<T, 2>(s, sc, b, xc, xdc, xcs, dcs, K, glu, 2);
		else
			launch_mmvq_nc<T, 1>(s, sc, b, xc, xdc, xcs, dcs, K, glu, 1);
		c += ncols;
	}
}

enum alice_status cu_xq_quant(struct alice_backend_ctx *ctx, const uint8_t *x, int64_t xnb0, int64_t xnb1, int64_t K,
			      int64_t M, int qk, int8_t **qo, float **dout)
{
	cudaStream_t s = ctx->stream;
	int8_t *q = cu_xq_q(ctx);
	float *d = cu_xq_d(ctx, K, M);
	float *sums = qk == 33 ? d + K / 32 * cu_xq_cols(M) : nullptr;
	*qo = q;
	*dout = d;
	if (cu_xq_has(ctx, x, xnb0, xnb1, K, M, qk))
		return ALICE_OK;
	if (ctx->scratch_size < ctx->xq_off + cu_mmvq_scratch(ALICE_TYPE_Q8_0, K, M))
		return cu_fail(ctx, ALICE_ERR_BACKEND, "quant_x: scratch not sized for K %lld M %lld", (long long)K,
			       (long long)M);
	int64_t warps = (K + 255) / 256 * M;
	bool vec = xnb0 == 4 && xnb1 % 16 == 0 && ((uintptr_t)x & 15) == 0;
	if (qk != 256)
		cu_launch(k_quant_x<32>, cu_blocks(warps, 8), 256, s, x, xnb0, xnb1, K, M, vec, q, d, sums);
	else
		cu_launch(k_quant_x<256>, cu_blocks(warps, 8), 256, s, x, xnb0, xnb1, K, M, vec, q, d, (float *)nullptr);
	CUDA_LAUNCH_CHECK(ctx, "quant_x");
	cu_xq_set(ctx, x, xnb0, xnb1, K, M, qk, ctx->xq_cur);
	return ALICE_OK;
}

/* a one-column launch of the rows kernel on staged quants q / d; members
 * [set.mix, n) of type T2 */
template <int T, int T2 = T>
static void launch_one_col(cudaStream_t s, struct mmv_set set, int n, const void *q, const float *d, int64_t dcs,
			   int64_t K)
{
	set.prefetch = (uint8_t)mmvq_prefetch();
	set.ldna = (uint8_t)mmvq_ldna((uint32_t)T);
	if (mmvq_rows1((uint32_t)T) == 2)
		launch_rows_dec<T, 2, T2>(s, set, n, (const int8_t *)q, d, dcs, K, 1, false);
	else
		launch_rows_dec<T, 4, T2>(s, set, n, (const int8_t *)q, d, dcs, K, 1, false);
}

bool cu_mmvq_mixable(uint32_t t0, uint32_t t1, int64_t M)
{
	static int off = -1; /* ALICE_CUDA_MIX=0: apart (comparisons) */
	return M == 1 && !cu_env_is("ALICE_CUDA_MIX", '0', &off) && t0 == ALICE_TYPE_Q4_K &&
	       (t1 == ALICE_TYPE_Q6_K || t1 == T_Q6_KP) && !mmvq_off() && mmvq_rows1(t0) &&
	       mmvq_rows1(t0) == mmvq_rows1(t1);
}

/* the one-column launch of a mixed set (Q4_K, then Q6_K or its packed form) */
static void launch_mixed(cudaStream_t s, const struct mmv_set &set, int n, const void *q, const float *d, int64_t dcs,
			 int64_t K)
{
	if (set.mix_type == ALICE_TYPE_Q6_K)
		launch_one_col<ALICE_TYPE_Q4_K, ALICE_TYPE_Q6_K>(s, set, n, q, d, dcs, K);
	else
		launch_one_col<ALICE_TYPE_Q4_K, T_Q6_KP>(s, set, n, q, d, dcs, K);
}

enum alice_status cu_mmvq(struct alice_backend_ctx *ctx, struct mmv_set set, int n, uint32_t type, const uint8_t *x,
			  int64_t xnb0, int64_t xnb1, int64_t dcs, int64_t K, int64_t M, bool glu, bool stage)
{
	cudaStream_t s = ctx->stream;
	const void *xv = x;
	const float *xd = NULL;
	int64_t xcs = xnb1 / 4;
	if (mmvq_quantized(type)) {
		int8_t *q;
		float *d;
		enum alice_status st = cu_xq_quant(ctx, x, xnb0, xnb1, K, M,
						   type == ALICE_TYPE_Q8_0 || type == T_Q8_0P ? 32 : 256, &q, &d);
		if (st != ALICE_OK)
			return st;
		if (set.mix) {
			launch_mixed(s, set, n, q, d, dcs, K);
			CUDA_LAUNCH_CHECK(ctx, "mmvq mixed");
			return ALICE_OK;
		}
		xv = q;
		xd = d;
		xcs = K;
	} else if (stage) {
		/* fused launch whose outputs overlap x: x to F16 in scratch first */
		__half *hx = (__half *)ctx->scratch;
		cu_launch(k_half_x, cu_blocks(K * M, 256), 256, s, x, xnb0, xnb1, K, M, hx);
		CUDA_LAUNCH_CHECK(ctx, "half_x");
		launch_mmvq_t<T_F16H>(s, set, n, hx, NULL, K, dcs, K, M, glu);
		CUDA_LAUNCH_CHECK(ctx, "mmvq");
		return ALICE_OK;
	} else if (xnb0 != 4 || xnb1 % 16 != 0 || ((uintptr_t)x & 15)) {
		return cu_fail(ctx, ALICE_ERR_INVALID, "mmvq: F16 path needs dense aligned activations");
	}
	switch (type) {
	case ALICE_TYPE_Q4_K: launch_mmvq_t<ALICE_TYPE_Q4_K>(s, set, n, xv, xd, xcs, dcs, K, M, glu); break;
	case ALICE_TYPE_Q6_K: launch_mmvq_t<ALICE_TYPE_Q6_K>(s, set, n, xv, xd, xcs, dcs, K, M, glu); break;
	case ALICE_TYPE_Q8_0: launch_mmvq_t<ALICE_TYPE_Q8_0>(s, set, n, xv, xd, xcs, dcs, K, M, glu); break;
	case T_Q8_0P: launch_mmvq_t<T_Q8_0P>(s, set, n, xv, xd, xcs, dcs, K, M, glu); break;
	case T_Q6_KP: launch_mmvq_t<T_Q6_KP>(s, set, n, xv, xd, xcs, dcs, K, M, glu); break;
	case ALICE_TYPE_F16: launch_mmvq_t<ALICE_TYPE_F16>(s, set, n, xv, xd, xcs, dcs, K, M, glu); break;
	default: return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "mmvq: type %s", cu_ktype_name(type));
	}
	CUDA_LAUNCH_CHECK(ctx, "mmvq");
	if (stage) /* the outputs overwrite x: its quants are nobody's now */
		ctx->xq.x = NULL;
	return ALICE_OK;
}
